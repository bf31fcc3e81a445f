"""Timing the candidate: fresh input content before every call, two timed outputs kept for checking.

Mixed into `Harness`; `self` is the harness (kevin.evaluator.worker.harness)."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

from kevin.evaluator import probes
from kevin.evaluator.worker.support import (
    Failure,
    flatten_outputs,
    short_exception,
)


class TimingStage:
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
            # evaluator's clock_escape rule compares the candidate's gap with it (kevin.evaluator.evaluate).
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

