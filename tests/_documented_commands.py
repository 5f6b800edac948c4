"""The machinery of tests/test_documented_commands.py: read the pages' commands, make their data, run them.

Reading: `page_commands(repo, page)` reads a Markdown page's fenced `bash`, `sh`, `shell` and `console` blocks and
returns its commands in page order, each with the page line it starts on. What it understands of the shell is what
the pages write: `\\` line continuations, `#` comments, `$ ` prompts (in a `console` block only prompted lines are
commands; the rest is output), `NAME=value` assignments and `$NAME` / `${NAME}` uses of them, and
`for NAME in WORDS; do ... done` loops (one command per iteration and body line). Anything else the shell would do
(`&&`, pipes, `;`, redirections, `export`) is kept as one command whose `program` is "shell": the runner does not run
those, so each needs an entry in the test's skip table.

Data: `write_data_dir` writes a data directory with the layout of ../shared/data (a few dozen made-up rows per
dataset); `write_user_files` the files of "your own data" a page names, in the formats the page shows.

Running: `run_in_process` runs `bertscratch ...`, `python FILE.py ...` or `python -m MODULE ...` in this process.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import json
import logging
import os
import random
import re
import runpy
import shlex
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SHELL_LANGUAGES = frozenset({"bash", "sh", "shell", "console"})
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)")
ASSIGNMENT = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>\S*)$")
FOR_LOOP = re.compile(r"^for\s+(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s+in\s+(?P<words>[^;]*);\s*do$")
REGION = re.compile(r"<!--\s*(?P<name>[\w-]+):(?P<edge>start|end)\s*-->")
VARIABLE = re.compile(r"\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)\}|(?P<plain>[A-Za-z_][A-Za-z0-9_]*))")
# Shell syntax the runner does not interpret: a command holding any of these (outside quotes) is "shell".
SHELL_OPERATORS = frozenset({"&&", "||", "|", ";", ">", ">>", "<", "&", "(", ")"})
SHELL_BUILTINS = frozenset({"export", ".", "source", "cd"})


@dataclass(frozen=True)
class Command:
    """One documented command, as the page shows it and as it is run.

    Attributes:
        page: the page's path relative to the repository (`README.md`, `docs/pretraining.md`).
        line: the page line the command starts on (1-based).
        text: the command as the page writes it: continuation lines joined, the trailing comment dropped, variables
            of the page not yet expanded.
        argv: the words the shell would run, variables expanded; empty for a command the runner cannot parse.
        loop: "NAME=value" for a command of a `for` loop's iteration, else "".
        region: the generated block of the page the command sits in (`<!-- NAME:start -->` ... `<!-- NAME:end -->`,
            the blocks `python -m lab.make_report` rewrites from records), else "".
        shell: True when the command uses shell syntax beyond words and variables (see the module docstring).
    """

    page: str
    line: int
    text: str
    argv: tuple[str, ...]
    loop: str = ""
    region: str = ""
    shell: bool = False

    @property
    def id(self) -> str:
        """The pytest id: `page:line`, with the loop iteration for a loop's commands."""
        return f"{self.page}:{self.line}" + (f"[{self.loop}]" if self.loop else "")

    @property
    def program(self) -> str:
        """What runs it: "bertscratch", "python scripts/NAME.py", "python -m MODULE", "shell", or its first word."""
        if self.shell or not self.argv:
            return "shell"
        words = self.argv
        if words[0] in ("python", "python3") and len(words) > 1:
            return f"python -m {words[2]}" if words[1] == "-m" and len(words) > 2 else f"python {words[1]}"
        return words[0]


@dataclass(frozen=True)
class _Line:
    number: int
    text: str


def _shell_blocks(text: str) -> Iterator[tuple[str, str, list[_Line]]]:
    """(language, region, lines) of each fenced block in a shell language, lines numbered as on the page."""
    lines = text.splitlines()
    index = 0
    region = ""
    while index < len(lines):
        marker = REGION.search(lines[index])
        if marker:
            region = marker["name"] if marker["edge"] == "start" else ""
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        fence, language = opening["fence"], opening["info"].lower()
        body: list[_Line] = []
        index += 1
        while index < len(lines) and not lines[index].strip().startswith(fence[0] * len(fence)):
            body.append(_Line(index + 1, lines[index]))
            index += 1
        index += 1  # the closing fence
        if language in SHELL_LANGUAGES:
            yield language, region, body


def _logical_lines(language: str, body: list[_Line]) -> Iterator[_Line]:
    """The block's commands one per item: prompts removed, continuations joined, blank and comment lines dropped."""
    pending: list[str] = []
    start = 0
    for line in body:
        text = line.text.rstrip()
        if not pending:
            if language == "console":
                if not text.lstrip().startswith("$ "):
                    continue  # output shown after a prompted command
                text = text.lstrip()[2:]
            if not text.strip() or text.lstrip().startswith("#"):
                continue
            start = line.number
        if text.endswith("\\"):
            pending.append(text[:-1])
            continue
        pending.append(text)
        yield _Line(start, " ".join(part.strip() for part in pending))
        pending = []
    if pending:
        yield _Line(start, " ".join(part.strip() for part in pending))


def _words(text: str) -> tuple[list[str], bool]:
    """The command's words with its comment dropped, and whether it uses shell syntax beyond words."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    words = list(lexer)
    shell = any(word in SHELL_OPERATORS or set(word) <= set("&|;<>()") for word in words)
    return words, shell or (bool(words) and words[0] in SHELL_BUILTINS)


def split_command(text: str) -> tuple[str, ...]:
    """The words of a one-line command without shell syntax (a table's command, written as a page writes it)."""
    words, shell = _words(text)
    if shell:
        raise ValueError(f"{text!r} uses shell syntax the runner does not run")
    return tuple(words)


def _without_comment(text: str) -> str:
    """The command as written, up to its trailing comment (a `#` outside quotes that starts a word)."""
    quote = ""
    for position, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (position == 0 or text[position - 1].isspace()):
            return text[:position].rstrip()
    return text.rstrip()


def _expand(text: str, variables: dict[str, str]) -> str:
    """`$NAME` and `${NAME}` replaced by the page's values (unknown names stay as written, so the run names them)."""
    return VARIABLE.sub(lambda m: variables.get(m["braced"] or m["plain"], m[0]), text)


def page_commands(repo: Path, page: str) -> list[Command]:
    """Every command of `page`'s shell blocks, in page order (a loop's commands iteration by iteration)."""
    commands: list[Command] = []
    variables: dict[str, str] = {}
    for language, region, body in _shell_blocks((repo / page).read_text(encoding="utf-8")):
        lines = list(_logical_lines(language, body))
        index = 0
        while index < len(lines):
            line = lines[index]
            text = _without_comment(line.text)
            loop = FOR_LOOP.match(text)
            if loop:
                end = next((i for i in range(index + 1, len(lines)) if lines[i].text.strip() == "done"), len(lines))
                for value in shlex.split(_expand(loop["words"], variables)):
                    scope = {**variables, loop["name"]: value}
                    for inner in lines[index + 1 : end]:
                        commands.append(_command(page, inner, scope, region, f"{loop['name']}={value}"))
                index = end + 1
                continue
            assignment = ASSIGNMENT.match(text)
            if assignment:
                variables[assignment["name"]] = _expand(assignment["value"], variables)
            else:
                commands.append(_command(page, line, variables, region))
            index += 1
    return commands


def _command(page: str, line: _Line, variables: dict[str, str], region: str, loop: str = "") -> Command:
    text = _without_comment(line.text)
    try:
        argv, shell = _words(_expand(text, variables))
    except ValueError:  # unbalanced quotes: not a command the runner can run
        argv, shell = [], True
    return Command(page, line.number, text, tuple(argv), loop, region, shell)


# ------------------------------------------------------------------------------------------------ tiny data

SUBJECTS = "the cat|the dog|a man|a woman|the city|the river|the film|the actor|paris|london|george washington".split(
    "|"
)
VERBS = "sat on|ran to|looked at|went to|played with|talked about|saw|liked|hated|found".split("|")
OBJECTS = "the mat|the park|a guitar|the house|an instrument|the capital of france|the story|the plot|a river".split(
    "|"
)
POSITIVE = "wonderful great good best lovely fine".split()
NEGATIVE = "boring bad terrible worst dull awful".split()


def sentence(rng: random.Random, mood: str = "") -> str:
    """A short English-like sentence; with `mood` "pos" or "neg", one word of that sentiment in it."""
    words = [rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(OBJECTS)]
    if mood:
        words.append(f"and it was {rng.choice(POSITIVE if mood == 'pos' else NEGATIVE)}")
    return " ".join(words) + " ."


def _write_tsv(path: Path, header: list[str] | None, rows: list[list[object]], bom: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = (["\t".join(header)] if header else []) + ["\t".join(str(value) for value in row) for row in rows]
    path.write_text(("\ufeff" if bom else "") + "\n".join(lines) + "\n", encoding="utf-8")


def _conll(rng: random.Random, sentences: int) -> str:
    """CoNLL-2003 text: `word POS chunk TAG` lines, a blank line between sentences, a -DOCSTART- line first."""
    entities = [("George Washington", "PER"), ("Paris", "LOC"), ("London", "LOC"), ("Reuters", "ORG"), ("EU", "ORG")]
    lines = ["-DOCSTART- -X- -X- O", ""]
    for _ in range(sentences):
        name, kind = rng.choice(entities)
        for position, word in enumerate(name.split()):
            lines.append(f"{word} NNP B-NP {'B' if position == 0 else 'I'}-{kind}")
        for word in f"{rng.choice(VERBS)} {rng.choice(OBJECTS)} .".split():
            lines.append(f"{word} NN I-NP O")
        lines.append("")
    return "\n".join(lines) + "\n"


def write_data_dir(data_dir: Path, rows: int = 40) -> None:
    """A data directory with the layout of ../shared/data (see `hf_bertscratch.data.KNOWN_DATASETS`), `rows`
    examples per split, for every dataset the documented commands name."""
    rng = random.Random(0)
    for split, count in (("train", rows), ("dev", rows // 2)):
        moods = ["pos" if i % 2 else "neg" for i in range(count)]
        _write_tsv(
            data_dir / "sst2" / f"{split}.tsv",
            ["sentence", "label"],
            [[sentence(rng, mood), int(mood == "pos")] for mood in moods],
        )
        _write_tsv(
            data_dir / "glue/CoLA" / f"{split}.tsv", None, [["gj04", i % 2, "", sentence(rng)] for i in range(count)]
        )
        pairs = [(sentence(rng), sentence(rng)) for _ in range(count)]
        _write_tsv(
            data_dir / "glue/MRPC" / f"{split}.tsv",
            ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"],
            [[i % 2, 100 + i, 200 + i, a, b] for i, (a, b) in enumerate(pairs)],
            bom=True,
        )
        _write_tsv(
            data_dir / "glue/STS-B" / f"{split}.tsv",
            ["index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1", "sentence2",
             "score"],
            [[i, "main-captions", "MSRvid", "2012test", i, "none", "none", a, b, f"{rng.uniform(0, 5):.3f}"]
             for i, (a, b) in enumerate(pairs)],
        )  # fmt: skip
        for task, labels in (("RTE", ("entailment", "not_entailment")), ("WNLI", (0, 1))):
            _write_tsv(
                data_dir / "glue" / task / f"{split}.tsv",
                ["index", "sentence1", "sentence2", "label"],
                [[i, a, b, labels[i % 2]] for i, (a, b) in enumerate(pairs)],
            )
    (data_dir / "imdb").mkdir(parents=True, exist_ok=True)
    for split in ("train", "test"):
        table = io.StringIO()
        writer = csv.writer(table)
        writer.writerow(["id", "rating", "label", "text"])
        for i in range(rows):
            review = " ".join(sentence(rng, "pos" if i % 2 else "neg") for _ in range(rng.randint(2, 12)))
            writer.writerow([i, 8 if i % 2 else 2, i % 2, review])
        (data_dir / "imdb" / f"{split}.csv.gz").write_bytes(gzip.compress(table.getvalue().encode("utf-8")))
    (data_dir / "conll2003").mkdir(parents=True, exist_ok=True)
    for split in ("train", "valid", "test"):
        (data_dir / "conll2003" / f"{split}.txt").write_text(_conll(rng, rows), encoding="utf-8")
    wikitext = data_dir / "wikitext-2-raw"
    (wikitext / "train_split_5").mkdir(parents=True, exist_ok=True)
    for name, articles in (("train_split_5/train_0.txt", 12), ("wiki.valid.raw", 3), ("wiki.test.raw", 3)):
        (wikitext / name).write_text(_wikitext(rng, articles), encoding="utf-8")


def _wikitext(rng: random.Random, articles: int) -> str:
    """WikiText-2 raw's layout: ` = Title = ` headings, paragraphs of sentences, blank lines between them."""
    lines = []
    for article in range(articles):
        lines += ["", f" = Article {article} = ", ""]
        for _ in range(4):
            lines += [" " + " ".join(sentence(rng) for _ in range(rng.randint(3, 6))), ""]
    return "\n".join(lines) + "\n"


def _csv(header: list[str], rows: list[list[object]]) -> str:
    table = io.StringIO()
    writer = csv.writer(table, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return table.getvalue()


def _jsonl(records: list[dict[str, object]]) -> str:
    return "".join(json.dumps(record) + "\n" for record in records)


def _tagged(rng: random.Random, kinds: tuple[str, ...] = ("ORG", "LOC")) -> tuple[list[str], list[str]]:
    """Words and their IOB2 tags: a person, a verb, and a name of one of `kinds` (ORG, LOC, MISC)."""
    names = {"ORG": ["Acme", "Corp"], "LOC": ["Washington"], "MISC": ["Dune"]}
    kind = rng.choice(kinds)
    words = ["George", "Washington", "went", "to", *names[kind], "."]
    tags = ["B-PER", "I-PER", "O", "O", *[f"{'B' if i == 0 else 'I'}-{kind}" for i in range(len(names[kind]))], "O"]
    return words, tags


TAG_IDS = {"O": 0, "B-PER": 1, "I-PER": 2, "B-ORG": 3, "I-ORG": 4, "B-LOC": 5, "I-LOC": 6}


def _qa_example(rng: random.Random, index: int) -> tuple[str, str, str, str, int]:
    """(id, question, context, answer, answer_start) with the answer at its offset in the context."""
    who, what = rng.choice(SUBJECTS), rng.choice(OBJECTS)
    context = f"{sentence(rng)} {who} went to {what} . {sentence(rng)}"
    return f"q{index}", f"Who went to {what} ?", context, who, context.index(f"{who} went")


def _user_file(name: str, page: str, rng: random.Random, count: int) -> str:
    """The content of a "your own data" file the pages name, in the format the page shows for it."""
    stem = name.rsplit(".", 1)[0].removesuffix("-train").removesuffix("-dev").removesuffix("-dev-misc")
    pairs = [(sentence(rng), sentence(rng)) for _ in range(count)]
    if name == "notes.txt":  # raw text: documents apart by blank lines
        return "\n".join(sentence(rng) if i % 8 else "" for i in range(25 * count)) + "\n"
    if name == "reviews.txt":  # texts to classify, one per line
        return "\n".join(sentence(rng) for _ in range(count)) + "\n"
    if name in ("train.csv", "dev.csv"):
        return _csv(["review", "stars"], [[sentence(rng), ("bad", "ok", "good")[i % 3]] for i in range(count)])
    if name == "sentiment-test.csv":  # a test file without labels, to be predicted
        return _csv(["text"], [[sentence(rng, "pos" if i % 2 else "neg")] for i in range(count)])
    if stem == "sentiment":
        rows = [[sentence(rng, "pos" if i % 2 else "neg") + ", it said", ("negative", "positive")[i % 2]]
                for i in range(count)]  # fmt: skip
        return _csv(["text", "label"], rows)
    if stem == "reviews":
        return _csv(["review", "stars"], [[sentence(rng), i % 3] for i in range(count)])
    if stem == "sentences":  # texts to classify in the column GLUE's SST-2 has them in
        return _csv(["sentence"], [[sentence(rng)] for _ in range(count)])
    if stem == "nli":
        labels = ("entailment", "neutral", "contradiction")
        return _jsonl([{"premise": a, "hypothesis": b, "label": labels[i % 3]} for i, (a, b) in enumerate(pairs)])
    if stem == "sts":
        return _csv(["sentence1", "sentence2", "score"], [[a, b, round(rng.uniform(0, 5), 2)] for a, b in pairs])
    if stem == "stars":
        return _jsonl([{"text": sentence(rng), "stars": round(rng.uniform(1, 5), 1)} for _ in range(count)])
    if stem == "emotions":  # multi-label: a JSON list of labels per row, some empty
        emotions = ("anger", "joy", "surprise")
        return _jsonl(
            [
                {"text": sentence(rng), "emotions": [e for j, e in enumerate(emotions) if (i >> j) & 1]}
                for i in range(count)
            ]
        )
    if stem == "topics":  # multi-label: a tsv field of labels separated by "|", some empty
        topics = ("economy", "politics", "sport")
        rows = [[sentence(rng), "|".join(t for j, t in enumerate(topics) if (i >> j) & 1)] for i in range(count)]
        return "".join("\t".join(row) + "\n" for row in [["text", "topics"], *rows])
    if stem == "paraphrase":
        return _csv(["question1", "question2", "label"], [[a, b, i % 2] for i, (a, b) in enumerate(pairs)])
    if name == "ner-test.txt":  # CoNLL's layout of words alone: a test file without tags, to be predicted
        return "".join("".join(f"{w}\n" for w in _tagged(rng, ("ORG", "LOC"))[0]) + "\n" for _ in range(count))
    if stem == "ner" and name.endswith(".txt"):  # CoNLL's layout: `word POS chunk TAG`, sentences apart
        sentences = [_tagged(rng, ("ORG", "LOC")) for _ in range(count)]
        return "".join("".join(f"{w} NN I-NP {t}\n" for w, t in zip(*pair)) + "\n" for pair in sentences)
    if stem == "ner":  # README names the columns words and labels (its command's flags), Fine-tuning the defaults
        columns = ("words", "labels") if page == "README.md" else ("tokens", "ner_tags")
        kinds = ("MISC",) if name.endswith("-misc.jsonl") else ("ORG", "LOC")  # MISC: a tag the train file lacks
        return _jsonl([dict(zip(columns, _tagged(rng, kinds))) for _ in range(count)])
    if stem == "ner-ids":
        records = []
        for _ in range(count):
            words, tags = _tagged(rng)
            records.append({"words": words, "labels": [TAG_IDS[tag] for tag in tags]})
        return _jsonl(records)
    if stem == "qa":
        records = []
        for i in range(count):
            id_, question, context, answer, start = _qa_example(rng, i)
            answers = {"text": [answer], "answer_start": [start]}
            records.append({"id": id_, "question": question, "context": context, "answers": answers})
        return _jsonl(records)
    if stem == "squad":
        paragraphs = []
        for i in range(count):
            id_, question, context, answer, start = _qa_example(rng, i)
            qas = [{"id": id_, "question": question, "answers": [{"text": answer, "answer_start": start}]}]
            paragraphs.append({"context": context, "qas": qas})
        return json.dumps({"version": "1.1", "data": [{"title": "Travels", "paragraphs": paragraphs}]})
    raise ValueError(f"no content for {name!r}: add it to _user_file")


# The files of "your own data" each page's commands name (squad-*.json: also what the stand-in of `--task squad`,
# which needs the Hub, trains on; see the skip table).
USER_FILES: dict[str, tuple[str, ...]] = {
    "README.md": (
        "notes.txt", "train.csv", "dev.csv", "ner.jsonl", "ner-dev.jsonl", "squad-train.json", "squad-dev.json",
        "emotions-train.jsonl", "emotions-dev.jsonl",
    ),
    "docs/fine-tuning.md": tuple(
        f"{stem}-{split}.{extension}"
        for stem, extension in (
            ("sentiment", "csv"), ("reviews", "csv"), ("nli", "jsonl"), ("sts", "csv"), ("stars", "jsonl"),
            ("ner", "jsonl"), ("ner", "txt"), ("ner-ids", "jsonl"), ("qa", "jsonl"), ("squad", "json"),
            ("paraphrase", "csv"), ("emotions", "jsonl"), ("topics", "tsv"),
        )
        for split in ("train", "dev")
    ) + ("ner-dev-misc.jsonl", "sentiment-test.csv", "ner-test.txt"),
    "docs/using-a-model.md": ("reviews.txt", "reviews.csv", "sentences.csv"),
}  # fmt: skip


def write_user_files(folder: Path, page: str, rows: int = 40) -> None:
    """Write the files of "your own data" that `page`'s commands name into `folder` (`USER_FILES`), in the formats
    the pages show, `rows` examples each (half as many in a dev file)."""
    rng = random.Random(1)
    for name in USER_FILES.get(page, ()):
        count = rows // 2 if "-dev" in name or name.startswith("dev") else rows
        (folder / name).write_text(_user_file(name, page, rng, count), encoding="utf-8")


# ------------------------------------------------------------------------------------------------ running


@dataclass(frozen=True)
class Outcome:
    """How a command ended: its exit status and everything it printed or logged."""

    status: int
    output: str

    @property
    def error(self) -> str:
        """The command's last line that names an error (the one-line error `bertscratch` prints), else its last line."""
        lines = [line.strip() for line in self.output.splitlines() if line.strip()]
        errors = [line for line in lines if re.search(r"error|Error|Exception", line)]
        return (errors or lines or ["(no output)"])[-1][:500]


def exit_status(code: object) -> int:
    """The exit status `SystemExit(code)` gives the shell."""
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


def run_in_process(argv: list[str], cwd: Path, environment: dict[str, str]) -> Outcome:
    """Run `bertscratch ...`, `python FILE.py ...` or `python -m MODULE ...` in this process, as the shell would in
    `cwd`.

    `bertscratch` is `hf_bertscratch_cli.dispatch.main`, and a script or module is run as `__main__` (what the console script
    and `python` run), so a command costs its own work, not a new interpreter's imports. The working directory,
    `environment`, `sys.argv`, the process environment and torch's thread count are put back afterwards; so are the
    settings huggingface_hub and datasets read from the environment once, at import (`_import_time_settings`).
    Everything printed to stdout/stderr or logged goes into the outcome's output.
    """
    import torch

    program, python = argv[0], argv[0] in ("python", "python3")
    if program == "bertscratch":
        from hf_bertscratch_cli import dispatch

        def entry() -> None:
            dispatch.main(argv[1:])

        program_argv = list(argv)
    elif python and len(argv) > 1 and argv[1].endswith(".py"):

        def entry() -> None:
            runpy.run_path(argv[1], run_name="__main__")

        program_argv = list(argv[1:])
    elif python and len(argv) > 2 and argv[1] == "-m":

        def entry() -> None:
            runpy.run_module(argv[2], run_name="__main__", alter_sys=True)

        program_argv = list(argv[2:])
    else:
        return Outcome(127, f"{program}: this runner runs `bertscratch`, `python FILE.py` and `python -m MODULE` only")

    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    saved_environment, saved_threads, saved_cwd = dict(os.environ), torch.get_num_threads(), os.getcwd()
    root = logging.getLogger()
    with contextlib.ExitStack() as stack:
        patch = stack.enter_context(pytest.MonkeyPatch.context())
        _import_time_settings(patch, environment)
        patch.setattr(sys, "argv", program_argv)
        if python and argv[1] == "-m":
            patch.syspath_prepend(str(cwd))  # as `python -m` puts the working directory first
        stack.enter_context(contextlib.redirect_stdout(buffer))
        stack.enter_context(contextlib.redirect_stderr(buffer))
        root.addHandler(handler)
        os.environ.update(environment)
        os.chdir(cwd)
        try:
            entry()
            status = 0
        except SystemExit as stop:
            if isinstance(stop.code, str):
                print(stop.code, file=buffer)  # what the interpreter prints for such an exit
            status = exit_status(stop.code)
        except Exception:  # a script's uncaught error: what the shell would show
            traceback.print_exc(file=buffer)
            status = 1
        finally:
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_environment)
            torch.set_num_threads(saved_threads)
            root.removeHandler(handler)
    return Outcome(status, buffer.getvalue())


def _import_time_settings(patch: pytest.MonkeyPatch, environment: dict[str, str]) -> None:
    """Give huggingface_hub and datasets the `HF_HUB_OFFLINE` and `HF_DATASETS_CACHE` of `environment`: they read
    them once, when imported, which in this process was before the command."""
    import datasets
    import huggingface_hub

    if environment.get("HF_HUB_OFFLINE", "0") not in ("", "0"):
        patch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
        patch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    if "HF_DATASETS_CACHE" in environment:
        cache = Path(environment["HF_DATASETS_CACHE"])
        patch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
        patch.setattr(datasets.config, "DOWNLOADED_DATASETS_PATH", cache / "downloads")
        patch.setattr(datasets.config, "EXTRACTED_DATASETS_PATH", cache / "downloads" / "extracted")
