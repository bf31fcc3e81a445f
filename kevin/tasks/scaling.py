"""Timing a problem's eager reference and doubling its size until it runs long enough (#18).

Shared by the generator (`kevin tasks generate --min-ms`, which doubles the batch of a drawn task)
and the enlarger (`kevin tasks enlarge`, which doubles a KernelBench problem's leading size constant):

    for each doubling 0, 1, ..., max_doublings:
        footprint of the current size > memory budget  -> stop: "... > budget" (nothing run)
        measure the reference (median of repeats)     -> an exception stops it (out of memory, mostly)
        time > min_ms                                  -> done
        double the size

What it returns is the largest size that was measured, its time, and why it stopped short (empty when
it made it). The size itself is opaque here: the caller says how to render, size and grow it.
Measured times vary run to run and machine to machine, so how many doublings a problem needs does too.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from kevin.tasks.probe import GIB

MAX_DOUBLINGS = 12
Size = TypeVar("Size")


def measure_reference_ms(source: str, *, device: str = "cpu", warmup: int = 3, repeats: int = 10) -> float:
    """Median time of the eager reference's forward on `device`, in ms (inputs already there).

    On cuda, CUDA events around each forward after a synchronize; a chain of tiny kernels can still
    read above a threshold through launch gaps, which is why the scale-up grows the batch, not the
    repeat count. On cpu, wall time on one thread.
    """
    import torch

    from kevin.tasks.probe import import_problem

    with tempfile.TemporaryDirectory(prefix="kevin-measure-") as tmp:
        module = import_problem(source, Path(tmp) / "problem.py")
        torch.manual_seed(0)
        model = module.Model(*module.get_init_inputs()).to(device)
        inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
    times_ms = []
    threads = torch.get_num_threads()
    if device == "cpu":
        torch.set_num_threads(1)  # a thread pool on a busy machine times the other load, not the task
    try:
        with torch.no_grad():
            for i in range(warmup + repeats):
                if device == "cuda":  # the device's own clock, bracketing the forward's kernels
                    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    torch.cuda.synchronize()
                    begin.record()
                    model(*inputs)
                    end.record()
                    end.synchronize()
                    elapsed_ms = begin.elapsed_time(end)
                else:
                    start = time.perf_counter()
                    model(*inputs)
                    elapsed_ms = (time.perf_counter() - start) * 1000.0
                if i >= warmup:
                    times_ms.append(elapsed_ms)
    finally:
        torch.set_num_threads(threads)
    del model, inputs
    if device == "cuda":
        torch.cuda.empty_cache()
    return statistics.median(times_ms)


@dataclass(frozen=True)
class Scaled(Generic[Size]):
    """Where a doubling run stopped."""

    size: Size
    """The largest size measured (the starting size when nothing could be measured)."""
    reference_ms: float | None
    """Its measured time, rounded to 4 decimals; None when nothing was measured."""
    reason: str
    """Why it stopped below min_ms; empty when the time passed it."""
    doublings: int
    """How many times the measured size was doubled from the start."""
    stopped_by: str = "min_ms"
    """`min_ms` (made it), `budget` (the next size would not fit), `error` (measuring raised) or
    `doublings` (MAX_DOUBLINGS reached)."""


def double_until_min_ms(
    start: Size,
    *,
    source: Callable[[Size], str],
    footprint_bytes: Callable[[Size], int | None],
    grow: Callable[[Size], Size],
    describe: Callable[[Size], str],
    min_ms: float,
    device: str,
    budget_bytes: int,
    measure: Callable[..., float] | None = None,
    max_doublings: int = MAX_DOUBLINGS,
) -> Scaled[Size]:
    """Grow `start` until its reference takes more than `min_ms` on `device` (module docstring).

    `source` renders a size as a problem file, `footprint_bytes` estimates what it holds (None:
    unknown, measured anyway), `grow` doubles it, `describe` names it in reasons (`batch 64`).
    """
    measure = measure or measure_reference_ms
    size, last = start, Scaled(start, None, "", 0)
    for doublings in range(max_doublings + 1):
        footprint = footprint_bytes(size)
        if footprint is not None and footprint > budget_bytes:
            why = f"{describe(size)} would need ~{footprint / GIB:.2f} GiB > the {budget_bytes / GIB:.3g} GiB budget"
            return Scaled(last.size, last.reference_ms, why, last.doublings, "budget")
        try:
            elapsed_ms = measure(source(size), device=device)
        except Exception as exc:  # out of memory on the device, mostly: the problem cannot grow
            first_line = str(exc).splitlines()[0] if str(exc) else ""
            why = f"{describe(size)}: {type(exc).__name__}: {first_line}"
            return Scaled(last.size, last.reference_ms, why, last.doublings, "error")
        last = Scaled(size, round(elapsed_ms, 4), "", doublings)
        if elapsed_ms > min_ms:
            return last
        size = grow(size)
    why = f"still below {min_ms} ms after {max_doublings} doublings"
    return Scaled(last.size, last.reference_ms, why, max_doublings, "doublings")
