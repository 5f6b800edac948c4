"""Fine-tune a classifier (thin wrapper; see hf_bertscratch/finetuning.py and --help)."""

from hf_bertscratch_base.errors import stops_as_one_line
from hf_bertscratch_base.thread_pool import use_training_wait_policy

use_training_wait_policy()  # before torch loads

# Ctrl-C or `kill`, while torch loads too: one line and the signal's exit status, as `bertscratch finetune` ends
with stops_as_one_line("finetune"):
    from hf_bertscratch.finetuning import main

    if __name__ == "__main__":
        main()
