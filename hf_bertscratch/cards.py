"""Model cards for BertScratch runs: Hub metadata plus a readable card, filled from what a run measured.

The templates live in the top-level `model_cards/` folder; `hf_bertscratch/model_cards` is a symlink to it, so the
same single copy is found in a source checkout, in an editable install and (as package data) in an installed wheel.
A card written here parses with `huggingface_hub.ModelCard` and its YAML metadata (`library_name`, `pipeline_tag`,
`license`, `datasets`, `metrics`, `tags`, `base_model`, `model-index`) round-trips through `ModelCard.load`.
"""

import json
import logging
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

from huggingface_hub import EvalResult, ModelCard, ModelCardData
from huggingface_hub.dataclasses import strict
from huggingface_hub.errors import StrictDataclassError
from huggingface_hub.utils import HFValidationError, validate_repo_id

from hf_bertscratch_base.model_config import describe_grid, describe_thresholds
from hf_bertscratch_base.task_table import MULTI_LABEL_THRESHOLD, recorded_input_columns

from .data import DATASET_CITATIONS
from .run_folder import GENERATOR_FOLDER, final_path, write_text_atomically

logger = logging.getLogger(__name__)

# Written into a card when the repo id is not known yet; `set_card_repo` swaps in the real one at upload time.
REPO_PLACEHOLDER = "your-username/your-model"
DEFAULT_REVISION = "main"
PROJECT_URL = "https://github.com/hf-bertscratch/hf-bertscratch"


@dataclass(frozen=True)
class CardKind:
    """What differs between the cards of a pretrained MLM and of the fine-tuned heads.

    Attributes:
        architecture: the suffix of the `architectures` entry a folder of this kind holds (e.g. ForTokenClassification).
        description: pretrained kinds: the objective in a few words ("masked language modeling"); fine-tuned kinds:
            what the model is ("BERT text classifier").
        objective: the training objective, for the training-procedure table.
        usage: the last lines of the card's "How to use" snippet, after `model` and `tokenizer` are loaded; a
            `$example` in them is the input the pipeline is given (`EXAMPLE_TEXT`, or `EXAMPLE_PAIR` for a model that
            reads a text pair).
        pair_usage: lines after `usage` in the card of a model that reads a text pair (`CardInfo.text_pair`): how
            sentence-transformers' `CrossEncoder` loads a head whose config names the activation it applies.
        own_results: when the run also measured another model (ELECTRA's generator), the prefix (after `eval_` or
            `test_`) of the results that measure this one; only those enter the model-index. Empty: all results.
        results_note: what the results measure, where a key alone does not say.
        generator_folder: the subfolder holding the generator trained alongside the model, if any.
        citations: BibTeX of the method, after BERT's.
    """

    template: str
    pipeline_tag: str
    task_name: str
    auto_class: str
    tags: tuple[str, ...]
    architecture: str = ""
    description: str = ""
    objective: str = ""
    usage: str = ""
    pair_usage: str = ""
    own_results: str = ""
    results_note: str = ""
    generator_folder: str | None = None
    citations: tuple[str, ...] = ()


BERT_CITATION = """@inproceedings{devlin2019bert,
  title     = {{BERT}: Pre-training of Deep Bidirectional Transformers for Language Understanding},
  author    = {Devlin, Jacob and Chang, Ming-Wei and Lee, Kenton and Toutanova, Kristina},
  booktitle = {Proceedings of the 2019 Conference of the North {A}merican Chapter of the Association for Computational Linguistics},
  year      = {2019},
  pages     = {4171--4186}
}"""
ELECTRA_CITATION = """@inproceedings{clark2020electra,
  title     = {{ELECTRA}: Pre-training Text Encoders as Discriminators Rather Than Generators},
  author    = {Clark, Kevin and Luong, Minh-Thang and Le, Quoc V. and Manning, Christopher D.},
  booktitle = {International Conference on Learning Representations},
  year      = {2020}
}"""


# The input a card's pipeline example gives a sequence head (`$example` in `CardKind.usage`): one text, or a text pair
# the way transformers' text-classification pipeline takes one (a dict of `text` and `text_pair`).
EXAMPLE_TEXT = '"the movie was wonderful, i loved the acting."'
EXAMPLE_PAIR = '{"text": "a man is playing a guitar.", "text_pair": "a man plays an instrument."}'


def _finetuned(
    pipeline_tag: str, task_name: str, head: str, description: str, objective: str, usage: str, pair_usage: str = ""
) -> CardKind:
    return CardKind(
        "classifier.md",
        pipeline_tag,
        task_name,
        f"AutoModel{head}",
        (pipeline_tag,),
        head,
        description,
        objective,
        usage,
        pair_usage,
    )


def _cross_encoder_usage(gives: str) -> str:
    """The lines of a card that load a pair model as sentence-transformers' `CrossEncoder`, whose `predict` applies
    the activation fine-tuning records in its config (`tasks.classification.cross_encoder_activation`): `gives` says
    what it then predicts."""
    return (
        "from sentence_transformers import CrossEncoder  # pip install sentence-transformers\n"
        "cross_encoder = CrossEncoder(repo_id, revision=revision, trust_remote_code=True)\n"
        'print(cross_encoder.predict([("a man is playing a guitar.", "a man plays an instrument.")]))  # '
        f"{gives}"
    )


CARD_KINDS: dict[str, CardKind] = {
    "pretrained": CardKind(
        "pretrained.md",
        "fill-mask",
        "Masked language modeling",
        "AutoModelForMaskedLM",
        ("fill-mask", "pretraining"),
        description="masked language modeling",
        objective="masked language modeling (BERT's 80/10/10 replacement of the masked tokens)",
        usage='fill_mask = pipeline("fill-mask", model=model, tokenizer=tokenizer)\n'
        'print(fill_mask(f"paris is the {tokenizer.mask_token} of france."))',
    ),
    "discriminator": CardKind(
        "pretrained.md",
        "feature-extraction",
        "Replaced token detection",
        "AutoModel",
        ("feature-extraction", "pretraining", "electra"),
        architecture="ForReplacedTokenDetection",
        description="replaced-token detection (ELECTRA, Clark et al. 2020; this is its discriminator)",
        objective="replaced-token detection: a small masked-LM generator (saved in `generator/`) fills the masked "
        "positions and this encoder learns, for every token, whether it was replaced",
        usage='encoder = pipeline("feature-extraction", model=model, tokenizer=tokenizer)\n'
        'print(len(encoder("paris is the capital of france.")[0]))  # one vector per token; fine-tune for a task',
        own_results="discriminator_",
        results_note="`eval_accuracy` and `eval_perplexity` measure the generator on the masked tokens and "
        "`eval_loss` is the pair's combined loss (generator loss + `discriminator_weight` x discriminator loss); "
        "the `discriminator` results measure this model, and only they enter the metadata.",
        generator_folder=GENERATOR_FOLDER,
        citations=(ELECTRA_CITATION,),
    ),
    "classifier": _finetuned(
        "text-classification",
        "Text classification",
        "ForSequenceClassification",
        "BERT text classifier",
        "sequence classification (cross-entropy over the labels)",
        'classifier = pipeline("text-classification", model=model, tokenizer=tokenizer)\nprint(classifier($example))',
    ),
    # A sequence head with one output trained on scores (STS-B): transformers' text-classification pipeline gives
    # its score as it is (no softmax) for a config whose problem_type is "regression".
    "regressor": _finetuned(
        "text-classification",
        "Text classification",
        "ForSequenceClassification",
        "BERT text regression model (a score for a text or a text pair)",
        "regression (mean squared error against the scores)",
        'scorer = pipeline("text-classification", model=model, tokenizer=tokenizer)\nprint(scorer($example))',
        _cross_encoder_usage("the same score"),
    ),
    # A sequence head of one sigmoid per label (problem_type "multi_label_classification"): transformers'
    # text-classification pipeline gives each label's sigmoid for it, and a text has the labels above the threshold
    # its config records (`multi_label_threshold`: one for every label, or each label's own; 0.5 where it records none).
    "multi-label-classifier": _finetuned(
        "text-classification",
        "Text classification",
        "ForSequenceClassification",
        "BERT multi-label text classifier (a text has any number of its labels, none included)",
        "multi-label classification (binary cross-entropy: one sigmoid per label; a label is predicted where its "
        "sigmoid is above the threshold `config.json` records as `multi_label_threshold`)",
        'classifier = pipeline("text-classification", model=model, tokenizer=tokenizer, top_k=None)\n'
        "scores = classifier([$example])[0]  # each label's sigmoid (a list in, a list of answers out)\n"
        "threshold = model.config.multi_label_threshold or 0.5  # as scored: one for every label, or each label's\n"
        'each = threshold if isinstance(threshold, dict) else {s["label"]: threshold for s in scores}\n'
        'print([s["label"] for s in scores if s["score"] > each[s["label"]]])  # the labels the text has',
        _cross_encoder_usage("each label's sigmoid"),
    ),
    "token-classifier": _finetuned(
        "token-classification",
        "Token classification",
        "ForTokenClassification",
        "BERT token classifier (named entities)",
        "token classification (cross-entropy over the tag of each word's first word piece)",
        'tagger = pipeline("token-classification", model=model, tokenizer=tokenizer, aggregation_strategy="simple")\n'
        'print(tagger("George Washington went to Washington."))',
    ),
    "embedding": CardKind(
        "classifier.md",
        "sentence-similarity",
        "Sentence similarity",
        "AutoModel",
        ("sentence-similarity", "sentence-transformers", "feature-extraction"),
        description="BERT sentence-embedding model (a bi-encoder: the cosine of two texts' pooled vectors says how "
        "alike they are)",
        objective="a bi-encoder's similarity loss on pooled sentence vectors (cosine similarity against scores, or "
        "in-batch negatives)",
        usage="from sentence_transformers import SentenceTransformer  # pip install sentence-transformers\n"
        "encoder = SentenceTransformer(repo_id, revision=revision, trust_remote_code=True)\n"
        'vectors = encoder.encode(["a man is playing a guitar.", "a person plays an instrument."])\n'
        "print(encoder.similarity(vectors[:1], vectors[1:]))",
    ),
    "question-answering": _finetuned(
        "question-answering",
        "Question answering",
        "ForQuestionAnswering",
        "BERT extractive question-answering model",
        "extractive question answering (cross-entropy over the answer's start and end tokens)",
        "from hf_bertscratch.inference import answer_question  # transformers 5 has no QA pipeline\n"
        'print(answer_question((model, tokenizer), "Where did he go?", "George Washington went to Washington."))',
    ),
}
# Pipeline task -> the card kind of a model fine-tuned for it; of two kinds of one task the first listed (read in
# reverse, so it is written last): text-classification is the classifier's, whose head the regressor shares.
KIND_OF_TASK: dict[str, str] = {kind.pipeline_tag: name for name, kind in reversed(CARD_KINDS.items())}
_COMMON_TAGS = ("bert", "bertscratch", "custom_code")

# How a card says where training started, by template: (from random weights, from `base`, not recorded).
_ORIGINS: dict[str, tuple[str, str, str]] = {
    "pretrained.md": (
        "pretrained from scratch with {description}",
        "pretrained with {description}, continued from {base}",
        "pretrained with {description}",
    ),
    "classifier.md": ("trained from random weights, without pretraining", "fine-tuned from {base}", ""),
}

# Result keys that are no score of the model, shown nowhere in the card: the scores of answers given without
# learning that runs record beside the model's (`test_baseline_bag_of_words`, pretraining's `eval_unigram_accuracy`).
_NOT_THE_MODELS = re.compile(r"(^|_)(baseline|unigram)_")
# Result keys that measure speed, not quality: shown nowhere in the metadata.
# Speed counters, and how the predictions spread (fine-tuning's check for a model that answers one thing).
_NON_METRIC_SUFFIXES = (
    "_runtime",
    "_samples_per_second",
    "_steps_per_second",
    "epoch",
    "_flos",
    "_samples",
    "_prediction_std",
    "_top_class_share",
)


@strict
@dataclass
class CardInfo:
    """What a run knows for its model card; every field optional, each type checked on creation (`@strict`).

    Attributes:
        model_name / repo_id: how the card names the model (repo_id's last part when no name is given).
        base_model: Hub id or path of the weights training started from (fine-tuning, or continued pretraining); the
            card names a local one by its folder's name alone (`source_name`).
        base_model_known: False when the starting weights were not recorded (a folder read back without its card):
            the card then neither names a base model nor says "from scratch". True with no base_model: random
            initial weights.
        task_text: the fine-tuning tasks (a name or a list of names) whose unlabelled train text the model was
            pretrained on (task-adaptive pretraining, `pretrain --task_text`).
        datasets: Hub dataset ids (their titles and citations come from `data.KNOWN_DATASETS`; a local folder among
            them is left out of the card, whose dataset_description names it); dataset_config,
            eval_split and dataset_description say which part and how it was shaped (a local source named by
            `source_name`, not by its path).
        model_size, num_parameters, hyperparameters, hardware, wall_time_seconds, train_tokens: how it was trained.
        results: metric -> value (eval_accuracy, perplexity, eval_loss; speed counters are left out of the card).
        scored_on: a sentence under a fine-tuned model's results (`classifier.md`) saying what they were measured
            on, where a split's name alone does not (train examples held out, a test split that checkpoints were
            chosen on).
        task: "fill-mask" or "text-classification" (default: the card kind's); labels: class names in id order.
        text_pair: whether the model reads a text pair (its task has a `text_pair` column): the card's pipeline is
            then given a pair (`EXAMPLE_PAIR`), and it shows the kind's `pair_usage`, sentence-transformers'
            `CrossEncoder`, where it has one.
        license, language: card metadata.
    """

    model_name: str | None = None
    repo_id: str | None = None
    base_model: str | None = None
    base_model_known: bool = True
    task_text: str | list[str] | tuple[str, ...] | None = None
    datasets: list[str] | tuple[str, ...] | None = None
    dataset_config: str | None = None
    eval_split: str | None = None
    dataset_description: str | None = None
    model_size: str | None = None
    num_parameters: int | None = None
    hyperparameters: dict[str, Any] | None = None
    hardware: str | None = None
    wall_time_seconds: int | float | None = None
    train_tokens: int | float | None = None
    results: dict[str, Any] | None = None
    scored_on: str | None = None
    task: str | None = None
    labels: list[Any] | tuple[Any, ...] | None = None
    text_pair: bool = False
    license: str = "apache-2.0"
    language: str = "en"

    def validate_task(self) -> None:
        if self.task is not None and self.task not in {kind.pipeline_tag for kind in CARD_KINDS.values()}:
            raise ValueError(f"Model card task must be one of {sorted(KIND_OF_TASK)}, got {self.task!r}.")

    @classmethod
    def of(cls, info: "CardInfo | Mapping[str, Any]") -> "CardInfo":
        """`info` itself, or a `CardInfo` from a mapping of its fields; a bad or unknown key is a ValueError naming it."""
        if isinstance(info, CardInfo):
            return info
        try:
            return cls(**info)
        except (TypeError, StrictDataclassError) as error:
            raise ValueError(f"Bad model card info: {error}") from error


def template_path(kind: str) -> Path:
    """The Jinja template of a card kind (`CARD_KINDS`; each is drawn from `pretrained.md` or `classifier.md`),
    wherever the package is installed."""
    card_kind = _card_kind(kind)
    path = Path(str(resources.files("hf_bertscratch") / "model_cards" / card_kind.template))
    if not path.is_file():
        raise FileNotFoundError(
            f"Model card template {card_kind.template!r} not found at {path}; reinstall the package."
        )
    return path


def build_model_card(kind: str, info: CardInfo | Mapping[str, Any]) -> ModelCard:
    """Render the card of `kind` from a run's `info` (keys: see `write_model_card`), without writing it."""
    card_kind = _card_kind(kind)
    info = CardInfo.of(info)
    card_data = _card_data(card_kind, info)
    return ModelCard.from_template(
        card_data, template_path=str(template_path(kind)), **_template_fields(card_kind, info)
    )


def write_model_card(output_dir: str | Path, kind: str, info: CardInfo | Mapping[str, Any]) -> Path:
    """Write `output_dir/README.md`, the model card of a run, and return its path.

    Args:
        output_dir: Folder of the saved model (created if missing).
        kind: one of `CARD_KINDS`: "pretrained" (masked-LM pretraining), "discriminator" (an ELECTRA run),
            "classifier" (sequence classification), "multi-label-classifier" (any number of labels per text),
            "regressor" (a sequence head trained on scores), "token-classifier", "question-answering" or "embedding".
        info: What the run knows: a `CardInfo`, or a mapping of its fields (checked the same way).

    The file is written to a temporary name beside it and renamed, so a failure never leaves a half card.
    """
    card = build_model_card(kind, info)
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    path = output_dir / "README.md"
    write_text_atomically(path, str(card))
    logger.info("Wrote the %s model card to %s", kind, final_path(path))
    return path


def set_card_repo(card_file: str | Path, repo_id: str, revision: str | None = None) -> Path:
    """Point the loading instructions of a written card at `repo_id` (and branch `revision`), in place.

    Cards are written at the end of training, often before anyone has chosen where they go: the placeholder repo id
    and default revision are swapped here, at upload time. The result must still parse as a `ModelCard`.
    """
    path = Path(card_file)
    text = path.read_text(encoding="utf-8").replace(REPO_PLACEHOLDER, repo_id)
    if revision:
        text = text.replace(f'revision = "{DEFAULT_REVISION}"', f'revision = "{revision}"')
    ModelCard(text)  # raises if the edit broke the metadata block
    write_text_atomically(path, text)
    return path


def info_from_model_folder(model_dir: str | Path) -> tuple[str, CardInfo]:
    """Guess the card kind and `info` of a saved model folder that has no card (config, sizes, saved metrics).

    Returns:
        (kind, info): the kind whose head the folder's `architectures` name ("classifier", or "regressor" for a
        config whose problem_type is regression, "multi-label-classifier" for multi_label_classification,
        "token-classifier", "question-answering"), else "pretrained"; `text_pair` from the input columns its config
        records (`input_columns`, which `bertscratch finetune` writes).
    """
    model_dir = Path(model_dir)
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    architectures = config.get("architectures") or []
    heads = {name: kind.architecture for name, kind in CARD_KINDS.items() if kind.architecture}
    kind = next((name for name, head in heads.items() if any(a.endswith(head) for a in architectures)), "pretrained")
    if kind == "classifier" and config.get("problem_type") == "regression":
        kind = "regressor"
    elif kind == "classifier" and config.get("problem_type") == "multi_label_classification":
        kind = "multi-label-classifier"
    # A folder does not record the weights its training started from (config.json drops `_name_or_path`).
    info: dict[str, Any] = {"model_name": model_dir.resolve().name, "base_model_known": False}
    num_parameters = _count_safetensors_parameters(model_dir)
    if num_parameters:
        info["num_parameters"] = num_parameters
    results_file = model_dir / "all_results.json"
    if results_file.is_file():
        recorded = json.loads(results_file.read_text(encoding="utf-8"))
        info["results"] = evaluation_results(recorded)
        info["scored_on"] = scored_on(recorded) or None
    if kind in ("classifier", "multi-label-classifier", "token-classifier") and config.get("id2label"):
        info["labels"] = [config["id2label"][key] for key in sorted(config["id2label"], key=int)]
    info["text_pair"] = "text_pair" in recorded_input_columns(config)
    return kind, CardInfo.of(info)


def evaluation_results(all_results: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of a run's `all_results.json` that its evaluation measured (`eval_` and `test_` keys): the rest
    records the run's settings and counters (seed, learning rate, steps), which are no results of the model."""
    return {key: value for key, value in all_results.items() if key.startswith(("eval_", "test_"))}


def scored_on(results: Mapping[str, Any]) -> str:
    """What a fine-tuning run's scores were measured on, as its card says under them, from its `all_results.json`
    (`results`): the eval split (train examples held out, the data's validation split, or its test split where
    --eval_split named it, so that those scores are on the split checkpoints were chosen on) and the test split,
    scored once at the end; then a multi-label classifier's threshold (`threshold_used`). "" for results that record
    neither their splits (`split_names`) nor a threshold."""
    return " ".join(sentence for sentence in (_splits_scored(results), threshold_used(results)) if sentence)


def threshold_used(results: Mapping[str, Any]) -> str:
    """The threshold a multi-label classifier's scores give its labels at (`multi_label_threshold` of its
    `all_results.json`: one for every label, or each label's own), and where it came from: chosen on the eval split
    (by `multi_label_threshold_metric`, micro F1 where not recorded), the default, or given; "" for results that
    record none."""
    threshold = results.get("multi_label_threshold")
    if not isinstance(threshold, Mapping | int | float):
        return ""
    per_label = isinstance(threshold, Mapping)
    if results.get("multi_label_threshold_chosen"):
        metric = str(results.get("multi_label_threshold_metric") or "micro_f1").replace("_f1", " F1")
        source = (
            f", {'each chosen for its label' if per_label else 'the threshold chosen'} on the eval split: the one of "
            f"{describe_grid()} that gave the chosen model its best eval {metric}, so the `eval_*` scores are at "
            f"their best {'thresholds' if per_label else 'threshold'}"
            + (
                f"; the `test_*` scores are at {'them' if per_label else 'it'} too"
                if f"test_{results.get('main_metric')}" in results
                else ""
            )  # fmt: skip
        )
    else:
        source = " (the default)" if threshold == MULTI_LABEL_THRESHOLD else " (given at fine-tuning)"
    if per_label:
        each = describe_thresholds(threshold)
        return f"Each label is predicted where its sigmoid is above its own threshold ({each}){source}."
    return f"A label is predicted where its sigmoid is above {describe_thresholds(threshold)}{source}."


def _splits_scored(results: Mapping[str, Any]) -> str:
    """`scored_on`'s sentence of the splits; "" for results that do not record them."""
    names = results.get("split_names")
    if "eval_samples" not in results or not isinstance(names, Mapping):
        return ""
    share = results.get("validation_split_percentage")
    if share:
        scored = f"on {results['eval_samples']:,} train examples held out ({share:g}% of the train examples)"
    else:
        scored = f"on the {results['eval_samples']:,} examples of the {names.get('eval', 'eval')} split"
    sentence = f"The `eval_*` scores are {scored}, which checkpoints were chosen on"
    if results.get("checkpoints_chosen_on_test_split"):
        sentence += ": not on examples the choice never saw"
    if f"test_{results.get('main_metric')}" in results and "test_samples" in results:
        sentence += (
            f"; the `test_*` scores are on the {results['test_samples']:,} examples of the "
            f"{names.get('test', 'test')} split, which the chosen model met once, at the end"
        )
    return sentence + "."


def _card_kind(kind: str) -> CardKind:
    if kind not in CARD_KINDS:
        raise ValueError(f"Unknown model card kind {kind!r}; expected one of {sorted(CARD_KINDS)}.")
    return CARD_KINDS[kind]


def _quality_metrics(results: dict[str, Any]) -> dict[str, float]:
    """The numeric, quality-measuring entries of a results dict (speed counters and epochs dropped)."""
    metrics = {}
    for key, value in results.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            continue
        if key.endswith(_NON_METRIC_SUFFIXES) or key.startswith("train_") or _NOT_THE_MODELS.search(key):
            continue
        metrics[key] = float(value)
    return metrics


def _metric_type(key: str) -> str:
    """`eval_accuracy` -> `accuracy`: the Hub's metric id for a Trainer result key."""
    return re.sub(r"^(eval|test|validation)_", "", key)


def _indexed_metrics(card_kind: CardKind, info: CardInfo) -> dict[str, tuple[str, str | None, float]]:
    """Result key -> (metric type, dataset split, value) of the results that measure this model, for the model-index.

    `test_` results were measured on the test split, the others on `info.eval_split`. With `own_results`, only the
    keys of this model enter, and their type loses that prefix (`eval_discriminator_accuracy` -> `accuracy`).
    """
    indexed = {}
    for key, value in _quality_metrics(info.results or {}).items():
        metric = _metric_type(key)
        if card_kind.own_results:
            if not metric.startswith(card_kind.own_results):
                continue
            metric = metric.removeprefix(card_kind.own_results)
        indexed[key] = (metric, "test" if key.startswith("test_") else info.eval_split, value)
    return indexed


def _card_data(card_kind: CardKind, info: CardInfo) -> ModelCardData:
    """The YAML metadata block: what the Hub indexes and shows in the model-index widget."""
    datasets = _hub_datasets(info)
    metrics = _indexed_metrics(card_kind, info)
    pipeline_tag = info.task or card_kind.pipeline_tag
    eval_dataset = datasets[0] if datasets else "custom"
    eval_results = [
        EvalResult(
            task_type=pipeline_tag,
            task_name=card_kind.task_name,
            dataset_type=eval_dataset,
            dataset_name=DATASET_CITATIONS.get(eval_dataset, (eval_dataset, ""))[0],
            dataset_config=info.dataset_config,
            dataset_split=split,
            metric_type=metric,
            metric_name=key,
            metric_value=value,
        )
        for key, (metric, split, value) in metrics.items()
    ]
    return ModelCardData(
        language=info.language,
        license=info.license,
        library_name="transformers",
        pipeline_tag=pipeline_tag,
        tags=list(_COMMON_TAGS + card_kind.tags),
        datasets=datasets or None,
        metrics=sorted({metric for metric, _, _ in metrics.values()}) or None,
        base_model=hub_id(info.base_model),
        # model_name only names the model-index entry; without results it would be a stray metadata key.
        model_name=_model_name(info) if eval_results else None,
        eval_results=eval_results or None,
    )


def _template_fields(card_kind: CardKind, info: CardInfo) -> dict[str, Any]:
    """Everything the Jinja template shows besides the metadata, pre-formatted as strings."""
    datasets = _hub_datasets(info)
    hyperparameters = info.hyperparameters or {}
    results = _quality_metrics(info.results or {})
    return {
        "model_name": _model_name(info),
        "repo_id": info.repo_id or REPO_PLACEHOLDER,
        "revision": DEFAULT_REVISION,
        "auto_class": card_kind.auto_class,
        "description": card_kind.description,
        "origin": _origin(card_kind, info),
        "usage": "\n".join(filter(None, (_usage(card_kind, info), card_kind.pair_usage if info.text_pair else ""))),
        "generator_folder": card_kind.generator_folder,
        "datasets": [(name, DATASET_CITATIONS.get(name, (name, ""))[0]) for name in datasets],
        "dataset_description": info.dataset_description or "",
        "procedure": _procedure(card_kind, info),
        "hyperparameters": [(key, _format_value(value)) for key, value in hyperparameters.items()],
        "max_seq_length": hyperparameters.get("max_seq_length"),
        "results": [(key, _format_value(value)) for key, value in results.items()],
        "results_note": card_kind.results_note if results else "",
        "scored_on": info.scored_on if results else "",
        "labels": [str(label) for label in info.labels or []],
        "citations": [BERT_CITATION, *card_kind.citations, *_dataset_citations(datasets)],
        "project_url": PROJECT_URL,
    }


def _usage(card_kind: CardKind, info: CardInfo) -> str:
    """The kind's usage lines, their pipeline given a text pair where the model reads one, else one text."""
    return Template(card_kind.usage).safe_substitute(example=EXAMPLE_PAIR if info.text_pair else EXAMPLE_TEXT)


def _model_name(info: CardInfo) -> str:
    return info.model_name or (info.repo_id or REPO_PLACEHOLDER).split("/")[-1]


def _base_model_link(name: str) -> str:
    """A Hub id (a folder of the Hub cache included) as a link to its page; a local checkpoint by its folder's name
    alone, which says nothing of the machine it was on."""
    repo = hub_id(name)
    if repo:
        return f"[`{repo}`](https://huggingface.co/{repo})"
    return f"a local checkpoint (`{local_name(name)}`)"


def _origin(card_kind: CardKind, info: CardInfo) -> str:
    """How the model was trained and where from, as the card's first sentence goes on after "A <model>"."""
    from_scratch, from_base, unknown = _ORIGINS[card_kind.template]
    if info.base_model:
        origin = from_base.format(description=card_kind.description, base=_base_model_link(info.base_model))
    else:
        origin = (from_scratch if info.base_model_known else unknown).format(description=card_kind.description)
    tasks = [info.task_text] if isinstance(info.task_text, str) else list(info.task_text or [])
    if tasks:
        names = " and ".join(", ".join(f"`{task}`" for task in tasks).rsplit(", ", 1))
        where = f"the {names} task's train split" if len(tasks) == 1 else f"the train splits of the {names} tasks"
        origin += f" on the unlabelled text of {where} (task-adaptive pretraining)"
    return origin


def _procedure(card_kind: CardKind, info: CardInfo) -> list[tuple[str, str]]:
    """The training-procedure table: (name, value) rows, leaving out what the run did not record."""
    start: str | None
    if info.base_model:
        start = _base_model_link(info.base_model)
    else:
        start = "random weights" if info.base_model_known else None
    rows = {
        "Objective": card_kind.objective,
        "Starting point": start,
        "Size preset": f"`{info.model_size}`" if info.model_size else None,
        "Parameters": _format_count(info.num_parameters),
        "Training tokens": _format_count(info.train_tokens),
        "Hardware": info.hardware,
        "Wall time": _format_duration(info.wall_time_seconds),
    }
    return [(name, value) for name, value in rows.items() if value]


def hub_id(reference: str | Path | None, repo_type: str = "model") -> str | None:
    """The Hub id `reference` came from, or None for a local path that came from no repository of the Hub.

    A reference that is no local path and is shaped like a Hub id is one. A path inside huggingface_hub's cache,
    `.../models--OWNER--NAME/snapshots/COMMIT/...` (`datasets--` for a dataset; "--" stands for "/", and no Hub id holds
    "--"), names the repository it was downloaded from. Any other local path is None: the Hub rejects a `base_model` it
    cannot resolve.
    """
    if not reference:
        return None
    name = str(reference)
    path = Path(name).expanduser()
    if not path.exists():
        return name if _is_repo_id(name) else None
    parts = Path(os.path.abspath(path)).parts  # not resolved: the cache's files are links into its blobs/
    for folder, below in zip(parts, parts[1:]):
        if below == "snapshots" and folder.startswith(f"{repo_type}s--"):
            repo = folder.removeprefix(f"{repo_type}s--").replace("--", "/")
            return repo if _is_repo_id(repo) else None
    return None


def local_name(reference: str | Path) -> str:
    """The part of a local path a model card shows: the file's or folder's own name (`runs/bert-tiny/` ->
    `bert-tiny`; a glob keeps its folder's name, `texts/*.txt`), never where on the machine it is."""
    path = Path(os.path.abspath(Path(str(reference)).expanduser()))
    if any(character in path.name for character in "*?[") and path.parent.name:
        return f"{path.parent.name}/{path.name}"
    return path.name or "/"


def source_name(reference: str | Path, repo_type: str = "model") -> str:
    """How a model card names where a model or data came from: its Hub id when it came from the Hub (`hub_id`), else
    the local file's or folder's name alone (`local_name`); a run's own records keep the full path."""
    return hub_id(reference, repo_type) or local_name(reference)


def _is_repo_id(name: str) -> bool:
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def _hub_datasets(info: CardInfo) -> list[str]:
    """The Hub ids of `info.datasets`, each once: a dataset loaded from a local folder is none of the Hub's, and its
    path stays out of the card (the card's description names it)."""
    return list(dict.fromkeys(filter(None, (hub_id(name, "dataset") for name in info.datasets or ()))))


def _dataset_citations(datasets: list[str]) -> list[str]:
    citations = []
    for name in datasets:
        citation = DATASET_CITATIONS.get(name, ("", ""))[1]
        if citation and citation not in citations:
            citations.append(citation)
    return citations


def _format_count(value: int | float | None) -> str | None:
    """4385920 -> '4.39M' (and the exact number), for parameter and token counts; None when not recorded."""
    if value is None:
        return None
    for scale, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if value >= scale:
            return f"{value / scale:.2f}{suffix} ({value:,.0f})"
    return f"{value:,.0f}"


def _format_duration(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m {secs:02d}s" if hours else f"{minutes}m {secs:02d}s"


def _format_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _count_safetensors_parameters(model_dir: Path) -> int | None:
    """Parameter count from the safetensors headers alone (no weights are loaded)."""
    from safetensors import safe_open

    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        return None
    total = 0
    for file in files:
        with safe_open(str(file), framework="pt") as handle:
            for name in handle.keys():
                total += math.prod(handle.get_slice(name).get_shape())
    return total


__all__ = [
    "CARD_KINDS",
    "CardInfo",
    "REPO_PLACEHOLDER",
    "build_model_card",
    "evaluation_results",
    "hub_id",
    "info_from_model_folder",
    "local_name",
    "scored_on",
    "set_card_repo",
    "source_name",
    "template_path",
    "threshold_used",
    "write_model_card",
]
