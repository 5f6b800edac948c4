#!/usr/bin/env bash
# Pack what scripts/gpu_recipe.py needs on a GPU machine that reaches no network into .gpu/ (git ignores it), to be
# carried beside the repository:
#   .gpu/data.tar.gz   the tasks' local copies from DATA_DIR (imdb, sst2, glue, conll2003; WikiText-2 ships in the
#                      package), unpacked there into .gpu/data
#   .gpu/wheels/       the packages a machine with its own PyTorch may lack or hold too old: the versions of
#                      constraints/tested.txt, for PYTHON_VERSION (default 3.12)
#
#   bash scripts/gpu_bundle.sh [DATA_DIR]          # default $BERTSCRATCH_DATA_DIR, else ../shared/data
#
# Then, on the GPU machine, from the repository root, one command ($OUT is where the records go): it unpacks the
# bundle, runs the CUDA tests and then scripts/gpu_recipe.py within one call of 590 seconds (scripts/gpu_recipe.sh):
#   bash scripts/gpu_recipe.sh $OUT
set -euo pipefail
cd "$(dirname "$0")/.."
DATA_DIR=${1:-${BERTSCRATCH_DATA_DIR:-../shared/data}}
PYTHON_VERSION=${PYTHON_VERSION:-3.12}
# What scripts/gpu_recipe.py imports beyond torch and what an image with PyTorch, pandas, pyarrow and scikit-learn
# holds: transformers (>= the range's floor), datasets and evaluate with what they need of their own.
PACKAGES=(transformers datasets evaluate dill multiprocess fsspec)

for folder in imdb sst2 glue conll2003; do
    if [[ ! -d "$DATA_DIR/$folder" ]]; then
        echo "gpu_bundle.sh: $DATA_DIR/$folder is missing (DATA_DIR must be laid out as ../shared/data)" >&2
        exit 2
    fi
done
mkdir -p .gpu
rm -rf .gpu/wheels .gpu/data .gpu/data.tar.gz.partial
tar -czf .gpu/data.tar.gz.partial -C "$DATA_DIR" --transform 's,^,data/,' imdb sst2 glue conll2003
mv .gpu/data.tar.gz.partial .gpu/data.tar.gz

pins=()
for package in "${PACKAGES[@]}"; do
    pin=$(grep -i "^${package}==" constraints/tested.txt) || { echo "gpu_bundle.sh: no pin of $package in constraints/tested.txt" >&2; exit 2; }
    pins+=("$pin")
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PYTHON_VERSION" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .gpu/wheels "${pins[@]}"
du -sh .gpu/data.tar.gz .gpu/wheels
