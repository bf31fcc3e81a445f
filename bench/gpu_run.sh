#!/usr/bin/env bash
# One call on the GPU machine: environment check, the `gpu` tests, and the evaluator benchmarks.
# Usage there:  bash bench/gpu_run.sh            (writes logs and tables under $OUT, or bench/results)
# KernelBench files are read from $KEVIN_KERNELBENCH_DIR (default: .kb, a carried, git-ignored copy).
set -uo pipefail
export PYTHONPATH="$PWD" PYTHONUNBUFFERED=1
export KEVIN_KERNELBENCH_DIR="${KEVIN_KERNELBENCH_DIR:-$PWD/.kb}"
OUT="${OUT:-bench/results}"
mkdir -p "$OUT"
{
  date -u
  python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__, torch.cuda.get_device_name())"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,memory.used --format=csv
  nproc
} 2>&1 | tee "$OUT/env.txt"
python3 -m pytest -m gpu ${GPU_TESTS:-tests} -v -p no:cacheprovider -o addopts="" 2>&1 | tee "$OUT/gpu_tests.log" | tail -25
${GPU_RUN_EXTRA:-true}
python3 bench/eval_agreement.py --out "$OUT" 2>&1 | tee "$OUT/eval_agreement.log" | tail -30
