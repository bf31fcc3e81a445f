"""Is a learning run's held-out change more than chance? Paired comparisons of each held-out step with the start.

The learning run (issue #16) evaluates the same held-out tasks at every evaluation step with common
random numbers (`loop.heldout_rng`): trajectory i of task t is sampled from the same seed each time,
so step s's sample (t, i) and the start's differ only by what training changed. Comparing them pair
by pair removes the task-to-task spread that made s22's and s23's +3 / +4 kernels of 32 impossible
to tell from the 0.47-0.66 that SFT starts differ by.

For each evaluation step against the base step (default the first):

    pairs        (task, trajectory) samples present at both steps; `same` of them wrote the same
                 kernel (a policy that barely moved samples the same text from the same seed)
    correct      share correct at the base and at the step; gained / lost: pairs correct only at the
                 step / only at the base; p: the exact two-sided sign test on gained vs lost (the
                 chance of a split at least this uneven if neither step were better)
    speedup      mean trajectory speedup (failures 0) at the base and at the step, the mean paired
                 difference and its 95% interval from a bootstrap that resamples tasks (a task's
                 trajectories share its difficulty, so tasks, not samples, are the independent units)

A rise is beyond chance when the interval of the speedup difference lies above 0, or p < 0.05 with
more gained than lost (a fall: the mirror). Only between steps judged on the same kind of GPU: a
step whose verdicts name another device than the base's (a run carried from an H200 to an H100) is
listed, marked `*`, and counted neither way, since every speedup is the reference's time on that
machine over the kernel's (session 34: step 5 read 0.947 on the H200 and 1.087 on the H100).
Correctness and speedup are those of kevin.rl.metrics (a trajectory's best passed turn). Reads
`heldout.jsonl` of a run directory (or the file itself). `--rescored FILE` (bench/heldout_rescore.py's
output) replaces the rows of every step FILE holds with its re-scored
ones, so a run carried across an evaluator change compares steps judged by one evaluator (e.g. the
start re-scored by the evaluator that judged the later steps).

    python bench/heldout_paired.py RUN_DIR_OR_FILE [--base STEP] [--rescored FILE] [--resamples N] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from pathlib import Path
from typing import Any

from kevin.rl.episodes import read_episodes, stored
from kevin.rl.metrics import group_rows, trajectory_result

HELDOUT_FILE = "heldout.jsonl"


def sign_test(gained: int, lost: int) -> float:
    """Exact two-sided binomial test of gained vs lost at p = 1/2 (1.0 when there are none)."""
    n = gained + lost
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(gained, lost) + 1)) / 2**n
    return min(1.0, 2 * tail)


def task_bootstrap(differences: dict[str, list[float]], resamples: int, seed: int = 0) -> tuple[float, float]:
    """95% interval of the mean paired difference, resampling tasks with replacement."""
    tasks = sorted(differences)
    rng = random.Random(seed)
    means = []
    for _ in range(resamples):
        drawn = [differences[tasks[rng.randrange(len(tasks))]] for _ in tasks]
        values = [v for task in drawn for v in task]
        means.append(math.fsum(values) / len(values))
    means.sort()
    return means[int(0.025 * (resamples - 1))], means[int(math.ceil(0.975 * (resamples - 1)))]


def machines(rows: list[dict[str, Any]]) -> dict[int, str]:
    """The device each step's verdicts name ("NVIDIA H200"; several joined by " + "; "" when none)."""
    names: dict[int, set[str]] = {}
    for row in rows:
        device = str((row.get("verdict") or {}).get("device") or "")
        names.setdefault(int(row.get("step", 0)), set()).update([device] if device else [])
    return {step: " + ".join(sorted(found)) for step, found in names.items()}


def compare(
    rows: list[dict[str, Any]], base: int | None = None, resamples: int = 10_000
) -> list[dict[str, Any]]:
    """One record per evaluation step after the base (see the module's docstring)."""
    instances = group_rows(rows)
    devices = machines(rows)
    texts = {
        (int(r.get("step", 0)), str(r["task"]), int(r["trajectory"]), int(r["turn"])): r.get("candidate")
        for r in rows
    }
    steps = sorted({step for step, _ in instances})
    if not steps:
        raise ValueError("no held-out rows")
    base = steps[0] if base is None else base
    if base not in steps:
        raise ValueError(f"no held-out rows at step {base} (steps: {steps})")
    records = []
    for step in steps:
        if step == base:
            continue
        pairs: list[tuple[str, int, tuple[bool, float], tuple[bool, float]]] = []
        same = 0
        for (s, task), trajectories in instances.items():
            if s != step or (base, task) not in instances:
                continue
            before_all = instances[(base, task)]
            for index, turns in enumerate(trajectories):
                if index >= len(before_all):
                    continue
                pairs.append((task, index, trajectory_result(before_all[index]), trajectory_result(turns)))
                turn_numbers = [o.turn for o in turns]
                same += all(
                    texts.get((step, task, index, n)) == texts.get((base, task, index, n))
                    for n in turn_numbers
                )
        if not pairs:
            continue
        gained = sum(1 for *_, b, a in pairs if a[0] and not b[0])
        lost = sum(1 for *_, b, a in pairs if b[0] and not a[0])
        differences: dict[str, list[float]] = {}
        for task, _, b, a in pairs:
            differences.setdefault(task, []).append(a[1] - b[1])
        n = len(pairs)
        low, high = task_bootstrap(differences, resamples)
        records.append(
            {
                "step": step,
                "base": base,
                "machine": devices.get(step, ""),
                "machine_base": devices.get(base, ""),
                "pairs": n,
                "tasks": len(differences),
                "same": same,
                "correct_base": sum(b[0] for *_, b, _ in pairs) / n,
                "correct": sum(a[0] for *_, a in pairs) / n,
                "gained": gained,
                "lost": lost,
                "p": sign_test(gained, lost),
                "speedup_base": math.fsum(b[1] for *_, b, _ in pairs) / n,
                "speedup": math.fsum(a[1] for *_, a in pairs) / n,
                "speedup_diff": math.fsum(a[1] - b[1] for *_, b, a in pairs) / n,
                "speedup_diff_95": [low, high],
            }
        )
    return records


def other_machine(record: dict[str, Any]) -> bool:
    """Whether the step was judged on another kind of device than its base (both known)."""
    step, base = record.get("machine") or "", record.get("machine_base") or ""
    return bool(step and base and step != base)


def beyond_chance(record: dict[str, Any]) -> int:
    """+1 for a rise beyond chance (the speedup interval above 0, or p < 0.05 with more gained than
    lost), -1 for a fall (the mirror), 0 otherwise, and 0 for a step judged on another machine."""
    if other_machine(record):
        return 0
    low, high = record["speedup_diff_95"]
    significant = record["p"] < 0.05
    if low > 0 or (significant and record["gained"] > record["lost"]):
        return 1
    if high < 0 or (significant and record["lost"] > record["gained"]):
        return -1
    return 0


def render(records: list[dict[str, Any]]) -> str:
    lines = [
        f"{'step':>4} {'pairs':>5} {'same':>4}  {'correct':>13} {'+':>3} {'-':>3} {'p':>6}  "
        f"{'speedup':>13} {'diff':>7} {'95% (tasks)':>17}"
    ]
    for r in records:
        low, high = r["speedup_diff_95"]
        lines.append(
            f"{str(r['step']) + ('*' if other_machine(r) else ''):>4} {r['pairs']:>5} {r['same']:>4}  "
            f"{r['correct_base']:.3f}->{r['correct']:.3f} "
            f"{r['gained']:>3} {r['lost']:>3} {r['p']:>6.3f}  {r['speedup_base']:.3f}->{r['speedup']:.3f} "
            f"{r['speedup_diff']:>+7.3f} [{low:+.3f}, {high:+.3f}]"
        )
    moved = [r for r in records if other_machine(r)]
    if moved:
        lines.append(
            f"* judged on {moved[0]['machine']}, the base on {moved[0]['machine_base']}: speedups are"
            " each machine's own, so these steps count neither way"
        )
    rises = [r["step"] for r in records if beyond_chance(r) > 0]
    falls = [r["step"] for r in records if beyond_chance(r) < 0]
    if rises:
        lines.append("a rise beyond chance at step(s) " + ", ".join(map(str, rises)))
    if falls:
        lines.append("a fall beyond chance at step(s) " + ", ".join(map(str, falls)))
    if not rises and not falls and len(moved) < len(records):
        lines.append(
            "no step differs from the base beyond chance (speedup interval spans 0, sign test p >= 0.05)"
        )
    return "\n".join(lines)


def with_rescored(rows: list[dict[str, Any]], rescored: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`rows` with the rows of every step `rescored` holds replaced by `rescored`'s."""
    steps = {int(r.get("step", 0)) for r in rescored}
    return [r for r in rows if int(r.get("step", 0)) not in steps] + list(rescored)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", type=Path, help="a run directory (its heldout.jsonl) or a held-out JSONL file")
    parser.add_argument(
        "--base", type=int, default=None, help="the step compared against (default: the first)"
    )
    parser.add_argument(
        "--rescored", type=Path, default=None, help="re-scored rows (bench/heldout_rescore.py) for their steps"
    )
    parser.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples (default 10000)")
    parser.add_argument("--json", type=Path, default=None, help="also write the records here")
    args = parser.parse_args(argv)
    path = stored(args.run / HELDOUT_FILE) if args.run.is_dir() else args.run
    if not path.is_file():
        print(
            f"heldout_paired: no {path}; pass a run directory with {HELDOUT_FILE} or the file",
            file=sys.stderr,
        )
        return 2
    if args.resamples < 100:
        print("heldout_paired: --resamples must be at least 100", file=sys.stderr)
        return 2
    if args.rescored is not None and not args.rescored.is_file():
        print(f"heldout_paired: no {args.rescored}; pass heldout_rescore.py's output file", file=sys.stderr)
        return 2
    rows = read_episodes(path)
    if args.rescored is not None:
        rows = with_rescored(rows, read_episodes(args.rescored))
    try:
        records = compare(rows, args.base, args.resamples)
    except ValueError as exc:
        print(f"heldout_paired: {exc}", file=sys.stderr)
        return 2
    print(render(records))
    if args.json:
        args.json.write_text(json.dumps(records, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
