#!/usr/bin/env bash
# The single-text classification records (results/single-diagnosis/): why IMDB and SST-2 fine-tuned from the quick
# start's model do or do not beat a bag of words, and what lifts them.
#   1. the quick start's recipe for a fixed 2,300 steps (what its 8.5-minute budget reaches on an idle 2-core AMD
#      EPYC), so that a busy machine trains the same model, only slower;
#   2. SST-2 screened on 20,000 train sentences (full dev), IMDB on 5,000 train and 5,000 test reviews: the bags of
#      words, frozen-feature probes per pooling, then fine-tuning variants (pooling, head start, length and
#      truncation, random weights) with lab/diagnose_single.py;
#   3. the same model continued on the tasks' own unlabelled train texts (`--task_text imdb sst2`, never the test
#      texts), screened the same way.
# Each finished run is read, not run again, so the command continues where it stopped:
#   bash lab/record_single.sh [RUNS_DIR]        (default runs/single; DATA_DIR as for reproduce_results.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-runs/single}
DATA_DIR=${DATA_DIR:-${BERTSCRATCH_DATA_DIR:-../shared/data}}
SEEDS=${SEEDS:-42}
PROCESSES=${PROCESSES:-2}
OUT=results/single-diagnosis
export HF_HUB_OFFLINE=1
mkdir -p "$RUNS" "$OUT"

pretrain() {  # FOLDER FLAGS...: resumed from its last checkpoint when stopped
    local folder=$1
    shift
    if [ -f "$folder/all_results.json" ]; then return; fi
    local resume=()
    mapfile -t resume < <(python -m lab.run_records continue "$folder")
    bertscratch pretrain --output_dir "$folder" "$@" "${resume[@]}"
}
masked_accuracy() {
    python -c "import json; print(f\"{100 * json.load(open('$1/all_results.json'))['eval_accuracy']:.1f}\")"
}

pretrain "$RUNS/quick-start" --max_steps 2300 --max_train_minutes 0
note="the quick start's recipe (\`bertscratch pretrain --max_steps 2300 --max_train_minutes 0\`: WikiText-2, $(masked_accuracy "$RUNS/quick-start")% masked-token accuracy)"

diagnose() {  # TASK MODEL RECORD NOTE EXTRA VARIANTS...
    local task=$1 model=$2 record=$3 model_note=$4 extra=$5
    shift 5
    # shellcheck disable=SC2086  # EXTRA is a list of flags
    python -m lab.diagnose_single --model "$model" --task "$task" --data_dir "$DATA_DIR" \
        --runs_dir "$RUNS/$record" --variants "$@" --seeds $SEEDS --processes "$PROCESSES" \
        --output_json "$OUT/$record.json" --model_note "$model_note" --extra $extra
}
IMDB_SCREEN="--max_train_samples 5000 --max_eval_samples 5000"
SST2_SCREEN="--max_train_samples 20000"

# Cheapest first: SST-2's short sentences, then IMDB's long reviews, each from the quick start's model.
# shellcheck disable=SC2086
diagnose sst2 "$RUNS/quick-start" sst2-screen "$note" "$SST2_SCREEN" cls mean-max mean-max-lr1e-3 scratch \
    mean-max-probe mean
# shellcheck disable=SC2086
diagnose imdb "$RUNS/quick-start" imdb-screen "$note" "$IMDB_SCREEN" cls mean-max scratch mean-max-lr1e-3 \
    mean-max-lr1e-3-head+tail-512

pretrain "$RUNS/task-text" --model_name_or_path "$RUNS/quick-start" --task_text imdb sst2 --data_dir "$DATA_DIR" \
    --max_steps 1500 --max_train_minutes 0 --max_eval_samples 2000
tapt_note="$note, continued for 1,500 steps on the IMDB and SST-2 train texts (\`bertscratch pretrain --model_name_or_path D --task_text imdb sst2 --max_steps 1500 --max_train_minutes 0\`: $(masked_accuracy "$RUNS/task-text")% masked-token accuracy on their held-out texts)"
# shellcheck disable=SC2086
diagnose sst2 "$RUNS/task-text" sst2-screen-task-text "$tapt_note" "$SST2_SCREEN" cls mean-max mean-max-lr1e-3
# shellcheck disable=SC2086
diagnose imdb "$RUNS/task-text" imdb-screen-task-text "$tapt_note" "$IMDB_SCREEN" mean-max-lr1e-3 \
    mean-max-lr1e-3-head+tail-512
