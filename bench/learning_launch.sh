#!/usr/bin/env bash
# The learning run (bench/learning_run.py) on the GPU machine, from the repository root of a clean
# tree. A run is longer than one device call (10 minutes). Two ways to split it:
#
# Detached (DETACH=1, the default plan): the first call starts ONE run in its own process session
# (setsid), which the device machine lets outlive the call while the machine stays warm; every
# call, the first included, then waits for it up to WAIT_S seconds and returns what it has so far.
# The run pays its start-up (CUDA, the evaluator's workers, the model) once and stops for its
# budget once, where a relaunch paid both at every call (s11: 60-110 s of a cold first step and
# 100-170 s of stop-rule slack per launch). Calls must follow each other within the machine's idle
# release (30 s), or the run and /tmp are gone; each call's $OUT holds everything up to then.
#     OUT=$OUT DETACH=1 CALL=1 LEARN_BUDGET_S=1600 WAIT_S=585 bash bench/learning_launch.sh
#     OUT=$OUT DETACH=1 CALL=2 WAIT_S=585 bash bench/learning_launch.sh     # waits on, collects
#
# Relaunched (DETACH unset): each call runs one launch that stops inside the call; later launches
# resume the RL run from its checkpoint (works on a machine that went cold only if /tmp survived).
#     OUT=$OUT LAUNCH=1 bash bench/learning_launch.sh                           # family .. SFT, RL
#     OUT=$OUT LAUNCH=2 bash bench/learning_launch.sh                           # RL resumed
#
# SHIM_TGZ: the evaluator's shim from an earlier call (its cache's shims/ folder, as this script
# returns it in $OUT/shim.tgz), so the run does not spend ~100 s building it.
# LEARN_BUDGET_S: the run's (or launch's) budget (default 480; the watchdog adds 40 s).
# LEARN_ARGS: more arguments for learning_run.py (the CPU check: "--scale toy --backend cpp").
# LEARN_SCRIPT: the script to run (default bench/learning_run.py; tests use a stand-in).
# LEARN_ROOT: where the run's folders go (default /tmp).
# CARRY_IN: a folder of parts an earlier session's run wrote (bench/learning_carry.py), carried to
# this machine with the tree (e.g. .out/carry): the run starts from them instead of from scratch.
# CARRY_OUT=1: the run ends by writing its work folder as parts (bf16 weights, ~50 MB in 15 MiB
# files); the call that sees the run end returns them in $OUT for the next session's CARRY_IN.
# With DETACH, a call that leaves the run going also packs its latest checkpoint then (a live
# carry, ~10 s: keep WAIT_S <= 560), so a machine lost to a late next call (s13, s14, s15) costs
# only the steps since that checkpoint (kevin train saves step 0 right after the start's held-out
# evaluation; pass `--set loop.checkpoint_every=2` in LEARN_ARGS for the later ones).
# CARRY_SCRIPT: the packer (default bench/learning_carry.py; tests use a stand-in).
# Writes $OUT/learning_run<N>.log and $OUT/learn<N>.tgz (N = CALL or LAUNCH): the report (--out)
# once the run has written it, and the RL run's episodes, held-out and metrics files so far. With
# DETACH both are refreshed every SNAPSHOT_S seconds (default 30) while the call waits, and on
# SIGTERM/SIGINT, so a call the device cuts short still returns them.
set -uo pipefail
root=${LEARN_ROOT:-/tmp}
script=${LEARN_SCRIPT:-bench/learning_run.py}
budget=${LEARN_BUDGET_S:-480}
work=$root/kevin-learn
cache=$root/kevin-learn-cache
mkdir -p "$cache"
carry_out=$root/kevin-learn-carry
carry=()
[ -n "${CARRY_IN:-}" ] && carry+=(--carry-in "$(cd "$CARRY_IN" && pwd)")
[ -n "${CARRY_OUT:-}" ] && carry+=(--carry-out "$carry_out")
if [ -n "${SHIM_TGZ:-}" ] && [ -f "$SHIM_TGZ" ] && [ ! -d "$cache/shims" ]; then
  tar xzf "$SHIM_TGZ" -C "$cache"
fi
export PYTHONPATH="$PWD" PYTHONUNBUFFERED=1

collect() {  # $1: the report folder's name under $root, $2: the output's number
  local files
  files=$(cd "$root" && ls -d "$1" kevin-learn/report kevin-learn/rl/*.jsonl kevin-learn/rl/config.json \
    kevin-learn/rl/curves.png kevin-learn/record.json 2>/dev/null)
  # Into place whole: a call cut short mid-tar keeps the last snapshot, not half of a new one.
  # shellcheck disable=SC2086  # the names have no spaces: they are this script's own
  (cd "$root" && tar czf "$root/learn$2.tgz.tmp" $files 2>/dev/null)
  mv -f "$root/learn$2.tgz.tmp" "$OUT/learn$2.tgz"
  if [ -d "$cache/shims" ] && [ ! -f "$OUT/shim.tgz" ] && [ "$2" = 1 ]; then
    tar czf "$OUT/shim.tgz" -C "$cache" shims
  fi
  if [ -d "$carry_out" ]; then  # renamed into place whole by the run: all parts or none
    cp "$carry_out"/carry.tgz.part* "$OUT"/
  fi
}

if [ -n "${DETACH:-}" ]; then
  n=${CALL:-1}
  state=$root/kevin-learn-detached
  mkdir -p "$state"
  if [ ! -f "$state/pid" ]; then
    # $0 the log, $1 the state folder; after the shift, $1 the timeout and $2... the command.
    setsid bash -c 'echo $$ > "$1/pid.tmp"; mv "$1/pid.tmp" "$1/pid"; shift
      timeout --kill-after=15 "$1" python3 "${@:2}"; echo "learning_run exit $?" >> "$0"' \
      "$state/run.log" "$state" $((budget + 60)) "$script" --out "$root/learn" --work "$work" \
      --cache-dir "$cache" --budget-s "$budget" "${carry[@]}" ${LEARN_ARGS:-} > "$state/run.log" 2>&1 < /dev/null &
    for _ in $(seq 50); do [ -f "$state/pid" ] && break; sleep 0.1; done
    echo "learning_launch: started the detached run (pid $(cat "$state/pid" 2>/dev/null), budget ${budget} s)"
  else
    echo "learning_launch: waiting on the detached run (pid $(cat "$state/pid"))"
  fi
  pid=$(cat "$state/pid" 2>/dev/null || echo 0)
  # The device can end a call before WAIT_S (its limit_s is below timeout_s when the session's time
  # runs short: s21 lost a whole call so). Keep $OUT current while waiting, and collect on TERM.
  snapshot() {
    cp "$state/run.log" "$OUT/learning_run$n.log"
    collect learn "$n"
  }
  trap 'echo "learning_launch: cut short by a signal: returning what the run has written so far"
    snapshot; exit 143' TERM INT
  deadline=$((SECONDS + ${WAIT_S:-570}))
  snapped=$SECONDS
  while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do
    sleep 2
    if [ $((SECONDS - snapped)) -ge "${SNAPSHOT_S:-30}" ]; then
      snapshot
      snapped=$SECONDS
    fi
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "learning_launch: the run goes on (call again with CALL=$((n + 1)) within 30 s to keep the machine)"
    if [ -n "${CARRY_OUT:-}" ]; then  # a late next call loses the machine: keep the last checkpoint
      live=$root/kevin-learn-carry-live
      if timeout 60 python3 "${CARRY_SCRIPT:-bench/learning_carry.py}" pack --work "$work" --out "$live" \
          > "$state/live_carry.log" 2>&1; then
        cp "$live"/carry.tgz.part* "$OUT"/
        echo "learning_launch: live carry: $(tail -n 1 "$state/live_carry.log")"
      else
        echo "learning_launch: no live carry yet: $(tail -n 1 "$state/live_carry.log")"
      fi
    fi
  else
    echo "learning_launch: the run has ended"
  fi
  cp "$state/run.log" "$OUT/learning_run$n.log"
  collect learn "$n"
  grep -v "sft step" "$state/run.log" | tail -25
  exit 0
fi

n=${LAUNCH:-1}
resume=()
[ "$n" -gt 1 ] && resume=(--resume)
timeout --kill-after=15 $((budget + 60)) python3 "$script" --out "$root/learn$n" --work "$work" \
  --cache-dir "$cache" --budget-s "$budget" "${resume[@]}" "${carry[@]}" ${LEARN_ARGS:-} > "$OUT/learning_run$n.log" 2>&1
echo "learning_run exit $?" >> "$OUT/learning_run$n.log"
collect "learn$n" "$n"
grep -v "sft step" "$OUT/learning_run$n.log" | tail -25
