"""`python -m hf_bertscratch_base.launched COMMAND MODULE ARGS`: how a command starts the processes it launches.

It runs `MODULE.main(ARGS)` as `errors.run_launched` runs it (an error: one line for the launcher to print; a stop:
the signal's status, quietly), from the first moment: the import of MODULE, which imports torch and takes seconds,
is where a Ctrl-C often lands, and there it would otherwise print the traceback of an import. This module imports
the standard library alone, so it is running before that.
"""

from __future__ import annotations

import importlib
import signal
import sys

from hf_bertscratch_base.errors import run_launched


def main() -> None:
    """Import MODULE and run its `main(ARGS)` under `run_launched`."""
    command, module_name, *argv = sys.argv[1:]
    sys.argv = [module_name, *argv]
    try:
        module = importlib.import_module(module_name)
    except KeyboardInterrupt:
        raise SystemExit(128 + signal.SIGINT) from None
    run_launched(command, lambda: module.main(argv))


if __name__ == "__main__":
    main()
