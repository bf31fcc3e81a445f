"""Where a training step's evaluation time goes, from its verdicts' timelines (issue #15/#16).

Every verdict since session 28 carries `checks.timeline` (kevin.evaluator.worker.support.timeline):
its judge's start, the job's arrival, each stage's start, every hold it took on the device's lock
(kevin.evaluator.devlock: admission, shared sections, exclusive timing) and its end, in wall-clock
seconds comparable across the workers of one host. Lined up per step, they say whether the device
is the bottleneck (held exclusively or shared most of the step) or not (nobody holds it while
candidates build, boot or wait on each other), and how long workers queue for each kind of hold.

    python bench/step_timeline.py RUN_DIR [--steps 3,4] [--png step.png] [--json OUT.json]

RUN_DIR is a `kevin train` run directory (episodes.jsonl[.gz], heldout.jsonl[.gz]) or a learning
run's work or report folder holding one under `rl/`. Per step (held-out evaluations apart, as
"held-out N"): the candidates' span (first job to last end), how much of it the device was held
exclusively, held shared only and not held at all by any judge (the trainer's own holds are not
in verdicts), and the median and longest waits for a shared section, an exclusive one and
admission. `--png` draws the last of --steps as one row per candidate: its stages, and where it
held the device. Verdicts reused within or across steps are counted once.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from verdict_health import episode_files  # noqa: E402  (the same run files, found the same way)

KINDS = ("exclusive", "shared", "admit")


def run_files(run_dir: Path) -> list[tuple[str, Path]]:
    """(label, path) for the run's episodes and held-out files (verdict_health's), in that order."""
    return [("held-out" if p.name.startswith("heldout") else "train", p) for p in episode_files(run_dir)]


def read_rows(files: list[tuple[str, Path]]) -> list[dict[str, Any]]:
    """One row per distinct judged verdict with a timeline: {step, label, timeline}."""
    rows, seen = [], set()
    for label, path in files:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt") as lines:
            for line in lines:
                record = json.loads(line)
                timeline = ((record.get("verdict") or {}).get("checks") or {}).get("timeline")
                if not isinstance(timeline, dict) or "t0" not in timeline:
                    continue
                key = (timeline["t0"], timeline.get("end"))
                if key in seen:  # a verdict reused for an identical candidate
                    continue
                seen.add(key)
                rows.append({"step": int(record.get("step", 0)), "label": label, "timeline": timeline})
    return rows


def union_length(intervals: list[tuple[float, float]]) -> float:
    """Seconds covered by at least one of `intervals` ((start, end) pairs)."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


def holds(rows: list[dict[str, Any]], kind: str) -> list[tuple[float, float, float]]:
    """(asked, held, released) in absolute seconds of every `kind` hold in `rows`; an admission is
    held until its judge's end."""
    found = []
    for row in rows:
        timeline = row["timeline"]
        t0 = timeline["t0"]
        for entry in timeline.get("device", []):
            name, asked, held, released = entry
            if name != kind or held is None:
                continue
            released = timeline.get("end") if released is None else released
            if released is None:
                continue
            found.append((t0 + asked, t0 + held, t0 + released))
    return found


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One step's (or one held-out evaluation's) figures."""
    starts, ends = [], []
    for row in rows:
        timeline = row["timeline"]
        job = next((at for name, at in timeline["stages"] if name == "job"), None)
        starts.append(timeline["t0"] + (job if job is not None else 0.0))
        if timeline.get("end") is not None:
            ends.append(timeline["t0"] + timeline["end"])
    span = (max(ends) - min(starts)) if starts and ends else 0.0
    exclusive = [(held, released) for _, held, released in holds(rows, "exclusive")]
    shared = [(held, released) for _, held, released in holds(rows, "shared")]
    held_any = union_length(exclusive + shared)
    held_exclusive = union_length(exclusive)
    waits = {}
    for kind in KINDS:
        waited = [held - asked for asked, held, _ in holds(rows, kind)]
        waits[kind] = {
            "sections": len(waited),
            "median_s": round(statistics.median(waited), 3) if waited else None,
            "max_s": round(max(waited), 3) if waited else None,
            "sum_s": round(sum(waited), 1),
        }
    return {
        "candidates": len(rows),
        "span_s": round(span, 1),
        "exclusive_s": round(held_exclusive, 1),
        "shared_only_s": round(held_any - held_exclusive, 1),
        "not_held_s": round(max(0.0, span - held_any), 1),
        "waits": waits,
    }


def by_step(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in sorted(rows, key=lambda r: (r["step"], r["label"] != "train")):
        name = str(row["step"]) if row["label"] == "train" else f"held-out {row['step']}"
        groups.setdefault(name, []).append(row)
    return groups


def table(summaries: dict[str, dict[str, Any]]) -> str:
    lines = [
        "step          cands   span s  exclusive  shared only  not held   wait excl med/max   wait shared med/max"
    ]
    for name, s in summaries.items():
        excl, shared = s["waits"]["exclusive"], s["waits"]["shared"]
        lines.append(
            f"{name:<12} {s['candidates']:>6} {s['span_s']:>8.1f} {s['exclusive_s']:>10.1f} {s['shared_only_s']:>12.1f}"
            f" {s['not_held_s']:>9.1f}   {_pair(excl)}   {_pair(shared)}"
        )
    return "\n".join(lines)


def _pair(wait: dict[str, Any]) -> str:
    if wait["median_s"] is None:
        return f"{'-':>17}"
    return f"{wait['median_s']:>7.1f} / {wait['max_s']:>7.1f}"


STAGE_COLOURS = {
    "compile": "#9ecae1", "build": "#9ecae1", "setup": "#fdd0a2", "wait_gpu": "#d9d9d9",
    "calibrate": "#c7e9c0", "correctness": "#74c476", "timing": "#e6550d", "reference": "#a1d99b",
    "baseline": "#fd8d3c", "done": "#f0f0f0",
}  # fmt: skip


def draw(rows: list[dict[str, Any]], title: str, path: Path) -> None:
    """One row per candidate: stages as bars, device holds as a thin line under them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted(rows, key=lambda r: r["timeline"]["t0"] + dict(r["timeline"]["stages"]).get("job", 0.0))
    origin = min(r["timeline"]["t0"] + dict(r["timeline"]["stages"]).get("job", 0.0) for r in rows)
    figure, axes = plt.subplots(figsize=(12, 0.35 * len(rows) + 1.5))
    for y, row in enumerate(rows):
        timeline = row["timeline"]
        t0, stages = timeline["t0"] - origin, timeline["stages"]
        end = timeline.get("end") or stages[-1][1]
        for (name, at), (_, following) in zip(stages, [*stages[1:], ("", end)]):
            if name == "job":
                continue
            axes.barh(y, following - at, left=t0 + at, height=0.6, color=STAGE_COLOURS.get(name, "#bdbdbd"))
        for kind, _asked, held, released in timeline.get("device", []):
            if kind == "admit" or held is None:
                continue
            axes.plot([t0 + held, t0 + (released or end)], [y - 0.38] * 2, lw=2.5,
                      color="#a50f15" if kind == "exclusive" else "#3182bd")  # fmt: skip
    axes.set_xlim(left=0)
    axes.set_xlabel("seconds since the step's first job")
    axes.set_ylabel("candidate")
    axes.set_title(f"{title}: stages (bars); device held shared (blue) or exclusively (red)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in STAGE_COLOURS.values()]
    axes.legend(handles, STAGE_COLOURS, fontsize=7, ncol=5, loc="upper right")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--steps", help="comma-separated step names (e.g. 3,4,'held-out 5'); default all")
    parser.add_argument("--png", type=Path, help="draw the last of --steps (default: the last step)")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = parser.parse_args(argv)
    files = run_files(args.run_dir)
    if not files:
        print(f"step_timeline: no episodes.jsonl or heldout.jsonl in {args.run_dir} or its rl/", file=sys.stderr)
        return 2
    groups = by_step(read_rows(files))
    if not groups:
        print(
            f"step_timeline: no verdict in {args.run_dir} has a timeline (checks.timeline: verdicts made "
            "since session 28); nothing to line up",
            file=sys.stderr,
        )
        return 2
    wanted = [name.strip() for name in args.steps.split(",")] if args.steps else list(groups)
    missing = [name for name in wanted if name not in groups]
    if missing:
        print(f"step_timeline: no step {', '.join(missing)} here; steps: {', '.join(groups)}", file=sys.stderr)
        return 2
    summaries = {name: summarize(groups[name]) for name in wanted}
    if args.json:
        args.json.write_text(json.dumps(summaries, indent=1) + "\n")
    if args.png:
        draw(groups[wanted[-1]], f"step {wanted[-1]}", args.png)
    print(table(summaries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
