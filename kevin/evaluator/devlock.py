"""One device's lock, shared by every worker on the host: timing alone, other device work together.

Timing must not overlap any other work on the device (it would read another worker's kernels as
its own time); drawing inputs, correctness trials and the reference run need the device but not an
idle one. So a worker holds the device in three ways, each an advisory `flock` on a file next to
`path` (the parent creates them all: workers cannot create files, kevin.evaluator.confine):

    admit(weight)   `weight` of the device's `slots` (files path.slot0 ...), held for the rest of
                    the worker's life (or to `release()`: a short admitted moment before the job's
                    own): at most `slots` workers keep inputs and outputs in device memory at once.
                    A job takes the slots its memory fills (`weight_for`); one too big to share, all.
    shared()        a shared lock on `path` itself, around inputs, correctness and the reference.
    exclusive()     an exclusive lock on `path`, around timing (candidate and baseline).

Writers come first: a worker waiting for `exclusive()` holds the turnstile (path.turn), and every
`shared()` passes through the turnstile before it takes its shared lock, so a stream of shared
sections cannot starve the timer. Admission has its own turnstile (path.admit), held only while
slots are being collected, so a heavy job waiting for every slot is not overtaken by light ones
and never holds anything a slot holder waits for.

On GPU back ends every piece of kevin's own device work holds the lock at least shared: besides the
three above, a spare's boot (CUDA contexts, the runners' flush buffers:
worker.__main__.on_device, the runner's `context`), the judge's reference weights, and the
candidate's `load` (its import and its model's construction; the builds it asks for are served
with the lock let go). CUPTI's start (the runner's `warm`) runs nothing on the device and comes
after `context`, the lock let go (s34: 0.11 s median, 5-9 s in a runner that imports for it). On
the CPU back end those are host work, which no lock keeps from a timing
(worker.device.DeviceStage.device_work). Not covered: work a candidate launches on the device and
leaves running past its section (kernels are asynchronous; its runner's own synchronize is code the
candidate can replace).

Locks die with their process (the kernel drops a dead process's `flock`s), so a crashed or killed
worker frees the device at once. With `slots=1` this is the old single lock: one worker on the
device from admission to exit. Not handled: two configurations with different slot counts on one
device (a heavy job of the smaller one does not hold the larger one's extra slots); a killed
worker's kernels, which the driver may still be tearing down when its lock is already free (a
timing that starts then can overlap them); processes that use the device without this lock.
"""

from __future__ import annotations

import fcntl
import math
import os
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

POLL_S = 0.02

SECTIONS: list[list] = []
"""This process's hold on the device, for its verdict's timeline (`checks.timeline`, read by
bench/step_timeline.py): [kind, asked, held, released] in `time.time()` seconds (comparable across
the workers of a host), kind "shared", "exclusive" or "admit" (released None: admission lasts
until exit). At most SECTIONS_KEPT: a judge takes a few dozen."""
SECTIONS_KEPT = 400


def _record(kind: str, asked: float, held: float, released: float | None) -> None:
    if len(SECTIONS) < SECTIONS_KEPT:
        SECTIONS.append([kind, asked, held, released])


def lock_files(path: str | Path, slots: int) -> list[Path]:
    """Every file a DeviceLock on `path` with `slots` slots opens."""
    base = Path(path)
    names = [base.name, base.name + ".turn", base.name + ".admit"]
    names += [f"{base.name}.slot{i}" for i in range(slots)]
    return [base.with_name(name) for name in names]


def ensure_files(path: str | Path, slots: int) -> Path:
    """Create the lock's files (the parent does this: a confined worker cannot create files)."""
    for file in lock_files(path, slots):
        file.parent.mkdir(parents=True, exist_ok=True)
        file.touch(exist_ok=True)
    return Path(path)


def held(path: str | Path) -> bool:
    """Whether some process holds the lock on `path` at this moment, shared or exclusively (so a
    timing could not start now): for tests and diagnostics."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def slots_held(path: str | Path, slots: int) -> int:
    """How many of the device's `slots` admission slots some process holds now: for tests and
    diagnostics."""
    return sum(held(slot) for slot in lock_files(path, slots)[3:])


class DeviceLock:
    def __init__(self, path: str | Path, slots: int = 1) -> None:
        if slots < 1:
            raise ValueError(f"a device lock needs at least one slot (got {slots})")
        self.path = Path(path)
        self.slots = slots
        self._main = self._open(self.path)
        self._turn = self._open(self.path.with_name(self.path.name + ".turn"))
        self._admit = self._open(self.path.with_name(self.path.name + ".admit"))
        self._held_slots: list[int] = []
        self._admitted_at: int | None = None
        self.weight = 0

    def close(self) -> None:
        """Let go of everything this lock holds (its slots too) and close its files."""
        for fd in (self._main, self._turn, self._admit, *self._held_slots):
            os.close(fd)
        self._held_slots = []
        self.weight = 0

    @staticmethod
    def _open(path: Path) -> int:
        # Read-only is enough for flock, and a confined worker may not write there.
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)

    def admit(self, weight: int = 1) -> None:
        """Take `weight` slots (clamped to 1..slots); blocks until they are free. Held until exit."""
        weight = max(1, min(weight, self.slots))
        asked = time.time()
        fcntl.flock(self._admit, fcntl.LOCK_EX)
        try:
            free = [i for i in range(self.slots)]
            while len(self._held_slots) < weight:
                for i in list(free):
                    fd = self._open(self.path.with_name(f"{self.path.name}.slot{i}"))
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        os.close(fd)
                        continue
                    self._held_slots.append(fd)
                    free.remove(i)
                    if len(self._held_slots) == weight:
                        break
                else:
                    time.sleep(POLL_S)
        finally:
            fcntl.flock(self._admit, fcntl.LOCK_UN)
        self.weight = weight
        _record("admit", asked, time.time(), None)
        self._admitted_at = len(SECTIONS) - 1

    def release(self) -> None:
        """Let go of the slots `admit` took (the lock's other files stay open)."""
        for fd in self._held_slots:
            os.close(fd)  # the flock goes with its last descriptor
        self._held_slots = []
        self.weight = 0
        at, self._admitted_at = self._admitted_at, None
        if at is not None and at < len(SECTIONS) and SECTIONS[at][0] == "admit":
            SECTIONS[at][3] = time.time()

    def shared(self) -> AbstractContextManager[None]:
        """Device work that may overlap other workers' (inputs, correctness, the reference)."""
        return self._section(fcntl.LOCK_SH, "shared")

    def exclusive(self) -> AbstractContextManager[None]:
        """Nothing else on the device meanwhile (timing)."""
        return self._section(fcntl.LOCK_EX, "exclusive")

    @contextmanager
    def _section(self, mode: int, kind: str) -> Iterator[None]:
        asked = time.time()
        # Through the turnstile: a waiting exclusive section holds it, so later ones queue behind.
        fcntl.flock(self._turn, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._main, mode)
        finally:
            fcntl.flock(self._turn, fcntl.LOCK_UN)
        held = time.time()
        try:
            yield
        finally:
            fcntl.flock(self._main, fcntl.LOCK_UN)
            _record(kind, asked, held, time.time())


def hold(path: str | Path) -> int:
    """Take an exclusive flock on an existing file and keep it until the process exits (the open
    descriptor is returned and never closed here): for a lock that must outlive the caller's
    result, as the per-task baseline lock does until the parent has cached the baseline."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


# -- sizing a job ---------------------------------------------------------------------------------

MEMORY_SHARE = 0.8
"""Share of the device's memory that admitted jobs may plan to fill together."""


def input_bytes_on_meta(problem: object) -> int | None:
    """Bytes of one draw of the problem's inputs, sized on the `meta` device (nothing allocated);
    None when get_inputs does not run there."""
    import torch

    from kevin.tasks.probe import tensor_bytes

    try:
        with torch.device("meta"):
            return tensor_bytes(problem.get_inputs())  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - unknown size: the job takes the whole device
        return None


def warm_meta() -> None:
    """Pay now what the first use of the `meta` device costs a process (torch imports its reference
    ops: ~1 s on an idle core, several on a loaded one), so that `input_bytes_on_meta` in a job's
    setup does not: a worker calls it while it boots, before its job (kevin.evaluator.spares)."""
    import torch

    from kevin.tasks.probe import tensor_bytes

    with torch.device("meta"):
        tensor_bytes([torch.ones(2) * 2])


def footprint_bytes(input_bytes: int | None, trials: int) -> int | None:
    """What one evaluation keeps on the device at its peak, roughly: every trial's inputs and the
    candidate's outputs (taken as input-sized), plus timing buffers, clones and the reference's
    outputs (four more)."""
    if input_bytes is None:
        return None
    return input_bytes * (2 * trials + 4)


def weight_for(need_bytes: int | None, device_bytes: int, slots: int) -> int:
    """The slots a job's memory fills, each slot a `slots`-th of MEMORY_SHARE of the device (so the
    admitted jobs' needs stay within that share together); every slot (alone) for an unknown need or
    one past the share. Until s46 it was one slot or all: 20 of the A/A pass's 32 copies ran alone,
    jobs of two slots' worth included, and waited up to 240 s for the device."""
    if need_bytes is None:
        return slots
    per_slot = MEMORY_SHARE * device_bytes / slots
    return max(1, min(slots, math.ceil(need_bytes / per_slot)))


def wait_for_memory(
    torch: object, need_bytes: int | None, reserved_bytes: int = 0, patience_s: float = 30.0
) -> float:
    """A finished worker's lock goes before the driver has torn down its context: wait (briefly)
    for its memory to come back, so inputs do not hit a spurious out-of-memory. A job alone on the
    device (`need_bytes` None) waits for nearly all of what the booted workers' contexts leave
    (`reserved_bytes`, kevin.evaluator.devmem's plan: they stay while it runs), or for a free amount
    that holds still at half of that; a shared one for what it needs. Returns the seconds waited.

    s45 (H100, 16 in flight): the contexts took ~39 of 80 GiB, so free memory never reached half of
    the device, and every job alone (three of the four A/A kernels' large inputs) sat out the whole
    patience holding every admission slot, the device idle."""
    cuda = torch.cuda  # type: ignore[attr-defined]
    started = time.monotonic()
    deadline = started + patience_s
    last_free = -1
    while time.monotonic() < deadline:
        free, total = cuda.mem_get_info()
        usable = max(total - reserved_bytes, 0)
        if need_bytes is None:
            if free >= 0.9 * usable or (free == last_free and free >= 0.5 * usable):
                break
        elif free >= need_bytes:
            break
        last_free = free
        time.sleep(0.25)
    return round(time.monotonic() - started, 3)
