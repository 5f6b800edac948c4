"""Compare pretraining recipes (masked-LM, ELECTRA, masked-LM + the tasks' own text, the mini shape) at equal CPU
time, by their fine-tuned scores on the task table (see lab/pretraining_comparison.py and --help)."""

from lab.pretraining_comparison import main

if __name__ == "__main__":
    main()
