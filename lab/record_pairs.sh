#!/usr/bin/env bash
# The sentence-pair records of README's pairs table (results/pairs/), from the quick start's own model:
#   1. `bertscratch pretrain --output_dir RUNS/quick-start` (README's first command, its defaults);
#   2. STS-B, MRPC and RTE from it with lab/diagnose_pairs.py: the no-learning answers, the task table's former
#      recipe (`table`), the defaults, and for STS-B the bi-encoder (`embedding`) and a SimCSE stage on STS-B's
#      unlabelled train sentences;
#   3. STS-B's bi-encoder again, from the SimCSE stage's folder; MRPC and RTE with the defaults from the STS-B
#      cross-encoder's folder (intermediate-task transfer: its head dropped, its encoder kept).
# Each finished run is read, not run again, so the command continues where it stopped:
#   bash lab/record_pairs.sh [RUNS_DIR]        (default runs/pairs; DATA_DIR as for reproduce_results.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-runs/pairs}
DATA_DIR=${DATA_DIR:-${BERTSCRATCH_DATA_DIR:-../shared/data}}
SEEDS=${SEEDS:-"42 43 44"}
OUT=results/pairs
export HF_HUB_OFFLINE=1
mkdir -p "$RUNS" "$OUT"

if [ ! -f "$RUNS/quick-start/all_results.json" ]; then
    mapfile -t resume < <(python -m lab.run_records continue "$RUNS/quick-start")
    bertscratch pretrain --output_dir "$RUNS/quick-start" "${resume[@]}"
fi
accuracy=$(python -c "import json; print(f\"{100 * json.load(open('$RUNS/quick-start/all_results.json'))['eval_accuracy']:.1f}\")")
commit=$(git describe --always --dirty)
note="the model of \`bertscratch pretrain --output_dir D\` (README's quick start, its defaults: WikiText-2, ${accuracy}% masked-token accuracy), commit ${commit}"

diagnose() {  # TASK MODEL RECORD NOTE VARIANTS...
    local task=$1 model=$2 record=$3 model_note=$4
    shift 4
    python -m lab.diagnose_pairs --model "$model" --task "$task" --data_dir "$DATA_DIR" \
        --runs_dir "$RUNS/$record" --variants "$@" --seeds $SEEDS --output_json "$OUT/$record.json" \
        --model_note "$model_note"
}

diagnose stsb "$RUNS/quick-start" stsb "$note" table defaults embedding
SEEDS=42 diagnose stsb "$RUNS/quick-start" stsb-simcse "$note" simcse
SEEDS=42 diagnose stsb "$RUNS/stsb-simcse/simcse-seed42" stsb-after-simcse \
    "the SimCSE stage on STS-B's unlabelled train sentences, from $note" embedding
for task in mrpc rte; do
    diagnose "$task" "$RUNS/quick-start" "$task" "$note" table defaults
    diagnose "$task" "$RUNS/stsb/defaults-seed42" "$task-from-stsb" \
        "the STS-B cross-encoder fine-tuned with the defaults (seed 42) from $note: its head dropped" defaults
done
python -m lab.make_report --charts false
