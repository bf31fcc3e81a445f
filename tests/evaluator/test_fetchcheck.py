"""The deferred-work rule on its own (kevin.evaluator.worker.fetchcheck); the judge's use of it is
tested through its timings in test_bracket.py."""

from __future__ import annotations

from kevin.evaluator.worker.fetchcheck import fetch_checks

CLEAN = {"fetch_ms": 0.10, "own_fetch_ms": 0.12, "copy_ms": 0.04, "own_copy_ms": 0.05}


def ns(*ms: float) -> dict[int, int]:
    return {i: int(m * 1e6) for i, m in enumerate(ms)}


def test_work_hidden_in_every_fetch_is_deferred_work() -> None:
    # A call timed at 1.5 ms that leaves about 1 ms more of its work for every fetch: past half the
    # call (CALL_SHARE), half the clean fetch and the floor.
    checks, deferred = fetch_checks(ns(1.2, 1.25, 1.3), ns(1.1, 1.1, 1.1), CLEAN, 1.5, "spin")
    assert deferred
    assert checks["fetch_excess_ms"] == 1.08  # the fastest against the slower clean fetch (own)
    assert checks["fetch_ms"]["clean_median"] == 0.12
    assert checks["fetch_copy_ms"] == {"bracket": 0.04, "own": 0.05, "timed": [1.1, 1.1, 1.1]}


def test_one_slow_fetch_is_noise_not_deferral() -> None:
    _, deferred = fetch_checks(ns(3.0, 0.13, 2.0), ns(0.05, 0.05, 0.05), CLEAN, 0.02, "spin")
    assert not deferred


def test_the_excess_allowed_grows_with_the_call() -> None:
    timed = ns(0.9, 0.95)
    assert fetch_checks(timed, {}, CLEAN, 1.0, "spin")[1]
    assert not fetch_checks(timed, {}, CLEAN, 2.0, "spin")[1]


def test_the_cpu_allows_its_socket_jitter_and_a_cold_copy() -> None:
    # CI's honest relu (session 37): 8 MiB fetched in 2.37 ms against a clean 0.95 ms.
    clean = {"fetch_ms": 0.95, "own_fetch_ms": 0.81}
    assert not fetch_checks(ns(2.37, 2.69), {}, clean, 0.3, "block")[1]
    assert fetch_checks(ns(2.37, 2.69), {}, clean, 0.3, "spin")[1]
    assert not fetch_checks(ns(0.1 + 0.9), {}, {"fetch_ms": 0.1}, 0.01, "block")[1]  # under the 1 ms floor


def test_an_honest_small_outputs_slower_copy_is_not_deferral() -> None:
    # s37's H100 A/B, 05_matmul small: the candidate's copy 0.067 ms over the clean copy with the
    # fetch then the copy alone (the reply posted beside FETCHED), a 0.056 ms call.
    clean = {"fetch_ms": 0.047, "own_fetch_ms": 0.040}
    assert not fetch_checks(ns(0.114, 0.118), {}, clean, 0.056, "spin")[1]
    # Deferring a small kernel's whole 0.12 ms still shows.
    assert fetch_checks(ns(0.167, 0.17), {}, clean, 0.01, "spin")[1]
