#!/usr/bin/env bash
# One call on the GPU machine. STEPS picks what runs (default: "build tests"):
#   host        the evaluator's host tests (forked starts, heap policy, spin cores, session weights,
#               spares) on the GPU machine's CPU and CUDA torch, alone, first (s30: two failed there)
#   build       bench/build_speed.py: kevin's cold and cached builds one at a time, plain load_inline
#               for the first 6 (6 at once); runs alone, so build times see an idle machine
#   tests       the `gpu` tests (GPU_TESTS, default tests/), GPU_TEST_WORKERS processes at once
#   bundled     the bundled set through `kevin eval-batch`
#   adversarial bench/adversarial.py --backend cuda (the GPU corpus table of issue #4; the cpp
#               corpus runs on the CPU: python bench/adversarial.py --backend cpp); ADV_ONLY: the
#               entries, comma-separated globs (default all: ~50 s an entry, more than one call);
#               ADV_LANES: candidates at once (--lanes); ADV_FROM: a folder holding an earlier call's
#               adversarial_cuda_rows.jsonl / _lanes.jsonl (carried): --resume runs only the rest
#   throughput  bench/eval_throughput.py, cold pass (issue #5); its --deadline-s STEP_TIMEOUT - 50, then
#               THROUGHPUT_ARGS (--harness kevin, --hangs, --timing-precision 0, ...)
#   plain       bench/eval_throughput.py --passes plain: harness (a) alone over all 66 candidates,
#               PLAIN_JOBS at once (builds overlap, GPU work one at a time), for the verdict check;
#               merge with the cold pass: copy throughput_plain.json beside throughput_cold.json and
#               run bench/eval_throughput.py --report-only --out <that dir>
#   isolation   bench/isolation_cost.py --backend cuda: per-stage cost of the judge/runner split
#   aa          bench/timing_aa.py (issue #15 item 2: copies of four short kernels in a busy 16-job batch),
#               AA_PASSES (default busy,quiet) sharing a --deadline-s of STEP_TIMEOUT - 60 (its 30 s
#               grace for stragglers inside the step; s45's first was cut with no report); alone
#   peer        bench/kernelbench_peer.py (issue #15: KernelBench's own evaluator over the throughput mix;
#               carry .peers/KernelBench), --deadline-s STEP_TIMEOUT - 60, then PEER_ARGS; alone. kevin's
#               side is `throughput` with THROUGHPUT_ARGS="--harness kevin" in the next call on that machine
#   agreement   bench/eval_agreement.py (kevin's timing against triton's do_bench), after the rest
#               has finished: it wants a quiet machine
#   triton      bench/adversarial.py --backend triton (issue #19: 3 Triton cheats and an honest twin)
#   fetch       bench/fetch_ab.py (issue #19): bundled small CUDA candidates (FETCH_TASKS, default six
#               small tasks), the candidate's trace after its timing off and on (FETCH_VARIABLE=trace;
#               `profiler`: the control's profiler warm-up, s37: not the cause), after a warm-up
#               pass, FETCH_ROUNDS rounds (default 2) at FETCH_JOBS (default 3)
#   tasks       (TASKS_FROM: an earlier call's folder with its .tgz archives and hygiene journal, to go on
#               from them: finished sets come back whole, cut ones from their journals; HYGIENE_JOBS:
#               6 on a GPU of 120 GB or more (32 GiB a problem at most), 4 below;
#               TASKS_STEPS: which of "generate enlarge hygiene" to run, default all three)
#               issue #18, one after another (each measures reference times on the GPU): 100 generated
#               tasks at the large size (kevin tasks generate --min-ms 0.1), KernelBench L1/L2 enlarged
#               (kevin tasks enlarge, needs .kb), the hygiene report over L1-L3
#   search      issue #17: kevin bench (6 KernelBench tasks x 4 x 3 replayed completions) and kevin optimize
#               (L1_88) over bench/results/kernelbench_replay/records.jsonl (needs .kb); search.tgz;
#               SEARCH_FROM: an earlier call's folder with its search.tgz (carried), to resume both
#   learning    bench/learning_run.py (issue #16's learning run: family, corpus, SFT, RL on GPU
#               rewards, held-out before/after) within LEARN_BUDGET_S (default 480) s; alone
# Just the Triton gpu cases (#19): STEPS=tests GPU_TESTS="tests/evaluator/test_bundled.py -k triton"
# The parallel steps share kevin's device lock in /tmp, so none of them times while another runs
# on the same GPU. Each step is cut at STEP_TIMEOUT seconds; its log so far stays.
# Usage there:  OUT=<dir> STEPS="build tests" bash bench/gpu_run.sh
# Two GPUs at once: bench/gpu_run_x2.sh.
# KernelBench files come from $KEVIN_KERNELBENCH_DIR (default: .kb, a carried, git-ignored copy).
set -uo pipefail
export PYTHONPATH="$PWD" PYTHONUNBUFFERED=1
export KEVIN_KERNELBENCH_DIR="${KEVIN_KERNELBENCH_DIR:-$PWD/.kb}"
OUT="${OUT:-bench/results}"
STEPS=" ${STEPS:-build tests} "
mkdir -p "$OUT"
# A warm machine may still run processes of an earlier call cut short: kevin's workers would hold the
# device lock, and anything left on the GPU shares it with this call's timings (s44: a naive-harness
# child spinning in a kernel outlived its cut call, and two later calls timed beside it). What was
# there is logged in env.txt; nothing of an earlier call is wanted, so every compute process goes.
left_on_gpu=$(nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader 2>&1)
pkill -KILL -f "kevin[.]evaluator[.]worker" 2>/dev/null || true
pkill -KILL -f "naive_harness[.]py --child" 2>/dev/null || true
# Its pids may be the host's (a container's own differ): only a Python process of that pid is killed.
for pid in $(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null); do
  tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q python && kill -KILL "$pid" 2>/dev/null
done
has() { [[ "$STEPS" == *" $1 "* ]]; }
{
  date -u
  python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__, torch.cuda.get_device_name())"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,memory.used --format=csv
  echo "cores: $(nproc)"
  echo "left on the GPU by earlier calls (killed): ${left_on_gpu:-none}"
} 2>&1 | tee "$OUT/env.txt"

if has build; then
  python3 bench/build_speed.py --backend cuda --out "$OUT" --plain-jobs 6 --plain-limit 6 > "$OUT/build_speed.log" 2>&1
fi
# SIGINT, not TERM: pytest then prints its summary (which cases failed, and why) before it exits; s16
# lost both to a TERM at the limit (and s30 a host-test run to plain `timeout`).
limit="timeout -s INT --kill-after=20 ${STEP_TIMEOUT:-540}"
# A step of several commands (tasks, search) shares one STEP_TIMEOUT: each command gets what is left
# of it (at least 10 s), so the step's archive is still written inside the call (s36: with the limit
# per command, generate + enlarge + hygiene could outlast a call and return nothing).
step_limit() { timeout -s INT --kill-after=20 $(( step_end - SECONDS > 10 ? step_end - SECONDS : 10 )) "$@"; }
if has host; then  # alone, before the rest: they measure processes' starts, heaps and priorities
  $limit python3 -m pytest -rA -p no:cacheprovider -o addopts="" --timeout 200 tests/evaluator/test_fork_spawn.py \
    tests/evaluator/test_runner_heap.py tests/evaluator/test_spin_cores.py tests/evaluator/test_session_weight.py \
    tests/evaluator/test_spares.py > "$OUT/host_tests.log" 2>&1
fi
pids=()
if has tests; then
  $limit python3 -m pytest -m gpu ${GPU_TESTS:-tests} -v -p no:cacheprovider -o addopts="" \
    -n "${GPU_TEST_WORKERS:-4}" --timeout 420 --junitxml="$OUT/gpu_tests.xml" > "$OUT/gpu_tests.log" 2>&1 &
  pids+=($!)
fi
if has bundled; then
  $limit python3 -m kevin eval-batch --backend cuda --jobs 12 --quiet --out "$OUT/bundled_cuda.jsonl" \
    > "$OUT/bundled_cuda.txt" 2>&1 &
  pids+=($!)
fi
if has adversarial; then
  resume=()
  if [ -n "${ADV_FROM:-}" ]; then  # an earlier call's rows (carried): only the rest is evaluated
    cp "$ADV_FROM"/adversarial_cuda_rows.jsonl "$ADV_FROM"/adversarial_cuda_lanes.jsonl "$OUT"/ 2>/dev/null
    resume=(--resume)
  fi
  $limit python3 bench/adversarial.py --backend cuda --jobs 8 --no-cost --out "$OUT" --only "${ADV_ONLY:-*}" \
    --lanes "${ADV_LANES:-1}" "${resume[@]}" > "$OUT/adversarial.log" 2>&1 &
  pids+=($!)
fi
if has throughput; then
  $limit python3 bench/eval_throughput.py --kernelbench "$KEVIN_KERNELBENCH_DIR" --out "$OUT" --passes cold \
    --deadline-s $(( ${STEP_TIMEOUT:-540} - 50 )) ${THROUGHPUT_ARGS:-} > "$OUT/throughput.log" 2>&1 &
  pids+=($!)
fi
if has plain; then
  $limit python3 bench/eval_throughput.py --kernelbench "$KEVIN_KERNELBENCH_DIR" --out "$OUT" --passes plain \
    --harness plain --a-limit 1000 --a-jobs "${PLAIN_JOBS:-20}" --timing-budget-ms 300 --reserve-s 90 \
    --deadline-s "${PLAIN_DEADLINE_S:-500}" --cache-dir /tmp/kevin-plain-pass-cache > "$OUT/plain_pass.log" 2>&1 &
  pids+=($!)
fi
[ ${#pids[@]} -gt 0 ] && wait "${pids[@]}"
if has isolation; then
  $limit python3 bench/isolation_cost.py --backend cuda --out "$OUT" > "$OUT/isolation_cost.log" 2>&1
fi
if has aa; then  # alone: its copies' spread is the measurement (the busy pass makes its own load)
  $limit python3 bench/timing_aa.py --out "$OUT" --passes "${AA_PASSES:-busy,quiet}" --kernelbench \
    "$KEVIN_KERNELBENCH_DIR" --deadline-s $(( ${STEP_TIMEOUT:-540} - 60 )) > "$OUT/timing_aa.log" 2>&1
fi
if has peer; then  # alone: the peer's rate is over its own wall, as kevin's is over its own
  $limit python3 bench/kernelbench_peer.py --out "$OUT" --kernelbench "$KEVIN_KERNELBENCH_DIR" \
    --deadline-s $(( ${STEP_TIMEOUT:-540} - 60 )) ${PEER_ARGS:-} > "$OUT/kernelbench_peer.log" 2>&1
fi
if has triton; then
  $limit python3 bench/adversarial.py --backend triton --no-cost --out "$OUT" > "$OUT/adversarial_triton.log" 2>&1
fi
if has fetch; then  # alone: it compares fetch times, which other steps' load would disturb
  small_tasks=01_gelu_tanh,02_row_sum,03_softmax,05_matmul,07_linear_silu_layernorm,11_cumsum
  $limit python3 bench/fetch_ab.py --out "$OUT" --backend cuda --rounds "${FETCH_ROUNDS:-2}" \
    --jobs "${FETCH_JOBS:-3}" --tasks "${FETCH_TASKS:-$small_tasks}" --variable "${FETCH_VARIABLE:-trace}" \
    > "$OUT/fetch_ab.log" 2>&1
fi
if has tasks; then
  step_end=$((SECONDS + ${STEP_TIMEOUT:-540}))
  # A generation or enlargement cut by the call's limit returns its journal inside its archive:
  # TASKS_FROM (the carried folder of that call's files) puts it back, and it goes on where it stopped.
  # A set that call finished (its manifest written, its journal removed) comes back whole and is not
  # made again (s38: a finished generation was validated anew, 2 of the call's minutes).
  from="${TASKS_FROM:-/nonexistent}"
  for journal in generated_s0/.generate_journal.jsonl kernelbench_large/.enlarge_journal.jsonl; do
    d=${journal%%/*}
    if tar tzf "$from/$d.tgz" "$d/manifest.json" > /dev/null 2>&1; then
      tar xzf "$from/$d.tgz" -C "$OUT"
    elif [ -f "$from/$d.tgz" ]; then
      tar xzf "$from/$d.tgz" -C "$OUT" "$journal" 2>/dev/null
    fi
  done
  hygiene=kernelbench_hygiene_cuda
  [ -f "$from/$hygiene.journal.jsonl" ] && cp "$from/$hygiene.journal.jsonl" "$OUT/"
  parts=" ${TASKS_STEPS:-generate enlarge hygiene} "
  [[ "$parts" != *" generate "* ]] || [ -f "$OUT/generated_s0/manifest.json" ] || step_limit python3 -m kevin \
    tasks generate --n 100 --seed 0 \
    --size large --device cuda --min-ms 0.1 --jobs 8 --out "$OUT/generated_s0" \
    > "$OUT/tasks_generate.log" 2>&1
  [[ "$parts" != *" enlarge "* ]] || [ -f "$OUT/kernelbench_large/manifest.json" ] || step_limit python3 -m kevin \
    tasks enlarge --levels 1 2 \
    --device cuda --min-ms 0.1 --jobs 8 --out "$OUT/kernelbench_large" > "$OUT/tasks_enlarge.log" 2>&1
  # Its journal ($hygiene.journal.jsonl, beside the report until the report is whole) comes back too.
  gpu_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | head -1)
  [ "${gpu_mib:-0}" -ge 120000 ] 2>/dev/null && hygiene_jobs=6 || hygiene_jobs=4
  [[ "$parts" != *" hygiene "* ]] || step_limit python3 bench/kernelbench_hygiene.py --levels 1 2 3 \
    --device cuda --jobs "${HYGIENE_JOBS:-$hygiene_jobs}" --out "$OUT/$hygiene.json" > "$OUT/tasks_hygiene.log" 2>&1
  # A call returns at most ~8 files: the task folders come back as one archive each.
  for d in generated_s0 kernelbench_large; do
    [ -d "$OUT/$d" ] && tar czf "$OUT/$d.tgz" -C "$OUT" "$d" && rm -rf "${OUT:?}/$d"
  done
fi
if has search; then  # issue #17: kevin bench and kevin optimize over bench/kernelbench_replay.py's records
  step_end=$((SECONDS + ${STEP_TIMEOUT:-540}))
  # Both commands resume from their run folders: SEARCH_FROM (an earlier call's carried folder holding
  # its search.tgz) puts them back, and only the unfinished trajectories and turns run.
  [ -f "${SEARCH_FROM:-/nonexistent}/search.tgz" ] && tar xzf "$SEARCH_FROM/search.tgz" -C "$OUT"
  replay=bench/results/kernelbench_replay
  step_limit python3 -m kevin bench --replay "$replay/records.jsonl" --source kernelbench \
    --ids L1_40,L1_88,L1_95,L2_63,L2_76,L2_99 --trajectories 4 --turns 3 --backend cuda --jobs 8 \
    --out "$OUT/search/bench" > "$OUT/search_bench.log" 2>&1
  step_limit python3 -m kevin optimize "$KEVIN_KERNELBENCH_DIR/level1/88_MinGPTNewGelu.py" --replay "$replay/records.jsonl" \
    --trajectories 4 --turns 3 --backend cuda --jobs 8 --out "$OUT/search/optimize_L1_88" > "$OUT/search_optimize.log" 2>&1
  [ -d "$OUT/search" ] && tar czf "$OUT/search.tgz" -C "$OUT" search && rm -rf "${OUT:?}/search"
fi
if has learning; then
  timeout --kill-after=15 $(( ${LEARN_BUDGET_S:-480} + 60 )) python3 bench/learning_run.py --out "$OUT/learn" \
    --budget-s "${LEARN_BUDGET_S:-480}" > "$OUT/learning_run.log" 2>&1
fi
if has agreement; then
  $limit python3 bench/eval_agreement.py --out "$OUT" > "$OUT/eval_agreement.log" 2>&1
fi
has build && { echo "== build speed"; tail -22 "$OUT/build_speed.log"; }
has host && { echo "== host tests"; grep -E "^(FAILED|ERROR)" "$OUT/host_tests.log"; tail -1 "$OUT/host_tests.log"; }
has tests && { echo "== gpu tests"; grep -E "PASSED|FAILED|ERROR|SKIPPED" "$OUT/gpu_tests.log" | grep -v PASSED | tail -15; tail -3 "$OUT/gpu_tests.log"; }
has bundled && { echo "== bundled set"; tail -16 "$OUT/bundled_cuda.txt"; }
has adversarial && { echo "== adversarial"; grep -E " -> |dynamic only|cheats" "$OUT/adversarial.log" | tail -30; }
has throughput && { echo "== throughput"; tail -30 "$OUT/throughput.log"; }
has plain && { echo "== plain pass"; tail -8 "$OUT/plain_pass.log"; }
has isolation && { echo "== isolation cost"; tail -16 "$OUT/isolation_cost.log"; }
has aa && { echo "== timing A/A"; tail -14 "$OUT/timing_aa.log"; }
has peer && { echo "== KernelBench's evaluator"; tail -4 "$OUT/kernelbench_peer.log"; }
has agreement && { echo "== agreement"; tail -22 "$OUT/eval_agreement.log"; }
has triton && { echo "== adversarial (triton)"; tail -20 "$OUT/adversarial_triton.log"; }
has fetch && { echo "== fetch A/B"; tail -5 "$OUT/fetch_ab.log"; }
has tasks && for f in generate enlarge hygiene; do
  echo "== tasks $f"; tail -8 "$OUT/tasks_$f.log" 2>/dev/null
done
has search && for f in bench optimize; do echo "== search $f"; tail -12 "$OUT/search_$f.log"; done
has learning && { echo "== learning run"; tail -30 "$OUT/learning_run.log"; }
exit 0
