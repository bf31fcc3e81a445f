"""Evaluate one candidate against one task: `evaluate(task, source, config) -> EvalResult`.

The flow (each step's failure is a typed result, never an exception):

    static gate (kevin.gate, optional) -> judge process (kevin.evaluator.worker, under
    kevin.evaluator.sandbox) with a confined runner for the candidate: build (broker) ->
    correctness trials -> timing (the judge's clock) -> timed outputs -> baseline (a clean runner)
    -> EvalResult + feedback

Who is blamed: the candidate for anything its code does (build errors, crashes, hangs, wrong
output, memory blow-ups); `infrastructure` when the worker fails before the candidate is loaded,
while waiting for the GPU, or inside the reference or baseline, so that a trainer drops the sample
instead of punishing the model for our fault.

Baselines (eager, and torch.compile when asked) are cached on disk, keyed by the task's content
hash, the precision, the torch version, the host, the device index and the CPU thread count; a
cached entry records the GPU name and is used only on a GPU of that name. Only the parent writes
the cache, and only from an evaluation that passed; neither the judge nor the runners write it. The
key includes `TIMING_PROTOCOL`, so a baseline timed another way is never compared with this one's.

The judge's channel messages carry a token only it holds; any other line on the channel makes the
result `tampering`, whatever it said. The candidate's process (the runner) has no channel here at
all: it answers the judge, which treats what it says as data to check.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import platform
import secrets
import sys
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kevin.errors import UsageError
from kevin.evaluator import devlock, feedback
from kevin.evaluator.result import EVIDENCE_FLAGS, EvalResult
from kevin.evaluator.sandbox import Limits, WorkerOutcome, run_worker
from kevin.evaluator.spares import SparePool
from kevin.evaluator.timing import TimingConfig
from kevin.tasks import Task

BACKENDS = ("cuda", "triton", "cpp")
GPU_BACKENDS = ("cuda", "triton")
"""Back ends whose candidates run on the GPU (the same judge/runner flow; triton builds nothing
through the broker: its kernels compile in the runner, on the first call, into the job's own
TRITON_CACHE_DIR)."""
PRECISIONS = ("fp32", "fp16", "bf16")
DEFAULT_TOLERANCE = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 1e-2}
TIMING_PROTOCOL = "judge-cycle/3"
"""How baselines are measured (kevin.evaluator.worker.timed); part of the baseline cache key, so a
baseline timed another way is never compared with a candidate timed this way. /2: torch's
default CPU threads less one core (a cached /1 baseline of the same key ran on all of them). /3:
on the GPU the judge and its runners spin on cores of their own (`timed.seated_for_timing`); a /2
baseline could have been timed with both on one core, two scheduler slices a cycle."""
CANDIDATE_STAGES = ("compile", "correctness", "timing")
"""A deadline or memory blow-up in these stages is the candidate's; elsewhere it is ours."""


def _cache_home() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kevin"


@dataclass(frozen=True)
class EvalConfig:
    backend: str = "cuda"
    """`cuda` (load_inline CUDA on the GPU), `triton` (@triton.jit kernels on the GPU) or `cpp`
    (load_inline C++ on the CPU)."""
    precision: str = "fp32"
    """Inputs and weights are cast to this for candidate and reference alike."""
    trials: int = 5
    """Correctness trials, each on fresh inputs drawn from the secret seed."""
    distribution_trials: int = 2
    """Extra trials on inputs moved to other distributions (kevin.evaluator.inputs.draw)."""
    atol: float | None = None
    """Absolute tolerance; None takes the precision's default (fp32 1e-4, fp16/bf16 1e-2)."""
    rtol: float | None = None
    seed: int | None = None
    """Secret seed for inputs and weights; None draws a fresh one per evaluation."""
    timing: TimingConfig = field(default_factory=TimingConfig)
    compile_baseline: bool = False
    """Also time torch.compile of the reference and report `speedup_compile`."""
    baseline_cache: bool = True
    cache_dir: str | None = None
    """Root for the build and baseline caches; None is ~/.cache/kevin (XDG_CACHE_HOME honoured)."""
    device_index: int = 0
    cpu_threads: int | None = None
    """torch's CPU thread count in the worker, for candidate and baseline alike; None is torch's
    default less one core, kept for the judge's clock (kevin.evaluator.worker.support.cpu_threads). The count used is in `checks.cpu_threads` and keys the baseline cache."""
    lock_dir: str = "/tmp"
    """Where the per-device lock files live: workers on one device time one at a time."""
    device_slots: int = 4
    """Workers that may hold one device at once (kevin.evaluator.devlock): their inputs, correctness trials
    and reference runs overlap, their timing never overlaps anything. A job too big for its share
    of device memory takes every slot. 1 = one worker on the device from inputs to exit."""
    device_reserved_bytes: int = 0
    """Device memory kevin's booted workers keep besides their jobs' data (CUDA contexts), which
    admission does not share among jobs: set by the service's plan (kevin.evaluator.devmem)."""
    limits: Limits = field(default_factory=Limits)
    static_check: bool = True
    """Run the static gate (kevin.gate) before building."""
    fast_build: bool = True
    """Try kevin.evaluator.fastbuild (light headers, shared binding) before the real load_inline."""
    workdir_root: str | None = None
    keep_workdir: bool = False

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise UsageError(f"unknown backend {self.backend!r}; use one of {', '.join(BACKENDS)}")
        if self.precision not in PRECISIONS:
            raise UsageError(f"unknown precision {self.precision!r}; use one of {', '.join(PRECISIONS)}")
        if self.trials < 1:
            raise UsageError(f"trials must be at least 1 (got {self.trials})")
        if self.device_slots < 1:
            raise UsageError(f"device_slots must be at least 1 (got {self.device_slots})")
        if self.cpu_threads is not None and self.cpu_threads < 1:
            raise UsageError(
                f"cpu_threads must be at least 1, or None for torch's default (got {self.cpu_threads})"
            )
        for name in ("atol", "rtol"):
            value = getattr(self, name)
            if value is not None and not value >= 0:
                raise UsageError(f"{name} must be >= 0 (got {value})")

    @property
    def tolerances(self) -> tuple[float, float]:
        default = DEFAULT_TOLERANCE[self.precision]
        return (default if self.atol is None else self.atol, default if self.rtol is None else self.rtol)

    @property
    def cache_root(self) -> Path:
        return Path(self.cache_dir) if self.cache_dir else _cache_home()

    @property
    def build_cache(self) -> Path:
        """The build broker's cache (what workers read; kevin.evaluator.prebuild fills its toolchain)."""
        return self.cache_root / "builds"

    @property
    def device(self) -> str:
        return f"cuda:{self.device_index}" if self.on_gpu else "cpu"

    @property
    def on_gpu(self) -> bool:
        return self.backend in GPU_BACKENDS


def evaluate(
    task: Task, candidate_source: str, config: EvalConfig | None = None, *, spares: SparePool | None = None
) -> EvalResult:
    """Evaluate `candidate_source` (a ModelNew module) against `task`. Never raises for a bad
    candidate; raises only for bugs in kevin itself. With `spares`, the worker is one booted ahead
    of time when one is ready (kevin.evaluator.spares), and one is started for a later call."""
    config = config or EvalConfig()
    common = {"backend": config.backend, "precision": config.precision, "task_id": task.id}
    if config.static_check:
        rejected = _static_gate(candidate_source, config.backend)
        if rejected is not None:
            blame, error = rejected
            result = EvalResult(stage="static_check", blame=blame, error=error, **common)
            result.feedback = feedback.render(result)
            return result
    seed = config.seed if config.seed is not None else secrets.randbits(48)
    atol, rtol = config.tolerances
    cache_file = _baseline_cache_file(task, config)
    cached = _read_baseline(cache_file) if config.baseline_cache else {}
    job = {
        "device": config.device,
        "backend": config.backend,
        "fast_build": config.fast_build,
        "precision": config.precision,
        "trials": config.trials,
        "distribution_trials": config.distribution_trials,
        "atol": atol,
        "rtol": rtol,
        "seed": seed,
        "weight_seed": seed % 100_003,
        "timing": dataclasses.asdict(config.timing),
        "compile_baseline": config.compile_baseline,
        "problem_source": task.source,
        "candidate_source": candidate_source,
        "candidate_filename": "candidate.py",
        "build_cache": str(config.build_cache),
        "baseline_cached": cached.get("stats"),
        # Read again by the worker just before it would time the baseline itself: an evaluation of
        # the same task that finished meanwhile has cached it (the file is read-only to workers).
        "baseline_cache_file": str(cache_file) if config.baseline_cache else None,
        "baseline_device": cached.get("device_name"),
        "device_lock": str(device_lock_file(config)),
        "device_slots": config.device_slots,
        "device_reserved_bytes": config.device_reserved_bytes,
        "device_ordinal": device_ordinal(config) if config.on_gpu else 0,
        "baseline_lock": str(_ensure_lock_file(cache_file.with_suffix(".lock")))
        if config.baseline_cache
        else None,
        "cpu_threads": config.cpu_threads,
    }

    def cache_baseline(outcome: WorkerOutcome) -> None:
        # Written while the worker still lives, so its hold on the task's baseline lock lasts until
        # the baseline is on disk: the next evaluation of the task reads it instead of timing it.
        data = outcome.result or {}
        if config.baseline_cache and not outcome.forged_messages and _trustworthy(data):
            _write_baseline(cache_file, data.get("baseline") or {}, str(data.get("device_name", "")))

    def run(job: dict[str, Any]) -> EvalResult:
        outcome = run_worker(
            job,
            config.limits,
            workdir_root=config.workdir_root,
            keep_workdir=config.keep_workdir,
            on_result=cache_baseline,
            spares=spares,
        )
        return outcome_to_result(outcome, config, common)

    result = run(job)
    if _out_of_memory_beside_others(result, config):
        # Other workers' tensors may have taken the memory it needed: once more, alone on the device.
        result = run(dict(job, admission_weight=config.device_slots))
        result.checks = dict(result.checks, retried_alone_after="out of memory beside other workers")
    result.feedback = feedback.render(result)
    return result


OUT_OF_MEMORY = (
    "CUDA out of memory", "OutOfMemoryError", "cudaErrorMemoryAllocation", "PYTORCH_CUDA_ALLOC_CONF"
)  # fmt: skip
"""What marks a device out-of-memory error. The last is the advice that ends torch's message: an error
cut in the middle to its verdict's length (its list of processes on the device can run to
kilobytes) keeps it where the head of the message is gone (s34: 3 of 22 such verdicts)."""


def _out_of_memory_beside_others(result: EvalResult, config: EvalConfig) -> bool:
    """A CUDA out-of-memory failure in a run that shared the device (kevin.evaluator.devlock): the estimate
    of what the job needs can be short (outputs larger than inputs, big intermediates), so the
    failure may be the other workers', not the candidate's. Such a run is repeated alone, as is
    one whose own work (calibration, input draws: blamed on kevin) failed so beside others."""
    admission = result.checks.get("device_admission") or {}
    return (
        config.on_gpu
        and result.stage == "runtime"
        and result.blame in ("candidate", "infrastructure")
        and int(admission.get("weight", config.device_slots)) < config.device_slots
        and any(marker in result.error for marker in OUT_OF_MEMORY)
    )


def _trustworthy(data: dict[str, Any]) -> bool:
    """A worker result whose baseline may be cached: correct, and no blocking flag raised in the
    worker (a candidate that tampered, or left work or state behind, may have skewed the baseline)."""
    flags = EvalResult(stage="ok", flags=list(data.get("flags") or [])).blocking_flags
    return data.get("stage") == "ok" and bool(data.get("correct")) and not flags


def device_lock_path(config: EvalConfig) -> Path:
    """One lock file per physical device on this host. Under CUDA_VISIBLE_DEVICES (Ray actors,
    per-GPU processes) cuda:0 of two processes can be two GPUs, so the visible id names the file."""
    if not config.on_gpu:
        return Path(config.lock_dir) / "kevin-cpu.lock"
    return Path(config.lock_dir) / f"kevin-cuda{physical_device(config)}.lock"


def physical_device(config: EvalConfig) -> str:
    """The host's name for the config's device: its entry in CUDA_VISIBLE_DEVICES when set (an
    index or a UUID), else the index."""
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    return visible[config.device_index] if config.device_index < len(visible) else str(config.device_index)


def device_ordinal(config: EvalConfig) -> int:
    """A number per physical device of this host (the index, or a UUID's checksum): it picks the
    cores the device's timings spin on (kevin.evaluator.cores)."""
    name = physical_device(config)
    return int(name) if name.isdigit() else zlib.crc32(name.encode())


def device_lock_file(config: EvalConfig) -> Path:
    """The device's lock file, its companion files created (workers cannot create files)."""
    return devlock.ensure_files(device_lock_path(config), config.device_slots)


def device_lock(config: EvalConfig) -> devlock.DeviceLock:
    """The lock kevin's workers share on this config's device, for code outside kevin that uses the
    device and must not overlap its timing (benchmark harnesses)."""
    return devlock.DeviceLock(device_lock_file(config), config.device_slots)


def _ensure_lock_file(path: Path) -> Path:
    """The worker may write to its lock file but cannot create files there (kevin.evaluator.confine)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(exist_ok=True)
    return path


def outcome_to_result(outcome: WorkerOutcome, config: EvalConfig, common: dict[str, Any]) -> EvalResult:
    """Turn what the sandbox saw into an EvalResult, deciding the stage and who is to blame."""
    extra_flags = ["left_processes"] if outcome.leftover_processes else []
    failed = _failure_without_report(outcome, config, common, extra_flags)
    if failed is not None:
        return failed
    return _result_from_report(outcome, common, extra_flags)


def _failure_without_report(
    outcome: WorkerOutcome, config: EvalConfig, common: dict[str, Any], extra_flags: list[str]
) -> EvalResult | None:
    """The verdict when the worker's own report cannot be used: forged, killed, or never sent."""
    stage = outcome.last_stage
    ours = stage not in CANDIDATE_STAGES
    compiled = stage not in ("setup", "compile")
    if outcome.forged_messages:
        # Only candidate code writes to the channel without the token; nothing it sent is believed.
        return EvalResult(
            stage="runtime",
            compiled=compiled,
            error=f"the candidate wrote {outcome.forged_messages} line(s) to kevin's result channel",
            blame="candidate",
            log=outcome.log,
            flags=["tampering", *extra_flags],
            **common,
        )
    if outcome.killed_for == "timeout":
        limit = config.limits.timeout_for(stage)
        return EvalResult(
            stage="timeout",
            compiled=compiled,
            error=f"exceeded the {limit:g} s limit during {stage}",
            blame="infrastructure" if ours else "candidate",
            log=outcome.log,
            flags=extra_flags,
            **common,
        )
    if outcome.killed_for == "memory":
        gib = config.limits.host_memory_bytes / 2**30
        return EvalResult(
            stage="compile" if not compiled else "runtime",
            compiled=compiled,
            error=f"used more than {gib:g} GiB of host memory during {stage}",
            blame="infrastructure" if ours else "candidate",
            log=outcome.log,
            flags=extra_flags,
            **common,
        )
    data = outcome.result
    if data is None:
        how = (
            f"crashed with {outcome.signal_name}"
            if outcome.signal_name
            else f"exited with code {outcome.returncode} without a verdict"
        )
        tail = outcome.log.strip()[-1500:]
        return EvalResult(
            stage="compile" if not compiled else "runtime",
            compiled=compiled,
            error=f"the process {how} during {stage}" + (f"; output:\n{tail}" if tail else ""),
            blame="infrastructure" if ours else "candidate",
            log=outcome.log,
            flags=extra_flags,
            **common,
        )
    return None


def _result_from_report(outcome: WorkerOutcome, common: dict[str, Any], extra_flags: list[str]) -> EvalResult:
    """The worker's report as an EvalResult, with the speedups computed here."""
    data = outcome.result or {}
    compiled = outcome.last_stage not in ("setup", "compile")
    timing = data.get("timing") or {}
    baseline = data.get("baseline") or {}
    eager = baseline.get("eager") or {}
    compiled_stats = baseline.get("compile") or {}
    result = EvalResult(
        stage=data.get("stage", "runtime"),
        compiled=bool(data.get("compiled", compiled)),
        correct=bool(data.get("correct", False)),
        error=str(data.get("error", "")),
        flags=list(data.get("flags", [])) + extra_flags,
        blame=data.get("blame", "none" if data.get("stage") == "ok" else "candidate"),
        timing=timing,
        baseline_timing=eager,
        correctness=data.get("correctness") or {},
        checks=data.get("checks") or {},
        device=str(data.get("device_name", "")),
        versions=data.get("versions") or {},
        stage_seconds=data.get("stage_seconds") or {},
        log=outcome.log,
        **common,
    )
    result.stage_seconds["total"] = round(outcome.elapsed_s, 4)
    caught = sorted(set(result.flags) & EVIDENCE_FLAGS)
    if result.blame == "infrastructure" and caught:
        # Already caught by what it did: scored 0 as the candidate's, never dropped unscored.
        result.blame = "candidate"
        caught_by = ", ".join(caught)
        result.error = f"the candidate was caught ({caught_by}) before kevin's own failure: {result.error}"
    if outcome.leftovers:
        result.checks = dict(result.checks, left_processes=outcome.leftovers)
    builds = data.get("builds") or []
    if builds:
        result.stage_seconds["build"] = round(sum(b.get("seconds", 0.0) for b in builds), 4)
        result.timing = dict(
            result.timing,
            build_cache_hit=all(b.get("cache_hit") for b in builds),
            build_fast=all(b.get("fast") for b in builds),
        )
        fallbacks = [b["fallback"] for b in builds if b.get("fallback")]
        if fallbacks:
            result.checks = dict(result.checks, build_fallback=fallbacks[0])
    if result.correct and timing.get("median_ms"):
        result.runtime_ms = timing["median_ms"]
        if eager.get("median_ms"):
            result.baseline_ms = eager["median_ms"]
            result.speedup = eager["median_ms"] / timing["median_ms"]
        if compiled_stats.get("median_ms"):
            result.baseline_compile_ms = compiled_stats["median_ms"]
            result.speedup_compile = compiled_stats["median_ms"] / timing["median_ms"]
    return result


def _static_gate(source: str, backend: str) -> tuple[str, str] | None:
    """The static gate's verdict: None when accepted, else (blame, the rejection text: rule and
    line). The gate fails closed: its own failure is a rejection blamed on the infrastructure."""
    from kevin.gate import check_source

    report = check_source(source, backend)
    if report.ok:
        return None
    return report.blame, "\n".join(f"line {v.line}: [{v.rule}] {v.message}" for v in report.violations)


def _baseline_cache_file(task: Task, config: EvalConfig) -> Path:
    import torch

    key = json.dumps(
        [
            task.hash,
            # The eager baseline is the same whatever the candidate is written in: triton shares cuda's.
            "cuda" if config.on_gpu else config.backend,
            config.precision,
            torch.__version__,
            platform.node(),
            config.device_index,
            dataclasses.asdict(config.timing),
            config.trials,
            config.cpu_threads,
            TIMING_PROTOCOL,
        ],
        sort_keys=True,
    )
    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    return config.cache_root / "baselines" / f"{task.hash}-{digest}.json"


def _read_baseline(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_baseline(path: Path, stats: dict[str, Any], device_name: str) -> None:
    """Replace the cached baseline atomically. Several evaluations of one process may write the
    same task's baseline at once, so each writes through its own temporary file; the cache is an
    optimisation, so failing to write it costs a later re-timing, never this evaluation."""
    if not stats:
        return
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w") as handle:
            handle.write(json.dumps({"stats": stats, "device_name": device_name}))
        os.replace(tmp, path)
    except OSError as error:
        print(f"kevin eval: the baseline cache {path} was not written ({error})", file=sys.stderr)
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


# -- CLI -------------------------------------------------------------------------------------------
