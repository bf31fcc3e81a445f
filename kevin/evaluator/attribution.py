"""Whose work a traced forward was: the library check's attribution (kevin.evaluator.probes.trace_forward).

Every event torch's profiler recorded over the traced forwards is given to the library (ATen compute
operators and whatever they launched), the candidate (its own kernels; on the CPU its extension's own
time) or neither (allocation, views, copies, fills: `ALLOWED_OPS`), once: on the GPU each device
activity by its own duration, for the host operator torch paired it with (`attribute_device`); on
the CPU the outermost compute operators against the extension's ranges (`attribute_host`). What
is not work is left out: a profiler range's device-side shadow (`is_annotation`) and the runner's
own copies of the inputs (`fresh_inputs`). The per-kernel table (`kernel_table`) is the profile
feedback's and `kevin optimize`'s report's; the checks read only the sums.

Split out of probes.py in session 38, when the shadows and the runner's copies were added.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ALLOWED_OPS = frozenset(
    """
    aten::empty aten::empty_like aten::empty_strided aten::empty_permuted aten::new_empty aten::new_empty_strided
    aten::zeros aten::zeros_like aten::ones aten::ones_like aten::full aten::full_like aten::new_zeros aten::new_full
    aten::zero_ aten::fill_ aten::view aten::reshape aten::_reshape_alias aten::as_strided aten::contiguous
    aten::clone aten::copy_ aten::to aten::_to_copy aten::detach aten::detach_ aten::t aten::transpose
    aten::permute aten::unsqueeze aten::squeeze aten::expand aten::expand_as aten::select aten::slice
    aten::narrow aten::flatten aten::unflatten aten::split aten::chunk aten::unbind aten::alias
    aten::resolve_conj aten::resolve_neg aten::lift_fresh aten::item aten::_local_scalar_dense
    aten::is_nonzero aten::size aten::stride aten::numel aten::dim aten::set_ aten::resize_
    aten::_unsafe_view aten::view_as aten::record_stream aten::is_pinned aten::cat aten::stack
    """.split()
)


def _is_compute(event: Any) -> bool:
    while event is not None:
        if event.name.startswith("aten::") and event.name not in ALLOWED_OPS:
            return True
        event = event.cpu_parent
    return False


@dataclass
class Attribution:
    """Microseconds of the traced forwards by whose work they were: library (ATen compute operators
    and whatever they launched), custom (the candidate's own kernels, or on the CPU its extension's
    own time), allowed (allocation, copies, fills)."""

    library_us: float = 0.0
    custom_us: float = 0.0
    allowed_us: float = 0.0
    library_ops: dict[str, float] = field(default_factory=dict)
    calls: int = 0
    kernels: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    """(name, whose: library / custom / allowed) -> [launches, microseconds]: each device kernel (on
    the CPU: each extension range and outermost ATen operator), for the profile feedback
    (`kernel_table`); never read by the checks."""

    def add_library(self, name: str, us: float) -> None:
        self.library_ops[name] = self.library_ops.get(name, 0.0) + us
        self.library_us += us

    def add_kernel(self, name: str, whose: str, us: float, launches: float = 1.0) -> None:
        entry = self.kernels.setdefault((name, whose), [0.0, 0.0])
        entry[0] += launches
        entry[1] += us

    def merge(self, other: Attribution) -> None:
        for name, us in other.library_ops.items():
            self.add_library(name, us)
        for (name, whose), (launches, us) in other.kernels.items():
            self.add_kernel(name, whose, us, launches)
        self.custom_us += other.custom_us
        self.allowed_us += other.allowed_us
        self.calls += other.calls

    @property
    def share(self) -> float:
        total = self.library_us + self.custom_us
        return self.library_us / total if total > 0 else 0.0


def _launcher_kind(op: Any) -> tuple[str, str]:
    """('library', the compute operator) when `op` or an operator around it is ATen compute;
    ('allowed', name) when the innermost ATen operator is allocation, a copy or a fill;
    ('custom', '') when no ATen operator launched it (the candidate's extension, its own launcher)."""
    innermost_allowed = ""
    while op is not None:
        name = op.name
        if name.startswith("aten::"):
            if name not in ALLOWED_OPS:
                return "library", name
            innermost_allowed = innermost_allowed or name
        op = op.cpu_parent
    return ("allowed", innermost_allowed) if innermost_allowed else ("custom", "")


RUNTIME_ACTIVITIES = ("cuda_runtime", "cuda_driver", "cuda_sync", "hip_runtime", "xpu_runtime")
"""Kineto activity types of host-side runtime and driver calls: never an operator."""
LAUNCHER_PRIORITY = ("library", "allowed", "custom")
COPY_ACTIVITIES = ("Memcpy", "Memset")


def attribute_device(events: Any) -> Attribution:
    """CUDA: every device activity counted once, by its own duration, for the host operator torch's
    profiler paired it with (an operator's `kernels`: torch matches each activity's correlation id
    to the unlinked host event with that id). Pairing is read from `kernels`, never from the
    events' own link fields, which torch 2.11's FunctionEvent does not have (on the H200 every
    kernel then read as the candidate's and torch.relu(x * s) beside a token kernel passed). Device
    time torch paired with no operator is the candidate's (its own launcher). Copies and fills are
    never compute. (The operators' own device times repeat their kernels' and must not be added to
    them: summed together, a forward done wholly by ATen read as a library share of ~0.5.)

    A profiler range (`record_function`: kevin's own `kevin::ext::<name>` around each extension
    call, or any the candidate opens) has a device-side shadow on CUDA, a `gpu_user_annotation`
    spanning the work launched inside it: never work of its own (`is_annotation`). Counted as the
    candidate's (session 38, H100: the winner of `kevin optimize` listed `kevin::ext::new_gelu_forward`
    beside its kernel, at the kernel's time), it doubled the candidate's time and, around ATen work
    inside an extension, matched the library's, so such a forward read as a share of ~0.5 (not
    flagged) with its custom work all shadow (no `no_custom_kernel` either)."""
    from torch.autograd import DeviceType

    events = list(events)
    ranges = {e.name for e in events if is_annotation(e)}  # either side marks it, as torch versions differ
    # torch appends a kernel to every unlinked host event whose id names its correlation. A runtime
    # call outside every operator (the runner's synchronize between traced calls) numbers its id in
    # CUDA's correlation space and may share an operator's, so the kernel is listed under both: the
    # kernels of an id are read once, for the heaviest reading of its events (runtime calls left
    # out where torch gives activity types): a collision never turns library work into the
    # candidate's.
    paired: dict[int, list[Any]] = {}
    for e in events:
        if e.device_type == DeviceType.CPU and getattr(e, "kernels", None) and not getattr(e, "is_legacy", False):
            paired.setdefault(e.id, []).append(e)
    found = Attribution()
    paired_compute_us = 0.0
    paired_by_name: dict[str, list[float]] = {}
    for group in paired.values():
        operators = [op for op in group if not str(getattr(op, "activity_type", None) or "").startswith(RUNTIME_ACTIVITIES)]
        readings = [_launcher_kind(op) for op in operators or group]
        kind, op_name = min(readings, key=lambda reading: LAUNCHER_PRIORITY.index(reading[0]))
        # A range's own shadow is listed among its kernels when torch links the two: never work. (A
        # kernel's name is its demangled signature, never a range's.)
        own_ranges = {op.name for op in group} & ranges
        kevins_copy = any(_within(op, INPUT_COPIES_RANGE) for op in operators or group)
        for kernel in group[0].kernels:
            us = float(kernel.duration)
            if us <= 0 or kernel.name in own_ranges:
                continue
            if kevins_copy and (kernel.name.startswith(COPY_ACTIVITIES) or kind == "allowed"):
                found.allowed_us += us  # the runner's copies of the inputs: not the candidate's table's
                continue
            seen = paired_by_name.setdefault(kernel.name, [0.0, 0.0])
            seen[0] += 1
            seen[1] += us
            if kernel.name.startswith(COPY_ACTIVITIES):
                found.allowed_us += us
                found.add_kernel(kernel.name, "allowed", us)
                continue
            paired_compute_us += us
            found.add_kernel(kernel.name, kind, us)
            if kind == "allowed":
                found.allowed_us += us
            elif kind == "library":
                found.add_library(op_name, us)
            else:
                found.custom_us += us
    # Copies torch paired with no operator are not counted at all: neither compute nor the candidate's.
    device_by_name: dict[str, list[float]] = {}
    for e in events:
        if e.device_type == DeviceType.CUDA and not is_annotation(e):
            entry = device_by_name.setdefault(e.name, [0.0, 0.0])
            entry[0] += 1
            entry[1] += float(e.time_range.end - e.time_range.start)
    device_us = sum(us for name, (_, us) in device_by_name.items() if not name.startswith(COPY_ACTIVITIES))
    found.custom_us += max(device_us - paired_compute_us, 0.0)
    for name, (launches, us) in device_by_name.items():  # what no operator launched: the candidate's
        paired_launches, paired_us = paired_by_name.get(name, (0.0, 0.0))
        if launches > paired_launches and not name.startswith(COPY_ACTIVITIES):
            found.add_kernel(name, "custom", max(us - paired_us, 0.0), launches - paired_launches)
    return found


INPUT_COPIES_RANGE = "kevin::input_copies"
"""The range around the runner's fresh copies of the inputs before each traced forward (`fresh_inputs`):
their copies are left out of the kernel table, which is the candidate's (s38's `kevin optimize`
report listed a 256 MB input's clone, a third of the winner's device time). Only copies and fills
under it are: library or custom work a candidate opened such a range around counts as ever."""


def fresh_inputs(inputs: list[Any]) -> list[Any]:
    """Copies of the tensors of `inputs` (a forward may write its inputs), made inside
    INPUT_COPIES_RANGE."""
    import torch
    from torch.profiler import record_function

    with record_function(INPUT_COPIES_RANGE):
        return [torch.clone(a) if isinstance(a, torch.Tensor) else a for a in inputs]


def _within(op: Any, name: str) -> bool:
    while op is not None:
        if op.name == name:
            return True
        op = op.cpu_parent
    return False


def device_activities(events: Any) -> int:
    """How many device activities (kernels, copies, fills) the profile holds: none at all from a
    CUDA forward means the candidate ran nothing on the device, or CUPTI delivered nothing."""
    from torch.autograd import DeviceType

    return sum(1 for e in events if e.device_type == DeviceType.CUDA and not is_annotation(e))


LAUNCH_CALL = re.compile(r"cu(?:da)?(?:Launch(?!HostFunc)|GraphLaunch|Memcpy|Memset)")
"""The CUDA runtime and driver calls that put work on the device: kernel and graph launches, copies,
fills (`cudaLaunchKernel`, `cuLaunchKernelEx`, `cudaMemcpyToSymbolAsync`, `cudaMemsetAsync`...). A
host function queued on a stream (`cudaLaunchHostFunc`, `cuLaunchHostFunc`) runs on the CPU and
leaves no device record: counted, it would make a look that lost nothing read as blind."""


def launch_calls(events: Any) -> int:
    """How many calls that put work on the device the profile's host-side API records hold.

    CUPTI can hand kineto a session's device records with timestamps from another clock, which
    kineto then drops as out of the session's window, while the API records (host timestamps) stay
    right (pytorch/pytorch#192021: the first records of each session, more the more sessions the
    process has run, up to all of them). So launches recorded with no device activity at all mean
    the device side of the profile was lost, not that nothing ran there (s43: two honest kernels
    flagged `no_custom_kernel` with the marker seen). A profiler range of that name is a candidate's
    annotation, not an API record, and is not counted."""
    from torch.autograd import DeviceType

    return sum(
        1
        for e in events
        if e.device_type == DeviceType.CPU
        and not is_annotation(e)
        and LAUNCH_CALL.match(e.name)
        and _api_record(e)
    )


def _api_record(event: Any) -> bool:
    """Whether the event is a CUDA runtime or driver API record (torch versions whose events carry
    no activity type: assumed, the name having matched)."""
    kind = str(getattr(event, "activity_type", None) or "").lower()
    return not kind or "runtime" in kind or "driver" in kind


def is_annotation(event: Any) -> bool:
    """A profiler range (record_function) rather than work: torch marks both its host event and its
    device-side shadow (`is_user_annotation`; kineto's activity type `gpu_user_annotation`). torch's
    own device-time totals leave them out the same way."""
    return bool(getattr(event, "is_user_annotation", False)) or "user_annotation" in str(
        getattr(event, "activity_type", None) or ""
    )


def attribute_host(events: Any) -> Attribution:
    """CPU back end: the outermost ATen compute operators' total CPU time against the self CPU time
    of the candidate's extension calls (kevin::ext:: ranges)."""
    found = Attribution()
    for event in events:
        name = event.name
        if name.startswith("kevin::ext::"):
            found.custom_us += float(event.self_cpu_time_total)
            found.add_kernel(name.removeprefix("kevin::ext::"), "custom", float(event.self_cpu_time_total))
        elif name.startswith("aten::"):
            if name in ALLOWED_OPS:
                found.allowed_us += float(event.self_cpu_time_total)
            elif not _is_compute(event.cpu_parent):  # nested ones are in the outer one's total
                found.add_library(name, float(event.cpu_time_total))
                found.add_kernel(name, "library", float(event.cpu_time_total))
    return found


KERNELS_REPORTED = 8
KERNEL_NAME_CHARS = 120


def clean_kernel_table(value: Any) -> list[dict[str, Any]]:
    """The judge's reading of a runner's `kernels` (the runner is the candidate's process: its
    report is data): at most KERNELS_REPORTED well-formed rows, names cut, numbers finite and >= 0."""
    rows: list[dict[str, Any]] = []
    for row in value[:KERNELS_REPORTED] if isinstance(value, list) else []:
        if not isinstance(row, dict) or not isinstance(row.get("name"), str):
            continue
        numbers = [row.get("launches"), row.get("us")]
        if not all(isinstance(n, (int, float)) and not isinstance(n, bool) and math.isfinite(n) and n >= 0 for n in numbers):
            continue
        if row.get("whose") not in ("custom", "library", "allowed"):
            continue
        rows.append(
            {"name": row["name"][:KERNEL_NAME_CHARS], "whose": row["whose"], "launches": float(numbers[0]), "us": float(numbers[1])}
        )
    return rows


def traced_kernels(checks: Any) -> tuple[list[dict[str, Any]], int] | None:
    """A verdict's kernel table and the number of traced calls it covers, read back from
    `EvalResult.checks` (a verdict, or its dict form from an episodes file); None without one.
    Rows as `kernel_table` writes them (totals over the calls), checked again as data."""
    trace = checks.get("trace") if isinstance(checks, Mapping) else None
    if not isinstance(trace, Mapping):
        return None
    rows = clean_kernel_table(trace.get("kernels"))
    calls = trace.get("traced_calls")
    if not rows or not isinstance(calls, int) or isinstance(calls, bool) or calls < 1:
        return None
    return rows, calls


def kernel_table(found: Attribution) -> list[dict[str, Any]]:
    """The heaviest kernels of the traced calls (at most KERNELS_REPORTED): name (cut), whose
    (custom / library / allowed), launches and microseconds over all `found.calls` calls."""
    ranked = sorted(found.kernels.items(), key=lambda item: -item[1][1])[:KERNELS_REPORTED]
    return [
        {"name": name[:KERNEL_NAME_CHARS], "whose": whose, "launches": round(launches, 2), "us": round(us, 1)}
        for (name, whose), (launches, us) in ranked
    ]
