"""The evaluation service on a Ray cluster: the same interface as kevin.evaluator.service, across nodes.

    RayEvaluationService(config).submit(task, source) -> Future[EvalResult]

One actor per GPU (`num_gpus=1`; Ray sets CUDA_VISIBLE_DEVICES, so each actor sees its GPU as
cuda:0), or `actors` CPU actors for the cpp back end. Each actor evaluates up to
`actor_concurrency` candidates at once through the ordinary sandboxed path (kevin.evaluator.evaluate: a
worker process per candidate), so builds overlap on the node's cores while the per-GPU lock keeps
runs and timings apart. A crash takes down one candidate's worker, never the actor. Submissions
go round-robin over the actors; results come back as plain dicts and are rebuilt as EvalResult.

Ray is an optional extra (`pip install -e ".[ray]"`), imported only when this module is used.
Not done here: placement by build load (round-robin ignores how busy an actor is), a shared build
cache across nodes (each node keeps its own under the cache directory), and retrying a task whose
actor died with its node.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
from concurrent.futures import Future
from typing import Any

from kevin.evaluator.evaluate import EvalConfig
from kevin.evaluator.result import EvalResult
from kevin.tasks import Task


class _EvalActor:
    """Runs inside a Ray worker process; one per GPU (or per CPU slot for the cpp back end)."""

    def __init__(self, config: EvalConfig, spare_workers: int = 4) -> None:
        from kevin.evaluator.service import planned
        from kevin.evaluator.spares import SparePool

        # Ray has narrowed CUDA_VISIBLE_DEVICES to this actor's GPU: it is device 0 here. Its
        # `spare_workers` (its concurrency) run at once: the spares are what its memory holds beside.
        config = dataclasses.replace(config, device_index=0)
        self.config, spares, _ = planned(config, [0], spare_workers, spare_workers)
        # Workers booted ahead of their jobs, started by the actor's own (long-lived) threads.
        self.spares = SparePool(spares)

    def evaluate(self, task: dict[str, Any], source: str) -> dict[str, Any]:
        from kevin.evaluator.evaluate import evaluate

        return evaluate(Task.from_dict(task), source, self.config, spares=self.spares).to_dict()

    def where(self) -> dict[str, Any]:
        import os
        import socket

        return {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
        }


class RayEvaluationService:
    def __init__(
        self,
        config: EvalConfig,
        *,
        actors: int | None = None,
        actor_concurrency: int = 4,
        address: str | None = None,
        init_kwargs: dict[str, Any] | None = None,
    ) -> None:
        import ray

        if not ray.is_initialized():
            ray.init(address=address, **(init_kwargs or {}))
        self._ray = ray
        if config.on_gpu:
            gpus = int(ray.cluster_resources().get("GPU", 0))
            count = actors or gpus
            if count < 1:
                raise RuntimeError("the Ray cluster has no GPUs; use backend 'cpp' or add GPU nodes")
            options: dict[str, Any] = {"num_gpus": 1, "num_cpus": 1}
        else:
            count = actors or 1
            options = {"num_cpus": 1}
        actor_class = ray.remote(_EvalActor).options(max_concurrency=actor_concurrency, **options)
        self.actors = [actor_class.remote(config, actor_concurrency) for _ in range(count)]
        self._next = itertools.cycle(self.actors)
        self._lock = threading.Lock()

    def submit(self, task: Task, source: str) -> Future[EvalResult]:
        with self._lock:
            actor = next(self._next)
        reference = actor.evaluate.remote(task.to_dict(), source)
        result: Future[EvalResult] = Future()

        def finish(done: Future) -> None:
            try:
                result.set_result(EvalResult.from_dict(done.result()))
            except BaseException as exc:  # the actor or its node died: our side, not the candidate's
                result.set_exception(exc)

        reference.future().add_done_callback(finish)
        return result

    def map(self, pairs: list[tuple[Task, str]]) -> list[EvalResult]:
        return [future.result() for future in [self.submit(task, source) for task, source in pairs]]

    def placement(self) -> list[dict[str, Any]]:
        """Where each actor runs (host, pid, visible GPUs)."""
        return self._ray.get([actor.where.remote() for actor in self.actors])

    def close(self) -> None:
        for actor in self.actors:
            self._ray.kill(actor)
        self.actors = []

    def __enter__(self) -> RayEvaluationService:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
