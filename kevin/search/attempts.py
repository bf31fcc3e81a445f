"""The attempts of one `kevin optimize` run, summarised: per turn, by failure, ranked, as a report.

Input: the run's episode rows (kevin.rl.episodes rows with `parent`, kevin.search.beam). An attempt's
outcome is `passed` (correct and not blocked: EvalResult.passed), `blocked` (correct, but a blocking
flag of the evaluator's checks), `infrastructure` (the evaluation failed on our side) or the stage
where it stopped (`format`, `static_check`, `compile`, `runtime`, `correctness`, `timeout`).

    turn_summaries   per turn: attempts, passed, best speedup at that turn and so far, mean score,
                     failures by outcome
    ranked_passed    passed attempts, fastest first (ties: earlier turn, then lower trajectory)
    progress_line    the one line per turn printed while the search runs
    write_report     report.md (result, re-verification, per turn, failures by stage with their
                     short errors, every attempt) and report.png (speedup per attempt and best so far
                     per turn; outcomes per turn) when matplotlib is installed

matplotlib is imported inside the plot function. Nothing here runs a policy or an evaluator.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kevin.evaluator.result import EvalResult
from kevin.search.report import cell

REPORT_MD = "report.md"
REPORT_PNG = "report.png"
ERROR_CHARS = 120
"""Longest short error shown per attempt."""

Row = Mapping[str, Any]


def verdict(row: Row) -> EvalResult:
    return EvalResult.from_dict(row["verdict"])


def outcome(row: Row) -> str:
    result = verdict(row)
    if result.passed:
        return "passed"
    if result.blame == "infrastructure":
        return "infrastructure"
    if result.correct:
        return "blocked"
    return result.stage


def speedup(row: Row) -> float | None:
    """The attempt's speedup when it passed, else None."""
    result = verdict(row)
    return result.speedup if result.passed else None


def short_error(row: Row, limit: int = ERROR_CHARS) -> str:
    """The first line of the verdict's error (its blocking flags and their numbers for a blocked
    attempt, EvalResult.explain), at most
    `limit` characters; pipes escaped for markdown tables."""
    result = verdict(row)
    text = result.error.strip() or (result.explain() if result.correct else "")
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    if len(line) > limit:
        line = line[: limit - 3] + "..."
    return line.replace("|", "\\|")


def ranked_passed(rows: Sequence[Row]) -> list[Row]:
    passed = [row for row in rows if speedup(row) is not None]
    return sorted(passed, key=lambda r: (-(speedup(r) or 0.0), int(r["turn"]), int(r["trajectory"])))


def turn_summaries(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """One dict per turn present in `rows`, in turn order (module docstring)."""
    summaries = []
    best_so_far: float | None = None
    for number in sorted({int(row["turn"]) for row in rows}):
        mine = [row for row in rows if int(row["turn"]) == number]
        speedups = [s for s in map(speedup, mine) if s is not None]
        best = max(speedups, default=None)
        if best is not None:
            best_so_far = best if best_so_far is None else max(best_so_far, best)
        scores = [float(row["score"]) for row in mine if row.get("score") is not None]
        summaries.append(
            {
                "turn": number,
                "attempts": len(mine),
                "passed": len(speedups),
                "best": best,
                "best_so_far": best_so_far,
                "mean_score": sum(scores) / len(scores) if scores else None,
                "failures": dict(Counter(o for o in map(outcome, mine) if o != "passed")),
            }
        )
    return summaries


def _failures_text(failures: Mapping[str, int]) -> str:
    return ", ".join(f"{stage} {count}" for stage, count in sorted(failures.items())) or "none"


def _speed(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def progress_line(summary: Mapping[str, Any], turns: int, seconds: float, kept: Sequence[int] = ()) -> str:
    """`turn 2/4: 8 attempts, 3 passed, best 1.42x (so far 1.42x); failed: compile 2, ...; 12 s`."""
    line = (
        f"turn {summary['turn']}/{turns}: {summary['attempts']} attempts, {summary['passed']} passed, "
        f"best {_speed(summary['best'])} (so far {_speed(summary['best_so_far'])}); "
        f"failed: {_failures_text(summary['failures'])}; {seconds:.0f} s"
    )
    if kept:
        line += "; beam keeps trajectories " + ", ".join(map(str, kept))
    return line


def _table(headings: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(headings) + " |", "|" + "|".join("---" for _ in headings) + "|"]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return lines


def failures_by_stage(rows: Sequence[Row]) -> list[tuple[str, int, list[tuple[str, int]]]]:
    """(outcome, attempts, [(short error, attempts)] most common first) for every failed outcome."""
    errors: dict[str, Counter[str]] = {}
    for row in rows:
        kind = outcome(row)
        if kind != "passed":
            errors.setdefault(kind, Counter())[short_error(row) or "(no message)"] += 1
    return sorted(
        ((kind, sum(c.values()), c.most_common()) for kind, c in errors.items()), key=lambda e: (-e[1], e[0])
    )


def _check_rows(verification: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    table = []
    for kernel in verification:
        for check in kernel["checks"]:
            result = EvalResult.from_dict(check["verdict"])
            table.append(
                [
                    f"trajectory {kernel['trajectory']} turn {kernel['turn']}",
                    check["label"],
                    "passed" if result.passed else outcome({"verdict": check["verdict"]}),
                    _speed(result.speedup if result.passed else None),
                    short_error({"verdict": check["verdict"]}),
                ]
            )
    return table


def markdown(
    rows: Sequence[Row],
    *,
    title: str,
    about: Sequence[str],
    result: Sequence[str],
    verification: Sequence[Mapping[str, Any]],
    kept: Mapping[int, Sequence[int]],
    plot: str | None,
) -> str:
    """report.md. `about`: lines on what was run; `result`: lines on the winner or why there is none;
    `kept`: the slots the beam kept after each turn (empty without a beam)."""
    summaries = turn_summaries(rows)
    lines = [f"# {title}", "", *about, "", "## Result", "", *result, ""]
    if verification:
        lines += ["### Re-verification", ""]
        lines += _table(["kernel", "check", "outcome", "speedup", "error"], _check_rows(verification))
        lines.append("")
    lines += ["## Per turn", ""]
    headings = ["turn", "attempts", "passed", "best speedup", "best so far", "mean score", "failures"]
    table = [
        [
            str(s["turn"]),
            str(s["attempts"]),
            str(s["passed"]),
            _speed(s["best"]),
            _speed(s["best_so_far"]),
            cell(s["mean_score"]),
            _failures_text(s["failures"]),
        ]
        for s in summaries
    ]
    if kept:
        headings.append("beam keeps")
        for line, s in zip(table, summaries):
            line.append(", ".join(map(str, kept.get(s["turn"], ()))) or "-")
    lines += [*_table(headings, table), ""]
    if plot:
        lines += [f"![speedup per attempt and best so far per turn]({plot})", ""]
    lines += ["## Failures by stage", ""]
    failures = failures_by_stage(rows)
    if failures:
        lines += _table(
            ["stage", "attempts", "short errors (attempts)"],
            [
                [kind, str(count), "; ".join(f"{error} ({n})" for error, n in errors[:5])]
                for kind, count, errors in failures
            ],
        )
    else:
        lines.append("No attempt failed.")
    lines += ["", "## Every attempt", ""]
    order = sorted(rows, key=lambda r: (int(r["turn"]), int(r["trajectory"])))
    lines += _table(
        ["turn", "trajectory", "parent", "outcome", "speedup", "score", "error"],
        [
            [
                str(r["turn"]),
                str(r["trajectory"]),
                "-" if r.get("parent") is None else str(r["parent"]),
                outcome(r),
                _speed(speedup(r)),
                cell(r.get("score")),
                short_error(r),
            ]
            for r in order
        ],
    )
    return "\n".join(lines) + "\n"


def plot_attempts(rows: Sequence[Row], path: Path, *, title: str) -> Path | None:
    """report.png: each attempt's speedup (failures at 0) and the best so far per turn; the outcomes
    of each turn. None when matplotlib is not installed."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summaries = turn_summaries(rows)
    turns = [s["turn"] for s in summaries]
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    count = max((int(r["trajectory"]) for r in rows), default=0) + 1

    def x(row: Row) -> float:  # a turn's trajectories side by side
        return int(row["turn"]) + (0.3 * (int(row["trajectory"]) / (count - 1) - 0.5) if count > 1 else 0.0)

    for passed, marker, colour, label in (
        (True, "o", "tab:blue", "passed"),
        (False, "x", "tab:red", "failed"),
    ):
        points = [(x(r), speedup(r) or 0.0) for r in rows if (speedup(r) is not None) == passed]
        if points:
            left.scatter([p[0] for p in points], [p[1] for p in points], marker=marker, c=colour, label=label)
    best = [(s["turn"], s["best_so_far"]) for s in summaries if s["best_so_far"] is not None]
    if best:
        left.plot([b[0] for b in best], [b[1] for b in best], c="black", marker="D", label="best so far")
    left.axhline(1.0, c="grey", lw=0.8, ls="--")
    left.set(title="speedup per attempt (failures at 0)", xlabel="turn", ylabel="speedup over eager")
    left.set_xticks(turns)
    left.legend(fontsize=8)
    kinds = sorted({outcome(r) for r in rows}, key=lambda k: (k != "passed", k))
    bottom = [0] * len(turns)
    for kind in kinds:
        heights = [sum(1 for r in rows if int(r["turn"]) == t and outcome(r) == kind) for t in turns]
        right.bar(turns, heights, bottom=bottom, label=kind)
        bottom = [b + h for b, h in zip(bottom, heights)]
    right.set(title="outcomes per turn", xlabel="turn", ylabel="attempts")
    right.yaxis.get_major_locator().set_params(integer=True)
    right.set_xticks(turns)
    right.legend(fontsize=8)
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def write_report(
    out_dir: Path,
    rows: Sequence[Row],
    *,
    title: str,
    about: Sequence[str],
    result: Sequence[str],
    verification: Sequence[Mapping[str, Any]],
    kept: Mapping[int, Sequence[int]],
    appendix: Sequence[str] = (),
) -> tuple[Path, Path | None]:
    """report.md and report.png (when matplotlib is installed and there is an attempt to draw);
    `appendix`: markdown lines after the rest."""
    png = plot_attempts(rows, out_dir / REPORT_PNG, title=title) if rows else None
    path = out_dir / REPORT_MD
    text = markdown(
        rows,
        title=title,
        about=about,
        result=result,
        verification=verification,
        kept=kept,
        plot=png.name if png else None,
    )
    if appendix:
        text = text.rstrip("\n") + "\n\n" + "\n".join(appendix).rstrip("\n") + "\n"
    path.write_text(text, encoding="utf-8")
    return path, png
