"""Profile one candidate: ncu where it is installed, torch.profiler otherwise -> a `ProfileReport`.

Flow: the problem and candidate sources go to a fresh temporary folder; `target_command` runs
kevin.evaluator.profiling.target on them in a child process (its own session, killed whole at the
deadline), under `ncu_command` (tool `ncu`) or with torch.profiler inside (tool `torch`). `auto`
takes ncu for a GPU back end when `find_ncu` finds it, and falls back to torch.profiler when ncu
gives no report (no permission to read counters, an unsupported GPU), saying so in the summary.
While the child runs, the caller's `exclusive` lock is held (kevin's device lock: ncu replays
kernels and no timing may overlap them, nor they a timing).

A bad candidate is data: its failure comes back as a report with `blame="candidate"`; a profiler
that fails or times out gives `blame="infrastructure"`. Neither raises. The judge's verdict never
depends on this module: it runs after the verdict, on the candidate's source only.

What this does not protect against: the target is not confined (kevin.evaluator.profiling.target);
its builds go to a cache of their own (`<cache>/profile-builds`), so a hostile candidate cannot
poison the judge's build cache from here, but it runs with the caller's powers.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kevin.evaluator.evaluate import BACKENDS, GPU_BACKENDS, EvalConfig, device_lock
from kevin.evaluator.profiling import ncu, summary
from kevin.evaluator.result import truncate_middle
from kevin.evaluator.sandbox import PACKAGE_PARENT

TOOLS = ("auto", "ncu", "torch")
FAILURE_MARKER = "kevin-profile: candidate failed:"
NCU_FALLBACK_PATHS = ("/usr/local/cuda/bin/ncu",)
ERROR_CHARS = 600


@dataclass(frozen=True)
class ProfileConfig:
    """How to profile one candidate."""

    backend: str = "cuda"
    """`cuda` or `triton` (a GPU: ncu or torch.profiler's kernels), `cpp` (torch.profiler's CPU ops)."""
    tool: str = "auto"
    """`ncu`, `torch`, or `auto`: ncu for a GPU back end when installed, else torch.profiler."""
    forward_calls: int = 3
    """Profiled forward calls; per-forward times divide by it."""
    warmup_calls: int = 2
    """Unprofiled forward calls before (first-call allocations, lazy compilation)."""
    timeout_s: float = 600.0
    """Deadline for the whole child (build, warm-up, profiling, ncu's replays); then infrastructure."""
    max_chars: int = 1200
    """Budget of the summary text (~4 characters a token)."""
    launch_count: int = 200
    """Most kernel launches ncu profiles (each is replayed once per counter pass)."""
    ncu_path: str | None = None
    """ncu's executable; None: `ncu` on PATH, else /usr/local/cuda/bin/ncu."""
    cache_dir: str | None = None
    """kevin's cache root (default ~/.cache/kevin); profile builds go to its `profile-builds`."""

    def __post_init__(self) -> None:
        checks = [
            (self.backend in BACKENDS, f"backend must be one of {BACKENDS}, got {self.backend!r}"),
            (self.tool in TOOLS, f"tool must be one of {TOOLS}, got {self.tool!r}"),
            (self.forward_calls >= 1, f"forward_calls must be at least 1, got {self.forward_calls}"),
            (self.warmup_calls >= 0, f"warmup_calls must be 0 or more, got {self.warmup_calls}"),
            (self.timeout_s > 0, f"timeout_s must be positive seconds, got {self.timeout_s}"),
            (
                self.max_chars >= summary.MIN_CHARS,
                f"max_chars must be at least {summary.MIN_CHARS}, got {self.max_chars}",
            ),
            (self.launch_count >= 1, f"launch_count must be at least 1, got {self.launch_count}"),
            (
                not (self.tool == "ncu" and self.backend not in GPU_BACKENDS),
                "tool ncu needs a GPU back end (cuda or triton); use tool torch for cpp",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)

    @property
    def build_cache(self) -> Path:
        return EvalConfig(backend=self.backend, cache_dir=self.cache_dir).cache_root / "profile-builds"


@dataclass
class ProfileReport:
    """One candidate's profile."""

    tool: str
    """`ncu` or `torch`: what produced the kernels (the last tool tried when none did)."""
    summary: str = ""
    """The text a model reads (kevin.evaluator.profiling.summary); "" when profiling failed."""
    kernels: list[summary.KernelStats] = field(default_factory=list)
    error: str = ""
    """Why there is no profile (short); "" when there is one."""
    blame: str = "none"
    """`none`, `candidate` (it failed to build or run) or `infrastructure` (the profiler failed)."""
    raw: str = ""
    """The profiler's own output: ncu's CSV, or torch.profiler's table as JSON."""

    @property
    def ok(self) -> bool:
        return not self.error

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "summary": self.summary,
            "kernels": [kernel.to_dict() for kernel in self.kernels],
            "error": self.error,
            "blame": self.blame,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def find_ncu(explicit: str | None = None) -> str | None:
    """ncu's path: `explicit` when it is an executable, else `ncu` on PATH, else CUDA's usual place."""
    if explicit:
        return explicit if shutil.which(explicit) else None
    found = shutil.which("ncu")
    if found:
        return found
    return next((path for path in NCU_FALLBACK_PATHS if os.access(path, os.X_OK)), None)


def target_command(
    python: str,
    problem: str,
    candidate: str,
    *,
    backend: str,
    tool: str,
    forward_calls: int,
    warmup_calls: int,
    cache_dir: str,
    out: str | None = None,
) -> list[str]:
    """argv of kevin.evaluator.profiling.target."""
    command = [python, "-m", "kevin.evaluator.profiling.target", problem, candidate]
    command += ["--backend", backend, "--tool", tool]
    command += ["--forward-calls", str(forward_calls), "--warmup", str(warmup_calls)]
    command += ["--cache-dir", cache_dir]
    if out is not None:
        command += ["--out", out]
    return command


def _target(folder: Path, config: ProfileConfig, tool: str, out: str | None = None) -> list[str]:
    return target_command(
        sys.executable,
        str(folder / "problem.py"),
        str(folder / "candidate.py"),
        backend=config.backend,
        tool=tool,
        forward_calls=config.forward_calls,
        warmup_calls=config.warmup_calls,
        cache_dir=str(config.build_cache),
        out=out,
    )


def _run(command: list[str], timeout_s: float, cwd: Path) -> tuple[int | None, str, str]:
    """(exit code or None at the deadline, stdout, stderr). The child gets a session of its own so the
    deadline kills ncu, the target and any build they started."""
    python_path = [PACKAGE_PARENT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(python_path))
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
        return process.returncode, stdout, stderr
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        return None, stdout, stderr


def _failure(tool: str, code: int | None, stderr: str, timeout_s: float) -> ProfileReport | None:
    """The report for a child that did not finish its job; None when it did."""
    for line in reversed(stderr.splitlines()):
        if line.startswith(FAILURE_MARKER):
            return ProfileReport(tool, error=line[len(FAILURE_MARKER) :].strip(), blame="candidate")
    if code is None:
        return ProfileReport(
            tool, error=f"{tool} did not finish within {timeout_s:g} s", blame="infrastructure"
        )
    if code != 0:
        tail = truncate_middle(stderr.strip(), ERROR_CHARS) or "(no output)"
        return ProfileReport(tool, error=f"{tool} exited with {code}: {tail}", blame="infrastructure")
    return None


def _profile_ncu(folder: Path, config: ProfileConfig, ncu_path: str) -> ProfileReport:
    report_file = folder / "ncu.csv"
    program = _target(folder, config, "ncu")
    command = ncu.ncu_command(ncu_path, program, log_file=str(report_file), launch_count=config.launch_count)
    code, stdout, stderr = _run(command, config.timeout_s, folder)
    raw = report_file.read_text(errors="replace") if report_file.exists() else ""
    if '"Kernel Name"' not in raw and '"Kernel Name"' in stdout:
        raw = stdout  # an ncu whose --log-file took only its own messages printed the report here
    failed = _failure("ncu", code, stderr + "\n" + raw, config.timeout_s)
    if failed is not None:
        failed.raw = raw
        return failed
    try:
        launches = ncu.parse_csv(raw)
    except ncu.NcuParseError as exc:
        tail = truncate_middle(raw.strip(), ERROR_CHARS)
        return ProfileReport("ncu", error=f"{exc}; ncu said: {tail}", blame="infrastructure", raw=raw)
    kernels = summary.aggregate(launches)
    text = summary.summarize(
        kernels, tool="ncu", forward_calls=config.forward_calls, max_chars=config.max_chars
    )
    return ProfileReport("ncu", text, kernels, raw=raw)


def _profile_torch(folder: Path, config: ProfileConfig, note: str = "") -> ProfileReport:
    table_file = folder / "torch.json"
    command = _target(folder, config, "torch", out=str(table_file))
    code, _, stderr = _run(command, config.timeout_s, folder)
    failed = _failure("torch", code, stderr, config.timeout_s)
    if failed is not None:
        return failed
    raw = table_file.read_text()
    kernels = [
        summary.KernelStats(summary.short_name(row["name"]), int(row["launches"]), float(row["total_ns"]))
        for row in json.loads(raw)
    ]
    on_gpu = config.backend in GPU_BACKENDS
    text = summary.summarize(
        kernels,
        tool="torch.profiler",
        forward_calls=config.forward_calls,
        max_chars=config.max_chars,
        device="GPU" if on_gpu else "CPU",
        note=note or ("Times only: no ncu here." if on_gpu else "CPU back end: op times only."),
    )
    return ProfileReport("torch", text, kernels, raw=raw)


def profile(
    problem_source: str,
    candidate_source: str,
    config: ProfileConfig,
    *,
    exclusive: Callable[[], AbstractContextManager[Any]] | None = None,
) -> ProfileReport:
    """Profile `candidate_source` (ModelNew) on `problem_source`'s inputs (module docstring)."""
    on_gpu = config.backend in GPU_BACKENDS
    ncu_path = find_ncu(config.ncu_path) if on_gpu and config.tool != "torch" else None
    if config.tool == "ncu" and ncu_path is None:
        where = config.ncu_path or "ncu on PATH or in /usr/local/cuda/bin"
        return ProfileReport("ncu", error=f"ncu not found ({where})", blame="infrastructure")
    with tempfile.TemporaryDirectory(prefix="kevin-profile-") as name:
        folder = Path(name)
        (folder / "problem.py").write_text(problem_source)
        (folder / "candidate.py").write_text(candidate_source)
        with exclusive() if exclusive is not None else contextlib.nullcontext():
            if ncu_path is None:
                return _profile_torch(folder, config)
            report = _profile_ncu(folder, config, ncu_path)
            if report.ok or report.blame == "candidate" or config.tool == "ncu":
                return report
            note = f"Times only: ncu gave no report ({truncate_middle(report.error, 160)})."
            fallback = _profile_torch(folder, config, note=note)
            if not fallback.ok:
                fallback.error = f"{report.error}; then torch.profiler: {fallback.error}"
            return fallback


def feedback_profiler(
    backend: str, max_chars: int, cache_dir: str | None = None
) -> Callable[[str, str], str]:
    """`(problem_source, candidate_source) -> summary` for the RL environment's feedback when the
    policy's kernels are trusted (kevin.rl.profiles.external_profiler: the child is not confined):
    "" when profiling failed (the feedback then says nothing about it), holding kevin's device lock
    (default lock folder and slots: the `kevin eval` defaults) around the child."""
    config = ProfileConfig(backend=backend, max_chars=max_chars, cache_dir=cache_dir)
    lock = device_lock(EvalConfig(backend=backend))

    def profile_summary(problem_source: str, candidate_source: str) -> str:
        report = profile(problem_source, candidate_source, config, exclusive=lock.exclusive)
        return report.summary if report.ok else ""

    return profile_summary
