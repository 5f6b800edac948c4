"""Render the speed tables and the charts from the records under results/; see `python scripts/make_report.py --help`
and hf_bertscratch/reports.py."""

from hf_bertscratch.reports import main

if __name__ == "__main__":
    main()
