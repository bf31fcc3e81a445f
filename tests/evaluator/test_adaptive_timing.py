"""The timed-call count adapts to the warm-up's spread (kevin.evaluator.timing.planned_reps).

On the H200 (session 9) the timing stage held the device 3.1 s per candidate, most of it a 2 s
budget spent on kernels whose median was known to 0.1% after a few dozen calls. The count is now
planned from the warm-up: steady calls stop early, noisy short ones keep their budget.
"""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from kevin.evaluator import timing
from kevin.evaluator.worker.handle import CycleRecord
from kevin.evaluator.worker.timed import BLOCK_CALLS, TimingStage

MS = 1_000_000


def warm(settled_ms: list[float], unsettled: int | None = None) -> list[int]:
    """Warm-up cycles: a first half of slow, unsettled cycles (ignored), then `settled_ms`."""
    first = [50 * MS] * (len(settled_ms) if unsettled is None else unsettled)
    return first + [round(v * MS) for v in settled_ms]


# Thirteen settled cycles: quartiles at sorted positions 3 and 9, the median at 6.
SETTLED = [1.95, 1.97, 1.98, 1.9865, 1.99, 1.995, 2.0, 2.005, 2.01, 2.0135, 2.02, 2.03, 2.05]


def test_hand_worked_count():
    # sigma = (2.0135 - 1.9865) / 1.349 = 0.020015 ms; the call is 2.0 - 0.2 = 1.8 ms;
    # blocks = (1.96 * 1.2533 * 0.020015 / (sqrt(4) * 0.005 * 1.8))^2 = (0.049166 / 0.018)^2 = 7.461;
    # calls = ceil(2 * 7.461 * 4) = 60.
    assert timing.planned_reps(warm(SETTLED), 1000, 10, 0.005, 0.2, 4) == 60
    # Half the precision asks for four times the calls.
    assert timing.planned_reps(warm(SETTLED), 1000, 10, 0.0025, 0.2, 4) == math.ceil(8 * 7.4608 * 4)


def test_the_budget_and_the_floors_bound_the_count():
    steady = [2.0] * 13
    assert timing.planned_reps(warm(steady), 1000, 10, 0.005, 0.2, 4) == timing.ADAPTIVE_MIN_REPS
    assert timing.planned_reps(warm(steady), 1000, 50, 0.005, 0.2, 4) == 50  # the config's min_reps
    noisy = [0.1 + 0.2 * (i % 5) for i in range(13)]  # a short call with a wide spread
    assert timing.planned_reps(warm(noisy), 400, 10, 0.005, 0.05, 4) == 400  # the budget's count


@pytest.mark.parametrize(
    "warm_ns, precision, overhead_ms",
    [
        (warm(SETTLED), 0.0, 0.2),  # precision 0: the whole budget, as before
        (warm(SETTLED[:5], unsettled=5), 0.005, 0.2),  # too few warm-up cycles to judge a spread
        (warm(SETTLED), 0.005, 2.5),  # the overhead is the whole cycle: no call time to be precise about
    ],
)
def test_no_plan_without_a_spread_to_judge(warm_ns, precision, overhead_ms):
    assert timing.planned_reps(warm_ns, 777, 10, precision, overhead_ms, 4) == 777


def test_precision_is_validated():
    with pytest.raises(ValueError, match="precision"):
        timing.TimingConfig(precision=1.5)


class PlanningRunner:
    """A runner whose warm-up gives steady `call_ms` cycles; it times as many calls as `plan` asks
    (what RunnerHandle.run_cycles does) and records which calls were fetched."""

    def __init__(self, call_ms: float) -> None:
        self.call_ms = call_ms
        self.fetched: list[int] = []
        self.reps = 0

    def run_cycles(
        self, *, fetch: Any, budget_ms: float, max_reps: int, min_reps: int, plan: Any = None, **_: Any
    ):
        jitter = random.Random(1)
        record = CycleRecord(settled=True)
        record.warm_ns = [round((self.call_ms + 0.2) * MS) + jitter.randrange(-500, 500) for _ in range(40)]
        reps = int(min(max(budget_ms / (self.call_ms + 0.2), min_reps), max_reps))
        if plan is not None:
            reps = max(min_reps, min(reps, plan(record.warm_ns, reps)))
        self.reps = reps
        for index in range(reps):
            record.cycle_ns.append(round((self.call_ms + 0.2) * MS) + jitter.randrange(-500, 500))
            if fetch(index, reps):
                self.fetched.append(index)
                record.fetch_ns[index] = MS
        return record


class Judge(TimingStage):
    is_cuda = True

    def __init__(self, precision: float) -> None:
        self.rng = random.Random(3)
        self.checks: dict[str, Any] = {}
        self.job = {
            "timing": {"warmup_ms": 10.0, "min_warmup": 3, "budget_ms": 2000.0, "min_reps": 10, "max_reps": 1000,
                       "precision": precision}
        }  # fmt: skip
        self.reference_call_s = 0.002
        self.stage_name = "timing"
        self.output_shapes = []
        self.device = "cpu"

    def shared_inputs(self, runner: Any) -> dict[str, Any]:
        return {}


def test_a_steady_kernel_is_timed_in_a_few_dozen_calls_and_its_fetches_stay_inside_them():
    runner = PlanningRunner(call_ms=2.0)
    Judge(precision=0.005).time_model(runner, {"output_bytes": 4, "cycle_ms": 0.2})
    assert runner.reps == timing.ADAPTIVE_MIN_REPS  # 2 s of budget would have been 909 calls
    assert runner.fetched[-1] == runner.reps - 1 and all(i < runner.reps for i in runner.fetched)
    whole = PlanningRunner(call_ms=2.0)
    Judge(precision=0.0).time_model(whole, {"output_bytes": 4, "cycle_ms": 0.2})
    assert whole.reps == int(2000.0 / 2.2)
    assert BLOCK_CALLS * 8 <= runner.reps
