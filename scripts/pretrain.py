"""Pretrain a BertScratch model on raw text: see `python scripts/pretrain.py --help`."""

from hf_bertscratch.pretraining import main

if __name__ == "__main__":
    main()
