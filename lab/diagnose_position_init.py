"""Why a small BERT stays on the MLM unigram plateau, and what the position-embedding start does about it.

Also the plateau probe that the pretraining sweep shares (`neighbour_weight`).

The exploratory loop behind the table in docs/design.md ("Position embeddings that start as sinusoids"),
run as `lab/diagnose_position_init.py`: this package's `BertScratchForMaskedLM` and transformers'
`DataCollatorForLanguageModeling` in a plain PyTorch loop, with a probe every 100 steps on 64 held-out blocks:
per-layer attention entropy, "neighbour attention" (the mean attention weight on the tokens just before and after;
2/(T-1) when uniform), word and position embedding norms, and the held-out MLM loss. The table's rows are
`bash lab/record_position_init.sh` (each run's `--output_json` record in results/position-init/), that is:

    python -m lab.diagnose_position_init --tokenizer TOK --train_file ../shared/data/imdb/train.csv.gz \\
        --lr 3e-3 --beta2 0.98 --stop 1200 [--posinit normal | --posinit normal --posscale 5 |
                                            --posinit sin --posscale 1 | 2.5 | 5 | 15]

with `--posscale` times `--init` (0.02) the starting std (sin 2.5 = std 0.05, pretrain.py's default), and TOK an
8,192-token WordPiece trained on the same text (`bertscratch train-tokenizer --train_file
../shared/data/imdb/train.csv.gz --text_column text --vocab_size 8192 --output_dir TOK`); the sinusoid start is the same table as
`BertScratchConfig(sinusoidal_position_std=...)` (`modeling_bertscratch.sinusoidal_table`), applied after BERT's
normal init so the other weights draw the same random numbers as with `--posinit normal`.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import os
import sys
import time

import numpy as np
import torch
from transformers import AutoTokenizer, DataCollatorForLanguageModeling, get_linear_schedule_with_warmup

from hf_bertscratch.configuration_bertscratch import PRESETS, BertScratchConfig
from hf_bertscratch.modeling_bertscratch import BertScratchForMaskedLM, sinusoidal_table

from .report_format import Sources

PROGRAM = "python -m lab.diagnose_position_init"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--tokenizer", required=True, help="Tokenizer folder (a WordPiece trained on the same text).")
    p.add_argument("--train_file", required=True, help="csv(.gz) with a 'text' column (the IMDB train reviews).")
    p.add_argument("--cache_dir", default="runs/diagnose_cache", help="Where the packed token blocks are cached.")
    p.add_argument("--lr", type=float, default=1e-3, help="Peak AdamW learning rate.")
    p.add_argument("--bs", type=int, default=64, help="Blocks per step.")
    p.add_argument("--steps", type=int, default=3000, help="Length of the linear schedule.")
    p.add_argument("--stop", type=int, default=10**9, help="Stop after this many steps (the schedule is --steps).")
    p.add_argument("--warmup", type=int, default=300, help="Warm-up steps.")
    p.add_argument("--mlm", type=float, default=0.15, help="Masking probability.")
    p.add_argument("--seq", type=int, default=128, help="Block length in tokens, [CLS] and [SEP] included.")
    p.add_argument("--beta2", type=float, default=0.999, help="AdamW beta2.")
    p.add_argument("--size", default="tiny", choices=sorted(PRESETS), help="Model size preset.")
    p.add_argument("--posinit", default="normal", choices=["normal", "sin"], help="Position embedding start.")
    p.add_argument("--posscale", type=float, default=1.0, help="Position embedding std, in units of --init.")
    p.add_argument("--init", type=float, default=0.02, help="initializer_range.")
    p.add_argument("--dropout", type=float, default=0.1, help="Hidden and attention dropout.")
    p.add_argument("--wd", type=float, default=0.01, help="Weight decay (matrices only).")
    p.add_argument("--clip", type=float, default=1.0, help="Gradient-norm clip.")
    p.add_argument("--save", default=None, help="Save the model and tokenizer here at the end.")
    p.add_argument(
        "--output_json",
        default=None,
        help="Also write the record here (e.g. results/position-init/NAME.json): how the run was made (command, "
        "commit, date, versions, CPU, load, arguments) and every probe; docs/design.md's table is rendered from them.",
    )
    return p.parse_args(argv)


def neighbour_weight(attention: torch.Tensor) -> float:
    """Mean attention weight on the previous plus the next token, of (B, heads, T, T) attention probabilities.

    2/(T-1) when attention is uniform (0.016 at T=128); far higher once a layer reads its neighbours, the first
    thing a masked LM must learn to leave the unigram plateau.
    """
    index = torch.arange(attention.shape[-1])
    return float(attention[..., index[1:], index[:-1]].mean() + attention[..., index[:-1], index[1:]].mean())


def packed_blocks(tok, train_file: str, seq: int, cache_dir: str) -> np.ndarray:
    """The training text as [CLS] ... [SEP] blocks of `seq` tokens (cached as .npy)."""
    cache = os.path.join(cache_dir, f"ids_{seq}.npy")
    if os.path.exists(cache):
        return np.load(cache)
    with gzip.open(train_file, "rt") if train_file.endswith(".gz") else open(train_file) as handle:
        texts = [row["text"] for row in csv.DictReader(handle)]
    ids = [t for s in tok(texts, add_special_tokens=False)["input_ids"] for t in s]
    body = seq - 2
    n = len(ids) // body
    arr = np.array(ids[: n * body]).reshape(n, body)
    blocks = np.concatenate([np.full((n, 1), tok.cls_token_id), arr, np.full((n, 1), tok.sep_token_id)], 1)
    os.makedirs(cache_dir, exist_ok=True)
    np.save(cache, blocks)
    return blocks


# ------------------------------------------------------------------------------------------------- the record's table
POSITION_RECORDS = "results/position-init"
POSITION_BLOCK = ("<!-- position-init:start -->\n", "<!-- position-init:end -->")
# The steps at which the position-start table shows each run's probe.
POSITION_STEPS = (600, 1000)
POSITION_SEQ = 128  # the block length of the rows that do not name theirs


def render_position_table(records: dict[str, dict]) -> str:
    """`lab/diagnose_position_init.py --output_json` records (file name -> record) as docs/design.md's table: per
    start of the position embeddings, layer 1's neighbour attention and the held-out MLM loss at `POSITION_STEPS`
    (blank where a run stopped earlier), then the records and how they were made."""
    if not records:
        return f"No record in `{POSITION_RECORDS}/` yet: `bash lab/record_position_init.sh` writes them.\n"
    steps = [f"step {step:,}" for step in POSITION_STEPS]
    lines = [
        "| position embeddings start as | flags | "
        + " | ".join(f"neighbour attention, {s} | held-out MLM loss, {s}" for s in steps)
        + " |",
        "| --- | --- |" + " ---: | ---: |" * len(steps),
    ]
    order = sorted(
        records.items(),
        key=lambda item: tuple(item[1]["arguments"][key] for key in ("seq", "posinit", "posscale")),
    )
    for _, record in order:
        arguments = record["arguments"]
        std = arguments["posscale"] * arguments["init"]
        sinusoid = arguments["posinit"] == "sin"
        what = f"sinusoid, std {std:g}" if sinusoid else f"N(0, {std:g})"
        if not sinusoid and round(std, 6) == 0.02:
            what += ", BERT's init"
        flags = f"--posinit {arguments['posinit']} --posscale {arguments['posscale']:g}"
        if arguments["seq"] != POSITION_SEQ:  # the table's block length is the pretraining's
            what, flags = f"{what}, on {arguments['seq']}-token blocks", f"{flags} --seq {arguments['seq']}"
        flags = f"`{flags}`"
        probes = {probe["step"]: probe for probe in record["probes"]}
        cells = []
        for step in POSITION_STEPS:
            probe = probes.get(step)
            cells += [f"{probe['nb'][0]:.3f}", f"{probe['heldloss']:.2f}"] if probe else ["", ""]
        lines.append(f"| {what} | {flags} | " + " | ".join(cells) + " |")
    made = sorted({(r["cpu"], r["date"][:10], r["commit"] or "unknown") for r in records.values()})
    where = "; ".join(f"{cpu}, {date}, commit {commit}" for cpu, date, commit in made)
    # each run's command up to its start of the position embeddings (the rest: --posinit P --posscale S ...)
    commands = " or ".join(f"`{c} --posinit P --posscale S ...`" for c in
                           sorted({r["command"].split(" --posinit")[0] for r in records.values()}))  # fmt: skip
    return "\n".join(
        [*lines, "", f"Records: `{POSITION_RECORDS}/` ({where}), made by `bash lab/record_position_init.sh`, "
         f"each {commands}."]
    ) + "\n"  # fmt: skip


def position_block(sources: Sources) -> str:
    """docs/design.md's position-start block: every record of `POSITION_RECORDS`."""
    return render_position_table(sources.records(POSITION_RECORDS))


def main(argv: list[str] | None = None) -> list[dict]:
    """Run the loop (see the module docstring and `--help`); returns the probes, one per 100 steps."""
    from hf_bertscratch.records import RunStart, run_record, write_record

    argv = list(sys.argv[1:] if argv is None else argv)
    start = RunStart.now()
    a = parse_args(argv)
    print(a, flush=True)
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(a.tokenizer)
    blocks = packed_blocks(tok, a.train_file, a.seq, a.cache_dir)
    print("blocks", blocks.shape, flush=True)
    cfg = BertScratchConfig(
        **PRESETS[a.size],
        vocab_size=len(tok),
        pad_token_id=0,
        hidden_dropout_prob=a.dropout,
        attention_probs_dropout_prob=a.dropout,
        initializer_range=a.init,
    )
    model = BertScratchForMaskedLM(cfg)
    pe = model.bert.embeddings.position_embeddings.weight
    with torch.no_grad():
        if a.posinit == "sin":
            table = sinusoidal_table(pe.shape[0], pe.shape[1])
            pe.copy_(table * (a.posscale * a.init / table.std()))
        elif a.posscale != 1:
            pe.mul_(a.posscale)
    coll = DataCollatorForLanguageModeling(tok, mlm_probability=a.mlm)
    decay = [p for p in model.parameters() if p.dim() > 1]
    nodecay = [p for p in model.parameters() if p.dim() <= 1]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": a.wd}, {"params": nodecay, "weight_decay": 0.0}],
        lr=a.lr,
        betas=(0.9, a.beta2),
        eps=1e-6,
    )
    sch = get_linear_schedule_with_warmup(opt, a.warmup, a.steps)
    rng = np.random.default_rng(0)
    held, train = torch.tensor(blocks[-64:]), blocks[:-64]

    def probe() -> dict:
        model.eval()
        with torch.no_grad():
            out = model.bert(held[:16], output_attentions=True)
            ent = [float(-(att.clamp_min(1e-9).log() * att).sum(-1).mean()) for att in out.attentions]
            nb = [neighbour_weight(att) for att in out.attentions]
            e = model.bert.embeddings
            torch.manual_seed(123)
            loss = float(model(**coll([{"input_ids": x} for x in held.tolist()])).loss)
        model.train()
        return dict(
            ent=[round(x, 2) for x in ent],
            nb=[round(x, 3) for x in nb],
            wnorm=round(float(e.word_embeddings.weight.norm(dim=1).mean()), 3),
            pnorm=round(float(e.position_embeddings.weight[: a.seq].norm(dim=1).mean()), 3),
            heldloss=round(loss, 3),
        )

    t0, run, probes = time.time(), 0.0, []
    for step in range(1, min(a.steps, a.stop) + 1):
        batch = coll([{"input_ids": x} for x in train[rng.integers(0, len(train), a.bs)].tolist()])
        loss = model(**batch).loss
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        opt.step()
        sch.step()
        opt.zero_grad(set_to_none=True)
        run = 0.98 * run + 0.02 * loss.item() if step > 1 else loss.item()
        if step % 100 == 0:  # step, seconds, smoothed training loss, gradient norm, probe
            seconds, smoothed, found = time.time() - t0, round(run / (1 - 0.98**step), 3), probe()
            print(step, f"{seconds:.0f}s", smoothed, f"gn {gn:.2f}", found, flush=True)
            probes.append({"step": step, "seconds": round(seconds, 1), "train_loss": smoothed, **found})
    if a.save:
        model.save_pretrained(a.save)
        tok.save_pretrained(a.save)
    if a.output_json:
        record = {**run_record(PROGRAM, argv, vars(a), start, onnxruntime=False), "probes": probes}
        write_record(a.output_json, record)
    return probes


if __name__ == "__main__":
    main()
