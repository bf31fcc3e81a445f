"""The sandboxed worker: one candidate against one problem, in a process of its own.

Started by `kevin.sandbox` as `python -m kevin.worker JOB_JSON CHANNEL_FD`; never imported by the
grader. It reports over the private channel (a pipe inherited as CHANNEL_FD, moved and authenticated
by kevin.confine): `stage` events as it moves on (the parent enforces a deadline per stage) and one
`result` object at the end, then waits for the parent to kill it and everything below it. Whatever
the candidate prints goes to the captured log, never to the channel. Before anything else it
confines itself (kevin.confine: writes only to the job directory and the build cache, a child
subreaper) and fixes torch's CPU thread count (recorded in `checks.cpu_threads`).

Order of work, chosen so the candidate never shares the process with the reference model:

  1. Load the problem in a throwaway namespace; draw every trial's inputs from the secret seed
     (on the device); keep the init inputs; drop the problem module and collect it.
  2. compile:      import the candidate in a fresh module (its `load_inline` builds run here,
                   through kevin.build's cache); it must define `ModelNew`.
  3. wait_gpu:     take the device's lock (the GPU's, or the CPU's for the cpp back end), so
                   running and timing never overlap another worker's on the same device.
  4. correctness:  same weight seed, build `ModelNew`; run it on a clone of each trial's inputs;
                   check the inputs were not mutated; keep its outputs.
  5. timing:       time `ModelNew` with kevin.timing (a fresh draw of the inputs per call; outputs
                   of two timed calls kept for checking). Then the candidate is dropped, and any
                   process it left below the worker is killed and fails it (`left_processes`).
  6. reference:    check that torch, the clocks and kevin's own functions are the ones bound before
                   the candidate was imported and that no torch mode is left entered (`tampering`);
                   only now load the problem again and build `Model` (same weight seed); compute
                   the expected outputs for every trial and for the kept timed calls; compare.
  7. baseline:     time `Model` with the same function (skipped when the parent has it cached),
                   optionally `torch.compile(Model)`.

Not protected here (see kevin.checks and the evaluator for what is): the candidate shares this
process with the harness, so code that walks frames or the heap, or patches C-level functions,
could interfere with comparison or timing, or find the channel token. The evaluator's dynamic
checks and the static gate are the defence against those; this module keeps the door narrow
(functions bound before the candidate is imported and their identities re-checked, reference
absent while the candidate runs, global flags and thread counts compared, inputs cloned and
checked, timed inputs freshly drawn).
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import random
import sys
import threading
import time
import traceback
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kevin import build, confine, devlock, probes, timing
from kevin import inputs as trial_inputs
from kevin.compare import compare, summarize_trials
from kevin.confine import Channel
from kevin.timing import Timer, TimingConfig

OWN_MODULES = ("__main__", "kevin.compare", "kevin.probes", "kevin.timing", "kevin.inputs", "kevin.confine")
"""Modules whose functions judge the candidate: rebinding one of them is tampering."""


class Failure(Exception):
    """A verdict reached before the end: carries the result fields."""

    def __init__(self, stage: str, error: str, blame: str = "candidate", **fields: Any) -> None:
        super().__init__(error)
        self.fields = {"stage": stage, "error": error, "blame": blame, **fields}


DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def load_module(source: str, name: str, filename: str) -> types.ModuleType:
    """Execute `source` as a fresh module named `name` (registered in sys.modules while it runs,
    as dataclasses and pickling expect)."""
    module = types.ModuleType(name)
    module.__file__ = filename
    sys.modules[name] = module
    code = compile(source, filename, "exec")
    exec(code, module.__dict__)
    return module


def forget_module(name: str) -> None:
    sys.modules.pop(name, None)
    gc.collect()


def flatten_outputs(out: Any) -> list[Any]:
    if isinstance(out, (tuple, list)):
        items: list[Any] = []
        for item in out:
            items.extend(flatten_outputs(item))
        return items
    return [out]


def short_exception(exc: BaseException, limit: int = 4000) -> str:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    if len(text) > limit:
        text = text[: limit // 4] + "\n[... traceback truncated by kevin ...]\n" + text[-(3 * limit) // 4 :]
    return text


class Harness:
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
        """Take the device's admission slots (see kevin.devlock): one for a job that fits beside
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

    # -- stages ----------------------------------------------------------------------------------
    def draw_inputs(self) -> tuple[list[list[Any]], Any]:
        # Inputs are drawn only now, under the device's lock (GPU memory is not held by workers
        # that are still building), and only if the candidate's import left torch as it found it:
        # a patched torch.rand could otherwise hand the candidate inputs of its choosing.
        job = self.job
        self.tamper_check("at import")
        if threading.active_count() > self.threads_before:
            raise Failure("runtime", "the candidate started threads at import", flags=["extra_threads"])
        self.timer = Timer(self.device, TimingConfig(**job["timing"]))
        try:
            problem = load_module(job["problem_source"], "kevin_problem_inputs", "<problem>")
            trials = trial_inputs.draw_trials(
                problem,
                job["seed"],
                job["trials"],
                job.get("distribution_trials", 0),
                self.device,
                self.dtype,
            )
            fresh = trial_inputs.FreshInputs(problem, self.device, self.dtype)
        except BaseException as exc:
            raise Failure(
                "runtime",
                "the reference problem failed to make inputs:\n" + short_exception(exc),
                blame="infrastructure",
            ) from None
        del problem
        forget_module("kevin_problem_inputs")
        return trials, fresh

    def run_trials(
        self, model_class: type, init_inputs: list[Any], trials: list[list[Any]]
    ) -> tuple[Any, list]:
        torch = self.torch
        try:
            torch.manual_seed(self.job["weight_seed"])
            model_new = model_class(*init_inputs).to(self.device)
            model_new = _cast_floating(model_new, self.dtype)
            outputs = []
            for t, inputs in enumerate(trials):
                args = self.clone_args(inputs)
                out = model_new(*args)
                self.sync()
                if t == 0:
                    self.flags.extend(probes.output_flags(flatten_outputs(out), self.sync))
                if not all(
                    self.equal(a, b) for a, b in zip(args, inputs, strict=True) if isinstance(a, torch.Tensor)
                ):
                    self.flags.append("inputs_mutated")
                outputs.append([self._detach(o) for o in flatten_outputs(out)])
            self.trace = probes.trace_forward(
                lambda: model_new(*self.clone_args(trials[0])),
                self.is_cuda,
                self.sync,
                self.build_log.modules,
            )
            self.flags.extend(self.trace.pop("flags"))
        except BaseException as exc:
            raise Failure("runtime", short_exception(exc)) from None
        return model_new, outputs

    def time_candidate(self, model_new: Any, first_trial: list[Any], fresh: Any) -> tuple[Any, list, dict]:
        # Timed calls read fixed buffers whose content is a fresh draw before every call, under a
        # seed from the worker's private RNG: a memo by pointer returns a stale answer, a memo by
        # content (whole inputs or rows) has never seen these values, and the outputs of two
        # timed calls (one at a random index, and the last) are checked against the reference.
        # Only the seed is kept: the inputs are redrawn from it, so huge problems hold no copies.
        timer = self.timer
        try:
            buffers = self.clone_args(first_trial)
        except BaseException as exc:
            raise Failure("runtime", "while preparing timing inputs:\n" + short_exception(exc)) from None
        sample_at = self.rng.randrange(timer.config.min_reps)
        state: dict[str, Any] = {}
        kept: dict[str, Any] = {}

        def observe(i: int, out: Any) -> None:
            if i == sample_at:
                kept["sampled"] = (state["recipe"], [self._detach(o) for o in flatten_outputs(out)])
            state["last"] = out

        try:
            stats = timer.measure(lambda: model_new(*buffers), self._refill(fresh, buffers, state), observe)
            kept["last"] = (state["recipe"], [self._detach(o) for o in flatten_outputs(state.pop("last"))])
            # The host's own launch and wake-up gap, measured now under the same load: the
            # evaluator's clock_escape rule compares the candidate's gap with it (kevin.evaluate).
            stats = dataclasses.replace(stats, control_gap_ms=timer.control_gap_ms())
        except BaseException as exc:
            raise Failure("runtime", "while timing:\n" + short_exception(exc)) from None
        if threading.active_count() > self.threads_before:
            self.flags.append("extra_threads")
        if self.is_cuda:
            floor_ms = probes.bandwidth_floor_ms(first_trial, self.torch.cuda.get_device_name())
            self.checks["bandwidth_floor_ms"] = floor_ms
            if probes.impossible(stats.median_ms, floor_ms):
                self.flags.append("impossible_speedup")
        if self.global_flags() != self.flags_before:
            self.flags.append("global_state_changed")
        return stats, buffers, kept

    def _refill(self, fresh: Any, buffers: list[Any], state: dict[str, Any]) -> Any:
        def refill(i: int) -> None:
            state["recipe"] = self.rng.getrandbits(63)
            fresh.fill(buffers, state["recipe"])

        return refill

    def check_outputs(
        self,
        init_inputs: list[Any],
        trials: list[list[Any]],
        outputs: list[Any],
        fresh: Any,
        buffers: list[Any],
        kept: dict[str, Any],
        stats: Any,
    ) -> Any:
        """Build the reference, compare every trial and the kept timed outputs; returns the model."""
        job = self.job
        # Before anything is compared: the functions that judge, and torch, are the ones bound
        # before the candidate existed, and no torch mode it entered is still intercepting calls.
        self.tamper_check("while it ran")
        try:
            reference = load_module(job["problem_source"], "kevin_reference", "<reference>")
            self.torch.manual_seed(job["weight_seed"])
            model = _cast_floating(reference.Model(*init_inputs).to(self.device), self.dtype)
            tolerance = (job["atol"], job["rtol"])
            reports = []
            own = job["trials"]
            for t, inputs in enumerate(trials):  # one expected output alive at a time
                expected = flatten_outputs(model(*self.clone_args(inputs)))
                if t == 0 and job["precision"] == "fp32":
                    self.checks["precision"] = self._precision(model, inputs, outputs[0], expected)
                report = self.compare(outputs[t], expected, *tolerance)
                outputs[t] = expected = None
                if t >= own and report.get("reference_bad"):
                    # The reference itself is undefined on this distribution (a log of a negative,
                    # say): the trial says nothing about the candidate.
                    self.checks["distribution_trials_skipped"] = (
                        self.checks.get("distribution_trials_skipped", 0) + 1
                    )
                    continue
                reports.append(report)
            timed_reports = {}
            for name, (seed, out) in kept.items():
                fresh.fill(buffers, seed)
                timed_reports[name] = self.compare(
                    out, flatten_outputs(model(*self.clone_args(buffers))), *tolerance
                )
            self.sync()
        except BaseException as exc:
            raise Failure(
                "runtime", "the reference model failed:\n" + short_exception(exc), blame="infrastructure"
            ) from None

        correctness = self.summarize_trials(reports, job["atol"], job["rtol"])
        if correctness.get("reference_bad"):
            raise Failure(
                "correctness",
                "the reference output is not finite: the task is broken",
                blame="infrastructure",
                correctness=correctness,
            )
        if not all(r["ok"] for r in reports):
            raise Failure(
                "correctness",
                correctness["detail"],
                correctness=correctness,
                timing=stats.to_dict(),
                compiled=True,
            )
        for name, report in timed_reports.items():
            if not report["ok"]:
                self.flags.append(f"timed_output_mismatch:{name}")
        self.correctness = correctness
        return model

    def baseline(self, model: Any, buffers: list[Any], fresh: Any) -> dict[str, Any]:
        """The reference's timing: from the parent's cache, else timed here. Evaluations of one task
        take the task's baseline lock in turn (held until this process dies, after the parent has
        cached what this one timed), so a task's baseline is timed once however many run at once."""
        job = self.job
        baseline = dict(job.get("baseline_cached") or {})
        wanted = ["eager"] + (["compile"] if job.get("compile_baseline") else [])
        if all(k in baseline for k in wanted):
            return baseline
        lock_file = job.get("baseline_lock")
        if lock_file:
            self.stage("wait_gpu")
            devlock.hold(lock_file)
        baseline = dict(_late_baseline(job.get("baseline_cache_file")) or baseline)
        state: dict[str, Any] = {}
        if "eager" not in baseline:
            with self.device_section("baseline", exclusive=True):
                baseline["eager"] = self.timer.measure(
                    lambda: model(*buffers), self._refill(fresh, buffers, state)
                ).to_dict()
        if job.get("compile_baseline") and "compile" not in baseline:
            compiled_model = self.torch.compile(model)
            with self.device_section("baseline", exclusive=True):
                baseline["compile"] = self.timer.measure(
                    lambda: compiled_model(*buffers), self._refill(fresh, buffers, state)
                ).to_dict()
        return baseline

    def _precision(
        self, model: Any, inputs: list[Any], candidate_out: list[Any], expected: list[Any]
    ) -> dict:
        """The candidate and the fp32 reference, each against a float64 reference (see kevin.probes)."""
        import copy

        torch = self.torch
        try:
            model64 = copy.deepcopy(model).double()
            args64 = [
                a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in inputs
            ]
            result = probes.precision_check(candidate_out, expected, flatten_outputs(model64(*args64)))
        except Exception as exc:  # some problems have no float64 path; the check is then skipped
            return {"skipped": f"{type(exc).__name__}: {exc}"[:200]}
        self.flags.extend(result.pop("flags"))
        return result

    def _detach(self, value: Any) -> Any:
        torch = self.torch
        if isinstance(value, torch.Tensor):
            return self.clone(value.detach())
        return value


def _late_baseline(path: str | None) -> dict[str, Any]:
    """The baseline another evaluation of this task cached after this one started (same key, so
    same device and settings); empty when there is none."""
    if not path:
        return {}
    try:
        stats = json.loads(Path(path).read_text()).get("stats")
    except (OSError, ValueError, AttributeError):
        return {}
    return dict(stats) if isinstance(stats, dict) and "eager" in stats else {}


def _cast_floating(model: Any, dtype: Any) -> Any:
    import torch

    if dtype == torch.float32:
        return model
    return model.to(dtype)


def _prepare_shim(job: dict[str, Any]) -> None:
    """Build (once per toolchain) and load the fast builds' shim while this process may still write
    its directory: once confined, the candidate can read the shim but not replace it."""
    if not job.get("fast_build", True):
        return
    try:
        from kevin import fastbuild

        fastbuild.ensure_shim(Path(job["build_cache"]))
    except Exception:  # noqa: BLE001 - without a shim every build takes the real load_inline
        pass


def main(argv: list[str]) -> int:
    job_path = Path(argv[1])
    job = json.loads(job_path.read_text())
    job_path.unlink()  # the secret seed and the channel token are not left lying around
    channel = Channel(int(argv[2]), job.pop("channel_token"))
    confine.die_with_parent()
    confine.hide_channel_argument(argv)
    # Building the shim (once per toolchain, ~30-60 s) is build work: under the compile deadline.
    channel.send({"event": "stage", "stage": "compile"})
    _prepare_shim(job)
    channel.send({"event": "stage", "stage": "setup"})
    confinement = confine.confine_worker(job)
    harness = None
    try:
        harness = Harness(job, channel)
        result = harness.run()
    except Failure as failure:
        result = dict(failure.fields)
    except BaseException as exc:  # a bug on our side, or the machine
        where = harness.stage_name if harness else "setup"
        result = {
            "stage": "runtime",
            "blame": "infrastructure",
            "error": f"kevin worker failed during {where}: " + short_exception(exc),
        }
    if harness is not None:
        harness.stage_seconds[harness.stage_name] = round(time.perf_counter() - harness.stage_started, 4)
        result.setdefault("flags", []).extend(harness.flags)
        result.setdefault("compiled", harness.compiled)
        result["checks"] = dict(harness.checks, trace=harness.trace, confinement=confinement)
        result["stage_seconds"] = harness.stage_seconds
        result["builds"] = harness.build_log.to_list()
        result["versions"] = _versions(harness.torch)
        result["device_name"] = harness.torch.cuda.get_device_name() if harness.is_cuda else "cpu"
    sys.stdout.flush()
    sys.stderr.flush()
    channel.send({"event": "result", "result": result})
    # Wait for the parent's kill: exiting now would hand any orphan below this subreaper to init
    # before the parent walks the tree. Never tear down the interpreter: candidate objects could
    # run code from __del__ or atexit after the verdict, and a faulted CUDA context can hang on exit.
    time.sleep(float(job.get("linger_s", 60.0)))
    os._exit(0)


def _versions(torch: Any) -> dict[str, str]:
    import platform

    from kevin import __version__

    return {
        "kevin": __version__,
        "torch": torch.__version__,
        "cuda": str(torch.version.cuda),
        "python": platform.python_version(),
    }


if __name__ == "__main__":
    sys.exit(main(sys.argv))
