"""Build times of load_inline candidates: plain `load_inline` against kevin's build (issue #5).

For each candidate file (a module that calls `load_inline(...)` at import), the call's arguments
are captured without building, then built in a fresh subprocess, timed inside it:

* plain: torch's `load_inline` into an empty build directory (what a naive harness pays);
* kevin cold: kevin.evaluator.build's wrapper with an empty cache (the fast path, or its fallback);
* kevin hit: the same call again in a new process (the build cache).

This script reports times, whether the fast path was taken (and why not), and whether both builds
succeed or fail together. What a fast-built module computes is checked elsewhere, by evaluating
candidates (tests/evaluator/test_fastbuild.py, the bundled set, bench/eval_throughput.py).

    python bench/build_speed.py --backend cuda --out bench/results/h200/build_speed \
        --plain-jobs 16            # plain builds 16 at a time (they take ~60 s each)

    python bench/build_speed.py --backend cuda --extra throughput --extra build_coverage \
        --out bench/results/h200/build_coverage --plain-jobs 0   # the fast path's share of more candidates

The summary reports the share of cold builds that took the fast path and why the others fell back
(bench/build_coverage.py measures the same share on a CPU, compiling only).

Kevin's cold builds run one at a time (the latency a single evaluation sees) unless --jobs is set.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures as futures
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHILD = r"""
import json, sys, time
from pathlib import Path
import torch
import torch.utils.cpp_extension as ce
mode, cache, kwargs_path = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
kwargs = json.loads(Path(kwargs_path).read_text())
record = {}
log = None
if mode == "plain":
    cache.mkdir(parents=True, exist_ok=True)
    kwargs["build_directory"] = str(cache)
else:
    from kevin.evaluator import build
    log = build.BuildLog()
    build.install(cache, log, fast=(mode != "kevin-nofast"))
started = time.perf_counter()
try:
    ce.load_inline(**kwargs)
    record["ok"] = True
except Exception as exc:
    record["ok"] = False
    record["error"] = str(exc)[-400:]
record["seconds"] = time.perf_counter() - started
if log is not None:
    record.update({k: v for k, v in log.to_list()[0].items() if k in ("cache_hit", "fast", "fallback")})
print("RESULT " + json.dumps(record))
"""


def capture(path: Path) -> dict:
    """The keyword arguments of the candidate's load_inline call, without building anything."""
    code = (
        "import json, runpy, sys, inspect\n"
        "import torch.utils.cpp_extension as ce\n"
        "real = ce.load_inline\n"
        "class Captured(Exception):\n    pass\n"
        "def fake(*a, **k):\n"
        "    bound = inspect.signature(real).bind(*a, **k)\n"
        "    print('KWARGS ' + json.dumps(dict(bound.arguments)))\n"
        "    raise Captured\n"
        "ce.load_inline = fake\n"
        "try:\n    runpy.run_path(sys.argv[1])\nexcept Captured:\n    pass\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120
    )
    for line in done.stdout.splitlines():
        if line.startswith("KWARGS "):
            return json.loads(line[7:])
    raise RuntimeError(f"{path}: no load_inline call captured: {done.stderr[-500:]}")


def run_child(mode: str, cache: Path, kwargs_file: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(cache), str(kwargs_file)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"ok": False, "seconds": float("nan"), "error": (done.stdout + done.stderr)[-400:]}


EXTRA = {
    "throughput": "bench/candidates/throughput/l*.py",
    "build_coverage": "bench/candidates/build_coverage/*.py",
}


def candidates(backend: str, extra: list[str] | None = None) -> list[Path]:
    if backend == "cuda":
        files = sorted((ROOT / "kevin/tasks/bundled/cuda").glob("[0-9]*.py"))
        files += sorted((ROOT / "bench/candidates/kernelbench_l1").glob("*.py"))
        for name in extra or []:
            files += sorted(ROOT.glob(EXTRA[name]))
    else:
        files = sorted((ROOT / "kevin/tasks/bundled/cpp").glob("[0-9]*.py"))
    return files


def percentile(values: list[float], q: float) -> float:
    values = sorted(v for v in values if v == v)
    if not values:
        return float("nan")
    index = min(len(values) - 1, max(0, round(q / 100 * (len(values) - 1))))
    return values[index]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["cuda", "cpp"], default="cuda")
    parser.add_argument("--out", type=Path, required=True, help="directory for build_speed.md / .json")
    parser.add_argument("--plain-jobs", type=int, default=4, help="plain builds at once (0: skip plain)")
    parser.add_argument(
        "--plain-limit", type=int, default=0, help="plain builds of the first N only (0: all)"
    )
    parser.add_argument("--jobs", type=int, default=1, help="kevin cold builds at once (default 1: latency)")
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument(
        "--extra", action="append", choices=sorted(EXTRA), help="more candidates (cuda; repeatable)"
    )
    parser.add_argument("--workdir", type=Path, default=None)
    return parser.parse_args(argv)


def capture_all(files: list[Path], work: Path) -> list[dict]:
    """One row per candidate, its load_inline arguments captured into <work>/<stem>.json."""
    rows = []
    for path in files:
        kwargs = capture(path)
        kwargs_file = work / f"{path.stem}.json"
        kwargs_file.write_text(json.dumps(kwargs))
        rows.append({"candidate": path.name, "kwargs": kwargs_file})
    return rows


def warm_up(work: Path, rows: list[dict]) -> float:
    """Seconds of the shim kevin builds once per toolchain (with the first build); not counted."""
    started = time.perf_counter()
    shim = run_child("kevin", work / "cache-warmup", rows[0]["kwargs"])
    shim_seconds = time.perf_counter() - started
    print(f"shim + first build (once per toolchain): {shim_seconds:.1f} s ok={shim['ok']}", flush=True)
    return shim_seconds


def time_kevin(rows: list[dict], cache: Path, jobs: int) -> None:
    """kevin's cold builds (`jobs` at a time) into one cache, then each again as a cache hit."""
    with futures.ThreadPoolExecutor(max(1, jobs)) as pool:
        colds = list(pool.map(lambda r: run_child("kevin", cache, r["kwargs"]), rows))
    for row, cold in zip(rows, colds):
        row["kevin_cold"] = cold
        row["kevin_hit"] = run_child("kevin", cache, row["kwargs"])
        print(
            f"{row['candidate']:40s} cold {cold['seconds']:7.2f} s fast={cold.get('fast')} "
            f"hit {row['kevin_hit']['seconds']:.3f} s {cold.get('fallback', '')[:80]}",
            flush=True,
        )


def time_plain(rows: list[dict], work: Path, jobs: int, limit: int) -> float:
    """Plain builds of the first `limit` rows (0: all), `jobs` at a time, each into its own empty
    directory; the wall time of them all (nan when `jobs` is 0: plain skipped)."""
    if not jobs:
        return float("nan")
    started = time.perf_counter()
    with futures.ThreadPoolExecutor(jobs) as pool:
        chosen = rows[: limit or None]
        plains = list(
            pool.map(lambda r: run_child("plain", work / f"plain-{r['candidate']}", r["kwargs"]), chosen)
        )
    plain_wall = time.perf_counter() - started
    for row, plain in zip(chosen, plains):
        row["plain"] = plain
    return plain_wall


def summarize(rows: list[dict], args: argparse.Namespace, plain_wall: float, shim_seconds: float) -> dict:
    cold = [r["kevin_cold"]["seconds"] for r in rows]
    hit = [r["kevin_hit"]["seconds"] for r in rows]
    plain = [r["plain"]["seconds"] for r in rows if "plain" in r]
    fast = sum(bool(r["kevin_cold"].get("fast")) for r in rows)
    # Why the others fell back, most common first (a candidate that fails to compile falls back too:
    # its errors must come from the real build).
    reasons = collections.Counter(
        re.sub(r"\(\d+\)|:\d+(:\d+)?", "", r["kevin_cold"].get("fallback", "") or "(none given)")[:120]
        for r in rows
        if not r["kevin_cold"].get("fast")
    )
    return {
        "backend": args.backend,
        "candidates": len(rows),
        "fast_path": fast,
        "fast_path_share": fast / len(rows) if rows else float("nan"),
        "fallback_reasons": dict(reasons.most_common(10)),
        "kevin_cold_median_s": percentile(cold, 50),
        "kevin_cold_p90_s": percentile(cold, 90),
        "kevin_hit_median_s": percentile(hit, 50),
        "kevin_hit_max_s": max(hit) if hit else float("nan"),
        "plain_median_s": percentile(plain, 50) if plain else None,
        "plain_jobs": args.plain_jobs,
        "plain_builds": len(plain),
        "plain_wall_s": plain_wall,
        "kevin_jobs": args.jobs,
        "shim_once_s": shim_seconds,
        "all_built": all(r["kevin_cold"]["ok"] for r in rows),
        "plain_agrees": all(r["kevin_cold"]["ok"] == r["plain"]["ok"] for r in rows if "plain" in r),
    }


def markdown_lines(rows: list[dict], summary: dict, backend: str) -> list[str]:
    """build_speed.md, line by line: one table row per candidate, then the summary as JSON."""
    lines = [
        f"# Build times ({backend}, {len(rows)} candidates)",
        "",
        "| candidate | plain load_inline s | kevin cold s | fast path | kevin cache hit s | note |",
        "|---|---:|---:|---|---:|---|",
    ]
    for r in rows:
        p = r.get("plain", {}).get("seconds", float("nan"))
        c, h = r["kevin_cold"], r["kevin_hit"]
        note = c.get("fallback", "") or ("" if c["ok"] else "build failed: " + c.get("error", "")[:80])
        lines.append(
            f"| {r['candidate']} | {p:.1f} | {c['seconds']:.2f} | {'yes' if c.get('fast') else 'no'} | "
            f"{h['seconds']:.3f} | {note[:100].replace('|', '/')} |"
        )
    lines += ["", "```", json.dumps(summary, indent=2), "```", ""]
    return lines


def write(out: Path, lines: list[str], summary: dict, rows: list[dict]) -> None:
    (out / "build_speed.md").write_text("\n".join(lines))
    (out / "build_speed.json").write_text(
        json.dumps(
            {"summary": summary, "rows": [{k: v for k, v in r.items() if k != "kwargs"} for r in rows]},
            indent=2,
            default=str,
        )
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    files = candidates(args.backend, args.extra)[: args.limit or None]
    work = Path(args.workdir or tempfile.mkdtemp(prefix="kevin-build-speed-"))
    args.out.mkdir(parents=True, exist_ok=True)
    rows = capture_all(files, work)
    print(f"{len(rows)} candidates ({args.backend}); work dir {work}", flush=True)

    shim_seconds = warm_up(work, rows)
    time_kevin(rows, work / "cache", args.jobs)
    plain_wall = time_plain(rows, work, args.plain_jobs, args.plain_limit)

    summary = summarize(rows, args, plain_wall, shim_seconds)
    lines = markdown_lines(rows, summary, args.backend)
    write(args.out, lines, summary, rows)
    print("\n".join(lines[-len(json.dumps(summary, indent=2).splitlines()) - 3 :]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
