"""The judge's harness: bookkeeping and the order of the run (admission to the device and its
sections: kevin.evaluator.worker.device).

The judge never loads candidate code. It builds the reference and draws every input itself, and
has a runner (kevin.evaluator.worker.runner, a confined process of its own) load the candidate and
run it on inputs drawn from seeds the judge reveals one call at a time. The stages are mixins, one
module each (see kevin.evaluator.worker).
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from pathlib import Path
from typing import Any

from kevin.evaluator import build, confine, devlock, fastbuild, probes, spawn
from kevin.evaluator import inputs as trial_inputs
from kevin.evaluator.compare import compare, summarize_trials
from kevin.evaluator.confine import Channel
from kevin.evaluator.spares import BOOT_VARIABLE, boot_spec
from kevin.evaluator.worker.baseline import BaselineStage
from kevin.evaluator.worker.device import DeviceStage
from kevin.evaluator.worker.handle import CallTimedOut, RunnerFailed, RunnerHandle
from kevin.evaluator.worker.reference import ReferenceStage
from kevin.evaluator.worker.support import (
    DTYPES,
    Failure,
    cast_floating,
    cpu_threads,
    load_module,
    short_exception,
)
from kevin.evaluator.worker.timed import TimingStage
from kevin.evaluator.worker.trials import TrialsStage

RUNNER_MALLOC = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824"
"""The runners' heap policy, fixed (glibc tunables, read at their start). glibc's defaults adapt to
what a process has freed so far: an output of a megabyte could come from the heap and stay, or be
handed back to the kernel at every free and page-faulted in again at the next call (a quarter of a
millisecond per megabyte), by the chance of the heap's layout in that process. A 1 MB relu timed
at 0.10 ms in one runner and 0.43 ms in the next (session 25, CPU back end: the reference's
baseline fell in the slow mode in about half the runners, so speedups moved 4x between
evaluations). With the policy fixed, blocks up to 32 MiB (glibc's ceiling for the threshold) come
from the heap, and freed memory is kept for reuse up to a gigabyte: a call pays for its memory's
first touch once, as in a serving process that has run for a while, and the same in every runner."""

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def runner_heap() -> None:
    """RUNNER_MALLOC set by mallopt, for a runner forked from its judge (whose glibc read its own
    tunables at its start, and a fork reads none). Both settings also turn glibc's adaptation off."""
    import ctypes

    tunables = dict(item.split("=") for item in RUNNER_MALLOC.split(":"))
    libc = ctypes.CDLL(None)
    for option, name in ((_M_MMAP_THRESHOLD, "mmap_threshold"), (_M_TRIM_THRESHOLD, "trim_threshold")):
        if not libc.mallopt(option, int(tunables[f"glibc.malloc.{name}"])):
            raise OSError(f"mallopt refused the runners' {name}")


def launch_runner(spec: dict[str, Any], home: Path, traced: bool = True, fork: bool = False) -> RunnerHandle:
    """Start a runner in `home` (created), confined before it starts, and send it `boot` for the
    boot spec (kevin.evaluator.spares.boot_spec); its reply is collected later (`reply("boot")`).
    A runner that will never be traced (the clean one: brackets and the baseline) skips warming the
    profiler, seconds of a loaded host's CPU. `fork`: a fork of this judge, where
    kevin.evaluator.spawn.forkable allows it (a worker's boot, before its job, its CUDA context and
    its threads), so the runner starts with torch imported: seconds of CPU each on a loaded host."""
    home.mkdir()
    caches = {
        "TMPDIR": home,
        "HOME": home,
        "TRITON_CACHE_DIR": home / "triton",
        "CUDA_CACHE_PATH": home / "cuda",
    }
    # TEARDOWN_CUPTI=1: Kineto finalizes CUPTI when a profile ends. Without it (the default before
    # Kineto made teardown the default for CUDA >= 12.6) CUPTI stays subscribed after profiling and
    # slows the process's CUDA calls from then on (pytorch/pytorch#144455): the candidate's runner
    # warms the profiler and traces the candidate before its timing, and the control runner that
    # brackets it and times the baseline never profiles, so the residue would count against the
    # candidate alone (a suspect for s22's slower fetches from candidates' runners).
    env = dict(
        os.environ,
        KEVIN_MAX_FILE_BYTES=str(spec["max_file_bytes"]),
        TEARDOWN_CUPTI="1",
        GLIBC_TUNABLES=RUNNER_MALLOC,
    )
    env.pop(BOOT_VARIABLE, None)
    env.update({name: str(path) for name, path in caches.items()})
    cache = Path(spec["build_cache"])
    # Landlock's rules name existing folders: the cache's and the shims' folders are made now, before
    # the broker of a worker booted ahead of its job has built anything into them.
    cache.mkdir(parents=True, exist_ok=True)
    fastbuild.shim_root(cache).mkdir(parents=True, exist_ok=True)
    is_cuda = str(spec["device"]).startswith("cuda")
    lock = confine.LockDown(
        job_dir=str(home),
        build_cache=str(cache),
        # The fast builds' shim (built by the broker), and the folder kevin is imported from:
        # without an installed package, `import kevin` lists it (PYTHONPATH).
        readable=(str(fastbuild.shim_root(cache)), str(Path(__file__).resolve().parents[3])),
        cuda=is_cuda,
        unix_sockets=is_cuda,
    )
    import torch

    fork = fork and not spawn.forkable()
    traced = probes.warms_profiler(traced)  # what its boot does: the job's `traced` warms, nothing more
    if fork and traced:
        # Once per judge: its forks then warm the profiler without importing. Those imports start no
        # CUDA on the torch of s28; should another's start the driver, no runner is forked after it.
        probes.preload_profiler()
        if spawn.cuda_driver_started():
            spawn.seal_forks("importing the profiler's modules started the CUDA driver")
            fork = False
    runner = RunnerHandle(
        int(spec["area_bytes"]), lock=lock, env=env, cwd=str(home), forked=runner_heap if fork else None
    )
    runner.send(
        "boot",
        job={
            "device": spec["device"],
            "cpu_threads": cpu_threads(spec["cpu_threads"], torch.get_num_threads()),
            "flush_l2": spec["flush_l2"],
            "build_cache": spec["build_cache"],
            "fast_build": spec["fast_build"],
            "traced": traced,
        },
    )
    return runner


LOAD_WAIT_S = 60.0
"""The longest a candidate's `load` may run in its runner between two messages (its import and its
model's construction, which hold the device shared: a hang there holds off every other worker's
timing for this long, not for the compile stage's deadline). The builds it asks for do not count:
the judge runs them between the runner's messages."""


class Harness(TrialsStage, TimingStage, ReferenceStage, BaselineStage, DeviceStage):
    """One evaluation, judged from outside the candidate's process."""

    def __init__(
        self,
        job: dict[str, Any],
        channel: Channel,
        broker: Any,
        runner: RunnerHandle | None = None,
        control: RunnerHandle | None = None,
    ) -> None:
        import torch

        self.job = job
        self.channel = channel
        self.broker = broker
        self.booted_runner = runner
        """The candidate's runner when it was launched before the job (`launch_runner` in boot_up)."""
        self.runners_started = (runner is not None) + (control is not None)
        self.overhead: dict[str, Any] = {}
        """The cycle overhead and clean fetch time: the candidate's runner's while clean
        (`calibrate`), then the one its timing was bracketed by (`time_bracketed`)."""
        self.control: RunnerHandle | None = control
        """The runner that never loads a candidate (launched before the job by a spare worker, else
        by `run`): the timing's bracket, then the baseline's."""
        self.reference_call_s = float("inf")
        """The reference's fastest call on a trial's inputs (set by the trials): the per-call deadline."""
        self.torch = torch
        self.device = job["device"]
        self.dtype = getattr(torch, DTYPES[job["precision"]])
        self.is_cuda = self.device.startswith("cuda")
        self.rng = random.Random(job["seed"] ^ 0x5EED)
        self.compare = compare
        self.summarize_trials = summarize_trials
        self.stage_started = time.perf_counter()
        self.stage_seconds: dict[str, float] = {}
        self.stage_name = "setup"
        self.stage_log: list[list[Any]] = [[self.stage_name, time.time()]]
        """[stage, `time.time()` at its start] in order (the verdict's `checks.timeline`)."""
        self.flags: list[str] = []
        self.compiled = False
        self.checks: dict[str, Any] = {}
        self.trace: dict[str, Any] = {}
        self.builds: list[dict[str, Any]] = []
        self.lock: devlock.DeviceLock | None = None
        self.unadmitted: devlock.DeviceLock | None = None
        self.correctness: dict[str, Any] = {}

    # -- bookkeeping ---------------------------------------------------------------------------------
    def stage(self, name: str) -> None:
        now = time.perf_counter()
        spent = self.stage_seconds.get(self.stage_name, 0.0) + now - self.stage_started
        self.stage_seconds[self.stage_name] = round(spent, 4)
        self.stage_name, self.stage_started = name, now
        self.stage_log.append([name, time.time()])
        self.channel.send({"event": "stage", "stage": name})

    def sync(self) -> None:
        if self.is_cuda:
            self.torch.cuda.synchronize()

    def set_strict_flags(self) -> None:
        # The reference is strict fp32: TF32 would move it by ~1e-3, beyond the fp32 tolerance.
        torch = self.torch
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_grad_enabled(False)
        threads = cpu_threads(self.job.get("cpu_threads"), torch.get_num_threads())
        torch.set_num_threads(threads)
        self.checks["cpu_threads"] = threads

    def clone_args(self, args: list[Any]) -> list[Any]:
        return [self.torch.clone(a) if isinstance(a, self.torch.Tensor) else a for a in args]

    def runner_problem(self) -> dict[str, Any]:
        """What a booted runner learns of the job: never the seed, the tolerances or the baseline."""
        job = self.job
        return {
            "precision": job["precision"],
            "problem_source": job["problem_source"],
            "weight_seed": job["weight_seed"],
        }

    def start_runner(self, traced: bool = True) -> RunnerHandle:
        """A fresh runner in a directory of its own under the job's, confined before it starts."""
        return self.runner_ready(self.launch_runner(traced))

    def launch_runner(self, traced: bool = True) -> RunnerHandle:
        """Start a runner and send it its boot without waiting: its Python, torch and CUDA start-up
        (seconds) then overlap whatever this process does until `runner_ready`."""
        self.runners_started += 1
        while (Path.cwd() / f"runner{self.runners_started}").exists():  # one booted and discarded
            self.runners_started += 1
        try:
            runner = launch_runner(boot_spec(self.job), Path.cwd() / f"runner{self.runners_started}", traced)
        except (OSError, RuntimeError) as exc:
            raise Failure(
                "runtime", f"kevin's runner could not start: {exc}", blame="infrastructure"
            ) from None
        return runner

    def runner_ready(self, runner: RunnerHandle) -> RunnerHandle:
        """Wait for a launched runner's boot, then give it the problem; a runner that cannot start is
        our failure."""
        self.checks["confinement"] = runner.confinement
        try:
            if runner.boot_reply is None:
                runner.boot_reply = runner.reply("boot")
            if self.is_cuda and runner.context_reply is None:
                with self.shared_device(self.stage_name):
                    runner.context_reply = runner.request("context")
            if self.is_cuda and runner.warm_reply is None:  # outside the lock (Runner.warm)
                runner.warm_reply = runner.reply("warm") if runner.warm_sent else runner.request("warm")
            runner.request("setup", job=self.runner_problem())
        except RunnerFailed as failed:
            runner.kill()
            raise Failure(
                "runtime", "kevin's runner failed to start: " + failed.error, blame="infrastructure"
            ) from None
        seconds: dict[str, Any] = {}
        for reply in (runner.boot_reply, runner.context_reply or {}, runner.warm_reply or {}):
            seconds.update(reply.get("seconds") if isinstance(reply.get("seconds"), dict) else {})
            if reply.get("profiler_imports") is not None:
                seconds["profiler_imports"] = reply["profiler_imports"]
        waited = self.checks.setdefault("runner_start_s", [])
        waited.append({"ready": round(time.perf_counter() - runner.started, 3), **seconds})
        return runner

    # -- the run -------------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        self.set_strict_flags()
        # The candidate's runner starts first (or started before the job: a spare worker's): its
        # start-up overlaps this process's own.
        runner = self.booted_runner or self.launch_runner()
        # A second runner that never loads a candidate: its cycles bracket the candidate's timing
        # (`time_bracketed`), then it times the baseline when one is wanted. Its start overlaps
        # everything up to the timing.
        try:
            self.control = self.control or self.launch_runner(traced=False)
        except BaseException:
            runner.kill()
            raise
        try:
            return self.judge(runner)
        finally:
            if self.control is not None:
                self.control.kill()

    def judge(self, runner: RunnerHandle) -> dict[str, Any]:
        try:
            Path(self.job["build_cache"]).mkdir(parents=True, exist_ok=True)
            build.install(
                Path(self.job["build_cache"]), build.BuildLog(), fast=self.job.get("fast_build", True)
            )
            self.load_reference()
        except BaseException:
            runner.kill()
            raise
        self.runner_ready(runner)
        try:
            self.overhead = self.calibrate(runner, "candidate")
            self.threads_before = runner.threads()
            try:
                self.state_before = runner.request("state")
            except RunnerFailed as failed:
                raise Failure(
                    "runtime", "kevin's runner failed: " + failed.error, blame="infrastructure"
                ) from None
            self.load_candidate(runner)
            self.stage("wait_gpu")
            self.admit(self.input_bytes)
            with self.device_section("correctness", exclusive=False):
                self.check_trials(runner)
                if not probes.trace_after_timing():  # the library check's trace, in the same section
                    self.trace_candidate(runner)
            control = self.runner_ready(self.control)
            with self.device_section("timing", exclusive=True):
                record, self.overhead = self.time_candidate(runner, control)
            if probes.trace_after_timing():  # the diagnostic's order (probes.TRACE_AFTER_TIMING_VARIABLE)
                with self.device_section("correctness", exclusive=False):
                    self.trace_candidate(runner)
            self.after_candidate(runner)
        finally:
            left = runner.kill()
        if left:
            raise Failure(
                "runtime",
                f"the candidate left {left} process(es) running (killed): processes are not allowed",
                flags=["left_processes"],
            )
        with self.device_section("reference", exclusive=False):
            self.check_timed_outputs(record)
        stats = self.timing_stats(record, self.overhead)
        self.bound_check(stats)
        baseline = self.baseline(stats["median_ms"])
        self.stage("done")
        return {
            "stage": "ok",
            "compiled": True,
            "correct": True,
            "timing": stats,
            "baseline": baseline,
            "correctness": self.correctness,
        }

    def load_reference(self) -> None:
        """The problem, loaded here only: the reference model, the init inputs, the input sizes."""
        torch, job = self.torch, self.job
        try:
            problem = load_module(job["problem_source"], "kevin_problem", "<problem>")
            self.init_inputs = list(problem.get_init_inputs())
            self.input_bytes = devlock.input_bytes_on_meta(problem)
            torch.manual_seed(job["weight_seed"])
            model = problem.Model(*self.init_inputs)
            # This process's CUDA context (a worker that did not boot ahead) and the weights' copy
            # are device work: beside other workers' shared work, never inside a timing.
            with self.device_work(self.shared_device(self.stage_name)):
                if self.is_cuda:
                    torch.cuda.set_device(self.device)
                self.model = cast_floating(model.to(self.device), self.dtype)
                self.sync()
            self.get_inputs = problem.get_inputs
        except BaseException as exc:
            raise Failure(
                "runtime",
                "the reference problem failed to load:\n" + short_exception(exc),
                blame="infrastructure",
            ) from None

    def draw(self, seed: int, shift: int | None = None) -> list[Any]:
        """The inputs a runner draws from `seed`, drawn here the same way."""
        return trial_inputs.draw(self.get_inputs, seed, shift, self.device, self.dtype)

    def load_candidate(self, runner: RunnerHandle) -> None:
        """The candidate's import and its model's construction, in its runner, holding the device
        shared: both are code the candidate chose, and may put work on the device (weights, a
        kernel at import) that must not land inside another worker's timing. The builds its
        `load_inline` calls ask for are served with the device let go (seconds to minutes of the
        compiler, while the runner waits for the answer)."""
        self.stage("compile")
        job = self.job
        section = contextlib.ExitStack()

        def build(arguments: Any) -> dict[str, Any]:
            section.close()
            try:
                return self.broker.build(arguments).to_dict()
            finally:  # no stage event: the compile stage's one deadline covers the whole load
                held = self.device_lock() if self.is_cuda else None
                if held is not None:
                    section.enter_context(held.shared())

        try:
            section.enter_context(self.device_work(self.shared_device("compile")))
            reply = runner.request(
                "load",
                builds=build,
                deadline_s=LOAD_WAIT_S,
                source=job["candidate_source"],
                filename=job["candidate_filename"],
                class_name="ModelNew",
            )
        except CallTimedOut:
            raise Failure(
                "timeout",
                f"the candidate's import or model construction ran past {LOAD_WAIT_S:g} s without a reply "
                "(kevin's limit while it holds the device; builds it asks for do not count) and was killed",
            ) from None
        except RunnerFailed as failed:
            detail = "build" if failed.stage == "compile" and "Error building" in failed.error else "import"
            stage = failed.stage if failed.stage in ("compile", "runtime") else "compile"
            raise failed.failure(stage, detail=detail) from None
        finally:
            section.close()
        self.builds = [b for b in reply.get("builds", []) if isinstance(b, dict)][:16]
        self.compiled = True
