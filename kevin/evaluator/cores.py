"""The host's cores on a GPU machine: a pair per GPU kept for timing, the rest for everything else.

A timing on the GPU back end spins on two cores (kevin.evaluator.worker.timed.seated_for_timing: the
judge waiting for its runner's DONE, the runner waiting for the next GO). Whatever else the
evaluator runs on one of those cores at that moment (a compiler, a spare worker importing torch,
another judge's correctness trials) takes scheduler slices from a spinner, and a slice lost inside
a cycle is timed with the candidate's kernel: issue #15's A/A batch saw a 0.13 ms kernel's median
rise to 0.15-0.17 ms among 16 jobs and their builds while its minimum stayed. Nice values only make
such slices rarer. So, where the host has the cores, each GPU's pair is kept for timing alone:

    plan(allowed, gpus)   a pair per GPU from the top of `allowed` down (core 0 takes most interrupts)
                          and the work cores, the rest; kept only while the work cores are at least
                          as many as the kept ones (4 cores a GPU), else nothing is kept and a
                          device's pair is picked from all cores as before (`pair_from_top`)
    at_start()            the plan of this process's affinity at its start and the host's GPUs, with
                          this thread moved to the work cores: a judge calls it on its first line,
                          so it, its runners, its build broker and every compiler they start inherit
                          the work cores; only the clocked threads of a timing enter a pair, and
                          only while it lasts

Every evaluator process computes the same plan from the same cores and GPU count, with nothing
shared between them: separate `kevin eval-batch` runs and Ray actors of one host agree. The GPU count
is the host's `/dev/nvidiaN` nodes (no CUDA call: a judge must not create a context to learn it),
and a device takes the pair of its ordinal modulo that count. `KEVIN_TIMING_CORES` overrides the
count: `off` (or 0) keeps nothing, for a host whose other work must have every core; a number N keeps
pairs for N GPUs, for a host whose GPUs have no such nodes. Not moved: the trainer's own process, which
holds the device lock for its GPU work and mostly waits for verdicts otherwise.
"""

from __future__ import annotations

import glob
import os
import re
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

VARIABLE = "KEVIN_TIMING_CORES"
"""`off` or 0: keep no cores for timing; N: keep pairs for N GPUs; unset: for the host's GPUs."""

CPU_SEAT_VARIABLE = "KEVIN_CPU_TIMING_SEAT"
"""The CPU back end's timings: `one` (the default) puts the judge and its runners on one core while
they time (`cpu_timing_core`); `free` leaves them where the scheduler puts them, for comparison
(bench/cpu_timing_seat.py)."""


@dataclass(frozen=True)
class CorePlan:
    """pairs: (judge core, runners' core) per GPU when kept, else empty; work: the cores everything
    else runs on (all allowed cores when nothing is kept); allowed: the cores planned from; gpus:
    the GPUs it was planned for (None: not planned, this process's cores as they were)."""

    allowed: frozenset[int]
    pairs: tuple[tuple[int, int], ...]
    work: frozenset[int]
    gpus: int | None = None

    @property
    def kept(self) -> bool:
        return bool(self.pairs)

    def timing_pair(self, ordinal: int) -> tuple[int, int] | None:
        """The cores a timing on device `ordinal` spins on: its kept pair, or (nothing kept) a pair
        picked from all allowed cores, None with fewer than two."""
        if self.pairs:
            return self.pairs[ordinal % len(self.pairs)]
        return pair_from_top(ordinal, self.allowed)

    def summary(self) -> dict[str, Any]:
        """For a verdict's checks (`checks.cores`)."""
        return {"gpus": self.gpus, "kept": [list(pair) for pair in self.pairs], "work": len(self.work)}


def pair_from_top(ordinal: int, allowed: Iterable[int]) -> tuple[int, int] | None:
    """The `ordinal`-th pair of `allowed` from the top down (modulo the pairs there are); None with
    fewer than two cores."""
    cores = sorted(allowed)
    if len(cores) < 2:
        return None
    pair = ordinal % (len(cores) // 2)
    return cores[-1 - 2 * pair], cores[-2 - 2 * pair]


def plan(allowed: Iterable[int], gpus: int) -> CorePlan:
    """See the module's docstring: a pair per GPU, kept only with as many work cores left."""
    cores = frozenset(allowed)
    if gpus < 1 or len(cores) < 4 * gpus:
        return CorePlan(cores, (), cores, gpus)
    top = sorted(cores, reverse=True)
    pairs = tuple((top[2 * i], top[2 * i + 1]) for i in range(gpus))
    return CorePlan(cores, pairs, cores - set(top[: 2 * gpus]), gpus)


def host_gpus(dev: str = "/dev") -> int:
    """The GPUs this host shows (its /dev/nvidiaN nodes); 0 on a machine without them."""
    names = (os.path.basename(path) for path in glob.glob(os.path.join(dev, "nvidia*")))
    return sum(1 for name in names if re.fullmatch(r"nvidia\d+", name))


_START: CorePlan | None = None


def gpus_to_keep() -> int:
    """The GPUs to keep pairs for: `KEVIN_TIMING_CORES` when set (off, or a number), else the host's."""
    setting = os.environ.get(VARIABLE, "").strip().lower()
    if setting == "off":
        return 0
    if setting.isdigit():
        return int(setting)
    if setting:
        print(
            f"kevin: {VARIABLE}={setting!r} is neither 'off' nor a number of GPUs; ignored", file=sys.stderr
        )
    return host_gpus()


def at_start(allowed: Iterable[int] | None = None, gpus: int | None = None) -> CorePlan:
    """Plan from this process's affinity (or `allowed`) and the GPUs to keep pairs for (or `gpus`),
    and move this thread, and so whatever it starts later, to the work cores. Call it before the
    process starts any thread. A second call returns the first plan."""
    global _START
    if _START is None:
        start = plan(
            os.sched_getaffinity(0) if allowed is None else allowed, gpus_to_keep() if gpus is None else gpus
        )
        if start.kept:
            try:
                os.sched_setaffinity(0, start.work)
            except OSError:  # a cpuset that refuses: nothing kept
                start = CorePlan(start.allowed, (), start.allowed, start.gpus)
        _START = start
    return _START


def cpu_timing_core(ordinal: int = 0) -> int | None:
    """The one core a CPU back end's timing runs on, the judge and its runners together: the judge's
    core of the timing pair (the top one: core 0 takes most interrupts). On the CPU the judge sleeps
    on its socket while a runner computes, so they need no core each (as the GPU back end's spinners
    do); on cores of their own every hand-off is a wake-up on another core and the inputs the judge
    just wrote move between caches, and where the scheduler put them changed from run to run: an
    honest 0.05 ms kernel's speedup read 1.07x to 1.76x over five evaluations on an idle 2-core
    host, 1.40x to 1.67x on one core (bench/results/cpu_timing_seat/). The CPU back end's timings
    hold its lock exclusively, so no two timings share the core. None with fewer than two cores
    (nothing to choose) or with CPU_SEAT_VARIABLE `free`."""
    if os.environ.get(CPU_SEAT_VARIABLE, "one") == "free":
        return None
    pair = current().timing_pair(ordinal)
    return None if pair is None else pair[0]


def current() -> CorePlan:
    """The plan of `at_start` when this process made one, else one of this thread's cores now with
    nothing kept (a judge's code called outside a worker process: tests, benchmarks)."""
    if _START is not None:
        return _START
    allowed = frozenset(os.sched_getaffinity(0))
    return CorePlan(allowed, (), allowed)


AUTOGROUP_WAIT_S = 0.5
"""How long `nicer_session` retries a refused change (the kernel takes one unprivileged autogroup
change per 0.1 s, host-wide: a batch starting 16 builds at once waits its turn)."""


def session_niceness(pid: int) -> int | None:
    """The niceness of the autogroup of `pid`'s session; None without autogroups."""
    try:
        with open(f"/proc/{pid}/autogroup") as handle:
            return int(handle.read().split()[-1])
    except (OSError, ValueError, IndexError):
        return None


def nicer_session(pid: int, niceness: int) -> str:
    """Give the autogroup of `pid`'s session (every process of that session) the scheduler weight of
    `niceness`, and say how that went: "set", "unchanged (...)". Lowering a weight is anyone's to
    do; raising it above nice 0 needs CAP_SYS_NICE.

    A process's nice value only weighs against the other processes of its session's autogroup when
    the kernel groups sessions (`/proc/sys/kernel/sched_autogroup_enabled`, on in most distributions
    and on the CI and GPU machines): between sessions, the CPU is shared by autogroup, each at its
    own nice, 0 by default. A compiler in a session of its own at nice 10 then took a core from a
    timed runner as an equal, not at a tenth of its weight (session 25: a 1.1 ms C++ kernel timed
    at 3.8 ms beside another job's cold build, on 2 cores). Only tasks outside any cgroup's CPU
    controller are grouped so; elsewhere the nice value of the process already holds."""
    path = f"/proc/{pid}/autogroup"
    deadline = time.monotonic() + AUTOGROUP_WAIT_S
    while True:
        try:
            with open(path, "w") as handle:
                handle.write(str(niceness))
            return "set"
        except BlockingIOError:
            if time.monotonic() > deadline:
                return "unchanged (the kernel's rate limit)"
            time.sleep(0.02)
        except OSError as exc:  # a kernel without autogroups, a confinement that refuses, a build done
            return f"unchanged ({exc.strerror or exc})"
