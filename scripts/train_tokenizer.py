"""Train a WordPiece tokenizer on raw text: see `python scripts/train_tokenizer.py --help`."""

from hf_bertscratch.tokenization import main

if __name__ == "__main__":
    main()
