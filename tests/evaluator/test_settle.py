"""The judge's warm-up waits for the cycles to settle (a GPU coming up from idle clocks)."""

from __future__ import annotations

from kevin.evaluator.worker import handle as handle_module
from kevin.evaluator.worker.exchange import SharedArea
from kevin.evaluator.worker.handle import RunnerHandle, settled


def fake_handle(cycle_ns):
    """A RunnerHandle without a process: each cycle takes what `cycle_ns(call)` says."""
    runner = object.__new__(RunnerHandle)
    runner.area = SharedArea(4096)
    runner.sequence = 0
    sent = []
    runner.link = type("Link", (), {"send": lambda self, message: sent.append(message)})()
    runner._expect_ready = lambda: None
    runner._stop = lambda spin, words: None
    runner._cycle = lambda spin, words, call, seed: cycle_ns(call)
    return runner


def run(runner, warmup_ms=20.0, settle_ms=handle_module.SETTLE_MS):
    seeds = iter(range(1, 1_000_000))
    return runner.run_cycles(
        model=False,
        spin=True,
        seeds=lambda: next(seeds),
        warmup_ms=warmup_ms,
        min_warmup=3,
        budget_ms=20.0,
        min_reps=20,
        max_reps=100,
        output_bytes=0,
        fetch=lambda index, reps: False,
        on_fetch=lambda metas: None,
        settle_ms=settle_ms,
    )


def ramp(call: int) -> int:
    """An idle GPU's clock coming up: 400 us cycles falling to 150 us over the first 400 calls
    (about 100 ms), then steady."""
    return 150_000 + max(0, 400 - call) * 625


def test_the_warm_up_waits_until_the_clock_has_come_up():
    record = run(fake_handle(ramp))
    # A fixed 20 ms warm-up would stop after ~55 calls and time cycles still ~70% too slow.
    assert len(record.warm_ns) > 300 and record.settled
    assert max(record.cycle_ns) < 1.05 * 150_000


def test_steady_cycles_end_the_warm_up_at_the_asked_time():
    record = run(fake_handle(lambda call: 150_000))
    assert record.settled and len(record.warm_ns) == 134  # 20 ms of 150 us cycles, then settled


def test_long_cycles_need_no_settling():
    record = run(fake_handle(lambda call: 2_000_000 + (call % 7) * 200_000), warmup_ms=30.0)
    assert record.settled and len(record.warm_ns) == 16  # the asked-for 30 ms, then one window


def test_cycles_that_never_settle_stop_at_the_cap():
    drifting = fake_handle(lambda call: int(150_000 * 1.01**call))
    record = run(drifting, warmup_ms=5.0, settle_ms=30.0)
    assert not record.settled
    assert 35.0 <= sum(record.warm_ns) / 1e6 < 35.0 + record.warm_ns[-1] / 1e6


def test_settled_compares_windows_a_span_apart():
    window, span = handle_module.SETTLE_WINDOW, handle_module.SETTLE_SPAN
    flat = [100_000] * (span - 1) * window
    assert not settled([100_000] * (span * window - 1))
    assert settled(flat + [102_000] * window)  # 2%
    assert not settled(flat + [104_000] * window)  # 4%
    assert settled([10_000] * (span - 1) * window + [11_500] * window)  # 1.5 us: under the floor
    # A drift of 1.5% a window passes window to window but not over the span.
    creeping = [int(100_000 * 1.015 ** (i // window)) for i in range(span * window)]
    assert not settled(creeping)
