"""What a runner's start costs, forked from its judge or executed afresh (issue #15, session 27).

A judge starts two runners per candidate (the candidate's and the clean one that brackets its timing
and times the baseline). Executed afresh, each is a new Python that imports torch and kevin: on the
H200 in session 26, 8-22 s of a runner's 45-110 s to ready while a step's 16 replacement spares (48
processes importing torch) booted at once. Forked from a judge that has imported torch
(`kevin.evaluator.spawn`, fork mode, the default where `spawn.forkable()` allows it) a runner starts
with it. Two measurements, each with `KEVIN_RUNNER_FORK` on and off, on the same machine:

  starts  K runners launched at once (`harness.launch_runner`, as a worker's boot does, K/2 workers'
          worth) from a process that has imported torch, until each has answered `boot`: seconds
          from launch to ready per runner, the runner's own `import` seconds, the wall until all are
          ready, and the CPU seconds the runners and their supervisors used (/proc stat).
  batch   `kevin eval-batch` over the bundled set on the cpp back end (`--jobs J`), build and baseline
          caches warmed first by one pass, then each mode in turn, `--repeats` times (`exec`: runners
          executed afresh; `fork`: forked from their judge, the default; `zygote`: judges forked from
          a zygote too, KEVIN_WORKER_ZYGOTE=1): wall, seconds per candidate, and whether every
          verdict matches across modes.

Usage:  PYTHONPATH=. python bench/runner_start.py --out bench/results/runner_start_cpu
        [--concurrent 1,4,8] [--repeats 2] [--jobs 2] [--skip-batch]
Writes runner_start.json and runner_start.md under --out, prints the table last.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

LAUNCH = r"""
import json, os, sys, time
from pathlib import Path
import torch
from kevin.evaluator.worker import harness

root, count = Path(sys.argv[1]), int(sys.argv[2])
spec = {"max_file_bytes": 1 << 26, "build_cache": str(root / "builds"), "device": "cpu", "area_bytes": 1 << 24,
        "cpu_threads": 1, "flush_l2": False, "fast_build": True}
tick = os.sysconf("SC_CLK_TCK")

def cpu(pid):
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick
    except (OSError, IndexError, ValueError):
        return 0.0

started = time.perf_counter()
runners = [harness.launch_runner(spec, root / f"home{i}", traced=i % 2 == 0, fork=True) for i in range(count)]
rows = []
for runner in runners:
    reply = runner.reply("boot")
    rows.append({"ready_s": round(time.perf_counter() - runner.started, 3), "seconds": reply["seconds"],
                 "forked": runner.confinement["forked"],
                 "cpu_s": round(sum(cpu(pid) for pid in (runner.pid, runner.process.supervisor_pid,
                                                           runner.process.init_pid) if pid), 3)})
wall = time.perf_counter() - started
for runner in runners:
    runner.kill()
print(json.dumps({"wall_s": round(wall, 3), "runners": rows}))
"""


def launch(count: int, fork: bool) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO), KEVIN_RUNNER_FORK="1" if fork else "0")
    with tempfile.TemporaryDirectory(prefix="kevin-start-") as root:
        done = subprocess.run(
            [sys.executable, "-c", LAUNCH, root, str(count)], env=env, capture_output=True, text=True, timeout=600
        )
    if done.returncode != 0:
        raise SystemExit(f"the launch failed: {done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if any(row["forked"] != fork for row in result["runners"]):
        raise SystemExit(f"KEVIN_RUNNER_FORK={int(fork)} but the runners' forked flags disagree")
    return result


def starts(concurrent: list[int], repeats: int) -> list[dict]:
    rows = []
    for count in concurrent:
        for fork in (False, True):
            runs = [launch(count, fork) for _ in range(repeats)]
            runners = [row for run in runs for row in run["runners"]]
            rows.append({
                "concurrent": count, "mode": "fork" if fork else "exec",
                "ready_s_median": round(statistics.median(r["ready_s"] for r in runners), 3),
                "ready_s_max": round(max(r["ready_s"] for r in runners), 3),
                "import_s_median": round(statistics.median(r["seconds"]["import"] for r in runners), 3),
                "wall_s_median": round(statistics.median(run["wall_s"] for run in runs), 3),
                "cpu_s_per_runner": round(statistics.mean(r["cpu_s"] for r in runners), 3),
                "runs": runs,
            })  # fmt: skip
            print(f"starts: {count} at once, {rows[-1]['mode']}: ready median {rows[-1]['ready_s_median']} s", flush=True)
    return rows


BATCH_MODES = {
    "exec": {"KEVIN_RUNNER_FORK": "0", "KEVIN_WORKER_ZYGOTE": "0"},
    "fork": {"KEVIN_RUNNER_FORK": "1", "KEVIN_WORKER_ZYGOTE": "0"},
    "zygote": {"KEVIN_RUNNER_FORK": "1", "KEVIN_WORKER_ZYGOTE": "1"},
}
"""Batch modes: runners executed afresh; runners forked from their judge (the default); judges
forked from a zygote too (kevin.evaluator.zygote, opt-in)."""


def batch(cache: Path, jobs: int, mode: str, out: Path) -> dict:
    out.unlink(missing_ok=True)
    fork = mode != "exec"
    env = dict(os.environ, PYTHONPATH=str(REPO), **BATCH_MODES[mode])
    command = [sys.executable, "-m", "kevin", "eval-batch", "--backend", "cpp", "--jobs", str(jobs), "--quiet",
               "--cache-dir", str(cache), "--out", str(out), "--seed", "7"]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=3000)
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"eval-batch failed ({done.returncode}): {done.stderr[-2000:]}")
    results = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    verdicts = {r["id"]: (r["stage"], r["correct"]) for r in results}
    forked = [(r.get("checks") or {}).get("confinement", {}).get("forked") for r in results]
    totals = [sum((r.get("stage_seconds") or {}).values()) for r in results]
    zygote = [(r.get("checks") or {}).get("worker_boot", {}).get("zygote") for r in results]
    if any(bool(f) != fork for f in forked) or any(bool(z) != (mode == "zygote") for z in zygote):
        raise SystemExit(f"mode {mode} did not reach every worker: forked {forked}, zygote {zygote}")
    return {
        "mode": mode, "wall_s": round(wall, 2), "candidates": len(results),
        "seconds_per_candidate": round(wall / max(1, len(results)), 3),
        "worker_s_median": round(statistics.median(totals), 3) if totals else None,
        "forked": sum(bool(f) for f in forked), "verdicts": verdicts,
    }  # fmt: skip


def batches(jobs: int, repeats: int, work: Path) -> list[dict]:
    cache = work / "cache"
    batch(cache, jobs, "fork", work / "warm.jsonl")  # builds and baselines cached: every mode alike
    print("batch: caches warmed", flush=True)
    rows = []
    for repeat in range(repeats):
        for mode in BATCH_MODES:
            row = batch(cache, jobs, mode, work / f"{repeat}_{mode}.jsonl")
            rows.append({"repeat": repeat, **row})
            print(f"batch {repeat} {row['mode']}: {row['wall_s']} s for {row['candidates']}", flush=True)
    return rows


def table(report: dict) -> str:
    lines = [
        "| runners at once | mode | ready, median s | ready, max s | runner's import, median s | all ready, s "
        "| CPU s per runner (with its supervisor and init) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in report["starts"]:
        lines.append(
            f"| {row['concurrent']} | {row['mode']} | {row['ready_s_median']} | {row['ready_s_max']} | "
            f"{row['import_s_median']} | {row['wall_s_median']} | {row['cpu_s_per_runner']} |"
        )
    if report.get("batches"):
        lines += ["", "| repeat | mode | candidates | wall s | s per candidate | worker s, median | runners forked |",
                  "|---|---|---|---|---|---|---|"]  # fmt: skip
        for row in report["batches"]:
            lines.append(
                f"| {row['repeat']} | {row['mode']} | {row['candidates']} | {row['wall_s']} | "
                f"{row['seconds_per_candidate']} | {row['worker_s_median']} | {row['forked']} |"
            )
        same = len({json.dumps(row["verdicts"], sort_keys=True) for row in report["batches"]}) == 1
        lines += ["", f"Verdicts identical across every batch: {'yes' if same else 'NO'}"]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="report directory")
    parser.add_argument("--concurrent", default="1,4,8", help="runners launched at once, comma-separated")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=2, help="eval-batch --jobs")
    parser.add_argument("--skip-batch", action="store_true", help="only the starts")
    args = parser.parse_args()
    try:
        concurrent = [int(x) for x in args.concurrent.split(",") if x]
    except ValueError:
        parser.error(f"--concurrent takes integers separated by commas (got {args.concurrent!r})")
    if args.repeats < 1 or args.jobs < 1 or not concurrent or min(concurrent) < 1:
        parser.error("--repeats, --jobs and every --concurrent value must be at least 1")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report: dict = {"host": {"cpus": os.cpu_count(), "python": sys.version.split()[0]}, "starts": starts(concurrent, args.repeats)}
    if not args.skip_batch:
        with tempfile.TemporaryDirectory(prefix="kevin-batch-") as work:
            report["batches"] = batches(args.jobs, args.repeats, Path(work))
    import torch

    report["host"]["torch"] = torch.__version__
    (out / "runner_start.json").write_text(json.dumps(report, indent=1) + "\n")
    text = table(report)
    (out / "runner_start.md").write_text(
        "# Runner starts: forked from the judge vs executed afresh\n\n"
        f"`python bench/runner_start.py --out {args.out} --concurrent {args.concurrent} --repeats {args.repeats} "
        f"--jobs {args.jobs}`, host: {report['host']}\n\n{text}\n"
    )
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
