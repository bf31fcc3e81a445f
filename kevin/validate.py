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
What this does not do: sandbox problems against malice (they are trusted reference code), measure
speed, or check that a problem's output is right (there is nothing to compare it with).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from kevin.errors import UsageError
from kevin.tasks import Task, add_selection_arguments, tasks_from_args

STATUSES = ("ok", "import_error", "run_error", "timeout", "nondeterministic", "degenerate", "skipped")
"""Every status a problem can get, in the order summaries list them."""

ATOL = 1e-4
RTOL = 1e-4
"""Tolerances the degenerate and nondeterministic checks use (those of a strict fp32 checker)."""

GIB = 1 << 30
DEFAULT_BUDGET_GIB = {"cpu": 1.0, "cuda": 32.0}
"""Largest estimated footprint (inputs + parameters + output) run per device, in GiB."""

MEMORY_CAP_FACTOR = 4
"""On cpu, a child may map this many budgets beyond what it has after importing torch."""

STARTUP_ALLOWANCE_S = 300.0
"""Extra time the parent allows beyond `--timeout-s` for Python and torch to start (a busy machine
can take a minute); the child's own clock, which excludes start-up, normally ends a hang first."""

REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")
REASON_CHARS = 200


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


@dataclass(frozen=True)
class ValidateSettings:
    """How problems are run; the child process receives these as JSON."""

    device: str = "cpu"
    timeout_s: float = 60.0
    budget_bytes: int = GIB
    seed: int = 0
    threads: int = 1
    """torch intra-op threads per child (cores / jobs, so parallel children do not fight)."""


# ---------------------------------------------------------------------------------------------
# Parent side: one child process per problem


def _short(text: str, limit: int = REASON_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


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
    return _short(
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
    package_root = str(Path(__file__).resolve().parents[1])
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
        command = [sys.executable, "-m", "kevin.validate", str(request_path), str(verdict_path)]
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
        (r.task_id, _short(r.name, 40), r.status, _mib(r.footprint_bytes), f"{r.elapsed_s:.1f}", r.reason)
        for r in results
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    return "\n".join(
        f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  "
        f"{r[3]:>{widths[3]}}  {r[4]:>{widths[4]}}  {r[5]}".rstrip()
        for r in rows
    )


# ---------------------------------------------------------------------------------------------
# Child side: runs inside `python -m kevin.validate REQUEST VERDICT`


def _verdict(status: str, reason: str = "", footprint_bytes: int | None = None) -> dict:
    return {"status": status, "reason": _short(reason), "footprint_bytes": footprint_bytes}


def _describe(exc: BaseException) -> str:
    message = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {message[0]}" if message else type(exc).__name__


def _is_out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, MemoryError) or "can't allocate memory" in str(exc) or "out of memory" in str(exc)


def import_problem(source: str, path: Path):
    """Import `source` as a module from `path` (written there so tracebacks and inspect work)."""
    import importlib.util

    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("kevin_problem", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["kevin_problem"] = module
    spec.loader.exec_module(module)
    return module


def tensor_bytes(value) -> int:
    """Bytes of every tensor in `value` (tensors, or lists/tuples/dicts of them); meta tensors too."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (list, tuple)):
        return sum(tensor_bytes(v) for v in value)
    if isinstance(value, dict):
        return sum(tensor_bytes(v) for v in value.values())
    return 0


def estimate_footprint_bytes(module, budget_bytes: int | None = None) -> tuple[int | None, str]:
    """Inputs + parameters + output of a problem, sized on the `meta` device (nothing allocated).

    Returns (bytes, note). Bytes is None when `get_inputs` does not run on `meta`; the parts after it
    (model, output) count as zero when they do not, and the note says so. Once inputs and parameters
    alone pass `budget_bytes` the forward pass is not sized (the answer is already "too large").
    """
    import torch

    try:
        with torch.device("meta"):
            inputs = module.get_inputs()
    except Exception as exc:
        return None, f"size unknown: get_inputs fails on meta ({_describe(exc)})"
    total = tensor_bytes(inputs)
    try:
        with torch.device("meta"), torch.no_grad():
            model = module.Model(*module.get_init_inputs())
            total += sum(tensor_bytes(t) for t in (*model.parameters(), *model.buffers()))
            if budget_bytes is not None and total > budget_bytes:
                return total, "output not sized"
            with problem_clock_paused():
                warm_up_meta()
            output = model(*inputs)
    except Exception as exc:
        return total, f"size partly unknown ({_describe(exc)} on meta)"
    return total + tensor_bytes(output), ""


def start_problem_clock(timeout_s: float) -> None:
    """Die by SIGALRM (default action: terminate) once the problem has had `timeout_s` of wall time.

    The kernel delivers it, so a hang inside a long C++ op ends too; the parent reads -SIGALRM as timeout.
    """
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)


@contextmanager
def problem_clock_paused():
    """Stop the problem's clock while we do our own work (a no-op when no clock runs)."""
    remaining_s, _ = signal.setitimer(signal.ITIMER_REAL, 0)
    try:
        yield
    finally:
        if remaining_s > 0:
            signal.setitimer(signal.ITIMER_REAL, remaining_s)


def warm_up_meta() -> None:
    """Run one op on `meta`: its first use imports torch's decompositions (seconds), which is start-up."""
    import torch

    with torch.device("meta"):
        torch.nn.functional.linear(torch.empty(2, 2), torch.empty(2, 2), torch.empty(2))


def flatten_tensors(value) -> list:
    """The tensors of a forward's output in order; plain numbers become 0-d tensors."""
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in flatten_tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in flatten_tensors(v)]
    if isinstance(value, (bool, int, float, complex)):
        return [torch.tensor(value)]
    return []


CHUNK_ELEMENTS = 1 << 24
"""Outputs are compared this many elements at a time, so a check never doubles a large output."""


def _tensors_close(a, b) -> bool:
    import torch

    if a.shape != b.shape:
        return False
    if not (a.is_floating_point() or a.is_complex() or b.is_floating_point() or b.is_complex()):
        return torch.equal(a, b)
    common = torch.promote_types(a.dtype, b.dtype)
    if a.dim() == 0:
        return torch.allclose(a.to(common), b.to(common), atol=ATOL, rtol=RTOL, equal_nan=True)
    rows = max(1, CHUNK_ELEMENTS // max(1, a[0].numel()))  # slices along dim 0 are views, never copies
    return all(
        torch.allclose(
            a[i : i + rows].to(common), b[i : i + rows].to(common), atol=ATOL, rtol=RTOL, equal_nan=True
        )
        for i in range(0, a.shape[0], rows)
    )


def outputs_close(first: Sequence, second: Sequence) -> bool:
    """Same number of tensors and shapes, equal within ATOL/RTOL (NaNs in the same places count equal)."""
    return len(first) == len(second) and all(_tensors_close(a, b) for a, b in zip(first, second))


def peak_abs(tensor) -> float:
    """Largest |element| of a tensor, without making a full-size copy (0.0 when empty)."""
    import torch

    if tensor.numel() == 0:
        return 0.0
    if tensor.dtype == torch.bool:
        return float(tensor.any())
    if tensor.is_complex():
        return float(tensor.abs().max())
    low, high = torch.aminmax(tensor)
    return max(abs(float(low)), abs(float(high)))


def zero_would_pass(outputs: Sequence) -> bool:
    """True when an all-zero output would pass allclose at ATOL/RTOL: every |x| <= ATOL + RTOL*|x|."""
    return all(peak_abs(t) * (1.0 - RTOL) <= ATOL for t in outputs)


NONDETERMINISTIC_REASON = (
    "two forward passes on the same inputs differ (dropout in training mode, random numbers in forward, "
    "or a racy reduction)"
)


def classify_outputs(first: Sequence, other_input: Sequence | None) -> tuple[str, str]:
    """`ok` or `degenerate`, with the reason, from a forward's output (a list of tensors).

    `other_input` is the output for different random inputs (None when `get_inputs` ignores the seed,
    so dependence on the input cannot be tested).
    """
    import math

    if not first or any(t.numel() == 0 for t in first):
        return "degenerate", "forward returned no tensor or an empty one"
    peaks = [peak_abs(t) for t in first]
    if not all(math.isfinite(peak) for peak in peaks):
        return "degenerate", "output contains NaN or inf"
    if zero_would_pass(first):
        return (
            "degenerate",
            f"max |output| = {max(peaks):.3g}: an all-zero output would pass atol=rtol={ATOL:g}",
        )
    if other_input is None:
        return "ok", "get_inputs ignores the seed; input dependence not checked"
    if outputs_close(first, other_input):
        return "degenerate", "two different random inputs give the same output within tolerance"
    return "ok", ""


def _forward(model, inputs: Sequence, device: str) -> list:
    """The model's output tensors for `inputs` (moved to `device`), without autograd, on the CPU."""
    import torch

    with torch.no_grad():
        return [t.cpu() for t in flatten_tensors(model(*_to_device(inputs, device)))]


def _to_device(value, device: str):
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(_to_device(v, device) for v in value)
    return value


def input_fingerprint(inputs: Sequence) -> tuple:
    """Shapes, dtypes and float64 sums of the tensor inputs (reprs of the rest): equal for equal inputs."""
    import torch

    return tuple(
        (tuple(x.shape), str(x.dtype), float(x.sum(dtype=torch.float64)))
        if isinstance(x, torch.Tensor)
        else repr(x)
        for x in inputs
    )


def _cap_memory(extra_bytes: int) -> None:
    """Cap this process's address space at what it maps now plus `extra_bytes` (Linux only)."""
    import resource

    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return
    match = re.search(r"VmSize:\s+(\d+) kB", status)
    if match:
        cap = int(match.group(1)) * 1024 + extra_bytes
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def probe(source: str, settings: ValidateSettings, workdir: Path) -> dict:
    """Import, size, build and run one problem in this process; the verdict as a dict."""
    import torch

    torch.set_num_threads(max(1, settings.threads))
    try:
        module = import_problem(source, workdir / "problem.py")
    except BaseException as exc:  # SystemExit and friends from a problem are its failure too
        return _verdict("import_error", _describe(exc))
    missing = [name for name in REQUIRED_NAMES if not hasattr(module, name)]
    if missing:
        return _verdict("import_error", f"missing {', '.join(missing)}")

    footprint, note = estimate_footprint_bytes(module, settings.budget_bytes)
    if footprint is not None and footprint > settings.budget_bytes:
        parts = "inputs + parameters" if note else "inputs + parameters + output"
        return _verdict(
            "skipped",
            f"too large for {settings.device}: ~{footprint / GIB:.3f} GiB of {parts} "
            f"> {settings.budget_bytes / GIB:.3f} GiB budget",
            footprint,
        )
    if settings.device == "cpu":
        _cap_memory(MEMORY_CAP_FACTOR * settings.budget_bytes)

    stage = "Model(*get_init_inputs())"
    try:
        torch.manual_seed(settings.seed)
        model = module.Model(*module.get_init_inputs()).to(settings.device)
        stage = "get_inputs()"
        inputs = module.get_inputs()
        fingerprint = input_fingerprint(inputs)
        stage = "forward"
        first, repeat = _forward(model, inputs, settings.device), _forward(model, inputs, settings.device)
        del inputs  # hold as little as possible at once: the cap counts everything alive
        stage = "comparing outputs"
        if not outputs_close(first, repeat):
            return _verdict("nondeterministic", NONDETERMINISTIC_REASON, footprint)
        del repeat
        stage = "get_inputs() with another seed"
        torch.manual_seed(settings.seed + 1)
        other_inputs = module.get_inputs()
        stage = "forward on other inputs"
        other = None
        if input_fingerprint(other_inputs) != fingerprint:
            other = _forward(model, other_inputs, settings.device)
        del other_inputs
        stage = "comparing outputs"
        status, reason = classify_outputs(first, other)
    except Exception as exc:
        if _is_out_of_memory(exc):
            return _verdict(
                "skipped",
                f"too large for {settings.device}: {stage} ran out of memory ({_describe(exc)})",
                footprint,
            )
        return _verdict("run_error", f"{stage}: {_describe(exc)}", footprint)
    return _verdict(status, "; ".join(r for r in (reason, note) if r), footprint)


def _child_main(argv: list[str]) -> int:
    """Entry point of the child: read the request file, run the problem, write the verdict file."""
    import torch  # noqa: F401  (before the problem's clock starts: start-up is not the problem's time)

    request_path, verdict_path = Path(argv[0]), Path(argv[1])
    request = json.loads(request_path.read_text(encoding="utf-8"))
    settings = ValidateSettings(**request["settings"])
    start_problem_clock(settings.timeout_s)
    verdict = probe(request["source"], settings, Path.cwd())
    verdict_path.write_text(json.dumps(verdict), encoding="utf-8")
    return 0


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


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
