"""Workers forked from one process that has imported torch (issue #15, session 27; opt-in).

A worker (the judge, kevin.evaluator.worker) executed afresh imports torch before anything else: a
second of CPU on an idle host, 8-22 s on the H200 while a step's 16 replacement spares boot at
once (session 26). Its runners are forks of it already (kevin.evaluator.spawn, fork mode), so this
import is the last one a candidate pays. With `KEVIN_WORKER_ZYGOTE=1`, `kevin.evaluator.sandbox`
forks workers from a zygote instead: one process per evaluating process, started on first use,
that imports torch and the worker's modules, never CUDA, never a job, and runs no thread.

  service  -> zygote   on a SOCK_SEQPACKET pair only the service holds (nothing below a worker can
                       reach it): the worker's argv tail, environment and folder as JSON, with its
                       descriptors (job pipe, channel, log) and a status socket passed by SCM_RIGHTS
  zygote   -> child    fork; the child leads a session of its own, keeps only its descriptors and
                       the standard ones (log on 1 and 2, /dev/null on 0), takes the environment and
                       folder, and runs the worker's main (never returns)
  zygote   -> service  the child's pid on its status socket, then its wait status when it ends

The service holds each worker by a pidfd (`ZygoteChild`: what the sandbox uses of a Popen). A worker
dies with the zygote (its PR_SET_PDEATHSIG, set by the worker's own main); the zygote kills its
workers and exits when the service's end of the control socket closes, however the service ended.

What a forked worker differs in: /proc/PID/environ shows the zygote's start-up environment, not
the worker's (the sandbox finds a worker by its session; processes it executes carry its token as
before); its address-space layout is the zygote's and its siblings'; its memory starts as a copy of
the zygote's, which holds the environments of earlier requests (their sandbox tokens, never a job
or a channel token: those reach a worker only on its own pipe).
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any

VARIABLE = "KEVIN_WORKER_ZYGOTE"
"""1: workers are forked from a zygote (this module); anything else: executed afresh."""

_MAX_FDS = 8


def enabled() -> bool:
    return os.environ.get(VARIABLE, "0") == "1"


def _send(sock: socket.socket, message: dict[str, Any], fds: list[int]) -> None:
    data = json.dumps(message).encode()
    sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else [])


def _receive(sock: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    data, ancillary, _flags, _address = sock.recvmsg(1 << 20, socket.CMSG_SPACE(_MAX_FDS * 4))
    fds: list[int] = []
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            usable = len(payload) - len(payload) % 4
            fds.extend(array.array("i", payload[:usable]))
    if not data:
        return None, fds
    return json.loads(data), fds


class ZygoteChild:
    """A worker forked by the zygote, held by a pidfd: pid, poll(), wait(), kill(), returncode."""

    def __init__(self, pid: int, status: socket.socket) -> None:
        self.pid = pid
        self._status = status
        self.returncode: int | None = None
        self._pidfd: int | None = None
        with contextlib.suppress(OSError):  # already ended and reaped: its status is on the socket
            self._pidfd = os.pidfd_open(pid)

    def _collect(self, timeout: float | None) -> int | None:
        if self.returncode is not None:
            return self.returncode
        if select.select([self._status], [], [], timeout)[0]:
            try:
                data = self._status.recv(64)
            except OSError:
                data = b""
            # No status: the zygote died before reaping it (its workers die with it).
            status = json.loads(data)["status"] if data else (signal.SIGKILL)
            self.returncode = os.waitstatus_to_exitcode(status)
            self._status.close()
            if self._pidfd is not None:
                os.close(self._pidfd)
                self._pidfd = None
        return self.returncode

    def poll(self) -> int | None:
        return self._collect(0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._collect(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0)
        return code

    def send_signal(self, number: int) -> None:
        if self.returncode is None and self._pidfd is not None:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self._pidfd, number)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Zygote:
    """The service's end: start the zygote (`python -m kevin.evaluator.zygote FD`), fork workers."""

    def __init__(self, env: dict[str, str], startup_timeout: float = 300.0) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock = ours
        self._lock = threading.Lock()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "kevin.evaluator.zygote", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), env=env, stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        finally:
            theirs.close()
        ready = select.select([ours], [], [], startup_timeout)[0]
        message = _receive(ours)[0] if ready else None
        if not message or message.get("ready") is not True:
            self.close()
            raise RuntimeError(f"the worker zygote did not start: {message or 'no answer'}")

    def alive(self) -> bool:
        return self.process.poll() is None

    def fork(self, argv_tail: list[str], fds: list[int], env: dict[str, str], cwd: str, log_fd: int) -> ZygoteChild:
        """A worker running `python -m kevin.evaluator.worker` with `argv_tail`, where each "{N}" in it
        names the Nth of `fds` (their numbers in the worker), in a session of its own."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with self._lock:
                _send(self._sock, {"argv": argv_tail, "env": env, "cwd": cwd}, [theirs.fileno(), log_fd, *fds])
        finally:
            theirs.close()
        if not select.select([ours], [], [], 60.0)[0]:
            ours.close()
            raise RuntimeError("the worker zygote did not answer a fork")
        answer = json.loads(ours.recv(4096) or b"{}")
        if "pid" not in answer:
            ours.close()
            raise RuntimeError(f"the worker zygote could not fork: {answer.get('error', 'no answer')}")
        return ZygoteChild(int(answer["pid"]), ours)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()
        with contextlib.suppress(Exception):
            self.process.wait(10)


_ZYGOTE: list[Zygote] = []
_ZYGOTE_LOCK = threading.Lock()


def shared(env: dict[str, str]) -> Zygote:
    """This process's zygote (started with `env` on first use, again if it died)."""
    with _ZYGOTE_LOCK:
        if not _ZYGOTE or not _ZYGOTE[0].alive():
            _ZYGOTE[:] = [Zygote(env)]
        return _ZYGOTE[0]


# -- the zygote's side -----------------------------------------------------------------------------


def _child(request: dict[str, Any], fds: list[int]) -> None:
    """In the fork: become the worker. Never returns (nsinit's end of a forked target: the worker's
    code, a traceback on its log for an exception)."""
    from kevin.evaluator import nsinit, spawn

    spawn.FORKED_FROM.append("zygote")

    def become_worker() -> int:
        status, log, *passed = fds
        os.close(status)
        os.setsid()
        spawn.take_over([os.open(os.devnull, os.O_RDWR), log, log], passed, request["cwd"], request["env"])
        sys.argv = ["kevin.evaluator.worker", *(arg.format(*passed) for arg in request["argv"])]
        sys.path[0] = request["cwd"]
        from kevin.evaluator.worker.__main__ import main

        return main(sys.argv)

    nsinit._run_target(become_worker)


def serve(control: socket.socket) -> None:
    """Fork a worker per request; report each one's pid and, when it ends, its status; when the
    service's end closes, kill every worker still running and return."""
    children: dict[int, socket.socket] = {}
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    try:
        while True:
            ready = select.select([control, wake_read], [], [], 1.0)[0]
            if wake_read in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_read, 4096)
            _reap(children)
            if control not in ready:
                continue
            try:
                request, fds = _receive(control)
            except (OSError, ValueError):
                request, fds = None, []
            if request is None:
                return
            if len(fds) < 2:
                for fd in fds:
                    os.close(fd)
                continue
            status = socket.socket(fileno=fds[0])
            set_up, set_up_write = os.pipe()
            try:
                pid = os.fork()
            except OSError as exc:
                status.send(json.dumps({"error": str(exc)}).encode())
                status.close()
                for fd in [*fds[1:], set_up, set_up_write]:
                    os.close(fd)
                continue
            if pid == 0:
                signal.set_wakeup_fd(-1)
                _child(request, fds)
            for fd in [*fds[1:], set_up_write]:
                os.close(fd)
            # The pid goes back once the child leads its session and holds only its descriptors (the
            # end of `set_up` closes with the rest): the sandbox finds and kills a worker by its
            # session, and one stopped before its setsid would be in nobody's.
            select.select([set_up], [], [], 30.0)
            os.close(set_up)
            status.send(json.dumps({"pid": pid}).encode())
            children[pid] = status
    finally:
        for pid in list(children):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while children and time.monotonic() < deadline:
            _reap(children)
            time.sleep(0.02)


def _reap(children: dict[int, socket.socket]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        sock = children.pop(pid, None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.send(json.dumps({"status": status}).encode())
            sock.close()


def main(argv: list[str]) -> int:
    control = socket.socket(fileno=int(argv[1]))
    started = time.perf_counter()
    import torch  # noqa: F401 - what every worker imports first: the point of this process

    import kevin.evaluator.worker.__main__  # noqa: F401 - the judge's modules
    from kevin.evaluator import probes, spawn

    probes.preload_profiler()  # what every judge's traced runner would import at its profiler's start

    reason = spawn.forkable()
    if reason:
        _send(control, {"ready": False, "error": f"cannot fork workers: {reason}"}, [])
        return 1
    _send(control, {"ready": True, "import_s": round(time.perf_counter() - started, 3)}, [])
    serve(control)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
