"""The CPU back end's timing: the judge and its runners on one core, or where the scheduler puts them.

On the CPU back end a timed cycle is a hand-off: the judge writes the call's inputs into shared memory,
wakes the runner through a socket and sleeps until it answers. Session 35 found an honest 0.05 ms
kernel's speedup moving 1.07x-1.76x over five evaluations on an idle 2-core host (baselines
0.18-0.22 ms), 1.40x-1.67x with the judge and its runners pinned to one core for the timing
(kevin.evaluator.cores.cpu_timing_core, now the default; `KEVIN_CPU_TIMING_SEAT=free` is the old way).

This bench measures both ways on the same kernels: bundled tasks (`--kernels`, `--size`) with their
bundled cpp candidates, `--rounds` evaluations of each kernel in each mode, the two modes alternating
within every round (their order flipped each round) so a host that drifts weighs on both alike.
Every evaluation times its own baseline (no baseline cache), so the reference's steadiness shows too.
Per kernel and mode: speedup median / min / max, CV (stdev / mean), spread ((max - min) / median),
runtime and baseline median / min / max; `cpu_timing_seat.md` and `.json` under --out.

    python bench/cpu_timing_seat.py --out bench/results/cpu_timing_seat --rounds 6

What it does not do: it runs one evaluation at a time (a busy batch is timing_aa.py's), and on a
host with more cores the scheduler may already keep the hand-off on one core more often.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from eval_throughput import environment  # noqa: E402
from timing_aa import bundled_row, spread_stats, task_files  # noqa: E402

from kevin.evaluator.cores import CPU_SEAT_VARIABLE  # noqa: E402

MODES = ("free", "one")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for cpu_timing_seat.md / .json")
    parser.add_argument("--kernels", default="01,02,11", help="bundled task numbers (default 01,02,11)")
    parser.add_argument("--size", default="small", choices=("small", "large"))
    parser.add_argument("--rounds", type=int, default=6, help="evaluations of each kernel in each mode")
    parser.add_argument("--budget-ms", type=float, default=None, help="timing budget (default kevin's)")
    parser.add_argument("--cache-dir", type=Path, default=None, help="build cache (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.rounds < 2:
        parser.error("--rounds must be at least 2 (a spread needs two evaluations)")
    return args


def evaluate_row(row: dict[str, Any], mode: str, cache: Path, budget_ms: float | None) -> dict[str, Any]:
    from kevin.evaluator.evaluate import EvalConfig, evaluate
    from kevin.evaluator.timing import TimingConfig
    from kevin.tasks import Task

    os.environ[CPU_SEAT_VARIABLE] = mode  # the worker's environment passes it through (sandbox)
    timing = TimingConfig()
    if budget_ms is not None:
        timing = TimingConfig(budget_ms=budget_ms, warmup_ms=budget_ms / 10)
    config = EvalConfig(backend="cpp", cache_dir=str(cache), baseline_cache=False, timing=timing)
    problem = Path(row["problem"])
    task = Task.from_source(problem.read_text(), id=row["problem_id"], name=problem.stem)
    result = evaluate(task, Path(row["path"]).read_text(), config)
    return {
        "kernel": row["problem_id"],
        "mode": mode,
        "passed": result.passed,
        "stage": result.stage,
        "flags": list(result.flags),
        "speedup": result.speedup,
        "runtime_ms": result.runtime_ms,
        "baseline_ms": result.baseline_ms,
        "seat": result.checks.get("timing_cores"),
        "error": result.error[:200],
    }


def stats(records: list[dict[str, Any]]) -> dict[str, Any]:
    """One kernel's evaluations in one mode: timing_aa's spread statistics over those that passed, and
    a line for each that did not."""
    timed = [r for r in records if r["passed"] and r["speedup"]]
    out = {"evaluated": len(records), **spread_stats(timed)}
    out["not_passed"] = [f"{r['stage']} {r['flags']} {r['error'][:80]}" for r in records if r not in timed]
    return out


def _fmt(value: float | None, form: str) -> str:
    return "-" if value is None else format(value, form)


def markdown(report: dict[str, Any]) -> str:
    env = report["environment"]
    lines = [
        "# CPU timing: one core for the hand-off, or the scheduler's choice",
        "",
        f"`{report['command']}` on {env.get('cores')} cores, torch {env.get('torch')} "
        f"({report['when']}; kevin {report['commit']}): bundled tasks {report['kernel_numbers']} at size "
        f"{report['size']}, {report['rounds']} evaluations of each in each mode, alternating, every one "
        f"timing its own baseline. `free`: judge and runners where the scheduler puts them; `one`: "
        f"pinned to one core while they time (the default). {report['wall_s']:.0f} s.",
        "",
        "| kernel | mode | n | speedup median / min / max | CV | spread | runtime ms median / min / max "
        "| baseline ms median / min / max |",
        "| --- | --- | ---: | --- | ---: | ---: | --- | --- |",
    ]
    for kernel, modes in report["kernels"].items():
        for mode, s in modes.items():
            three = [
                " / ".join(_fmt(s[key][k], form) for k in ("median", "min", "max"))
                for key, form in (("speedup", ".3f"), ("runtime_ms", ".4f"), ("baseline_ms", ".4f"))
            ]
            lines.append(
                f"| {kernel} | {mode} | {s['n']}/{s['evaluated']} | {three[0]} | {_fmt(s['cv'], '.1%')} "
                f"| {_fmt(s['spread'], '.1%')} | {three[1]} | {three[2]} |"
            )
    failed = [
        f"{kernel} {mode}: {line}"
        for kernel, modes in report["kernels"].items()
        for mode, s in modes.items()
        for line in s["not_passed"]
    ]
    if failed:
        lines += ["", "Not passed:", *[f"- {line}" for line in failed]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    previous = os.environ.get(CPU_SEAT_VARIABLE)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kevin-seat-") as scratch:
        cache = args.cache_dir or Path(scratch) / "cache"
        rows = [bundled_row(p, "cpp", args.size, Path(scratch)) for p in task_files(args.kernels.split(","))]
        records: list[dict[str, Any]] = []
        for round_ in range(args.rounds):
            for row in rows:
                for mode in MODES if round_ % 2 == 0 else MODES[::-1]:
                    record = evaluate_row(row, mode, cache, args.budget_ms)
                    records.append(record)
                    print(
                        f"round {round_ + 1}/{args.rounds} {record['kernel']} {mode:4s} "
                        f"speedup {_fmt(record['speedup'], '.3f')} "
                        f"runtime {_fmt(record['runtime_ms'], '.4f')} ms "
                        f"baseline {_fmt(record['baseline_ms'], '.4f')} ms seat {record['seat']}",
                        flush=True,
                    )
    if previous is None:  # evaluate_row set the variable for the workers; give the caller its own back
        os.environ.pop(CPU_SEAT_VARIABLE, None)
    else:
        os.environ[CPU_SEAT_VARIABLE] = previous
    kernels = {
        row["problem_id"]: {
            mode: stats([r for r in records if r["kernel"] == row["problem_id"] and r["mode"] == mode])
            for mode in MODES
        }
        for row in rows
    }
    report = {
        "command": "python bench/cpu_timing_seat.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": os.popen(f"git -C {REPO} rev-parse --short HEAD 2>/dev/null").read().strip() or "unknown",
        "environment": environment(),
        "kernel_numbers": args.kernels,
        "kernels": kernels,
        "size": args.size,
        "rounds": args.rounds,
        "wall_s": time.monotonic() - started,
        "records": records,
    }
    (args.out / "cpu_timing_seat.json").write_text(json.dumps(report, indent=1) + "\n")
    (args.out / "cpu_timing_seat.md").write_text(markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
