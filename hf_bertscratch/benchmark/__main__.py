"""`python -m hf_bertscratch.benchmark`: the benchmark's command line (`bertscratch benchmark`,
`python scripts/benchmark.py`)."""

from hf_bertscratch.benchmark import main

if __name__ == "__main__":
    main()
