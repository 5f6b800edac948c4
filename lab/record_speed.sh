#!/usr/bin/env bash
# Measure the speed table and record it: each benchmark run writes its record (command, commit, date, versions, CPU,
# load, every figure) into results/speed/, and make_report renders README's and docs/speed.md's speed tables and
# docs/images/speed.png from the records.
#
#   bash lab/record_speed.sh [inference|training|graphs|all]      # default all
#   bash lab/record_speed.sh sizes|bf16|compiled                  # docs/speed.md's other tables (results/speed-more/)
#   bash lab/record_speed.sh decoder                              # the MLM decoder alone (results/decoder/)
#   CPU=zen4 bash lab/record_speed.sh cpu-choices                 # one CPU's choices and ratios (results/cpu-choices/)
#
# Run it on a machine with nothing else running; start it twice to see how far two runs agree (a second run of a
# kind writes <kind>-2.json, a third <kind>-3.json, ...: earlier records are never overwritten). REPEATS=N changes
# the timed repetitions per contender (default 5 for inference, 11 for training).
set -euo pipefail
cd "$(dirname "$0")/.."
WHAT=${1:-all}
mkdir -p results/speed results/speed-more results/decoder results/onnx-graphs

next_record() {  # next_record KIND [FOLDER]: results/FOLDER/KIND.json, or KIND-2.json, ... when taken (FOLDER: speed)
    local folder="results/${2:-speed}" n=2
    local path="$folder/$1.json"
    while [[ -e $path ]]; do path="$folder/$1-$n.json"; n=$((n + 1)); done
    echo "$path"
}

case $WHAT in
    inference|training|graphs|all|sizes|bf16|compiled|decoder) ;;
    cpu-choices)
        if [[ ! ${CPU:-} =~ ^[a-z0-9-]+$ ]]; then
            echo "cpu-choices needs CPU=<short name of this CPU> (lowercase letters, digits, '-'), got '${CPU:-}'" >&2
            exit 2
        fi;;
    *) echo "expected inference, training, graphs, all, sizes, bf16, compiled, decoder or cpu-choices, got '$WHAT'" >&2
       exit 2;;
esac
if [[ $WHAT == inference || $WHAT == all ]]; then
    # PyTorch (ours and transformers' BERT) against ONNX Runtime on `bertscratch export`'s graph, fp32 and int8
    python scripts/benchmark.py --presets mini --seq_lens 128 --paddings 0 0.3 --batch_size 32 \
        --repeats "${REPEATS:-5}" --workloads infer encode --onnxruntime true --onnxruntime_int8 true \
        --memory false --num_threads 2 --output_json "$(next_record inference-mini)"
    # the fill-mask path: logits at the masked positions only (the pipeline's), against ORT's masked-positions graph
    python scripts/benchmark.py --presets mini --seq_lens 128 --paddings 0 0.3 --batch_size 32 \
        --repeats "${REPEATS:-5}" --workloads fill-mask --onnxruntime true --onnxruntime_int8 true \
        --memory false --num_threads 2 --output_json "$(next_record fill-mask-mini)"
fi
if [[ $WHAT == training || $WHAT == all ]]; then
    # one MLM training step against transformers' BERT, with each model's peak memory
    python scripts/benchmark.py --presets mini --seq_lens 128 --paddings 0 0.3 --batch_size 32 \
        --repeats "${REPEATS:-11}" --workloads train --num_threads 2 --output_json "$(next_record training-mini)"
fi
if [[ $WHAT == graphs || $WHAT == all ]]; then
    # every ONNX graph of the same weights under ONNX Runtime, as a ratio to `bertscratch export`'s
    for case in "encode 0.3" "encode 0" "infer 0.3"; do
        set -- $case
        python -m lab.compare_onnx_graphs --workload "$1" --padding "$2" --rounds "${ROUNDS:-3}" \
            --output_json "$(next_record "$1-$2" onnx-graphs)"
    done
fi
if [[ $WHAT == sizes ]]; then
    # every preset at both sequence lengths: the training step against transformers' BERT, the encoder against ORT
    python scripts/benchmark.py --presets tiny mini small base --seq_lens 128 512 --paddings 0 0.3 --batch_size 8 \
        --repeats "${REPEATS:-3}" --workloads train encode --onnxruntime true --memory false --num_threads 2 \
        --output_json "$(next_record sizes speed-more)"
fi
if [[ $WHAT == bf16 ]]; then
    # CPU bf16 autocast for both PyTorch models, beside fp32 (fast only where the CPU has bf16 matrix instructions),
    # the encoder against ONNX Runtime's fp32 graph
    python scripts/benchmark.py --presets mini --seq_lens 128 --paddings 0 0.3 --batch_size 32 \
        --repeats "${REPEATS:-3}" --workloads train encode --precisions fp32 bf16 --onnxruntime true --memory false \
        --num_threads 2 --output_json "$(next_record bf16-mini speed-more)"
fi
if [[ $WHAT == compiled ]]; then
    # both PyTorch models under torch.compile (inductor, freezing for inference), against ORT for inference
    python scripts/benchmark.py --presets mini --seq_lens 128 --paddings 0 0.3 --batch_size 32 \
        --repeats "${REPEATS:-5}" --workloads train encode --variants eager compiled --onnxruntime true \
        --memory false --num_threads 2 --output_json "$(next_record compiled-mini speed-more)"
fi
if [[ $WHAT == decoder ]]; then
    # the MLM head's decoding alone (4,096 x 256 -> 30,522), tiles vs one GEMM, fresh vs reused output, and ORT's Gemm
    for threads in 2 1; do
        python -m lab.profile_decode --num_threads "$threads" --onnxruntime true --repeats "${REPEATS:-6}" \
            --output_json "$(next_record "threads-$threads" decoder)"
    done
fi
if [[ $WHAT == cpu-choices ]]; then
    # what docs/speed.md reports for each CPU: the choices the model measures where it runs (each benchmark record's
    # cpu_choices), full-logits inference, the training step, the encoder against ORT, and the MLM head's decodings of
    # a padded batch; records results/cpu-choices/<kind>-$CPU.json (-2, -3, ... when taken)
    mkdir -p results/cpu-choices
    python scripts/benchmark.py --presets mini --seq_lens 128 --paddings 0 0.3 --batch_size 32 --workloads infer \
        --repeats "${REPEATS:-7}" --memory false --decoding auto --num_threads 2 \
        --output_json "$(next_record "inference-mini-$CPU-auto" cpu-choices)"
    python scripts/benchmark.py --presets mini --seq_lens 128 --paddings 0 0.3 --batch_size 32 \
        --repeats "${REPEATS:-11}" --workloads train --num_threads 2 \
        --output_json "$(next_record "training-mini-$CPU" cpu-choices)"
    python scripts/benchmark.py --presets mini --seq_lens 128 --paddings 0 0.3 --batch_size 32 \
        --repeats "${REPEATS:-11}" --workloads encode --onnxruntime true --memory false --num_threads 2 \
        --output_json "$(next_record "encode-ort-mini-$CPU" cpu-choices)"
    python -m lab.profile_decode --num_threads 2 --paddings 0.1 0.3 0.5 --repeats "${REPEATS:-6}" \
        --output_json "$(next_record "padded-decoding-$CPU" cpu-choices)"
    # two fine-tunes side by side on the cores against one alone, from the quick start's model (MODEL=folder)
    model=${MODEL:-runs/bert-tiny-wikitext2}
    data_dir=${DATA_DIR:-${BERTSCRATCH_DATA_DIR:-../shared/data}}  # the folder holding sst2/, as the other recorders
    if [[ -f $model/config.json ]]; then
        python -m lab.time_side_by_side --model "$model" --data_dir "$data_dir" --rounds 1 \
            --ways fitted --record "$(next_record "finetune-sst2-$CPU-shipped" threads)"
    else
        echo "no model at $model (run the quick start, or set MODEL): two fine-tunes side by side not timed" >&2
    fi
    exit 0
fi
python -m lab.make_report
