#!/usr/bin/env bash
# One GPU record in results/gpu/: parity of the device against the CPU, training and inference tokens/s of BertScratch
# against transformers' BERT (sdpa; flash_attention_2 where flash_attn is installed), peak memory and MFU. Arguments
# go to scripts/gpu_check.py (`--help` lists them); the record is also printed.
#
#   bash scripts/gpu_check.sh                                  # the CUDA device, the full grid (--budget_s 420)
#   bash scripts/gpu_check.sh --device cpu --quick             # every stage at the tiny preset, on the CPU
#   bash scripts/gpu_check.sh --output_dir /some/folder        # the record elsewhere
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python}" scripts/gpu_check.py "$@"
