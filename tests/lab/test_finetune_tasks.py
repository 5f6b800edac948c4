"""lab.finetune_tasks: the sweep's progress lines stay whole when its threads print at once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# four threads each print many lines through `log` into a pipe, as the sweep's runs do into reproduce_results.sh
PRINTING = """
import sys, threading
from lab.finetune_tasks import print_line
log = print if sys.argv[1] == "print" else print_line
def work(thread):
    for k in range(20000):
        log(f"{thread} resume /runs/run-{k}")
threads = [threading.Thread(target=work, args=(thread,)) for thread in range(4)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
"""


def _broken_lines(log: str) -> int:
    printed = subprocess.run(
        [sys.executable, "-c", PRINTING, log], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout
    lines = printed.split("\n")
    assert lines[-1] == "" and len(lines) - 1 == 4 * 20000  # every line printed, each ended by one newline
    return sum(line.count(" resume ") != 1 for line in lines[:-1])


def test_progress_lines_stay_whole_when_threads_print_at_once() -> None:
    assert _broken_lines("print_line") == 0
