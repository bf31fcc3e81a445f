"""Rollout health and the collapse rules that warn or stop a run (DESIGN.md §3, "watch for collapse").

`rollout_health(trajectories)` measures one step's episodes:

    not_opener_share    share of completions that do not start (after whitespace) with the expected
                        opener: the paper's "not okay" ratio, an early sign of a collapsing policy
    truncated_share     share of completions cut at the token limit
    completion_tokens   mean completion length in tokens (when the sampler reported it)
    reward_mean         mean score of the trainable turns; reward_turn_<t> per turn index
    passed_share, format_error_share, infrastructure (count), zero_spread_tasks (count of tasks
    whose trainable turns all got advantage 0: no gradient from them)

`CollapseMonitor.check(metrics)` applies the rules of `MonitorConfig`: a value above a warn threshold
raises a warning for that step; a value above a stop threshold for `patience_steps` steps in a row
asks the loop to stop (after it saves a checkpoint). A non-finite value is above every threshold.
`drift` is the learner's k3 estimate of KL(old || new) per token on a batch's off-policy gradient
steps (kevin.train.grpo.policy_drift) and `drift_max` the largest |log ratio| there: updates that
move the policy too far per step, the cause of session 20's collapse on the H200, show in them
steps before the rewards and the format-error share do. `length_drop` is the share of the first
step's mean completion length that a step's mean has lost (responses collapsing to short answers;
growth shows in the truncated share). An update dropped for a non-finite gradient (the learner's
`nonfinite_skipped`) always warns, and `patience_steps` steps in a row with one stop the run
(`nonfinite_stop`): the policy is not learning. The runs of consecutive steps and the first step's
length are state the checkpoints keep.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kevin.rl.env import Trajectory
from kevin.train.config import MonitorConfig


def rollout_health(trajectories: Sequence[Trajectory], expected_opener: str = "") -> dict[str, float]:
    turns = [turn for trajectory in trajectories for turn in trajectory.turns]
    if not turns:
        return {}
    count = len(turns)
    health: dict[str, float] = {
        "truncated_share": sum(t.generation.truncated for t in turns) / count,
        "passed_share": sum(t.result.passed for t in turns) / count,
        "format_error_share": sum(t.result.stage == "format" for t in turns) / count,
        "infrastructure": float(sum(t.result.blame == "infrastructure" for t in turns)),
    }
    if expected_opener:
        openers = [t.generation.text.lstrip().startswith(expected_opener) for t in turns]
        health["not_opener_share"] = 1.0 - sum(openers) / count
    lengths = [t.generation.completion_tokens for t in turns if t.generation.completion_tokens is not None]
    if lengths:
        health["completion_tokens"] = sum(lengths) / len(lengths)
    scores = [t.score for t in turns if t.score is not None]
    if scores:
        health["reward_mean"] = sum(scores) / len(scores)
    for number in sorted({t.turn for t in turns}):
        at_turn = [t.score for t in turns if t.turn == number and t.score is not None]
        if at_turn:
            health[f"reward_turn_{number}"] = sum(at_turn) / len(at_turn)
    by_task: dict[str, list[float]] = {}
    for trajectory in trajectories:
        for turn in trajectory.turns:
            if turn.advantage is not None:
                by_task.setdefault(trajectory.task.id, []).append(turn.advantage)
    health["zero_spread_tasks"] = float(sum(all(a == 0.0 for a in values) for values in by_task.values()))
    return health


@dataclass(frozen=True)
class Alarm:
    metric: str
    value: float
    threshold: float
    stop: bool

    def describe(self) -> str:
        action = "stopping" if self.stop else "warning"
        return f"{action}: {self.metric} = {self.value:.4g} above {self.threshold:.4g}"


class CollapseMonitor:
    def __init__(self, config: MonitorConfig) -> None:
        self.config = config
        self.streaks: dict[str, int] = {}
        self.first_length: float | None = None

    def _rules(self) -> list[tuple[str, float | None, float | None]]:
        config = self.config
        rules = [
            ("truncated_share", config.truncated_warn, config.truncated_stop),
            ("grad_norm", config.grad_norm_warn, config.grad_norm_stop),
            ("drift", config.drift_warn, config.drift_stop),
            ("drift_max", config.drift_max_warn, config.drift_max_stop),
            ("format_error_share", config.format_error_warn, config.format_error_stop),
            ("length_drop", config.length_drop_warn, config.length_drop_stop),
            # any dropped update warns; patience_steps steps in a row with one stop the run
            ("nonfinite_skipped", 0.0, 0.0 if config.nonfinite_stop else None),
        ]
        if config.expected_opener:
            rules.append(("not_opener_share", config.not_opener_warn, config.not_opener_stop))
        return rules

    def check(self, metrics: dict[str, Any]) -> list[Alarm]:
        """Alarms for this step's metrics; an Alarm with stop=True means the run should end."""
        alarms = []
        metrics = dict(metrics)
        length = metrics.get("completion_tokens")
        if length is not None and math.isfinite(length):
            if self.first_length is None and length > 0:
                self.first_length = float(length)
            if self.first_length:
                metrics["length_drop"] = 1.0 - float(length) / self.first_length
        for name, warn, stop in self._rules():
            value = metrics.get(name)
            if value is None:
                continue
            if stop is not None and _above(value, stop):
                self.streaks[name] = self.streaks.get(name, 0) + 1
                if self.streaks[name] >= self.config.patience_steps:
                    alarms.append(Alarm(name, float(value), stop, True))
                    continue
            else:
                self.streaks[name] = 0
            if warn is not None and _above(value, warn):
                alarms.append(Alarm(name, float(value), warn, False))
        return alarms

    def state(self) -> dict[str, Any]:
        return {"streaks": dict(self.streaks), "first_length": self.first_length}

    def load_state(self, state: dict[str, Any]) -> None:
        self.streaks = dict(state.get("streaks", {}))
        self.first_length = state.get("first_length")


def _above(value: float, threshold: float) -> bool:
    """Over the threshold; a NaN or infinite value always is (a NaN compares false with anything,
    so a NaN gradient norm would otherwise pass every rule)."""
    return not math.isfinite(value) or value > threshold

