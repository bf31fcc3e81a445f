"""The child side of `kevin tasks validate`: one problem, run in its own process.

`python -m kevin.tasks.probe REQUEST VERDICT` reads the request file the parent wrote (the
problem's source and `ValidateSettings`), runs the problem with `probe` and writes the verdict file,
the only channel back: what the problem prints goes to a log the parent reads only to explain a death.
`probe` imports the problem, sizes it on the `meta` device before allocating anything (too large:
`skipped`), caps the address space on cpu, builds `Model(*get_init_inputs())` and runs forward twice on
the same inputs (they differ: `nondeterministic`) and once on inputs drawn with another seed; the
output is `degenerate` when it is empty or not finite, when an all-zero output would pass at
ATOL/RTOL, or when the two inputs give the same output.

A failed import or a missing `Model`/`get_inputs`/`get_init_inputs` is `import_error`; a build or
forward pass that raises is `run_error` (`skipped` when it ran out of memory). The problem's clock is
a SIGALRM timer started once torch is imported, so interpreter and torch start-up are not the
problem's time, and paused while torch loads its decompositions for the `meta` sizing.

What it does not do: start, time out or kill processes, or turn deaths into verdicts (kevin.tasks.validate,
the parent, does); protect itself from the problem, which is trusted reference code run in this very
process; or judge whether an output is right (there is nothing to compare it with).
"""

from __future__ import annotations

import json
import re
import signal
import sys
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ATOL = 1e-4
RTOL = 1e-4
"""Tolerances the degenerate and nondeterministic checks use (those of a strict fp32 checker)."""

GIB = 1 << 30

MEMORY_CAP_FACTOR = 4
"""On cpu, a child may map this many budgets beyond what it has after importing torch."""

REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")
REASON_CHARS = 200


@dataclass(frozen=True)
class ValidateSettings:
    """How problems are run; the child process receives these as JSON."""

    device: str = "cpu"
    timeout_s: float = 60.0
    budget_bytes: int = GIB
    seed: int = 0
    threads: int = 1
    """torch intra-op threads per child (cores / jobs, so parallel children do not fight)."""


def shorten(text: str, limit: int = REASON_CHARS) -> str:
    """`text` on one line (runs of whitespace become one space), cut to `limit` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _verdict(status: str, reason: str = "", footprint_bytes: int | None = None) -> dict:
    return {"status": status, "reason": shorten(reason), "footprint_bytes": footprint_bytes}


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
    """The model's output tensors for `inputs` (moved to `device`), without autograd, left where they were
    made, and compared there: on the H200 (session 39) problems with 6 GB outputs took 53-72 s against a
    median 17 s while their three outputs went to the host and were compared on a few cores."""
    import torch

    with torch.no_grad():
        return flatten_tensors(model(*_to_device(inputs, device)))


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
        # Built and drawn where they run: on a GPU, gigabytes drawn by the CPU's generator on a few cores
        # and then copied over cost seconds a draw; which generator draws them changes no status.
        with torch.device(settings.device):
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
        with torch.device(settings.device):
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


def main(argv: list[str]) -> int:
    """Entry point of the child: read the request file, run the problem, write the verdict file."""
    import torch  # noqa: F401  (before the problem's clock starts: start-up is not the problem's time)

    request_path, verdict_path = Path(argv[0]), Path(argv[1])
    request = json.loads(request_path.read_text(encoding="utf-8"))
    settings = ValidateSettings(**request["settings"])
    start_problem_clock(settings.timeout_s)
    verdict = probe(request["source"], settings, Path.cwd())
    verdict_path.write_text(json.dumps(verdict), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
