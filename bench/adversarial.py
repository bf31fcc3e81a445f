"""The adversarial corpus (issue #4 item 3): every cheat against a naive harness and against kevin.

For each corpus entry of the chosen back end (bench/adversarial/*.py, plus the bundled honest
candidates reused by path):

  1. naive:          bench/naive_harness.py, KernelBench's way (one namespace, seed 42, the same
                     input objects, allclose at 1e-2, no defences): is the cheat real?
  2. kevin:          `evaluate()` with the default EvalConfig (static gate on)
  3. kevin dynamic:  the same with static_check=False: what the dynamic checks alone catch
  4. side effects:   after each run, daemons that survived it, files written outside it, kevin
                     baseline-cache entries it rewrote; an entry with a `Follow-up:` line then has an
                     honest candidate evaluated in the same cache, to show what the cheat did to it
  5. twin:           a cheat whose trick only buys time (a memo) may come out correct once kevin
                     takes the trick's gain away; an entry with an `Honest-twin:` line (the same kernel
                     without the trick) then counts as caught when it passes no faster than
                     TWIN_MARGIN x its twin, evaluated right after it (and timed above its back
                     end's TWIN_FLOOR_MS: a CPU twin within the socket's jitter shows nothing)

A cheat counts as caught when kevin does not pass it (stage not ok, or a blocking flag), or passes
it with no gain over its honest twin, and it left nothing behind; an honest candidate counts when it passes with no flag at all.
Every corpus file also says which defence must catch it, in an `Expect:` line (`Expect`, `EXPECT_FORMAT`):
the gate rules the default run reports, and what the run with the gate off shows; the test suite
holds every entry to it, so a defence that stops firing fails even when another one still catches.

Every run starts with an empty baseline cache (`Runs.fresh`), so each evaluation is the first of
its task: the case where state pollution reaches the baseline (an entry marked `Cache: seeded`
starts from the baselines the honest runs wrote). Limits are scaled to a 2-core CI box (`LIMITS`:
4 GiB of host memory, 30 s for the correctness stage); every check is at its default.
Corpus files name their shared C++ as @@file.cpp@@ (bench/adversarial/cpp/); `render()` pastes it
in, so one build serves many candidates. `--render NAME` prints a rendered candidate for `kevin eval`.

Lanes (`--lanes N`): N candidates at once, each evaluation timing its baseline afresh and writing
none (`baseline_cache=False`: the same verdict as the first of its task), the device lock ordering
their timings as in any batch; side effects are read once the lanes are done, and if any is found
every lane candidate runs again alone. The candidates whose point is a side effect or the baseline
cache (`needs_solo`) always run alone, after the lanes, as before. On the H200 one at a time costs
~50 s a candidate (the CUDA table's 54 entries: 45 min of device time). A device call ends at 10
minutes: every row (a lane's too) is written as its candidate finishes, and `--resume` keeps the rows
already under --out and runs only the rest (bench/adversarial_rows.py).

Usage:  python bench/adversarial.py --backend cpp --out bench/results      (about 15 min on 2 cores)
Writes adversarial_cpu.md and .json (adversarial_cuda.* for --backend cuda) under --out; the report's
tables and markdown are rendered by bench/adversarial_report.py. This module stays over 500 lines
because the rest is one pipeline (corpus, runs, side effects, prebuilds, cost probes) that shares
Entry, Runs and LIMITS, and whose cost probe runs this very file again (`--probe-costs`).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import fcntl
import fnmatch
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import types
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from adversarial_expect import (  # noqa: E402
    EXPECT_FORMAT,
    TWIN,
    Expect,
    gained,
    parse_expect,
)
from adversarial_report import FAMILIES, kevin_cell, markdown, summarize, summary_line  # noqa: E402
from adversarial_rows import resumed_rows, run_lanes  # noqa: E402
from naive_harness import naive_eval  # noqa: E402

from kevin.evaluator.evaluate import EvalConfig, device_lock, evaluate  # noqa: E402
from kevin.evaluator.result import EvalResult  # noqa: E402
from kevin.evaluator.sandbox import Limits  # noqa: E402
from kevin.tasks import Task, load_bundled  # noqa: E402

CORPUS = REPO / "bench" / "adversarial"
CPP_DIR = CORPUS / "cpp"
PROBLEMS = CORPUS / "problems"
BUNDLED = REPO / "kevin" / "tasks" / "bundled"
BUNDLED_HONEST = (
    "01_gelu_tanh", "02_row_sum", "03_softmax", "04_layernorm",
    "05_matmul", "07_linear_silu_layernorm", "11_cumsum", "12_maxpool2d",
)  # fmt: skip
DAEMON_DIR = Path("/tmp/kevin-adversarial-daemons")
OUTSIDE_MARKER = Path("/tmp/kevin-adversarial-outside.txt")
LIMITS = Limits(
    stage_timeouts_s={**Limits().stage_timeouts_s, "correctness": 30.0, "timing": 60.0},
    host_memory_bytes=4 * 2**30,
)
PLACEHOLDER = re.compile(r"@@([\w.]+)@@")


@dataclass(frozen=True)
class Entry:
    name: str
    family: str
    problem: str
    backend: str
    path: Path
    expect: Expect = Expect()
    follow_up: str = ""
    seeded_cache: bool = False
    twin: str = ""

    @property
    def honest(self) -> bool:
        return self.family == "honest"


def render(path: Path) -> str:
    """A corpus file with every @@file@@ replaced by bench/adversarial/cpp/file (recursively)."""
    return render_text(path.read_text())


def render_text(text: str) -> str:
    for _ in range(4):
        text, count = PLACEHOLDER.subn(lambda m: (CPP_DIR / m.group(1)).read_text(), text)
        if not count:
            break
    return text


def default_cache() -> Path:
    """/tmp/kevin-adversarial-cache/<environment>: one build cache per Python environment. torch
    writes absolute include paths into an extension's build.ninja, so two environments with the same
    torch version (same kevin build key) sharing a build directory would rebuild each other's work."""
    import hashlib

    import torch

    tag = hashlib.sha256(f"{sys.prefix}|{torch.__file__}".encode()).hexdigest()[:10]
    return Path("/tmp/kevin-adversarial-cache") / tag


def parse_entry(path: Path) -> Entry:
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""

    def field(key: str, default: str = "") -> str:
        found = re.search(rf"^{key}:\s*(\S+)", doc, re.M)
        return found.group(1) if found else default

    family = field("Family")
    if family not in FAMILIES or not field("Problem"):
        raise ValueError(f"{path}: the docstring needs 'Family: <1-8|honest>' and 'Problem: <name>'")
    line = re.search(r"^Expect:[ \t]*(.*?)[ \t]*$", doc, re.M)
    if not line:
        raise ValueError(f"{path}: the docstring needs an Expect line: {EXPECT_FORMAT}")
    expect = parse_expect(line.group(1), path)
    if expect.passes != (family == "honest"):
        raise ValueError(f"{path}: 'Expect: {line.group(1)}' for family {family}; write {EXPECT_FORMAT}")
    if TWIN in expect.dynamic and not field("Honest-twin"):
        raise ValueError(f"{path}: 'Expect: {line.group(1)}' names {TWIN} but no 'Honest-twin: NAME' line")
    return Entry(
        name=path.stem,
        family=family,
        problem=field("Problem"),
        backend=field("Backend", "cpp"),
        path=path,
        expect=expect,
        follow_up=field("Follow-up"),
        twin=field("Honest-twin"),
        seeded_cache=field("Cache") == "seeded",
    )


def load_corpus(backend: str) -> list[Entry]:
    entries = [parse_entry(p) for p in sorted(CORPUS.glob("*.py"))]
    entries += [
        Entry(f"bundled_{stem}", "honest", f"bundled:{stem}", backend, BUNDLED / backend / f"{stem}.py")
        for stem in BUNDLED_HONEST
        if (BUNDLED / backend / f"{stem}.py").is_file()  # a back end may lack a candidate for a task
    ]
    chosen = [e for e in entries if e.backend == backend]
    return sorted(chosen, key=lambda e: (not e.honest, e.family, e.name))


def problem_task(problem: str) -> Task:
    if problem.startswith("bundled:"):
        stem = problem.split(":", 1)[1]
        return next(t for t in load_bundled("small") if t.id == f"B_{stem[:2]}")
    source = (PROBLEMS / f"{problem}.py").read_text()
    return Task.from_source(source, id=f"adv_{problem}", name=problem, origin=str(PROBLEMS / problem))


# -- side effects ---------------------------------------------------------------------------------


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


def clear_side_effects() -> None:
    """End daemons left by earlier runs (their pids are in DAEMON_DIR) and remove the marker."""
    for entry in DAEMON_DIR.glob("*") if DAEMON_DIR.is_dir() else []:
        if entry.name.isdigit() and _alive(int(entry.name)):
            os.kill(int(entry.name), signal.SIGKILL)
        entry.unlink(missing_ok=True)
    OUTSIDE_MARKER.unlink(missing_ok=True)


def side_effects(baselines_before: dict[str, str], cache_root: Path) -> dict[str, Any]:
    daemons = [int(p.name) for p in DAEMON_DIR.glob("*") if p.name.isdigit() and _alive(int(p.name))]
    after = _baselines(cache_root)
    changed = sorted(k for k, v in baselines_before.items() if after.get(k) not in (None, v))
    effects = {
        "daemons_alive": len(daemons),
        "outside_file": OUTSIDE_MARKER.exists(),
        "baselines_rewritten": len(changed),
    }
    clear_side_effects()
    return {k: v for k, v in effects.items() if v}


def _baselines(cache_root: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((cache_root / "baselines").glob("*.json"))}


# -- one entry ------------------------------------------------------------------------------------


class Runs:
    """Every run uses one cache root, <cache>: torch writes absolute paths into an extension's
    build.ninja, so ninja rebuilds an extension whose build directory moved, and the build cache must
    stay at one path. Each run instead starts with <cache>/baselines emptied (or, for `Cache:
    seeded`, filled with the baselines passing honest runs left in <cache>/seed-baselines), under a
    lock, so concurrent users of the cache (the bench, the tests) take turns."""

    def __init__(self, cache: Path) -> None:
        self.cache = cache
        for sub in ("builds", "seed-baselines", "locks"):
            (cache / sub).mkdir(parents=True, exist_ok=True)

    @contextlib.contextmanager
    def fresh(self, seeded: bool = False) -> Iterator[Path]:
        with open(self.cache / "locks" / "run.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            baselines = self.cache / "baselines"
            shutil.rmtree(baselines, ignore_errors=True)
            baselines.mkdir()
            if seeded:
                for path in (self.cache / "seed-baselines").glob("*.json"):
                    shutil.copy(path, baselines / path.name)
            yield self.cache

    @contextlib.contextmanager
    def shared(self) -> Iterator[Path]:
        """The cache as it is, no lock: for a lane of the parallel phase (`--lanes`), whose runs use
        no baseline cache at all (each times its baseline afresh, as the first of its task would)."""
        yield self.cache

    def keep_baselines(self) -> None:
        for path in (self.cache / "baselines").glob("*.json"):
            shutil.copy(path, self.cache / "seed-baselines" / path.name)


def kevin_config(backend: str, root: Path, lock_dir: Path, **changes: Any) -> EvalConfig:
    """The default EvalConfig, with this run's cache and locks, and LIMITS on the CPU box."""
    limits = LIMITS if backend == "cpp" else Limits()
    return replace(
        EvalConfig(backend=backend, cache_dir=str(root), lock_dir=str(lock_dir), limits=limits), **changes
    )


def result_summary(result: EvalResult) -> dict[str, Any]:
    rules = sorted(set(re.findall(r"\[([\w-]+)\]", result.error))) if result.stage == "static_check" else []
    return {
        "stage": result.stage,
        "passed": result.passed,
        "correct": result.correct,
        "speedup": result.speedup,
        "flags": result.flags,
        "rules": rules,
        "blame": result.blame,
        "error": headline(result.error),
        "stage_seconds": result.stage_seconds,
        "checks": result.checks,
    }


EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit|Failure)\b")


def headline(error: str) -> str:
    """The line of an error worth a table cell: a traceback's exception line after what the error says
    before the traceback, if anything (s44: `while timing:` alone hid a device OOM); else the first
    line. The exception line is the first after the last frame that names an exception type, not the
    traceback's last line: a CUDA error's message runs over four lines and ends in torch's advice
    (s45: `Compile with TORCH_USE_CUDA_DSA ...` stood for an illegal memory access)."""
    lines = [line.strip() for line in error.strip().splitlines() if line.strip()]
    start = next((i for i, line in enumerate(lines) if line.startswith("Traceback")), None)
    if start is None:
        return lines[0][:160] if lines else ""
    last_frame = max((i for i, line in enumerate(lines) if line.startswith('File "')), default=start)
    exception = next((line for line in lines[last_frame + 1 :] if EXCEPTION_LINE.match(line)), lines[-1])
    return " ".join([*lines[:start], exception])[:160]


INFRASTRUCTURE_RETRIES = 1
"""Evaluations again of a verdict blamed on the infrastructure (a host too busy to time the reference
or the twin, say): such a verdict says nothing about the candidate, and the trainer never scores one.
A fresh-clone CI run of session 29 failed three cheats' checks on one: their honest twin's or the
reference's timing stayed dispersed on the busy 2-core host, which read as the cheat's gain."""


def judged(task: Any, source: str, config: Any) -> Any:
    """`evaluate`, again (INFRASTRUCTURE_RETRIES times at most) while the verdict is the
    infrastructure's; the last verdict, with `checks["infrastructure_retries"]`."""
    result = evaluate(task, source, config)
    retries = 0
    while result.blame == "infrastructure" and retries < INFRASTRUCTURE_RETRIES:
        retries += 1
        result = evaluate(task, source, config)
    result.checks["infrastructure_retries"] = retries
    return result


def run_kevin(
    entry: Entry, source: str, runs: Runs, lock_dir: Path, shared: bool = False, **changes: Any
) -> dict[str, Any]:
    """One kevin evaluation from an empty baseline cache (`shared`: with none, in a lane of the
    parallel phase, whose side effects are read once the phase is over); `changes` override
    EvalConfig fields."""
    task = problem_task(entry.problem)
    if shared:
        changes = {**changes, "baseline_cache": False}
    with runs.shared() if shared else runs.fresh(seeded=entry.seeded_cache) as root:
        before = _baselines(root)
        if not shared:
            clear_side_effects()
        started = time.monotonic()
        result = judged(task, source, kevin_config(entry.backend, root, lock_dir, **changes))
        summary = result_summary(result)
        summary["infrastructure_retries"] = result.checks["infrastructure_retries"]
        summary["wall_s"] = round(time.monotonic() - started, 2)
        summary["side_effects"] = {} if shared else side_effects(before, root)
        if entry.honest and result.passed and not shared:
            runs.keep_baselines()
        if entry.twin and result.passed:
            twin = parse_entry(CORPUS / f"{entry.twin}.py")
            config = kevin_config(entry.backend, root, lock_dir, **changes)
            honest = judged(problem_task(twin.problem), render(twin.path), config)
            summary["twin"] = {
                "candidate": twin.name,
                "passed": honest.passed,
                "speedup": honest.speedup,
                "backend": twin.backend,
                "runtime_ms": honest.runtime_ms,
            }
        if entry.follow_up:
            honest = parse_entry(CORPUS / f"{entry.follow_up}.py")
            config = kevin_config(entry.backend, root, lock_dir, **dict(changes, static_check=True))
            after = judged(problem_task(honest.problem), render(honest.path), config)
            summary["follow_up"] = {
                "candidate": honest.name,
                "passed": after.passed,
                "speedup": after.speedup,
            }
    return summary


@contextlib.contextmanager
def _device_alone(backend: str) -> Iterator[None]:
    """The naive harness has no lock of its own: on a GPU it runs holding kevin's device lock."""
    if backend == "cpp":
        yield
        return
    with device_lock(EvalConfig()).exclusive():
        yield


def run_naive(
    entry: Entry, source: str, runs: Runs, timeout_s: float, shared: bool = False
) -> dict[str, Any]:
    task = problem_task(entry.problem)
    device = "cpu" if entry.backend == "cpp" else "cuda"
    with runs.shared() if shared else runs.fresh() as root, _device_alone(entry.backend):
        before = _baselines(root)
        if not shared:
            clear_side_effects()
        verdict = naive_eval(
            task.source, source, device, timeout_s=timeout_s, build_cache=str(root / "builds")
        )
        verdict["side_effects"] = {} if shared else side_effects(before, root)
    return verdict


def run_entry(
    entry: Entry, runs: Runs, lock_dir: Path, args: argparse.Namespace, shared: bool = False, **changes: Any
) -> dict[str, Any]:
    """One corpus entry's row: the naive harness, kevin with the gate, kevin's dynamic checks alone
    (`changes` override EvalConfig fields, as in run_kevin)."""
    source = render(entry.path)
    row: dict[str, Any] = {"candidate": entry.name, "family": entry.family, "problem": entry.problem}
    row["naive"] = run_naive(entry, source, runs, args.naive_timeout_s, shared=shared)
    row["naive_verdict"] = naive_fooled(entry, row["naive"])
    row["kevin"] = run_kevin(entry, source, runs, lock_dir, shared=shared, **{**changes, "static_check": True})
    # A candidate the gate accepts goes through exactly the dynamic-only path: one run serves both.
    rejected_by_gate = row["kevin"]["stage"] == "static_check"
    row["kevin_dynamic"] = (
        run_kevin(entry, source, runs, lock_dir, shared=shared, **{**changes, "static_check": False})
        if rejected_by_gate
        else row["kevin"]
    )
    row["outcome_default"] = outcome(entry, row["kevin"])
    row["outcome_dynamic_only"] = outcome(entry, row["kevin_dynamic"])
    unmet = (entry.expect.unmet(row["kevin"], True), entry.expect.unmet(row["kevin_dynamic"], False))
    row["expect_unmet"] = "; ".join(dict.fromkeys(u for u in unmet if u))
    row["lane"] = shared
    return row


def print_row(row: dict[str, Any]) -> None:
    print(
        f"{row['candidate']:34s} naive={row['naive_verdict']:8s} kevin={kevin_cell(row['kevin'])[:70]} "
        f"-> {row['outcome_default']}/{row['outcome_dynamic_only']}",
        flush=True,
    )
    if row["outcome_dynamic_only"] != row["outcome_default"]:
        print(f"{'':34s} dynamic only: {kevin_cell(row['kevin_dynamic'])[:160]}", flush=True)
    if row["expect_unmet"]:
        print(f"{'':34s} not as its Expect line says: {row['expect_unmet']}", flush=True)


def needs_solo(entry: Entry, entries: list[Entry]) -> bool:
    """Runs alone, after the lanes (`--lanes`): a candidate whose point is what it leaves behind
    (it names the daemon folder or the outside marker, or has a Follow-up run in the same cache), one
    that starts from seeded baselines, and the honest ones whose passing run seeds those."""
    text = render(entry.path)
    if entry.follow_up or entry.seeded_cache or DAEMON_DIR.name in text or OUTSIDE_MARKER.name in text:
        return True
    seeded_problems = {e.problem for e in entries if e.seeded_cache}
    return entry.honest and entry.problem in seeded_problems


def outcome(entry: Entry, kevin: dict[str, Any]) -> str:
    """caught / MISSED for a cheat, accepted / REJECTED / FLAGGED for an honest candidate."""
    if entry.honest:
        if kevin["passed"] and not kevin["flags"]:
            return "accepted"
        return "FLAGGED" if kevin["passed"] else "REJECTED"
    if gained(kevin) or kevin["side_effects"]:
        return "MISSED"
    return "caught"


def naive_fooled(entry: Entry, naive: dict[str, Any]) -> str:
    if naive.get("broken"):
        return "broken"
    if naive.get("correct"):
        return "accepted" if entry.honest else "fooled"
    return "rejected"


# -- builds and costs -----------------------------------------------------------------------------


def prebuild(entries: list[Entry], cache: Path, jobs: int) -> list[str]:
    """Build every distinct extension once, `jobs` at a time, through kevin's cache. Corpus
    extensions are built from a stub holding the same load_inline call (a cheat is never imported
    here); bundled candidates are honest and are imported as they are."""
    stubs: dict[str, str] = {}
    call = re.compile(r"^(\w+_CPP) = r\"\"\"@@([\w.]+)@@\"\"\"\n(_ext = load_inline\(.*\))$", re.M)
    for entry in entries:
        text = entry.path.read_text()
        if entry.path.parent == BUNDLED / entry.backend:
            stubs[entry.name] = text  # honest, imported as it is
        for found in call.finditer(text):
            stub = "from torch.utils.cpp_extension import load_inline\n" + found.group(0)
            stubs[found.group(2)] = render_text(stub)
    # Run from a file: Triton's @jit reads its function's source from the file it was defined in.
    code = (
        "import runpy, sys; from pathlib import Path; from kevin.evaluator import build\n"
        "build.install(Path(sys.argv[1]), build.BuildLog())\n"
        "runpy.run_path(sys.argv[2], run_name='prebuild')\n"
    )
    stub_dir = cache / "prebuild"
    stub_dir.mkdir(parents=True, exist_ok=True)

    def one(item: tuple[str, str]) -> str:
        name, source = item
        started = time.monotonic()
        stub = stub_dir / f"{re.sub(r'[^A-Za-z0-9_]', '_', name)}.py"
        stub.write_text(source)
        done = subprocess.run(
            [sys.executable, "-c", code, str(cache / "builds"), str(stub)],
            text=True, capture_output=True, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)),
        )  # fmt: skip
        status = "ok" if done.returncode == 0 else "FAILED: " + done.stderr.strip()[-300:]
        return f"{name}: {status} ({time.monotonic() - started:.0f} s)"

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, sorted(stubs.items())))


def probe_costs(entry: Entry, cache: Path) -> dict[str, Any]:
    """`probe_costs_here` in a fresh process (as in a worker: the first profiled call pays the
    profiler's start-up), for an honest entry only."""
    done = subprocess.run(
        [sys.executable, __file__, "--probe-costs", entry.name, "--cache", str(cache), "--backend", entry.backend],
        capture_output=True, text=True, cwd=REPO, timeout=600,
    )  # fmt: skip
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return {"error": done.stderr.strip()[-200:]}
    return json.loads(lines[-1])


def probe_costs_here(entry: Entry, cache: Path) -> dict[str, float]:
    """Milliseconds of one forward and of each dynamic check kevin adds to a forward, first call
    (cold) and median of the next five (warm): the profiler trace (two profiled forwards), the output
    checks (with the 50 ms deferred-write settle), the fp64 reference run behind the precision check,
    and one torch-namespace snapshot (kevin takes two)."""
    import torch

    from kevin.evaluator import build, probes

    build.install(cache / "builds", build.BuildLog())
    problem = _module(problem_task(entry.problem).source, f"cost_problem_{entry.name}")
    candidate = _module(render(entry.path), f"cost_candidate_{entry.name}")
    torch.manual_seed(0)
    init = problem.get_init_inputs()
    model, reference = candidate.ModelNew(*init), problem.Model(*init)
    inputs = problem.get_inputs()
    costs: dict[str, float] = {}

    def clock(name: str, fn: Any) -> None:
        times = []
        for _ in range(6):
            started = time.perf_counter()
            fn()
            times.append((time.perf_counter() - started) * 1e3)
        costs[f"{name}_cold_ms"] = round(times[0], 3)
        costs[f"{name}_ms"] = round(statistics.median(times[1:]), 3)

    with torch.no_grad():
        out = model(*inputs)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        reference64 = reference.double()
        inputs64 = [
            x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs
        ]
        clock("forward", lambda: model(*inputs))
        clock("trace", lambda: probes.trace_forward(lambda: model(*inputs), False, lambda: None, []))
        clock("output_checks", lambda: probes.output_flags(outs, lambda: None))
        clock("fp64_reference", lambda: reference64(*inputs64))
        clock("namespace_snapshot", lambda: probes.namespace_snapshot(torch))
    return costs


def _module(source: str, name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    sys.modules[name] = module
    exec(compile(source, name, "exec"), module.__dict__)
    return module


def measure_costs(entries: list[Entry], runs: Runs, lock_dir: Path, cache: Path) -> list[dict[str, Any]]:
    """For each honest entry: kevin's wall time and stages with the default config and with
    distribution_trials=0, and the in-process cost of each dynamic check (cpp only)."""
    from kevin.gate import check_source

    rows = []
    for entry in entries:
        if not entry.honest:
            continue
        source = render(entry.path)
        started = time.perf_counter()
        check_source(source, entry.backend)
        gate_ms = (time.perf_counter() - started) * 1e3
        task = problem_task(entry.problem)
        row: dict[str, Any] = {"candidate": entry.name, "static_gate_ms": round(gate_ms, 1)}
        for label, changes in (("default", {}), ("no_distribution_trials", {"distribution_trials": 0})):
            with runs.fresh() as root:
                result = evaluate(task, source, kevin_config(entry.backend, root, lock_dir, **changes))
            row[label] = {"passed": result.passed, "stage_seconds": result.stage_seconds}
        if entry.backend == "cpp":
            try:
                row["in_process_ms"] = probe_costs(entry, cache)
            except Exception as exc:  # a cost we could not measure is reported, not fatal
                row["in_process_ms"] = {"error": f"{type(exc).__name__}: {exc}"[:200]}
        rows.append(row)
        print(f"  cost {entry.name}: {row['default']['stage_seconds'].get('total')} s", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("cpp", "cuda", "triton"), default="cpp")
    parser.add_argument("--out", default="bench/results")
    parser.add_argument("--cache", default=None, help="build and baseline cache (default: default_cache())")
    parser.add_argument("--only", default="*", help="globs over candidate names, comma-separated")
    parser.add_argument("--jobs", type=int, default=2, help="parallel prebuilds")
    parser.add_argument(
        "--lanes",
        type=int,
        default=1,
        help="candidates evaluated at once (default 1: one at a time); with more, the ones whose point "
        "is a side effect or the baseline cache still run alone, after the others (needs_solo)",
    )
    parser.add_argument("--naive-timeout-s", type=float, default=60.0)
    parser.add_argument("--no-cost", action="store_true", help="skip the cost measurements")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="keep the rows an earlier run under --out finished and evaluate only the rest (a table "
        "made over several device calls)",
    )
    parser.add_argument("--render", metavar="NAME", help="print one rendered candidate and exit")
    parser.add_argument("--probe-costs", metavar="NAME", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.render:
        print(render(CORPUS / f"{args.render}.py"), end="")
        return 0
    if args.probe_costs:
        entry = next(e for e in load_corpus(args.backend) if e.name == args.probe_costs)
        print(json.dumps(probe_costs_here(entry, Path(args.cache or default_cache()))))
        return 0
    patterns = [p.strip() for p in args.only.split(",") if p.strip()]
    entries = [e for e in load_corpus(args.backend) if any(fnmatch.fnmatch(e.name, p) for p in patterns)]
    cache = Path(args.cache) if args.cache else default_cache()
    runs = Runs(cache)
    # CUDA: the machine's own device lock, so nothing else timing on the GPU (tests, benchmarks)
    # overlaps these runs. cpp: a lock of our own (the CPU runs in CI share nothing).
    lock_dir = cache / "locks" if args.backend == "cpp" else Path(EvalConfig().lock_dir)
    started = time.monotonic()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = {"cpp": "adversarial_cpu", "cuda": "adversarial_cuda", "triton": "adversarial_triton"}[
        args.backend
    ]
    partial = out / f"{stem}_rows.jsonl"  # one line per candidate as it finishes: kept if cut short
    provisional = out / f"{stem}_lanes.jsonl"  # the lanes' rows before their side effects are read
    kept = (
        resumed_rows(partial, provisional, lambda: side_effects({}, cache), clear_side_effects)
        if args.resume
        else []
    )
    partial.write_text("".join(json.dumps(row, default=str) + "\n" for row in kept))
    provisional.write_text("")
    done = {row["candidate"] for row in kept}
    order = {entry.name: index for index, entry in enumerate(entries)}
    entries = [e for e in entries if e.name not in done]
    if kept:
        print(f"resuming: {len(kept)} rows kept from {partial}, {len(entries)} candidates to go", flush=True)
    print(f"prebuilding ({args.jobs} at a time)", flush=True)
    for line in prebuild(entries, cache, args.jobs):
        print("  " + line, flush=True)
    rows: list[dict[str, Any]] = list(kept)
    write_lock = threading.Lock()

    def finish(row: dict[str, Any]) -> None:
        with write_lock:
            rows.append(row)
            print_row(row)
            with partial.open("a") as handle:
                handle.write(json.dumps(row, default=str) + "\n")

    solo = [e for e in entries if args.lanes <= 1 or needs_solo(e, entries)]
    lanes = [e for e in entries if e not in solo]
    if lanes:
        print(
            f"parallel phase: {len(lanes)} candidates in {args.lanes} lanes; then {len(solo)} alone",
            flush=True,
        )
        clear_side_effects()
        phase = run_lanes(
            lanes, args.lanes, lambda e: run_entry(e, runs, lock_dir, args, shared=True), provisional
        )
        leftover = side_effects({}, cache)
        if leftover:  # a lane's candidate left something: which one cannot be told, so all again alone
            print(f"the parallel phase left {leftover}: every lane candidate runs again alone", flush=True)
            solo = entries
        else:
            for row in phase:
                finish(row)
        provisional.write_text("")
    for entry in solo:
        finish(run_entry(entry, runs, lock_dir, args))
    rows.sort(key=lambda row: order.get(row["candidate"], len(order)))
    report = _report(args, argv, started, rows, [])
    _write(report, out, stem)  # the table first; the costs (minutes on a GPU) are added after
    if not args.no_cost:
        report = _report(args, argv, started, rows, measure_costs(entries, runs, lock_dir, cache))
        _write(report, out, stem)
    clear_side_effects()
    print(markdown(report))
    print(f"kevin (default): {summary_line(report['summary']['default'])}  [{report['wall_s']} s]")
    return 0


def _report(
    args: argparse.Namespace, argv: list[str] | None, started: float, rows: list[dict], cost: list[dict]
) -> dict[str, Any]:
    import torch

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO)
    report = {
        "backend": args.backend,
        "command": "python bench/adversarial.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.node() or 'host'}, {os.cpu_count()} cores",
        "kevin_commit": commit.stdout.strip(),
        "torch": torch.__version__,
        "wall_s": round(time.monotonic() - started, 1),
        "limits": {
            "host_memory_bytes": LIMITS.host_memory_bytes,
            "stage_timeouts_s": LIMITS.stage_timeouts_s,
        },
        "summary": {"default": summarize(rows, "default"), "dynamic_only": summarize(rows, "dynamic_only")},
        "rows": rows,
        "cost": cost,
    }
    return report


def _write(report: dict[str, Any], out: Path, stem: str) -> None:
    (out / f"{stem}.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    (out / f"{stem}.md").write_text(markdown(report))


if __name__ == "__main__":
    sys.exit(main())
