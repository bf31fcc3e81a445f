"""The numbers and the report of bench/eval_throughput.py: summaries of each harness's rows,
the verdict table and its agreement, the merge with a full `plain` pass, the markdown and the
one-line summary, and for a pass run with `--hangs` its hang candidates and the rates with and
without them (`hang_summary`, `hang_comparison`). Pure functions of the pass reports (JSON), so
`--report-only` can rebuild eval_throughput.md from committed files without a GPU."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CANDIDATES = Path(__file__).resolve().parent / "candidates" / "throughput"
GPU_STAGES = ("inputs", "correctness", "timing", "reference", "baseline")
"""kevin worker stages run while it holds the device (kevin.evaluator.devlock): shared or exclusively."""
EXCLUSIVE_STAGES = ("timing", "baseline")
"""The stages that hold it exclusively (nothing else runs on the GPU meanwhile)."""
HANG = "hang"
"""The manifest kind of a candidate whose first call never returns (expected verdict: timeout)."""
HANG_BUDGET = 0.10
"""Issue #15: with ~5% hangs in the mix the rate may drop by no more than this."""


def load_manifest(path: Path = CANDIDATES / "manifest.json", hangs: bool = False) -> list[dict[str, Any]]:
    """The candidates in manifest order; the hang kind only with `hangs` (--hangs), so that the
    default batch stays the one every earlier pass measured."""
    rows = [row for row in json.loads(path.read_text()) if hangs or row["kind"] != HANG]
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


def _per_hour(count: int, wall_s: float) -> float | None:
    return round(count / wall_s * 3600, 1) if wall_s > 0 and count else None


def hang_summary(
    kevin_rows: list[dict[str, Any]], hang_ids: list[str], wall_s: float, plain_skipped: list[str]
) -> dict[str, Any]:
    """The hang candidates of a kevin pass run with --hangs, and the pass's rates with and without
    them. Per hang: verdict, stage, blame, the worker's total seconds and the seconds it held the
    device (GPU_STAGES of stage_seconds: for a hang, mostly the `correctness` call kevin's per-call
    deadline cut). Rates, all over the pass's one wall (first submission to last result):
    `per_hour_all` every finished candidate, hangs included (the summary's candidates_per_hour);
    `per_hour_others` the finished non-hang candidates only; `per_hour_others_without_estimate` the
    non-hang candidates over the wall less the hangs' device-held seconds: what the pass would have
    made without them if it is bound by the device lock (a hang holds it shared, so no timing
    starts meanwhile) and no two hangs held it at once; `estimated_drop` compares per_hour_all with
    it. The measured drop needs a pass without hangs beside it (`hang_comparison`)."""
    by_id = {r["id"]: r for r in kevin_rows}
    hangs = []
    for hang_id in hang_ids:
        row = by_id.get(hang_id, {})
        seconds = row.get("stage_seconds") or {}
        hangs.append(
            {
                "id": hang_id,
                "verdict": row.get("verdict", "not_run"),
                "stage": row.get("stage"),
                "blame": row.get("blame"),
                "error": (row.get("error") or "")[:300],
                "total_s": seconds.get("total"),
                "gpu_held_s": round(kevin_gpu_s(row), 2),
                "stage_seconds": seconds,
            }
        )
    done = [r for r in kevin_rows if r.get("verdict") not in ("not_run", None)]
    others = [r for r in done if r["id"] not in hang_ids]
    finished = [h for h in hangs if h["verdict"] != "not_run"]
    held = sum(h["gpu_held_s"] for h in finished)
    all_rate = _per_hour(len(done), wall_s)
    without = _per_hour(len(others), wall_s - held)
    return {
        "count": len(hang_ids),
        "of": len(kevin_rows),
        "share": round(len(hang_ids) / len(kevin_rows), 3) if kevin_rows else None,
        "finished": len(finished),
        "timeout": sum(1 for h in hangs if h["verdict"] == "timeout"),
        "total_s": round(sum(float(h["total_s"] or 0.0) for h in finished), 1),
        "gpu_held_s": round(held, 1),
        "per_hour_all": all_rate,
        "per_hour_others": _per_hour(len(others), wall_s),
        "per_hour_others_without_estimate": without,
        "estimated_drop": round(1 - all_rate / without, 3) if all_rate and without else None,
        "plain_skipped": list(plain_skipped),
        "candidates": hangs,
    }


def hang_comparison(report: dict[str, Any], peer: dict[str, Any]) -> dict[str, Any]:
    """A pass run with --hangs against the same pass without them (`peer`): the measured drop of
    candidates/hour, of the whole batch (hangs counted: each is a candidate with a verdict; the
    criterion, at most HANG_BUDGET) and of the non-hang candidates alone. `comparable` is False
    when the two passes differ in --jobs, timing budget or non-hang candidates."""
    without = peer["kevin"]["summary"]["candidates_per_hour"]
    with_all = report["kevin"]["summary"]["candidates_per_hour"]
    others = report["hangs"]["per_hour_others"]
    hang_ids = {h["id"] for h in report["hangs"]["candidates"]}
    differ = [
        key for key in ("jobs", "timing_budget_ms") if report["config"].get(key) != peer["config"].get(key)
    ]
    if {r["id"] for r in report["verdicts"] if r["id"] not in hang_ids} != {
        r["id"] for r in peer["verdicts"]
    }:
        differ.append("candidates")

    def drop(rate: float | None) -> float | None:
        return round(1 - rate / without, 3) if rate and without else None

    return {
        "pass": peer["pass"],
        "per_hour_without_hangs": without,
        "per_hour_all": with_all,
        "per_hour_others": others,
        "drop": drop(with_all),
        "drop_others": drop(others),
        "within_budget": drop(with_all) <= HANG_BUDGET if drop(with_all) is not None else None,
        "comparable": not differ,
        "differ": differ,
    }


def hang_peer(report: dict[str, Any], reports: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The pass of the same name without hangs among `reports`, if any."""
    if not report.get("hangs"):
        return None
    return next((r for r in reports if r["pass"] == report["pass"] and not r.get("hangs")), None)


def hang_comparisons(reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every pass run with --hangs: its hang summary and, where its peer is there, the comparison
    (eval_throughput_hangs.json)."""
    found = []
    for report in reports:
        if report.get("hangs"):
            peer = hang_peer(report, reports)
            found.append(
                {
                    "pass": report["pass"],
                    "hangs": report["hangs"],
                    "comparison": hang_comparison(report, peer) if peer is not None else None,
                }
            )
    return found


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
                "note": row.get("note", ""),
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
    merged = []
    for report in reports:
        if report["pass"] == "plain":
            merged.append(report)
            continue
        own = (report.get("plain") or {}).get("rows", [])
        seen = {r["id"] for r in own}
        rows = own + [r for r in full["plain"]["rows"] if r["id"] not in seen]
        manifest = load_manifest(hangs=bool(report.get("hangs")))
        report = dict(report, verdicts=verdict_table(manifest, rows, report["kevin"]["rows"]))
        report["agreement"] = dict(agreement(report["verdicts"]), with_plain_pass=True)
        merged.append(report)
    return merged


def markdown(reports: list[dict[str, Any]], notes: str = "") -> str:
    lines = ["# Evaluation throughput: plain load_inline harness vs kevin's service", ""]
    if notes:
        lines += [notes, ""]
    for report in with_full_plain(reports):
        lines += _pass_section(report, hang_peer(report, reports))
    return "\n".join(lines)


def _pass_section(report: dict[str, Any], peer: dict[str, Any] | None = None) -> list[str]:
    """One pass of the report: its harness table, its hang candidates (with --hangs; `peer` is the
    same pass without them), GPU use, verdict agreement and verdict table."""
    return (
        _harness_table(report)
        + _hang_lines(report, peer)
        + _gpu_lines(report)
        + _agreement_lines(report)
        + _candidate_table(report)
        + [""]
    )


def _harness_table(report: dict[str, Any]) -> list[str]:
    """The pass's heading and one table row per harness: (a), kevin's cold and cached builds, (b)."""
    env, a, b = report["environment"], report.get("plain"), report["kevin"]
    hangs = report.get("hangs")
    mix = f" with {hangs['count']} hang candidates in the mix" if hangs else ""
    lines = [
        f"## Pass `{report['pass']}`{mix} ({env.get('gpu') or 'no GPU'}, {env.get('cores')} cores, torch {env.get('torch')})",
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


def _change(drop: float | None) -> str:
    """A drop (0.05: 5% fewer candidates/hour) as the signed change of the rate ("-5.0%")."""
    return "-" if drop is None else f"{-drop * 100:+.1f}%"


def _hang_lines(report: dict[str, Any], peer: dict[str, Any] | None) -> list[str]:
    """A --hangs pass: what each hang candidate got and held, and the rates with and without them."""
    hangs = report.get("hangs")
    if not hangs:
        return []
    lines = [
        "",
        f"Hang candidates (`--hangs`): {hangs['count']} of {hangs['of']} ({_fmt(hangs['share'] * 100, 2)}%) in "
        "kevin's pass, spread through its order. Harness (a) never runs them: it has no per-call deadline, "
        "and one hang would stall it until the device call's limit"
        + (f" (skipped: {', '.join(hangs['plain_skipped'])})" if hangs["plain_skipped"] else "")
        + ".",
        "",
        "| hang candidate | what never returns | expected | (b) kevin | stage / blame | total s | device-held s | correctness s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    verdicts = {r["id"]: r for r in report["verdicts"]}
    for hang in hangs["candidates"]:
        row = verdicts.get(hang["id"], {})
        lines.append(
            f"| {hang['id']} | {_fmt(row.get('note'))} | {_fmt(row.get('expected'))} | {hang['verdict']} | "
            f"{_fmt(hang['stage'])} / {_fmt(hang['blame'])} | {_fmt(hang['total_s'])} | {_fmt(hang['gpu_held_s'])} | "
            f"{_fmt((hang['stage_seconds'] or {}).get('correctness'))} |"
        )
    lines += [
        "",
        f"Together: {hangs['timeout']}/{hangs['count']} timeout, {hangs['total_s']} s of worker time, "
        f"{hangs['gpu_held_s']} s holding the device (shared: no timing starts meanwhile). "
        f"Candidates/hour over the one wall: {_fmt(hangs['per_hour_all'], 4)} for the whole batch, "
        f"{_fmt(hangs['per_hour_others'], 4)} for the non-hang candidates alone.",
        "",
        f"One-run estimate without the hangs (the non-hang candidates over the wall less the hangs' "
        f"device-held seconds; exact if the pass is bound by the device lock and no two hangs held it at once): "
        f"{_fmt(hangs['per_hour_others_without_estimate'], 4)}/hour, so the whole batch's rate changes by "
        f"{_change(hangs['estimated_drop'])}.",
    ]
    if peer is None:
        lines += [
            "",
            f"Measured change: no pass `{report['pass']}` without hangs in this report; run one (the same flags "
            "without --hangs, on the same machine) into this folder and rerun --report-only.",
        ]
        return lines
    compared = hang_comparison(report, peer)
    verdict = {True: "within", False: "**beyond**", None: "-"}[compared["within_budget"]]
    lines += [
        "",
        f"Measured against pass `{peer['pass']}` without hangs ({_fmt(compared['per_hour_without_hangs'], 4)}/hour): "
        f"the whole batch's rate {_change(compared['drop'])}, the non-hang candidates' {_change(compared['drop_others'])}; "
        f"{verdict} issue #15's budget (a drop of at most {HANG_BUDGET:.0%} of the whole batch's rate)"
        + (
            ""
            if compared["comparable"]
            else f"; not like for like: they differ in {', '.join(compared['differ'])}"
        )
        + ".",
    ]
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


def summary_text(report: dict[str, Any], peer: dict[str, Any] | None = None) -> str:
    """The pass in one line; `peer`: the same pass without hangs, for a --hangs pass's measured change."""
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
    hangs = report.get("hangs")
    if hangs:
        parts.append(
            f"hangs {hangs['timeout']}/{hangs['count']} timeout, {hangs['gpu_held_s']} s device-held, "
            f"non-hang {_fmt(hangs['per_hour_others'], 4)}/hour, estimated change {_change(hangs['estimated_drop'])}"
        )
        if peer is not None:
            compared = hang_comparison(report, peer)
            parts.append(
                f"measured change vs `{peer['pass']}` without hangs ({_fmt(compared['per_hour_without_hangs'], 4)}/hour): "
                f"{_change(compared['drop'])} whole batch, {_change(compared['drop_others'])} non-hang"
            )
    return "; ".join(parts)
