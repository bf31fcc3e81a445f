"""The learning run's report (bench/learning_run.py): metrics.json, the RL run's small files,
learning.png and table.txt, written from the run's record and its RL folder; every launch (and the
watchdog) writes it again from what is on disk."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import heldout_paired

from kevin.train.tracking import METRICS_FILE, read_jsonl

HEADLINE = ("correct", "speedup", "fast_1")
"""The held-out metrics the table and the plot show."""


RL_FILES = ("config.json", "metrics.jsonl", "heldout.jsonl", "heldout_resumed.jsonl", "curves.png")


def _heldout_points(rows: list[dict]) -> list[dict]:
    return [
        {"step": row["step"], **{k: row.get(f"heldout/{k}") for k in (*HEADLINE, "geomean")}}
        for row in rows
        if "heldout/correct" in row
    ]


def _episodes_sample(run_dir: Path, out: Path, per_step: int = 8) -> None:
    rows = read_jsonl(run_dir / "episodes.jsonl") if (run_dir / "episodes.jsonl").exists() else []
    steps = sorted({row.get("step", 0) for row in rows})
    kept = [
        row
        for step in steps[:1] + steps[-1:]
        for row in [r for r in rows if r.get("step", 0) == step][:per_step]
    ]
    with (out / "episodes_sample.jsonl").open("w", encoding="utf-8") as handle:
        for row in kept:
            handle.write(json.dumps(row) + "\n")


def paired_since_resume(heldout: list[dict], resumed: list[dict]) -> list[dict]:
    """The steps after the last resume against the restored step evaluated again on the same
    machine (`loop.eval_at_resume`): [] without such an evaluation or a later step."""
    if not resumed:
        return []
    base = max(int(row.get("step", 0)) for row in resumed)
    since = [row for row in heldout if int(row.get("step", 0)) > base]
    if not since:
        return []
    return heldout_paired.compare(since + [r for r in resumed if int(r.get("step", 0)) == base], base=base)


def write_report(record: dict, run_dir: Path, out: Path) -> None:
    rows = read_jsonl(run_dir / METRICS_FILE) if (run_dir / METRICS_FILE).exists() else []
    points = _heldout_points(rows)
    record["heldout"] = points
    record["before"] = points[0] if points and points[0]["step"] == 0 else None
    record["after"] = points[-1] if len(points) > 1 else None
    record["training"] = [
        {
            "step": row["step"],
            "reward": row.get("rollout/reward_mean"),
            "passed": row.get("rollout/passed_share"),
        }
        for row in rows
        if "rollout/reward_mean" in row
    ]
    # Each held-out step against the start, pair by pair: is the change more than chance?
    heldout = read_jsonl(run_dir / "heldout.jsonl") if (run_dir / "heldout.jsonl").exists() else []
    record["paired"] = heldout_paired.compare(heldout) if heldout else []
    record["machines"] = {str(step): name for step, name in heldout_paired.machines(heldout).items()}
    resumed = read_jsonl(run_dir / "heldout_resumed.jsonl") if (run_dir / "heldout_resumed.jsonl").exists() else []
    record["paired_resumed"] = paired_since_resume(heldout, resumed)
    (out / "rl").mkdir(parents=True, exist_ok=True)
    for name in RL_FILES:
        if (run_dir / name).exists():
            shutil.copy(run_dir / name, out / "rl" / name)
    _episodes_sample(run_dir, out / "rl")
    (out / "metrics.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    try:
        _plot(record, out / "learning.png")
    except ImportError as exc:  # no matplotlib: metrics.json holds every number to plot later
        print(f"learning_run: no plot ({exc})")
    table = _table(record)
    (out / "table.txt").write_text(table + "\n", encoding="utf-8")
    print(table, flush=True)


def _plot(record: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    points, baseline = record.get("heldout") or [], record.get("corpus_average") or {}
    for axis, key, title in (
        (axes[0], "correct", "held-out: share correct"),
        (axes[1], "speedup", "held-out: mean speedup (failures 0)"),
    ):
        steps = [p["step"] for p in points if p.get(key) is not None]
        axis.plot(
            steps,
            [p[key] for p in points if p.get(key) is not None],
            marker="o",
            label="policy (step 0 = SFT start)",
        )
        if baseline.get(key) is not None:
            axis.axhline(baseline[key], color="gray", linestyle="--", label="corpus average variant")
        axis.set_title(title)
        axis.set_xlabel("RL step")
        axis.legend(fontsize=8)
    training = record.get("training") or []
    axes[2].plot(
        [t["step"] for t in training], [t["reward"] for t in training], marker="o", label="mean reward"
    )
    axes[2].plot(
        [t["step"] for t in training], [t["passed"] for t in training], marker="s", label="share passed"
    )
    axes[2].set_title("training tasks")
    axes[2].set_xlabel("RL step")
    axes[2].legend(fontsize=8)
    sft_record = record.get("sft") or {}
    figure.suptitle(
        f"kevin learning run: {sft_record.get('parameters', 0) / 1e6:.1f}M-parameter policy, {record.get('backend')}, "
        f"{(record.get('rl') or {}).get('steps', 0)} RL steps"
    )
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _sft_line(sft_record: dict) -> str:
    """The warm start's training loss and its loss on the held-out tasks' corpus (never trained on):
    a held-out loss far above the training loss means it recalls training kernels, not the task's."""
    held = sft_record.get("val_losses") or []
    if not sft_record:
        return "sft: -"
    line = f"sft: {sft_record.get('steps')} steps, loss {sft_record.get('first_loss', 0):.3f} -> {sft_record.get('last_loss', 0):.3f}"
    if held:
        line += f"; held-out corpus loss {held[0][1]:.3f} -> {held[-1][1]:.3f} (min {min(v for _, v in held):.3f})"
    constants = sft_record.get("val_constants") or []
    if constants:
        step, share, probability = constants[-1]
        line += f"; its constants copied {share:.2f} (mean p {probability:.2f}) at step {step}"
    return line


def _machines_line(record: dict) -> list[str]:
    """A warning line when the start and the last held-out step were judged on different GPUs."""
    machines, after = record.get("machines") or {}, record.get("after") or {}
    start, last = machines.get("0", ""), machines.get(str(after.get("step")), "")
    if not (start and last) or start == last:
        return []
    return [f"(step 0 judged on {start}, step {after['step']} on {last}: each speedup is its machine's own)"]


def _table(record: dict) -> str:
    def cells(values: dict | None) -> str:
        values = values or {}
        return "".join(f"{values[k]:>9.3f}" if values.get(k) is not None else f"{'-':>9}" for k in HEADLINE)

    family, rl = record.get("family") or {}, record.get("rl") or {}
    baseline = record.get("corpus_average") or {}
    after = record.get("after") or {}
    lines = [
        f"learning run ({record.get('backend')}, {record.get('scale')}): {(record.get('sft') or {}).get('parameters', 0) / 1e6:.1f}M "
        f"parameters, {family.get('train', '?')} training "
        + (f"(SFT) + {family['rl_only']} RL-only " if family.get("rl_only") else "")
        + f"/ {family.get('heldout', '?')} held-out tasks, "
        f"{rl.get('steps', '?')} RL steps, {record.get('wall_s')} s over {max(1, len(record.get('launches') or []))} "
        f"launch(es), the last one's budget {record.get('budget_s'):.0f} s"
        + (f" (PARTIAL: {record['partial']})" if record.get("partial") else ""),
        f"{'held-out':28s}{'correct':>9}{'speedup':>9}{'fast_1':>9}",
        f"{'corpus average variant':28s}{cells(baseline)}   ({baseline.get('variants', 0)} variants)",
        f"{'SFT start (step 0)':28s}{cells(record.get('before'))}",
        f"{'after RL (step ' + str(after.get('step', '-')) + ')':28s}{cells(after)}",
        *_machines_line(record),
        _sft_line(record.get("sft") or {}),
        *(
            ["held-out steps against the start, pair by pair (bench/heldout_paired.py):"]
            + heldout_paired.render(record["paired"]).splitlines()
            if record.get("paired")
            else []
        ),
        *(
            [f"against step {record['paired_resumed'][0]['base']} evaluated again on this launch's machine:"]
            + heldout_paired.render(record["paired_resumed"]).splitlines()
            if record.get("paired_resumed")
            else []
        ),
        "phases (s): " + ", ".join(f"{k} {v:.0f}" for k, v in (record.get("phases_s") or {}).items()),
    ]
    if record.get("carries"):
        lines.append(
            "carried to a new machine at " + ", ".join(record["carries"])
            + " (bf16 weights, AdamW moments from zero: bench/learning_carry.py)"
        )
    return "\n".join(lines)
