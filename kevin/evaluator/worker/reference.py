"""The reference's side of the judging: the precision check against float64, and the outputs of the
timed calls the judge sampled, compared with the reference on each call's own seed.

Mixed into `Harness`; `self` is the harness (kevin.evaluator.worker.harness).
"""

from __future__ import annotations

import copy
from typing import Any

from kevin.evaluator import probes
from kevin.evaluator.worker.support import Failure, flatten_outputs, short_exception


class ReferenceStage:
    def precision(self, inputs: list[Any], candidate_out: list[Any], expected: list[Any]) -> dict:
        """The candidate and the fp32 reference, each against a float64 reference (see kevin.evaluator.probes)."""
        torch = self.torch
        try:
            model64 = copy.deepcopy(self.model).double()
            args64 = [
                a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in inputs
            ]
            result = probes.precision_check(candidate_out, expected, flatten_outputs(model64(*args64)))
        except Exception as exc:  # some problems have no float64 path; the check is then skipped
            return {"skipped": f"{type(exc).__name__}: {exc}"[:200]}
        self.flags.extend(result.pop("flags"))
        return result

    def check_timed_outputs(self, record: Any) -> None:
        """Each sampled timed call's output (read when it was fetched) against the reference on the
        same seed; a mismatch is `timed_output_mismatch`."""
        job = self.job
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
                report = self.compare(
                    [o.to(self.device) for o in outputs], expected, job["atol"], job["rtol"]
                )
            if not report["ok"]:
                self.flags.append(f"timed_output_mismatch:{index}")
        self.sync()
