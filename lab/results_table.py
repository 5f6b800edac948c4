"""Write the fine-tuning results table from a reproduce_results.sh folder (see lab/results.py)."""

from lab.results import main

if __name__ == "__main__":
    main()
