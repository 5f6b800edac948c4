"""Parity and MLM step time, JAX against torch: see `python scripts/benchmark_flax.py --help`."""

from hf_bertscratch.flax.benchmark import main

if __name__ == "__main__":
    main()
