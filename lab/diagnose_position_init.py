"""The position-start diagnostic loop behind README's table: see `python scripts/diagnose_position_init.py --help`."""

from hf_bertscratch.diagnostics import main

if __name__ == "__main__":
    main()
