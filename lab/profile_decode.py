"""Time the MLM head's inference decoding alone (tiles vs one GEMM, fresh vs reused output); see `--help`."""

from hf_bertscratch.benchmark import profile_decode_main

if __name__ == "__main__":
    profile_decode_main()
