"""What the judge/runner split costs per evaluation (issue #13): stage times of honest candidates.

Evaluates each bundled task's honest candidate REPEATS times, one at a time, with a warm build
cache (a first untimed pass builds everything and the broker's shim and reference binding), and
reports the mean seconds per stage. The isolation's own stages are `calibrate` (the clean runner's
overhead cycles, exclusive on the device) and the runner's start (inside `setup`); the device is
the evaluator's bottleneck, so the throughput cost is the calibrate share of the device-held
stages (calibrate, correctness, timing, reference, baseline). Also written: each run's confinement
record (PID namespace, Landlock, seccomp) so the table shows the defences were on.

    PYTHONPATH=. python bench/isolation_cost.py --backend cuda --out bench/results/h200
    PYTHONPATH=. python bench/isolation_cost.py --backend cpp --out bench/results
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kevin.evaluator.evaluate import EvalConfig, evaluate  # noqa: E402
from kevin.evaluator.timing import TimingConfig  # noqa: E402
from kevin.tasks import load_bundled  # noqa: E402

DEVICE_STAGES = ("calibrate", "correctness", "timing", "reference", "baseline")


def pairs(backend: str, size: str, limit: int) -> list[tuple]:
    folder = REPO / "kevin" / "tasks" / "bundled" / backend
    found = []
    for task in load_bundled(size):
        number = task.id.split("_")[1]
        matches = sorted(folder.glob(f"{number}_*.py"))
        if matches:
            found.append((task, matches[0].read_text()))
    return found[:limit]


def run(args: argparse.Namespace) -> dict:
    config = EvalConfig(
        backend=args.backend,
        cache_dir=args.cache_dir,
        timing=TimingConfig(budget_ms=args.budget_ms),
        baseline_cache=True,
    )
    chosen = pairs(args.backend, args.size, args.tasks)
    started = time.monotonic()
    for task, source in chosen:  # warm: builds, the broker's shim and reference binding, baselines
        evaluate(task, source, config)
    warm_s = time.monotonic() - started
    rows = []
    for _ in range(args.repeats):
        for task, source in chosen:
            result = evaluate(task, source, config)
            rows.append(
                {
                    "task": task.id,
                    "stage": result.stage,
                    "speedup": result.speedup,
                    "stage_seconds": result.stage_seconds,
                    "confinement": result.checks.get("confinement", {}),
                }
            )
            print(f"{task.id}: {result.stage} {result.speedup} {result.stage_seconds}", flush=True)
    return {"backend": args.backend, "warm_s": round(warm_s, 1), "rows": rows}


def summary(report: dict) -> dict:
    rows = [r for r in report["rows"] if r["stage"] == "ok"]
    stages = sorted({s for r in rows for s in r["stage_seconds"]})
    means = {s: statistics.fmean(r["stage_seconds"].get(s, 0.0) for r in rows) for s in stages} if rows else {}
    device = sum(means.get(s, 0.0) for s in DEVICE_STAGES)
    return {
        "evaluations": len(report["rows"]),
        "passed": len(rows),
        "mean_stage_s": {k: round(v, 4) for k, v in means.items()},
        "device_held_s": round(device, 4),
        "calibrate_share_of_device": round(means.get("calibrate", 0.0) / device, 4) if device else None,
        "pid_namespace": all(r["confinement"].get("pid_namespace") for r in rows),
        "seccomp": all(r["confinement"].get("lockdown", {}).get("seccomp") for r in rows),
        "reads_confined": all(r["confinement"].get("lockdown", {}).get("reads_confined") for r in rows),
    }


def markdown(report: dict, stats: dict) -> str:
    lines = [
        f"# Isolation cost per evaluation ({report['backend']} back end)",
        "",
        f"{stats['passed']}/{stats['evaluations']} honest evaluations passed; defences on in every one: "
        f"PID namespace {stats['pid_namespace']}, seccomp {stats['seccomp']}, reads confined "
        f"{stats['reads_confined']}.",
        "",
        "| stage | mean s |",
        "|---|---|",
    ]
    lines += [f"| {k} | {v} |" for k, v in stats["mean_stage_s"].items()]
    lines += [
        "",
        f"Device-held stages: {stats['device_held_s']} s per evaluation, of which `calibrate` (the "
        f"isolation's own device time) is {stats['calibrate_share_of_device']}.",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("cuda", "cpp"), default="cuda")
    parser.add_argument("--size", choices=("small", "large"), default=None)
    parser.add_argument("--tasks", type=int, default=4, help="bundled tasks used (default 4)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--budget-ms", type=float, default=2000.0)
    parser.add_argument("--cache-dir", default="/tmp/kevin-isolation-cost")
    parser.add_argument("--out", default=str(REPO / "bench" / "results"))
    args = parser.parse_args()
    args.size = args.size or ("large" if args.backend == "cuda" else "small")
    report = run(args)
    stats = summary(report)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"isolation_cost_{args.backend}.json").write_text(json.dumps({**report, "summary": stats}, indent=1))
    text = markdown(report, stats)
    (out / f"isolation_cost_{args.backend}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
