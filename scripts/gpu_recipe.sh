#!/usr/bin/env bash
# The whole one-GPU run as one command on a GPU machine that reaches no network, from the repository root with the
# bundle BUNDLE (default .gpu/, made by scripts/gpu_bundle.sh) carried beside it; everything it writes goes to OUT:
#   1. unpack the tasks' data (BUNDLE/data.tar.gz into BUNDLE/data) and install the bundled wheels into /tmp/site;
#   2. the CUDA tests (`pytest -m cuda`: the varlen attention of a padded batch against the padded computation, the
#      model's CUDA paths, Muon), at most TEST_S seconds (default 120), their output in OUT/pytest-cuda.log;
#   3. scripts/gpu_recipe.py with its record in OUT and its deadline what is left of CALL_S seconds from the start
#      (default 590, 9 minutes at the most), so that the whole command ends within one call of CALL_S seconds.
#
#   bash scripts/gpu_recipe.sh OUT [flags of scripts/gpu_recipe.py]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: bash scripts/gpu_recipe.sh OUT [flags of scripts/gpu_recipe.py]}
shift
CALL_S=${CALL_S:-590}
TEST_S=${TEST_S:-120}
PYTHON=${PYTHON:-python3}
BUNDLE=${BUNDLE:-.gpu}
start=$SECONDS
if [[ ! -f "$BUNDLE/data.tar.gz" ]]; then
    echo "gpu_recipe.sh: $BUNDLE/data.tar.gz is missing: run 'bash scripts/gpu_bundle.sh' first and carry .gpu" >&2
    exit 2
fi
mkdir -p "$OUT"
tar -xzf "$BUNDLE/data.tar.gz" -C "$BUNDLE"
shopt -s nullglob
wheels=("$BUNDLE"/wheels/*.whl)
if (( ${#wheels[@]} )) && ! "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
        "${wheels[@]}"; then
    echo "gpu_recipe.sh: the bundled wheels did not install (another Python?): going on with the image's packages" >&2
    rm -rf /tmp/site  # no half of the bundle in front of the image's packages
fi
export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

code=0
timeout "$TEST_S" "$PYTHON" -m pytest -q -p no:cacheprovider -m cuda tests/test_torch_varlen.py \
    tests/test_modeling_bertscratch.py tests/test_muon.py > "$OUT/pytest-cuda.log" 2>&1 || code=$?
echo "CUDA tests: exit code $code, $(tail -n 1 "$OUT/pytest-cuda.log")"

minutes=$("$PYTHON" -c "print(round(min(9.0, ($CALL_S - ($SECONDS - $start)) / 60), 2))")
echo "gpu_recipe.py: --deadline_minutes $minutes"
exec "$PYTHON" scripts/gpu_recipe.py --data_dir "$BUNDLE/data" --output_dir "$OUT" --work_dir /tmp/gpu-recipe \
    --deadline_minutes "$minutes" "$@"
