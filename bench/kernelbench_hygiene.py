"""Which KernelBench problems a checker cannot trust: `kevin tasks validate` over levels 1-3 (issue #18).

Runs every selected KernelBench problem through `kevin.tasks.validate` (own process per problem, the
degenerate and nondeterministic checks) and writes one JSON report whose `excluded` list is what
`kevin.tasks.splits.read_excluded` reads: the problems whose status is `degenerate` or
`nondeterministic`. Problems `skipped` as too large for the device were not classified: on a CPU
with the 1 GiB budget most of level 1 is skipped, so the list is complete only for what ran; run it
on the GPU (`--device cuda`) for the whole set.

Each problem's result is journaled as it is known (`--journal`, default beside --out: kevin.tasks.journal),
so a run cut short (a device call's limit: on the H200 in s39, 87 problems in ~400 s at 6 jobs, median
16.7 s, the 12-17 GB ones 53-72 s, before their outputs were compared on the device) and run again
with the same options validates only the rest; the journal is removed once the report is whole.

Usage:
    CPU:  nice -n 19 python bench/kernelbench_hygiene.py --levels 1 2 3 --device cpu \
              --out bench/results/kernelbench_hygiene_cpu.json
    GPU:  python bench/kernelbench_hygiene.py --levels 1 2 3 --device cuda \
              --out bench/results/h200/kernelbench_hygiene_cuda.json
    Ship: python bench/kernelbench_hygiene.py --package bench/results/h100/s40/tasks/kernelbench_hygiene_cuda.json
KernelBench is read from $KEVIN_KERNELBENCH_DIR or ../shared/kernelbench_data.

`--package REPORT` writes the list kevin ships (kevin/tasks/kernelbench_excluded.json, what
`loop.exclude` and `kevin bench --exclude` read by default as `kernelbench`) from a whole GPU report
of levels 1-3: a report of fewer levels, problems or a CPU run is refused (exit 2).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kevin.errors import UsageError  # noqa: E402
from kevin.tasks import load_tasks  # noqa: E402
from kevin.tasks.journal import Journal  # noqa: E402
from kevin.tasks.splits import EXCLUDED_FILE, EXCLUDED_STATUSES  # noqa: E402
from kevin.tasks.validate import (  # noqa: E402
    DEFAULT_BUDGET_GIB,
    GIB,
    ValidateSettings,
    ValidationResult,
    summarize,
    validate_tasks,
)


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def package(report_path: Path, target: Path = EXCLUDED_FILE) -> list[str]:
    """Write the shipped exclusion list from a whole GPU report (UsageError otherwise); its ids."""
    try:
        report = json.loads(report_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise UsageError(f"{report_path}: not a readable report ({exc})") from exc
    total = len(load_tasks("kernelbench", level=[1, 2, 3]))
    if (
        report.get("settings", {}).get("device") != "cuda"
        or sorted(report.get("levels", [])) != [1, 2, 3]
        or len(report.get("results", [])) != total
    ):
        raise UsageError(
            f"{report_path} is not a whole GPU report of levels 1-3 ({total} problems); run this script "
            "with --levels 1 2 3 --device cuda to the end first"
        )
    skipped = [r["task_id"] for r in report["results"] if r["status"] == "skipped"]
    if skipped:
        raise UsageError(f"{report_path} skipped {skipped[:5]} (too large for its device): not whole")
    record = {
        "about": "KernelBench problems a checker cannot trust (degenerate or nondeterministic), left out of "
        "every split by default (kevin.tasks.splits.KERNELBENCH_EXCLUDED); written by "
        "bench/kernelbench_hygiene.py --package",
        "report": str(report_path),
        "commit": report.get("commit", ""),
        "machine": report.get("machine", ""),
        "excluded": [{k: row[k] for k in ("id", "name", "status", "reason")} for row in report["excluded"]],
    }
    target.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return [row["id"] for row in record["excluded"]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", metavar="REPORT", help="write the shipped list from REPORT, and stop")
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout-s", type=float, default=120.0)
    parser.add_argument("--budget-gib", type=float, default=None)
    parser.add_argument("--out", help="the JSON report to write (required unless --package)")
    parser.add_argument(
        "--journal", help="where each result is kept as it is known (default: <out's stem>.journal.jsonl)"
    )
    args = parser.parse_args(argv)
    if args.package:
        try:
            ids = package(Path(args.package))
        except UsageError as exc:
            print(f"kernelbench_hygiene: {exc}", file=sys.stderr)
            return 2
        print(f"{EXCLUDED_FILE}: {len(ids)} excluded ({', '.join(ids)})")
        return 0
    if not args.out:
        parser.error("--out is required (or --package REPORT)")

    budget_gib = args.budget_gib if args.budget_gib is not None else DEFAULT_BUDGET_GIB[args.device]
    settings = ValidateSettings(
        device=args.device,
        timeout_s=args.timeout_s,
        budget_bytes=int(budget_gib * GIB),
        seed=0,
        threads=max(1, (os.cpu_count() or 1) // args.jobs),
    )
    tasks = load_tasks("kernelbench", level=args.levels)
    out = Path(args.out)
    journal_path = Path(args.journal) if args.journal else out.with_name(out.stem + ".journal.jsonl")
    # What changes a result (not the threads: they follow --jobs and the host's cores).
    header = {"levels": args.levels, **{k: v for k, v in asdict(settings).items() if k != "threads"}}
    journal = Journal(journal_path, header)
    saved = {t.id: journal.get("result", t.id) for t in tasks}
    known = {task_id: ValidationResult(**row) for task_id, row in saved.items() if row}
    todo = [t for t in tasks if t.id not in known]
    if known:
        print(f"going on from {journal_path}: {len(known)} of {len(tasks)} results kept", flush=True)

    def progress(done, total, result):
        journal.put("result", result.task_id, asdict(result))
        line = f"{result.task_id} {result.status} ({result.elapsed_s:.1f} s)"
        print(f"[{done + len(known)}/{len(tasks)}] {line}", flush=True)

    start_s = time.monotonic()
    fresh = {r.task_id: r for r in validate_tasks(todo, settings, jobs=args.jobs, progress=progress)}
    results = [known.get(t.id) or fresh[t.id] for t in tasks]
    wall_s = time.monotonic() - start_s
    import torch

    report = {
        "command": "python bench/kernelbench_hygiene.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "commit": _commit(),
        "machine": f"{os.cpu_count()} cores, {platform.machine()}, python {platform.python_version()}, "
        f"torch {torch.__version__}"
        + (f", {torch.cuda.get_device_name(0)}" if args.device == "cuda" and torch.cuda.is_available() else ""),
        "wall_s": round(wall_s, 1),
        "results_from_journal": len(known),
        "levels": args.levels,
        "settings": asdict(settings),
        "summary": {
            f"L{level}": summarize([r for r in results if r.level == level]) for level in args.levels
        },
        "excluded": [
            {"id": r.task_id, "name": r.name, "status": r.status, "reason": r.reason}
            for r in results
            if r.status in EXCLUDED_STATUSES
        ],
        "results": [asdict(r) for r in results],
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    journal_path.unlink(missing_ok=True)  # the report is whole: nothing left to go on from
    print(json.dumps(report["summary"]))
    print(f"excluded: {[e['id'] for e in report['excluded']]}; report in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
