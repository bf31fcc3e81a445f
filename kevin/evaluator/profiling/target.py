"""The program a profiler watches: load a problem and a candidate, run the candidate's forward.

    python -m kevin.evaluator.profiling.target PROBLEM CANDIDATE --backend B --tool ncu|torch
        [--forward-calls N] [--warmup N] [--cache-dir DIR] [--out JSON]

Loads both files the way the evaluator's runner does (`worker.support.load_module`; the
candidate's `load_inline` calls go through kevin's build cache with the fast path, so the profiled
library is built like the judged one), builds `ModelNew(*get_init_inputs())` on the device, makes
inputs from `get_inputs()` under a fixed seed, runs `--warmup` forward calls unprofiled, then
`--forward-calls` profiled ones:

  ncu    between cudaProfilerStart and cudaProfilerStop (ncu runs with --profile-from-start off);
  torch  inside torch.profiler; the per-name table (kernels on a GPU, never profiler ranges; ops on a
         CPU by self time, the forward's own time, its extension calls, as `FORWARD_LABEL`) is
         written to `--out` as JSON: [{"name", "launches", "total_ns"}], longest first.

Exit codes: 0 done; 3 the candidate failed (the message is the last stderr line); 2 bad usage.

What this does not do: it is not confined (the candidate runs with the caller's powers, as under
plain `python`), so profile only kernels that already passed the judge, or your own; its build
cache is its own (kevin.evaluator.profiling.run), never the judge's; it checks nothing about the
outputs; inputs stay fp32.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

TORCH_TOP = 50
"""Rows of torch.profiler's table kept in --out (the summary shows 3)."""
FORWARD_LABEL = "ModelNew.forward[self]"
"""torch.profiler's range around each forward call. On a CPU its self time is what no aten op
accounts for: the candidate's own extension calls and Python."""


def _to_device(value: Any, device: Any) -> Any:
    import torch

    return value.to(device) if isinstance(value, torch.Tensor) else value


def _torch_table(profiler: Any, on_gpu: bool) -> list[dict[str, Any]]:
    """Per-name rows of torch.profiler's averages: CUDA kernels on a GPU, CPU ops (self time,
    so nested ops are not counted twice) on a CPU."""
    from torch.autograd import DeviceType

    from kevin.evaluator.attribution import is_annotation

    rows = []
    for event in profiler.key_averages():
        if on_gpu:
            # A range's device-side shadow (FORWARD_LABEL's among them) spans kernels already listed:
            # session 38's report counted the baseline's forward twice through it.
            if getattr(event, "device_type", None) != DeviceType.CUDA or is_annotation(event):
                continue
            total_us = getattr(event, "self_device_time_total", None)
            if total_us is None:
                total_us = getattr(event, "self_cuda_time_total", 0.0)
        else:
            if event.key.startswith("ProfilerStep"):
                continue
            total_us = event.self_cpu_time_total
        if total_us and total_us > 0:
            rows.append({"name": event.key, "launches": int(event.count), "total_ns": float(total_us) * 1e3})
    return sorted(rows, key=lambda row: -row["total_ns"])[:TORCH_TOP]


def run(args: argparse.Namespace) -> int:
    import torch

    from kevin.evaluator import build
    from kevin.evaluator.worker.support import load_module

    on_gpu = args.backend in ("cuda", "triton")
    device = torch.device("cuda" if on_gpu else "cpu")
    cache_root = Path(args.cache_dir)
    cache_root.mkdir(parents=True, exist_ok=True)
    build.install(cache_root, build.BuildLog(), fast=True)
    torch.manual_seed(0)
    problem = load_module(Path(args.problem).read_text(), "kevin_problem", args.problem)
    try:
        candidate = load_module(Path(args.candidate).read_text(), "kevin_model", args.candidate)
        with torch.no_grad():
            model = candidate.ModelNew(*problem.get_init_inputs()).to(device).eval()
            inputs = [_to_device(x, device) for x in problem.get_inputs()]
            for _ in range(args.warmup):
                model(*inputs)
            if on_gpu:
                torch.cuda.synchronize()
            if args.tool == "ncu":
                torch.cuda.profiler.start()
                for _ in range(args.forward_calls):
                    model(*inputs)
                torch.cuda.synchronize()
                torch.cuda.profiler.stop()
                return 0
            activities = [torch.profiler.ProfilerActivity.CPU]
            if on_gpu:
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            with torch.profiler.profile(activities=activities) as profiler:
                for _ in range(args.forward_calls):
                    with torch.profiler.record_function(FORWARD_LABEL):
                        model(*inputs)
                if on_gpu:
                    torch.cuda.synchronize()
    except Exception as exc:  # the candidate's failure: report it on one line, exit 3
        message = " ".join(f"{type(exc).__name__}: {exc}".split())
        print(f"kevin-profile: candidate failed: {message[:500]}", file=sys.stderr)
        return 3
    Path(args.out).write_text(json.dumps(_torch_table(profiler, on_gpu)))
    return 0


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m kevin.evaluator.profiling.target")
    parser.add_argument("problem")
    parser.add_argument("candidate")
    parser.add_argument("--backend", choices=("cuda", "triton", "cpp"), required=True)
    parser.add_argument("--tool", choices=("ncu", "torch"), required=True)
    parser.add_argument("--forward-calls", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--cache-dir", required=True)
    parser.add_argument("--out", default=None, help="torch.profiler's table as JSON (--tool torch)")
    args = parser.parse_args(argv)
    if args.tool == "torch" and not args.out:
        parser.error("--tool torch needs --out")
    if args.tool == "ncu" and args.backend == "cpp":
        parser.error("--tool ncu needs a GPU back end")
    return args


def main(argv: list[str] | None = None) -> int:
    return run(parse_args(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
