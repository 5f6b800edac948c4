"""Fine-tune a classifier (thin wrapper; see hf_bertscratch/finetuning.py and --help)."""

from hf_bertscratch_base import run_as_script
from hf_bertscratch_base.errors import errors_as_one_line
from hf_bertscratch_base.thread_pool import use_training_wait_policy

use_training_wait_policy()  # before torch loads
run_as_script(__file__)  # its lines name `scripts/finetune.py`, the command run, as do those of the processes it starts

# An error: one line and exit status 1 ($BERTSCRATCH_DEBUG: the traceback); Ctrl-C or `kill`, while torch loads too:
# one line and the signal's exit status; as `bertscratch finetune` ends
with errors_as_one_line("finetune"):
    from hf_bertscratch.finetuning import main

    if __name__ == "__main__":
        main()
