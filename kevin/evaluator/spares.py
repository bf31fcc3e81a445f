"""Workers started before their job (spares), so a judge's start-up overlaps the evaluations before it.

A worker (kevin.evaluator.worker) boots before it reads its job: it imports torch, starts CUDA on its
device and launches its candidate's runner, which boots too (torch, the CUDA context, the profiler);
then it waits for the job on its pipe. Started fresh for one job, that changes nothing. Started as a
spare, while earlier evaluations run, those seconds (about ten of them on the H200 under load) are
off the evaluation's path. What a boot may depend on is its boot spec (`boot_spec`): the device, the
build cache, the CPU threads, the L2 flush, the memory limits. Never the problem, the candidate or
the secrets: those reach a spare only with its job, on the pipe only it holds.

`SparePool` keeps up to `max_idle` booted spares per boot spec (and per work-directory root and
extra environment). `take(key, start)` hands out a live one, or None, and starts a replacement in
the calling thread: a worker dies with the thread that started it (PR_SET_PDEATHSIG), so spares are
started by the threads that will want them. `close()` ends the idle ones; pools close at exit.
"""

from __future__ import annotations

import atexit
import json
import threading
import weakref
from collections.abc import Callable
from typing import Any, Protocol

BOOT_VARIABLE = "KEVIN_WORKER_BOOT"
"""The environment variable carrying a worker's boot spec (JSON)."""


def boot_spec(job: dict[str, Any]) -> dict[str, Any]:
    """What a worker and its runner may do before the job: a job is given only to a worker booted
    with exactly its spec."""
    timing = job.get("timing") or {}
    return {
        "device": job["device"],
        "build_cache": job["build_cache"],
        "fast_build": bool(job.get("fast_build", True)),
        "cpu_threads": job.get("cpu_threads"),
        "flush_l2": bool(timing.get("flush_l2", True)),
        "area_bytes": int(job.get("area_bytes", 8 << 30)),
        "max_file_bytes": int(job.get("max_file_bytes", 64 << 20)),
        # The boot's device work holds this lock shared (kevin.evaluator.worker.__main__.on_device).
        "device_lock": job.get("device_lock"),
        "device_slots": int(job.get("device_slots") or 1),
    }


def pool_key(spec: dict[str, Any], workdir_root: str | None, env_extra: dict[str, str] | None) -> str:
    return json.dumps([spec, workdir_root, sorted((env_extra or {}).items())], sort_keys=True)


class Spare(Protocol):
    def alive(self) -> bool: ...

    def discard(self) -> None: ...


class SparePool:
    def __init__(self, max_idle: int = 2) -> None:
        if max_idle < 0:
            raise ValueError(f"max_idle must be >= 0 (got {max_idle})")
        self.max_idle = max_idle
        self._idle: dict[str, list[Spare]] = {}
        self._lock = threading.Lock()
        self._closed = False
        self.taken = 0
        self.started = 0
        _POOLS.add(self)

    def take(self, key: str, start: Callable[[], Spare]) -> Spare | None:
        """A booted spare for `key`, or None; then, if fewer than `max_idle` wait, one more is
        started (`start()`, in this thread) for a later job."""
        spare: Spare | None = None
        dead: list[Spare] = []
        with self._lock:
            idle = self._idle.setdefault(key, [])
            while idle:
                candidate = idle.pop(0)
                if candidate.alive():
                    spare = candidate
                    break
                dead.append(candidate)
            wanted = not self._closed and len(idle) < self.max_idle
            self.taken += spare is not None
        for worker in dead:
            worker.discard()
        if wanted:
            fresh = start()
            with self._lock:
                kept = not self._closed
                if kept:
                    self._idle.setdefault(key, []).append(fresh)
                    self.started += 1
            if not kept:
                fresh.discard()
        return spare

    def idle(self) -> int:
        with self._lock:
            return sum(len(v) for v in self._idle.values())

    def close(self) -> None:
        """End every idle spare; later takes start none."""
        with self._lock:
            self._closed = True
            spares = [s for idle in self._idle.values() for s in idle]
            self._idle.clear()
        for spare in spares:
            spare.discard()


_POOLS: weakref.WeakSet[SparePool] = weakref.WeakSet()


@atexit.register
def _close_pools() -> None:
    for pool in list(_POOLS):
        pool.close()
