#!/usr/bin/env bash
# Reproduce the task table in README.md: what pretraining buys on each task BERT is fine-tuned for.
#
#   bash lab/reproduce_results.sh [RUNS_DIR]        # default RUNS_DIR=runs/results
#
# Stages (each skipped when its all_results.json already exists, and continued from its last whole checkpoint-N when
# it was interrupted, or started over where it was stopped while saving its only one, so the script can simply be
# started again):
#   1. pretrain a BertScratch-mini (4 layers, H=256) with MLM on the IMDB *train* text, WordPiece 8192 learned on
#      it, data-parallel over PROCS processes (torchrun; gloo on CPU), with the package's pretraining recipe (the
#      README quick start's: 30% masking, dropout 0, a short-block start, warmup-stable-decay laid over a time budget)
#      in 128-token blocks for PRETRAIN_MINUTES ("pretrain"): the best row of the equal-time comparison
#      (lab/compare_pretraining.py, recipe mini), with its settings. Optional stages after it:
#      LONG_MINUTES in 256-token blocks ("pretrain-long", as BERT did with 128 then 512), then TASK_TEXT_MINUTES on
#      the unlabelled train text of TASK_TEXT's tasks ("pretrain-tasks", task-adaptive pretraining, by default with
#      next-sentence prediction added, each task example a document so a pair's second text follows its first;
#      TASK_TEXT_OBJECTIVE=mlm leaves NSP out); SIZE=tiny PRETRAIN_MINUTES=45 TASK_TEXT_MINUTES=15 is the
#      comparison's mlm+tasks+nsp row. OBJECTIVE=electra trains replaced-token detection instead of masked-LM
#      (after the masked-LM start of its first quarter, pretrain.py's default for a new ELECTRA model)
#   2. fine-tune it on the task table (CoLA, SST-2, MRPC, STS-B, RTE, CoNLL-2003, IMDB; lab/finetune_tasks.py,
#      whose RECIPES give epochs, lengths, seeds and the learning rates tried), choosing each task's learning rate
#      on its dev set with the first seed, then running the other seeds at it
#   3. the same for the same architecture and tokenizer from random weights (no pretraining), side by side with 2
#   4. write RUNS_DIR/results.md from the all_results.json files (lab/results_table.py)
# Every finished stage and run is also recorded in RECORDS (default results/task-runs/<RUNS_DIR's name>; lab/run_records.py:
# the few small files the table is made from, to be committed): on another machine, where RUNS_DIR is gone, a
# fine-tuning run recorded there from the same pretrained weights is restored instead of run again.
# TASKS="cola rte" limits stage 2-3 to some tasks; INITS=pretrained skips stage 3.
# QUICK_START=1 makes stage 1 README's quick start itself (`bertscratch pretrain --seed SEED`: WikiText-2 with its defaults
# and 8.5-minute budget; the other stage-1 knobs do not apply), to see what the quick start's own model buys on the task
# table.
# The budget is sized for this project's 2-core CPU (PROCS=2 processes of THREADS=1 torch thread each); every knob
# is an environment variable below.
# SMOKE=1 runs the whole pipeline in a few minutes with toy step counts (checks wiring, not results).
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${1:-runs/results}
RECORDS=${RECORDS:-results/task-runs/$(basename "$RUNS")}
DATA_DIR=${DATA_DIR:-${BERTSCRATCH_DATA_DIR:-../shared/data}}
PROCS=${PROCS:-2}                      # processes: pretraining data-parallel, fine-tunes at a time
THREADS=${THREADS:-1}                  # torch threads per process
SIZE=${SIZE:-mini}
OBJECTIVE=${OBJECTIVE:-mlm}            # mlm, or electra (a generator 1/4 as wide; the discriminator is fine-tuned)
SEED=${SEED:-42}                       # pretraining seed
PRETRAIN_MINUTES=${PRETRAIN_MINUTES:-60}  # training time of stage 1 (the schedule is laid over it)
PRETRAIN_BATCH=${PRETRAIN_BATCH:-32}   # effective batch, split over the PROCS processes
PRETRAIN_SEQ=${PRETRAIN_SEQ:-128}
PRETRAIN_LR=${PRETRAIN_LR:-3e-3}
POSITION_STD=${POSITION_STD:-0.05}     # sinusoidal start of the position embeddings (0: BERT's normal init)
QUICK_START=${QUICK_START:-0}                # 1: stage 1 is README's quick start (see above)
if [[ $QUICK_START != 0 && $QUICK_START != 1 ]]; then echo "QUICK_START=$QUICK_START must be 0 or 1" >&2; exit 2; fi
LONG_MINUTES=${LONG_MINUTES:-0}        # a stage in longer blocks after stage 1 (0: none)
LONG_SEQ=${LONG_SEQ:-256}
LONG_BATCH=${LONG_BATCH:-16}           # 16 x 256: the first stage's tokens per step
LONG_LR=${LONG_LR:-1e-3}
TASK_TEXT_MINUTES=${TASK_TEXT_MINUTES:-0}  # a last stage on the tasks' unlabelled text (0: none)
# Whose text: the fine-tuned tasks' (TASKS, default all: task_runs.RECIPES, in its order) but IMDB's, whose train
# reviews are stage 1's text already.
if [[ $TASK_TEXT_MINUTES != 0 && -z ${TASKS:-} && -z ${TASK_TEXT+set} ]]; then
    ALL_TASKS=$(python -c 'from lab.finetune_tasks import RECIPES; print(*RECIPES)')
fi
TASK_TEXT=${TASK_TEXT-$(for task in ${TASKS:-${ALL_TASKS:-}}; do [[ $task == imdb ]] || echo -n "$task "; done)}
if [[ -z ${TASK_TEXT// /} ]]; then TASK_TEXT_MINUTES=0; fi  # no task text to continue on (TASKS=imdb)
TASK_TEXT_LR=${TASK_TEXT_LR:-1e-3}
# The task-text stage's objective: after masked-LM, masked-LM with next-sentence prediction (mlm_nsp), better than
# masked-LM alone there in the comparison (mlm+tasks+nsp against mlm+tasks); after ELECTRA, ELECTRA.
TASK_TEXT_OBJECTIVE=${TASK_TEXT_OBJECTIVE:-$([[ $OBJECTIVE == mlm ]] && echo mlm_nsp || echo "$OBJECTIVE")}
INITS=${INITS:-pretrained scratch}
VOCAB=${VOCAB:-8192}
FT_BATCH=${FT_BATCH:-32}
if [[ "${SMOKE:-0}" == 1 ]]; then
    PRETRAIN_MINUTES=5steps; LONG_SEQ=32; VOCAB=1000
    if [[ $LONG_MINUTES != 0 ]]; then LONG_MINUTES=3steps; fi          # a stage turned off stays off
    if [[ $TASK_TEXT_MINUTES != 0 ]]; then TASK_TEXT_MINUTES=3steps; fi
    PRETRAIN_EXTRA=(--max_train_samples 300 --max_eval_samples 20); TASKS_EXTRA=(--smoke true)
else
    PRETRAIN_EXTRA=(--max_eval_samples 500); TASKS_EXTRA=()
fi
for batch in PRETRAIN_BATCH LONG_BATCH; do
    if (( ${!batch} % PROCS )); then
        echo "$batch=${!batch} must be a multiple of PROCS=$PROCS (it is split over the processes)" >&2
        exit 2
    fi
done
export OMP_NUM_THREADS=$THREADS
mkdir -p "$RUNS"

done_or_run() {  # done_or_run RUN_DIR COMMAND...: run unless RUN_DIR/all_results.json exists; log to RUN_DIR.log
    local dir=$1; shift
    if [[ -f "$dir/all_results.json" ]]; then
        echo "skip $dir (done)"; python -m lab.run_records keep "$dir" "$RECORDS" > /dev/null; return
    fi
    local how=start resume=()
    # interrupted: continue from its last whole checkpoint, or start over beside incomplete ones alone
    mapfile -t resume < <(python -m lab.run_records continue "$dir")
    if [[ "${resume[0]:-}" == --resume_from_checkpoint ]]; then
        how=resume
    else
        : > "$dir.log"  # a fresh start gets a fresh log; a resumed run's log keeps its earlier part
    fi
    echo "$(date -u +%H:%M:%S) $how $dir"
    "$@" "${resume[@]}" >> "$dir.log" 2>&1 || { echo "FAILED $dir, see $dir.log"; tail -20 "$dir.log"; exit 1; }
    echo "$(date -u +%H:%M:%S) done  $dir"
    python -m lab.run_records keep "$dir" "$RECORDS"
}

length() {  # length MINUTES: the flags that end a stage: a time budget, or "Nsteps" (the smoke run) a step count
    if [[ $1 == *steps ]]; then echo --max_train_minutes 0 --max_steps "${1%steps}" --warmup_steps 1
    else echo --max_train_minutes "$1"; fi
}

# 1. Pretraining on the IMDB train reviews (never the test reviews), with the package's pretraining defaults (the
# README quick start's recipe: 30% masking, dropout 0, adam beta2 0.98, warm-up over the first 10% of the budget and
# warmup-stable-decay, the first quarter of stage 1 in 32-token blocks); evaluation masks 15% as everywhere.
PRETRAIN=(python -m torch.distributed.run --standalone --nproc_per_node "$PROCS" scripts/pretrain.py
          --eval_mlm_probability 0.15
          --logging_steps 10 --seed "$SEED" --report_to none --disable_tqdm true "${PRETRAIN_EXTRA[@]}")
IMDB_TEXT=(--train_file "$DATA_DIR/imdb/train.csv.gz" --text_column text)
if [[ $QUICK_START == 1 ]]; then  # README's quick start, as a user runs it (the smoke run only makes it short)
    QUICK_START_EXTRA=()
    if [[ "${SMOKE:-0}" == 1 ]]; then
        QUICK_START_EXTRA=($(length "$PRETRAIN_MINUTES") --tokenizer_vocab_size "$VOCAB" "${PRETRAIN_EXTRA[@]}")
    fi
    done_or_run "$RUNS/pretrain" bertscratch pretrain --output_dir "$RUNS/pretrain" --seed "$SEED" \
        "${QUICK_START_EXTRA[@]}"
else
    done_or_run "$RUNS/pretrain" "${PRETRAIN[@]}" --objective "$OBJECTIVE" "${IMDB_TEXT[@]}" \
        $(length "$PRETRAIN_MINUTES") --model_size "$SIZE" --tokenizer_vocab_size "$VOCAB" \
        --tokenizer_train_samples 25000 --max_position_embeddings 512 --sinusoidal_position_std "$POSITION_STD" \
        --max_seq_length "$PRETRAIN_SEQ" \
        --per_device_train_batch_size $((PRETRAIN_BATCH / PROCS)) --learning_rate "$PRETRAIN_LR" \
        --output_dir "$RUNS/pretrain"
fi
PRETRAINED=$RUNS/pretrain
if [[ $LONG_MINUTES != 0 ]]; then
    done_or_run "$RUNS/pretrain-long" "${PRETRAIN[@]}" --objective "$OBJECTIVE" "${IMDB_TEXT[@]}" \
        $(length "$LONG_MINUTES") --model_name_or_path "$RUNS/pretrain" --max_seq_length "$LONG_SEQ" \
        --short_seq_fraction 0 \
        --per_device_train_batch_size $((LONG_BATCH / PROCS)) --learning_rate "$LONG_LR" \
        --output_dir "$RUNS/pretrain-long"
    PRETRAINED=$RUNS/pretrain-long
fi
if [[ $TASK_TEXT_MINUTES != 0 ]]; then
    # shellcheck disable=SC2086  # TASK_TEXT is a list of task names
    done_or_run "$RUNS/pretrain-tasks" "${PRETRAIN[@]}" --objective "$TASK_TEXT_OBJECTIVE" \
        --task_text $TASK_TEXT --data_dir "$DATA_DIR" \
        $(length "$TASK_TEXT_MINUTES") --model_name_or_path "$PRETRAINED" --max_seq_length "$PRETRAIN_SEQ" \
        --short_seq_fraction 0 --per_device_train_batch_size $((PRETRAIN_BATCH / PROCS)) \
        --learning_rate "$TASK_TEXT_LR" --output_dir "$RUNS/pretrain-tasks"
    PRETRAINED=$RUNS/pretrain-tasks
fi

# 2-3. Fine-tuning on the task table (lab/finetune_tasks.py): the pretrained weights and the same architecture
# from random weights, PROCS runs at a time; per task and init the learning rate is chosen on dev with the first seed,
# then the other seeds run at it.
python -m lab.finetune_tasks --runs_dir "$RUNS" --pretrained "$PRETRAINED" --data_dir "$DATA_DIR" \
    --processes "$PROCS" --threads "$THREADS" --batch_size "$FT_BATCH" ${TASKS:+--tasks $TASKS} --inits $INITS \
    --record_dir "$RECORDS" "${TASKS_EXTRA[@]}"

# 4. The table.
python -m lab.results_table "$RUNS" --output "$RUNS/results.md"
echo "wrote $RUNS/results.md"
