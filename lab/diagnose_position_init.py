"""The position-start diagnostic loop behind README's table: see `python -m lab.diagnose_position_init --help`."""

from lab.diagnostics import main

if __name__ == "__main__":
    main()
