"""Compare pretraining recipes for the same wall-clock budget: see `python scripts/sweep_pretraining.py --help`."""

from hf_bertscratch.sweep import main

if __name__ == "__main__":
    main()
