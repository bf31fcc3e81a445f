"""The baseline: the reference's timing, from the parent's cache or timed here under the task's lock.

Mixed into `Harness`; `self` is the harness (kevin.evaluator.worker.harness)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kevin.evaluator import devlock


class BaselineStage:
    def baseline(self, model: Any, buffers: list[Any], fresh: Any) -> dict[str, Any]:
        """The reference's timing: from the parent's cache, else timed here. Evaluations of one task
        take the task's baseline lock in turn (held until this process dies, after the parent has
        cached what this one timed), so a task's baseline is timed once however many run at once."""
        job = self.job
        baseline = dict(job.get("baseline_cached") or {})
        wanted = ["eager"] + (["compile"] if job.get("compile_baseline") else [])
        if all(k in baseline for k in wanted):
            return baseline
        lock_file = job.get("baseline_lock")
        if lock_file:
            self.stage("wait_gpu")
            devlock.hold(lock_file)
        baseline = dict(late_baseline(job.get("baseline_cache_file")) or baseline)
        state: dict[str, Any] = {}
        if "eager" not in baseline:
            with self.device_section("baseline", exclusive=True):
                baseline["eager"] = self.timer.measure(
                    lambda: model(*buffers), self._refill(fresh, buffers, state)
                ).to_dict()
        if job.get("compile_baseline") and "compile" not in baseline:
            compiled_model = self.torch.compile(model)
            with self.device_section("baseline", exclusive=True):
                baseline["compile"] = self.timer.measure(
                    lambda: compiled_model(*buffers), self._refill(fresh, buffers, state)
                ).to_dict()
        return baseline



def late_baseline(path: str | None) -> dict[str, Any]:
    """The baseline another evaluation of this task cached after this one started (same key, so
    same device and settings); empty when there is none."""
    if not path:
        return {}
    try:
        stats = json.loads(Path(path).read_text()).get("stats")
    except (OSError, ValueError, AttributeError):
        return {}
    return dict(stats) if isinstance(stats, dict) and "eager" in stats else {}


