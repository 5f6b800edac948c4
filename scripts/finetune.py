"""Fine-tune a classifier (thin wrapper; see hf_bertscratch/finetuning.py and --help)."""

from hf_bertscratch.finetuning import main

if __name__ == "__main__":
    main()
