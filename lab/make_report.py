"""Render the speed tables and the charts from the records under results/; see `python -m lab.make_report --help`
and lab/reports.py."""

from lab.reports import main

if __name__ == "__main__":
    main()
