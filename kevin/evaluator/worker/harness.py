"""The worker's harness: bookkeeping, the order of the run, admission to the device.

The stages are mixins, one module each (see kevin.evaluator.worker).
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kevin.evaluator import build, confine, devlock, probes, timing
from kevin.evaluator.compare import compare, summarize_trials
from kevin.evaluator.confine import Channel
from kevin.evaluator.worker.baseline import BaselineStage
from kevin.evaluator.worker.reference import ReferenceStage
from kevin.evaluator.worker.support import (
    DTYPES,
    OWN_MODULES,
    Failure,
    forget_module,
    load_module,
    short_exception,
)
from kevin.evaluator.worker.timed import TimingStage
from kevin.evaluator.worker.trials import TrialsStage


class Harness(TrialsStage, TimingStage, ReferenceStage, BaselineStage):
    """One evaluation inside the worker: the run's order and the bookkeeping every stage shares."""

    def __init__(self, job: dict[str, Any], channel: Channel) -> None:
        import torch

        self.job = job
        self.channel = channel
        self.torch = torch
        self.device = job["device"]
        self.dtype = getattr(torch, DTYPES[job["precision"]])
        self.is_cuda = self.device.startswith("cuda")
        self.rng = random.Random(job["seed"] ^ 0x5EED)
        # Bound now: later attribute patches by the candidate do not reach the comparison.
        timing.bind()
        self.compare = compare
        self.summarize_trials = summarize_trials
        self.clone = torch.clone
        self.equal = torch.equal
        self.isfinite = torch.isfinite
        self.abs = torch.abs
        self.sub = torch.sub
        self.stage_started = time.perf_counter()
        self.stage_seconds: dict[str, float] = {}
        self.stage_name = "setup"
        self.flags: list[str] = []
        self.build_log = build.BuildLog()
        self.compiled = False
        self.checks: dict[str, Any] = {}
        self.trace: dict[str, Any] = {}
        self.lock: devlock.DeviceLock | None = None
        self.correctness: dict[str, Any] = {}

    # -- bookkeeping ---------------------------------------------------------------------------
    def stage(self, name: str) -> None:
        now = time.perf_counter()
        spent = self.stage_seconds.get(self.stage_name, 0.0) + now - self.stage_started
        self.stage_seconds[self.stage_name] = round(spent, 4)
        self.stage_name, self.stage_started = name, now
        self.channel.send({"event": "stage", "stage": name})

    def sync(self) -> None:
        if self.is_cuda:
            self.torch.cuda.synchronize()

    def global_flags(self) -> dict[str, Any]:
        torch = self.torch
        return {
            "matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
            "cudnn.benchmark": torch.backends.cudnn.benchmark,
            "cudnn.deterministic": torch.backends.cudnn.deterministic,
            "cudnn.enabled": torch.backends.cudnn.enabled,
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "default_dtype": str(torch.get_default_dtype()),
            "grad_enabled": torch.is_grad_enabled(),
            "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
            # OpenMP's count follows omp_set_num_threads from native code too; a pool of 32 on a
            # 2-core machine slows every eager op timed afterwards (the baseline) ~10x.
            "num_threads": torch.get_num_threads(),
            "num_interop_threads": torch.get_num_interop_threads(),
        }

    def set_strict_flags(self) -> None:
        # The reference is strict fp32: TF32 would move it by ~1e-3, beyond the fp32 tolerance.
        torch = self.torch
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_grad_enabled(False)
        # One fixed CPU thread count for candidate and baseline alike (torch's default when the
        # job does not name one), recorded with the result.
        threads = self.job.get("cpu_threads") or self.checks.setdefault(
            "cpu_threads", torch.get_num_threads()
        )
        torch.set_num_threads(threads)
        self.checks["cpu_threads"] = threads

    def tamper_check(self, when: str) -> None:
        changed = probes.namespace_changes(
            self.namespaces_before, probes.namespace_snapshot(self.torch, OWN_MODULES)
        ) + probes.dispatch_changes(self.dispatch_before, probes.dispatch_snapshot(self.torch))
        if changed:
            raise Failure(
                "runtime",
                f"the candidate {when} changed what kevin relies on: " + ", ".join(changed[:8]),
                flags=["tampering"],
            )

    def clone_args(self, args: list[Any]) -> list[Any]:
        return [self.clone(a) if isinstance(a, self.torch.Tensor) else a for a in args]

    # -- the run ---------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        torch = self.torch
        job = self.job
        if self.is_cuda:
            torch.cuda.set_device(self.device)
        self.set_strict_flags()
        # Installed before the problem loads too: a problem may build extensions of its own.
        build.install(Path(job["build_cache"]), self.build_log, fast=job.get("fast_build", True))
        try:
            problem = load_module(job["problem_source"], "kevin_problem_init", "<problem>")
            init_inputs = list(problem.get_init_inputs())
            input_bytes = devlock.input_bytes_on_meta(problem)
        except BaseException as exc:
            raise Failure(
                "runtime",
                "the reference problem failed to load:\n" + short_exception(exc),
                blame="infrastructure",
            ) from None
        del problem
        forget_module("kevin_problem_init")
        self.flags_before = self.global_flags()
        self.namespaces_before = probes.namespace_snapshot(torch, OWN_MODULES)
        self.threads_before = threading.active_count()

        # The profiler's start-up (seconds with CUDA) is paid here, outside the device lock.
        probes.warm_profiler(self.is_cuda)
        self.dispatch_before = probes.dispatch_snapshot(torch)  # after kevin's own lazy imports
        self.stage("compile")
        try:
            candidate = load_module(job["candidate_source"], "kevin_candidate", job["candidate_filename"])
        except BaseException as exc:
            raise Failure(
                "compile",
                short_exception(exc),
                detail="build" if self.build_log.records and self.build_log.records[-1].error else "import",
            ) from None
        model_class = getattr(candidate, "ModelNew", None)
        if not isinstance(model_class, type):
            raise Failure("compile", "the candidate defines no class ModelNew")
        self.compiled = True
        del candidate

        self.stage("wait_gpu")
        self.admit(input_bytes)
        with self.device_section("inputs", exclusive=False):
            trials, fresh = self.draw_inputs()
            self.stage("correctness")
            model_new, outputs = self.run_trials(model_class, init_inputs, trials)
        with self.device_section("timing", exclusive=True):
            stats, buffers, kept = self.time_candidate(model_new, trials[0], fresh)
        model_new = model_class = None  # drop the candidate before the reference exists
        forget_module("kevin_candidate")
        left = confine.kill_descendants(os.getpid())
        if left:
            raise Failure(
                "runtime",
                f"the candidate left {left} process(es) running (killed): processes are not allowed",
                flags=["left_processes"],
            )
        self.set_strict_flags()

        with self.device_section("reference", exclusive=False):
            model = self.check_outputs(init_inputs, trials, outputs, fresh, buffers, kept, stats)
        baseline = self.baseline(model, buffers, fresh)
        self.stage("done")
        return {
            "stage": "ok",
            "compiled": True,
            "correct": True,
            "timing": stats.to_dict(),
            "baseline": baseline,
            "correctness": self.correctness,
        }

    # -- the device ------------------------------------------------------------------------------
    def admit(self, input_bytes: int | None) -> None:
        """Take the device's admission slots (see kevin.evaluator.devlock): one for a job that fits beside
        others, all of them for one too big to share the device's memory."""
        path = self.job.get("device_lock")
        if not path:
            return
        slots = int(self.job.get("device_slots", 1))
        self.lock = devlock.DeviceLock(path, slots)
        need = devlock.footprint_bytes(
            input_bytes, self.job["trials"] + self.job.get("distribution_trials", 0)
        )
        total = self.torch.cuda.get_device_properties(self.device).total_memory if self.is_cuda else 0
        weight = devlock.weight_for(need, total, slots) if self.is_cuda else 1
        weight = int(self.job.get("admission_weight") or weight)  # a rerun alone after an OOM
        self.lock.admit(weight)
        self.checks["device_admission"] = {"weight": weight, "slots": slots, "estimate_bytes": need}
        if self.is_cuda:
            devlock.wait_for_memory(self.torch, need if weight < slots else None)

    @contextmanager
    def device_section(self, stage: str, exclusive: bool) -> Iterator[None]:
        """Run a stage holding the device shared (other workers' non-timing work may overlap) or
        exclusively (nothing else runs on it: timing)."""
        if self.lock is None:
            self.stage(stage)
            yield
            return
        self.stage("wait_gpu")
        with self.lock.exclusive() if exclusive else self.lock.shared():
            self.stage(stage)
            yield
            try:
                self.sync()  # all of this section's work is done before another worker times
            except BaseException as exc:
                # Work still in flight here was launched by the candidate (kevin's own stages
                # synchronize before they return); after the candidate, it is ours.
                blame = "infrastructure" if stage in ("reference", "baseline") else "candidate"
                raise Failure("runtime", short_exception(exc), blame=blame) from None


    def _detach(self, value: Any) -> Any:
        torch = self.torch
        if isinstance(value, torch.Tensor):
            return self.clone(value.detach())
        return value


