#!/usr/bin/env bash
# One launch of the learning run (bench/learning_run.py) on the GPU machine, from the repository
# root of a clean tree. A run is longer than one device call (10 minutes), so it is split into
# launches on the same machine, called again while it is still warm (the work folder is in /tmp):
#     OUT=$OUT LAUNCH=1 SHIM_TGZ=.out/shim.tgz bash bench/learning_launch.sh   # family .. SFT, RL
#     OUT=$OUT LAUNCH=2 bash bench/learning_launch.sh                          # RL resumed
# SHIM_TGZ: the evaluator's shim from an earlier call (its cache's shims/ folder, as this script
# returns it in $OUT/shim.tgz), so the first launch does not spend ~100 s building it.
# LEARN_BUDGET_S: this launch's budget (default 480; the watchdog adds 40 s). LEARN_ARGS: more
# arguments for learning_run.py (the CPU check: "--scale toy --backend cpp").
# Writes $OUT/learning_run<N>.log and $OUT/learn<N>.tgz: the report (--out) with the RL run's
# whole episodes, held-out and metrics files and the run's record.
set -uo pipefail
n=${LAUNCH:-1}
budget=${LEARN_BUDGET_S:-480}
work=/tmp/kevin-learn
cache=/tmp/kevin-learn-cache
mkdir -p "$cache"
if [ -n "${SHIM_TGZ:-}" ] && [ -f "$SHIM_TGZ" ] && [ ! -d "$cache/shims" ]; then
  tar xzf "$SHIM_TGZ" -C "$cache"
fi
resume=()
[ "$n" -gt 1 ] && resume=(--resume)
export PYTHONPATH="$PWD" PYTHONUNBUFFERED=1
timeout --kill-after=15 $((budget + 60)) python3 bench/learning_run.py --out "/tmp/learn$n" --work "$work" \
  --cache-dir "$cache" --budget-s "$budget" "${resume[@]}" ${LEARN_ARGS:-} > "$OUT/learning_run$n.log" 2>&1
echo "learning_run exit $?" >> "$OUT/learning_run$n.log"
(cd /tmp && tar czf "$OUT/learn$n.tgz" "learn$n" $(ls kevin-learn/rl/*.jsonl kevin-learn/rl/config.json kevin-learn/record.json 2>/dev/null))
if [ "$n" = 1 ] && [ -d "$cache/shims" ]; then tar czf "$OUT/shim.tgz" -C "$cache" shims; fi
grep -v "sft step" "$OUT/learning_run$n.log" | tail -25
