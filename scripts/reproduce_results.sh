#!/usr/bin/env bash
# Reproduce the fine-tuning results table in README.md (section "finetuning").
#
#   bash scripts/reproduce_results.sh [RUNS_DIR]        # default RUNS_DIR=runs/results
#
# Stages (each skipped when its all_results.json already exists, and continued from its last checkpoint-N when it
# was interrupted, so the script can simply be started again):
#   1. pretrain a BertScratch-tiny (2 layers, H=128) with MLM on the IMDB *train* text, WordPiece 8192 learned on it,
#      data-parallel over PROCS processes (torchrun; gloo on CPU), with the package's pretraining recipe (the README
#      main job's: 30% masking, dropout 0, a short-block start, warmup-stable-decay laid over a time budget) in
#      128-token blocks for PRETRAIN_MINUTES ("pretrain"), then continue in 256-token blocks for LONG_MINUTES
#      ("pretrain-long", as BERT did with 128 then 512) so that the positions IMDB fine-tuning reads are trained too
#   2. fine-tune it on SST-2 (GLUE dev accuracy) and IMDB (test accuracy), once per fine-tuning seed
#   3. fine-tune the same architecture and tokenizer from random weights (no pretraining) with the same settings;
#      2 and 3 run side by side for each task and seed when PROCS >= 2
#   4. write RUNS_DIR/results.md from the all_results.json files (scripts/results_table.py)
# The budget is sized for this project's 2-core CPU (PROCS=2 processes of THREADS=1 torch thread each); every knob
# is an environment variable below.
# SMOKE=1 runs the whole pipeline in a few minutes with toy step counts (checks wiring, not results).
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${1:-runs/results}
DATA_DIR=${DATA_DIR:-${BERTSCRATCH_DATA_DIR:-../shared/data}}
PROCS=${PROCS:-2}                      # processes: pretraining data-parallel, fine-tunes side by side
THREADS=${THREADS:-1}                  # torch threads per process
SIZE=${SIZE:-tiny}
SEED=${SEED:-42}                       # pretraining seed
SST2_SEEDS=${SST2_SEEDS:-"42 43 44"}   # fine-tuning seeds: 872 dev sentences are noisy, so SST-2 is run three times
IMDB_SEEDS=${IMDB_SEEDS:-"42 43"}      # (25,000 test reviews: two runs)
PRETRAIN_MINUTES=${PRETRAIN_MINUTES:-40}  # training time of stage 1 (the schedule is laid over it)
PRETRAIN_BATCH=${PRETRAIN_BATCH:-32}   # effective batch, split over the PROCS processes
PRETRAIN_SEQ=${PRETRAIN_SEQ:-128}
PRETRAIN_LR=${PRETRAIN_LR:-3e-3}
POSITION_STD=${POSITION_STD:-0.05}     # sinusoidal start of the position embeddings (0: BERT's normal init)
LONG_MINUTES=${LONG_MINUTES:-10}       # second stage in longer blocks (0: none; fine-tune the first stage)
LONG_SEQ=${LONG_SEQ:-256}
LONG_BATCH=${LONG_BATCH:-16}           # 16 x 256: the first stage's tokens per step
LONG_LR=${LONG_LR:-1e-3}
VOCAB=${VOCAB:-8192}
FT_LR=${FT_LR:-2e-4}
FT_BATCH=${FT_BATCH:-32}
SST2_TRAIN=${SST2_TRAIN:-67349}        # of 67,349 GLUE train sentences (all; fewer takes a seeded random subset)
SST2_EPOCHS=${SST2_EPOCHS:-3}
SST2_SEQ=${SST2_SEQ:-64}
IMDB_TRAIN=${IMDB_TRAIN:-25000}        # of 25,000 train reviews (all; fewer takes a seeded random subset)
IMDB_EVAL=${IMDB_EVAL:-25000}          # of 25,000 test reviews (all; fewer takes a seeded random subset)
IMDB_EPOCHS=${IMDB_EPOCHS:-3}
IMDB_SEQ=${IMDB_SEQ:-256}
IMDB_HEAD=${IMDB_HEAD:-64}             # head+tail truncation: 64 head + 190 tail tokens (Sun et al.'s 1:3 split)
if [[ "${SMOKE:-0}" == 1 ]]; then
    PRETRAIN_MINUTES=5steps; LONG_MINUTES=3steps; LONG_SEQ=32; SST2_SEEDS="42 43"; SST2_TRAIN=64; SST2_EPOCHS=1
    IMDB_SEEDS=42; IMDB_EPOCHS=2; IMDB_TRAIN=32; IMDB_EVAL=32; VOCAB=1000
    PRETRAIN_EXTRA=(--max_train_samples 300 --max_eval_samples 20); SST2_EVAL=(--max_eval_samples 64)
else
    PRETRAIN_EXTRA=(--max_eval_samples 500); SST2_EVAL=()
fi
for batch in PRETRAIN_BATCH LONG_BATCH; do
    if (( ${!batch} % PROCS )); then
        echo "$batch=${!batch} must be a multiple of PROCS=$PROCS (it is split over the processes)" >&2
        exit 2
    fi
done
export OMP_NUM_THREADS=$THREADS
mkdir -p "$RUNS"
COMMON_FT=(--learning_rate "$FT_LR" --per_device_train_batch_size "$FT_BATCH" --per_device_eval_batch_size 64
           --logging_steps 20 --report_to none --disable_tqdm true --data_dir "$DATA_DIR")

done_or_run() {  # done_or_run RUN_DIR COMMAND...: run unless RUN_DIR/all_results.json exists; log to RUN_DIR.log
    local dir=$1; shift
    if [[ -f "$dir/all_results.json" ]]; then echo "skip $dir (done)"; return; fi
    local how=start resume=()
    if compgen -G "$dir/checkpoint-*" > /dev/null; then  # interrupted: continue from its last checkpoint
        how=resume; resume=(--resume_from_checkpoint last)
    else
        : > "$dir.log"  # a fresh start gets a fresh log; a resumed run's log keeps its earlier part
    fi
    echo "$(date -u +%H:%M:%S) $how $dir"
    "$@" "${resume[@]}" >> "$dir.log" 2>&1 || { echo "FAILED $dir, see $dir.log"; tail -20 "$dir.log"; exit 1; }
    echo "$(date -u +%H:%M:%S) done  $dir"
}

length() {  # length MINUTES: the flags that end a stage: a time budget, or "Nsteps" (the smoke run) a step count
    if [[ $1 == *steps ]]; then echo --max_train_minutes 0 --max_steps "${1%steps}" --warmup_steps 1
    else echo --max_train_minutes "$1"; fi
}

# 1. Pretraining on the IMDB train reviews (never the test reviews), with the package's pretraining defaults (the
# README main job's recipe: 30% masking, dropout 0, adam beta2 0.98, warm-up over the first 10% of the budget and
# warmup-stable-decay, the first quarter of stage 1 in 32-token blocks); evaluation masks 15% as everywhere.
PRETRAIN=(python -m torch.distributed.run --standalone --nproc_per_node "$PROCS" scripts/pretrain.py
          --train_file "$DATA_DIR/imdb/train.csv.gz" --text_column text --eval_mlm_probability 0.15
          --logging_steps 10 --seed "$SEED" --report_to none --disable_tqdm true "${PRETRAIN_EXTRA[@]}")
done_or_run "$RUNS/pretrain" "${PRETRAIN[@]}" $(length "$PRETRAIN_MINUTES") \
    --model_size "$SIZE" --tokenizer_vocab_size "$VOCAB" --tokenizer_train_samples 25000 \
    --max_position_embeddings 512 --sinusoidal_position_std "$POSITION_STD" --max_seq_length "$PRETRAIN_SEQ" \
    --per_device_train_batch_size $((PRETRAIN_BATCH / PROCS)) --learning_rate "$PRETRAIN_LR" \
    --output_dir "$RUNS/pretrain"
PRETRAINED=$RUNS/pretrain
if [[ $LONG_MINUTES != 0 ]]; then
    done_or_run "$RUNS/pretrain-long" "${PRETRAIN[@]}" $(length "$LONG_MINUTES") \
        --model_name_or_path "$RUNS/pretrain" --max_seq_length "$LONG_SEQ" --short_seq_fraction 0 \
        --per_device_train_batch_size $((LONG_BATCH / PROCS)) --learning_rate "$LONG_LR" \
        --output_dir "$RUNS/pretrain-long"
    PRETRAINED=$RUNS/pretrain-long
fi

finetune() {  # finetune TASK INIT SEED: fine-tune the pretrained weights (INIT=pretrained) or random ones (scratch)
    local task=$1 init=$2 seed=$3 flags=()
    [[ $init == scratch ]] && flags=(--init_from_scratch)
    if [[ $task == sst2 ]]; then
        flags+=(--max_seq_length "$SST2_SEQ" --max_train_samples "$SST2_TRAIN" --num_train_epochs "$SST2_EPOCHS"
                "${SST2_EVAL[@]}")
    else
        flags+=(--max_seq_length "$IMDB_SEQ" --truncation head+tail --head_tokens "$IMDB_HEAD"
                --max_train_samples "$IMDB_TRAIN" --max_eval_samples "$IMDB_EVAL" --num_train_epochs "$IMDB_EPOCHS")
    fi
    done_or_run "$RUNS/$task-$init-seed$seed" python scripts/finetune.py --model_name_or_path "$PRETRAINED" \
        --task "$task" --seed "$seed" "${flags[@]}" "${COMMON_FT[@]}" --output_dir "$RUNS/$task-$init-seed$seed"
}

# 2-3. Fine-tuning: pretrained weights and the same architecture from random weights, side by side per task and seed.
for task in sst2 imdb; do
    seeds=$SST2_SEEDS; [[ $task == imdb ]] && seeds=$IMDB_SEEDS
    for seed in $seeds; do
        if (( PROCS >= 2 )); then
            finetune "$task" pretrained "$seed" & pretrained=$!
            finetune "$task" scratch "$seed" & scratch=$!
            wait "$pretrained" && wait "$scratch" || { wait; exit 1; }
        else
            finetune "$task" pretrained "$seed"
            finetune "$task" scratch "$seed"
        fi
    done
done

# 4. The table.
python scripts/results_table.py "$RUNS" --output "$RUNS/results.md"
echo "wrote $RUNS/results.md"
