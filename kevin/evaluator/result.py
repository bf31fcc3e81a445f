"""`EvalResult`: the verdict on one candidate, the contract between the evaluator and everything else.

One JSON object per candidate (DESIGN.md §2). A bad candidate is data: every failure of the
candidate or the policy is a result with a `stage` and a short `error`, never an exception. Who is
to blame is explicit, so an infrastructure failure is never scored as the model's mistake.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Literal

Stage = Literal["format", "static_check", "compile", "runtime", "correctness", "timeout", "ok"]
STAGES: tuple[str, ...] = ("format", "static_check", "compile", "runtime", "correctness", "timeout", "ok")

Blame = Literal["none", "policy", "candidate", "infrastructure"]
"""Who failed: `policy` for output that is not a candidate at all (format), `candidate` for a kernel
that does not build, crashes, hangs or is wrong, `infrastructure` for our side (the reference
problem, the worker, the machine). Trainers drop `infrastructure` samples instead of scoring them."""

# Flags whose presence makes a correct-looking kernel score 0. Other flags are warnings.
BLOCKING_FLAGS: frozenset[str] = frozenset(
    {
        "inputs_mutated",
        "timed_output_mismatch",
        "global_state_changed",
        "side_stream",
        "tampering",
        "library_kernels",
        "no_custom_kernel",
        "lower_precision",
        "impossible_speedup",
        "extra_threads",
        "deferred_write",
        "tensor_subclass",
        "deferred_work",
        "left_processes",
    }
)

EVIDENCE_FLAGS: frozenset[str] = frozenset(
    {
        "inputs_mutated",
        "timed_output_mismatch",
        "global_state_changed",
        "tampering",
        "tensor_subclass",
        "deferred_write",
        "left_processes",
    }
)
"""Blocking flags that only the candidate's own code raises, whatever the host or device was doing
(what it wrote to its inputs, the state it changed, what it left running): once one is raised, a
later failure of kevin's own (a timing it could not take steadily, say) does not make the verdict
the infrastructure's, which trainers drop unscored. Flags read from timings or traces
(`deferred_work`, `impossible_speedup`, `library_kernels`, ...) can come from a disturbance and are
not here. s44's H100 table: state_mutate_input_cuda, flagged `inputs_mutated` seven times, came back
the infrastructure's when the device was shared with a stray process."""

ERROR_CHARS = 2000
"""Bound on `error`; the full captured log is in `log`, itself truncated with a visible marker."""


@dataclass
class EvalResult:
    stage: str
    """Where evaluation stopped: format, static_check, compile, runtime, correctness, timeout, or ok."""
    compiled: bool = False
    correct: bool = False
    speedup: float | None = None
    """Baseline eager median / candidate median; None unless correct."""
    speedup_compile: float | None = None
    """Against torch.compile of the reference, when measured."""
    runtime_ms: float | None = None
    baseline_ms: float | None = None
    baseline_compile_ms: float | None = None
    error: str = ""
    feedback: str = ""
    """The text the model sees next turn (built by kevin.evaluator.feedback)."""
    flags: list[str] = field(default_factory=list)
    blame: str = "none"
    backend: str = ""
    precision: str = ""
    task_id: str = ""
    timing: dict[str, Any] = field(default_factory=dict)
    """Candidate timing statistics (median_ms, mean_ms, min_ms, max_ms, std_ms, iqr_ms, cv, n)."""
    baseline_timing: dict[str, Any] = field(default_factory=dict)
    correctness: dict[str, Any] = field(default_factory=dict)
    """trials, trials_passed, max_abs_error, mean_abs_error, max_rel_error, atol, rtol, detail; and
    distribution_notes when a shifted-distribution trial was dropped or moved nothing
    (kevin.evaluator.worker.trials)."""
    checks: dict[str, Any] = field(default_factory=dict)
    """Numbers behind the dynamic checks (kevin.evaluator.probes): library share, precision errors, bounds."""
    device: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    stage_seconds: dict[str, float] = field(default_factory=dict)
    log: str = ""
    """Captured stdout/stderr of the worker, head and tail kept around a truncation marker."""

    def __post_init__(self) -> None:
        if self.stage not in STAGES:
            raise ValueError(f"unknown stage {self.stage!r}; expected one of {STAGES}")
        if len(self.error) > ERROR_CHARS:
            self.error = truncate_middle(self.error, ERROR_CHARS)

    @property
    def blocking_flags(self) -> list[str]:
        return [f for f in self.flags if f.split(":", 1)[0] in BLOCKING_FLAGS]

    @property
    def passed(self) -> bool:
        """Correct and not blocked by any check: the only results that earn a reward."""
        return self.correct and not self.blocking_flags and self.blame != "infrastructure"

    def explain(self) -> str:
        """One line on why this verdict earns no reward, with the numbers behind each blocking flag
        (empty when it passed): for logs, reports and test failures, which otherwise show a
        correct kernel with a speedup and no reason."""
        if self.passed:
            return ""
        if not self.correct or self.blame == "infrastructure":
            first = self.error.strip().splitlines()[0] if self.error.strip() else "no error text"
            return f"{self.stage} ({self.blame}): {first}"[:ERROR_CHARS]
        parts = [f"{flag} ({why})" if (why := _evidence(flag, self.checks)) else flag for flag in self.blocking_flags]
        return ("blocked: " + "; ".join(parts))[:ERROR_CHARS]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalResult:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def truncate_middle(text: str, limit: int) -> str:
    """Keep the head and the tail of `text` within `limit` characters, with a visible marker between.
    Where the cut would take the start of the last line (a traceback's final line names the exception,
    and torch's out-of-memory message runs to kilobytes with its list of processes: s34 lost the
    exception so), a quarter of the room keeps that start, between two markers."""
    if len(text) <= limit:
        return text
    width = len(_cut_marker(len(text)))  # no marker is longer
    last = text.rstrip().rfind("\n") + 1
    keep = max(limit - width, 0)
    head, tail = keep // 2, keep - keep // 2
    if not head < last < len(text) - tail or limit < 8 * width:  # no line cut, or too little room
        return text[:head] + _cut_marker(len(text) - keep) + text[len(text) - tail :]
    keep = max(limit - 2 * width, 0)
    head = keep // 4
    tail = keep - 2 * head
    line = min(head, len(text) - tail - last)
    return (
        text[:head] + _cut_marker(last - head) + text[last : last + line]
        + _cut_marker(len(text) - tail - last - line) + text[len(text) - tail :]
    )  # fmt: skip


def _cut_marker(count: int) -> str:
    return f"\n[... {count} characters truncated by kevin ...]\n"


_EVIDENCE: dict[str, tuple[tuple[str, ...], ...]] = {
    "deferred_work": (("fetch_excess_ms",), ("fetch_ms",), ("fetch_copy_ms",), ("runner_counters", "candidate")),
    "extra_threads": (("runner_threads", "started"),),
    "global_state_changed": (("global_state",),),
    "left_processes": (("left_processes",),),
    "library_kernels": (("trace", "library_share"), ("trace", "library_ops_us")),
    "no_custom_kernel": (("trace", "custom_us"),),
    "side_stream": (("trace", "side_streams"),),
    "lower_precision": (("precision",),),
    "impossible_speedup": (("bandwidth_floor_ms",),),
}
"""Where in `checks` the numbers behind each flag are (kevin.evaluator.worker and the sandbox)."""


def _evidence(flag: str, checks: dict[str, Any]) -> str:
    parts = []
    for path in _EVIDENCE.get(flag.split(":", 1)[0], ()):
        value: Any = checks
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if value is not None:
            parts.append(f"{'.'.join(path)}={json.dumps(value, sort_keys=True, default=str)}")
    return ", ".join(parts)[:400]
