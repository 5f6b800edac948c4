"""Fine-tune a classifier (thin wrapper; see hf_bertscratch/finetuning.py and --help)."""

from hf_bertscratch_base.thread_pool import use_training_wait_policy

use_training_wait_policy()  # before torch loads

from hf_bertscratch.finetuning import main  # noqa: E402

if __name__ == "__main__":
    main()
