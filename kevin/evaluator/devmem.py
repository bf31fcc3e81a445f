"""What kevin's own processes keep on a GPU, planned before the first of them starts.

Every worker on a GPU back end is three processes with a CUDA context each: the judge, the
candidate's runner and the control runner, all booted before the job when the worker is a spare
(kevin.evaluator.spares). On the H100 in session 34 such processes held 612 MiB (a judge) and
868 MiB (a runner: its context, the L2 flush buffer, CUPTI) before any job data: a worker is about
2.3 GiB. The training run's evaluator kept 12 workers in flight and 16 spares, 28 workers and 64 GiB
of contexts on a 79 GiB device: kevin's own calibrations, input draws and comparisons then ran out
of memory (22 verdicts of 432 lost to `infrastructure` over steps 13-27). On the H200's 141 GiB the
same pool fitted.

So the service plans the device: the booted workers' contexts may fill at most `CONTEXT_SHARE` of
it (spares are cut first; in-flight workers are what the caller asked for, and a warning says when
they alone pass the share), and admission (kevin.evaluator.devlock.weight_for) shares among jobs
only what the contexts leave (`EvalConfig.device_reserved_bytes`). The device's size is read
through nvidia-smi, so the planning process never starts CUDA (a judge forks its runners only
before it has; kevin.evaluator.spawn).
"""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from dataclasses import dataclass

MIB = 1 << 20

WORKER_BYTES = (612 + 2 * 868) * MIB
"""A booted worker's three CUDA processes, idle (H100, torch 2.11, CUDA 13: session 34's reports)."""

CONTEXT_SHARE = 0.5
"""Share of a device's memory the booted workers' contexts may fill; the rest is the jobs' data
(admitted against it) and, where the trainer shares the device, the trainer's."""


def device_total_bytes(physical: str) -> int | None:
    """The device's memory (its index or UUID on this host), without starting CUDA here; None when
    nvidia-smi is missing or does not answer."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        done = subprocess.run(
            [smi, "-i", physical, "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        return int(done.stdout.split()[0]) * MIB if done.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


@dataclass(frozen=True)
class DevicePlan:
    device_bytes: int
    in_flight: int
    spares: int
    asked_spares: int

    @property
    def reserved_bytes(self) -> int:
        """What the booted workers keep on the device besides their jobs' data."""
        return (self.in_flight + self.spares) * WORKER_BYTES

    def notice(self) -> str | None:
        """One line for the operator when the plan changed what was asked, else None."""
        gib = self.device_bytes / (1 << 30)
        if self.in_flight * WORKER_BYTES > CONTEXT_SHARE * self.device_bytes:
            return (
                f"kevin: {self.in_flight} workers in flight keep ~{self.reserved_bytes / (1 << 30):.0f} GiB"
                f" of CUDA contexts on a {gib:.0f} GiB device, past the {CONTEXT_SHARE:.0%} planned for"
                " them: jobs may run out of memory; lower max_in_flight"
            )
        if self.spares < self.asked_spares:
            return (
                f"kevin: {self.spares} spare workers per device, not {self.asked_spares}: with"
                f" {self.in_flight} in flight their CUDA contexts (~{WORKER_BYTES / (1 << 30):.1f} GiB"
                f" a worker) would pass {CONTEXT_SHARE:.0%} of the {gib:.0f} GiB device"
            )
        return None


def plan(device_bytes: int, in_flight: int, spares: int) -> DevicePlan:
    """How many of `spares` fit beside `in_flight` workers on a device of `device_bytes`."""
    fit = math.floor(CONTEXT_SHARE * device_bytes / WORKER_BYTES) - in_flight
    return DevicePlan(device_bytes, in_flight, max(0, min(spares, fit)), spares)


def plan_devices(physical: list[str], max_in_flight: int, spares: int) -> DevicePlan | None:
    """The plan for the smallest of the devices the service spreads `max_in_flight` workers over
    (round-robin), warning once on stderr where it cuts; None where no device's size is known."""
    sizes = [size for size in (device_total_bytes(name) for name in physical) if size is not None]
    if not sizes:
        return None
    result = plan(min(sizes), math.ceil(max_in_flight / max(1, len(physical))), spares)
    line = result.notice()
    if line is not None:
        print(line, file=sys.stderr)
    return result
