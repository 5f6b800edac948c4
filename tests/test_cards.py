"""Model cards: Hub metadata that round-trips through huggingface_hub.ModelCard, and a card text filled from the run."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from huggingface_hub import ModelCard

from hf_bertscratch import cards

PRETRAINED_INFO = {
    "model_name": "bertscratch-mini-wikitext",
    "datasets": ["wikitext"],
    "dataset_config": "wikitext-2-raw-v1",
    "eval_split": "validation",
    "dataset_description": "WikiText-2 raw, train split.",
    "model_size": "mini",
    "num_parameters": 11_170_000,
    "hyperparameters": {"learning_rate": 5e-4, "max_seq_length": 128},
    "hardware": "1 x NVIDIA H200",
    "wall_time_seconds": 3723.4,
    "train_tokens": 2_000_000,
    "results": {"eval_loss": 3.25, "perplexity": 25.8, "eval_accuracy": 0.41, "eval_runtime": 3.0, "epoch": 3.0},
}
CLASSIFIER_INFO = {
    "model_name": "bertscratch-mini-imdb",
    "base_model": "someone/bertscratch-mini-wikitext",
    "datasets": ["imdb"],
    "results": {"eval_accuracy": 0.87, "eval_loss": 0.31, "eval_samples_per_second": 900.0},
    "task": "text-classification",
    "labels": ["neg", "pos"],
    "repo_id": "someone/bertscratch-mini-imdb",
}


def _front_matter(path: Path) -> dict:
    """The YAML block of a card file, parsed independently of huggingface_hub."""
    _, block, _ = path.read_text(encoding="utf-8").split("---\n", 2)
    return yaml.safe_load(block)


def test_pretrained_card_metadata_round_trips(tmp_path: Path) -> None:
    path = cards.write_model_card(tmp_path, "pretrained", PRETRAINED_INFO)
    assert path == tmp_path / "README.md"
    card = ModelCard.load(path)
    metadata = card.data.to_dict()
    assert metadata == _front_matter(path)
    assert ModelCard(str(card)).data.to_dict() == metadata  # save -> load -> save is stable
    assert metadata["library_name"] == "transformers"
    assert metadata["pipeline_tag"] == "fill-mask"
    assert metadata["license"] == "apache-2.0"
    assert metadata["datasets"] == ["wikitext"]
    assert metadata["metrics"] == ["accuracy", "loss", "perplexity"]
    assert {"bert", "custom_code", "fill-mask"} <= set(metadata["tags"])
    assert "base_model" not in metadata
    # model-index carries the quality metrics, not the speed counters or the epoch.
    results = {result.metric_name: result.metric_value for result in card.data.eval_results}
    assert results == {"eval_loss": 3.25, "perplexity": 25.8, "eval_accuracy": 0.41}
    assert {result.dataset_config for result in card.data.eval_results} == {"wikitext-2-raw-v1"}


def test_pretrained_card_text_is_filled_from_the_run(tmp_path: Path) -> None:
    text = cards.write_model_card(tmp_path, "pretrained", PRETRAINED_INFO).read_text(encoding="utf-8")
    for expected in (
        "# bertscratch-mini-wikitext",
        "AutoModelForMaskedLM.from_pretrained(repo_id, revision=revision, trust_remote_code=True)",
        f'repo_id = "{cards.REPO_PLACEHOLDER}"',
        "11.17M (11,170,000)",
        "2.00M (2,000,000)",
        "1 x NVIDIA H200",
        "1h 02m 03s",
        "| `learning_rate` | 0.0005 |",
        "| `perplexity` | 25.8 |",
        "WikiText-2 raw, train split.",
        "## Limitations",
        "pretrained from scratch with masked language modeling",
        "| Starting point | random weights |",
        "it was trained on\n  sequences of up to 128 tokens",
        "@inproceedings{devlin2019bert",
        "@inproceedings{merity2017pointer",
    ):
        assert expected in text, expected
    assert "eval_runtime" not in text


def test_classifier_card_names_base_model_labels_and_dataset_citation(tmp_path: Path) -> None:
    path = cards.write_model_card(tmp_path, "classifier", CLASSIFIER_INFO)
    card = ModelCard.load(path)
    assert card.data.base_model == "someone/bertscratch-mini-wikitext"
    assert card.data.pipeline_tag == "text-classification"
    assert card.data.to_dict()["model-index"][0]["name"] == "bertscratch-mini-imdb"
    assert {result.metric_type for result in card.data.eval_results} == {"accuracy", "loss"}
    text = path.read_text(encoding="utf-8")
    assert 'repo_id = "someone/bertscratch-mini-imdb"' in text
    load = "AutoModelForSequenceClassification.from_pretrained(repo_id, revision=revision, trust_remote_code=True)"
    assert load in text
    assert "Labels: `neg`, `pos`." in text
    assert "@inproceedings{maas2011learning" in text


@pytest.mark.parametrize("kind", ["classifier", "pretrained"])
def test_card_without_results_has_no_model_index(tmp_path: Path, kind: str) -> None:
    card = ModelCard.load(cards.write_model_card(tmp_path, kind, {}))
    assert "model-index" not in card.data.to_dict()
    assert "model_name" not in card.data.to_dict()
    assert "No evaluation was recorded" in card.text
    assert "The results above" not in card.text  # no results to point at


def test_set_card_repo_points_the_example_at_the_repo_and_branch(tmp_path: Path) -> None:
    path = cards.write_model_card(tmp_path, "pretrained", PRETRAINED_INFO)
    before = ModelCard.load(path).data.to_dict()
    cards.set_card_repo(path, "alice/my-bert", revision="v1")
    text = path.read_text(encoding="utf-8")
    assert 'repo_id = "alice/my-bert"' in text and 'revision = "v1"' in text
    assert cards.REPO_PLACEHOLDER not in text
    assert ModelCard.load(path).data.to_dict() == before


@pytest.mark.parametrize(
    ("kind", "info", "message"),
    [
        ("regresor", {}, "regresor"),
        ("pretrained", {"datasets": "wikitext"}, "datasets"),
        ("pretrained", {"results": [0.5]}, "results"),
        ("classifier", {"task": "translation"}, "translation"),
        ("pretrained", {"modle_name": "x"}, "modle_name"),
        ("pretrained", {"num_parameters": "11M"}, "num_parameters"),
    ],
)
def test_bad_card_input_is_rejected_before_writing(tmp_path: Path, kind: str, info: dict, message: str) -> None:
    (tmp_path / "README.md").write_text("previous card", encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        cards.write_model_card(tmp_path, kind, info)
    assert [path.name for path in tmp_path.iterdir()] == ["README.md"]
    assert (tmp_path / "README.md").read_text(encoding="utf-8") == "previous card"


def test_templates_are_one_copy_shipped_inside_the_package() -> None:
    import tomllib

    root = Path(__file__).resolve().parents[1]
    repo_templates = root / "model_cards"
    # The wheel takes package data by this glob, through the hf_bertscratch/model_cards symlink.
    package_data = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    assert "model_cards/*.md" in package_data["package-data"]["hf_bertscratch"]
    for kind, card_kind in cards.CARD_KINDS.items():
        path = cards.template_path(kind)
        # Found through the package (what an installed wheel has), and the same file as the top-level template.
        assert "hf_bertscratch" in path.parts
        assert path.samefile(repo_templates / card_kind.template)


def test_info_from_model_folder_reads_config_and_metrics(tmp_path: Path, tokenizer, tiny_config) -> None:
    import json

    import hf_bertscratch

    tiny_config.id2label = {0: "neg", 1: "pos"}
    model = hf_bertscratch.BertScratchForSequenceClassification(tiny_config)
    model.save_pretrained(tmp_path)
    # What fine-tuning's all_results.json holds besides the scores: settings, counters and the no-learning answers.
    recorded = {"eval_accuracy": 0.75, "seed": 42, "learning_rate": 1e-3, "global_step": 5, "num_parameters": 9}
    recorded |= {"baseline_constant": 0.5, "test_baseline_bag_of_words": 0.6, "test_accuracy": 0.7}
    (tmp_path / "all_results.json").write_text(json.dumps(recorded), encoding="utf-8")
    kind, info = cards.info_from_model_folder(tmp_path)
    assert kind == "classifier"
    assert info.labels == ["neg", "pos"]
    # A record that does not say which splits its scores are of gets no sentence claiming one.
    assert info.scored_on is None
    card = cards.build_model_card(kind, info)
    # Only the model's own scores are its results: in the model-index and in the card's table.
    assert {result.metric_name for result in card.data.eval_results} == {"eval_accuracy", "test_accuracy"}
    assert "seed" not in card.text.split("## Evaluation results")[1] and "baseline" not in card.text
    # The folder does not say where training started: its card claims neither a base model nor random weights.
    assert info.base_model is None and info.base_model_known is False
    text = card.text
    assert "random weights" not in text and "fine-tuned from" not in text and "Starting point" not in text
    # Tied weights are stored once; the header count equals the model's own unique-parameter count.
    assert info.num_parameters == model.num_parameters()


def test_local_sources_stay_out_of_hub_metadata_and_show_by_name(tmp_path: Path) -> None:
    """A run fine-tuned from a local folder on a dataset that save_to_disk wrote: the Hub would reject `base_model:
    runs/pre`, and their paths would mean nothing to a reader on the Hub (and tell of the author's machine), so only
    the text names them, by name alone."""
    local, saved = tmp_path / "runs" / "pre", tmp_path / "my-corpus"
    local.mkdir(parents=True)
    saved.mkdir()
    results = {"eval_accuracy": 0.5, "eval_samples": 24}
    info = {**CLASSIFIER_INFO, "base_model": str(local), "datasets": [str(saved), "imdb"], "results": results}
    path = cards.write_model_card(tmp_path / "out", "classifier", info)
    assert str(tmp_path) not in path.read_text(encoding="utf-8")
    card = ModelCard.load(path)
    assert card.data.base_model is None and card.data.datasets == ["imdb"]
    assert "fine-tuned from a local checkpoint (`pre`)" in card.text
    assert "| Starting point | a local checkpoint (`pre`) |" in card.text
    assert {result.dataset_type for result in card.data.eval_results} == {"imdb"}
    assert [result.metric_name for result in card.data.eval_results] == ["eval_accuracy"]  # a count is no metric


def test_continued_pretraining_card_names_the_base_model_and_the_task_text(tmp_path: Path) -> None:
    info = {
        **PRETRAINED_INFO,
        "base_model": "someone/bertscratch-mini-wikitext",
        "task_text": ["rte"],
        "model_size": None,
        "datasets": ["glue"],
        "dataset_config": "rte",
    }
    card = ModelCard.load(cards.write_model_card(tmp_path, "pretrained", info))
    assert card.data.base_model == "someone/bertscratch-mini-wikitext"
    assert (
        "A BERT encoder pretrained with masked language modeling, continued from "
        "[`someone/bertscratch-mini-wikitext`](https://huggingface.co/someone/bertscratch-mini-wikitext) on the "
        "unlabelled text of the `rte` task's train split (task-adaptive pretraining)"
    ) in card.text
    assert "| Starting point | [`someone/bertscratch-mini-wikitext`]" in card.text
    assert "from scratch" not in card.text and "random weights" not in card.text
    assert "Size preset" not in card.text  # the base model's size, not a preset this run chose
    # A local base folder is named in the text only, by its name: the Hub would reject it as base_model.
    local = tmp_path / "base"
    local.mkdir()
    card = ModelCard.load(cards.write_model_card(tmp_path / "local", "pretrained", {**info, "base_model": str(local)}))
    assert card.data.base_model is None
    assert (
        "continued from a local checkpoint (`base`) on the unlabelled text of the `rte` task's train split" in card.text
    )
    assert str(tmp_path) not in str(card)
    several = {**info, "task_text": ["rte", "cola", "sst2"]}
    card = ModelCard.load(cards.write_model_card(tmp_path / "several", "pretrained", several))
    assert "on the unlabelled text of the train splits of the `rte`, `cola` and `sst2` tasks" in card.text


def test_discriminator_card_indexes_its_own_results_and_loads_the_generator(tmp_path: Path) -> None:
    results = {"eval_loss": 9.5, "eval_accuracy": 0.2, "eval_perplexity": 80.0, "eval_discriminator_accuracy": 0.85}
    path = cards.write_model_card(tmp_path, "discriminator", {**PRETRAINED_INFO, "results": results})
    card = ModelCard.load(path)
    # The generator's accuracy and perplexity, and the pair's loss, do not describe the discriminator.
    indexed = {(result.metric_type, result.metric_name): result.metric_value for result in card.data.eval_results}
    assert indexed == {("accuracy", "eval_discriminator_accuracy"): 0.85}
    assert card.data.metrics == ["accuracy"]
    assert "| `eval_perplexity` | 80 |" in card.text and "`eval_perplexity` measure the generator" in card.text
    assert 'AutoModelForMaskedLM.from_pretrained(\n    repo_id, subfolder="generator"' in card.text
    assert "pretrained from scratch with replaced-token detection" in card.text
    assert "@inproceedings{clark2020electra" in card.text
    cards.set_card_repo(path, "alice/electra")
    assert 'repo_id = "alice/electra"' in path.read_text(encoding="utf-8")


def test_test_split_results_are_indexed_under_the_test_split(tmp_path: Path) -> None:
    # A test split's no-learning answers are recorded beside the model's score, not as the model's.
    results = {"eval_accuracy": 0.87, "test_accuracy": 0.85, "test_baseline_constant": 0.5}
    info = {**CLASSIFIER_INFO, "eval_split": "validation", "results": results}
    card = ModelCard.load(cards.write_model_card(tmp_path, "classifier", info))
    splits = {result.metric_name: result.dataset_split for result in card.data.eval_results}
    assert splits == {"eval_accuracy": "validation", "test_accuracy": "test"}


def test_the_card_says_what_the_scores_were_measured_on(tmp_path: Path) -> None:
    """Where a split's name alone does not say what the scores measure (train examples held out, or a test split
    that checkpoints were chosen on), the card says it under its results; a run without results says nothing of it."""
    scored_on = "The `eval_*` scores are on 5 train examples held out (5% of the train examples)."
    info = {**CLASSIFIER_INFO, "scored_on": scored_on}
    text = cards.write_model_card(tmp_path, "classifier", info).read_text(encoding="utf-8")
    results = text.split("## Evaluation results", 1)[1].split("## Limitations", 1)[0]
    assert results.strip().endswith("| `eval_loss` | 0.31 |\n\n" + scored_on)
    unscored = {**info, "results": None}
    text = cards.write_model_card(tmp_path / "unscored", "classifier", unscored).read_text(encoding="utf-8")
    assert "No evaluation was recorded for this run." in text and scored_on not in text


def test_what_a_run_did_not_record_is_left_out(tmp_path: Path) -> None:
    text = cards.write_model_card(tmp_path, "classifier", {"base_model": "someone/base"}).read_text(encoding="utf-8")
    assert "A BERT text classifier fine-tuned from [`someone/base`](https://huggingface.co/someone/base)," in text
    for absent in ("Size preset", "Parameters", "Training tokens", "Hardware", "Wall time", "`custom`"):
        assert absent not in text, absent
    assert "Training data: not recorded." in text
    scratch = cards.write_model_card(tmp_path / "scratch", "classifier", {}).read_text(encoding="utf-8")
    assert "A BERT text classifier trained from random weights, without pretraining," in scratch
    assert "| Starting point | random weights |" in scratch


def test_a_base_model_from_the_hub_cache_is_named_by_its_hub_id(tmp_path: Path) -> None:
    """A checkpoint loaded from a folder of huggingface_hub's cache came from the Hub: the card names and links its
    Hub id, as if it had been given by id."""
    cached = tmp_path / "hub" / "models--someone--bert-mini" / "snapshots" / "0123abcd"
    cached.mkdir(parents=True)
    path = cards.write_model_card(tmp_path / "cached", "pretrained", {"base_model": str(cached)})
    assert str(tmp_path) not in path.read_text(encoding="utf-8")
    card = ModelCard.load(path)
    assert card.data.base_model == "someone/bert-mini"
    assert "continued from [`someone/bert-mini`](https://huggingface.co/someone/bert-mini)" in card.text


def test_source_name_is_a_hub_id_or_a_name_without_its_path(tmp_path: Path) -> None:
    texts = tmp_path / "texts"
    texts.mkdir()
    (texts / "train.txt").write_text("a line\n", encoding="utf-8")
    assert cards.source_name(texts / "train.txt", "dataset") == "train.txt"
    assert cards.source_name(f"{texts}/", "dataset") == "texts"
    assert cards.source_name(f"{texts}/*.txt", "dataset") == "texts/*.txt"  # a glob keeps its folder's name
    assert cards.source_name("wikitext", "dataset") == "wikitext"
    assert cards.source_name("google-bert/bert-base-uncased") == "google-bert/bert-base-uncased"
    downloaded = tmp_path / "datasets--stanfordnlp--imdb" / "snapshots" / "e6281661" / "plain_text"
    downloaded.mkdir(parents=True)
    (downloaded / "train.parquet").write_bytes(b"")
    assert cards.source_name(downloaded / "train.parquet", "dataset") == "stanfordnlp/imdb"
    assert cards.source_name(downloaded / "train.parquet") == "train.parquet"  # a dataset's file, not a model's
    assert cards.hub_id(texts) is None and cards.hub_id("/no/such/folder") is None


def test_a_regressor_has_a_card_of_its_own(tmp_path: Path, tiny_config, caplog: pytest.LogCaptureFixture) -> None:
    """A sequence head trained on scores is a regressor, in the card, in the line that says it was written and in the
    kind a saved folder's card is guessed as; the text-classification task still names the classifier's card."""
    import hf_bertscratch

    with caplog.at_level("INFO", logger="hf_bertscratch.cards"):
        path = cards.write_model_card(tmp_path / "card", "regressor", {**CLASSIFIER_INFO, "labels": ["score"]})
    assert caplog.messages == [f"Wrote the regressor model card to {path}"]
    card = ModelCard.load(path)
    assert card.data.pipeline_tag == "text-classification" and "A BERT text regression model" in card.text
    assert "classifier" not in card.text and "cross-entropy" not in card.text
    assert cards.KIND_OF_TASK["text-classification"] == "classifier"
    tiny_config.num_labels, tiny_config.problem_type = 1, "regression"
    hf_bertscratch.BertScratchForSequenceClassification(tiny_config).save_pretrained(tmp_path / "model")
    assert cards.info_from_model_folder(tmp_path / "model")[0] == "regressor"


# The card kinds whose config names the activation sentence-transformers' CrossEncoder applies to the head's logits
# (`tasks.classification.cross_encoder_activation`), and that activation.
CROSS_ENCODER_KINDS = {
    "regressor": "torch.nn.modules.linear.Identity",
    "multi-label-classifier": "torch.nn.modules.activation.Sigmoid",
}


@pytest.mark.parametrize("kind", sorted(cards.CARD_KINDS))
def test_only_a_pair_model_whose_config_names_its_activation_is_shown_as_a_cross_encoder(
    tmp_path: Path, kind: str
) -> None:
    for text_pair in (False, True):
        card = ModelCard.load(cards.write_model_card(tmp_path / str(text_pair), kind, {"text_pair": text_pair}))
        shown = "cross_encoder = CrossEncoder(repo_id, revision=revision, trust_remote_code=True)" in card.text
        assert shown == (text_pair and kind in CROSS_ENCODER_KINDS), (kind, text_pair)


# The card kinds of a sequence head, and the config that makes a folder's card that kind: its labels and problem_type.
SEQUENCE_KINDS = {
    "classifier": ({0: "neg", 1: "pos"}, "single_label_classification"),
    "regressor": ({0: "score"}, "regression"),
    "multi-label-classifier": ({0: "sports", 1: "music", 2: "film"}, "multi_label_classification"),
}


def _run_card_example(folder: Path, kind: str, text_pair: bool, tokenizer, tiny_config) -> tuple:
    """Save a tiny sequence model of `kind` reading one text or a text pair, write the card a push writes for it (its
    repo id the local folder) and run the card's snippet: the model, the snippet's names and what it printed."""
    import re

    import torch

    import hf_bertscratch

    torch.manual_seed(0)
    tiny_config.id2label, tiny_config.problem_type = SEQUENCE_KINDS[kind]
    tiny_config.label2id = {label: index for index, label in tiny_config.id2label.items()}
    if kind in CROSS_ENCODER_KINDS:
        tiny_config.sentence_transformers = {"activation_fn": CROSS_ENCODER_KINDS[kind]}
    tiny_config.input_columns = {"text": "sentence1", "text_pair": "sentence2"} if text_pair else {"text": "text"}
    model = hf_bertscratch.BertScratchForSequenceClassification(tiny_config).eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    written_kind, info = cards.info_from_model_folder(folder)  # the card a push writes for a folder without one
    assert (written_kind, info.text_pair) == (kind, text_pair)
    cards.set_card_repo(cards.write_model_card(folder, kind, info), str(folder))
    snippet = re.search(r"```python\n(.*?)```", (folder / "README.md").read_text(encoding="utf-8"), re.S)
    assert snippet is not None
    printed: list = []
    names: dict = {"print": printed.append}
    exec(snippet.group(1), names)  # the card's own example, on a local folder
    return model, snippet.group(1), names, printed


@pytest.mark.parametrize("text_pair", [False, True])
@pytest.mark.parametrize("kind", sorted(SEQUENCE_KINDS))
def test_the_pipeline_of_a_sequence_models_card_reads_what_the_model_reads(
    tmp_path: Path, kind: str, text_pair: bool, tokenizer, tiny_config
) -> None:
    """The card's snippet gives its pipeline a text pair (as the text-classification pipeline takes one: a dict of
    `text` and `text_pair`) where the model reads one, else one text: the pipeline's scores are the model's on it."""
    import torch

    model, _, names, printed = _run_card_example(tmp_path / "model", kind, text_pair, tokenizer, tiny_config)
    texts = ("a man is playing a guitar.", "a man plays an instrument.") if text_pair else (cards.EXAMPLE_TEXT[1:-1],)
    with torch.no_grad():
        logits = model(**tokenizer(*texts, return_tensors="pt")).logits[0]
    if kind == "multi-label-classifier":
        scores = {score["label"]: score["score"] for score in names["scores"]}
        expected = dict(zip(model.config.id2label.values(), torch.sigmoid(logits).tolist(), strict=True))
        assert scores == pytest.approx(expected, abs=1e-5)
    else:
        answer = printed[0][0] if isinstance(printed[0], list) else printed[0]
        expected_score = logits[0] if kind == "regressor" else torch.softmax(logits, -1).max()
        assert answer["score"] == pytest.approx(expected_score.item(), abs=1e-5)


@pytest.mark.parametrize("kind", sorted(CROSS_ENCODER_KINDS))
def test_the_cross_encoder_of_a_pair_models_card_predicts_its_scores(
    tmp_path: Path, kind: str, tokenizer, tiny_config
) -> None:
    """The card's snippet, run on a saved pair model (its repo id a local folder), loads it as a CrossEncoder whose
    predictions are the model's scores as the snippet's pipeline gives them: a regressor's own score (not squashed by
    CrossEncoder's default sigmoid), a multi-label classifier's sigmoid of each label."""
    import torch

    model, snippet, names, printed = _run_card_example(tmp_path / "model", kind, True, tokenizer, tiny_config)
    assert "CrossEncoder" in snippet
    pair = ("a man is playing a guitar.", "a man plays an instrument.")
    with torch.no_grad():
        logits = model(**tokenizer(*pair, return_tensors="pt")).logits[0]
    expected = logits if kind == "regressor" else torch.sigmoid(logits)
    predicted = names["cross_encoder"].predict([pair])[0]
    assert torch.tensor(predicted).reshape(-1).tolist() == pytest.approx(expected.tolist(), abs=1e-5)
    assert printed  # the snippet printed its answers
