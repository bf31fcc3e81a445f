"""One timing function for candidate and baseline alike.

    for each call i:   refill(i)            fresh input content (outside the clock)
                       flush L2             write a buffer of 2x the L2 size (GPU only)
                       synchronize device
                       start event  -> fn() -> end event      (GPU: CUDA events on the current stream)
                       synchronize device, then stop the host clock
                       observe(i, output)   the caller may keep a sample of outputs to check later

The reported time is the median of the per-call event times (GPU) or host monotonic times (CPU).
A warm-up first (module load, lazy init and autotuning stay out of the numbers), then an adaptive
repetition count: as many calls as fit in `budget_ms` of measured time, clamped to
[`min_reps`, `max_reps`].

Each call also records the host wall time from just before the start event to after a whole-device
synchronize. The event clock covers the current stream only; work a candidate pushes to other
streams, threads or devices finishes before the host clock stops, so `wall_minus_event_ms` grows and
the evaluator flags it. Any launch gap between the host timestamp and the event is common to the
candidate and the baseline.

The host clock is bound when this module is imported, which the worker does before the candidate
exists: a candidate that replaces `time.perf_counter_ns` at import does not reach the timer (and the
worker's tamper check, kevin.evaluator.probes, flags the replacement). Not covered here: C-level patches of
the clock or of torch's event functions from inside the worker, and GPU clocks changing between the candidate and baseline runs (they run back to back
on the same device, under the same lock).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

_perf_counter_ns = time.perf_counter_ns  # bound before any candidate code exists
_bound: dict[str, Any] = {}


def bind() -> None:
    """Bind torch's synchronize and event functions now; the worker calls this before it imports
    the candidate, and every Timer made afterwards uses these, not what torch holds then."""
    import torch

    _bound.update(
        sync=torch.cuda.synchronize,
        event=torch.cuda.Event,
        elapsed=torch.cuda.Event.elapsed_time,
        record=torch.cuda.Event.record,
        zero=torch.Tensor.zero_,
    )


@dataclass(frozen=True)
class TimingConfig:
    budget_ms: float = 2000.0
    """Measured time to spend on timed calls; the repetition count adapts to it."""
    warmup_ms: float = 100.0
    """Time spent on untimed warm-up calls (at least `min_warmup` calls)."""
    min_warmup: int = 3
    min_reps: int = 10
    max_reps: int = 1000
    flush_l2: bool = True

    def __post_init__(self) -> None:
        if self.budget_ms <= 0 or self.warmup_ms < 0:
            raise ValueError("timing budget_ms must be > 0 and warmup_ms >= 0")
        if not 1 <= self.min_reps <= self.max_reps:
            raise ValueError(f"need 1 <= min_reps ({self.min_reps}) <= max_reps ({self.max_reps})")


@dataclass(frozen=True)
class TimingStats:
    median_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float
    std_ms: float
    iqr_ms: float
    cv: float
    """Coefficient of variation: std / mean."""
    n: int
    wall_median_ms: float
    wall_minus_event_ms: float
    """Median over calls of (host wall time - event time); large when work escapes the event clock."""
    clock: str
    """`cuda_event` or `perf_counter`."""
    control_gap_ms: float = 0.0
    """Median (host wall - event) of empty calls timed right after, under the same load: the host's
    own launch and wake-up gap (`Timer.control_gap_ms`); 0 when not measured."""
    overhead_ms: float = 0.0
    """`judge_cycle` clock: the cycle overhead subtracted from every call (refill, flush, sync,
    signalling), measured in the runner before any candidate code existed."""
    block: int = 1
    """`judge_cycle` clock: calls per block; `median_ms` is the median of the block means."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize(times_ms: list[float], walls_ms: list[float], clock: str) -> TimingStats:
    ordered = sorted(times_ms)
    n = len(ordered)
    mean = statistics.fmean(ordered)
    std = statistics.pstdev(ordered) if n > 1 else 0.0
    q1, q3 = _quantile(ordered, 0.25), _quantile(ordered, 0.75)
    gaps = sorted(w - t for w, t in zip(walls_ms, times_ms, strict=True))
    return TimingStats(
        median_ms=_quantile(ordered, 0.5),
        mean_ms=mean,
        min_ms=ordered[0],
        max_ms=ordered[-1],
        std_ms=std,
        iqr_ms=q3 - q1,
        cv=std / mean if mean > 0 else math.inf,
        n=n,
        wall_median_ms=_quantile(sorted(walls_ms), 0.5),
        wall_minus_event_ms=_quantile(gaps, 0.5),
        clock=clock,
    )


def summarize_cycles(cycle_ms: list[float], overhead_ms: float, block: int) -> TimingStats:
    """Stats of calls timed by the judge's clock (kevin.evaluator.worker.timed): each call's time is
    its cycle less the overhead; `median_ms` is the median of the means of `block` consecutive
    calls (one block per call when there are fewer than 4 blocks' worth)."""
    floor = 1e-6
    times = [max(c - overhead_ms, floor) for c in cycle_ms]
    stats = summarize(times, cycle_ms, "judge_cycle")
    if len(times) < 4 * block:
        block = 1
    means = [statistics.fmean(times[i : i + block]) for i in range(0, len(times) - block + 1, block)]
    return TimingStats(
        **{
            **asdict(stats),
            "median_ms": _quantile(sorted(means), 0.5),
            "wall_minus_event_ms": 0.0,
            "overhead_ms": overhead_ms,
            "block": block,
        }
    )


def _quantile(ordered: list[float], q: float) -> float:
    if not ordered:
        raise ValueError("no samples")
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _nothing() -> None:
    return None


class Timer:
    """Times callables on one device with the functions `bind()` captured (at construction if it
    was not called), so a candidate imported after `bind()` cannot change how it is timed by
    patching torch's Python attributes."""

    def __init__(self, device: str, config: TimingConfig = TimingConfig()) -> None:
        import torch

        self.config = config
        self.device = device
        self.is_cuda = device.startswith("cuda")
        self._perf_ns = _perf_counter_ns
        if self.is_cuda:
            if not _bound:
                bind()
            self._sync = _bound["sync"]
            self._event_cls = _bound["event"]
            self._elapsed = _bound["elapsed"]
            self._record = _bound["record"]
            props = torch.cuda.get_device_properties(device)
            l2_bytes = int(getattr(props, "L2_cache_size", 0) or 50 * 2**20)
            # At least twice the L2 and at least 256 MB (triton's do_bench flushes 256 MB): the write
            # evicts every line, and takes long enough (~75 us on an H200) for the host to enqueue
            # the start event and the call before the start event fires on the device.
            flush_bytes = max(2 * l2_bytes, 256 * 2**20)
            self._flush = torch.empty(flush_bytes // 4, dtype=torch.int32, device=device)
            self._zero = _bound["zero"]
        else:
            self._flush = None

    def _one_call(self, fn: Callable[[], Any]) -> tuple[float, float, Any]:
        if self.is_cuda:
            self._sync()  # the refill is done; nothing else is in flight
            start, end = self._event_cls(enable_timing=True), self._event_cls(enable_timing=True)
            wall_start = self._perf_ns()
            if self.config.flush_l2:
                self._zero(self._flush)
            # No synchronize between the flush and the start event: the host enqueues fn's work
            # while the flush still runs, so the host's launch latency is not inside the interval.
            self._record(start)
            out = fn()
            self._record(end)
            self._sync()
            wall_ms = (self._perf_ns() - wall_start) / 1e6
            return self._elapsed(start, end), wall_ms, out
        start_ns = self._perf_ns()
        out = fn()
        elapsed_ms = (self._perf_ns() - start_ns) / 1e6
        return elapsed_ms, elapsed_ms, out

    def control_gap_ms(self, calls: int = 30) -> float:
        """The (wall - event) gap of an empty call, median of `calls`: what launch, the L2 flush
        and the host's wake-up after synchronize cost right now. A candidate's gap well above it
        means the device kept working after the end event (work the event clock did not see)."""
        if not self.is_cuda:
            return 0.0
        gaps = []
        for _ in range(calls):
            elapsed, wall, _ = self._one_call(_nothing)
            gaps.append(wall - elapsed)
        return statistics.median(gaps)

    def measure(
        self,
        fn: Callable[[], Any],
        refill: Callable[[int], None] | None = None,
        observe: Callable[[int, Any], None] | None = None,
    ) -> TimingStats:
        """Warm up, then time `fn` repeatedly. `refill(i)` runs before call i outside the clock;
        `observe(i, output)` sees every timed call's output (warm-up calls have negative i)."""
        config = self.config
        warm: list[float] = []
        spent_ms = 0.0
        i = -1
        while len(warm) < config.min_warmup or spent_ms < config.warmup_ms:
            if refill is not None:
                refill(i)
            elapsed, wall, out = self._one_call(fn)
            if observe is not None:
                observe(i, out)
            warm.append(elapsed)
            spent_ms += wall
            i -= 1
            if len(warm) >= 1000:
                break
        estimate = max(statistics.median(warm), 1e-4)
        reps = int(min(max(config.budget_ms / estimate, config.min_reps), config.max_reps))
        times: list[float] = []
        walls: list[float] = []
        for rep in range(reps):
            if refill is not None:
                refill(rep)
            elapsed, wall, out = self._one_call(fn)
            if observe is not None:
                observe(rep, out)
            times.append(elapsed)
            walls.append(wall)
        return summarize(times, walls, "cuda_event" if self.is_cuda else "perf_counter")
