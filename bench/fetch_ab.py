"""Does the control runner's missing profiler warm-up make honest kernels read `deferred_work`? (#19)

A timing fetches a few of the candidate's outputs and compares the fastest with the control
runner's clean fetch (kevin.evaluator.worker.timed): much slower means the output was computed when
asked for. In s34's H100 run the candidate's runner fetched small outputs ~0.05 ms slower than the
control (median over 90 verdicts), and two honest 4-5x row reductions were flagged and unrewarded.
The candidate's runner warms the profiler at its start (CUPTI's start, on the GPU) and the control
does not; `KEVIN_CONTROL_PROFILER=1` makes the control warm it too (kevin.evaluator.probes).

This evaluates the bundled honest candidates of the small tasks in rounds, each round once with the
variable off and once on (the order alternating by round), a fresh worker per evaluation (its
environment read at its start), `--jobs` at a time, and reports per mode: verdicts, those flagged
`deferred_work`, and the medians of the timed fetch less the bracket's (whole, copy, signalling).
If the gap closes with the variable on, the warm-up is the cause and the control should warm it.
s37 (H100, bench/results/h100/s37/): it does not. `--variable trace` compares the other difference
instead: `KEVIN_TRACE_AFTER_TIMING=1` moves the candidate's trace (a real CUPTI session) after its
timing, so the calls and fetches are timed in a runner that has profiled nothing yet.

    python bench/fetch_ab.py --out DIR [--backend cuda|triton|cpp] [--tasks 02_row_sum,...]
                             [--rounds 2] [--jobs 3] [--no-warmup] [--variable profiler|trace]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kevin.evaluator.evaluate import BACKENDS, EvalConfig, evaluate
from kevin.evaluator.probes import CONTROL_PROFILER_VARIABLE, TRACE_AFTER_TIMING_VARIABLE
from kevin.tasks import Task

BUNDLED = Path(__file__).resolve().parents[1] / "kevin" / "tasks" / "bundled"
MODES = ("off", "on")
VARIABLES = {
    "profiler": (CONTROL_PROFILER_VARIABLE, "control profiler"),
    "trace": (TRACE_AFTER_TIMING_VARIABLE, "trace after timing"),
}
"""What the `on` mode sets to 1 (and its label): the control's profiler warm-up, or the trace after
the timing."""


def honest_pairs(backend: str, names: list[str] | None) -> list[tuple[str, str, str]]:
    """(name, problem source at its small size, candidate source) for each bundled task that has a
    candidate for `backend` (those named, in that order, when given)."""
    folder = BUNDLED / backend
    available = sorted(p.stem for p in folder.glob("[0-9][0-9]_*.py"))
    chosen = names or available
    missing = [n for n in chosen if n not in available]
    if missing:
        have = ", ".join(available)
        raise ValueError(f"no bundled {backend} candidate for {', '.join(missing)} (have: {have})")
    return [
        (n, (BUNDLED / "tasks" / f"{n}.py").read_text(), (folder / f"{n}.py").read_text()) for n in chosen
    ]


def fetch_row(mode: str, round_index: int, name: str, result: Any) -> dict[str, Any]:
    """What a verdict says about its fetches (None where it was not timed)."""
    checks = result.checks or {}
    fetch, copy = checks.get("fetch_ms") or {}, checks.get("fetch_copy_ms") or {}
    starts = checks.get("runner_start_s") or []  # the candidate's runner, then the control
    row: dict[str, Any] = {
        "mode": mode, "round": round_index, "task": name, "passed": result.passed,
        "flags": list(result.flags), "stage": result.stage, "runtime_ms": result.runtime_ms,
        "control_warmed": len(starts) > 1 and "profiler" in starts[1],
        "fetch_timed": None, "fetch_bracket": fetch.get("bracket"), "copy_timed": None,
        "copy_bracket": copy.get("bracket"),
        # The candidate runner's own clean fetch, before its candidate loaded (s37: is it as slow?).
        "fetch_own": fetch.get("own"), "copy_own": copy.get("own"),
        "traced_after_timing": traced_after_timing(checks),
    }  # fmt: skip
    if fetch.get("timed"):
        row["fetch_timed"] = min(fetch["timed"])
    if copy.get("timed"):
        row["copy_timed"] = min(copy["timed"])
    return row


def traced_after_timing(checks: dict[str, Any]) -> bool:
    """Whether the verdict's timeline has a correctness stage (the trace's) after its timing."""
    names = [stage[0] for stage in (checks.get("timeline") or {}).get("stages", [])]
    return "timing" in names and "correctness" in names[names.index("timing"):]


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 4) if values else None


def summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per mode: verdicts, passed, deferred_work flags and the median gaps (ms) to the bracket."""
    table = {}
    for mode in MODES:
        mine = [r for r in rows if r["mode"] == mode]
        timed = [r for r in mine if r["fetch_timed"] is not None and r["fetch_bracket"] is not None]
        copied = [r for r in timed if r["copy_timed"] is not None and r["copy_bracket"] is not None]
        table[mode] = {
            "verdicts": len(mine),
            "passed": sum(r["passed"] for r in mine),
            "deferred_work": sum("deferred_work" in r["flags"] for r in mine),
            "control_warmed": sum(r["control_warmed"] for r in mine),
            "fetch_gap_ms": _median([r["fetch_timed"] - r["fetch_bracket"] for r in timed]),
            "copy_gap_ms": _median([r["copy_timed"] - r["copy_bracket"] for r in copied]),
            "signalling_gap_ms": _median(
                [r["fetch_timed"] - r["copy_timed"] - r["fetch_bracket"] + r["copy_bracket"] for r in copied]
            ),
        }
    return table


def render(table: dict[str, dict[str, Any]], label: str = "control profiler") -> str:
    keys = (
        "verdicts", "passed", "deferred_work", "control_warmed",
        "fetch_gap_ms", "copy_gap_ms", "signalling_gap_ms",
    )  # fmt: skip
    lines = [f"{label:18s}" + "".join(f"{k:>18s}" for k in keys)]
    for mode, values in table.items():
        cells = ("-" if values[k] is None else str(values[k]) for k in keys)
        lines.append(f"{mode:18s}" + "".join(f"{cell:>18s}" for cell in cells))
    return "\n".join(lines)


def run(
    pairs: list[tuple[str, str, str]],
    backend: str,
    rounds: int,
    jobs: int,
    cache: Path,
    warmup: bool = True,
    journal: Path | None = None,
    variable: str = "profiler",
) -> list[dict]:
    """Every pair once per mode per round; a mode's evaluations run together, the variable set for
    them alone (each worker reads it when it starts). `warmup`: one pass first, not recorded, so
    the builds are cached and neither mode's first pass is the cold one. Each recorded pass's rows
    are appended to `journal` as it ends, so a run cut by a call's limit keeps its finished passes."""
    env_name, label = VARIABLES[variable]
    rows: list[dict[str, Any]] = []
    config = EvalConfig(backend=backend, cache_dir=str(cache), baseline_cache=False)
    tasks = [(name, Task.from_source(problem, id=f"{name}-small", name=name), source)
             for name, problem, source in pairs]  # fmt: skip
    passes = [("warm-up", -1)] if warmup else []
    for round_index in range(rounds):
        passes += [(mode, round_index) for mode in (MODES if round_index % 2 == 0 else MODES[::-1])]
    try:
        for mode, round_index in passes:
            os.environ[env_name] = "1" if mode == "on" else "0"
            started = time.monotonic()
            with ThreadPoolExecutor(max_workers=jobs) as pool:
                futures = [(name, pool.submit(evaluate, task, code, config)) for name, task, code in tasks]
                done = [fetch_row(mode, round_index, name, future.result()) for name, future in futures]
            if round_index >= 0:
                rows += done
                if journal is not None:
                    with journal.open("a") as handle:
                        handle.writelines(json.dumps(r) + "\n" for r in done)
            flagged = sum("deferred_work" in r["flags"] for r in done)
            print(
                f"{mode if round_index < 0 else f'round {round_index + 1}/{rounds} {label} {mode}'}: "
                f"{len(done)} verdicts, {flagged} deferred_work, {time.monotonic() - started:.0f} s",
                flush=True,
            )
    finally:
        os.environ.pop(env_name, None)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="folder for fetch_ab.jsonl and fetch_ab.md")
    parser.add_argument("--backend", default="cuda", choices=BACKENDS)
    parser.add_argument("--tasks", default="", help="bundled task names, comma-separated (default: all)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=3)
    parser.add_argument("--no-warmup", action="store_true", help="skip the unrecorded first pass")
    parser.add_argument(
        "--variable", default="profiler", choices=sorted(VARIABLES),
        help="what `on` sets: the control's profiler warm-up (default) or the trace after the timing",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.jobs < 1:
        print("fetch_ab: --rounds and --jobs must be at least 1", file=sys.stderr)
        return 2
    try:
        pairs = honest_pairs(args.backend, [n for n in args.tasks.split(",") if n] or None)
    except ValueError as exc:
        print(f"fetch_ab: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    journal = out / "fetch_ab.jsonl"
    journal.write_text("")
    with tempfile.TemporaryDirectory(prefix="kevin-fetch-ab-") as cache:
        rows = run(
            pairs, args.backend, args.rounds, args.jobs, Path(cache), not args.no_warmup, journal, args.variable
        )
    label = VARIABLES[args.variable][1]
    text = render(summary(rows), label)
    command = " ".join(["python bench/fetch_ab.py", *(argv if argv is not None else sys.argv[1:])])
    title = f"# Fetch gaps to the bracket, {label} off and on"
    (out / "fetch_ab.md").write_text(f"{title}\n\n`{command}`\n\n```\n{text}\n```\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
