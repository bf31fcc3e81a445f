"""`kevin eval`: one candidate against one problem, and the evaluation options every command shares.

`add_eval_options` / `config_from_args` turn the shared flags into an `EvalConfig` (kevin eval,
kevin eval-batch); `summary_line` is the one-line verdict a person reads.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from kevin.errors import UsageError
from kevin.evaluator import feedback
from kevin.evaluator.evaluate import BACKENDS, GPU_BACKENDS, PRECISIONS, EvalConfig, evaluate
from kevin.evaluator.result import EvalResult
from kevin.evaluator.timing import TimingConfig
from kevin.tasks import Task


def add_eval_options(parser: Any) -> None:
    """Options shared by `kevin eval` and `kevin eval-batch`."""
    parser.add_argument(
        "--backend",
        choices=("auto",) + BACKENDS,
        default="auto",
        help="cuda on a GPU machine, cpp on a CPU one (default: auto); triton for @triton.jit candidates",
    )
    parser.add_argument("--precision", choices=PRECISIONS, default="fp32")
    parser.add_argument("--trials", type=int, default=5, help="correctness trials (default 5)")
    parser.add_argument("--atol", type=float, default=None)
    parser.add_argument("--rtol", type=float, default=None)
    parser.add_argument("--seed", type=int, default=None, help="fix the secret seed (default: fresh)")
    parser.add_argument("--timing-budget-ms", type=float, default=2000.0)
    parser.add_argument("--compile-baseline", action="store_true", help="also time torch.compile")
    parser.add_argument("--no-baseline-cache", action="store_true")
    parser.add_argument("--no-static-check", action="store_true")
    parser.add_argument(
        "--no-fast-build", action="store_true", help="build every candidate with the real load_inline"
    )
    parser.add_argument(
        "--cache-dir", default=None, help="build and baseline caches (default ~/.cache/kevin)"
    )
    parser.add_argument(
        "--device-slots",
        type=int,
        default=4,
        help="evaluations that may hold one device at once; timing is always alone (default 4)",
    )


def resolve_backend(backend: str) -> str:
    """`auto` -> cuda where torch sees a GPU, else cpp; a GPU back end where none is: UsageError."""
    if backend == "auto":
        import torch

        backend = "cuda" if torch.cuda.is_available() else "cpp"
    check_backend_available(backend)
    return backend


def config_from_args(args: Any) -> EvalConfig:
    return EvalConfig(
        backend=resolve_backend(args.backend),
        precision=args.precision,
        trials=args.trials,
        atol=args.atol,
        rtol=args.rtol,
        seed=args.seed,
        timing=TimingConfig(budget_ms=args.timing_budget_ms),
        compile_baseline=args.compile_baseline,
        baseline_cache=not args.no_baseline_cache,
        static_check=not args.no_static_check,
        fast_build=not args.no_fast_build,
        cache_dir=args.cache_dir,
        device_slots=args.device_slots,
    )


def check_backend_available(backend: str) -> None:
    """UsageError (exit 2, one line) when a GPU back end is asked for where it cannot run."""
    if backend not in GPU_BACKENDS:
        return
    import importlib.util

    import torch

    if not torch.cuda.is_available():
        raise UsageError(f"--backend {backend} needs a CUDA GPU and torch sees none; use --backend cpp here")
    if backend == "triton" and importlib.util.find_spec("triton") is None:
        raise UsageError(
            "--backend triton needs the triton package, which is not installed (pip install triton)"
        )


def read_source(path: str, what: str) -> str:
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"{what} file not found: {path} (give the path to a .py file)")
    try:
        return file.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {what} {path}: {exc}") from None


def summary_line(result: EvalResult) -> str:
    verdict = "PASS" if result.passed else ("FAIL" if result.stage != "ok" else "FLAGGED")
    parts = [f"{verdict} stage={result.stage}"]
    if result.speedup is not None:
        parts.append(
            f"speedup={result.speedup:.3f}x runtime={result.runtime_ms:.4g}ms "
            f"baseline={result.baseline_ms:.4g}ms"
        )
    if result.flags:
        parts.append("flags=" + ",".join(result.flags))
    if result.blame not in ("none", "candidate"):
        parts.append(f"blame={result.blame}")
    return " ".join(parts)


def _run_eval(args: Any) -> int:
    problem_source = read_source(args.problem, "problem")
    candidate_source = read_source(args.candidate, "candidate")
    config = config_from_args(args)
    name = Path(args.problem).stem
    task = Task.from_source(problem_source, id=name, name=name, origin=str(args.problem))
    result = evaluate(task, candidate_source, config)
    if args.json:
        print(result.to_json())
    else:
        print(summary_line(result))
        if result.stage != "ok":
            print(feedback.render(result))
        elif not result.passed:  # correct but blocked: which check, with its numbers
            print(result.explain())
    sys.stdout.flush()
    return 0


def register_commands(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="evaluate one candidate kernel against one problem",
        description="Build, check and time CANDIDATE (a ModelNew module) against PROBLEM (a Model module).",
    )
    parser.add_argument(
        "problem", help="problem file (KernelBench format: Model, get_inputs, get_init_inputs)"
    )
    parser.add_argument("candidate", help="candidate file defining ModelNew")
    add_eval_options(parser)
    parser.add_argument("--json", action="store_true", help="print the EvalResult as JSON")
    parser.set_defaults(run=_run_eval)
