"""The reference's side of the judging: a trial's outputs against the reference's (and, where they
fail, against the reference computed in float64), the precision check against float64, and the
outputs of the timed calls the judge sampled, compared with the reference on each call's own seed.

Mixed into `Harness`; `self` is the harness (kevin.evaluator.worker.harness).
"""

from __future__ import annotations

import copy
from typing import Any

from kevin.evaluator import probes
from kevin.evaluator.worker.support import Failure, flatten_outputs, short_exception


class ReferenceStage:
    def compare_trial(
        self, outputs: list[Any], expected: list[Any], seed: int, shift: int | None, exact: Any = None
    ) -> dict:
        """The candidate's outputs against the reference's on the inputs of (`seed`, `shift`); where
        they fail, against the same model run in float64 on the same inputs (`exact`, when the
        caller already has it) and cast back to the reference's dtypes. The reference's own rounding
        can be past the tolerance where a sum cancels (a matmul's element near zero under
        x -> 4x - 2: 7e-4 off, past 1e-4 + 1e-4 x |ref|), and a candidate that adds up in double was
        failed there for being nearer the truth (the bundled matmul, one evaluation in 40 on the
        CPU). The report says when the second look passed."""
        atol, rtol = self.job["atol"], self.job["rtol"]
        report = self.compare(outputs, expected, atol, rtol)
        if report["ok"] or report.get("reference_bad"):
            return report
        if exact is None:
            try:
                exact = self.forward64(self.draw(seed, shift))
            except Exception:  # no float64 path: the fp32 verdict stands
                return report
        if len(exact) != len(expected):
            return report
        cast = [
            e.to(r.dtype) if isinstance(e, self.torch.Tensor) and isinstance(r, self.torch.Tensor) else e
            for e, r in zip(exact, expected, strict=True)
        ]
        second = self.compare(outputs, cast, atol, rtol)
        if not second["ok"] or second.get("reference_bad"):
            return report
        second["past_reference_rounding"] = report["reason"]
        return second

    def forward64(self, inputs: list[Any]) -> list[Any]:
        """The reference model, copied to float64, on `inputs` made float64; raises where the problem
        has no float64 path."""
        torch = self.torch
        args = [a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in inputs]
        exact = flatten_outputs(copy.deepcopy(self.model).double()(*args))
        self.sync()
        return exact

    def precision(self, candidate_out: list[Any], expected: list[Any], exact: list[Any]) -> dict:
        """The candidate and the fp32 reference, each against `exact`, the float64 reference's outputs
        (see kevin.evaluator.probes)."""
        try:
            result = probes.precision_check(candidate_out, expected, exact)
        except Exception as exc:
            return {"skipped": f"{type(exc).__name__}: {exc}"[:200]}
        self.flags.extend(result.pop("flags"))
        return result

    def check_timed_outputs(self, record: Any) -> None:
        """Each sampled timed call's output (read when it was fetched) against the reference on the
        same seed; a mismatch is `timed_output_mismatch`."""
        for index, outputs in record.outputs.items():
            seed = record.seeds[index]
            try:
                expected = flatten_outputs(self.model(*self.draw(seed)))
            except BaseException as exc:
                raise Failure(
                    "runtime", "the reference model failed:\n" + short_exception(exc), blame="infrastructure"
                ) from None
            if isinstance(outputs, str):
                report = {"ok": False}
            else:
                report = self.compare_trial([o.to(self.device) for o in outputs], expected, seed, None)
            if not report["ok"]:
                self.flags.append(f"timed_output_mismatch:{index}")
        self.sync()
