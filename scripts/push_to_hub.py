"""Share a trained BertScratch model on the Hub; see `python scripts/push_to_hub.py --help`."""

from hf_bertscratch.hub import main

if __name__ == "__main__":
    main()
