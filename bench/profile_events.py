"""Dump the profiler's event structure on this machine's GPU: what kevin.evaluator.attribution.attribute_device
reads (ids, linked correlation ids, activity types) for torch.relu(x * s) called three times with a
device synchronize between calls, as the runner's trace does. One line per event; then the
attribution kevin makes of it.

    PYTHONPATH=. python bench/profile_events.py > profile_events.txt
"""

from __future__ import annotations

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function

from kevin.evaluator import attribution


def main() -> None:
    x = torch.randn(4096, 4096, device="cuda")
    torch.relu(x * 2.0)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            with record_function("kevin::ext::token"):
                x[:1, :256].add_(0.0)
            torch.relu(x * 2.0)
            torch.cuda.synchronize()
    events = list(prof.events())
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}: {len(events)} events")
    # torch 2.11's FunctionEvent has no linked_correlation_id or activity_type (session 8, H200).
    print(f"{'device':6s} {'id':>6s} {'linked':>6s} {'activity':18s} {'parent':28s} name [paired kernels]")
    for e in events:
        device = "cuda" if e.device_type == DeviceType.CUDA else "cpu"
        parent = e.cpu_parent.name if getattr(e, "cpu_parent", None) is not None else ""
        activity = str(getattr(e, "activity_type", "-"))
        linked = str(getattr(e, "linked_correlation_id", "-"))
        kernels = [k.name[:24] for k in getattr(e, "kernels", [])]
        print(f"{device:6s} {e.id:6d} {linked:>6s} {activity:18s} {parent[:28]:28s} {e.name[:60]} {kernels or ''}")
    found = attribution.attribute_device(events)
    print(f"attribution: library {found.library_ops}, custom {found.custom_us:.1f} us, allowed {found.allowed_us:.1f} us")


if __name__ == "__main__":
    main()
