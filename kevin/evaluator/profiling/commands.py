"""`kevin profile PROBLEM CANDIDATE`: where a candidate's forward spends its time, in a few lines.

Exit codes: 0 a profile was printed; 1 none could be made (the candidate failed to build or run,
or the profiler failed: the reason on one line, with who failed); 2 bad usage or input.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from kevin.errors import UsageError
from kevin.evaluator.commands import read_source, resolve_backend
from kevin.evaluator.evaluate import BACKENDS, EvalConfig, device_lock
from kevin.evaluator.profiling.run import TOOLS, ProfileConfig, profile


def config_from_args(args: Any) -> ProfileConfig:
    try:
        return ProfileConfig(
            backend=resolve_backend(args.backend),
            tool=args.tool,
            forward_calls=args.forward_calls,
            warmup_calls=args.warmup_calls,
            timeout_s=args.timeout_s,
            max_chars=args.max_chars,
            ncu_path=args.ncu,
            cache_dir=args.cache_dir,
        )
    except ValueError as exc:
        raise UsageError(f"{exc} (see 'kevin profile --help')") from None


def _run_profile(args: Any) -> int:
    problem_source = read_source(args.problem, "problem")
    candidate_source = read_source(args.candidate, "candidate")
    config = config_from_args(args)
    lock = device_lock(EvalConfig(backend=config.backend, cache_dir=config.cache_dir))
    report = profile(problem_source, candidate_source, config, exclusive=lock.exclusive)
    if args.raw_out and report.raw:
        Path(args.raw_out).write_text(report.raw)
    if args.json:
        print(report.to_json())
    elif report.ok:
        print(report.summary)
    sys.stdout.flush()
    if not report.ok:
        print(f"kevin: no profile (blame={report.blame}): {report.error}", file=sys.stderr)
        return 1
    return 0


def register_commands(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "profile",
        help="profile one candidate kernel (ncu, else torch.profiler) and summarise it",
        description=(
            "Run CANDIDATE's forward on PROBLEM's inputs under Nsight Compute (ncu) where it is "
            "installed, else torch.profiler, and print kernel times, DRAM bandwidth against peak, "
            "compute throughput, occupancy and its limiter, and the top stall reasons. The candidate "
            "runs unconfined: profile kernels you trust or that already passed `kevin eval`."
        ),
    )
    parser.add_argument(
        "problem", help="problem file (KernelBench format: Model, get_inputs, get_init_inputs)"
    )
    parser.add_argument("candidate", help="candidate file defining ModelNew")
    parser.add_argument(
        "--backend",
        choices=("auto",) + BACKENDS,
        default="auto",
        help="cuda on a GPU machine, cpp on a CPU one (default: auto)",
    )
    parser.add_argument("--tool", choices=TOOLS, default="auto", help="ncu, torch, or auto (default)")
    parser.add_argument("--forward-calls", type=int, default=3, help="profiled forward calls (default 3)")
    parser.add_argument("--warmup-calls", type=int, default=2, help="unprofiled calls first (default 2)")
    parser.add_argument(
        "--max-chars", type=int, default=1200, help="summary budget in characters (default 1200)"
    )
    parser.add_argument(
        "--timeout-s", type=float, default=600.0, help="deadline for the profiled run (default 600)"
    )
    parser.add_argument(
        "--ncu", default=None, help="ncu executable (default: ncu on PATH, then /usr/local/cuda/bin)"
    )
    parser.add_argument("--cache-dir", default=None, help="kevin's cache root (default ~/.cache/kevin)")
    parser.add_argument(
        "--raw-out", default=None, help="also write the profiler's own output (ncu CSV, torch JSON) here"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(run=_run_profile)
