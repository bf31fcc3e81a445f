"""The rollout side of a training step: which tasks, which evaluator, and where the time goes.

- `TaskSampler`: `tasks_per_step` distinct tasks per step, evenly across levels: levels take turns
  (round robin, continuing across steps), and within a level tasks come in seeded random passes, so
  every task of a level is seen once before any is seen twice. Its state (random generator, queues,
  turn pointer) goes into checkpoints, so a resumed run draws the same tasks.
- `DedupEvaluator`: within one step, a candidate identical to one already submitted for the same
  task is not evaluated again; it shares the first one's verdict (policies at low entropy repeat
  themselves, and evaluation is the step's bottleneck). `new_step()` forgets everything.
- `TimedPolicy`: wall time spent generating, so the step can log its split (generate, evaluate,
  learn). Candidates are evaluated while the rest of a turn is still being written (kevin.rl.env
  streams completions), so the two overlap and the split is: `seconds`, each turn's time from asking
  the policy to its last completion, summed over turns (generation wall time, evaluation under it
  included); the caller's episode time minus `seconds` is then the evaluation time not hidden by
  generation (each turn's time from its last completion to its last verdict) plus prompt building.
  A policy without `generate_stream` is timed the same way (its one `generate` call).
- `build_evaluator`: the real evaluator from the config: `EvaluationService` (sandboxed workers on
  this node) or `RayEvaluationService` (many nodes), with the per-candidate timing budget.
"""

from __future__ import annotations

import hashlib
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from kevin.evaluator.result import EvalResult
from kevin.rl.env import Evaluator, Generation, Policy, Sampling, in_prompt_order, stream_completions
from kevin.tasks import Task
from kevin.train.config import EvaluatorConfig


class TaskSampler:
    def __init__(self, tasks: Sequence[Task], *, seed: int) -> None:
        if not tasks:
            raise ValueError("no tasks to train on")
        self.by_level: dict[int, list[Task]] = {}
        for task in sorted(tasks, key=lambda t: t.id):
            self.by_level.setdefault(task.level, []).append(task)
        self.levels = sorted(self.by_level)
        self.rng = random.Random(seed)
        self.queues: dict[int, list[str]] = {level: [] for level in self.levels}
        self.turn = 0
        self._by_id = {task.id: task for task in tasks}

    def sample(self, count: int) -> list[Task]:
        """`count` distinct tasks, levels taking turns."""
        if count > len(self._by_id):
            raise ValueError(f"{count} tasks per step but only {len(self._by_id)} tasks to train on")
        chosen: list[str] = []
        while len(chosen) < count:
            level = self.levels[self.turn % len(self.levels)]
            self.turn += 1
            if all(task.id in chosen for task in self.by_level[level]):
                continue
            chosen.append(self._draw(level, set(chosen)))
        return [self._by_id[task_id] for task_id in chosen]

    def _draw(self, level: int, taken: set[str]) -> str:
        queue = self.queues[level]
        for _ in range(2):
            for position, task_id in enumerate(queue):
                if task_id not in taken:
                    return queue.pop(position)
            fresh = [task.id for task in self.by_level[level]]
            self.rng.shuffle(fresh)
            queue.extend(fresh)
        raise AssertionError("a level with an untaken task always yields one")

    def state(self) -> dict[str, Any]:
        return {
            "rng": self.rng.getstate(),
            "queues": {k: list(v) for k, v in self.queues.items()},
            "turn": self.turn,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        self.rng.setstate(state["rng"])
        self.queues = {int(k): list(v) for k, v in state["queues"].items()}
        self.turn = int(state["turn"])


class DedupEvaluator:
    """An `Evaluator` that evaluates each distinct (task, candidate) once per step, or once per
    launch with `reuse=True` (EvaluatorConfig.reuse_verdicts)."""

    def __init__(self, inner: Evaluator, *, reuse: bool = False) -> None:
        self.inner = inner
        self.reuse = reuse
        self._futures: dict[tuple[str, str, str], Future[EvalResult]] = {}
        self._lock = threading.Lock()
        self.submitted = 0
        self.evaluated = 0

    def submit(self, task: Task, candidate_source: str) -> Future[EvalResult]:
        key = (task.id, task.hash, hashlib.sha256(candidate_source.encode("utf-8")).hexdigest())
        with self._lock:
            self.submitted += 1
            if key in self._futures:
                return self._futures[key]
            self.evaluated += 1
        future = self.inner.submit(task, candidate_source)
        with self._lock:
            self._futures[key] = future
        return future

    def new_step(self) -> dict[str, int]:
        """Forget this step's verdicts (with `reuse`: only those that are not a plain verdict on the
        candidate); return how many candidates came and how many were evaluated."""
        with self._lock:
            counts = {"candidates": self.submitted, "evaluated": self.evaluated}
            if self.reuse:
                self._futures = {k: f for k, f in self._futures.items() if _reusable(f)}
            else:
                self._futures.clear()
            self.submitted = self.evaluated = 0
        return counts

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()


def _reusable(future: Future[EvalResult]) -> bool:
    """A finished evaluation whose verdict is about the candidate, not about our infrastructure."""
    if not future.done() or future.cancelled() or future.exception() is not None:
        return False
    return future.result().blame != "infrastructure"


class TimedPolicy:
    """A `StreamingPolicy` that adds up the wall time its inner policy (streaming or not) takes to
    write each batch, from the request to the last completion."""

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.calls = 0

    def generate(self, prompts: list[str], sampling: Sampling) -> list[Generation]:
        return in_prompt_order(self.generate_stream(prompts, sampling), len(prompts))

    def generate_stream(self, prompts: list[str], sampling: Sampling) -> Iterator[tuple[int, Generation]]:
        started = time.monotonic()
        try:
            yield from stream_completions(self.inner, prompts, sampling)
        finally:
            self.seconds += time.monotonic() - started
            self.calls += 1


def eval_config_for(config: EvaluatorConfig, backend: str) -> Any:
    """The EvalConfig behind the trainer's evaluator."""
    from kevin.evaluator.evaluate import EvalConfig
    from kevin.evaluator.timing import TimingConfig

    return EvalConfig(
        backend=backend,
        precision=config.precision,
        trials=config.trials,
        timing=TimingConfig(budget_ms=config.timing_budget_ms, warmup_ms=config.timing_warmup_ms),
        static_check=config.static_check,
        cache_dir=config.cache_dir or None,
    )


DeviceSection = Callable[[], AbstractContextManager[None]]


def trainer_device_section(config: EvaluatorConfig, backend: str, device: Any) -> DeviceSection | None:
    """The shared side of the local evaluator's lock on the trainer's own GPU (`device`), for the
    trainer's device work (generation batches, gradient steps): the lock's exclusive side is how
    kevin's timing keeps the device to itself, and a process that computes there without it is
    timed as part of the candidate (`EvaluatorConfig.share_device`). None where the two cannot meet:
    the option off, a Ray evaluator (its own devices), a CPU trainer or back end, or a GPU the local
    service does not evaluate on. A timing waiting for the device makes the trainer's next section
    wait in turn (the lock's turnstile), and a section of the trainer's never waits on a verdict,
    so the two cannot deadlock. A section gives back what torch's caching allocator kept of it
    before it lets go of the lock: the workers need that memory next (kevin.evaluator.devmem; on the
    H100 the evaluator's own draws ran out of it, session 34)."""
    import dataclasses

    import torch

    from kevin.evaluator.evaluate import GPU_BACKENDS, device_lock

    if not config.share_device or config.kind != "local" or backend not in GPU_BACKENDS:
        return None
    if getattr(device, "type", None) != "cuda":
        return None
    index = device.index if device.index is not None else 0
    if index not in (list(config.device_indices) or [0]):
        return None
    shared = device_lock(dataclasses.replace(eval_config_for(config, backend), device_index=index)).shared

    @contextmanager
    def section() -> Iterator[None]:
        with shared():
            try:
                yield
            finally:
                torch.cuda.empty_cache()

    return section


def build_evaluator(config: EvaluatorConfig, backend: str, step_candidates: int = 0) -> Evaluator:
    """The real evaluator the config names (local sandboxed service, or Ray). `step_candidates`: how
    many candidates a step submits at once, the default count of spare workers when more than
    `max_in_flight` (EvaluatorConfig.spare_workers)."""
    eval_config = eval_config_for(config, backend)
    if config.kind == "ray":
        from kevin.evaluator.ray_service import RayEvaluationService

        return RayEvaluationService(
            eval_config, actor_concurrency=config.max_in_flight, address=config.ray_address or None
        )
    from kevin.evaluator.service import EvaluationService

    spares = (
        config.spare_workers
        if config.spare_workers is not None
        else max(config.max_in_flight, step_candidates)
    )
    service = EvaluationService(
        eval_config,
        max_in_flight=config.max_in_flight,
        device_indices=list(config.device_indices) or None,
        spare_workers=spares,
    )
    # The toolchain's shim and symbol-check reference build while the model loads and the first
    # batch generates (on the H200 they were most of the first evaluation's 207-227 s).
    service.prepare()
    return service
