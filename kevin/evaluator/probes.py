"""Dynamic checks: what the candidate actually did, measured while it ran (issue #4, DESIGN.md §4).

Each check returns a named flag (see `kevin.evaluator.result.BLOCKING_FLAGS`) plus numbers for the record.

trace (`library_kernels`, `no_custom_kernel`)
    One forward under torch.profiler. Every ATen operator is recorded by the dispatcher whoever
    calls it (Python, or C++ inside the candidate's own extension), so time spent in compute
    operators (`aten::mm`, `aten::conv2d`, `aten::relu`, ...) is framework work, whatever the source
    text says. Allocation, views, copies and fills are allowed (`ALLOWED_OPS`). The share of library
    time is device time on the GPU (kernels launched under a compute operator) and self CPU time
    on the CPU back end. Flagged when it exceeds `LIBRARY_SHARE_LIMIT`; on the GPU, `no_custom_kernel`
    when no kernel ran outside an ATen operator.
streams (`side_stream`, GPU)
    The same trace lists every device activity (kernels, copies, sets) with the CUDA stream it ran
    on; a marker launched on the caller's current stream first names that stream. Work on any other
    stream is flagged. The judge's clock covers it anyway (the runner synchronizes the whole device
    before it answers), so this is a policy, not a clock guard: one stream, the current one.
    Launching with no stream argument uses the legacy default stream, which is the current one in
    the runner. Honest multi-stream kernels that join back to the current stream are flagged too.
precision (`lower_precision`)
    fp32 tasks only: the candidate's relative L2 error against a float64 reference, compared with the
    fp32 reference's own error against it. TF32 or bf16 arithmetic is one to three orders of
    magnitude worse than fp32; flagged past `PRECISION_RATIO` times the fp32 error and an absolute
    floor `PRECISION_FLOOR`.
outputs (`tensor_subclass`, `deferred_write`)
    An output that is not a plain tensor could compute lazily when the checker reads it; an output
    that changes after the call returned (and the device was synchronized) was written by work the
    clock did not see.
physical bound (`impossible_speedup`)
    The inputs must be read from device memory at least once per call (the timing loop writes fresh
    content and flushes the L2 before each call): a runtime under half of input bytes over peak
    bandwidth is impossible for an honest kernel.

These run in the runner, the candidate's own process (kevin.evaluator.worker.runner), and report
to the judge: a candidate whose native code reaches the Python runtime could suppress them (the
build broker's symbol check and the static gate stand in the way). They can only add flags. What
the candidate does to its own process no longer reaches the reference, the comparison or the
baseline, which run elsewhere, so patches of torch, its dispatcher or kevin's modules are not
checked here any more: they can only change the candidate's own outputs, which the judge compares.

What these do not catch: library work reached without the dispatcher (a candidate that dlopens
cuBLAS itself: the static gate and the broker's symbol check reject that), precision loss smaller
than the ratio, and FLOP bounds (only bytes are bounded).
"""

from __future__ import annotations

import contextlib
import gc
import time
from typing import Any

LIBRARY_SHARE_LIMIT = 0.5
PRECISION_RATIO = 50.0
PRECISION_FLOOR = 1e-5
BOUND_MARGIN = 0.5

# Peak device-memory bandwidth in GB/s by GPU name (datasheet figures; a lead, not a measurement).
PEAK_BANDWIDTH_GBS = {"H200": 4800.0, "H100": 3350.0, "A100": 2039.0, "L40S": 864.0}

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


GUARDED_NAMESPACES = ("aten", "prims", "prim")
"""Operators whose dispatch keys may not grow either: the reference's own compute."""
LAZY_KEYS = frozenset({"Meta"})
"""Keys torch's own modules register lazily for existing operators (seen: c10d ops on first import)."""
_REGISTERED = ": registered at "


def _device_us(event: Any) -> float:
    for name in ("self_device_time_total", "self_cuda_time_total"):
        value = getattr(event, name, None)
        if value is not None:
            return float(value)
    return 0.0


@contextlib.contextmanager
def instrumented(modules: list[Any]):
    """While tracing, every callable of the candidate's extension modules runs inside a profiler
    range `kevin::ext::<name>`, so the time spent in its own code is measured apart from the ATen
    operators it calls. Restored afterwards: timed calls run the extension unwrapped."""
    from torch.profiler import record_function

    saved: list[tuple[Any, str, Any]] = []

    def wrap(name: str, function: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            with record_function(f"kevin::ext::{name}"):
                return function(*args, **kwargs)

        return call

    for module in modules:
        for name, value in list(vars(module).items()):
            if callable(value) and not name.startswith("_") and not isinstance(value, type):
                saved.append((module, name, value))
                setattr(module, name, wrap(name, value))
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


def _is_compute(event: Any) -> bool:
    while event is not None:
        if event.name.startswith("aten::") and event.name not in ALLOWED_OPS:
            return True
        event = event.cpu_parent
    return False


def warm_profiler(is_cuda: bool) -> None:
    """Start and stop the profiler once, so the trace under the device lock does not pay its start-up."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if is_cuda else [])):
        pass


def device_streams(prof: Any) -> dict[int, list[str]]:
    """Stream id -> names of the device activities the profile recorded on it (empty without CUPTI)."""
    results = getattr(getattr(prof, "profiler", None), "kineto_results", None)
    if results is None:
        return {}
    from torch.autograd import DeviceType

    streams: dict[int, list[str]] = {}
    for event in results.events():
        if event.device_type() == DeviceType.CUDA:
            streams.setdefault(int(event.device_resource_id()), []).append(str(event.name()))
    return streams


def current_stream_ids(sync: Any) -> set[int]:
    """The profiler's id(s) for the caller's current stream: where a marker fill runs."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        torch.zeros(1, device=torch.device("cuda", torch.cuda.current_device()))
        sync()
    return set(device_streams(prof))


def trace_forward(fn: Any, is_cuda: bool, sync: Any, modules: list[Any]) -> dict[str, Any]:
    """Run `fn` once under the profiler; return the share of library work and the top operators."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if is_cuda else [])
    own_streams = current_stream_ids(sync) if is_cuda else set()
    # No garbage collection inside the traced forward: a collection that starts inside the
    # extension's range (hundreds of microseconds with torch loaded) would be counted as the
    # candidate's own work and hide the library share of a small problem.
    gc.collect()
    gc.disable()
    try:
        with instrumented(modules):
            for _ in range(2):  # the first profile carries the profiler's start-up in its first range
                with profile(activities=activities) as prof:
                    fn()
                    sync()
    finally:
        gc.enable()
    library: dict[str, float] = {}
    library_us = custom_cpu_us = allowed_device_us = total_device_us = 0.0
    for event in prof.events():
        name = event.name
        device_us = _device_us(event) if is_cuda else 0.0
        total_device_us += device_us
        if name.startswith("kevin::ext::"):
            custom_cpu_us += float(event.self_cpu_time_total)
        elif name.startswith("aten::"):
            if name in ALLOWED_OPS:
                allowed_device_us += device_us
                continue
            if is_cuda:
                cost = device_us
            elif _is_compute(event.cpu_parent):
                continue  # inside another compute operator: counted in that one's total
            else:
                cost = float(event.cpu_time_total)
            if cost > 0:
                library[name] = library.get(name, 0.0) + cost
                library_us += cost
    if is_cuda:
        custom_us = max(total_device_us - library_us - allowed_device_us, 0.0)
    else:
        custom_us = custom_cpu_us
    total_us = library_us + custom_us
    share = library_us / total_us if total_us > 0 else 0.0
    flags = []
    if share > LIBRARY_SHARE_LIMIT:
        flags.append("library_kernels")
    if custom_us <= 0.0:
        flags.append("no_custom_kernel")
    side = {}
    if own_streams:  # no marker seen (no CUPTI): nothing to compare with
        side = {
            stream: names[:3] for stream, names in device_streams(prof).items() if stream not in own_streams
        }
    if side:
        flags.append("side_stream")
    top = sorted(library.items(), key=lambda item: -item[1])[:5]
    return {
        "side_streams": {str(k): v for k, v in side.items()},
        "library_share": round(share, 4),
        "library_ops_us": {k: round(v, 1) for k, v in top},
        "custom_us": round(custom_us, 1),
        "flags": flags,
    }


def relative_l2(a: Any, b: Any) -> float:
    import torch

    a64, b64 = a.detach().to(torch.float64), b.detach().to(b.device, torch.float64)
    norm = float(torch.linalg.vector_norm(b64))
    return float(torch.linalg.vector_norm(a64.to(b64.device) - b64)) / max(norm, 1e-30)


def precision_check(candidate_out: list[Any], ref32_out: list[Any], ref64_out: list[Any]) -> dict[str, Any]:
    """Flag a candidate much further from float64 than the fp32 reference is."""
    import torch

    worst_candidate = worst_reference = 0.0
    for cand, r32, r64 in zip(candidate_out, ref32_out, ref64_out, strict=True):
        if not all(isinstance(t, torch.Tensor) for t in (cand, r32, r64)) or not r64.is_floating_point():
            continue
        worst_candidate = max(worst_candidate, relative_l2(cand, r64))
        worst_reference = max(worst_reference, relative_l2(r32, r64))
    flagged = worst_candidate > max(PRECISION_RATIO * worst_reference, PRECISION_FLOOR)
    return {
        "candidate_vs_fp64": worst_candidate,
        "fp32_reference_vs_fp64": worst_reference,
        "flags": ["lower_precision"] if flagged else [],
    }


def output_flags(outputs: list[Any], sync: Any, settle_s: float = 0.05) -> list[str]:
    """`tensor_subclass` for outputs that are not plain tensors; `deferred_write` for outputs that
    change after the call returned and the device was synchronized."""
    import torch

    flags = []
    tensors = [o for o in outputs if isinstance(o, torch.Tensor)]
    if any(type(o) not in (torch.Tensor, torch.nn.Parameter) for o in tensors):
        flags.append("tensor_subclass")
        return flags
    sync()
    before = [torch.Tensor.clone(o) for o in tensors]
    time.sleep(settle_s)
    sync()
    if any(not torch.equal(a, b) for a, b in zip(before, tensors, strict=True)):
        flags.append("deferred_write")
    return flags




def bandwidth_floor_for_bytes(input_bytes: int, device_name: str) -> float | None:
    """The least time reading `input_bytes` once from device memory can take (the inputs are sized on
    the meta device, nothing allocated); None when the device's bandwidth is unknown."""
    peak = next((bw for key, bw in PEAK_BANDWIDTH_GBS.items() if key in device_name), None)
    if peak is None:
        return None
    return input_bytes / (peak * 1e9) * 1e3


TRACE_FLAGS = ("library_kernels", "no_custom_kernel", "side_stream")
"""The flags `trace_forward` raises."""


def impossible(runtime_ms: float, floor_ms: float | None) -> bool:
    return floor_ms is not None and runtime_ms < BOUND_MARGIN * floor_ms
