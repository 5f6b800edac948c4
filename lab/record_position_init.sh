#!/usr/bin/env bash
# Measure docs/design.md's position-start table and record it: `lab/diagnose_position_init.py` (a plain PyTorch
# loop around the tiny BertScratchForMaskedLM on the IMDB train text, probing every 100 steps) once per start of the
# position embeddings, each writing its record into results/position-init/; make_report renders the table.
#
#   bash lab/record_position_init.sh            # DATA_DIR=../shared/data, STOP=1000 steps per row
#
# A row whose record exists is skipped (delete it to measure again); the tokenizer and the packed blocks are kept in
# WORK (default runs/position-init). About 6 minutes a row on a 2-core CPU (12 for the 256-token row).
set -euo pipefail
cd "$(dirname "$0")/.."
DATA_DIR=${DATA_DIR:-${BERTSCRATCH_DATA_DIR:-../shared/data}}
WORK=${WORK:-runs/position-init}
STOP=${STOP:-1000}
TRAIN=$DATA_DIR/imdb/train.csv.gz
if [[ ! -f $WORK/tokenizer/tokenizer.json ]]; then
    bertscratch train-tokenizer --train_file "$TRAIN" --text_column text --vocab_size 8192 \
        --output_dir "$WORK/tokenizer"
fi
mkdir -p results/position-init
# --posinit and --posscale (the starting std in units of the 0.02 init): BERT's init, a larger normal, sinusoids; the
# last row the pretraining default's sinusoid on 256-token blocks (--seq)
for row in "normal 1" "normal 5" "sin 1" "sin 2.5" "sin 5" "sin 15" "sin 2.5 256"; do
    set -- $row
    seq=${3:-128}
    out=results/position-init/$1-$2$([[ $seq == 128 ]] || echo "-seq$seq").json
    if [[ -f $out ]]; then echo "skip $out (recorded)"; continue; fi
    python -m lab.diagnose_position_init --tokenizer "$WORK/tokenizer" --train_file "$TRAIN" \
        --cache_dir "$WORK/cache" --lr 3e-3 --beta2 0.98 --stop "$STOP" --posinit "$1" --posscale "$2" --seq "$seq" \
        --output_json "$out"
done
python -m lab.make_report
