"""Start a runner so that it, and everything it ever starts, can be killed as a whole.

`spawn_confined(argv, ..., lock=LockDown(...))` runs `argv` in a PID namespace of its own (with a
fresh /proc in a mount namespace) whose init is kevin.evaluator.nsinit, applies
`kevin.evaluator.confine.lock_down(lock)` just before the target's exec (so every thread the
runner ever has is under it), and returns a `ConfinedProcess`. Without the privilege for
namespaces it degrades explicitly (`pid_namespace=False`, `reason`, one warning per process) to a
subreaper that kills the subtree. Used by the judge (kevin.evaluator.worker.handle).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterable
from typing import Any

from kevin.evaluator.confine import LockDown, _package_root, _warn_once, _write
from kevin.evaluator.procfs import parent_of


class ConfinedProcess:
    """A process started by `spawn_confined`, and everything it ever starts.

    pid            the target's pid as the spawner sees it (the namespace's init's, in the rare
                   case the target ended before it could be found)
    init_pid       the namespace's init (0 without a namespace); supervisor_pid: nsinit's S
    pid_namespace  whether the target runs in a PID namespace of its own; reason: why not, or how
    proc           "fresh" when the namespace has its own /proc, else why not
    lockdown       what `lock_down` applied before the target's exec (None without `lock`)
    returncode     the target's: its exit code, or -N for signal N (-9 after `kill`)
    """

    def __init__(self, popen: Any, life: int, report: dict[str, Any]) -> None:
        self._popen, self._life = popen, life
        self.stdin, self.stdout, self.stderr = popen.stdin, popen.stdout, popen.stderr
        self.supervisor_pid = popen.pid
        self.pid = int(report.get("pid", popen.pid))
        self.init_pid = int(report.get("init", 0))
        self.pid_namespace = report.get("namespace", "none") != "none"
        self.reason = report.get("reason", "")
        self.proc = report.get("proc", "")
        self.lockdown: dict[str, Any] | None = report.get("lock")

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    def _release(self) -> None:
        if self._life >= 0 and self._popen.returncode is not None:
            os.close(self._life)
            self._life = -1

    def poll(self) -> int | None:
        code = self._popen.poll()
        self._release()
        return code

    def wait(self, timeout: float | None = None) -> int:
        """The target's status once the whole namespace is gone (subprocess.TimeoutExpired past
        `timeout`)."""
        code = self._popen.wait(timeout)
        self._release()
        return code

    def kill(self, grace: float = 5.0) -> None:
        """Kill the target and everything it started; return once they are gone (the supervisor
        is killed outright if it has not finished within `grace` seconds)."""
        import subprocess

        if self._popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self._popen.send_signal(signal.SIGTERM)  # nsinit SIGKILLs the namespace's init
            try:
                self._popen.wait(grace)
            except subprocess.TimeoutExpired:
                self._popen.kill()  # its init then dies by PR_SET_PDEATHSIG, and the namespace
                self._popen.wait()
                # ... but not at once: until then they are the spawner's (a subreaper's) orphans,
                # alive, and a walk of its tree would take them for processes left behind.
                for pid in (self.init_pid, self.pid):
                    _end(pid, ORPHAN_WAIT_S)
        self._release()

    def __enter__(self) -> ConfinedProcess:
        return self

    def __exit__(self, *_: object) -> None:
        self.kill()


ORPHAN_WAIT_S = 5.0


def _end(pid: int, timeout: float) -> None:
    """When `pid` is this process's child (an orphan of the killed supervisor, handed to this
    subreaper), SIGKILL it and reap it, waiting up to `timeout` seconds. Anything else is left
    alone: its pid may already be another process's."""
    import time

    info = parent_of(pid) if pid > 0 else None
    if info is None or info[0] != os.getpid():
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        time.sleep(0.01)


def spawn_confined(
    argv: list[str],
    *,
    pass_fds: Iterable[int] = (),
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    stdin: Any = None,
    stdout: Any = None,
    stderr: Any = None,
    lock: LockDown | None = None,
    pid_namespace: bool = True,
    fresh_proc: bool = True,
    startup_timeout: float = 60.0,
    target: Callable[[], int | None] | None = None,
) -> ConfinedProcess:
    """Start `argv` (execvp: PATH is searched) so that it and everything it ever starts can be killed
    as a whole: in a PID namespace of its own whose init is kevin.evaluator.nsinit (see there), with
    a fresh /proc in a mount namespace of its own (`fresh_proc`: without it the target would see the
    spawner's /proc, where its own pids mean other processes). The namespace dies when the target
    exits, on `kill()`, and when the spawner dies.

    `lock` applies `lock_down(lock)` in the target just before its exec, so that every thread the
    runner ever has (torch's pools, the CUDA driver's) is under it; the result is `.lockdown`.
    Without privilege a user namespace holds the PID namespace; where neither can be made, the
    target runs under a subreaper that kills its whole subtree (`pid_namespace=False` and `reason`
    say so, and one warning per process is logged). Raises OSError when argv cannot be executed.
    Spawn from a long-lived thread: from the main thread nsinit is also tied to it by
    PR_SET_PDEATHSIG; from any thread, the end of a pipe only this process holds stops it.

    `target` (fork mode): instead of executing `argv`, the target is a fork of this process that
    calls `target()` and exits with what it returns, so that it starts with every module this process
    has imported (a runner: torch, seconds of CPU each; `forkable` says when that is safe). It
    keeps only `pass_fds` and the standard streams; `env` and `cwd` are applied before the lock.
    The supervisor and init then continue as nsinit alone (no copy of this process's memory).
    `argv` only names the target in errors."""
    import marshal
    import subprocess
    import threading

    fds = [int(fd) for fd in pass_fds]
    report_read, report_write = os.pipe()
    life_read, life_write = os.pipe()
    internal = [report_write, life_read]
    lock_read = -1
    if lock is not None:
        lock_read, lock_write = os.pipe()
        _write(lock_write, marshal.dumps(dict(lock._asdict())))  # far below a pipe's buffer
        os.close(lock_write)
        internal.append(lock_read)
    main_thread = threading.current_thread() is threading.main_thread()
    command = [
        sys.executable, "-I", "-S", os.path.join(os.path.dirname(os.path.abspath(__file__)), "nsinit.py"),
        f"--spawner={os.getpid()}", f"--report={report_write}", f"--life={life_read}", f"--lock={lock_read}",
        f"--fds={','.join(map(str, fds))}", f"--pdeathsig={int(main_thread)}",
        f"--namespace={int(pid_namespace)}", f"--proc={int(fresh_proc)}", f"--root={_package_root()}",
        "--", *argv,
    ]  # fmt: skip
    try:
        if target is None:
            popen: Any = subprocess.Popen(
                command, pass_fds=(*internal, *fds), env=env, cwd=cwd, stdin=stdin, stdout=stdout, stderr=stderr
            )
        else:
            popen = _fork_supervisor(command, (*internal, *fds), env, cwd, (stdin, stdout, stderr), target)
    except BaseException:
        os.close(report_read)
        os.close(life_write)
        raise
    finally:
        for fd in internal:
            os.close(fd)
    try:
        report = _read_report(report_read, startup_timeout)
    except BaseException:
        popen.kill()
        popen.wait()
        os.close(life_write)
        raise
    finally:
        os.close(report_read)
    process = ConfinedProcess(popen, life_write, report)
    failure = report.get("failure")
    if failure:
        process.kill()
        if failure.startswith("exec "):
            code = int(failure.split()[1])
            raise OSError(code, os.strerror(code), argv[0])
        raise RuntimeError(f"spawn_confined({argv[0]}): {failure}")
    if pid_namespace and not process.pid_namespace:
        _warn_once("pid_namespace", f"spawn_confined: no PID namespace ({process.reason}); "
                   "the runner's tree is killed by walking it, which a process that kills its supervisor escapes")  # fmt: skip
    elif fresh_proc and process.pid_namespace and not process.proc.startswith("fresh"):
        _warn_once("proc", f"spawn_confined: the namespace keeps the spawner's /proc ({process.proc})")
    elif process.pid_namespace and process.proc.startswith("fresh ("):
        _warn_once("proc-ro", f"spawn_confined: /proc {process.proc}")
    for note in (process.lockdown or {}).get("degraded", []):
        _warn_once(note.split(":")[0], f"lock_down: {note}")
    return process


def forkable() -> str:
    """"" when this process may be forked into runners (`spawn_confined(target=...)`), else why not:
    no thread of Python's own may hold a lock the fork would copy held, and no CUDA context may
    exist (a child cannot use its parent's), and the process must not be sealed (`seal_forks`: it
    holds secrets). Native threads are not counted: OpenBLAS (numpy's import starts its pool) stops
    its pool at a fork by its own handler, and a judge at its boot has run no torch operation, so no
    OpenMP pool exists yet. `KEVIN_RUNNER_FORK=0` says no (every runner then starts afresh)."""
    import threading

    if os.environ.get(FORK_VARIABLE, "1") == "0":
        return f"{FORK_VARIABLE}=0"
    if _SEALED:
        return _SEALED[0]
    if threading.active_count() != 1:
        return f"{threading.active_count()} Python threads"
    torch = sys.modules.get("torch")
    if torch is None:
        return "torch is not imported (a fork would save nothing)"
    if torch.cuda.is_initialized():
        return "CUDA is initialized"
    if cuda_driver_started():
        return "the CUDA driver is started"
    return ""


CUDA_ERROR_NOT_INITIALIZED = 3


def cuda_driver_started() -> bool:
    """Whether the CUDA driver has started (cuInit) in this process: a child forked after that cannot
    use CUDA, and torch.cuda.is_initialized does not see a start another library made. The driver's
    library being mapped is not enough: the GPU machine's torch (2.11, CUDA 13) maps libcuda.so at its
    import, and forks of it use CUDA (s28, s30; s32 saw it mapped). Each mapped libcuda is asked
    without loading or starting anything: it is opened with RTLD_NOLOAD, and its cuDeviceGetCount
    answers CUDA_ERROR_NOT_INITIALIZED until cuInit. One that cannot be asked counts as started."""
    import ctypes

    try:
        with open("/proc/self/maps", encoding="utf-8") as handle:
            paths = {line.split()[-1] for line in handle if "/libcuda.so" in line}
    except OSError:
        return False
    for path in sorted(paths):
        ask = None
        for name in (path, "libcuda.so.1"):  # the maps' file, else the driver's soname
            try:
                ask = ctypes.CDLL(name, mode=os.RTLD_NOLOAD | os.RTLD_LAZY).cuDeviceGetCount
                break
            except (OSError, AttributeError):
                continue
        if ask is None:
            return True
        count = ctypes.c_int(0)
        if ask(ctypes.byref(count)) != CUDA_ERROR_NOT_INITIALIZED:
            return True
    return False


FORK_VARIABLE = "KEVIN_RUNNER_FORK"
FORKED_FROM: list[str] = []
"""What this process was forked from instead of being executed ("zygote": a worker forked by
kevin.evaluator.zygote), for its reports."""
_SEALED: list[str] = []


def seal_forks(reason: str) -> None:
    """No runner is forked from this process from now on (`forkable` gives `reason`): a fork copies
    the process's memory, and a judge that has read its job holds its secrets (the input seed, the
    channel's token) from then on."""
    if not _SEALED:
        _SEALED.append(reason)


class _Forked:
    """The supervisor S as a forked child of this process: what ConfinedProcess uses of a Popen."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self.stdin: Any = None
        self.stdout: Any = None
        self.stderr: Any = None

    def _status(self, flags: int) -> int | None:
        if self.returncode is None:
            try:
                done, status = os.waitpid(self.pid, flags)
            except ChildProcessError:  # reaped elsewhere: its status is lost
                done, status = self.pid, 255 << 8
            if done == self.pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def poll(self) -> int | None:
        return self._status(os.WNOHANG)

    def wait(self, timeout: float | None = None) -> int:
        import subprocess
        import time

        if timeout is None:
            code = self._status(0)
            assert code is not None
            return code
        deadline = time.monotonic() + timeout
        delay = 0.0005
        while (code := self.poll()) is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(f"supervisor {self.pid}", timeout)
            time.sleep(min(delay, left))
            delay = min(delay * 2, 0.05)
        return code

    def send_signal(self, number: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, number)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _fork_supervisor(
    command: list[str], keep: tuple[int, ...], env: dict[str, str] | None, cwd: str | None,
    streams: tuple[Any, Any, Any], target: Callable[[], int | None],
) -> _Forked:  # fmt: skip
    """Fork S: in the child, the standard streams (None, DEVNULL, PIPE, a file or a descriptor), the
    descriptors, the directory and the environment as Popen would set them for `command`, then
    nsinit.main with `target` (never returns)."""
    import subprocess
    import warnings

    from kevin.evaluator import nsinit

    for stream in (sys.stdout, sys.stderr):  # nothing buffered here is written twice
        with contextlib.suppress(Exception):
            stream.flush()
    pipes: dict[int, tuple[int, int]] = {}  # standard stream -> (the child's end, ours)
    for number, stream in enumerate(streams):
        if stream is subprocess.PIPE:
            read_end, write_end = os.pipe()
            pipes[number] = (read_end, write_end) if number == 0 else (write_end, read_end)
    with warnings.catch_warnings():
        # Python 3.12 warns of a fork beside native threads (forkable: their libraries handle it).
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid:
        forked = _Forked(pid)
        for number, (theirs, ours) in pipes.items():
            os.close(theirs)
            setattr(forked, ("stdin", "stdout", "stderr")[number], open(ours, "wb" if number == 0 else "rb"))
        return forked
    try:
        handles = [pipes[n][0] if n in pipes else _fileno(stream) for n, stream in enumerate(streams)]
        take_over(handles, keep, cwd, env)
        nsinit.main(command[4:], run=target)  # [python, -I, -S, nsinit.py, --spawner=..., ..., --, argv]
    except BaseException as exc:  # noqa: BLE001 - reported as nsinit would, then gone
        with contextlib.suppress(BaseException):
            report = int(next(arg for arg in command if arg.startswith("--report="))[9:])
            os.write(report, f"error fork: {type(exc).__name__}: {exc}\n".encode())
    os._exit(127)


def take_over(
    handles: list[int | None], keep: Iterable[int], cwd: str | None, env: dict[str, str] | None
) -> None:
    """In a fork, what an exec would have given it: `handles` (None: as inherited) on descriptors
    0-2 and Python's streams fresh on them, only `keep` besides (inheritable), the folder, the
    environment, no temporary folder remembered from the parent. The parent's objects whose
    descriptors are closed here are never collected (gc.freeze): one could close a reused number."""
    import gc
    import tempfile

    from kevin.evaluator import nsinit

    gc.freeze()
    for number, handle in enumerate(handles):
        if handle is not None and handle != number:
            os.dup2(handle, number)
    fresh_streams()
    keep = set(keep)
    nsinit._close_all_but({0, 1, 2, *keep})
    for fd in keep:
        os.set_inheritable(fd, True)
    if cwd is not None:
        os.chdir(cwd)
    if env is not None:
        os.environ.clear()
        os.environ.update(env)
    tempfile.tempdir = None


def fresh_streams() -> None:
    """Python's standard streams on descriptors 0-2, as a fresh interpreter has them (the parent's may
    be anything: a capture, a buffer holding its output), unbuffered as under PYTHONUNBUFFERED."""
    import io

    sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False), write_through=True, errors="backslashreplace"
    )


def _fileno(stream: Any) -> int | None:
    """The descriptor a Popen stream argument names (None: inherit; DEVNULL; a file or descriptor),
    in the forked child."""
    import subprocess

    if stream is None:
        return None
    if stream is subprocess.DEVNULL:
        return os.open(os.devnull, os.O_RDWR)
    return stream if isinstance(stream, int) else stream.fileno()


def _read_report(fd: int, timeout: float) -> dict[str, Any]:
    """nsinit's lines up to `ready`: `key value` pairs; exec/error lines become `failure`."""
    import marshal
    import select
    import time

    deadline = time.monotonic() + timeout
    buffer = b""
    while not buffer.endswith(b"ready\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise TimeoutError(f"the confined process did not start within {timeout} s")
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        buffer += chunk
    report: dict[str, Any] = {}
    for line in buffer.decode(errors="replace").splitlines():
        key, _, value = line.partition(" ")
        if key == "lock":
            report["lock"] = marshal.loads(bytes.fromhex(value))
        elif key in ("exec", "error"):
            report.setdefault("failure", line)
        else:
            report[key] = value
    if "ready" not in report:
        report.setdefault(
            "failure",
            "error the supervisor ended before it was ready: " + buffer.decode(errors="replace")[-300:],
        )
    return report
