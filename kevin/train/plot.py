"""`curves.png`: the run's curves, drawn from `metrics.jsonl` at the end of each launch.

Six panels, steps on the x axis: training reward (mean, per turn index, share passed), held-out correctness and mean
speedup, loss and gradient norm, completion length with the truncated and not-opener shares, the
clip fractions and the sampler/learner log-prob gap, and each step's time split (generate, evaluate,
learn). A panel with nothing logged says so. matplotlib's Agg back end: no display needed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kevin.train.tracking import read_jsonl

PLOT_FILE = "curves.png"

PANELS: list[tuple[str, list[str]]] = [
    (
        "training reward",
        [
            "rollout/reward_mean",
            "rollout/reward_turn_*",
            "rollout/passed_share",
            "rollout/format_error_share",
        ],
    ),
    ("held-out", ["heldout/correct", "heldout/speedup", "heldout/fast_1"]),
    ("loss and gradient", ["learn/loss", "learn/grad_norm"]),
    ("completions", ["rollout/completion_tokens", "rollout/truncated_share", "rollout/not_opener_share"]),
    ("off-policy", ["learn/clip_low_frac", "learn/clip_high_frac", "learn/logprob_diff_max", "learn/drift"]),
    ("time per step (s)", ["time/generate_s", "time/evaluate_s", "time/learn_s"]),
]


def _keys(rows: list[dict[str, Any]], pattern: str) -> list[str]:
    """`pattern` itself, or every logged key it matches when it ends in `*`, in sorted order."""
    if not pattern.endswith("*"):
        return [pattern]
    return sorted({key for row in rows for key in row if key.startswith(pattern[:-1])})


def _series(rows: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    points = [(int(row["step"]), float(row[key])) for row in rows if key in row]
    return [p[0] for p in points], [p[1] for p in points]


def plot_run(run_dir: str | Path, *, title: str = "") -> Path | None:
    """Write `curves.png` into `run_dir`; None when there is no metrics file yet."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from kevin.train.tracking import METRICS_FILE

    run_dir = Path(run_dir)
    rows = read_jsonl(run_dir / METRICS_FILE)
    if not rows:
        return None
    figure, axes = plt.subplots(2, 3, figsize=(15, 8))
    for axis, (name, keys) in zip(axes.flat, PANELS):
        drawn = 0
        for key in [k for pattern in keys for k in _keys(rows, pattern)]:
            steps, values = _series(rows, key)
            if steps:
                axis.plot(steps, values, marker="o", markersize=3, label=key.split("/", 1)[1])
                drawn += 1
        axis.set_title(name)
        axis.set_xlabel("step")
        if drawn:
            axis.legend(fontsize=7)
        else:
            axis.text(0.5, 0.5, "nothing logged", ha="center", va="center", transform=axis.transAxes)
    figure.suptitle(title or run_dir.name)
    figure.tight_layout()
    path = run_dir / PLOT_FILE
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
