"""A bench run's report: the paper's Table 1 columns, markdown tables, curves, and two runs compared.

Table 1 columns, from kevin.rl.metrics (definitions there), with k = n, the trajectories per task:

    correct         share of trajectories with a passed turn, averaged over tasks        (avg@k)
    correct_best    pass@k: chance that at least one of k trajectories is correct       (best@k)
    speedup_best    best@k: expected best trajectory speedup of k, failures 0
    speedup_avg     mean trajectory speedup, failures 0 (avg@k; this is the mean speedup)
    fast_1, fast_1.5  share correct and faster than 1x / 1.5x                          (avg@k)
    geomean         geometric mean speedup over the correct trajectories (None when none is)

Each overall (all turns) and within the first t turns, t = 1..T (`upto_turn`). Shares are stored as
fractions and shown as percentages. The full kevin.rl.metrics output travels with them under
`metrics`. This module reads and writes no episode rows; matplotlib is imported only to draw.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kevin.errors import UsageError

METRICS_JSON = "metrics.json"
METRICS_MD = "metrics.md"
CURVES_PNG = "curves.png"

# (key, heading with {k}, shown as a percentage)
COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("correct", "correct % (avg@{k})", True),
    ("correct_best", "correct % (best@{k})", True),
    ("speedup_best", "speedup best@{k}", False),
    ("speedup_avg", "mean speedup (avg@{k})", False),
    ("fast_1", "fast_1 %", True),
    ("fast_1.5", "fast_1.5 %", True),
    ("geomean", "geomean (correct)", False),
)
PERCENT = {key for key, _, percent in COLUMNS if percent}

TURN_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("samples", "samples", False),
    ("passed", "passed %", True),
    ("score", "mean score", False),
    ("format_errors", "format errors %", True),
    ("truncated", "truncated %", True),
    ("infrastructure", "infrastructure failures", False),
)


def table1(summary: Mapping[str, Any], k: int) -> dict[str, float | None]:
    """The Table 1 columns of one kevin.rl.metrics summary."""
    return {
        "correct": summary["correct"],
        "correct_best": summary[f"pass@{k}"],
        "speedup_best": summary[f"best@{k}"],
        "speedup_avg": summary["speedup"],
        "fast_1": summary["fast_1"],
        "fast_1.5": summary["fast_1.5"],
        "geomean": summary["geomean"],
    }


def bench_metrics(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """metrics.json: Table 1 overall and within the first t turns, k = the largest k (n), and the
    kevin.rl.metrics output it comes from."""
    k = max(metrics["ks"])
    overall = metrics["overall"]
    return {
        "k": k,
        "tasks": overall["tasks"],
        "trajectories": overall["trajectories"],
        "turns": metrics["turns"],
        "table1": {
            "overall": table1(overall, k),
            "upto_turn": [{"turn": row["turn"], **table1(row, k)} for row in metrics["upto_turn"]],
        },
        "metrics": dict(metrics),
    }


def cell(value: Any, percent: bool = False) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool) or isinstance(value, int):
        return str(value)
    return f"{100 * value:.1f}" if percent else f"{value:.3f}"


def difference(a: Any, b: Any, percent: bool = False) -> str:
    if a is None or b is None:
        return "-"
    return f"{100 * (b - a):+.1f}" if percent else f"{b - a:+.3f}"


def table(headings: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(headings) + " |", "|" + "|".join("---:" for _ in headings) + "|"]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return lines


def side_by_side(
    first: str,
    rows_a: Mapping[Any, Mapping[str, Any]],
    rows_b: Mapping[Any, Mapping[str, Any]],
    columns: Sequence[tuple[str, str, bool]],
) -> list[str]:
    """A markdown table with a row per key of rows_a, then of rows_b, and for each (key, heading,
    percent) column the A value, the B value and B - A ("-" where a side lacks the row)."""
    headings = [first] + [f"{heading} {side}" for _, heading, _ in columns for side in ("A", "B", "B - A")]
    rows = []
    for name in [*rows_a, *(name for name in rows_b if name not in rows_a)]:
        a, b = rows_a.get(name, {}), rows_b.get(name, {})
        rows.append(
            [str(name)]
            + [
                text
                for key, _, percent in columns
                for text in (
                    cell(a.get(key), percent),
                    cell(b.get(key), percent),
                    difference(a.get(key), b.get(key), percent),
                )
            ]
        )
    return table(headings, rows)


def save_figure(figure: Any, path: Path, *, title: str) -> Path:
    """Title, lay out, write and close a matplotlib figure."""
    import matplotlib.pyplot as plt

    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def _headings(k: int) -> list[str]:
    return [heading.format(k=k) for _, heading, _ in COLUMNS]


def _row(values: Mapping[str, Any]) -> list[str]:
    return [cell(values.get(key), percent) for key, _, percent in COLUMNS]


def table1_markdown(metrics: Mapping[str, Any]) -> str:
    """Table 1 over all turns, one markdown table."""
    return "\n".join(table(_headings(metrics["k"]), [_row(metrics["table1"]["overall"])]))


def markdown(metrics: Mapping[str, Any], *, title: str) -> str:
    k = metrics["k"]
    lines = [
        f"# {title}",
        "",
        f"{metrics['tasks']} tasks, {metrics['trajectories']} trajectories, up to {metrics['turns']} turns; "
        f"k = {k}. A trajectory counts its best passed turn; shares and speedups are averaged over "
        "trajectories, then tasks; failures count as speedup 0; geomean is over correct trajectories.",
        "",
        "## Table 1 (all turns)",
        "",
        table1_markdown(metrics),
        "",
        "## Within the first t turns",
        "",
        *table(["turn", *_headings(k)], [[str(r["turn"]), *_row(r)] for r in metrics["table1"]["upto_turn"]]),
        "",
        "## Turn t alone (its samples)",
        "",
        *table(
            ["turn", *(heading for _, heading, _ in TURN_COLUMNS)],
            [
                [str(r["turn"]), *(cell(r.get(key), percent) for key, _, percent in TURN_COLUMNS)]
                for r in metrics["metrics"]["at_turn"]
            ],
        ),
        "",
    ]
    return "\n".join(lines)


def plot_curves(metrics: Mapping[str, Any], path: Path, *, title: str) -> Path | None:
    """curves.png: the Table 1 shares and speedups against the number of turns, and each turn's own
    pass and format-error shares. None when matplotlib is not installed (the `train` extra)."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    k = metrics["k"]
    upto = metrics["table1"]["upto_turn"]
    at_turn = metrics["metrics"]["at_turn"]
    panels = [
        (
            "shares within the first t turns (%)",
            upto,
            ["correct", "correct_best", "fast_1", "fast_1.5"],
            True,
        ),
        ("speedup within the first t turns", upto, ["speedup_best", "speedup_avg", "geomean"], False),
        ("turn t alone (%)", at_turn, ["passed", "format_errors", "truncated"], True),
    ]
    labels = {key: heading.format(k=k) for key, heading, _ in COLUMNS + TURN_COLUMNS}
    figure, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for axis, (name, rows, keys, percent) in zip(axes, panels):
        for key in keys:
            points = [(r["turn"], r[key]) for r in rows if r.get(key) is not None]
            if points:
                axis.plot(
                    [p[0] for p in points],
                    [100 * p[1] if percent else p[1] for p in points],
                    marker="o",
                    label=labels[key],
                )
        axis.set_title(name)
        axis.set_xlabel("turn")
        axis.set_xticks([r["turn"] for r in rows])
        axis.legend(fontsize=8)
    return save_figure(figure, path, title=title)


def load_run(run: str | Path) -> dict[str, Any]:
    """A bench run's metrics.json (RUN a directory or the file itself); UsageError when absent."""
    path = Path(run)
    if path.is_dir():
        path = path / METRICS_JSON
    if not path.is_file():
        raise UsageError(f"{path}: not found; give a `kevin bench` run directory (it holds {METRICS_JSON})")
    try:
        metrics = json.loads(path.read_text(encoding="utf-8"))
        metrics["table1"]["overall"]
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{path}: not a `kevin bench` metrics file ({exc})") from None
    return metrics


def compare(a: Mapping[str, Any], b: Mapping[str, Any], *, name_a: str = "A", name_b: str = "B") -> str:
    """Two runs' Table 1 side by side, B - A (percentage points for shares), overall and by turn."""
    ka, kb = a["k"], b["k"]
    k = str(ka) if ka == kb else f"{ka} vs {kb}"
    lines = [
        "# kevin bench compare",
        "",
        f"A = {name_a}: {a['tasks']} tasks, {a['trajectories']} trajectories, {a['turns']} turns, k = {ka}",
        f"B = {name_b}: {b['tasks']} tasks, {b['trajectories']} trajectories, {b['turns']} turns, k = {kb}",
        "",
        "## All turns (differences of shares in percentage points)",
        "",
    ]
    overall_a, overall_b = a["table1"]["overall"], b["table1"]["overall"]
    lines += table(
        ["metric", "A", "B", "B - A"],
        [
            [
                heading.format(k=k),
                cell(overall_a.get(key), percent),
                cell(overall_b.get(key), percent),
                difference(overall_a.get(key), overall_b.get(key), percent),
            ]
            for key, heading, percent in COLUMNS
        ],
    )
    by_turn_a = {r["turn"]: r for r in a["table1"]["upto_turn"]}
    by_turn_b = {r["turn"]: r for r in b["table1"]["upto_turn"]}
    keys = [
        ("correct", "correct %", True),
        ("speedup_best", f"best@{k}", False),
        ("speedup_avg", "mean speedup", False),
    ]
    lines += ["", "## Within the first t turns", "", *side_by_side("turn", by_turn_a, by_turn_b, keys), ""]
    return "\n".join(lines)
