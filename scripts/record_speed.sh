#!/usr/bin/env bash
# Measure the speed table and record it: each benchmark run writes its record (command, commit, date, versions, CPU,
# load, every figure) into results/speed/, and make_report renders README's and docs/speed.md's speed tables and
# docs/images/speed.png from the records.
#
#   bash scripts/record_speed.sh [inference|training|all]      # default all
#
# Run it on a machine with nothing else running; start it twice to see how far two runs agree (a second run of a
# kind writes <kind>-2.json, a third <kind>-3.json, ...: earlier records are never overwritten). REPEATS=N changes
# the timed repetitions per contender (default 5 for inference, 11 for training).
set -euo pipefail
cd "$(dirname "$0")/.."
WHAT=${1:-all}
mkdir -p results/speed

next_record() {  # next_record KIND: results/speed/KIND.json, or KIND-2.json, KIND-3.json, ... when taken
    local path="results/speed/$1.json" n=2
    while [[ -e $path ]]; do path="results/speed/$1-$n.json"; n=$((n + 1)); done
    echo "$path"
}

case $WHAT in inference|training|all) ;; *) echo "expected inference, training or all, got '$WHAT'" >&2; exit 2;; esac
if [[ $WHAT == inference || $WHAT == all ]]; then
    # PyTorch (ours and transformers' BERT) against ONNX Runtime on `bertscratch export`'s graph, fp32 and int8
    python scripts/benchmark.py --presets mini --seq_lens 128 --paddings 0 0.3 --batch_size 32 \
        --repeats "${REPEATS:-5}" --workloads infer encode --onnxruntime true --onnxruntime_int8 true \
        --memory false --num_threads 2 --output_json "$(next_record inference-mini)"
fi
if [[ $WHAT == training || $WHAT == all ]]; then
    # one MLM training step against transformers' BERT, with each model's peak memory
    python scripts/benchmark.py --presets mini --seq_lens 128 --paddings 0 0.3 --batch_size 32 \
        --repeats "${REPEATS:-11}" --workloads train --num_threads 2 --output_json "$(next_record training-mini)"
fi
python scripts/make_report.py
