"""The evaluation service on one node: submit many candidates, get results as they finish.

    submit(task, source) -> Future[EvalResult]      blocks while `max_pending` are in flight
    as_completed(futures)                            results in finishing order
    map(pairs)                                       results in submission order

Each evaluation is still one sandboxed worker process per candidate (kevin.evaluator.sandbox), so a crash
takes down only that candidate's worker. Concurrency is `max_in_flight` workers at once, spread
over the node's devices round-robin (`device_indices`); each device's lock (kevin.evaluator.worker) lets
builds overlap freely on the CPU cores while runs and timings on one GPU never overlap. A full
queue blocks `submit` (backpressure) instead of growing without bound.

It implements the `Evaluator` protocol of kevin.rl.env (`submit(task, source) -> Future`), so the
multi-turn environment and the trainer can use it as is. A Ray-backed service for many nodes is
the next step (issue #5); it will keep this interface.

Each evaluation still gets a fresh worker, but not a cold one: the service keeps up to
`spare_workers` (default `max_in_flight`) workers booted ahead of their jobs (kevin.evaluator.spares),
so a worker's and its runner's start (Python, torch, the CUDA contexts: seconds each) overlaps the
evaluations before it. On a GPU the spares are cut to what the device's memory holds beside the
workers in flight, and admission shares only what their contexts leave (kevin.evaluator.devmem).
`prepare()` starts building the toolchain's shim and symbol-check reference
(kevin.evaluator.prebuild) in the background, for a caller with other work before its first
evaluation. `close()` ends the spares and a build still going.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import as_completed as _as_completed
from typing import Any

from kevin.evaluator import devmem
from kevin.evaluator.evaluate import EvalConfig, evaluate, physical_device
from kevin.evaluator.prebuild import Prebuild
from kevin.evaluator.result import EvalResult
from kevin.evaluator.spares import SparePool
from kevin.tasks import Task


def planned(
    config: EvalConfig, devices: list[int], in_flight: int, spares: int
) -> tuple[EvalConfig, int, devmem.DevicePlan | None]:
    """The config (with the contexts' reservation) and the spares a GPU's memory holds beside
    `in_flight` workers spread over `devices` (kevin.evaluator.devmem); as asked on the CPU, or
    where no device's size is known."""
    if not config.on_gpu:
        return config, spares, None
    names = [physical_device(dataclasses.replace(config, device_index=i)) for i in devices]
    plan = devmem.plan_devices(names, in_flight, spares)
    if plan is None:
        return config, spares, None
    return dataclasses.replace(config, device_reserved_bytes=plan.reserved_bytes), plan.spares, plan


class EvaluationService:
    def __init__(
        self,
        config: EvalConfig,
        *,
        max_in_flight: int = 8,
        max_pending: int | None = None,
        device_indices: list[int] | None = None,
        spare_workers: int | None = None,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1 (got {max_in_flight})")
        self.devices = device_indices or [config.device_index]
        spares = max_in_flight if spare_workers is None else spare_workers
        self.config, spares, self.device_plan = planned(config, self.devices, max_in_flight, spares)
        self._pool = ThreadPoolExecutor(max_workers=max_in_flight, thread_name_prefix="kevin-eval")
        self._slots = threading.BoundedSemaphore(max_pending or 2 * max_in_flight)
        self._next_device = itertools.cycle(self.devices)
        self._lock = threading.Lock()
        self.spares = SparePool(spares)
        self.submitted = 0
        self.finished = 0
        self.prebuild: Prebuild | None = None

    def prepare(self) -> Prebuild:
        """Start building what every evaluation needs once per toolchain (returns at once; the
        same handle on later calls). Call it from the thread that will close the service: the build
        dies with that thread."""
        with self._lock:
            if self.prebuild is None:
                self.prebuild = Prebuild(self.config.build_cache, fast=self.config.fast_build)
            return self.prebuild

    def submit(self, task: Task, source: str) -> Future[EvalResult]:
        """Queue one evaluation; blocks while the queue is full."""
        self._slots.acquire()
        with self._lock:
            device = next(self._next_device)
            self.submitted += 1
        config = dataclasses.replace(self.config, device_index=device)
        future = self._pool.submit(evaluate, task, source, config, spares=self.spares)
        future.add_done_callback(self._done)
        return future

    def _done(self, _: Future) -> None:
        with self._lock:
            self.finished += 1
        self._slots.release()

    def map(self, pairs: Iterable[tuple[Task, str]]) -> list[EvalResult]:
        """Evaluate every (task, source) pair; results in the order given."""
        return [future.result() for future in [self.submit(task, source) for task, source in pairs]]

    @staticmethod
    def as_completed(futures: Iterable[Future[EvalResult]]) -> Iterator[Future[EvalResult]]:
        return _as_completed(list(futures))

    def progress(self) -> dict[str, Any]:
        with self._lock:
            return {
                "submitted": self.submitted,
                "finished": self.finished,
                "in_flight": self.submitted - self.finished,
            }

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self.spares.close()
        if self.prebuild is not None:
            self.prebuild.stop()

    def __enter__(self) -> EvaluationService:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
