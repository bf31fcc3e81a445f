"""The deferred-work check: a timed call's output fetched much slower than a clean fetch.

A runner that answers DONE before its output exists (computing it only when the judge fetches it)
is fast on every timed call and slow on every fetch. The judge fetches a few timed calls' outputs,
chosen after they ran (kevin.evaluator.worker.timed), and compares the fastest of those fetches
with the clean fetch of an output-sized buffer: scheduling noise slows single fetches, deferral
slows them all. What is allowed grows with the clean fetch (`FETCH_CLEAN_MARGIN`), with the call (a
quarter of its work hidden would still be caught) and never falls under the signalling's jitter
(`FETCH_FLOOR_MS`).

The clean fetch is the slower of two: the bracket's (the control runner's, at the moment of the
timing) and the timed runner's own from before its candidate loaded, which carries whatever state
that runner is in and which the candidate cannot touch. The H200 (session 22) fetched small outputs
0.1-0.2 ms slower from a candidate's runner than from the control under the same conditions; s37's
H100 A/B ruled out the control's profiler warm-up as the cause (`bench/results/h100/s37/`).
"""

from __future__ import annotations

from typing import Any

FETCH_FLOOR_MS = {"spin": 0.1, "block": 1.0}
"""Fetch-time excess below which no deferral is claimed: what honest fetches vary by. On the GPU
back end the reply is posted beside FETCHED since s42 (exchange.SharedArea.post), so the fetch is
the copy and a few microseconds; the copy of a candidate's output ran up to 0.067 ms slower than the
clean copy in honest verdicts (s37/s41 fetch A/B on an H100; 0.063 ms in s34's learning run), so
0.1 ms (before s42 the floor was 0.05 and the socket's wake-up, 0.05-0.15 ms, was in every fetch:
half the clean fetch, 0.075-0.15 ms for small outputs, was what was allowed in practice). On the
CPU back end every wait is on the socket: its round trip's jitter."""
FETCH_CLEAN_MARGIN = {"spin": 0.5, "block": 2.5}
"""Fetch-time excess allowed, as a multiple of the clean fetch. The clean fetch copies a buffer that
stays in the caches from one fetch to the next; on the CPU back end an honest output is copied after
a call whose own traffic has pushed much of it out to memory: an honest relu's 8 MiB output was
copied in 2.4-2.7 ms against a clean 0.81-0.95 ms on a 2-core CI host (session 37, flagged
`deferred_work` under a margin of 0.5), and in 0.74 ms against 0.25 ms on the development machine, so
up to 2 clean fetches more, and half of one for noise. On the GPU back end the copy leaves the
device by DMA, whatever the host's caches hold."""
CALL_SHARE = 0.5
"""Fetch-time excess allowed, as a share of the call's median: deferring a quarter of a call is caught."""


def _rounded(ms: float | None) -> float | None:
    return None if ms is None else round(ms, 4)


def fetch_checks(
    fetch_ns: dict[int, int],
    copy_ns: dict[int, int],
    overhead: dict[str, Any],
    call_median_ms: float,
    signalling: str,
) -> tuple[dict[str, Any], bool]:
    """The checks a verdict keeps about its timed fetches, and whether they show deferred work.

    fetch_ns / copy_ns: the timed fetches (judge's clock) and what the runner said each copy took,
    by call index; overhead: the bracket's `fetch_ms` / `copy_ms` and the runner's own clean
    `own_fetch_ms` / `own_copy_ms` (kevin.evaluator.worker.timed.overhead_from); signalling: "spin"
    (GPU back ends) or "block" (CPU)."""
    fastest_ms = min(fetch_ns.values()) / 1e6
    clean_ms = max(overhead["fetch_ms"], overhead.get("own_fetch_ms") or 0.0)
    excess_ms = fastest_ms - clean_ms
    checks = {
        "fetch_excess_ms": round(excess_ms, 4),
        "fetch_ms": {
            "clean_median": round(clean_ms, 4),
            "bracket": round(overhead["fetch_ms"], 4),
            "own": round(overhead.get("own_fetch_ms") or 0.0, 4),
            "timed": [round(ns / 1e6, 4) for ns in fetch_ns.values()],
        },
        # What each runner said its copy into the area took, for diagnosis only: a slow copy, or
        # slow signalling around it.
        "fetch_copy_ms": {
            "bracket": _rounded(overhead.get("copy_ms")),
            "own": _rounded(overhead.get("own_copy_ms")),
            "timed": [round(ns / 1e6, 4) for ns in copy_ns.values()],
        },
    }
    allowed_ms = max(
        CALL_SHARE * call_median_ms, FETCH_CLEAN_MARGIN[signalling] * clean_ms, FETCH_FLOOR_MS[signalling]
    )
    return checks, excess_ms > allowed_ms
