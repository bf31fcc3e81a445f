#!/usr/bin/env bash
# One call on the 2-GPU machine (nvidia-h200-x2, 32 cores): two lanes at once, each on its own GPU
# and its own 16 cores, so the throughput benchmark sees one H200 with 16 cores as issue #5 asks.
#   lane 0 (GPU 0, cores 0-15):  STEPS0 (default "throughput agreement")
#   lane 1 (GPU 1, cores 16-31): STEPS1 (default "tests adversarial")
# Outputs under $OUT/gpu0 and $OUT/gpu1; each lane's summary is printed when both are done.
set -uo pipefail
OUT="${OUT:-bench/results}"
mkdir -p "$OUT/gpu0" "$OUT/gpu1"
CUDA_VISIBLE_DEVICES=0 OUT="$OUT/gpu0" STEPS="${STEPS0:-throughput agreement}" \
  taskset -c 0-15 bash bench/gpu_run.sh > "$OUT/gpu0/summary.txt" 2>&1 &
lane0=$!
CUDA_VISIBLE_DEVICES=1 OUT="$OUT/gpu1" STEPS="${STEPS1:-tests adversarial}" \
  taskset -c 16-31 bash bench/gpu_run.sh > "$OUT/gpu1/summary.txt" 2>&1 &
lane1=$!
wait $lane0 $lane1
for lane in gpu0 gpu1; do echo "######## $lane"; tail -60 "$OUT/$lane/summary.txt"; done
