"""The device, as one judge holds it (kevin.evaluator.devlock): admission for the job's memory, an
admitted moment for the clean calibration, shared and exclusive sections, and what the judge's own
allocator saw.

Mixed into `Harness`; `self` is the harness (kevin.evaluator.worker.harness).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kevin.evaluator import devlock


class DeviceStage:
    def admit(self, input_bytes: int | None) -> None:
        """Take the device's admission slots (see kevin.evaluator.devlock): one for a job that fits beside
        others, all of them for one too big to share the device's memory."""
        path = self.job.get("device_lock")
        if not path:
            return
        slots = int(self.job.get("device_slots", 1))
        self.lock = devlock.DeviceLock(path, slots)
        # Judge and runner each hold a copy of the inputs and outputs.
        need = devlock.footprint_bytes(
            input_bytes, 2 * (self.job["trials"] + self.job.get("distribution_trials", 0))
        )
        weight = self.admission_weight(need, slots)
        self.lock.admit(weight)
        admission = self.checks.setdefault("device_admission", {})
        admission.update(weight=weight, slots=slots, estimate_bytes=need)
        if self.is_cuda:
            admission["memory_wait_s"] = devlock.wait_for_memory(
                self.torch, need if weight < slots else None, int(self.job.get("device_reserved_bytes") or 0)
            )
            admission["free_bytes"] = int(self.torch.cuda.mem_get_info()[0])  # what the job found

    def admission_weight(self, need: int | None, slots: int) -> int:
        """The slots a job needing `need` bytes of the device takes (kevin.evaluator.devlock)."""
        total = self.torch.cuda.get_device_properties(self.device).total_memory if self.is_cuda else 0
        total -= int(self.job.get("device_reserved_bytes") or 0)  # the booted workers' contexts
        weight = devlock.weight_for(need, total, slots) if self.is_cuda else 1
        return int(self.job.get("admission_weight") or weight)  # a rerun alone after an OOM

    @contextmanager
    def admitted_moment(self, stage: str) -> Iterator[None]:
        """A stage before the job's admission that puts input-sized data on the device (the clean
        calibration: the reference's outputs here, a draw of the inputs in the runner), admitted for
        its moment with the weight of what it holds, its device memory handed back (`trim` on the
        runner's side) before the slots are. s46's H100 A/A pass: 16 judges calibrated at once outside
        admission and kept what they drew through their compiles; the device filled, and 9 of 32
        honest copies and 6 background candidates ended in out-of-memory errors."""
        lock = self.device_lock() if self.is_cuda else None
        if lock is None:
            with self.shared_device(stage):
                yield
            return
        slots = int(self.job.get("device_slots", 1))
        need = devlock.footprint_bytes(self.input_bytes, 0)
        self.stage("wait_gpu")
        lock.admit(self.admission_weight(need, slots))
        try:
            wait_s = devlock.wait_for_memory(self.torch, need, int(self.job.get("device_reserved_bytes") or 0))
            self.checks.setdefault("device_admission", {})[f"{stage}_memory_wait_s"] = wait_s
            with self.shared_device(stage):
                try:
                    yield
                finally:  # cudaFree is the device's work too: inside the section
                    with contextlib.suppress(Exception):  # a faulted context: the slots still go
                        self.torch.cuda.empty_cache()
        finally:
            lock.release()

    def device_memory(self) -> dict[str, int] | None:
        """This judge's own peak on the device (torch's allocator, read on the host: no device call,
        so a faulted context answers too), beside the admission's estimate: the numbers that
        `devlock.footprint_bytes` is to be fitted to (s45: it puts large inputs alone)."""
        cuda = self.torch.cuda
        if not self.is_cuda or not cuda.is_initialized():
            return None
        return {
            "judge_peak_allocated": int(cuda.max_memory_allocated(self.device)),
            "judge_peak_reserved": int(cuda.max_memory_reserved(self.device)),
        }

    @contextmanager
    def device_section(self, stage: str, exclusive: bool) -> Iterator[None]:
        """Run a stage holding the device shared (other workers' non-timing work may overlap) or
        exclusively (nothing else runs on it: timing)."""
        if self.lock is None:
            self.stage(stage)
            yield
            return
        self.stage("wait_gpu")
        with self.lock.exclusive() if exclusive else self.lock.shared():
            self.stage(stage)
            yield
            self.sync()

    def device_work(
        self, section: contextlib.AbstractContextManager[Any]
    ) -> contextlib.AbstractContextManager[Any]:
        """`section` (a device-lock section) for kevin's own device work on a GPU back end; on the CPU
        back end that work is host work, which no lock keeps from a timing (its weight does: the
        sessions' niceness), and holding the host's lock there only moved the builds a load starts
        later in the batch."""
        return section if self.is_cuda else contextlib.nullcontext()

    @contextmanager
    def shared_device(self, stage: str) -> Iterator[None]:
        """The device beside other workers' shared work, without admission (a short calibration:
        never during another's timing)."""
        lock = self.device_lock()
        if lock is None:
            self.stage(stage)
            yield
            return
        self.stage("wait_gpu")
        with lock.shared():
            self.stage(stage)
            yield

    def device_lock(self) -> devlock.DeviceLock | None:
        """The device's lock: the admitted one, else one opened once for sections before admission;
        None for a job without a lock."""
        if self.lock is None and self.unadmitted is None and self.job.get("device_lock"):
            self.unadmitted = devlock.DeviceLock(self.job["device_lock"], int(self.job.get("device_slots", 1)))
        return self.lock or self.unadmitted
