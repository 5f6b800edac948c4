"""Benchmark BertScratch against transformers' BertForMaskedLM; see `python scripts/benchmark.py --help`."""

from hf_bertscratch.benchmark import main

if __name__ == "__main__":
    main()
