"""Profile feedback: a passed kernel's feedback, with where its time goes appended.

When `EpisodeConfig.profile_feedback` is on, the episode calls `with_profiles` once every verdict
of a turn is in. Each passed kernel's summary comes from a `Profiler`; the default,
`trace_profiler`, reads the evaluation's own trace: the judge's dynamic library check already ran
the candidate's forward under torch.profiler in its confined runner, outside the timed region, and
kept its heaviest kernels (`checks.trace.kernels`, kevin.evaluator.attribution.kernel_table). So the
default costs nothing, runs no candidate code again and nothing outside the sandbox. It gives
kernel names, launches and times per forward, and whose each is (the candidate's own, or library
work); it has no hardware counters.

Nsight Compute's counters (memory bandwidth against peak, occupancy and its limiter, stalls) come
from `kevin profile` (kevin.evaluator.profiling), which runs the candidate again in a process of
its own, *not confined*: `external_profiler` wires it in here for a policy whose code is trusted
(your own kernels), never for a policy under training, whose kernels are untrusted input.

The summary is cut to `max_chars` (`truncate_middle`, with its visible marker) and appended to the
feedback after a blank line. Only `feedback` changes: stage, correctness, speedup, flags and so the
score are the evaluator's. A profiler that returns "" or raises adds nothing (a profile is a hint;
its failure costs the model nothing). Identical kernels of one task in one turn are profiled once.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence

from kevin.evaluator.attribution import traced_kernels
from kevin.evaluator.profiling.summary import MIN_CHARS as MIN_PROFILE_CHARS
from kevin.evaluator.profiling.summary import KernelStats, short_name, summarize
from kevin.evaluator.result import EvalResult, truncate_middle
from kevin.rl.prompts import DEFAULT_TEMPLATES, PromptTemplates, describe_result
from kevin.tasks import Task

__all__ = ["MIN_PROFILE_CHARS", "Profiler", "external_profiler", "trace_profiler", "with_profiles"]

log = logging.getLogger(__name__)

Profiler = Callable[[Task, str, EvalResult], str]
"""`(task, candidate source, its verdict) -> profile summary` for a passed kernel's feedback; "" for none."""


def trace_summary(result: EvalResult, max_chars: int) -> str:
    """The verdict's own trace as a profile summary; "" when it holds no kernel table."""
    table = traced_kernels(result.checks)
    if table is None:
        return ""
    rows, calls = table
    kernels = [
        KernelStats(
            name=short_name(row["name"]) + ("" if row["whose"] == "custom" else f" ({row['whose']})"),
            launches=max(1, round(row["launches"])),
            total_ns=row["us"] * 1e3,
        )
        for row in rows
    ]
    device = "GPU" if result.device.startswith("cuda") or result.backend in ("cuda", "triton") else "CPU"
    return summarize(kernels, tool="the evaluator's trace", forward_calls=calls, max_chars=max_chars, device=device)


def trace_profiler(max_chars: int) -> Profiler:
    """The default: the evaluation's own trace (module docstring); nothing runs again."""
    return lambda task, source, result: trace_summary(result, max_chars)


def external_profiler(backend: str, max_chars: int) -> Profiler:
    """`kevin profile`'s run (ncu where installed, else torch.profiler, under kevin's device lock).
    It runs the candidate unconfined: for trusted kernels only (module docstring)."""
    from kevin.evaluator.profiling.run import feedback_profiler

    profile_summary = feedback_profiler(backend, max_chars)
    return lambda task, source, result: profile_summary(task.source, source)


def with_profiles(
    tasks: Sequence[Task],
    candidates: Sequence[str | None],
    results: Sequence[EvalResult],
    profiler: Profiler,
    max_chars: int,
    templates: PromptTemplates = DEFAULT_TEMPLATES,
) -> list[EvalResult]:
    """`results` with a profile summary appended to each passed kernel's feedback (copies; the
    verdict fields are untouched). An empty feedback is first filled as the model would read it."""
    summaries: dict[tuple[str, str], str] = {}
    out = []
    for task, candidate, result in zip(tasks, candidates, results, strict=True):
        if not result.passed or not candidate:
            out.append(result)
            continue
        key = (task.id, candidate)
        if key not in summaries:
            try:
                summaries[key] = truncate_middle(profiler(task, candidate, result).strip(), max_chars)
            except Exception as exc:
                log.warning("profiling on task %s failed: %s: %s", task.id, type(exc).__name__, exc)
                summaries[key] = ""
        if not summaries[key]:
            out.append(result)
            continue
        base = result.feedback or describe_result(result, templates)
        out.append(dataclasses.replace(result, feedback=f"{base}\n\n{summaries[key]}"))
    return out
