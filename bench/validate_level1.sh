#!/usr/bin/env bash
# Validate every KernelBench level-1 problem on this CPU and record the result (issue #2, item 6).
# Usage: bash bench/validate_level1.sh   (about 5-10 minutes on 2 cores; most problems are skipped
# as too large for the 1 GiB CPU budget, sized on the meta device without allocating anything)
# Writes $OUT/validate_level1_cpu.md (default OUT=bench/results): the exact command, the machine, and
# the table with its summary. KernelBench is read from $KEVIN_KERNELBENCH_DIR or ../shared/kernelbench_data.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-bench/results}"
mkdir -p "$OUT"
REPORT="$OUT/validate_level1_cpu.md"
COMMAND=(python -m kevin tasks validate --source kernelbench --level 1 --device cpu --jobs 2 --timeout-s 120)
TABLE="$(mktemp)"
trap 'rm -f "$TABLE"' EXIT

start_s=$(date +%s)
"${COMMAND[@]}" --out "$TABLE" >/dev/null
elapsed_s=$(( $(date +%s) - start_s ))

{
  echo "# kevin tasks validate: KernelBench level 1 on CPU"
  echo
  echo "- command: \`${COMMAND[*]}\`"
  echo "- date (UTC): $(date -u +%Y-%m-%dT%H:%MZ); commit: $(git rev-parse --short HEAD)"
  echo "- machine: $(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB memory, no GPU;" \
       "$(python -c 'import sys, torch; print(f"python {sys.version.split()[0]}, torch {torch.__version__}")')"
  echo "- wall time: ${elapsed_s} s"
  echo
  echo "MiB is the meta-device estimate of inputs + parameters + output (inputs + parameters when the"
  echo "first two already exceed the budget); time_s includes starting Python and torch in the child."
  echo
  echo '```'
  cat "$TABLE"
  echo '```'
} > "$REPORT"
tail -n 3 "$REPORT"
