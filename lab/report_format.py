"""What every block `python -m lab.make_report` renders shares: where the records are (`Sources`), how a folder of
records is read, and the few phrases several tables write alike. The renderers live beside the lab script that makes
their records; this module imports none of them, nor `lab.make_report`.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# The workloads of a benchmark record (`hf_bertscratch.benchmark`) as the tables name them.
WORKLOADS = {
    "train": "MLM training step",
    "infer": "inference, full MLM logits",
    "encode": "inference, encoder only",
    "fill-mask": "fill-mask, one mask per row",
}


@dataclass(frozen=True)
class Sources:
    """What the generated blocks are rendered from.

    Attributes:
        root: the repository: the records are under its `results/`, and the pages name files relative to it.
        speed_records: the folder of benchmark records the speed tables and the headline read (`--records_dir`;
            `results/speed` under `root` by default).
    """

    root: Path
    speed_records: Path

    def records(self, folder: str) -> dict[str, dict]:
        """The json records in `root`/`folder`, by file name (`read_records`)."""
        return read_records(self.root, folder)

    def record(self, path: str) -> dict | None:
        """The json record at `root`/`path`, or None while it does not exist."""
        found = self.root / path
        return json.loads(found.read_text("utf-8")) if found.is_file() else None

    def render_record(self, path: str, render: Callable[[dict], str], writer: str) -> str:
        """`render` of the record at `path`, or a line naming `writer`, the command that writes it, until it exists."""
        record = self.record(path)
        return render(record) if record is not None else f"No record yet: {writer} writes it.\n"

    def shown(self, path: Path) -> str:
        """`path` as the pages name it (`shown_path`)."""
        return shown_path(path, self.root)


def read_records(root: Path, folder: str) -> dict[str, dict]:
    """The json records in `root`/`folder` (e.g. `results/int8`), by file name, in file-name order."""
    return {path.name: json.loads(path.read_text("utf-8")) for path in sorted((root / folder).glob("*.json"))}


def shown_path(path: Path, root: Path) -> str:
    """`path` under `root` (as the repository names it) where it is inside, else as given."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def padding_label(padding: float) -> str:
    """ "no padding", or "30% padding"."""
    return "no padding" if padding == 0 else f"{padding:.0%} padding"


def and_list(items: list[str]) -> str:
    """ "a", "a and b", "a, b and c"."""
    return ", ".join(items[:-1]) + " and " + items[-1] if len(items) > 1 else "".join(items)


def wrap(text: str, width: int = 118) -> str:
    """`text` broken into lines of at most `width` characters (markdown renders them as one paragraph)."""
    return "\n".join(textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False))
