"""The `evaluate.MetricInfo` of every metric module the package ships: one builder for the description of inputs,
the features and the reference link."""

import datasets
import evaluate


def metric_info(
    description: str,
    citation: str,
    value_type: str,
    inputs: tuple[str, str],
    arguments: str,
    returns: str,
    reference_url: str,
) -> evaluate.MetricInfo:
    """The `MetricInfo` of a metric whose predictions and references are one `datasets.Value(value_type)` each.

    inputs: how the docstring names one prediction and one reference, e.g. ("predicted labels", "ground-truth labels").
    arguments: the docstring lines of the keyword arguments beyond predictions and references.
    """
    python_type = {"int32": "int", "float": "float"}[value_type]
    inputs_description = "\n".join(
        [
            "Args:",
            f"    predictions (list of {python_type}): {inputs[0]}.",
            f"    references (list of {python_type}): {inputs[1]}.",
            *(f"    {line.strip()}" for line in arguments.strip().splitlines() if line.strip()),
            "Returns:",
            f"    {returns}",
        ]
    )
    return evaluate.MetricInfo(
        description=description,
        citation=citation,
        inputs_description=inputs_description,
        features=datasets.Features(
            {"predictions": datasets.Value(value_type), "references": datasets.Value(value_type)}
        ),
        reference_urls=[reference_url],
    )
