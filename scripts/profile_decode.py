"""Time the MLM head's inference decoding alone: one GEMM per run vs cache-sized tiles, into fresh or reused memory.

    python scripts/profile_decode.py [--num_threads 2] [--hidden_size 256] [--rows 4096] [--repeats 7]

What `BertScratchLMHead.decode_tile`'s default was measured with. Prints the median milliseconds of each variant,
interleaved, so that other load on the machine hits all of them alike.
"""

import argparse
import statistics
import time

import torch

from hf_bertscratch import BertScratchConfig
from hf_bertscratch.modeling_bertscratch import BertScratchLMHead


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num_threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument("--hidden_size", type=int, default=256, help="H of the model (mini: 256)")
    parser.add_argument("--vocab_size", type=int, default=30522, help="V (BERT's WordPiece: 30522)")
    parser.add_argument("--rows", type=int, default=4096, help="rows decoded (B x T: 32 x 128)")
    parser.add_argument("--tile", type=int, nargs=2, default=(256, 1024), help="the tiled variant's (rows, words)")
    parser.add_argument("--repeats", type=int, default=7, help="timed repetitions (the first is a warm-up)")
    args = parser.parse_args()
    torch.set_num_threads(args.num_threads)
    torch.manual_seed(0)
    head = BertScratchLMHead(
        BertScratchConfig(
            hidden_size=args.hidden_size,
            vocab_size=args.vocab_size,
            num_attention_heads=1,
            intermediate_size=4 * args.hidden_size,
        )
    ).eval()
    hidden = torch.randn(args.rows, args.hidden_size)
    runs = [(0, 0, args.rows)]
    reused = torch.empty(args.rows, args.vocab_size)

    def variant(tile: tuple[int, int] | None, reuse: bool):
        def run() -> None:
            head.decode_tile = tile
            head.decode_into(hidden, reused if reuse else torch.empty(args.rows, args.vocab_size), runs)

        return run

    variants = {
        f"{'tiles ' + 'x'.join(map(str, args.tile)) if tile else 'one GEMM'}, {'reused' if reuse else 'fresh'} "
        "output": variant(tile, reuse)
        for tile in (tuple(args.tile), None)
        for reuse in (False, True)
    }
    seconds = {name: [] for name in variants}
    with torch.inference_mode():
        for repeat in range(args.repeats):
            for name, run in variants.items() if repeat % 2 else reversed(variants.items()):
                start = time.perf_counter()
                run()
                if repeat:
                    seconds[name].append(time.perf_counter() - start)
    print(
        f"decode {args.rows} x {args.hidden_size} -> {args.vocab_size}, {args.num_threads} threads, median of "
        f"{args.repeats - 1}:"
    )
    for name, values in seconds.items():
        print(f"  {name:32s} {1000 * statistics.median(values):8.1f} ms")


if __name__ == "__main__":
    main()
