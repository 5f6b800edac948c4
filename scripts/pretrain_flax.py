"""Pretrain a BertScratch masked language model in JAX: see `python scripts/pretrain_flax.py --help`."""

from hf_bertscratch.flax.pretraining import main

if __name__ == "__main__":
    main()
