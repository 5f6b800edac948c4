"""The datasets this package knows by name, from the standard library alone: each one's Hub ids, title and citation
(for model cards), and the layout of its copy in a data directory (`LOCAL_DATASETS`) or inside the package
(`BUNDLED_DATASETS`), which `hf_bertscratch.data.load_raw_datasets` reads before the Hub; and how an error names a
dataset and the folder its copy would have (`where_a_copy_goes`).

It lives below the library so that the `bertscratch` front door names, before torch loads, where a task's dataset
would go when it has no copy and cannot come from the Hub, in the library's words.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .model_reference import (
    check_hub_dataset,
    datasets_offline_variable,
    hub_dataset_missing,
    in_datasets_cache,
    offline_not_cached,
)


@dataclass(frozen=True)
class LocalDataset:
    """Where a Hub dataset's published files live inside a data directory, and how to read them.

    Attributes:
        folder: Sub-folder of the data directory.
        splits: Split name -> file path or glob, relative to `folder`.
        columns: Columns to keep (the Hub dataset's columns), in order; None keeps all.
        builder_kwargs: extra arguments of the datasets builder, beyond its format's (`FILE_BUILDERS`): GLUE's
            TSVs' encoding, a header or none.
        rename: column renames applied before `columns` is selected (file header -> the Hub dataset's name).
        builder: the reader, when the file extension does not say it ("conll": CoNLL-2003 text files).
    """

    folder: str
    splits: dict[str, str]
    columns: tuple[str, ...] | None = None
    builder_kwargs: dict[str, object] = field(default_factory=dict)
    rename: dict[str, str] = field(default_factory=dict)
    builder: str | None = None


@dataclass(frozen=True)
class KnownDataset:
    """A dataset this package knows by name: one row of `KNOWN_DATASETS`.

    Attributes:
        hub_ids: (dataset_name, dataset_config_name) pairs it is known by (Hub ids and short aliases); a None config
            matches a name given without one.
        title: readable name, for model cards.
        citation: BibTeX that a model card trained or evaluated on it carries.
        local: layout of its copy in a data directory (`--data_dir`, `$BERTSCRATCH_DATA_DIR`).
        bundled: layout of the copy shipped inside the package (`hf_bertscratch.data.BUNDLED_DIR`), if there is one.
    """

    hub_ids: tuple[tuple[str, str | None], ...]
    title: str
    citation: str
    local: LocalDataset
    bundled: LocalDataset | None = None


_WIKITEXT_CITATION = """@inproceedings{merity2017pointer,
  title     = {Pointer Sentinel Mixture Models},
  author    = {Merity, Stephen and Xiong, Caiming and Bradbury, James and Socher, Richard},
  booktitle = {International Conference on Learning Representations},
  year      = {2017}
}"""
_IMDB_CITATION = """@inproceedings{maas2011learning,
  title     = {Learning Word Vectors for Sentiment Analysis},
  author    = {Maas, Andrew L. and Daly, Raymond E. and Pham, Peter T. and Huang, Dan and Ng, Andrew Y. and Potts, Christopher},
  booktitle = {Proceedings of the 49th Annual Meeting of the Association for Computational Linguistics},
  year      = {2011},
  pages     = {142--150}
}"""
_GLUE_CITATION = """@inproceedings{wang2019glue,
  title     = {{GLUE}: A Multi-Task Benchmark and Analysis Platform for Natural Language Understanding},
  author    = {Wang, Alex and Singh, Amanpreet and Michael, Julian and Hill, Felix and Levy, Omer and Bowman, Samuel R.},
  booktitle = {International Conference on Learning Representations},
  year      = {2019}
}"""
_SST2_CITATION = (
    """@inproceedings{socher2013recursive,
  title     = {Recursive Deep Models for Semantic Compositionality Over a Sentiment Treebank},
  author    = {Socher, Richard and Perelygin, Alex and Wu, Jean and Chuang, Jason and Manning, Christopher D. and Ng, Andrew and Potts, Christopher},
  booktitle = {Proceedings of the 2013 Conference on Empirical Methods in Natural Language Processing},
  year      = {2013},
  pages     = {1631--1642}
}
"""
    + _GLUE_CITATION
)
_CONLL2003_CITATION = """@inproceedings{tjong-kim-sang-de-meulder-2003-introduction,
  title     = {Introduction to the {C}o{NLL}-2003 Shared Task: Language-Independent Named Entity Recognition},
  author    = {Tjong Kim Sang, Erik F. and De Meulder, Fien},
  booktitle = {Proceedings of the Seventh Conference on Natural Language Learning at HLT-NAACL 2003},
  year      = {2003},
  pages     = {142--147}
}"""
_SQUAD_CITATION = """@inproceedings{rajpurkar2016squad,
  title     = {{SQ}u{AD}: 100,000+ Questions for Machine Comprehension of Text},
  author    = {Rajpurkar, Pranav and Zhang, Jian and Lopyrev, Konstantin and Liang, Percy},
  booktitle = {Proceedings of the 2016 Conference on Empirical Methods in Natural Language Processing},
  year      = {2016},
  pages     = {2383--2392}
}"""


def _glue_local(
    folder: str,
    columns: tuple[str, ...],
    builder_kwargs: dict[str, object] | None = None,
    rename: dict[str, str] | None = None,
) -> LocalDataset:
    """The local copy of one GLUE task: `glue/<folder>/{train,dev}.tsv`, as the Hub's train/validation splits.

    Read as every tsv file is, with quoting off (`data_files.TSV_READING`), as the Hub's `glue` loader reads them: MRPC
    and STS-B hold unbalanced '"' characters. MRPC starts with a byte-order mark, CoLA has no header (`builder_kwargs`).
    """
    splits = {"train": "train.tsv", "validation": "dev.tsv"}
    return LocalDataset(f"glue/{folder}", splits, columns, builder_kwargs or {}, rename or {})


def _glue_known(config: str, title: str, local: LocalDataset) -> KnownDataset:
    return KnownDataset((("glue", config), ("nyu-mll/glue", config)), title, _GLUE_CITATION, local)


# Every dataset known by name, once; the lookup tables below are views of it.
KNOWN_DATASETS: tuple[KnownDataset, ...] = (
    KnownDataset(
        (("wikitext", "wikitext-2-raw-v1"), ("Salesforce/wikitext", "wikitext-2-raw-v1")),
        "WikiText-2",
        _WIKITEXT_CITATION,
        LocalDataset(
            "wikitext-2-raw",
            {"train": "train_split_5/*.txt", "validation": "wiki.valid.raw", "test": "wiki.test.raw"},
            ("text",),
        ),
        LocalDataset(
            "wikitext-2-raw",
            {"train": "wiki.train.txt.gz", "validation": "wiki.valid.txt.gz", "test": "wiki.test.txt.gz"},
        ),
    ),
    KnownDataset(
        (("imdb", None), ("stanfordnlp/imdb", None)),
        "IMDB Large Movie Review",
        _IMDB_CITATION,
        LocalDataset("imdb", {"train": "train.csv.gz", "test": "test.csv.gz"}, ("text", "label")),
    ),
    KnownDataset(
        (("glue", "sst2"), ("nyu-mll/glue", "sst2"), ("stanfordnlp/sst2", None), ("sst2", None)),
        "SST-2 (GLUE)",
        _SST2_CITATION,
        LocalDataset("sst2", {"train": "train.tsv", "validation": "dev.tsv"}, ("sentence", "label")),
    ),
    _glue_known(
        "cola",
        "CoLA (GLUE)",
        _glue_local(
            "CoLA",
            ("sentence", "label"),
            builder_kwargs={"header": None, "column_names": ["source", "label", "mark", "sentence"]},
        ),
    ),
    _glue_known(
        "mrpc",
        "MRPC (GLUE)",
        _glue_local(
            "MRPC",
            ("sentence1", "sentence2", "label"),
            builder_kwargs={"encoding": "utf-8-sig"},
            rename={"Quality": "label", "#1 String": "sentence1", "#2 String": "sentence2"},
        ),
    ),
    _glue_known(
        "stsb", "STS-B (GLUE)", _glue_local("STS-B", ("sentence1", "sentence2", "label"), rename={"score": "label"})
    ),
    _glue_known("rte", "RTE (GLUE)", _glue_local("RTE", ("sentence1", "sentence2", "label"))),
    _glue_known("wnli", "WNLI (GLUE)", _glue_local("WNLI", ("sentence1", "sentence2", "label"))),
    KnownDataset(
        (("conll2003", None), ("eriktks/conll2003", None)),
        "CoNLL-2003 English NER",
        _CONLL2003_CITATION,
        LocalDataset(
            "conll2003",
            {"train": "train.txt", "validation": "valid.txt", "test": "test.txt"},
            ("tokens", "ner_tags"),
            builder="conll",
        ),
    ),
)
# Names whose card title and citation are not one KNOWN_DATASETS row's: datasets known by Hub name only (no local
# copy), and GLUE, whose name is shared by its tasks (a card names the task through its dataset config).
NAME_CITATIONS: dict[str, tuple[str, str]] = {
    "squad": ("SQuAD v1.1", _SQUAD_CITATION),
    "rajpurkar/squad": ("SQuAD v1.1", _SQUAD_CITATION),
    "glue": ("GLUE", _GLUE_CITATION),
    "nyu-mll/glue": ("GLUE", _GLUE_CITATION),
}
# (dataset_name, dataset_config_name) -> its copy in a data directory / inside the package.
LOCAL_DATASETS: dict[tuple[str, str | None], LocalDataset] = {
    hub_id: known.local for known in KNOWN_DATASETS for hub_id in known.hub_ids
}
BUNDLED_DATASETS: dict[tuple[str, str | None], LocalDataset] = {
    hub_id: known.bundled for known in KNOWN_DATASETS if known.bundled for hub_id in known.hub_ids
}
# dataset_name -> (title, citation), for model cards.
DATASET_CITATIONS: dict[str, tuple[str, str]] = {
    **{name: (known.title, known.citation) for known in KNOWN_DATASETS for name, _ in known.hub_ids},
    **NAME_CITATIONS,
}
DEFAULT_PRETRAINING_DATASET = ("wikitext", "wikitext-2-raw-v1")


def dataset_id(dataset_name: str, dataset_config_name: str | None) -> str:
    """A named dataset as logs name it: "glue/rte", or "imdb" without a configuration."""
    return f"{dataset_name}/{dataset_config_name}" if dataset_config_name else dataset_name


def where_a_copy_goes(
    dataset_name: str, dataset_config_name: str | None, local_dir: Path | None
) -> tuple[str, str | None, str | None]:
    """How an error names the dataset, the data directory searched (`local_dir`), and the folder a local copy has
    there (None: the dataset has no local copy), as `model_reference.hub_dataset_missing` takes them."""
    name = dataset_id(dataset_name, dataset_config_name)
    spec = LOCAL_DATASETS.get((dataset_name, dataset_config_name)) or LOCAL_DATASETS.get((dataset_name, None))
    return f"Dataset {name}", str(local_dir) if local_dir else None, spec.folder if spec else None


def check_named_dataset(dataset_name: str, dataset_config_name: str | None, cache_dir: str | None = None) -> None:
    """Fail at once, in `hf_bertscratch.data.load_raw_datasets`' words, when a named dataset, with no data directory
    to hold a copy, would come from the Hub and cannot: the Hub cannot be reached (`check_hub_dataset`), or offline
    mode is on and no cache holds it (`in_datasets_cache`; `cache_dir`: the command's --cache_dir)."""
    if (dataset_name, dataset_config_name) in BUNDLED_DATASETS or (dataset_name, None) in BUNDLED_DATASETS:
        return  # shipped inside the package
    where = where_a_copy_goes(dataset_name, dataset_config_name, None)
    check_hub_dataset(*where)
    if datasets_offline_variable() and not in_datasets_cache(dataset_name, cache_dir):
        raise hub_dataset_missing(*where, offline_not_cached())


__all__ = [
    "BUNDLED_DATASETS",
    "DATASET_CITATIONS",
    "DEFAULT_PRETRAINING_DATASET",
    "KNOWN_DATASETS",
    "LOCAL_DATASETS",
    "NAME_CITATIONS",
    "KnownDataset",
    "LocalDataset",
    "check_named_dataset",
    "dataset_id",
    "where_a_copy_goes",
]
