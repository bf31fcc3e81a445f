"""A KernelBench-style naive harness: the evaluator the adversarial corpus is shown to fool.

It judges a candidate the way the original KernelBench harness did, with none of kevin's defences:

    one process     the problem and then the candidate are exec()'d into ONE namespace (KernelBench's
                    `context` dict), so the candidate sees Model, get_inputs and everything the
                    harness has imported
    models          torch.manual_seed(42); Model(*init); torch.manual_seed(42); ModelNew(*init)
    inputs          get_inputs() once, after the candidate is loaded; moved to the device, never cloned
    correctness     out = ModelNew(*inputs), then ref = Model(*inputs) on the same objects;
                    shapes equal and torch.allclose(out, ref, atol=1e-2, rtol=1e-2)
    timing          the same inputs for every call, WARMUP_CALLS untimed then TIMED_CALLS timed; cpp:
                    time.perf_counter around each call; cuda: CUDA events on the current stream, no
                    L2 flush; the mean per call, as KernelBench reports; speedup = reference / candidate
    verdict         the child prints `NAIVE_RESULT {json}` on stdout; the parent takes the last such line

`naive_eval(problem_source, candidate_source, device)` runs that in a subprocess with a wall-clock
timeout and returns {correct, speedup, error, broken, ...}; `broken` is True when the child hung,
crashed or said nothing (the harness could not give a verdict at all).

Three things here are not naive, and none changes a verdict: the child runs in a session of its
own, killed as a group on timeout, with its output in files (so a candidate's grandchildren cannot
hang this process by holding a pipe); it dies with the thread that started it (PR_SET_PDEATHSIG), so
a harness killed at a call's limit leaves no candidate spinning on the device (s44: one outlived its
cut run and shared the H100 with the next two calls' timings); and on the CPU an address-space
limit (`ADDRESS_SPACE_BYTES`) stands in for the machine's memory, so an abusive candidate fails
instead of taking a shared machine down (not on a GPU: a CUDA context reserves far more address
space than it uses).
Builds may go through kevin's build cache (`build_cache`), which is plain load_inline behind a
content-addressed directory: it saves compile time and nothing else.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kevin.evaluator.confine import die_with_parent

SEED = 42
ATOL = RTOL = 1e-2
WARMUP_CALLS = 3
TIMED_CALLS = 20
RESULT_PREFIX = "NAIVE_RESULT "
ADDRESS_SPACE_BYTES = 8 * 2**30
REPO = Path(__file__).resolve().parents[1]


def naive_eval(
    problem_source: str,
    candidate_source: str,
    device: str = "cpu",
    timeout_s: float = 120.0,
    build_cache: str | None = None,
) -> dict[str, Any]:
    """Judge `candidate_source` against `problem_source` the KernelBench way, in a child process."""
    with tempfile.TemporaryDirectory(prefix="naive-harness-") as tmp:
        folder = Path(tmp)
        (folder / "problem.py").write_text(problem_source)
        (folder / "candidate.py").write_text(candidate_source)
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--child",
            "problem.py",
            "candidate.py",
            device,
        ]
        if build_cache:
            command += ["--build-cache", build_cache]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
        started = time.monotonic()
        with open(folder / "stdout", "wb") as out, open(folder / "stderr", "wb") as err:
            child = subprocess.Popen(
                command,
                cwd=folder,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=env,
                start_new_session=True,
                preexec_fn=functools.partial(_child_setup, not device.startswith("cuda")),
            )
            try:
                returncode = child.wait(timeout=timeout_s)
                timed_out = False
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(child.pid)
                returncode = child.wait()
        _kill_group(child.pid)  # what the child left in its own process group, if anything
        elapsed_s = time.monotonic() - started
        stdout = (folder / "stdout").read_text(errors="replace")
        stderr = (folder / "stderr").read_text(errors="replace")
    verdict = _last_result(stdout)
    if verdict is not None:
        verdict.setdefault("broken", False)
        verdict["wall_s"] = round(elapsed_s, 2)
        return verdict
    if timed_out:
        how = f"hung: no verdict within {timeout_s:g} s"
    elif returncode < 0:
        how = f"crashed: {signal.Signals(-returncode).name}"
    else:
        how = f"exited with code {returncode} without a verdict"
    tail = stderr.strip().splitlines()[-3:]
    return {
        "correct": False,
        "speedup": None,
        "broken": True,
        "error": f"harness broken: {how}" + (f" ({' | '.join(tail)})" if tail else ""),
        "wall_s": round(elapsed_s, 2),
    }


def _child_setup(limit_memory: bool) -> None:
    """In the child, before exec: SIGKILL when the starting thread ends (or already has), and on the
    CPU the address-space limit."""
    die_with_parent()
    if limit_memory:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _last_result(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            try:
                data = json.loads(line[len(RESULT_PREFIX) :])
            except ValueError:
                continue
            if isinstance(data, dict):
                return data
    return None


# -- the child: what the naive harness does, in the order KernelBench does it ---------------------


def _report(**fields: Any) -> None:
    fields.setdefault("error", "")
    print(RESULT_PREFIX + json.dumps(fields, default=str), flush=True)


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize(device=device)


def _time_calls(model: Any, inputs: list[Any], device: str) -> float:
    """Mean milliseconds per call over TIMED_CALLS calls on the same inputs."""
    import torch

    for _ in range(WARMUP_CALLS):
        model(*inputs)
    _sync(device)
    times_ms = []
    for _ in range(TIMED_CALLS):
        if device.startswith("cuda"):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            model(*inputs)
            end.record()
            torch.cuda.synchronize(device=device)
            times_ms.append(start.elapsed_time(end))
        else:
            started = time.perf_counter()
            model(*inputs)
            times_ms.append((time.perf_counter() - started) * 1e3)
    return sum(times_ms) / len(times_ms)


def child(problem_path: str, candidate_path: str, device: str, build_cache: str | None) -> None:
    import torch

    if build_cache:
        from kevin.evaluator import build

        build.install(Path(build_cache), build.BuildLog())
    context: dict[str, Any] = {"__name__": "naive_context"}
    exec(compile(Path(problem_path).read_text(), "problem.py", "exec"), context)
    try:
        exec(compile(Path(candidate_path).read_text(), "candidate.py", "exec"), context)
    except Exception as exc:
        _report(correct=False, speedup=None, error=f"candidate failed to load: {type(exc).__name__}: {exc}")
        return
    Model, ModelNew = context["Model"], context.get("ModelNew")
    if ModelNew is None:
        _report(correct=False, speedup=None, error="no ModelNew")
        return
    init_inputs = context["get_init_inputs"]()
    with torch.no_grad():
        torch.manual_seed(SEED)
        model = Model(*init_inputs).to(device)
        torch.manual_seed(SEED)
        model_new = ModelNew(*init_inputs).to(device)
        inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in context["get_inputs"]()]
        try:
            out = model_new(*inputs)
            _sync(device)
        except Exception as exc:
            _report(correct=False, speedup=None, error=f"candidate raised: {type(exc).__name__}: {exc}")
            return
        ref = model(*inputs)
        _sync(device)
        if out.shape != ref.shape:
            _report(correct=False, speedup=None, error=f"shape {tuple(out.shape)} != {tuple(ref.shape)}")
            return
        correct = bool(torch.allclose(out, ref, atol=ATOL, rtol=RTOL))
        try:
            max_abs_diff = float(torch.max(torch.abs(out - ref)))
        except Exception:
            max_abs_diff = None
        if not correct:
            _report(correct=False, speedup=None, max_abs_diff=max_abs_diff, error="output mismatch")
            return
        candidate_ms = _time_calls(model_new, inputs, device)
        reference_ms = _time_calls(model, inputs, device)
    _report(
        correct=True,
        speedup=reference_ms / candidate_ms if candidate_ms > 0 else float("inf"),
        runtime_ms=candidate_ms,
        reference_ms=reference_ms,
        max_abs_diff=max_abs_diff,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problem")
    parser.add_argument("candidate")
    parser.add_argument("device", nargs="?", default="cpu")
    parser.add_argument("--child", action="store_true", help="run in this process (internal)")
    parser.add_argument("--build-cache", default=None)
    parser.add_argument("--timeout-s", type=float, default=120.0)
    args = parser.parse_args(argv)
    if args.child:
        child(args.problem, args.candidate, args.device, args.build_cache)
        return 0
    verdict = naive_eval(
        Path(args.problem).read_text(),
        Path(args.candidate).read_text(),
        args.device,
        timeout_s=args.timeout_s,
        build_cache=args.build_cache,
    )
    print(json.dumps(verdict, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
