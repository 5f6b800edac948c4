"""Convert a checkpoint between transformers' BERT and BertScratch; see `python scripts/convert_checkpoint.py --help`."""

from hf_bertscratch.convert import main

if __name__ == "__main__":
    main()
