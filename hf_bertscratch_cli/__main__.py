"""`python -m hf_bertscratch_cli ARGS`: the `bertscratch` command as the console script runs it."""

from hf_bertscratch_cli import main

main()
