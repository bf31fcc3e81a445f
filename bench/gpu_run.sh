#!/usr/bin/env bash
# One call on the GPU machine: environment check, then in parallel the `gpu` tests, the bundled set
# through `kevin eval-batch` (the main job on a GPU), and the evaluator timing-agreement benchmark.
# They share the device lock in /tmp, so no two of them ever time on the GPU at once; their builds
# overlap on the CPU cores.
# Usage there:  OUT=<dir> bash bench/gpu_run.sh     (logs and tables under $OUT, default bench/results)
# KernelBench files come from $KEVIN_KERNELBENCH_DIR (default: .kb, a carried, git-ignored copy).
set -uo pipefail
export PYTHONPATH="$PWD" PYTHONUNBUFFERED=1
export KEVIN_KERNELBENCH_DIR="${KEVIN_KERNELBENCH_DIR:-$PWD/.kb}"
OUT="${OUT:-bench/results}"
mkdir -p "$OUT"
{
  date -u
  python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__, torch.cuda.get_device_name())"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,memory.used --format=csv
  echo "cores: $(nproc)"
} 2>&1 | tee "$OUT/env.txt"

python3 -m pytest -m gpu ${GPU_TESTS:-tests} -v -p no:cacheprovider -o addopts="" > "$OUT/gpu_tests.log" 2>&1 &
tests_pid=$!
python3 -m kevin eval-batch --backend cuda --jobs 12 --quiet --out "$OUT/bundled_cuda.jsonl" \
  > "$OUT/bundled_cuda.txt" 2>&1 &
bundled_pid=$!
python3 bench/eval_agreement.py --out "$OUT" > "$OUT/eval_agreement.log" 2>&1
wait $tests_pid $bundled_pid
echo "== gpu tests";   tail -15 "$OUT/gpu_tests.log"
echo "== bundled set (kevin eval-batch --backend cuda)"; tail -16 "$OUT/bundled_cuda.txt"
echo "== agreement";   tail -22 "$OUT/eval_agreement.log"
