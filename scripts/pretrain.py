"""Pretrain a BertScratch model on raw text: see `python scripts/pretrain.py --help`."""

from hf_bertscratch_base.thread_pool import use_training_wait_policy

use_training_wait_policy()  # before torch loads

from hf_bertscratch.pretraining import main  # noqa: E402

if __name__ == "__main__":
    main()
