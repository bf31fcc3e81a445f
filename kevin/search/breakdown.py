"""Where the time went: the baseline's and the winning kernel's heaviest kernels, for `kevin optimize`'s report.

The winner's side comes from its own verdict: the evaluator's library check ran its forward under
torch.profiler in the confined runner and kept the heaviest kernels (`checks.trace.kernels`: name,
launches and microseconds over `traced_calls` forwards, whose: the candidate's own, the library's,
or allowed copies and fills), so nothing runs again for it. The baseline's side is the user's own
module profiled with torch.profiler (kevin.evaluator.profiling, `tool="torch"`) on the evaluator's
device and inputs: the reference is the user's code, so running it outside the sandbox is what
running the module does anyway. A side that cannot be had (no kernel table in the verdict, the
profile failed) is said so in one line; the report never fails for it.

Rows per forward: kernel, launches, microseconds and share of the side's total, at most `ROWS`
each (the rest summed in one line).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kevin.evaluator.attribution import traced_kernels
from kevin.evaluator.profiling.summary import short_name
from kevin.tasks import Task

ROWS = 6

Kernels = list[dict[str, Any]]
"""[{"name", "whose", "launches", "us"}] per forward, heaviest first."""


def winner_kernels(row: Mapping[str, Any]) -> Kernels | None:
    """The winning attempt's kernels per forward from its verdict's trace; None without one."""
    verdict = row.get("verdict") if isinstance(row.get("verdict"), Mapping) else {}
    table = traced_kernels(verdict.get("checks"))
    if table is None:
        return None
    rows, calls = table
    return [
        {"name": short_name(k["name"]), "whose": k["whose"], "launches": k["launches"] / calls, "us": k["us"] / calls}
        for k in rows
    ]


def reference_profiler(backend: str, cache_dir: str | None = None) -> Callable[[Task], Kernels | str]:
    """`task -> its reference's kernels per forward`, or a one-line reason there are none: the
    module's Model profiled as the candidate (`ModelNew = Model`) with torch.profiler."""

    def profile_reference(task: Task) -> Kernels | str:
        from kevin.evaluator.profiling.run import ProfileConfig, profile

        config = ProfileConfig(backend=backend, tool="torch", cache_dir=cache_dir, timeout_s=300.0)
        report = profile(task.source, task.source + "\n\nModelNew = Model\n", config)
        if not report.ok:
            return f"the baseline could not be profiled ({report.blame}): {report.error[:200]}"
        calls = config.forward_calls
        return [
            {"name": k.name, "whose": "library", "launches": k.launches / calls, "us": k.total_ns / 1e3 / calls}
            for k in sorted(report.kernels, key=lambda k: -k.total_ns)
        ]

    return profile_reference


def _side(title: str, kernels: Kernels | str | None, unit: str) -> list[str]:
    lines = [f"### {title}", ""]
    if not isinstance(kernels, list) or not kernels:
        return lines + [kernels if isinstance(kernels, str) else "No kernel table (the verdict holds no trace).", ""]
    total = sum(k["us"] for k in kernels)
    lines += [f"| {unit} | whose | launches per forward | us per forward | share |", "|---|---|---|---|---|"]
    for k in kernels[:ROWS]:
        share = 100.0 * k["us"] / total if total > 0 else 0.0
        lines.append(f"| `{k['name']}` | {k['whose']} | {k['launches']:.3g} | {k['us']:.1f} | {share:.0f}% |")
    rest = kernels[ROWS:]
    if rest:
        us = sum(k["us"] for k in rest)
        lines.append(f"| ({len(rest)} more) | | | {us:.1f} | {100.0 * us / total if total else 0:.0f}% |")
    lines += ["", f"Total {total:.1f} us per forward.", ""]
    return lines


def markdown(reference: Kernels | str | None, winner: Kernels | None, *, on_gpu: bool) -> list[str]:
    """The report's "Where the time went" section."""
    unit = "kernel" if on_gpu else "op"
    where = "device kernels" if on_gpu else "CPU ops (the cpp back end)"
    lines = ["## Where the time went", "", f"The heaviest {where}, per forward (torch.profiler).", ""]
    lines += _side("Baseline (the module's Model, eager)", reference, unit)
    lines += _side("Winner (from its verdict's trace)", winner, unit)
    return lines


def record(reference: Kernels | str | None, winner: Kernels | None) -> dict[str, Any]:
    """The same for result.json."""
    return {
        "reference": reference if isinstance(reference, list) else None,
        "reference_error": reference if isinstance(reference, str) else "",
        "winner": winner,
    }


def for_winner(
    winner: Mapping[str, Any] | None, task: Task, profiler: Callable[[Task], Kernels | str] | None
) -> tuple[Kernels | str | None, Kernels | None]:
    """(the baseline's kernels or why not, the winner's); (None, None) without a winner or profiler."""
    if winner is None or profiler is None:
        return None, None
    try:
        reference = profiler(task)
    except Exception as exc:  # a report section must never fail the run
        reference = f"the baseline could not be profiled: {type(exc).__name__}: {exc}"[:300]
    return reference, winner_kernels(winner)
