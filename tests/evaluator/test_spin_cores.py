"""The judge and its runners spin on cores of their own while they time (kevin.evaluator.worker.timed).

On the GPU back end the judge spins waiting for a runner's DONE and the runner spins waiting for
the next GO. The H200 learning run of session 23 timed 18 candidates' cycles at 7.99 or 15.95 ms
(honest cycles of 0.2-0.5 ms, the brackets around them 0.35 ms) and slowed brackets timed others
at 0: the scheduler had put the two spinners on one core, where they take turns a time slice at a
time. This machine shows the same 8 ms with the two pinned to one core.
"""

from __future__ import annotations

import os
import statistics
import subprocess

import pytest

from kevin.evaluator.cores import pair_from_top
from kevin.evaluator.worker.timed import kept_off, seated_for_timing

TWO_CORES = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")


def test_each_device_gets_its_own_pair_of_cores_from_the_top():
    assert pair_from_top(0, range(16)) == (15, 14)
    assert pair_from_top(1, range(16)) == (13, 12)
    assert pair_from_top(9, range(16)) == (13, 12)  # 8 pairs: the 10th device shares the 2nd's
    assert pair_from_top(0, {3, 7, 5}) == (7, 5)
    assert pair_from_top(0, {4}) is None


@TWO_CORES
@pytest.mark.timeout(180)
def test_a_spinning_runner_on_the_judges_core_is_moved_off_it_while_timed(cpu_runner, overhead_cycles):
    """A real confined runner's spin cycles, with it and this (judging) thread first put on one core
    as the scheduler did on the H200: two slices a cycle there, tens of microseconds pinned apart."""
    before = os.sched_getaffinity(0)
    pid = cpu_runner.process.pid
    try:
        core = sorted(before)[0]
        os.sched_setaffinity(0, {core})
        os.sched_setaffinity(pid, {core})
        checks: dict = {}
        with seated_for_timing([pid], pair_from_top(0, before), checks):
            record = overhead_cycles(cpu_runner, True, budget_ms=40.0, max_reps=40)
        assert checks["timing_cores"] == {
            **dict(zip(("judge", "runners"), pair_from_top(0, before), strict=True)),
            "kept": False,
        }
        assert statistics.median(record.cycle_ns) < 1_000_000  # 8.0 ms on one core
        assert os.sched_getaffinity(0) == {core} and os.sched_getaffinity(pid) == {core}
    finally:
        os.sched_setaffinity(0, before)


def test_a_devices_ordinal_is_its_host_wide_name(monkeypatch):
    """Under CUDA_VISIBLE_DEVICES (Ray actors, per-GPU processes) cuda:0 of two processes can be two
    GPUs: their timings must not pick one pair of cores."""
    import zlib

    from kevin.evaluator.evaluate import EvalConfig, device_ordinal

    config = EvalConfig(backend="cuda", device_index=1)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert device_ordinal(config) == 1
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert device_ordinal(config) == 5
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-aa,GPU-bb")
    assert device_ordinal(config) == zlib.crc32(b"GPU-bb")


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 4, reason="needs four cores")
def test_a_clean_calibration_spins_off_the_timing_cores():
    """The clean calibration spins beside other workers' device work: never on the cores a timing
    of its device is pinned to, and everything is put back after."""
    child = subprocess.Popen(["sleep", "60"])
    before = os.sched_getaffinity(0)
    cores = pair_from_top(0, before)
    try:
        with kept_off([child.pid], cores):
            for pid in (0, child.pid):
                assert os.sched_getaffinity(pid) == before - set(cores)
        assert os.sched_getaffinity(0) == before and os.sched_getaffinity(child.pid) == before
    finally:
        child.kill()
        child.wait()


def test_with_too_few_cores_left_a_calibration_is_left_where_it_is():
    child = subprocess.Popen(["sleep", "60"])
    try:
        allowed = os.sched_getaffinity(0)
        pair = tuple(sorted(allowed)[-2:]) if len(allowed) >= 2 else None
        with kept_off([child.pid], pair if len(allowed) < 4 else None):
            assert os.sched_getaffinity(child.pid) == allowed
    finally:
        child.kill()
        child.wait()
