"""Correctness, judged here: each trial's inputs drawn from a seed the runner learns only now, the
candidate's outputs read from the shared area and compared with the reference's by this process.
A shifted-distribution trial (kevin.evaluator.inputs) the problem cannot take, because its
get_inputs() or its reference raises on the moved draws or the reference's output is not finite
there, is dropped before or after the candidate runs it and noted in the correctness record
(`distribution_notes`), as is one whose draws had nothing to move; neither is held against the
candidate.

Mixed into `Harness`; `self` is the harness (kevin.evaluator.worker.harness).
"""

from __future__ import annotations

import time
from typing import Any

from kevin.evaluator import attribution, probes
from kevin.evaluator import inputs as trial_inputs
from kevin.evaluator.worker.exchange import read_outputs
from kevin.evaluator.worker.handle import RunnerFailed, RunnerHandle, call_deadline_s
from kevin.evaluator.worker.support import Failure, flatten_outputs, short_exception


class TrialsStage:
    def trial_seed(self, t: int) -> int:
        return self.job["seed"] * 7919 + t

    def check_trials(self, runner: RunnerHandle) -> None:
        """Run every trial in the runner and compare it here; fail at the first wrong trial. A shifted
        trial the problem's structure cannot take is dropped, with a note in the correctness record."""
        job = self.job
        own = job["trials"]
        reports = []
        self.distribution_notes: list[str] = []
        for t in range(own + job.get("distribution_trials", 0)):
            shift = t - own if t >= own else None
            started = time.perf_counter()
            expected = self.expected_outputs(self.trial_seed(t), shift)
            if expected is None:
                continue
            reference_s = time.perf_counter() - started
            self.reference_call_s = min(self.reference_call_s, reference_s)
            try:
                reply = runner.request(
                    "trial",
                    seed=self.trial_seed(t),
                    shift=shift,
                    probe_outputs=t == 0,
                    deadline_s=call_deadline_s(reference_s, first=t == 0, jit=job.get("backend") == "triton"),
                )
            except RunnerFailed as failed:
                raise failed.failure(
                    "runtime" if failed.stage == "compile" else None, during=self.stage_name
                ) from None
            self.flags.extend(f for f in reply.get("flags", []) if f in RUNNER_FLAGS)
            outputs = read_outputs(runner.area, reply.get("outputs"), expected, self.device)
            if isinstance(outputs, str):
                self.fail_correctness(outputs, reports)
            outputs = [o.to(self.device) for o in outputs]
            exact = None
            if t == 0 and job["precision"] == "fp32":
                # One float64 forward for the precision check and, should the trial fail, its second look.
                try:
                    exact = self.forward64(self.draw(self.trial_seed(0)))
                except Exception as exc:  # some problems have no float64 path; the check is skipped
                    self.checks["precision"] = {"skipped": f"{type(exc).__name__}: {exc}"[:200]}
                else:
                    self.checks["precision"] = self.precision(outputs, expected, exact)
            report = self.compare_trial(outputs, expected, self.trial_seed(t), shift, exact)
            if shift is not None and report.get("reference_bad"):
                # The reference itself is undefined on this distribution (a log of a negative,
                # say): the trial says nothing about the candidate.
                self.note_shifted(shift, "dropped: the reference's output is not finite on these inputs")
                continue
            reports.append(report)
            if not report["ok"] or report.get("reference_bad"):
                break
        self.judge_reports(reports)

    def expected_outputs(self, seed: int, shift: int | None) -> list[Any] | None:
        """The reference's outputs on the inputs drawn from `seed`. None for a shifted draw the
        problem cannot take (its get_inputs() or its reference raises on it): that trial is dropped."""
        try:
            inputs, moved = trial_inputs.draw_counted(self.get_inputs, seed, shift, self.device, self.dtype)
        except Exception as exc:
            if shift is None:
                raise Failure(
                    "runtime",
                    "the problem's get_inputs() failed:\n" + short_exception(exc),
                    blame="infrastructure",
                ) from None
            self.note_shifted(shift, f"dropped: get_inputs() raised {type(exc).__name__}: {exc}")
            return None
        if shift is not None and not moved:
            self.note_shifted(shift, "moved nothing: get_inputs() made no floating draw through torch")
        try:
            expected = flatten_outputs(self.model(*inputs))
            self.sync()
        except BaseException as exc:
            if shift is not None and isinstance(exc, Exception):
                self.note_shifted(shift, f"dropped: the reference raised {type(exc).__name__}: {exc}")
                return None
            raise Failure(
                "runtime", "the reference model failed:\n" + short_exception(exc), blame="infrastructure"
            ) from None
        return expected

    def note_shifted(self, shift: int, note: str) -> None:
        trial = self.job["trials"] + shift + 1
        shifts = trial_inputs.SHIFTS
        self.distribution_notes.append(f"trial {trial} ({shifts[shift % len(shifts)]}) {note[:300]}")

    def judge_reports(self, reports: list[dict[str, Any]]) -> None:
        job = self.job
        correctness = self.summarize_trials(reports, job["atol"], job["rtol"])
        if self.distribution_notes:
            correctness["distribution_notes"] = self.distribution_notes
        if correctness.get("reference_bad"):
            raise Failure(
                "correctness",
                "the reference output is not finite: the task is broken",
                blame="infrastructure",
                correctness=correctness,
            )
        if not all(r["ok"] for r in reports):
            raise Failure("correctness", correctness["detail"], correctness=correctness, compiled=True)
        self.correctness = correctness

    def fail_correctness(self, reason: str, reports: list[dict[str, Any]]) -> None:
        raise Failure(
            "correctness", reason, correctness={"trials": len(reports) + 1, "detail": reason}, compiled=True
        )

    def trace_candidate(self, runner: RunnerHandle) -> None:
        try:
            # Several calls under the profiler: the first call's allowance for all of them.
            deadline_s = call_deadline_s(self.reference_call_s * probes.TRACE_CALL_BUDGET, first=True)
            reply = runner.request("trace", seed=self.trial_seed(0), deadline_s=deadline_s)
        except RunnerFailed as failed:
            raise failed.failure("runtime", during=self.stage_name) from None
        trace = reply.get("trace") if isinstance(reply.get("trace"), dict) else {}
        if trace.get("blind") is True:
            # Untrusted like the rest of the reply; a candidate that claims it gains nothing: no
            # verdict, which the trainer never scores.
            raise Failure(
                "runtime",
                "the profiler recorded no device work in two looks, though the candidate's launches "
                "were recorded or kevin's marker kernel was not seen either: the library check could "
                "not run",
                blame="infrastructure",
                compiled=True,
            )
        flags = trace.pop("flags", [])
        self.flags.extend(f for f in flags if f in probes.TRACE_FLAGS)
        self.trace = {
            k: trace[k]
            for k in (
                "library_share",
                "library_ops_us",
                "custom_us",
                "traced_calls",
                "side_streams",
                "device_activities",
                "launch_calls",
                "marker_seen",
            )
            if k in trace
        }
        kernels = attribution.clean_kernel_table(trace.get("kernels"))
        if kernels:  # for the profile feedback (kevin.rl.profiles), never for a check
            self.trace["kernels"] = kernels


RUNNER_FLAGS = ("inputs_mutated", "tensor_subclass", "deferred_write")
"""Flags a runner may raise about its own outputs: it can only hurt the candidate by raising them."""
