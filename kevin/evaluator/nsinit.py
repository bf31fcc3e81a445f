"""The supervisor `kevin.evaluator.spawn.spawn_confined` puts between a trusted spawner and the process it runs.

Run as `python -I -S nsinit.py --key=value ... -- ARGV` (stdlib only; nothing of kevin is imported
unless a lock policy is to be applied before ARGV is executed). Three processes:

  S  this program, in the spawner's namespaces: makes a PID namespace for its children
     (`unshare(CLONE_NEWPID)` as root, else in a new user namespace too), reports to the spawner
     over a pipe, and stays until the namespace is empty. SIGTERM, SIGINT or SIGHUP, or the
     spawner's death (PR_SET_PDEATHSIG when spawned from the main thread, and always the end of a
     lifeline pipe only the spawner holds) make it SIGKILL I, which takes the namespace with it.
     It then exits with the target's status (a code, or the same signal).
  I  S's child, pid 1 of the new namespace: its own mount namespace with a fresh /proc (so the
     processes inside see only the namespace, their own pids match /proc, and /proc/sys,
     /proc/sysrq-trigger and a few more are read-only), PR_SET_PDEATHSIG tied to S, then forks
     the target, reaps every orphan, and exits when the target does. When a namespace's init
     exits, the kernel SIGKILLs everything left in it: double forks, setsid, CLONE_PARENT and an
     empty environment do not matter, none of them leaves the namespace.
  T  I's child: default signal dispositions, a session of its own (no controlling terminal), the
     lock policy applied (when given), execvp(ARGV).

Where no namespace can be made (no privilege, no user namespaces), S becomes a child subreaper
and runs T itself; when T exits or a kill is asked for, S stops and kills every process below
it. That is the degraded mode: a process that leaves S's subtree (possible only by killing S)
escapes it. The spawner is told, with the reason.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import select
import signal
import sys
from typing import Any

_CLONE_NEWNS, _CLONE_NEWUSER, _CLONE_NEWPID = 0x00020000, 0x10000000, 0x20000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_PR_SET_PDEATHSIG, _PR_SET_CHILD_SUBREAPER = 1, 36
_CAP_SETFCAP = 31
# Read-only in the fresh /proc (what container runtimes protect): sysctls, the magic SysRq key,
# interrupt affinity, buses and file systems.
_PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs", "acpi", "scsi")

_libc = ctypes.CDLL(None, use_errno=True)


def _error(call: str) -> str:
    return f"{call}: {os.strerror(ctypes.get_errno())}"


def _send(fd: int, line: str) -> None:
    data = (line.replace("\n", " ") + "\n").encode()
    with contextlib.suppress(OSError):
        while data:
            data = data[os.write(fd, data) :]


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except InterruptedError:
            continue
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _has_capability(number: int) -> bool:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> number & 1)
    return False


def _new_pid_namespace() -> tuple[str, str]:
    """(mode, reason): "pid" or "user+pid" with children in a new PID namespace, or "none"."""
    if _libc.unshare(_CLONE_NEWPID) == 0:
        return "pid", ""
    first = _error("unshare(CLONE_NEWPID)")
    uid, gid = os.getuid(), os.getgid()
    if os.geteuid() == 0 and not _has_capability(_CAP_SETFCAP):
        # Linux 5.12+: mapping uid 0 into a user namespace takes CAP_SETFCAP; any other mapping
        # would leave the target's files owned by nobody. Say so instead of half-working.
        return "none", f"{first}; root without CAP_SETFCAP cannot map uid 0 into a user namespace"
    if _libc.unshare(_CLONE_NEWUSER | _CLONE_NEWPID) != 0:
        return "none", f"{first}; {_error('unshare(CLONE_NEWUSER|CLONE_NEWPID)')}"
    # The same ids inside: files keep their owners; a non-root target keeps no capability at exec.
    try:
        for name, text in (
            ("setgroups", "deny"),
            ("uid_map", f"{uid} {uid} 1"),
            ("gid_map", f"{gid} {gid} 1"),
        ):
            with open(f"/proc/self/{name}", "w") as handle:
                handle.write(text)
    except OSError as exc:
        raise SystemExit(f"error user namespace id maps: {exc}") from exc
    return "user+pid", f"{first}; a user namespace holds the PID namespace"


def _fresh_proc() -> str:
    """In a new mount namespace (never propagated back), mount the namespace's own /proc. Returns
    "fresh" or why not (then /proc still shows the spawner's view, with outer pids)."""
    if _libc.unshare(_CLONE_NEWNS) != 0:
        return _error("unshare(CLONE_NEWNS)")
    if _libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        return _error("mount --make-rprivate /")  # never mount /proc while propagation is shared
    locked = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    if _libc.mount(b"proc", b"/proc", b"proc", locked, None) != 0:
        return _error("mount proc")
    failed = []
    for name in _PROC_READ_ONLY:
        path = f"/proc/{name}".encode()
        if not os.path.exists(path):
            continue
        if (
            _libc.mount(path, path, None, _MS_BIND | _MS_REC, None) != 0
            or _libc.mount(None, path, None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | locked, None) != 0
        ):
            failed.append(_error(f"read-only /proc/{name}"))
    return "fresh" + (f" ({'; '.join(failed)})" if failed else "")


def _has_terminal() -> bool:
    """Whether this process has a controlling terminal (only then does T need a session of its own
    to be rid of it). A spawner without one (a worker: started in a session of its own) keeps T in
    its session, in a process group of its own, so T shares its scheduler autogroup: a spare's
    runners then boot at the weight the spare was given (kevin.evaluator.sandbox.SPARE_NICENESS),
    not as sessions of their own at full weight beside a timing."""
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:
        return False
    os.close(fd)
    return True


def _start_target(
    argv: list[str], lock_fd: int, root: str, tie_to_parent: bool, run: Any = None, keep: tuple[int, ...] = ()
) -> tuple[int, list[str]]:
    """Fork T (lock applied, then execvp, or in fork mode `run()` with only the descriptors `keep`
    and the standard ones). Returns its pid and its report lines: `lock JSON` when a policy was
    applied, then `exec ERRNO` or `error TEXT` when it never ran ARGV (or `run`)."""
    read_end, write_end = os.pipe()  # close-on-exec: EOF here means exec succeeded
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_end)
            for number in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(number, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPPING)
            if tie_to_parent:
                _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            # A group of its own either way: kill(0) reaches only T and what T started.
            if _has_terminal():
                os.setsid()  # no controlling terminal: nothing to type into, no terminal's signals
            else:
                os.setpgid(0, 0)
            if lock_fd >= 0:
                policy = _read_all(lock_fd)
                os.close(lock_fd)
                sys.path.insert(0, root)
                from kevin.evaluator import confine

                _send(write_end, "lock " + confine.lock_down_marshal(policy).hex())
            if run is not None:
                os.close(write_end)  # what close-on-exec says in exec mode: the target runs
                _close_all_but({0, 1, 2, *keep})  # and what it closes: S's and I's descriptors
                _run_target(run)
            os.execvp(argv[0], argv)
        except OSError as exc:
            _send(write_end, f"exec {exc.errno or errno.EIO}")
        except BaseException as exc:  # noqa: BLE001 - anything that stopped the target from starting
            _send(write_end, f"error {type(exc).__name__}: {exc}")
        os._exit(127)
    os.close(write_end)
    lines = _read_all(read_end).decode(errors="replace").splitlines()
    os.close(read_end)
    return pid, lines


def _run_target(run: Any) -> None:
    """Fork mode's T: the target's code in this process. Never returns: exits with its code (1 and a
    traceback on stderr for an exception)."""
    for number in signal.valid_signals():  # the spawner's handlers are not the target's
        with contextlib.suppress(OSError, ValueError, TypeError):
            if callable(signal.getsignal(number)):
                signal.signal(number, signal.SIG_DFL)
    code = 1
    try:
        code = int(run() or 0)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - the target's own failure, for its log
        import traceback

        with contextlib.suppress(BaseException):
            traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _go_on_small(role: str, inherited: list[int], **opts: object) -> None:
    """Fork mode: S and I start as copies of the spawner (kevin.evaluator.spawn forks it, torch and
    all, so that T needs no start-up of its own). Once T exists they need none of that: each
    replaces its image with this file run alone (`--resume=ROLE`), keeping its pid, its children
    and `inherited`, so the supervisor and the init hold no copy of the spawner's memory (nor count
    it again in the job's resident memory). Never returns."""
    for fd in inherited:
        os.set_inheritable(fd, True)
    args = [f"--{key}={value}" for key, value in opts.items()]
    here = os.path.abspath(__file__)
    os.execv(sys.executable, [sys.executable, "-I", "-S", here, f"--resume={role}", *args, "--"])


def _close_all_but(keep: set[int]) -> None:
    for name in os.listdir("/proc/self/fd"):
        if int(name) not in keep:
            with contextlib.suppress(OSError):
                os.close(int(name))


def _quiet(fds: list[int], standard: tuple[int, ...] = (0, 1, 2)) -> None:
    """Drop the descriptors only the target needs and point `standard` ones at /dev/null."""
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in standard:
        os.dup2(null, fd)
    os.close(null)


def _init(
    argv: list[str], opts: dict[str, str], to_s: int, s_alive: int, closing: list[int], run: Any = None
) -> None:
    """Pid 1 of the namespace. Never returns."""
    try:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if select.select([s_alive], [], [], 0)[0]:  # S died before the request: EOF readable
            os._exit(1)
        _send(to_s, "proc " + (_fresh_proc() if opts.get("proc", "1") == "1" else "not requested"))
        pid, lines = _start_target(argv, int(opts.get("lock", "-1")), opts["root"], False, run, _user_fds(opts))
        for line in lines:
            _send(to_s, line)
        _send(to_s, f"target {pid}")
        _quiet(closing)
        if run is not None:
            _go_on_small("init", [to_s], target=pid, to_s=to_s)
        _reap_namespace(pid, to_s)
    except BaseException as exc:  # noqa: BLE001
        _send(to_s, f"error init: {type(exc).__name__}: {exc}")
        os._exit(1)


def _reap_namespace(target: int, to_s: int) -> None:
    """Init's life once T runs: reap every orphan; when T ends, tell S its status and exit, which
    ends the namespace. Never returns."""
    while True:
        try:
            done, status = os.waitpid(-1, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(0)
        if done == target:
            _send(to_s, f"status {status}")
            os._exit(0)  # the kernel now kills every process left in the namespace


def _nspid(pid: str) -> int | None:
    """The pid a process has in its innermost namespace (last NSpid field)."""
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("NSpid:"):
                    return int(line.split()[-1])
    except (OSError, ValueError):
        return None
    return None


def _outer_pid(init: int, inner: int) -> int | None:
    """T's pid as the spawner sees it: a child of I whose innermost pid is `inner`."""
    candidates: list[str] = []
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{init}/task"):
            with open(f"/proc/{init}/task/{tid}/children") as handle:
                candidates += handle.read().split()
    if not candidates:  # kernels without CONFIG_PROC_CHILDREN: scan
        candidates = [name for name in os.listdir("/proc") if name.isdigit()]
    for pid in candidates:
        if _nspid(pid) == inner and pid != str(init):
            return int(pid)
    return None


def _mirror(status: int | None) -> None:
    """Exit as the target did: the same code, or the same signal (no core file). Never returns."""
    if status is not None and os.WIFEXITED(status):
        os._exit(os.WEXITSTATUS(status))
    number = os.WTERMSIG(status) if status is not None and os.WIFSIGNALED(status) else signal.SIGKILL
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if number not in (signal.SIGKILL, signal.SIGSTOP):
        signal.signal(number, signal.SIG_DFL)
    os.kill(os.getpid(), number)
    os._exit(128 + number)


def _kill_tree(root: str) -> None:
    sys.path.insert(0, root)
    from kevin.evaluator import procfs

    procfs.kill_descendants(os.getpid())


def _read_until_target(fd: int) -> list[str]:
    """I's lines up to `target PID` (or its failure, or its end)."""
    buffer = b""
    while True:
        lines = buffer.decode(errors="replace").splitlines()
        if buffer.endswith(b"\n") and any(line.startswith(("target ", "error init")) for line in lines):
            return lines
        try:
            chunk = os.read(fd, 65536)
        except InterruptedError:
            continue
        if not chunk:
            return lines
        buffer += chunk


_STOPPING = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
"""What asks S to kill the namespace: blocked from S's start until its handlers are in place (in fork
mode, across its exec), so that a request is never lost nor taken by the default action."""


def main(args: list[str], run: Any = None) -> None:
    """S. With `run` (fork mode: called in a fresh fork of the spawner, kevin.evaluator.spawn), T
    calls `run()` instead of executing ARGV, and S and I go on as this file run alone."""
    signal.pthread_sigmask(signal.SIG_BLOCK, _STOPPING)
    split = args.index("--")
    opts = dict(arg[2:].split("=", 1) for arg in args[:split])
    if "resume" in opts:
        _resume(opts)
    argv = args[split + 1 :]
    report, life = int(opts["report"]), int(opts["life"])
    lock = int(opts.get("lock", "-1"))
    user_fds = list(_user_fds(opts))
    closing = user_fds + [fd for fd in (lock, report) if fd >= 0]  # S keeps `life`
    for fd in (report, life, lock):
        if fd >= 0:
            os.set_inheritable(fd, False)
    if opts.get("pdeathsig") == "1":
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != int(opts["spawner"]):
        os._exit(1)  # the spawner is already gone
    try:
        mode, reason = _new_pid_namespace() if opts.get("namespace") == "1" else ("none", "not requested")
    except SystemExit as exc:
        _send(report, str(exc))
        os._exit(1)

    to_s_read = -1
    if mode == "none":
        _libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        child, lines = _start_target(argv, lock, opts["root"], True, run, tuple(user_fds))
        target, init = child, 0
        lines.insert(0, "proc unchanged (no namespace)")
    else:
        to_s_read, to_s = os.pipe()
        s_alive_read, s_alive = os.pipe()
        child = os.fork()
        if child == 0:
            os.close(to_s_read)
            os.close(s_alive)
            _init(argv, opts, to_s, s_alive_read, [*closing, life], run)
        os.close(to_s)
        os.close(s_alive_read)
        init = child
        lines = _read_until_target(to_s_read)
        inner = [int(line.split()[1]) for line in lines if line.startswith("target ")]
        found = _outer_pid(init, inner[0]) if inner else None
        target = found if found is not None else init
        lines = [line for line in lines if not line.startswith("target ")]
    for line in [f"pid {target}", f"init {init}", f"namespace {mode}", f"reason {reason}", *lines, "ready"]:
        _send(report, line)
    _quiet(closing, (0, 1))  # stderr stays: a traceback of S is worth seeing
    if run is not None:
        _go_on_small(
            "supervisor", [life] + ([to_s_read] if to_s_read >= 0 else []),
            mode=mode, child=child, life=life, to_s_read=to_s_read, root=opts["root"],
        )  # fmt: skip
    _supervise(mode, child, life, to_s_read, opts["root"])


def _user_fds(opts: dict[str, str]) -> tuple[int, ...]:
    return tuple(int(fd) for fd in opts.get("fds", "").split(",") if fd)


def _resume(opts: dict[str, str]) -> None:
    """Fork mode, after `_go_on_small`: the init's or the supervisor's life, in this file alone."""
    if opts["resume"] == "init":
        _reap_namespace(int(opts["target"]), int(opts["to_s"]))
    for name in ("life", "to_s_read"):
        if int(opts[name]) >= 0:
            os.set_inheritable(int(opts[name]), False)
    _supervise(opts["mode"], int(opts["child"]), int(opts["life"]), int(opts["to_s_read"]), opts["root"])


def _supervise(mode: str, child: int, life: int, to_s_read: int, root: str) -> None:
    """S once the target runs: kill the namespace (or the tree) on request or when the spawner is
    gone, then end as the target did. Never returns."""
    state: dict[str, object] = {"kill": False, "reaped": False, "pidfd": None}
    with contextlib.suppress(OSError, AttributeError):
        state["pidfd"] = os.pidfd_open(child)

    def stop(*_: object) -> None:
        state["kill"] = True
        if mode == "none" or state["reaped"]:
            return  # degraded: the loop below kills the tree
        with contextlib.suppress(OSError):
            if state["pidfd"] is not None:
                signal.pidfd_send_signal(state["pidfd"], signal.SIGKILL)  # type: ignore[arg-type]
            else:
                os.kill(child, signal.SIGKILL)

    for number in _STOPPING:
        signal.signal(number, stop)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPPING)
    if mode != "none":
        _wait_for_namespace(child, life, to_s_read, state, stop)
    _reap_tree(child, life, state, root)


def _wait_for_namespace(child: int, life: int, to_s_read: int, state: dict, stop: Any) -> None:
    """Wait for the namespace's init; the spawner's end or a kill request kills it first. Then
    end as the target ended."""
    poller = select.poll()
    poller.register(life, select.POLLIN)
    if state["pidfd"] is not None:
        poller.register(state["pidfd"], select.POLLIN)
    while True:
        done, _raw = os.waitpid(child, os.WNOHANG)
        if done == child:
            state["reaped"] = True
            break
        ready = dict(poller.poll(None if state["pidfd"] is not None else 100))
        if life in ready:  # EOF: the spawner is gone
            poller.unregister(life)
            stop()
    final = _read_all(to_s_read).decode(errors="replace").splitlines()
    codes = [int(line.split()[1]) for line in final if line.startswith("status ")]
    _mirror(codes[-1] if codes and not state["kill"] else None)


def _reap_tree(child: int, life: int, state: dict, root: str) -> None:
    """Degraded (no namespace): S is a subreaper; reap orphans, kill the whole tree at the end."""
    status: int | None = None
    while True:
        try:
            done, raw = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            done, raw = -1, 0
        if done == child or (done == -1 and status is None):
            status = raw
        if done > 0:
            continue
        if status is not None or state["kill"]:
            _kill_tree(root)
            with contextlib.suppress(ChildProcessError):
                while os.waitpid(-1, 0)[0] > 0:
                    pass
            _mirror(status)
        if select.select([life], [], [], 0.05)[0]:
            state["kill"] = True


if __name__ == "__main__":
    main(sys.argv[1:])
