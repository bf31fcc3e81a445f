"""The reference: only after the candidate is gone, build Model, compare every trial and timed output.

Mixed into `Harness`; `self` is the harness (kevin.evaluator.worker.harness)."""

from __future__ import annotations

from typing import Any

from kevin.evaluator import probes
from kevin.evaluator.worker.support import (
    Failure,
    cast_floating,
    flatten_outputs,
    load_module,
    short_exception,
)


class ReferenceStage:
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
            model = cast_floating(reference.Model(*init_inputs).to(self.device), self.dtype)
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

    def _precision(
        self, model: Any, inputs: list[Any], candidate_out: list[Any], expected: list[Any]
    ) -> dict:
        """The candidate and the fp32 reference, each against a float64 reference (see kevin.evaluator.probes)."""
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

