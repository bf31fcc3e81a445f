"""The numbers and the report of bench/eval_throughput.py: summaries of each harness's rows,
the verdict table and its agreement, the merge with a full `plain` pass, the markdown and the
one-line summary. Pure functions of the pass reports (JSON), so `--report-only` can rebuild
eval_throughput.md from committed files without a GPU."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CANDIDATES = Path(__file__).resolve().parent / "candidates" / "throughput"
GPU_STAGES = ("inputs", "correctness", "timing", "reference", "baseline")
"""kevin worker stages run while it holds the device (kevin.evaluator.devlock): shared or exclusively."""
EXCLUSIVE_STAGES = ("timing", "baseline")
"""The stages that hold it exclusively (nothing else runs on the GPU meanwhile)."""


def load_manifest(path: Path = CANDIDATES / "manifest.json") -> list[dict[str, Any]]:
    rows = json.loads(path.read_text())
    for row in rows:
        row["path"] = str(path.parent / row["candidate"])
    return rows


def percentile(values: list[float], q: float) -> float | None:
    """Linear interpolation between closest ranks; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def spread(values: list[float]) -> dict[str, Any]:
    rounded = {f"p{q}": percentile(values, q) for q in (50, 90)}
    return {
        "n": len(values),
        **{k: round(v, 2) if v is not None else None for k, v in rounded.items()},
        "max": round(max(values), 2) if values else None,
    }


def kevin_build_s(row: dict[str, Any]) -> float | None:
    seconds = row.get("stage_seconds") or {}
    value = seconds.get("build", seconds.get("compile"))
    return float(value) if value is not None else None


def kevin_gpu_s(row: dict[str, Any], stages: tuple[str, ...] = GPU_STAGES) -> float:
    return sum(float(v) for k, v in (row.get("stage_seconds") or {}).items() if k in stages)


def summarize_kevin(rows: list[dict[str, Any]], wall_s: float) -> dict[str, Any]:
    done = [r for r in rows if r.get("verdict") not in ("not_run", None)]
    cold = [
        b
        for r in done
        if not (r.get("timing") or {}).get("build_cache_hit") and (b := kevin_build_s(r)) is not None
    ]
    hits = [
        b
        for r in done
        if (r.get("timing") or {}).get("build_cache_hit") and (b := kevin_build_s(r)) is not None
    ]
    return {
        "finished": len(done),
        "of": len(rows),
        "wall_s": round(wall_s, 1),
        "candidates_per_hour": round(len(done) / wall_s * 3600, 1) if wall_s > 0 and done else None,
        "verdicts": _count(r["verdict"] for r in done),
        "build_s_cold": spread(cold),
        "build_s_cached": spread(hits),
        "gpu_held_s": round(sum(kevin_gpu_s(r) for r in done), 1),
        "gpu_exclusive_s": round(sum(kevin_gpu_s(r, EXCLUSIVE_STAGES) for r in done), 1),
        "gpu_stage_mean_s": gpu_stage_means(done),
    }


def gpu_stage_means(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean seconds per candidate that reached the GPU, for each worker stage on it. `correctness`
    is where the dynamic checks run (trials on the problem's inputs and other distributions, the
    kernel trace, output and state checks); `timing` is the candidate's clock."""
    ran = [r["stage_seconds"] for r in rows if "inputs" in (r.get("stage_seconds") or {})]
    means: dict[str, Any] = {"candidates": len(ran)}
    for stage in GPU_STAGES:
        means[stage] = round(sum(s.get(stage, 0.0) for s in ran) / len(ran), 3) if ran else None
    return means


def summarize_plain(rows: list[dict[str, Any]], wall_s: float) -> dict[str, Any]:
    builds = [float(r["build_s"]) for r in rows if r.get("build_s") is not None]
    return {
        "finished": len(rows),
        "wall_s": round(wall_s, 1),
        "candidates_per_hour": round(len(rows) / wall_s * 3600, 1) if wall_s > 0 and rows else None,
        "verdicts": _count(r["verdict"] for r in rows),
        "build_s": spread(builds),
        "gpu_held_s": round(sum(float(r.get("gpu_s") or 0.0) for r in rows), 1),
    }


def _count(values: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return dict(sorted(counts.items()))


def verdict_table(manifest: list[dict], plain: list[dict], kevin: list[dict]) -> list[dict[str, Any]]:
    """One row per candidate: expected, (a), (b), and whether they agree where both finished."""
    by_plain = {r["id"]: r for r in plain}
    by_kevin = {r["id"]: r for r in kevin}
    table = []
    for row in manifest:
        a = by_plain.get(row["id"], {}).get("verdict")
        b = by_kevin.get(row["id"], {}).get("verdict")
        b = None if b == "not_run" else b
        table.append(
            {
                "id": row["id"],
                "kind": row["kind"],
                "expected": row["expected"],
                "plain": a,
                "kevin": b,
                "agree": (a == b) if a is not None and b is not None else None,
                "kevin_as_expected": (b == row["expected"]) if b is not None else None,
                "kevin_speedup": by_kevin.get(row["id"], {}).get("speedup"),
                "plain_speedup": by_plain.get(row["id"], {}).get("speedup"),
                "plain_kernelbench": by_plain.get(row["id"], {}).get("kernelbench_verdict"),
            }
        )
    return table


def agreement(table: list[dict[str, Any]]) -> dict[str, Any]:
    both = [r for r in table if r["agree"] is not None]
    judged = [r for r in table if r["kevin_as_expected"] is not None]
    return {
        "both_finished": len(both),
        "agree": sum(1 for r in both if r["agree"]),
        "disagree": [r["id"] for r in both if not r["agree"]],
        "kevin_as_expected": sum(1 for r in judged if r["kevin_as_expected"]),
        "kevin_judged": len(judged),
        "kevin_unexpected": [
            f"{r['id']} ({r['expected']} -> {r['kevin']})" for r in judged if not r["kevin_as_expected"]
        ],
        "kernelbench_tolerance_fooled": [
            r["id"] for r in table if r.get("plain_kernelbench") == "correct" and r["expected"] == "wrong"
        ],
    }


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def with_full_plain(reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """When a `plain` pass (harness (a) alone, over the whole batch) is among the reports, compare
    every kevin pass with it too: (a)'s verdict for a candidate comes from the pass's own (a) run
    when it has one, else from the plain pass."""
    full = next((r for r in reports if r["pass"] == "plain"), None)
    if full is None:
        return reports
    manifest = load_manifest()
    merged = []
    for report in reports:
        if report["pass"] == "plain":
            merged.append(report)
            continue
        own = (report.get("plain") or {}).get("rows", [])
        seen = {r["id"] for r in own}
        rows = own + [r for r in full["plain"]["rows"] if r["id"] not in seen]
        report = dict(report, verdicts=verdict_table(manifest, rows, report["kevin"]["rows"]))
        report["agreement"] = dict(agreement(report["verdicts"]), with_plain_pass=True)
        merged.append(report)
    return merged


def markdown(reports: list[dict[str, Any]], notes: str = "") -> str:
    lines = ["# Evaluation throughput: plain load_inline harness vs kevin's service", ""]
    if notes:
        lines += [notes, ""]
    for report in with_full_plain(reports):
        lines += _pass_section(report)
    return "\n".join(lines)


def _pass_section(report: dict[str, Any]) -> list[str]:
    """One pass of the report: its harness table, GPU use, verdict agreement and verdict table."""
    return (
        _harness_table(report)
        + _gpu_lines(report)
        + _agreement_lines(report)
        + _candidate_table(report)
        + [""]
    )


def _harness_table(report: dict[str, Any]) -> list[str]:
    """The pass's heading and one table row per harness: (a), kevin's cold and cached builds, (b)."""
    env, a, b = report["environment"], report.get("plain"), report["kevin"]
    lines = [
        f"## Pass `{report['pass']}` ({env.get('gpu') or 'no GPU'}, {env.get('cores')} cores, torch {env.get('torch')})",
        "",
        f"Command: `{report['command']}`",
        "",
        "| harness | finished | wall s | candidates/hour | build s p50 / p90 / max | GPU held s | verdicts |",
        "|---|---|---|---|---|---|---|",
    ]
    if a is not None:
        s = a["summary"]
        bs = s["build_s"]
        a_jobs = report["config"].get("a_jobs", 1)
        mode = "sequential" if a_jobs == 1 else f"{a_jobs} at a time"
        lines.append(
            f"| (a) plain load_inline, {mode} | {s['finished']} | {s['wall_s']} | "
            f"{_fmt(s['candidates_per_hour'], 4)} | {_fmt(bs['p50'])} / {_fmt(bs['p90'])} / {_fmt(bs['max'])} | "
            f"{s['gpu_held_s']} | {s['verdicts']} |"
        )
    s = b["summary"]
    for label, key in (("cold", "build_s_cold"), ("cache hit", "build_s_cached")):
        bs = s[key]
        if bs["n"]:
            lines.append(
                f"| (b) kevin, {label} builds ({bs['n']}) | | | | {_fmt(bs['p50'])} / {_fmt(bs['p90'])} / "
                f"{_fmt(bs['max'])} | | |"
            )
    if report["pass"] != "plain":
        lines.append(
            f"| (b) kevin service, --jobs {report['config']['jobs']} | {s['finished']}/{s['of']} | "
            f"{s['wall_s']} | {_fmt(s['candidates_per_hour'], 4)} | | {s['gpu_held_s']} "
            f"({s.get('gpu_exclusive_s')} exclusive) | {s['verdicts']} |"
        )
    return lines


def _gpu_lines(report: dict[str, Any]) -> list[str]:
    """kevin's mean seconds per GPU stage (when any candidate reached the GPU) and the busy share."""
    lines = []
    # From the rows, so that pass files written before the summary had gpu_stage_mean_s work too.
    stages = gpu_stage_means(report["kevin"]["rows"])
    if stages.get("candidates"):
        lines += [
            "",
            f"kevin's stages on the GPU, mean s per candidate that reached it ({stages['candidates']}): "
            + ", ".join(f"{k} {_fmt(stages[k])}" for k in GPU_STAGES)
            + ". The dynamic checks run in `correctness`; `timing` is the candidate's own clock.",
        ]
    gpu = report["gpu"]
    lines += [
        "",
        f"GPU busy share over the pass ({gpu.get('source') or 'no sampler'}, {gpu.get('samples')} samples): "
        f"{_fmt(gpu.get('busy_share'))} of samples non-zero, mean utilization {_fmt(gpu.get('mean_utilization_pct'))}%.",
        "",
    ]
    return lines


def _agreement_lines(report: dict[str, Any]) -> list[str]:
    """What the `plain` pass is for (on it), how far (a) and (b) agree, and what KernelBench's
    tolerance would let through."""
    lines = []
    agree = report["agreement"]
    if report["pass"] == "plain":
        lines += [
            f"Harness (a) alone, {report['config'].get('a_jobs', 1)} candidates at once (builds overlap; "
            "GPU work one at a time under kevin's device lock): the verdicts the kevin passes are compared with.",
            "",
        ]
    lines += [
        ("Verdicts, (a) including the `plain` pass: " if agree.get("with_plain_pass") else "Verdicts: ")
        + f"(a) and (b) agree on {agree['agree']}/{agree['both_finished']} candidates both finished"
        + (f"; disagree on {', '.join(agree['disagree'])}" if agree["disagree"] else "")
        + f". kevin matches the expected verdict on {agree['kevin_as_expected']}/{agree['kevin_judged']}"
        + (f"; not on {', '.join(agree['kevin_unexpected'])}" if agree["kevin_unexpected"] else "")
        + ".",
        "",
    ]
    fooled = agree.get("kernelbench_tolerance_fooled")
    if fooled:
        lines += [
            f'At KernelBench\'s tolerance (1e-2, column "(a) at 1e-2") (a) would pass {len(fooled)} wrong '
            f"candidate(s): {', '.join(fooled)}. The verdicts compared are (a)'s at kevin's tolerance.",
            "",
        ]
    return lines


def _candidate_table(report: dict[str, Any]) -> list[str]:
    """One row per candidate: expected verdict, (a)'s, (b)'s, whether they agree, speedups."""
    lines = [
        "| candidate | kind | expected | (a) plain | (a) at 1e-2 | (b) kevin | agree | (a) speedup | (b) speedup |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in report["verdicts"]:
        agree_mark = {True: "yes", False: "**no**", None: "-"}[row["agree"]]
        lines.append(
            f"| {row['id']} | {row['kind']} | {row['expected']} | {_fmt(row['plain'])} | "
            f"{_fmt(row.get('plain_kernelbench'))} | {_fmt(row['kevin'])} | "
            f"{agree_mark} | {_fmt(row['plain_speedup'])} | {_fmt(row['kevin_speedup'])} |"
        )
    return lines


def summary_text(report: dict[str, Any]) -> str:
    b = report["kevin"]["summary"]
    parts = [
        f"pass {report['pass']}: kevin {b['finished']}/{b['of']} in {b['wall_s']} s = "
        f"{_fmt(b['candidates_per_hour'], 4)} candidates/hour (cold build p50 {_fmt(b['build_s_cold']['p50'])} s, "
        f"cache-hit build p50 {_fmt(b['build_s_cached']['p50'])} s)"
    ]
    if report.get("plain") is not None:
        a = report["plain"]["summary"]
        parts.append(
            f"plain {a['finished']} in {a['wall_s']} s = {_fmt(a['candidates_per_hour'], 4)} candidates/hour "
            f"(build p50 {_fmt(a['build_s']['p50'])} s)"
        )
    agree = report["agreement"]
    parts.append(
        f"verdicts agree {agree['agree']}/{agree['both_finished']}, kevin as expected "
        f"{agree['kevin_as_expected']}/{agree['kevin_judged']}"
    )
    gpu = report["gpu"]
    parts.append(
        f"GPU busy share {_fmt(gpu.get('busy_share'))} (mean util {_fmt(gpu.get('mean_utilization_pct'))}%)"
    )
    return "; ".join(parts)
