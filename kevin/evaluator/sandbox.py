"""The judge's process: start one, watch it, end it and everything below it.

`run_worker(job, limits)` starts `python -m kevin.evaluator.worker` (the judge, which never loads
candidate code; kevin.evaluator.worker) in a process session of its own (spawned fresh, or with
KEVIN_WORKER_ZYGOTE=1 forked from kevin.evaluator.zygote, which never touches CUDA), with

  * its own temporary directory as cwd, HOME and TMPDIR, removed afterwards;
  * a scrubbed environment (an allow-list: toolchain and GPU variables only, no tokens or keys);
  * the job (sources, secret seed, channel token) written to a pipe only it holds, never a file;
  * stdin closed; stdout and stderr captured to a file (the runner's output goes there too; the
    runner caps its files with RLIMIT_FSIZE), read back head and tail around a visible marker;
  * a private channel: a pipe inherited as one descriptor, carrying JSON lines (`stage` events,
    then one `result`), each carrying the job's channel token (kevin.evaluator.confine); a line
    without it is dropped and counted (`forged_messages`);
  * a wall-clock deadline per stage (build, correctness, timing, ...), and a host-memory limit on
    the resident set of the judge's session and every process below it (its runners live in
    sessions and PID namespaces of their own), polled while it runs.

Once its result is in, or it is killed for a deadline or memory, every process below the judge in
the process tree is stopped and killed, then the whole process group, then any process still
carrying this job's sandbox token in its environment. The judge ends its runners itself (each in a
PID namespace that dies as a whole) and dies with this supervisor (PR_SET_PDEATHSIG), its runners
with it.

What this does not protect against: network access from the judge (the runner's is denied by its
lock-down), and a judge that hangs in the driver past the kill (the GPU context is then the
machine's problem). The candidate never runs in this process or the judge's.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kevin.evaluator import cores, zygote
from kevin.evaluator.confine import authentic
from kevin.evaluator.cores import CPU_SEAT_VARIABLE
from kevin.evaluator.cores import VARIABLE as CORES_VARIABLE
from kevin.evaluator.fastbuild import TOOLCHAIN_VARIABLE
from kevin.evaluator.probes import CONTROL_PROFILER_VARIABLE, TRACE_AFTER_TIMING_VARIABLE
from kevin.evaluator.procfs import descendants, kill_descendants
from kevin.evaluator.result import truncate_middle
from kevin.evaluator.spares import BOOT_VARIABLE, SparePool, boot_spec, pool_key
from kevin.evaluator.spawn import FORK_VARIABLE

PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])

# Environment variables a worker may inherit: toolchains, GPU selection and the NVLink-multicast
# switches the GPU machines require. Everything else (tokens, keys, proxies) stays behind.
ENV_ALLOW = (
    "PATH",
    "LANG",
    "LC_ALL",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDA_VISIBLE_DEVICES",
    "TORCH_CUDA_ARCH_LIST",
    "LD_LIBRARY_PATH",
    "CC",
    "CXX",
    "MAX_JOBS",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "NCCL_NVLS_ENABLE",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST",
    "NVSHMEM_DISABLE_NVLS",
    "CUDA_MODULE_LOADING",
    "OMP_NUM_THREADS",
    "TRITON_PTXAS_PATH",
    "TRITON_CACHE_DIR",
    TOOLCHAIN_VARIABLE,  # kevin.evaluator.fastbuild.toolchain_root: the worker's broker builds there
    CORES_VARIABLE,  # kevin.evaluator.cores: the GPUs whose timing cores a judge keeps off
    CPU_SEAT_VARIABLE,  # kevin.evaluator.cores: `free` leaves a CPU timing's processes unpinned
    FORK_VARIABLE,  # kevin.evaluator.spawn: 0 executes every runner afresh instead of forking it
    CONTROL_PROFILER_VARIABLE,  # kevin.evaluator.probes: 1 warms the control runners' profiler too
    TRACE_AFTER_TIMING_VARIABLE,  # kevin.evaluator.probes: 1 traces the candidate after its timing
)

TOKEN_VARIABLE = "KEVIN_SANDBOX_TOKEN"


@dataclass(frozen=True)
class Limits:
    stage_timeouts_s: dict[str, float] = field(
        default_factory=lambda: {
            "setup": 120.0,
            "compile": 600.0,
            "wait_gpu": 3600.0,
            "inputs": 300.0,
            "correctness": 120.0,
            "timing": 180.0,
            "reference": 120.0,
            "baseline": 300.0,
            "calibrate": 120.0,
            "done": 30.0,
        }
    )
    """Wall-clock deadline per stage, seconds; an unknown stage gets `default_timeout_s`."""
    default_timeout_s: float = 120.0
    host_memory_bytes: int = 64 * 2**30
    """Resident memory of the worker and all its children together."""
    max_file_bytes: int = 64 * 2**20
    """RLIMIT_FSIZE in the worker: no single file (log, build output) grows past this."""
    log_chars: int = 6000
    """Characters of captured stdout/stderr kept (head and tail)."""

    def timeout_for(self, stage: str) -> float:
        return float(self.stage_timeouts_s.get(stage, self.default_timeout_s))


@dataclass
class WorkerOutcome:
    result: dict[str, Any] | None
    """The worker's `result` message; None when it died or was killed before sending one."""
    last_stage: str
    returncode: int | None
    killed_for: str = ""
    """`timeout` or `memory` when we killed it; empty otherwise."""
    elapsed_s: float = 0.0
    log: str = ""
    leftover_processes: int = 0
    """Processes still running (not exiting) after the worker ended, killed by us: `left_processes`."""
    leftovers: list[str] = field(default_factory=list)
    """Every process found, exiting ones too, as `pid name state why` (why: below the worker, in
    its session or group, or carrying its token): the evidence behind `left_processes`."""
    peak_rss_bytes: int = 0
    stage_log: list[tuple[str, float]] = field(default_factory=list)
    forged_messages: int = 0
    """Lines on the channel without the job's token: written by the candidate, never by kevin."""

    @property
    def signal_name(self) -> str:
        if self.returncode is not None and self.returncode < 0:
            try:
                return signal.Signals(-self.returncode).name
            except ValueError:
                return f"signal {-self.returncode}"
        return ""


def scrubbed_env(workdir: Path, token: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: os.environ[k] for k in ENV_ALLOW if k in os.environ}
    python_path = [PACKAGE_PARENT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env.update(
        HOME=str(workdir),
        TMPDIR=str(workdir),
        PYTHONPATH=os.pathsep.join(python_path),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONUNBUFFERED="1",
        PYTHONNOUSERSITE="1",
        # What the runners need from their start (kevin.evaluator.worker.harness.launch_runner sets
        # it for them too): a runner forked from this worker (kevin.evaluator.spawn, fork mode) has
        # the torch this worker imported, whose libraries may have read it when they were loaded.
        TEARDOWN_CUPTI="1",
        **{TOKEN_VARIABLE: token},
    )
    if extra:
        env.update(extra)
    return env


@dataclass
class StartedWorker:
    """A worker process waiting for its job (it boots first: kevin.evaluator.spares): a Popen, or a
    kevin.evaluator.zygote.ZygoteChild."""

    process: Any
    workdir: Path
    token: str
    read_fd: int
    job_write: int
    log_path: Path
    niced: bool = False
    """Booted ahead at SPARE_NICENESS (its session's autogroup), to be put back when its job comes."""

    def alive(self) -> bool:
        return self.process.poll() is None

    def discard(self) -> None:
        """End a worker that will never get a job, and remove what it had."""
        _kill_everything(self.process.pid, self.token)
        self.process.wait()
        for fd in (self.read_fd, self.job_write):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self.workdir, ignore_errors=True)


SPARE_NICENESS = 10
"""The scheduler weight of a worker booted ahead of its job (its session's autogroup: the worker and
its two runners), until its job comes: its boot (the judge importing torch, seconds of CPU, and
its two runners, forked from it since session 27: executed afresh, each imported torch too) is work
for later. On the CPU back end the host is the device a timing measures: at nice 0 a
batch's spares took whole time slices from the runner being timed (session 25, 2 cores, `--jobs
2`: a 1.1 ms C++ kernel timed at 2.4-3.8 ms while the next two spares booted). On a GPU back end
they took the cores from the jobs of now: session 26's H200 run started a step's 16 replacement
spares (48 processes importing torch) beside that step's builds and runners, whose own runners then
took 45-110 s to be ready. There a spare's device work (CUDA contexts, under the device lock
shared, which timings wait for) is done at full weight: the worker puts its session back first
(kevin.evaluator.worker.__main__.boot_up)."""


def start_worker(
    spec: dict[str, Any],
    *,
    workdir_root: str | None = None,
    env_extra: dict[str, str] | None = None,
    ahead: bool = False,
) -> StartedWorker:
    """Start a worker that boots for `spec` (spares.boot_spec) and then waits for its job; `ahead`:
    a spare, booted at SPARE_NICENESS."""
    workdir = Path(tempfile.mkdtemp(prefix="kevin-job-", dir=workdir_root))
    token = secrets.token_hex(16)
    log_path = workdir / "worker.log"
    read_fd, write_fd = os.pipe()
    job_read, job_write = os.pipe()
    env = scrubbed_env(workdir, token, {**(env_extra or {}), BOOT_VARIABLE: json.dumps(spec)})
    try:
        with open(log_path, "wb") as log_file:
            process: Any = _forked_worker(env, workdir, log_file.fileno(), job_read, write_fd)
            if process is None:
                process = subprocess.Popen(
                    [sys.executable, "-m", "kevin.evaluator.worker", str(job_read), str(write_fd)],
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    cwd=workdir,
                    env=env,
                    start_new_session=True,
                    pass_fds=(write_fd, job_read),
                    close_fds=True,
                )
    except BaseException:
        for fd in (read_fd, write_fd, job_read, job_write):
            os.close(fd)
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    os.close(write_fd)
    os.close(job_read)
    niced = ahead and cores.nicer_session(process.pid, SPARE_NICENESS) == "set"
    return StartedWorker(process, workdir, token, read_fd, job_write, log_path, niced)


def _forked_worker(env: dict[str, str], workdir: Path, log_fd: int, job_read: int, write_fd: int) -> Any:
    """The worker forked from this process's zygote (kevin.evaluator.zygote) when KEVIN_WORKER_ZYGOTE=1,
    else None (or None with a warning, once, when the zygote cannot start: executed afresh then)."""
    if not zygote.enabled():
        return None
    try:
        base = {k: v for k, v in env.items() if k not in (TOKEN_VARIABLE, BOOT_VARIABLE)}
        process = zygote.shared(dict(base, HOME=tempfile.gettempdir(), TMPDIR=tempfile.gettempdir()))
        return process.fork(["{0}", "{1}"], [job_read, write_fd], env, str(workdir), log_fd)
    except (OSError, RuntimeError) as exc:
        if not _ZYGOTE_WARNED:
            _ZYGOTE_WARNED.append(True)
            print(f"kevin: workers start afresh (the worker zygote failed: {exc})", file=sys.stderr)
        return None


_ZYGOTE_WARNED: list[bool] = []


def run_worker(
    job: dict[str, Any],
    limits: Limits,
    *,
    workdir_root: str | None = None,
    env_extra: dict[str, str] | None = None,
    keep_workdir: bool = False,
    on_result: Callable[[WorkerOutcome], None] | None = None,
    spares: SparePool | None = None,
) -> WorkerOutcome:
    """Run one job in a sandboxed worker and collect what it reports: a spare from `spares` already
    booted for this job's spec when there is one, else a fresh worker. `on_result`, when given,
    sees the outcome of a worker that sent a result while that worker still lives (its locks still
    held), before the worker and everything below it are killed."""
    channel_token = secrets.token_hex(32)
    job = dict(
        job,
        max_file_bytes=limits.max_file_bytes,
        area_bytes=limits.host_memory_bytes // 2,
        channel_token=channel_token,
    )
    spec = boot_spec(job)

    def start(ahead: bool = False) -> StartedWorker:
        return start_worker(spec, workdir_root=workdir_root, env_extra=env_extra, ahead=ahead)

    key = pool_key(spec, workdir_root, env_extra)
    worker = spares.take(key, lambda: start(ahead=True)) if spares is not None else None
    job["spare"] = worker is not None
    worker = worker or start()
    if worker.niced:  # its job is now: back to the weight of every other job
        job["spare_weight"] = cores.nicer_session(worker.process.pid, 0)
    started = time.monotonic()
    process = worker.process
    try:
        # The job (secret seed, channel token) travels on a pipe only this worker holds, never a file.
        _send_job(worker.job_write, job)
        worker.job_write = -1
        try:
            outcome = _supervise(process, worker.read_fd, limits, channel_token)
        except BaseException:
            # Interrupted (a signal, a test's timeout): the worker must not outlive its supervisor.
            _kill_everything(process.pid, worker.token)
            process.wait()
            raise
        if on_result is not None and outcome.result is not None:
            on_result(outcome)
        outcome.leftovers, outcome.leftover_processes = _kill_everything(process.pid, worker.token)
        process.wait()
        if outcome.returncode is None:
            outcome.returncode = process.returncode
        outcome.elapsed_s = time.monotonic() - started
        outcome.log = _read_log(worker.log_path, limits.log_chars)
        return outcome
    finally:
        if worker.job_write >= 0:
            os.close(worker.job_write)
        os.close(worker.read_fd)
        if not keep_workdir:
            shutil.rmtree(worker.workdir, ignore_errors=True)


def _send_job(fd: int, job: dict[str, Any]) -> None:
    """Write the job and close the pipe; a worker that died before reading it is seen by the
    supervisor as a death, not raised here."""
    try:
        with open(fd, "wb", closefd=True) as pipe:
            pipe.write(json.dumps(job).encode())
    except BrokenPipeError:
        pass


def _supervise(process: Any, read_fd: int, limits: Limits, channel_token: str) -> WorkerOutcome:
    stage = "setup"
    deadline = time.monotonic() + limits.timeout_for(stage)
    stage_log: list[tuple[str, float]] = [(stage, 0.0)]
    start = time.monotonic()
    result: dict[str, Any] | None = None
    buffer = b""
    killed_for = ""
    peak_rss = 0
    next_memory_check = 0.0
    eof = False
    forged = 0
    while True:
        now = time.monotonic()
        if not eof:
            ready, _, _ = select.select([read_fd], [], [], 0.05)
            if ready:
                chunk = os.read(read_fd, 1 << 16)
                if not chunk:
                    eof = True
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    message = _parse(line)
                    if message is None or not authentic(message, channel_token):
                        forged += bool(line.strip())
                        continue
                    if message.get("event") == "stage" and result is None:
                        stage = str(message.get("stage", stage))
                        deadline = time.monotonic() + limits.timeout_for(stage)
                        stage_log.append((stage, round(time.monotonic() - start, 3)))
                    elif message.get("event") == "result" and result is None:
                        result = message.get("result")
        else:
            time.sleep(0.02)
        # The worker waits to be killed after its result (its orphans must stay below it).
        if result is not None or (process.poll() is not None and eof):
            break
        if now > deadline:
            killed_for = "timeout"
            break
        if now >= next_memory_check:
            rss = _session_memory_bytes(process.pid, limits.host_memory_bytes)
            peak_rss = max(peak_rss, rss)
            if rss > limits.host_memory_bytes:
                killed_for = "memory"
                break
            next_memory_check = now + 0.2
    if killed_for:
        # A result sent just before the kill is not trusted: the stage deadline had passed.
        result = None
    return WorkerOutcome(
        result=result if isinstance(result, dict) else None,
        last_stage=stage,
        returncode=process.poll(),
        killed_for=killed_for,
        peak_rss_bytes=peak_rss,
        stage_log=stage_log,
        forged_messages=forged,
    )


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def _proc_stat(pid: int) -> tuple[int, int] | None:
    """(process group, session) of a running process (procfs.running); None for one gone or whose
    every thread has begun to exit."""
    from kevin.evaluator.procfs import running, stat_fields

    fields = stat_fields(pid)
    if fields is None or not running(pid, fields):
        return None
    return int(fields[2]), int(fields[3])


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _session_memory_bytes(session: int, limit: int) -> int:
    """Memory of the worker's session and of every process below the worker (its runners live in PID
    namespaces of their own, but stay below it in the process tree). Resident sizes summed (statm,
    ~10 us a process), and where that passes `limit`, proportional set sizes instead (smaps_rollup,
    ~1 ms a process; a page shared by n processes counts 1/n in each): runners forked from their
    judge are not charged again for the judge's pages they share (s32: on the GPU machine the judge's
    CUDA torch and profiler modules, counted three times, passed a 3 GiB limit)."""
    page = os.sysconf("SC_PAGE_SIZE")
    below = set(descendants(session))
    pids = []
    for pid in _pids():
        stat = _proc_stat(pid)
        if stat is not None and (stat[1] == session or pid in below):
            pids.append(pid)
    resident = sum(_resident_bytes(pid, page) for pid in pids)
    if resident <= limit:
        return resident
    return sum(_proportional_bytes(pid) or _resident_bytes(pid, page) for pid in pids)


def _resident_bytes(pid: int, page: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as handle:
            return int(handle.read().split()[1]) * page
    except (OSError, IndexError, ValueError):
        return 0


def _proportional_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as handle:
            for line in handle:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return 0


def _has_token(pid: int, token: str) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return f"{TOKEN_VARIABLE}={token}".encode() in handle.read().split(b"\0")
    except OSError:
        return False


def _kill_everything(session: int, token: str) -> tuple[list[str], int]:
    """Kill every process below the worker, its session and every process carrying its token.
    Returns those that were still there besides the worker itself, each as `pid name state why`,
    and how many of them were not already exiting: a process whose exit has begun (a runner the
    worker killed, still unmapping its memory) was not left running, and counts for nothing."""
    from kevin.evaluator.procfs import running, stat_fields

    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(session, signal.SIGSTOP)  # the worker forks no more while its tree is walked
    found: dict[int, tuple[str, bool]] = {}

    def note(pid: int, why: str) -> None:
        if pid in found:
            return
        fields = stat_fields(pid)
        state = fields[0].decode(errors="replace") if fields else "gone"
        ending = fields is None or not running(pid, fields)
        found[pid] = (f"{pid} {_comm(pid)} {state}{' exiting' if ending else ''} {why}", ending)

    kill_descendants(session, seen=lambda pid: note(pid, "below the worker"))
    for _ in range(3):
        seen = 0
        for pid in _pids():
            if pid == os.getpid():
                continue
            stat = _proc_stat(pid)
            if stat is None:
                continue
            if stat[1] == session or stat[0] == session or _has_token(pid, token):
                if pid != session:
                    seen += 1
                    note(
                        pid,
                        "in its session" if stat[1] == session or stat[0] == session else "with its token",
                    )
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        if not seen:
            break
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(session, signal.SIGKILL)  # the worker itself, stopped above, whatever its session
    entries = [found[pid] for pid in sorted(found)]
    return [text for text, _ in entries], sum(not ending for _, ending in entries)


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", "rb") as handle:
            return handle.read().decode(errors="replace").strip().replace(" ", "_") or "?"
    except OSError:
        return "?"


def _read_log(path: Path, limit_chars: int) -> str:
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            if size <= 4 * limit_chars:
                text = handle.read().decode(errors="replace")
            else:
                head = handle.read(2 * limit_chars).decode(errors="replace")
                handle.seek(size - 2 * limit_chars)
                tail = handle.read().decode(errors="replace")
                text = (
                    head + f"\n[... {size - 4 * limit_chars} bytes of output truncated by kevin ...]\n" + tail
                )
    except OSError:
        return ""
    return truncate_middle(text, limit_chars)
