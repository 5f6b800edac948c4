"""Compare pretraining recipes for the same wall-clock budget: see `python -m lab.sweep_pretraining --help`."""

from lab.sweep import main

if __name__ == "__main__":
    main()
