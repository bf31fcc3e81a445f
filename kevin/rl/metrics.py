"""The paper's metrics over episodes, overall and by turn, and `kevin metrics PATH`.

Definitions (DESIGN.md §3). A trajectory is correct if any of its turns passed (`EvalResult.passed`:
correct and not blocked by a check); its speedup is that of its best passed turn, else 0. A task
instance is one task in one step with its n parallel trajectories. For each instance:

    correct      share of its trajectories that are correct                      (avg@n)
    speedup      mean trajectory speedup, failures counting 0                    (avg@n)
    fast_p       share correct with speedup > p, for p in 0, 1, 1.5, 2           (avg@n)
    pass@k       1 - C(n-c, k) / C(n, k), c = correct trajectories               (Chen et al. 2021)
    best@k       expected best trajectory speedup over a random k of the n:
                 sum_i v_(i) C(i-1, k-1) / C(n, k), v_(1) <= ... <= v_(n)
    fast_p@k     pass@k with "correct and speedup > p" as the success

and each is averaged over instances (every task weighs the same). avg@k equals avg@n in expectation,
so the avg columns do not depend on k. Two geometric means: `geomean` of the speedups of all correct
trajectories pooled, and `geomean_best` of each instance's best speedup over the instances with a
correct trajectory; both are None when nothing is correct.

By turn: the `upto_turn` rows compute all of the above on the first t turns of every trajectory (how
the metrics improve with more refinement turns; a trajectory stopped early keeps its last state);
the `at_turn` rows describe the samples of turn t alone (share passed, mean score, format errors,
truncated completions, infrastructure failures). Infrastructure failures count as not correct here,
and their number is shown; they are excluded from training, not from evaluation.

This module reads episode rows (`kevin.rl.episodes`) and never imports torch.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kevin.errors import UsageError
from kevin.evaluator.result import EvalResult

FAST_THRESHOLDS: tuple[float, ...] = (0.0, 1.0, 1.5, 2.0)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased chance that at least one of k samples drawn without replacement from n succeeds,
    given c successes among the n (Chen et al. 2021, the numerically stable product form)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def best_at_k(values: Sequence[float], k: int) -> float:
    """Expected maximum of k values drawn without replacement from `values` (unbiased best@k)."""
    n = len(values)
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= {n} (the number of values), got k={k}")
    ordered = sorted(values)
    total = math.comb(n, k)
    # The i-th smallest (1-based) is the maximum of exactly C(i-1, k-1) of the C(n, k) subsets.
    return math.fsum(ordered[i - 1] * math.comb(i - 1, k - 1) for i in range(k, n + 1)) / total


@dataclass(frozen=True)
class TurnOutcome:
    """What the metrics need of one turn."""

    turn: int
    passed: bool
    speedup: float
    """Speedup when passed, else 0."""
    stage: str
    blame: str
    score: float | None
    truncated: bool


def outcome_from_row(row: Mapping[str, Any]) -> TurnOutcome:
    result = EvalResult.from_dict(row["verdict"])
    speedup = float(result.speedup or 0.0) if result.passed else 0.0
    if result.passed and not speedup > 0:
        raise ValueError(f"task {row['task']} turn {row['turn']}: passed with speedup {result.speedup}")
    return TurnOutcome(
        turn=int(row["turn"]),
        passed=result.passed,
        speedup=speedup,
        stage=result.stage,
        blame=result.blame,
        score=row.get("score"),
        truncated=row.get("finish_reason") == "length",
    )


Instances = dict[tuple[int, str], list[list[TurnOutcome]]]
"""(step, task) -> its trajectories, each a list of turns in turn order."""


def group_rows(rows: Iterable[Mapping[str, Any]]) -> Instances:
    """Group episode rows into task instances and trajectories."""
    trajectories: dict[tuple[int, str], dict[int, list[TurnOutcome]]] = {}
    for row in rows:
        missing = [key for key in ("task", "trajectory", "turn", "verdict") if key not in row]
        if missing:
            raise ValueError(f"an episode row lacks {missing}; is this an episodes JSONL file?")
        instance = (int(row.get("step", 0)), str(row["task"]))
        trajectories.setdefault(instance, {}).setdefault(int(row["trajectory"]), []).append(
            outcome_from_row(row)
        )
    instances: Instances = {}
    for key, by_index in sorted(trajectories.items()):
        instances[key] = [sorted(turns, key=lambda o: o.turn) for _, turns in sorted(by_index.items())]
    return instances


def trajectory_result(turns: Sequence[TurnOutcome], upto_turn: int | None = None) -> tuple[bool, float]:
    """(correct, speedup) of one trajectory over its turns numbered <= upto_turn (all when None)."""
    kept = [o for o in turns if upto_turn is None or o.turn <= upto_turn]
    passed = [o.speedup for o in kept if o.passed]
    return bool(passed), max(passed, default=0.0)


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _geomean(values: Sequence[float]) -> float | None:
    return math.exp(math.fsum(math.log(v) for v in values) / len(values)) if values else None


def summarize(instances: Instances, ks: Sequence[int], upto_turn: int | None = None) -> dict[str, Any]:
    """The trajectory metrics over all instances, on turns <= upto_turn."""
    per_instance: list[dict[str, float]] = []
    correct_speedups: list[float] = []
    best_speedups: list[float] = []
    for (step, task), trajectories in instances.items():
        outcomes = [trajectory_result(turns, upto_turn) for turns in trajectories]
        n = len(outcomes)
        for k in ks:
            if k > n:
                raise ValueError(
                    f"k={k} exceeds the {n} trajectories of task {task} at step {step}; use k <= {n}"
                )
        correct = [ok for ok, _ in outcomes]
        speedups = [s for _, s in outcomes]
        row = {"correct": sum(correct) / n, "speedup": math.fsum(speedups) / n}
        for p in FAST_THRESHOLDS:
            row[f"fast_{p:g}"] = sum(ok and s > p for ok, s in outcomes) / n
        for k in ks:
            row[f"pass@{k}"] = pass_at_k(n, sum(correct), k)
            row[f"best@{k}"] = best_at_k(speedups, k)
            for p in FAST_THRESHOLDS:
                row[f"fast_{p:g}@{k}"] = pass_at_k(n, sum(ok and s > p for ok, s in outcomes), k)
        per_instance.append(row)
        correct_speedups.extend(s for ok, s in outcomes if ok)
        if any(correct):
            best_speedups.append(max(speedups))
    summary: dict[str, Any] = {
        "tasks": len(instances),
        "trajectories": sum(len(t) for t in instances.values()),
    }
    for name in per_instance[0] if per_instance else ():
        summary[name] = _mean([row[name] for row in per_instance])
    summary["geomean"] = _geomean(correct_speedups)
    summary["geomean_best"] = _geomean(best_speedups)
    return summary


def turn_stats(instances: Instances, turn: int) -> dict[str, Any]:
    """Statistics of the samples of one turn index alone."""
    samples = [
        o for trajectories in instances.values() for turns in trajectories for o in turns if o.turn == turn
    ]
    scores = [o.score for o in samples if o.score is not None]
    count = len(samples)
    return {
        "turn": turn,
        "samples": count,
        "passed": sum(o.passed for o in samples) / count if count else None,
        "score": _mean(scores),
        "format_errors": sum(o.stage == "format" for o in samples) / count if count else None,
        "truncated": sum(o.truncated for o in samples) / count if count else None,
        "infrastructure": sum(o.blame == "infrastructure" for o in samples),
    }


def default_ks(instances: Instances) -> list[int]:
    """1, the powers of two below the smallest n, and that n."""
    smallest = min((len(t) for t in instances.values()), default=1)
    ks = {1, smallest}
    ks.update(2**i for i in range(1, smallest.bit_length()) if 2**i <= smallest)
    return sorted(ks)


def compute_metrics(rows: Iterable[Mapping[str, Any]], ks: Sequence[int] | None = None) -> dict[str, Any]:
    """All metrics of a set of episode rows: overall, within the first t turns, and at turn t."""
    instances = group_rows(rows)
    if not instances:
        raise ValueError("no episode rows to compute metrics from")
    ks = sorted(set(ks)) if ks else default_ks(instances)
    if ks[0] < 1:
        raise ValueError(f"k must be at least 1, got {ks[0]}")
    last = max(o.turn for trajectories in instances.values() for turns in trajectories for o in turns)
    return {
        "ks": ks,
        "steps": sorted({step for step, _ in instances}),
        "turns": last,
        "overall": summarize(instances, ks),
        "upto_turn": [{"turn": t, **summarize(instances, ks, upto_turn=t)} for t in range(1, last + 1)],
        "at_turn": [turn_stats(instances, t) for t in range(1, last + 1)],
    }


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> list[str]:
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(columns, widths))]
    lines.extend("  ".join(v.rjust(w) for v, w in zip(r, widths)) for r in cells)
    return lines


def format_metrics(metrics: Mapping[str, Any]) -> str:
    """The metrics as plain-text tables: one row per number of turns t."""
    overall = metrics["overall"]
    ks = metrics["ks"]
    lines = [
        f"{overall['tasks']} task instances, {overall['trajectories']} trajectories, up to "
        f"{metrics['turns']} turns, steps {metrics['steps']}",
        "",
        "Within the first t turns (a trajectory counts its best passed turn; averages over trajectories, then tasks):",
    ]
    avg_columns = ["turn", "correct", "speedup", "geomean", "geomean_best"]
    avg_columns += [f"fast_{p:g}" for p in FAST_THRESHOLDS]
    lines += _table(metrics["upto_turn"], avg_columns)
    lines += ["", "Best of k parallel trajectories (unbiased estimates over random k of n):"]
    lines += _table(metrics["upto_turn"], ["turn"] + [f"pass@{k}" for k in ks] + [f"best@{k}" for k in ks])
    lines += ["", "Turn t alone (share of its samples):"]
    lines += _table(
        metrics["at_turn"],
        ["turn", "samples", "passed", "score", "format_errors", "truncated", "infrastructure"],
    )
    return "\n".join(lines)


def _run(args: argparse.Namespace) -> int:
    from kevin.rl.episodes import EPISODES_FILE, read_episodes

    path = Path(args.path)
    if not path.exists() or (path.is_dir() and not (path / EPISODES_FILE).is_file()):
        raise UsageError(
            f"{path}: not found; give an episodes JSONL file or a run directory holding {EPISODES_FILE}"
        )
    try:
        rows = read_episodes(path)
        if args.step is not None:
            rows = [row for row in rows if int(row.get("step", 0)) == args.step]
        metrics = compute_metrics(rows, args.k)
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{path}: {exc}") from None
    print(json.dumps(metrics, indent=2) if args.json else format_metrics(metrics))
    return 0


def register_commands(subparsers) -> None:
    parser = subparsers.add_parser(
        "metrics",
        help="print the paper's metrics (correct, speedup, pass@k, best@k, fast_p) from an episodes file",
        description="Metrics of an episodes JSONL file (or a run directory holding episodes.jsonl), "
        "overall and by number of turns.",
    )
    parser.add_argument("path", help="episodes JSONL file or run directory")
    parser.add_argument("--json", action="store_true", help="print the metrics as JSON")
    parser.add_argument(
        "--k",
        type=int,
        nargs="+",
        metavar="K",
        help="k values for pass@k and best@k (default: 1, powers of 2, n)",
    )
    parser.add_argument("--step", type=int, help="only the rows of this step")
    parser.set_defaults(run=_run)
