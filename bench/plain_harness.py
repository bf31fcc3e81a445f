"""Harness (a) of the throughput benchmark: plain `load_inline`, no kevin in the judging.

For each candidate a fresh Python process (this file run as a script) imports it, so its
`load_inline` builds cold in a fresh TORCH_EXTENSIONS_DIR; then, holding kevin's device lock so its
GPU work never overlaps kevin's, it builds Model and ModelNew from seed 42 on the GPU, checks
PLAIN_TRIALS draws of get_inputs() with allclose at kevin's fp32 tolerance (KernelBench's 1e-2
recorded beside it) and times both with CUDA events (warm-up, then calls until the timing budget,
10 to 100). The child prints one `PLAIN_RESULT {json}` line; `plain_eval` (the parent) runs it with
a timeout and kills its process group. `PlainRunner` runs many in a background thread, one at a
time or `jobs` at once (their builds overlap, their GPU work still takes the lock one at a time).

Child usage: python bench/plain_harness.py PROBLEM CANDIDATE LOCK_FILE TIMING_BUDGET_MS
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import types
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PLAIN_PREFIX = "PLAIN_RESULT "
PLAIN_SEED = 42
PLAIN_TRIALS = 5
PLAIN_TOLERANCE = 1e-4
"""kevin's default fp32 tolerance (kevin.evaluator.evaluate.DEFAULT_TOLERANCE): the verdict (a) is compared on."""
KERNELBENCH_TOLERANCE = 1e-2
"""KernelBench's own atol = rtol, recorded beside it."""


def plain_verdict(result: dict[str, Any], key: str = "correct") -> str:
    """(a)'s verdict at kevin's tolerance, or with key="correct_kernelbench" at KernelBench's."""
    if result.get("broken"):
        return "timeout" if result.get("timed_out") else "error"
    if not result.get("compiled"):
        return "compile_error"
    return "correct" if result.get(key, result.get("correct")) else "wrong"


def judge_trial(got: Any, want: Any) -> dict[str, Any]:
    """One trial's output against the reference's: within kevin's tolerance, within KernelBench's,
    and the largest absolute error (NaN or Inf in the output is never within either)."""
    import torch

    if got.shape != want.shape:
        return {
            "ok": False,
            "ok_kernelbench": False,
            "error": f"shape {tuple(got.shape)} != {tuple(want.shape)}",
        }
    error = (got.double() - want.double()).abs().max().item() if got.numel() else 0.0
    return {
        "ok": torch.allclose(got, want, atol=PLAIN_TOLERANCE, rtol=PLAIN_TOLERANCE),
        "ok_kernelbench": torch.allclose(got, want, atol=KERNELBENCH_TOLERANCE, rtol=KERNELBENCH_TOLERANCE),
        "max_abs_error": error,
    }


# -- (a) the plain harness: the child ------------------------------------------------------------------


def _exec_module(source: str, name: str, filename: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = filename
    sys.modules[name] = module
    exec(compile(source, filename, "exec"), module.__dict__)
    return module


def _cuda_time_ms(fn: Any, inputs: list[Any], budget_ms: float) -> dict[str, Any]:
    import torch

    for _ in range(3):
        fn(*inputs)
    torch.cuda.synchronize()
    times: list[float] = []
    while len(times) < 100 and (len(times) < 10 or sum(times) < budget_ms):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*inputs)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return {"median_ms": statistics.median(times), "n": len(times)}


def plain_child(problem_path: str, candidate_path: str, lock_path: str, budget_ms: float) -> dict[str, Any]:
    """What the plain harness does for one candidate, in this (fresh) process."""
    started = time.perf_counter()
    result: dict[str, Any] = {"compiled": False, "correct": False, "error": ""}
    import torch

    from kevin.evaluator.devlock import DeviceLock

    problem = _exec_module(Path(problem_path).read_text(), "plain_problem", problem_path)
    try:
        candidate = _exec_module(Path(candidate_path).read_text(), "plain_candidate", candidate_path)
        model_class = candidate.ModelNew
    except Exception as exc:  # a build error surfaces here, as load_inline raises it
        result["build_s"] = round(time.perf_counter() - started, 3)
        result["error"] = f"{type(exc).__name__}: {str(exc)[-600:]}"
        return result
    result["compiled"] = True
    result["build_s"] = round(time.perf_counter() - started, 3)
    waited = time.perf_counter()
    with DeviceLock(lock_path).exclusive():  # kevin's device lock: nothing of kevin's overlaps
        held = time.perf_counter()
        result["lock_wait_s"] = round(held - waited, 3)
        try:
            result.update(_plain_gpu_work(problem, model_class, budget_ms))
        except Exception as exc:  # a crash, a bad launch, a wrong shape: the candidate's failure
            result["error"] = f"{type(exc).__name__}: {str(exc)[-600:]}"
        finally:
            with contextlib.suppress(Exception):
                torch.cuda.synchronize()
            result["gpu_s"] = round(time.perf_counter() - held, 3)
    return result


def _plain_gpu_work(problem: types.ModuleType, model_class: Any, budget_ms: float) -> dict[str, Any]:
    import torch

    init = problem.get_init_inputs()
    with torch.device("cuda"):
        torch.manual_seed(PLAIN_SEED)
        reference = problem.Model(*init)
        torch.manual_seed(PLAIN_SEED)
        model = model_class(*init)
    reference, model = reference.cuda(), model.cuda()
    out: dict[str, Any] = {"correct": True, "correct_kernelbench": True, "max_abs_error": 0.0}
    with torch.no_grad():
        for trial in range(PLAIN_TRIALS):
            torch.manual_seed(PLAIN_SEED + 1 + trial)
            with torch.device("cuda"):
                inputs = list(problem.get_inputs())
            got = model(*inputs)
            want = reference(*inputs)
            torch.cuda.synchronize()
            judged = judge_trial(got, want)
            if "error" in judged:
                return {"correct": False, "correct_kernelbench": False, "error": judged["error"]}
            out["max_abs_error"] = max(out["max_abs_error"], judged["max_abs_error"])
            out["correct_kernelbench"] = out["correct_kernelbench"] and judged["ok_kernelbench"]
            if not judged["ok"] and out["correct"]:
                out.update(correct=False, error=f"trial {trial}: max abs error {judged['max_abs_error']:.3g}")
            if not out["correct_kernelbench"]:
                return out  # wrong at both tolerances: no need for more trials
        if not out["correct"]:
            return out
        out["runtime"] = _cuda_time_ms(model, inputs, budget_ms)
        out["baseline"] = _cuda_time_ms(reference, inputs, budget_ms)
    out["speedup"] = out["baseline"]["median_ms"] / out["runtime"]["median_ms"]
    return out


# -- (a) the plain harness: the parent ----------------------------------------------------------------


def plain_eval(
    problem: Path, candidate: Path, lock: Path, budget_ms: float, timeout_s: float, scratch: Path
) -> dict:
    """One candidate through the plain harness in a fresh process with a fresh extensions dir."""
    ext_dir = Path(tempfile.mkdtemp(prefix="ext-", dir=scratch))
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(ext_dir), PYTHONUNBUFFERED="1")
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        str(problem),
        str(candidate),
        str(lock),
        str(budget_ms),
    ]
    started = time.monotonic()
    with open(ext_dir / "stdout", "w+") as out, open(ext_dir / "stderr", "w+") as err:
        child = subprocess.Popen(
            command, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env, start_new_session=True
        )
        try:
            child.wait(timeout=max(timeout_s, 1.0))
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    wall_s = time.monotonic() - started
    shutil.rmtree(ext_dir, ignore_errors=True)
    for line in reversed(stdout.splitlines()):
        if line.startswith(PLAIN_PREFIX):
            result = json.loads(line[len(PLAIN_PREFIX) :])
            result["wall_s"] = round(wall_s, 3)
            return result
    tail = " | ".join(stderr.strip().splitlines()[-3:])
    return {
        "broken": True,
        "timed_out": timed_out,
        "compiled": None,
        "correct": False,
        "wall_s": round(wall_s, 3),
        "error": ("timed out" if timed_out else f"exit {child.returncode}") + (f": {tail}" if tail else ""),
    }


class PlainRunner(threading.Thread):
    """(a) in the background: `rows` in the order given, one candidate at a time, until the limit or
    until too little time is left for another candidate before the deadline."""

    def __init__(self, rows, kb, lock, budget_ms, limit, deadline, reserve_s, scratch, jobs=1):
        super().__init__(name="plain-harness", daemon=True)
        self.rows, self.kb, self.lock, self.budget_ms = rows[:limit], kb, lock, budget_ms
        self.deadline, self.reserve_s, self.scratch, self.jobs = deadline, reserve_s, scratch, jobs
        self.results: list[dict[str, Any]] = []
        self.started_at = self.finished_at = None
        self._results_lock = threading.Lock()

    def run(self) -> None:
        """`jobs` = 1 is the sequential harness. More run that many candidates at once: their
        builds overlap, their GPU work still takes the device lock one at a time (plain_child),
        so each verdict is plain load_inline's; only the wall time is no longer sequential."""
        self.started_at = time.monotonic()
        if self.jobs <= 1:
            for row in self.rows:
                if not self._one(row):
                    break
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(self.jobs) as pool:
                list(pool.map(self._one, self.rows))
        self.finished_at = time.monotonic()

    def _one(self, row: dict[str, Any]) -> bool:
        left = self.deadline - time.monotonic()
        if left < self.reserve_s:
            return False
        result = plain_eval(
            self.kb / row["problem"], Path(row["path"]), self.lock, self.budget_ms, left - 5, self.scratch
        )
        with self._results_lock:
            self.results.append(
                {
                    "id": row["id"],
                    "verdict": plain_verdict(result),
                    "kernelbench_verdict": plain_verdict(result, "correct_kernelbench"),
                    **result,
                }
            )
        print(f"[plain] {row['id']}: {plain_verdict(result)} ({result.get('wall_s')} s)", flush=True)
        return True


if __name__ == "__main__":
    problem_path, candidate_path, lock_path, budget = sys.argv[1:5]
    result = plain_child(problem_path, candidate_path, lock_path, float(budget))
    print(PLAIN_PREFIX + json.dumps(result, default=str), flush=True)
