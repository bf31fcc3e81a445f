"""Credit assignment: the score of one kernel, discounted returns over turns, group advantages.

Pure functions over plain lists (or anything that iterates to numbers, such as a 1-D tensor) and
group ids. No torch, no I/O: the trainer turns the advantages into tensors.

Formulas (DESIGN.md §3; Kevin paper §3.2 and §4):

    score s      = correct_bonus * passed + speedup * passed            (correct_bonus = 0.3)
    return R_t   = sum_{i >= t} gamma^(i-t) * s_i                       (aggregation "sum")
                 = max_{i >= t} gamma^(i-t) * s_i                       (aggregation "max")
    advantage    A = (R - b) / sigma                                    (b, sigma over the group)

with gamma = 0.4 by default (the paper also tried max-aggregation with gamma = 0.8). Every turn is
its own training sample. The group is every sample of one task in one batch, all N trajectories x T
turns (the paper), or only the samples of one task at one turn index (`group_by="turn"`). The
baseline b is the group mean (the paper) or, with `baseline="leave_one_out"`, the mean of the other
samples of the group, which keeps a sample's own reward out of its baseline. sigma is the population
standard deviation of the group's rewards (`scale="std"`, the paper) or 1 (`scale="none"`, as in
Dr. GRPO). Worked example: gamma 0.4, scores [0, 1.3, 2.3] give returns [0.888, 2.22, 2.3].

Departures from the paper and decisions the paper does not state:

- "passed", not "correct": a correct kernel with a blocking flag from the anti-hacking checks scores
  0 (`EvalResult.passed`).
- Samples whose evaluation failed on our side (`blame == "infrastructure"`) have no score (None).
  They are excluded from training: no return, no advantage, and they are left out of their group's
  mean and spread. Their kernel was never judged, so they add 0 to the returns of earlier turns of
  their trajectory (neither reward nor penalty for a turn whose successor is unknown).
- A group whose rewards all agree (zero spread) gives every sample advantage 0, as does a group of
  one sample (and leave-one-out with no other sample).
- The spread is the population standard deviation (divide by n), so advantages have unit variance.
- NaN or infinite scores are an error (ValueError), never a silent 0: they mean a bug upstream.
- Speedups are not capped here; implausible speedups are the evaluator's job (`impossible_speedup`).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Literal

from kevin.evaluator.result import EvalResult

Aggregation = Literal["sum", "max"]
Baseline = Literal["mean", "leave_one_out"]
Scale = Literal["std", "none"]
GroupBy = Literal["task", "turn"]

AGGREGATIONS: tuple[str, ...] = ("sum", "max")
BASELINES: tuple[str, ...] = ("mean", "leave_one_out")
SCALES: tuple[str, ...] = ("std", "none")
GROUP_BYS: tuple[str, ...] = ("task", "turn")

CORRECT_BONUS = 0.3
"""Reward for a passed kernel on top of its speedup (paper §3.2)."""


def _finite(value: float, what: str) -> float:
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{what} is {value}; rewards must be finite numbers (a NaN means a bug upstream)")
    return value


def kernel_score(passed: bool, speedup: float | None, *, correct_bonus: float = CORRECT_BONUS) -> float:
    """Score of one kernel: correct_bonus + speedup if it passed, else 0."""
    if not passed:
        return 0.0
    if speedup is None:
        raise ValueError("a passed kernel must have a speedup; the evaluator returned speedup=None")
    return correct_bonus + _finite(speedup, "speedup")


def score_result(result: EvalResult, *, correct_bonus: float = CORRECT_BONUS) -> float | None:
    """Score of one evaluated turn; None when the evaluation failed on our side (not trainable)."""
    if result.blame == "infrastructure":
        return None
    return kernel_score(result.passed, result.speedup, correct_bonus=correct_bonus)


def discounted_returns(
    scores: Sequence[float | None], gamma: float = 0.4, aggregation: Aggregation = "sum"
) -> list[float | None]:
    """Returns of one trajectory's turns, in turn order. None scores (excluded samples) count 0 for
    earlier turns and get a None return themselves."""
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    values = [None if s is None else _finite(s, f"score of turn {t}") for t, s in enumerate(scores)]
    returns: list[float | None] = [None] * len(values)
    following = 0.0  # R_{t+1}, with excluded turns counting 0
    for t in range(len(values) - 1, -1, -1):
        own = values[t] if values[t] is not None else 0.0
        if t == len(values) - 1:
            current = own
        elif aggregation == "sum":
            current = own + gamma * following
        else:
            current = max(own, gamma * following)
        following = current
        returns[t] = None if values[t] is None else current
    return returns


def group_advantages(
    rewards: Sequence[float | None],
    group_ids: Sequence[Hashable],
    *,
    baseline: Baseline = "mean",
    scale: Scale = "std",
) -> list[float | None]:
    """Advantages of samples normalized within their group. None rewards stay None and are left out
    of their group's statistics."""
    if baseline not in BASELINES:
        raise ValueError(f"baseline must be one of {BASELINES}, got {baseline!r}")
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
    if len(rewards) != len(group_ids):
        raise ValueError(f"{len(rewards)} rewards but {len(group_ids)} group ids; pass one id per reward")
    values = [None if r is None else _finite(r, f"reward of sample {i}") for i, r in enumerate(rewards)]
    members: dict[Hashable, list[int]] = {}
    for index, (value, group) in enumerate(zip(values, group_ids)):
        if value is not None:
            members.setdefault(group, []).append(index)
    advantages: list[float | None] = [None] * len(values)
    for indices in members.values():
        group_values = [values[i] for i in indices]
        n = len(group_values)
        total = math.fsum(group_values)
        mean = total / n
        spread = math.sqrt(math.fsum((v - mean) ** 2 for v in group_values) / n)
        if n == 1 or max(group_values) == min(group_values):
            for i in indices:
                advantages[i] = 0.0
            continue
        divisor = spread if scale == "std" else 1.0
        for i, value in zip(indices, group_values):
            reference = mean if baseline == "mean" else (total - value) / (n - 1)
            advantages[i] = (value - reference) / divisor
    return advantages


def credit(
    scores: Sequence[float | None],
    task_ids: Sequence[Hashable],
    trajectory_ids: Sequence[Hashable],
    turns: Sequence[int],
    *,
    gamma: float = 0.4,
    aggregation: Aggregation = "sum",
    group_by: GroupBy = "task",
    baseline: Baseline = "mean",
    scale: Scale = "std",
) -> tuple[list[float | None], list[float | None]]:
    """Returns and advantages for a flat batch of samples, one per turn.

    Sample i is turn `turns[i]` of trajectory `trajectory_ids[i]` of task `task_ids[i]`; samples may
    come in any order, and trajectory ids need only be unique within a task. The returns run over each
    trajectory in turn order; the advantages normalize the returns within each group.
    """
    if not len(scores) == len(task_ids) == len(trajectory_ids) == len(turns):
        raise ValueError("scores, task_ids, trajectory_ids and turns must have one entry per sample")
    if group_by not in GROUP_BYS:
        raise ValueError(f"group_by must be one of {GROUP_BYS}, got {group_by!r}")
    by_trajectory: dict[tuple[Hashable, Hashable], list[int]] = {}
    for index, key in enumerate(zip(task_ids, trajectory_ids)):
        by_trajectory.setdefault(key, []).append(index)
    returns: list[float | None] = [None] * len(scores)
    for key, indices in by_trajectory.items():
        indices.sort(key=lambda i: turns[i])
        if len({turns[i] for i in indices}) != len(indices):
            raise ValueError(f"trajectory {key} has the same turn twice; each turn is one sample")
        for i, value in zip(indices, discounted_returns([scores[i] for i in indices], gamma, aggregation)):
            returns[i] = value
    groups = list(task_ids) if group_by == "task" else list(zip(task_ids, turns))
    return returns, group_advantages(returns, groups, baseline=baseline, scale=scale)
