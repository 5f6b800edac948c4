"""Fine-tune a pretrained checkpoint and the same model from scratch on the task table (see
lab/task_runs.py and --help)."""

from lab.task_runs import main

if __name__ == "__main__":
    main()
