"""What a training run's verdicts say about the evaluator: outcomes, flags, where each candidate's
seconds went, why our infrastructure failed, and whether the timings look disturbed.

    python bench/verdict_health.py RUN_DIR [--json OUT.json]

RUN_DIR is a `kevin train` run directory (episodes.jsonl or episodes.jsonl.gz, and heldout.jsonl
when present) or a learning run's work directory holding one under `rl/`. The disturbance check
counts timing figures near 8, 12, 16 or 20 ms: multiples of a scheduler slice, which a cycle
takes when the judge and its runner, both spinning, share one core (session 23 found this: 7.99 ms
cycles on one core, on the H200 and on a 2-core CPU machine alike). Session 22's figures there
were first put down to the trainer computing on the GPU outside the device lock (since fixed); the
s23 run, with the trainer inside it, still had them. Verdicts made since record where the timing
spun (`checks.timing_cores`), counted here; a run whose timings were all pinned apart should have
such figures only in the clean calibration, which runs unpinned beside other work.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from kevin.evaluator.evaluate import OUT_OF_MEMORY

GRID_MS = (8.0, 12.0, 16.0, 20.0)
GRID_TOLERANCE_MS = 0.1
STAGES = ("total", "build", "compile", "setup", "wait_gpu", "calibrate", "correctness", "timing", "baseline")


def episode_files(run_dir: Path) -> list[Path]:
    for base in (run_dir, run_dir / "rl"):
        found = [
            p
            for name in ("episodes.jsonl", "episodes.jsonl.gz", "heldout.jsonl", "heldout.jsonl.gz")
            if (p := base / name).is_file()
        ]
        if found:
            return found
    return []


def read_verdicts(paths: list[Path]) -> list[dict[str, Any]]:
    verdicts = []
    for path in paths:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt") as lines:
            for line in lines:
                verdict = json.loads(line).get("verdict")
                if isinstance(verdict, dict):
                    verdicts.append(verdict)
    return verdicts


def timing_figures(verdict: dict[str, Any]) -> dict[str, float]:
    """Where-labelled timing figures of one verdict: brackets and clean overheads, the candidate's
    and the baseline's median raw cycle."""
    figures = {}
    checks = verdict.get("checks") or {}
    for who, seen in (checks.get("overhead_ms") or {}).items():
        for kind, value in (seen or {}).items():
            if isinstance(value, (int, float)):
                figures[f"{kind} ({who})"] = float(value)
    for label, key in (("candidate cycles", "timing"), ("baseline cycles", "baseline_timing")):
        value = (verdict.get(key) or {}).get("wall_median_ms")
        if isinstance(value, (int, float)):
            figures[label] = float(value)
    return figures


def stage_time(seconds: dict[str, float], stage: str) -> float | None:
    """A stage's seconds; `unstaged`: the total less every stage the worker named (build is inside
    compile), mostly a spare worker still booting when its job came (session 23: 15-27 s for 5-7
    candidates of each early step)."""
    if stage != "unstaged":
        return seconds.get(stage)
    if "total" not in seconds:
        return None
    return seconds["total"] - sum(t for name, t in seconds.items() if name not in ("total", "build"))


TIMED = (("candidates", "timing"), ("baselines", "baseline_timing"))


def blocks_inflated(stats: Any) -> bool:
    """A recorded timing whose median block stands over 1.5x its median cycle (and 0.05 ms above it:
    kevin.evaluator.timing.blocks_inflated, dispersed since session 25): frequent slow calls. On the
    committed H200 runs (s20-s23, 890 timings each side): median ratio 1.003, p90 1.016; over the
    rule 24 candidates and 11 baselines, s22's 13-20x (the trainer outside the lock) and s23's
    1.8-2.7x (two spinners on one core)."""
    if not isinstance(stats, dict) or not stats.get("wall_median_ms") or stats.get("median_ms") is None:
        return False
    blocks = stats["median_ms"] + stats.get("overhead_ms", 0.0)
    return blocks > 1.5 * stats["wall_median_ms"] and blocks - stats["wall_median_ms"] > 0.05


def on_grid(value: float) -> bool:
    return any(abs(value - mark) <= GRID_TOLERANCE_MS for mark in GRID_MS)


def bracket_sides(verdicts: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per timed party, the bracket's overhead before the calls over its overhead after them
    (`checks.bracket_sides_ms`, s30): their median, and how many brackets were over 2% slower before.
    Slower before, attempt after attempt, is a device still warming up when the calls were timed
    (the overhead taken off is then too large: short calls come out at ~0)."""
    ratios: dict[str, list[float]] = {}
    for verdict in verdicts:
        for who, pairs in ((verdict.get("checks") or {}).get("bracket_sides_ms") or {}).items():
            ratios.setdefault(who, []).extend(before / after for before, after in pairs if after > 0)
    return {
        who: {
            "n": len(values),
            "median_before_over_after": round(statistics.median(values), 4),
            "before_slower_2pct": sum(1 for value in values if value > 1.02),
        }
        for who, values in ratios.items()
        if values
    }


def trace_records(verdicts: list[dict[str, Any]]) -> dict[str, int]:
    """The traces' device records against their launch calls (`checks.trace`, s43): a look keeps a
    device record for each kernel launch, copy and fill, so fewer records than launches means some
    were lost on their way (pytorch/pytorch#192021), which only an empty look is caught for today
    (`blind`); more come from graph launches. s44's H100 table: equal in 62 traces of 62."""
    counts = Counter()
    for verdict in verdicts:
        trace = (verdict.get("checks") or {}).get("trace") or {}
        if trace.get("blind"):
            counts["blind"] += 1
        elif isinstance(launches := trace.get("launch_calls"), int) and isinstance(
            seen := trace.get("device_activities"), int
        ):
            counts["equal" if seen == launches else "fewer" if seen < launches else "more"] += 1
    return {key: counts[key] for key in ("equal", "fewer", "more", "blind")}


def health(verdicts: list[dict[str, Any]]) -> dict[str, Any]:
    outcomes = Counter(f"{v.get('stage')} / {v.get('blame')}" for v in verdicts)
    flags = Counter(flag for v in verdicts for flag in v.get("flags") or [])
    seconds = {}
    for stage in (*STAGES, "unstaged"):
        values = [t for v in verdicts if (t := stage_time(v.get("stage_seconds") or {}, stage)) is not None]
        if values:
            seconds[stage] = {
                "n": len(values),
                "median": round(statistics.median(values), 2),
                "p90": round(sorted(values)[int(0.9 * (len(values) - 1))], 2),
                "max": round(max(values), 2),
            }
    infrastructure = Counter(
        (v.get("error") or "").split(" (")[0].split(":")[0][:100]
        for v in verdicts
        if v.get("blame") == "infrastructure"
    )
    # Device memory run out (s34's H100: kevin's own workers' contexts filled it), by blame, and the
    # runs repeated alone after one (kevin.evaluator.evaluate).
    out_of_memory = Counter(
        str(v.get("blame")) for v in verdicts if any(m in (v.get("error") or "") for m in OUT_OF_MEMORY)
    )
    rerun_alone = sum(1 for v in verdicts if (v.get("checks") or {}).get("retried_alone_after"))
    disturbed: Counter[str] = Counter()
    for verdict in verdicts:
        for label, value in timing_figures(verdict).items():
            if on_grid(value):
                disturbed[label] += 1
    cores = Counter(
        ("pinned, kept" if seat.get("kept") else "pinned") if isinstance(seat, dict) else str(seat)
        for v in verdicts
        if (seat := (v.get("checks") or {}).get("timing_cores")) is not None
    )
    zero = sum(1 for v in verdicts if (v.get("timing") or {}).get("median_ms") == 1e-6)
    zero_baselines = sum(1 for v in verdicts if (v.get("baseline_timing") or {}).get("median_ms") == 1e-6)
    # Timings done again because they or their bracket were dispersed (s23: 43 of 164, 2.3 s against
    # 1.2 s): the verdicts that reached the timing stage, and those that needed more than one attempt.
    timed = [v for v in verdicts if "timing" in (v.get("stage_seconds") or {})]
    retried = sum(1 for v in timed if ((v.get("checks") or {}).get("timing_attempts") or {}).get("candidate"))
    inflated = {who: sum(1 for v in verdicts if blocks_inflated(v.get(key))) for who, key in TIMED}
    # s42: correct kernels the fp32 reference's own rounding failed and the float64 look passed, and
    # the timed fetches' excess over the clean fetch (the deferred-work check's measure).
    float64 = sum(1 for v in verdicts if (v.get("correctness") or {}).get("passed_against_float64"))
    excess = sorted(
        float(x)
        for v in verdicts
        if isinstance(x := (v.get("checks") or {}).get("fetch_excess_ms"), (int, float))
    )
    return {
        "passed_against_float64": float64,
        "trace_records": trace_records(verdicts),
        "fetch_excess_ms": {
            "n": len(excess),
            "median": round(statistics.median(excess), 4) if excess else None,
            "p90": round(excess[int(0.9 * (len(excess) - 1))], 4) if excess else None,
            "max": round(excess[-1], 4) if excess else None,
        },
        "bracket_sides": bracket_sides(verdicts),
        "references_retimed": sum(1 for v in verdicts if (v.get("checks") or {}).get("reference_retimed")),
        "verdicts": len(verdicts),
        "outcomes": dict(outcomes.most_common()),
        "flags": dict(flags.most_common()),
        "stage_seconds": seconds,
        "infrastructure": dict(infrastructure.most_common()),
        "out_of_memory": {"by_blame": dict(out_of_memory.most_common()), "rerun_alone": rerun_alone},
        "grid_figures": dict(disturbed.most_common()),
        "timing_cores": dict(cores.most_common()),
        "timed_at_zero": {"candidates": zero, "baselines": zero_baselines},
        "timings_retried": {"retried": retried, "timed": len(timed)},
        "blocks_inflated": inflated,
    }


def report(summary: dict[str, Any]) -> str:
    lines = [f"verdicts: {summary['verdicts']}"]
    lines.append("outcomes: " + ", ".join(f"{k} {n}" for k, n in summary["outcomes"].items()))
    lines.append("flags: " + (", ".join(f"{k} {n}" for k, n in summary["flags"].items()) or "none"))
    lines.append(f"{'stage':12s} {'n':>5s} {'median s':>9s} {'p90 s':>8s} {'max s':>8s}")
    for stage, row in summary["stage_seconds"].items():
        lines.append(f"{stage:12s} {row['n']:5d} {row['median']:9.2f} {row['p90']:8.2f} {row['max']:8.2f}")
    lines.append(
        "infrastructure failures: "
        + ("; ".join(f"{n} x {reason}" for reason, n in summary["infrastructure"].items()) or "none")
    )
    memory = summary["out_of_memory"]
    lines.append(
        "device out of memory: "
        + (", ".join(f"{blame} {n}" for blame, n in memory["by_blame"].items()) or "none")
        + f"; rerun alone after one: {memory['rerun_alone']}"
    )
    grid = summary["grid_figures"]
    lines.append(
        "timing figures at 8/12/16/20 ms (disturbed unless clean calibration): "
        + (", ".join(f"{k} {n}" for k, n in grid.items()) or "none")
    )
    lines.append(
        "where timings spun (checks.timing_cores): "
        + (
            ", ".join(f"{k} {n}" for k, n in summary["timing_cores"].items())
            or "not recorded (before s23's fix)"
        )
    )
    zero = summary["timed_at_zero"]
    lines.append(f"timed at 0 (1e-6 ms): {zero['candidates']} candidates, {zero['baselines']} baselines")
    retried = summary["timings_retried"]
    lines.append(f"candidate timings retried (dispersed): {retried['retried']} of {retried['timed']}")
    inflated = summary["blocks_inflated"]
    lines.append(
        f"blocks inflated by frequent slow calls: {inflated['candidates']} candidates, "
        f"{inflated['baselines']} baselines"
    )
    sides = summary["bracket_sides"]
    lines.append(
        "bracket, overhead before over after the calls (median; over 2% slower before): "
        + (
            ", ".join(
                f"{who} {row['median_before_over_after']} ({row['before_slower_2pct']} of {row['n']})"
                for who, row in sides.items()
            )
            or "not recorded (before s30)"
        )
    )
    lines.append(f"references timed again under their bandwidth floor: {summary['references_retimed']}")
    lines.append(f"correct against the float64 reference only: {summary['passed_against_float64']}")
    records = summary["trace_records"]
    lines.append(
        "traces, device records against launch calls: "
        f"equal {records['equal']}, fewer (records lost) {records['fewer']}, more {records['more']}, "
        f"blind {records['blind']}"
    )
    fetch = summary["fetch_excess_ms"]
    lines.append(
        f"timed fetch over the clean one (ms; deferred_work {summary['flags'].get('deferred_work', 0)}): "
        + (
            f"median {fetch['median']}, p90 {fetch['p90']}, max {fetch['max']} of {fetch['n']}"
            if fetch["n"]
            else "none"
        )
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--json", type=Path, help="also write the summary here")
    args = parser.parse_args(argv)
    paths = episode_files(args.run_dir)
    if not paths:
        print(
            f"verdict_health: no episodes.jsonl(.gz) in {args.run_dir} or its rl/; pass a run directory",
            file=sys.stderr,
        )
        return 2
    summary = health(read_verdicts(paths))
    print(report(summary))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
