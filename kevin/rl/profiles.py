"""Profile feedback: a passed kernel's feedback, with where its time goes appended.

When `EpisodeConfig.profile_feedback` is on, the episode calls `with_profiles` once every verdict
of a turn is in, so no evaluation (and no timing) is running. Each passed kernel is profiled by a
`Profiler` (default: kevin.evaluator.profiling, ncu where installed, else torch.profiler, holding
kevin's device lock), the summary is cut to `max_chars` (`truncate_middle`, with its visible
marker) and appended to the feedback after a blank line. Only `feedback` changes: stage,
correctness, speedup, flags and so the score are the evaluator's. A profiler that returns "" or
raises adds nothing (a profile is a hint; its failure costs the model nothing). Identical kernels
of one task in one turn are profiled once.

Cost: one profiled run per distinct passed kernel per turn, in the episode's thread (ncu replays a
kernel once per counter pass: seconds per kernel, plus the build when its cache is cold).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence

from kevin.evaluator.profiling.summary import MIN_CHARS as MIN_PROFILE_CHARS
from kevin.evaluator.result import EvalResult, truncate_middle
from kevin.rl.prompts import DEFAULT_TEMPLATES, PromptTemplates, describe_result
from kevin.tasks import Task

__all__ = ["MIN_PROFILE_CHARS", "Profiler", "default_profiler", "with_profiles"]

log = logging.getLogger(__name__)

Profiler = Callable[[Task, str], str]
"""`(task, candidate source) -> profile summary` for a passed kernel's feedback; "" for none."""


def default_profiler(backend: str, max_chars: int) -> Profiler:
    """kevin.evaluator.profiling's profiler for `backend`, holding kevin's device lock."""
    from kevin.evaluator.profiling.run import feedback_profiler

    profile_summary = feedback_profiler(backend, max_chars)
    return lambda task, source: profile_summary(task.source, source)


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
                summaries[key] = truncate_middle(profiler(task, candidate).strip(), max_chars)
            except Exception as exc:
                log.warning("profiling on task %s failed: %s: %s", task.id, type(exc).__name__, exc)
                summaries[key] = ""
        if not summaries[key]:
            out.append(result)
            continue
        base = result.feedback or describe_result(result, templates)
        out.append(dataclasses.replace(result, feedback=f"{base}\n\n{summaries[key]}"))
    return out
