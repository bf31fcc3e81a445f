"""The overhead taken off a timing is measured around it, in a clean runner, not minutes before it.

On the H200 under a busy batch (issue #14, session 8) the candidate's clean calibration ran while
the host was loaded and its timing ran when it was not: the overhead came out larger than the
timed cycles, so honest 7 us kernels were timed at 0 (`impossible_speedup`, also on the baseline:
a reference at 1e-6 ms), and the output fetches, slower than the clean ones of that other moment,
read as `deferred_work`. These tests replay those numbers through the timing stage with runners
that answer from a script.
"""

from __future__ import annotations

import random
from contextlib import contextmanager
from typing import Any

import pytest

from kevin.evaluator import timing
from kevin.evaluator.worker.handle import CycleRecord
from kevin.evaluator.worker.timed import TimingStage

QUIET_OVERHEAD_NS = 150_000
"""A cycle without a call (refill, flush, synchronize, signal) on a quiet host."""
BUSY_OVERHEAD_NS = 300_000
"""The same on a host busy compiling: what the clean calibration saw."""
KERNEL_NS = 7_000


class ScriptedRunner:
    """Answers `run_cycles` with cycles of `cycle_ns` (plus `call_ns` when the model is called) and
    fetches of `fetch_ns` (plus `deferred_ns`: an output computed only when it is fetched)."""

    def __init__(self, cycle_ns: int, fetch_ns: int, call_ns: int = 0, deferred_ns: int = 0) -> None:
        self.cycle_ns, self.fetch_ns, self.call_ns, self.deferred_ns = cycle_ns, fetch_ns, call_ns, deferred_ns
        self.asked: list[bool] = []

    def run_cycles(self, *, model: bool, fetch: Any, max_reps: int, min_reps: int, **_: Any) -> CycleRecord:
        self.asked.append(model)
        jitter = random.Random(len(self.asked))
        record = CycleRecord(settled=True)
        reps = max(min_reps, min(max_reps, 200))
        for index in range(reps):
            call = self.call_ns if model else 0
            record.cycle_ns.append(self.cycle_ns + call + jitter.randrange(-2_000, 2_000))
            if fetch(index, reps):
                record.fetch_ns[index] = self.fetch_ns + (self.deferred_ns if model else 0) + jitter.randrange(0, 5_000)
        return record


class Judge(TimingStage):
    """The timing stage's view of the harness, on the GPU back end (spinning signalling)."""

    is_cuda = True

    def __init__(self) -> None:
        self.rng = random.Random(5)
        self.checks: dict[str, Any] = {}
        self.flags: list[str] = []
        self.job = {"timing": {"warmup_ms": 10.0, "min_warmup": 3, "budget_ms": 100.0, "min_reps": 20, "max_reps": 1000}}
        self.reference_call_s = 0.001
        self.stage_name = "timing"

    @contextmanager
    def exclusive_device(self, stage: str):
        yield


def busy_calibration() -> dict[str, Any]:
    """What the candidate's runner measured while clean, when the host was busy."""
    return {"cycle_ms": BUSY_OVERHEAD_NS / 1e6, "fetch_ms": 0.11, "fetch_max_ms": 0.12, "output_bytes": 4096}


def quiet_candidate(deferred_ns: int = 0) -> ScriptedRunner:
    return ScriptedRunner(QUIET_OVERHEAD_NS, 310_000, call_ns=KERNEL_NS, deferred_ns=deferred_ns)


def quiet_control() -> ScriptedRunner:
    return ScriptedRunner(QUIET_OVERHEAD_NS, 300_000)


def test_an_honest_short_kernel_is_timed_against_the_overhead_of_its_own_moment():
    judge, candidate, control = Judge(), quiet_candidate(), quiet_control()
    record, dispersed, overhead = judge.time_steadily(candidate, busy_calibration(), control=control)
    stats = judge.timing_stats(record, overhead)
    assert not dispersed
    # Against the busy calibration the kernel would be "faster than nothing" (the 1e-6 floor).
    stale = timing.summarize_cycles([c / 1e6 for c in record.cycle_ns], busy_calibration()["cycle_ms"], 4)
    assert stale.median_ms == pytest.approx(1e-6)
    assert stats["median_ms"] == pytest.approx(KERNEL_NS / 1e6, abs=2e-3)
    assert judge.flags == []  # no deferred_work: the clean fetches were timed at the same moment
    assert control.asked == [False, False] and candidate.asked == [True]  # the control never runs the model
    assert judge.checks["overhead_ms"]["candidate"] == {"bracket": pytest.approx(0.15, abs=0.003), "clean": 0.3}
    assert judge.checks["settled"]["bracket candidate"] is True


def test_an_output_computed_when_fetched_is_still_caught_against_the_bracket():
    judge = Judge()
    record, _, overhead = judge.time_steadily(quiet_candidate(deferred_ns=200_000), busy_calibration(), control=quiet_control())
    judge.timing_stats(record, overhead)
    assert judge.flags == ["deferred_work"]
    assert judge.checks["fetch_excess_ms"] == pytest.approx(0.21, abs=0.01)


def test_without_a_bracket_the_clean_calibration_is_what_is_taken_off():
    """The baseline's runner is trusted and brackets itself; with no control at all (no runner to
    spare) the runner's own calibration is used, as before."""
    judge = Judge()
    runner = ScriptedRunner(BUSY_OVERHEAD_NS, 110_000, call_ns=KERNEL_NS)
    record, _, overhead = judge.time_steadily(runner, busy_calibration())
    assert overhead == busy_calibration()
    assert judge.timing_stats(record, overhead)["median_ms"] == pytest.approx(KERNEL_NS / 1e6, abs=2e-3)
    assert "overhead_ms" not in judge.checks
