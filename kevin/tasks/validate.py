"""Validate problems: does each one import, build, run and give an output a checker can trust?

`kevin tasks validate` runs every selected problem in its own fresh Python process (`sys.executable`,
own session, working directory in a temporary folder, output captured to a file, wall-clock timeout)
and reports one row per problem:

- `ok`: imports, builds `Model(*get_init_inputs())`, runs on `get_inputs()`, output is usable.
- `import_error`: the source fails to import, or lacks `Model`, `get_inputs` or `get_init_inputs`.
- `run_error`: building the model or the forward pass raised (or the process died).
- `timeout`: the problem used more than `--timeout-s` of wall time. The child's own clock (SIGALRM)
  measures it and excludes interpreter and torch start-up, which on a busy machine can take longer
  than the problem; the parent kills the whole process group if even that fails.
- `nondeterministic`: two forward passes on the same model and inputs differ beyond atol=rtol=1e-4
  (dropout in training mode, random numbers drawn inside `forward`, racy reductions).
- `degenerate`: a checker could not tell a right answer from a wrong one: the output is empty or not
  finite, an all-zero output would pass atol=rtol=1e-4, or two different random inputs give outputs
  equal within that tolerance (the output hardly depends on the input).
- `skipped`: too large for the device: before anything is allocated, `get_inputs`, the model and its
  forward pass run on the `meta` device to size inputs, parameters and output; above the byte budget
  (1 GiB on cpu by default) the problem is not run. On cpu a memory cap (RLIMIT_AS) backs the estimate
  up for what it cannot see (intermediates, models that do not build on `meta`).

The verdict comes back through a JSON file the parent names, never parsed from the child's stdout.
This module is the parent side and the command; what runs in the child (`probe` and the checks on
outputs, re-exported here) is kevin.tasks.probe.
What this does not do: sandbox problems against malice (they are trusted reference code), measure
speed, or check that a problem's output is right (there is nothing to compare it with).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path

from kevin.errors import UsageError
from kevin.tasks.journal import Journal

# What runs in the child, importable from here as before.
from kevin.tasks.probe import (
    ATOL,
    GIB,
    RTOL,
    ValidateSettings,
    classify_outputs,
    estimate_footprint_bytes,
    input_fingerprint,
    outputs_close,
    peak_abs,
    shorten,
    zero_would_pass,
)
from kevin.tasks.records import Task
from kevin.tasks.selection import add_selection_arguments, tasks_from_args

__all__ = [
    "ATOL",
    "DEFAULT_BUDGET_GIB",
    "GIB",
    "RTOL",
    "STARTUP_ALLOWANCE_S",
    "STATUSES",
    "ValidateSettings",
    "ValidationResult",
    "add_parser",
    "classify_outputs",
    "estimate_footprint_bytes",
    "format_summary",
    "format_table",
    "input_fingerprint",
    "outputs_close",
    "peak_abs",
    "run_validate",
    "settings_from_args",
    "summarize",
    "validate_task",
    "validate_tasks",
    "zero_would_pass",
]

STATUSES = ("ok", "import_error", "run_error", "timeout", "nondeterministic", "degenerate", "skipped")
"""Every status a problem can get, in the order summaries list them."""

DEFAULT_BUDGET_GIB = {"cpu": 1.0, "cuda": 32.0}
"""Largest estimated footprint (inputs + parameters + output) run per device, in GiB."""

STARTUP_ALLOWANCE_S = 300.0
"""Extra time the parent allows beyond `--timeout-s` for Python and torch to start (a busy machine
can take a minute); the child's own clock, which excludes start-up, normally ends a hang first."""


@dataclass(frozen=True)
class ValidationResult:
    """One problem's verdict, as the table row and the JSON object show it."""

    task_id: str
    level: int
    name: str
    status: str
    reason: str
    """Short why for anything but `ok` (and notes on `ok`); empty otherwise."""
    elapsed_s: float
    """Wall-clock time of the child process, torch import included."""
    footprint_bytes: int | None
    """Estimated inputs + parameters + output, when the meta-device estimate worked."""


# ---------------------------------------------------------------------------------------------
# Parent side: one child process per problem


def _last_error_line(log: str) -> str:
    """The line of a captured log most likely to say what went wrong (the last non-empty one)."""
    lines = [line for line in log.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _death_reason(returncode: int, log: str) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        hint = " (out of memory?)" if name == "SIGKILL" else ""
        return f"process killed by {name}{hint}"
    last_line = _last_error_line(log)
    return shorten(
        f"process exited with code {returncode} without a verdict"
        + (f"; last output: {last_line}" if last_line else "")
    )


def _has_exited(pid: int) -> bool:
    """True once `pid` has exited; it is not reaped, so its process group id stays reserved."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _poll_until(condition: Callable[[], bool], timeout_s: float) -> bool:
    """Check `condition` every 50 ms until it holds (True) or `timeout_s` passes (False)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def _kill_group(pid: int) -> None:
    """Kill everything in the child's session (the child leads it, alive or not yet reaped)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _child_env() -> dict[str, str]:
    """The child's environment: ours, with this package importable even when not installed."""
    package_root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    return env


def validate_task(task: Task, settings: ValidateSettings) -> ValidationResult:
    """Run one problem in a fresh process and turn what happened into a ValidationResult."""
    with tempfile.TemporaryDirectory(prefix="kevin-validate-") as tmp:
        folder = Path(tmp)
        workdir = folder / "work"
        workdir.mkdir()
        request_path, verdict_path, log_path = (
            folder / "request.json",
            folder / "verdict.json",
            folder / "log",
        )
        request = {"source": task.source, "settings": asdict(settings)}
        request_path.write_text(json.dumps(request), encoding="utf-8")
        command = [sys.executable, "-m", "kevin.tasks.probe", str(request_path), str(verdict_path)]
        start = time.monotonic()
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                command,
                cwd=workdir,
                env=_child_env(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                finished = _poll_until(
                    lambda: _has_exited(process.pid), settings.timeout_s + STARTUP_ALLOWANCE_S
                )
            finally:
                _kill_group(process.pid)  # the child on timeout; anything it left running otherwise
                process.wait()
        elapsed_s = time.monotonic() - start
        verdict = json.loads(verdict_path.read_text()) if verdict_path.exists() else None
        log_text = log_path.read_text(errors="replace")

    def result(status: str, reason: str, footprint: int | None = None) -> ValidationResult:
        return ValidationResult(
            task.id, task.level, task.name, status, reason, round(elapsed_s, 2), footprint
        )

    if verdict is not None:
        return result(verdict["status"], verdict["reason"], verdict.get("footprint_bytes"))
    if not finished:
        return result(
            "timeout", f"no verdict within {settings.timeout_s + STARTUP_ALLOWANCE_S:g} s (start-up included)"
        )
    if process.returncode == -signal.SIGALRM:
        return result("timeout", f"no verdict within {settings.timeout_s:g} s")
    return result("run_error", _death_reason(process.returncode, log_text))


def validate_tasks(
    tasks: Sequence[Task],
    settings: ValidateSettings,
    *,
    jobs: int = 1,
    progress: Callable[[int, int, ValidationResult], None] | None = None,
) -> list[ValidationResult]:
    """Validate many problems, `jobs` at a time; results in the order of `tasks`."""
    results: dict[int, ValidationResult] = {}
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(validate_task, task, settings): i for i, task in enumerate(tasks)}
        for future in as_completed(futures):
            results[futures[future]] = future.result()
            if progress is not None:
                progress(len(results), len(tasks), results[futures[future]])
    return [results[i] for i in range(len(tasks))]


def validate_journaled(
    tasks: Sequence[tuple[str, Task]],
    settings: ValidateSettings,
    journal: Journal | None,
    *,
    jobs: int = 1,
    label: Callable[[ValidationResult], str] = lambda result: result.task_id,
) -> list[dict[str, str]]:
    """{"status", "reason"} for each (journal key, problem) of `tasks`, in order: as `journal` holds
    it, else validated (`validate_tasks`, a progress line each) and put into it as it finishes, so a
    run cut short (`kevin tasks generate`, `enlarge`) does only the rest when run again."""
    outcomes = [journal.get("validate", key) if journal else None for key, _ in tasks]
    todo = {tasks[i][1].id: i for i, outcome in enumerate(outcomes) if not outcome}

    def finished(done: int, total: int, result: ValidationResult) -> None:
        print(f"  validate [{done}/{total}] {label(result)} {result.status}", file=sys.stderr, flush=True)
        index = todo[result.task_id]
        outcomes[index] = {"status": result.status, "reason": result.reason}
        if journal is not None:
            journal.put("validate", tasks[index][0], outcomes[index])

    if todo:
        validate_tasks([tasks[i][1] for i in todo.values()], settings, jobs=jobs, progress=finished)
    return [outcome or {} for outcome in outcomes]


def summarize(results: Sequence[ValidationResult]) -> dict[str, int]:
    """Count per status, every status present (zeros included), in `STATUSES` order."""
    counts = Counter(r.status for r in results)
    return {status: counts.get(status, 0) for status in STATUSES}


def format_summary(results: Sequence[ValidationResult]) -> str:
    counts = summarize(results)
    parts = [f"{n} {status}" for status, n in counts.items() if n]
    return f"summary: {', '.join(parts) or 'nothing run'} ({len(results)} problems)"


def _mib(footprint_bytes: int | None) -> str:
    return "?" if footprint_bytes is None else f"{footprint_bytes / (1 << 20):.0f}"


def format_table(results: Sequence[ValidationResult]) -> str:
    """One aligned row per problem: id, name, status, estimated MiB, seconds, reason."""
    header = ("id", "name", "status", "MiB", "time_s", "reason")
    rows = [header] + [
        (r.task_id, shorten(r.name, 40), r.status, _mib(r.footprint_bytes), f"{r.elapsed_s:.1f}", r.reason)
        for r in results
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    return "\n".join(
        f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  "
        f"{r[3]:>{widths[3]}}  {r[4]:>{widths[4]}}  {r[5]}".rstrip()
        for r in rows
    )


# ---------------------------------------------------------------------------------------------
# Command line


def _check_device(device: str) -> None:
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UsageError("--device cuda but no CUDA GPU is visible; use --device cpu")


def settings_from_args(args) -> ValidateSettings:
    """Validated settings from `kevin tasks validate` options."""
    if args.timeout_s <= 0:
        raise UsageError(f"--timeout-s must be positive, got {args.timeout_s:g}")
    if args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}")
    budget_gib = args.budget_gib if args.budget_gib is not None else DEFAULT_BUDGET_GIB[args.device]
    if budget_gib <= 0:
        raise UsageError(f"--budget-gib must be positive, got {budget_gib:g}")
    threads = max(1, (os.cpu_count() or 1) // args.jobs)
    return ValidateSettings(
        device=args.device,
        timeout_s=args.timeout_s,
        budget_bytes=int(budget_gib * GIB),
        seed=args.seed,
        threads=threads,
    )


def _print_progress(done: int, total: int, result: ValidationResult) -> None:
    print(
        f"[{done}/{total}] {result.task_id} {result.status} ({result.elapsed_s:.1f} s)",
        file=sys.stderr,
        flush=True,
    )


def run_validate(args) -> int:
    """`kevin tasks validate`: 0 whatever the verdicts (they are the output), 2 on bad input."""
    settings = settings_from_args(args)
    tasks = tasks_from_args(args)
    _check_device(settings.device)
    results = validate_tasks(tasks, settings, jobs=args.jobs, progress=_print_progress)
    if args.json:
        report = {
            "settings": asdict(settings),
            "summary": summarize(results),
            "results": [asdict(r) for r in results],
        }
        text = json.dumps(report, indent=2)
    else:
        text = f"{format_table(results)}\n\n{format_summary(results)}"
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    return 0


def add_parser(subparsers) -> None:
    """Add `validate` to the `kevin tasks` subcommands."""
    parser = subparsers.add_parser(
        "validate",
        help="check that problems import, run and give a checkable output",
        description="Run each problem in a fresh process and report: ok, import_error, run_error, "
        "timeout, nondeterministic, degenerate or skipped (too large for the device).",
    )
    add_selection_arguments(parser)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="where to run (default cpu)")
    parser.add_argument("--timeout-s", type=float, default=60.0, help="per problem (default 60)")
    parser.add_argument("--jobs", type=int, default=2, help="problems run at once (default 2)")
    parser.add_argument(
        "--budget-gib",
        type=float,
        default=None,
        help="skip problems whose inputs+parameters+output exceed this (default: 1 on cpu, 32 on cuda)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed for weights and inputs (default 0)")
    parser.add_argument("--json", action="store_true", help="print a JSON report instead of a table")
    parser.add_argument("--out", default=None, metavar="FILE", help="also write the report to FILE")
    parser.set_defaults(run=run_validate)
