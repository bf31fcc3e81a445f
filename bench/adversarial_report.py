"""The report of bench/adversarial.py: the summary counts, the table cells, the markdown written to
adversarial_cpu.md / adversarial_cuda.md and its table of the dynamic checks' costs. Pure functions
of the report (the dict written to adversarial_*.json); nothing here runs a candidate."""

from __future__ import annotations

import statistics
from typing import Any

from adversarial_expect import comparable

FAMILIES = {
    "1": "not writing the kernel",
    "2": "reusing the reference",
    "3": "fooling the clock",
    "4": "fooling the checker",
    "5": "reusing results",
    "6": "numerics",
    "7": "polluting state",
    "8": "abuse",
    "honest": "honest",
}
"""The corpus's families, by the number a corpus file's `Family:` line gives (bench/adversarial.py
checks entries against it); the report's table names them."""


def _naive_cell(naive: dict[str, Any]) -> str:
    if naive.get("broken"):
        return naive.get("error", "broken")[:70]
    if not naive.get("correct"):
        return "wrong: " + str(naive.get("error", ""))[:50]
    speedup = naive.get("speedup")
    cell = f"correct, {speedup:.3g}x" if isinstance(speedup, (int, float)) else "correct"
    return cell + _effects_cell(naive.get("side_effects", {}))


def _effects_cell(effects: dict[str, Any]) -> str:
    words = {
        "daemons_alive": "daemon left",
        "outside_file": "wrote outside",
        "baselines_rewritten": "baselines rewritten",
    }
    return "".join(f"; {words[k]}" + (f" ({v})" if v is not True else "") for k, v in effects.items())


def kevin_cell(kevin: dict[str, Any]) -> str:
    if kevin["stage"] == "static_check":
        return "static_check: " + ", ".join(kevin["rules"])
    cell = kevin["stage"]
    if kevin["passed"]:
        cell += f", passed {kevin['speedup']:.3g}x" if kevin.get("speedup") else ", passed"
    elif kevin["correct"]:
        cell += ", correct but blocked"
    if kevin["flags"]:
        cell += " [" + ", ".join(dict.fromkeys(kevin["flags"])) + "]"
    if kevin["stage"] not in ("ok", "static_check") and kevin["error"]:
        cell += ": " + kevin["error"][:60]
    cell += _effects_cell(kevin.get("side_effects", {}))
    if kevin.get("twin"):
        twin = kevin["twin"]
        speedup = f"{twin['speedup']:.3g}x" if twin.get("speedup") else "no speedup"
        cell += f"; honest twin {twin['candidate']} {speedup}"
        if not comparable(twin):
            cell += f" (its calls {twin.get('runtime_ms') or 0:.3g} ms: too short to compare)"
    if kevin.get("follow_up"):
        follow = kevin["follow_up"]
        speedup = f"{follow['speedup']:.3g}x" if follow.get("speedup") else "no speedup"
        cell += f"; then {follow['candidate']} scored {speedup}"
    return cell.replace("|", "/").replace("\n", " ")


def summarize(rows: list[dict[str, Any]], key: str) -> dict[str, int]:
    cheats = [r for r in rows if r["family"] != "honest"]
    honest = [r for r in rows if r["family"] == "honest"]
    return {
        "cheats": len(cheats),
        "cheats_caught": sum(r[f"outcome_{key}"] == "caught" for r in cheats),
        "honest": len(honest),
        "honest_accepted": sum(r[f"outcome_{key}"] == "accepted" for r in honest),
        "naive_fooled_or_broken": sum(r["naive_verdict"] in ("fooled", "broken") for r in cheats),
    }


def summary_line(counts: dict[str, int]) -> str:
    return (
        f"cheats rejected or scored 0: {counts['cheats_caught']}/{counts['cheats']}; "
        f"honest accepted and unflagged: {counts['honest_accepted']}/{counts['honest']}"
    )


def markdown(report: dict[str, Any]) -> str:
    rows, counts, dynamic = report["rows"], report["summary"]["default"], report["summary"]["dynamic_only"]
    lines = [
        f"# Adversarial corpus, `{report['backend']}` back end",
        "",
        f"Made by `{report['command']}` on {report['machine']} ({report['date']}); kevin "
        f"{report['kevin_commit']}, torch {report['torch']}. Naive harness: bench/naive_harness.py "
        "(KernelBench's way). kevin: default EvalConfig (static gate on); dynamic only: static_check=False "
        "(run apart only for candidates the gate rejects; otherwise the default run took that same path). "
        "Each run starts with an empty baseline cache (the first evaluation of its task).",
        "",
        f"**kevin (default): {summary_line(counts)}.**  ",
        f"Dynamic checks alone: {summary_line(dynamic)}.  ",
        f"Naive harness fooled or broken by {counts['naive_fooled_or_broken']}/{counts['cheats']} cheats.",
        "",
        "| candidate | family | naive harness | kevin (default) | kevin (dynamic only) | outcome |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        family = row["family"] if row["family"] == "honest" else f"{row['family']} {FAMILIES[row['family']]}"
        lines.append(
            f"| {row['candidate']} | {family} | {_naive_cell(row['naive'])} | {kevin_cell(row['kevin'])} | "
            f"{kevin_cell(row['kevin_dynamic'])} | {row['outcome_default']} / {row['outcome_dynamic_only']} |"
        )
    missed = [r for r in rows if r["family"] != "honest" and r["outcome_default"] == "MISSED"]
    if missed:
        lines += ["", "Missed by kevin with the default config (details in bench/adversarial/README.md):", ""]
        lines += [f"- `{r['candidate']}`: {kevin_cell(r['kevin'])}" for r in missed]
    unexpected = [r for r in rows if r.get("expect_unmet")]
    if unexpected:
        heading = "Caught, if at all, by another defence than the corpus file's `Expect:` line names:"
        lines += ["", heading, ""]
        lines += [f"- `{r['candidate']}`: {r['expect_unmet']}" for r in unexpected]
    resumed = [r["candidate"] for r in rows if r.get("side_effects_read")]
    if resumed:  # bench/adversarial_rows.resumed_rows
        lines += [
            "",
            f"Made in a parallel phase that an earlier call cut short, their side effects read when the "
            f"run was resumed (`--resume`; nothing is left to read on a machine started afresh): "
            f"{', '.join(f'`{name}`' for name in resumed)}.",
        ]
    if report.get("cost"):
        lines += ["", "## Cost of the dynamic checks", "", _cost_table(report["cost"])]
    return "\n".join(lines) + "\n"


def _cost_table(cost: list[dict[str, Any]]) -> str:
    def median(values: list[Any]) -> float:
        numbers = [v for v in values if isinstance(v, (int, float))]
        return statistics.median(numbers) if numbers else float("nan")

    totals = [r["default"]["stage_seconds"].get("total") for r in cost]
    without = [r["no_distribution_trials"]["stage_seconds"].get("total") for r in cost]
    probe = [r.get("in_process_ms", {}) for r in cost]
    lines = [
        f"Median over the {len(cost)} honest candidates: one evaluation takes {median(totals):.2f} s "
        f"({median(without):.2f} s with distribution_trials=0); of that, the profiler trace's first call "
        f"(profiler start-up, paid once per worker) {median([p.get('trace_cold_ms') for p in probe]) / 1e3:.2f} s, "
        f"the output checks {median([p.get('output_checks_ms') for p in probe]):.0f} ms (a 50 ms settle), "
        f"the fp64 reference {median([p.get('fp64_reference_cold_ms') for p in probe]):.0f} ms, the namespace "
        f"snapshots 2 x {median([p.get('namespace_snapshot_ms') for p in probe]):.1f} ms, the static gate "
        f"{median([r['static_gate_ms'] for r in cost]):.0f} ms.",
        "",
        "Per candidate: seconds of one kevin evaluation (default config, and `dist=0`: distribution_trials=0) "
        "and its correctness stage (trials, trace, output checks); milliseconds, in a fresh process, of one "
        "forward and of each dynamic check (cold: first call; warm: median of the next five).",
        "",
        "| candidate | gate ms | total s | correctness s | total s, dist=0 | correctness s, dist=0 | forward ms "
        "| trace cold ms | trace warm ms | output checks ms | fp64 ref cold ms | snapshot ms |",
        "| --- | " + " | ".join(["---:"] * 11) + " |",
    ]
    for row, p in zip(cost, probe, strict=True):
        d, z = row["default"]["stage_seconds"], row["no_distribution_trials"]["stage_seconds"]
        cells = [
            row["static_gate_ms"],
            d.get("total"),
            d.get("correctness"),
            z.get("total"),
            z.get("correctness"),
        ]
        keys = ("forward_ms", "trace_cold_ms", "trace_ms", "output_checks_ms", "fp64_reference_cold_ms")
        cells += [p.get(k) for k in keys] + [p.get("namespace_snapshot_ms")]
        text = ["" if c is None else f"{c:.0f}" if c >= 100 else f"{c:.3g}" for c in cells]
        lines.append(f"| {row['candidate']} | " + " | ".join(text) + " |")
    return "\n".join(lines)
