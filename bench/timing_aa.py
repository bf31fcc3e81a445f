"""A/A timing steadiness (issue #15 item 2): the same honest kernel evaluated many times in one busy batch.

Issue #15 found the same 0.13 ms fused-GELU kernel at speedups 6.84-8.93 (CV 8.7%) over 8 copies in
one `--jobs 16` batch; the target is speedup CV <= 1.5% and spread <= 3% for kernels >= 0.05 ms in
a 16-job batch with builds running. Measured through kevin.evaluator.service.EvaluationService.

The A/A set: bundled tasks (kevin/tasks/bundled/, `--size`, large on cuda) with their bundled honest
candidates, each evaluated `--copies` times (default 8); copies are submitted round-robin over the
kernels, so each kernel's copies spread over the whole pass. Kernels (`--kernels`, H200 times of
the cuda candidates at the large size, from kevin/tasks/bundled/README.md): 01 fused GELU
(0.14 ms, the issue's own kernel: elementwise, 256 MiB in and out), 02 row sum (0.25 ms, a
reduction; its speedup is near 1, where a few percent decide a win), 04 LayerNorm (0.29 ms, a
row-wise two-pass normalisation with weights) and 11 cumsum (0.31 ms, a scan): four shapes of
memory-bound work between 0.05 and 0.5 ms, where a fixed host or launch delay weighs most.

Passes (`--passes`, default busy):
  busy   the copies interleaved with `--background` (default 24) candidates of
         bench/candidates/throughput/ (the first N in eval_throughput's kind-alternating order:
         correct, compile error, wrong, slow; problems from --kernelbench as there), spread evenly
         through the submission order, so cold builds and other workers' correctness runs go on
         while the copies are timed. On `--backend cpp` the background is the bundled cpp
         candidates of the other bundled tasks instead (the throughput set is CUDA: the cpp gate
         rejects it before any build).
  quiet  the copies alone: the same statistics without the load, the cause beside the effect.
Each pass starts from empty build and baseline caches under --cache-dir (eval_throughput's
prepare_cache), so its builds are cold and its baselines are timed within the pass.

No reuse between copies: the service neither deduplicates nor caches verdicts (every submit is a
fresh worker with a fresh secret seed, times the candidate afresh). Copies after the first take
the build from the build cache (as in training). The baseline cache is on, as in training: within
a pass the first copy to finish caches the task's baseline and the later ones read it unless
their clean overhead disagrees (kevin.evaluator.worker.baseline); `baselines timed` counts the
copies that timed it themselves. `--fresh-baselines` turns the cache off: every copy times its own.

Per kernel and pass (timing_aa.json with every copy's numbers, and timing_aa.md, under --out): n
(timed copies of those submitted), speedup median/min/max, CV = sample stdev / mean, spread =
(max - min) / median, runtime_ms and baseline_ms median/min/max; PASS when CV <= 1.5% and spread
<= 3%, FAIL otherwise or when any copy came back other than correct; n/a under 0.05 ms (median
runtime) or with fewer than 2 timed copies.

Usage on the GPU machine, from a clean tree (git archive of HEAD) with the KernelBench copy .kb
carried beside it (bench/gpu_clean_tree.sh does the unpacking), in one device call:
    PYTHONPATH=. python3 bench/timing_aa.py --out $OUT --passes busy,quiet --kernelbench .kb
On a CPU: `--dry-run` loads every task and candidate and runs the static gate, nothing else;
`--backend cpp` (size small) runs the whole pipeline, whose numbers mean nothing.

What this does not do: it fixes nothing (the fixes are kevin.evaluator.timing and the worker's);
it does not say which of host contention, launch latency or other workers' GPU work moved a copy
(each copy's timing dispersion, build cache hit and stage seconds are in the JSON to start from);
both passes share one --deadline-s, so a busy pass that overruns leaves the quiet one short.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from eval_throughput import (  # noqa: E402
    _stragglers,
    environment,
    first_line,
    interleaved,
    kernelbench_dir,
    prepare_cache,
    run_kevin,
)
from throughput_report import _count, load_manifest  # noqa: E402

from kevin.tasks import bundled_dir, with_size  # noqa: E402

KERNELS = "01,02,04,11"
TARGET_CV = 0.015
TARGET_SPREAD = 0.03
TARGET_MIN_RUNTIME_MS = 0.05
SUBMIT_RESERVE_S = 60.0
"""No submission this close to the deadline (a cold build can take a minute)."""
GRACE_S = 30.0
"""Wait this long past the deadline for evaluations in flight."""


# -- the batch -------------------------------------------------------------------------------------------


def bundled_row(path: Path, backend: str, size: str, scratch: Path) -> dict[str, Any]:
    """A bundled task (written at `size` under `scratch`) and its bundled `backend` candidate."""
    sized = scratch / f"{path.stem}_{size}.py"
    sized.write_text(with_size(path.read_text(), size))
    return {
        "problem": str(sized),  # absolute: run_kevin's `kernelbench / problem` is then the file itself
        "problem_id": f"B_{path.stem.split('_', 1)[0]}",
        "path": str(bundled_dir().parent / backend / path.name),
    }


def task_files(numbers: list[str]) -> list[Path]:
    found = {p.name.split("_", 1)[0]: p for p in sorted(bundled_dir().glob("[0-9]*_*.py"))}
    missing = [n for n in numbers if n not in found]
    if missing:
        raise SystemExit(f"no bundled task numbered {', '.join(missing)}; choose from {', '.join(found)}")
    return [found[n] for n in numbers]


def aa_rows(numbers: list[str], copies: int, backend: str, size: str, scratch: Path) -> list[dict]:
    """Every kernel's copies, round-robin (copy 0 of each kernel, then copy 1, ...)."""
    pairs = [bundled_row(p, backend, size, scratch) for p in task_files(numbers)]
    return [
        dict(pair, id=f"{pair['problem_id']}#{copy}", kernel=pair["problem_id"], copy=copy, kind="aa")
        for copy in range(copies)
        for pair in pairs
    ]


def background_rows(count: int, backend: str, size: str, scratch: Path, numbers: list[str]) -> list[dict]:
    """The load: throughput candidates on cuda (at most the manifest's), the other bundled tasks'
    cpp candidates (cycled) on cpp."""
    if count <= 0:
        return []
    if backend != "cpp":
        return [dict(r, kind=f"background:{r['kind']}") for r in interleaved(load_manifest())[:count]]
    others = [p for p in sorted(bundled_dir().glob("[0-9]*_*.py")) if p.name.split("_", 1)[0] not in numbers]
    pairs = [bundled_row(p, backend, size, scratch) for p in others]
    return [
        dict(pairs[i % len(pairs)], id=f"bg{i}_{pairs[i % len(pairs)]['problem_id']}", kind="background")
        for i in range(count)
    ]


def batch_order(copies: list[dict], background: list[dict]) -> list[dict]:
    """Both lists in their own order, merged by relative position: the background spread evenly
    among the copies, each copy between background candidates."""
    placed = [((i + 0.5) / len(copies), 0, r) for i, r in enumerate(copies)]
    placed += [((i + 0.5) / len(background), 1, r) for i, r in enumerate(background)]
    return [row for *_, row in sorted(placed, key=lambda p: p[:2])]


# -- the statistics -----------------------------------------------------------------------------------------


def low_high(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"median": None, "min": None, "max": None}
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def spread_stats(timed: list[dict[str, Any]]) -> dict[str, Any]:
    """How far timed evaluations of one kernel agree: `n`, speedup median / min / max, CV (sample
    stdev over mean), spread ((max - min) / median), runtime and baseline median / min / max (ms).
    Each record has `speedup`, `runtime_ms` and `baseline_ms`; bench/cpu_timing_seat.py uses it too."""
    speedups = [r["speedup"] for r in timed]
    stats: dict[str, Any] = {"n": len(timed), "speedup": low_high(speedups)}
    several = len(speedups) > 1
    stats["cv"] = statistics.stdev(speedups) / statistics.fmean(speedups) if several else None
    stats["spread"] = (max(speedups) - min(speedups)) / stats["speedup"]["median"] if several else None
    stats["runtime_ms"] = low_high([r["runtime_ms"] for r in timed])
    stats["baseline_ms"] = low_high([r["baseline_ms"] for r in timed])
    return stats


def copy_record(result: dict[str, Any]) -> dict[str, Any]:
    """One copy's numbers from run_kevin's row (an EvalResult dict with `id` and `verdict`)."""
    timing, seconds = result.get("timing") or {}, result.get("stage_seconds") or {}
    return {
        "id": result["id"],
        "verdict": result["verdict"],
        "speedup": result.get("speedup"),
        "runtime_ms": result.get("runtime_ms"),
        "baseline_ms": result.get("baseline_ms"),
        # The worker enters the `baseline` stage only to time the reference itself (not from the cache).
        "baseline_timed": "baseline" in seconds,
        "timing_n": timing.get("n"),
        "dispersion": round(timing["wall_median_ms"] / timing["wall_min_ms"], 3)
        if timing.get("wall_min_ms")
        else None,
        "build_cache_hit": timing.get("build_cache_hit"),
        "seconds": {k: seconds[k] for k in ("wait_gpu", "timing", "baseline", "total") if k in seconds},
        # Alone on the device or shared, and how long it waited for memory after admission (s45: every
        # copy alone sat out a 30 s wait while the booted workers' contexts held half the H100).
        "admission": {
            k: (result.get("checks") or {}).get("device_admission", {}).get(k)
            for k in ("weight", "slots", "memory_wait_s")
        },
        # Each timing attempt's noise (kevin.evaluator.timing.noisy: bracket drift and call spread as
        # shares of the call): more than one entry is a copy timed again (s46).
        "timing_noise": ((result.get("checks") or {}).get("timing_noise") or {}).get("candidate"),
        "error": (result.get("error") or "")[:300],
        # Which check refused a copy that is not `correct` (s24's CI: one flagged copy on 2 busy cores
        # whose report could not say which flag).
        "flags": list(result.get("flags") or []),
    }


def kernel_stats(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The A/A statistics of one kernel's copies, and the verdict against the target."""
    timed = [r for r in records if r["verdict"] == "correct" and r["speedup"]]
    stats = {"submitted": len(records), **spread_stats(timed)}
    stats["baselines_timed"] = sum(r["baseline_timed"] for r in timed)
    stats["failed"] = [
        f"{r['id']}: {r['verdict']}" + (f" ({first_line(r.get('error'))})" if r.get("error") else "")
        for r in records
        if r["verdict"] not in ("correct", "not_run")
    ]
    stats["verdict"], stats["reason"] = verdict(stats)
    return stats


def verdict(stats: dict[str, Any]) -> tuple[str, str]:
    if stats["failed"]:
        return "FAIL", f"{len(stats['failed'])} copies of an honest kernel not correct"
    if stats["n"] < 2:
        return "n/a", "fewer than 2 timed copies"
    if stats["runtime_ms"]["median"] < TARGET_MIN_RUNTIME_MS:
        return "n/a", f"runtime under {TARGET_MIN_RUNTIME_MS} ms"
    misses = [f"CV {stats['cv']:.2%} > {TARGET_CV:.1%}"] if stats["cv"] > TARGET_CV else []
    misses += (
        [f"spread {stats['spread']:.2%} > {TARGET_SPREAD:.0%}"] if stats["spread"] > TARGET_SPREAD else []
    )
    return ("FAIL", "; ".join(misses)) if misses else ("PASS", "")


# -- one pass ----------------------------------------------------------------------------------------------


def run_pass(name: str, copies: list[dict], background: list[dict], args, kb: Path, started: float) -> dict:
    from kevin.evaluator.evaluate import EvalConfig
    from kevin.evaluator.timing import TimingConfig

    prepare_cache(Path(args.cache_dir), cold=True)
    config = EvalConfig(
        backend=args.backend,
        cache_dir=args.cache_dir,
        baseline_cache=not args.fresh_baselines,
        timing=TimingConfig(precision=args.timing_precision),
    )
    rows = batch_order(copies, background if name == "busy" else [])
    journal = Path(args.out) / f"timing_aa_{name}_rows.jsonl"  # each result as it comes: kept if cut
    results, wall_s = run_kevin(
        rows, kb, config, args.jobs, started + args.deadline_s, SUBMIT_RESERVE_S, GRACE_S, journal
    )
    by_id = {r["id"]: r for r in results}
    kernels = {}
    for kernel in dict.fromkeys(r["kernel"] for r in copies):
        records = [copy_record(by_id[r["id"]]) for r in copies if r["kernel"] == kernel]
        kernels[kernel] = dict(kernel_stats(records), copies=records)
    load = [by_id[r["id"]] for r in rows if r["kind"] != "aa"]
    return {
        "pass": name,
        "wall_s": round(wall_s, 1),
        "order": [r["id"] for r in rows],
        "kernels": kernels,
        "background": {
            "n": len(load),
            "verdicts": _count(r["verdict"] for r in load),
            "cold_builds": sum((r.get("timing") or {}).get("build_cache_hit") is False for r in load),
        },
    }


# -- the report --------------------------------------------------------------------------------------------


def _num(value: float | None, form: str = ".3f") -> str:
    return "-" if value is None else format(value, form)


def _three(series: dict[str, float | None], form: str) -> str:
    return " / ".join(_num(series[k], form) for k in ("median", "min", "max"))


def pass_lines(one: dict[str, Any]) -> list[str]:
    """A pass's load, its copies' admission and retimings, and each failed copy, under the table."""
    load = one["background"]
    copies = [c for k in one["kernels"].values() for c in k["copies"]]
    admitted = [c.get("admission") or {} for c in copies]
    alone = [a for a in admitted if a.get("weight") is not None and a.get("weight") == a.get("slots")]
    waits = sorted(a.get("memory_wait_s") or 0.0 for a in admitted)
    again = [c for c in copies if len(c.get("timing_noise") or []) > 1]
    lines = [
        f"- {one['pass']}: {one['wall_s']} s; background {load['n']} candidates "
        f"({load['cold_builds']} cold builds), verdicts {load['verdicts']}; copies alone on the "
        f"device {len(alone)} of {len(copies)}, memory wait max {waits[-1] if waits else 0:.2f} s, "
        f"timed again (noisy) {len(again)}"
    ]
    for kernel, s in one["kernels"].items():
        lines += [f"  - {kernel} failed copy {f}" for f in s["failed"]]
    return lines


def markdown(report: dict[str, Any]) -> str:
    config = report["config"]
    lines = [
        "# A/A timing (issue #15 item 2)",
        "",
        f"`{report['command']}` on {report['environment'].get('gpu') or 'no GPU'} "
        f"({report['environment'].get('cores')} cores, torch {report['environment'].get('torch')}): "
        f"backend {config['backend']}, size {config['size']}, {config['copies']} copies per kernel, "
        f"--jobs {config['jobs']}, timing precision {config['timing_precision']}, baseline cache "
        f"{'off (every copy times its own)' if config['fresh_baselines'] else 'on (fresh per pass)'}.",
        f"Target: CV <= {TARGET_CV:.1%} and spread <= {TARGET_SPREAD:.0%} for kernels >= "
        f"{TARGET_MIN_RUNTIME_MS} ms. CV = sample stdev / mean of the speedups; spread = (max - min) / median.",
        "",
        "| kernel | pass | n | speedup median / min / max | CV | spread | runtime ms median / min / max "
        "| baseline ms median / min / max | baselines timed | verdict |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    passes = report["passes"]
    for kernel in dict.fromkeys(k for p in passes for k in p["kernels"]):
        for one in [p for p in passes if kernel in p["kernels"]]:
            s = one["kernels"][kernel]
            lines.append(
                f"| {kernel} | {one['pass']} | {s['n']}/{s['submitted']} | {_three(s['speedup'], '.3f')} "
                f"| {_num(s['cv'], '.2%')} | {_num(s['spread'], '.2%')} | {_three(s['runtime_ms'], '.4f')} "
                f"| {_three(s['baseline_ms'], '.4f')} | {s['baselines_timed']} | {s['verdict']}"
                f"{' (' + s['reason'] + ')' if s['reason'] else ''} |"
            )
    lines.append("")
    for one in passes:
        lines += pass_lines(one)
    return "\n".join(lines) + "\n"


# -- the CLI -----------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from kevin.evaluator.timing import TimingConfig

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--backend", choices=("cuda", "cpp"), default="cuda")
    add("--size", choices=("small", "large"), default=None, help="default large on cuda, small on cpp")
    add("--kernels", default=KERNELS, help=f"bundled task numbers (default {KERNELS})")
    add("--copies", type=int, default=8, help="evaluations of each kernel per pass (default 8)")
    add("--jobs", type=int, default=16, help="evaluations in flight (default 16)")
    add("--background", type=int, default=24, help="load candidates in the busy pass (default 24)")
    add("--passes", default="busy", help="comma-separated: busy, quiet (default busy)")
    add("--timing-precision", type=float, default=TimingConfig.precision, help="TimingConfig.precision")
    add("--fresh-baselines", action="store_true", help="no baseline cache: every copy times its own")
    add("--cache-dir", default="/tmp/kevin-timing-aa-cache", help="build/baseline caches, emptied per pass")
    add("--kernelbench", default=None, help="KernelBench dir (the cuda background's problems)")
    add("--out", default=str(REPO / "bench" / "results"), help="writes timing_aa.json and timing_aa.md")
    add("--deadline-s", type=float, default=500.0, help="budget of the whole invocation (default 500)")
    add("--dry-run", action="store_true", help="load and gate-check everything, run nothing")
    args = parser.parse_args(argv)
    args.size = args.size or ("large" if args.backend == "cuda" else "small")
    args.pass_names = [p.strip() for p in args.passes.split(",") if p.strip()]
    if not args.pass_names or set(args.pass_names) - {"busy", "quiet"} or args.copies < 1:
        parser.error("--passes takes busy and/or quiet; --copies must be at least 1")
    return args


def dry_run(rows: list[dict], kb: Path, backend: str) -> int:
    """Every problem file present and every candidate through the static gate; nothing built or run."""
    from kevin.gate import check_source

    missing = sorted({r["problem"] for r in rows if not (kb / r["problem"]).is_file()})
    rejected = sorted({r["id"] for r in rows if not check_source(Path(r["path"]).read_text(), backend).ok})
    copies = [r for r in rows if r["kind"] == "aa"]
    print(
        f"{len(copies)} copies of {len({r['kernel'] for r in copies})} kernels, {len(rows) - len(copies)} background"
    )
    print(
        f"problem files: {'all present' if not missing else 'missing ' + ', '.join(missing)} (KernelBench dir {kb})"
    )
    print(f"static gate ({backend}): {'all accepted' if not rejected else 'rejected ' + ', '.join(rejected)}")
    print("busy order:", " ".join(r["id"] for r in rows))
    return 1 if missing or rejected else 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    kb = kernelbench_dir(args.kernelbench)
    args.kernelbench = str(kb)  # resolved, for the report
    numbers = [n.strip() for n in args.kernels.split(",") if n.strip()]
    scratch = Path(tempfile.mkdtemp(prefix="timing-aa-"))
    try:
        copies = aa_rows(numbers, args.copies, args.backend, args.size, scratch)
        background = background_rows(args.background, args.backend, args.size, scratch, numbers)
        if args.dry_run:
            return dry_run(batch_order(copies, background), kb, args.backend)
        passes = [run_pass(name, copies, background, args, kb, started) for name in args.pass_names]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    report = {
        "command": " ".join([Path(sys.executable).name] + sys.argv),
        "environment": environment(),
        "config": {k: v for k, v in vars(args).items() if k not in ("out", "dry_run", "pass_names")},
        "target": {"cv": TARGET_CV, "spread": TARGET_SPREAD, "min_runtime_ms": TARGET_MIN_RUNTIME_MS},
        "passes": passes,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "timing_aa.json").write_text(json.dumps(report, indent=1, default=str))
    (out / "timing_aa.md").write_text(markdown(report))
    print(markdown(report), flush=True)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    if _stragglers():
        os._exit(code)  # the report is written; never wait for evaluations past the deadline
    sys.exit(code)
