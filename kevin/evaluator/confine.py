"""What the worker does to itself before any candidate code exists, and what it checks afterwards.

`kevin.evaluator.worker` runs candidate code in its own process, so anything the worker can do, the
candidate can do too. This module narrows that before the candidate is imported:

  channel      the parent's pipe is moved to a random high, close-on-exec descriptor (compilers and
               children never inherit it; `sys.argv` no longer names it), and every message carries
               the job's channel token, which reached the worker in the job file (read and deleted
               before the candidate is imported). The parent (kevin.evaluator.sandbox) drops and counts any
               line without the token: a candidate that writes its own verdict to the pipe is caught
               as tampering instead of being believed.
  writes       Landlock (Linux 5.13+, unprivileged): from here on this process and its children may
               create, write, rename or delete files only under the job directory, the build cache
               and /dev/shm, and write to the device lock file and existing device files (and, for a
               CUDA job, existing /proc files: the CUDA driver names its threads there). Kevin's
               baseline cache, the user's files and /tmp are read-only to the candidate. With
               Landlock ABI 6+ it also cannot signal processes outside the worker (the supervisor,
               other workers).
  children     the worker is a child subreaper: a daemon the candidate detaches (double fork,
               setsid, empty environment) is re-parented to the worker, so `descendants()` finds it
               after the candidate's stages and the supervisor finds it by walking the tree.

What this does not stop: code in this process that reads its memory (frames, gc, ctypes, native
code) can find the channel token and the pipe and forge messages; only moving the judging out of
the candidate's process would close that (the static gate rejects the introspection it can see).
Without Landlock (old kernels, seccomp profiles that block it) writes outside the job directory are
not prevented; `confine_writes` returns 0 and the result records it. Reads are not restricted (the
candidate needs torch), nor is the network. A candidate that detaches a daemon and then kills the
worker before the tree walk leaves an orphan re-parented above the worker; a PID namespace or a
cgroup around the worker (the deployment's job) is the complete answer.
"""

from __future__ import annotations

import contextlib
import ctypes
import hmac
import json
import os
import secrets
import signal
import sys
from collections.abc import Iterable
from typing import Any

_write = os.write  # bound before any candidate code exists

# Landlock (include/uapi/linux/landlock.h); the syscall numbers are the same on x86_64 and arm64.
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_WRITE_FILE, _REMOVE_DIR, _REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
_MAKE_ALL = sum(1 << bit for bit in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
_REFER, _TRUNCATE = 1 << 13, 1 << 14
_SCOPE_SIGNAL = 1 << 1
_PR_SET_NO_NEW_PRIVS, _PR_SET_CHILD_SUBREAPER, _PR_SET_PDEATHSIG = 38, 36, 1


class Channel:
    """The worker's end of the private pipe: JSON lines, each carrying the job's token."""

    def __init__(self, fd: int, token: str) -> None:
        # A random descriptor number in the upper half of what the process may open, close-on-exec.
        import fcntl
        import resource

        limit = min(resource.getrlimit(resource.RLIMIT_NOFILE)[0], 1 << 16)
        self.fd = fcntl.fcntl(
            fd, fcntl.F_DUPFD_CLOEXEC, limit // 2 + secrets.randbelow(max(limit // 2 - 64, 1))
        )
        os.close(fd)
        self._token = token

    def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(dict(message, auth=self._token), default=str) + "\n").encode()
        while data:
            written = _write(self.fd, data)
            data = data[written:]


def authentic(message: dict[str, Any], token: str) -> bool:
    """Whether a channel message carries the job's token (constant-time comparison)."""
    auth = message.get("auth")
    return isinstance(auth, str) and hmac.compare_digest(auth.encode(), token.encode())


def hide_channel_argument(argv: list[str]) -> None:
    """Drop the descriptor number from sys.argv once it is read."""
    if sys.argv is argv and len(argv) > 2:
        del sys.argv[2:]


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def die_with_parent() -> None:
    """Be killed (SIGKILL) when the supervising thread's process goes away. A worker whose
    supervisor died would otherwise live on, past every deadline, holding the device's locks: one
    stuck in a never-ending kernel would stall every later evaluation on that device. Exits at once
    if the parent is already gone (it may have died before the request was made)."""
    parent = os.getppid()
    _libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(3)


def become_subreaper() -> bool:
    """Orphans of this process's descendants are re-parented here instead of to init."""
    return _libc().prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def confine_writes(writable_dirs: Iterable[str], writable_files: Iterable[str]) -> int:
    """Restrict this process (and every child) to writing under `writable_dirs` and into the
    existing `writable_files`. Returns the Landlock ABI used, or 0 when Landlock is unavailable (the
    process is then left as it was)."""
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(
        _SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION)
    )
    if abi < 1:
        return 0
    handled = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE_ALL
    handled |= _REFER if abi >= 2 else 0
    handled |= _TRUNCATE if abi >= 3 else 0
    # struct landlock_ruleset_attr {u64 handled_access_fs; u64 handled_access_net; u64 scoped}:
    # the size passed tells the kernel which fields are present.
    fields = [handled, 0, _SCOPE_SIGNAL] if abi >= 6 else [handled]
    attr = (ctypes.c_uint64 * len(fields))(*fields)
    ruleset = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), 0)
    if ruleset < 0:
        return 0
    try:
        file_rights = handled & (_WRITE_FILE | _TRUNCATE)
        rules = [(path, handled) for path in writable_dirs] + [(path, file_rights) for path in writable_files]
        for path, rights in rules:
            _add_rule(libc, ruleset, path, rights)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return 0
        if libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0) != 0:
            return 0
    finally:
        os.close(ruleset)
    return int(abi)


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _add_rule(libc: Any, ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a path that does not exist cannot be written under anyway
    try:
        rule = _PathBeneath(rights, fd)
        if libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule({path})")
    finally:
        os.close(fd)


def stat_fields(pid: int) -> list[bytes] | None:
    """The fields of /proc/<pid>/stat after the command name (state first); None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    # The command name is in parentheses and may contain spaces; fields after it are fixed.
    return data[data.rfind(b")") + 2 :].split()


def parent_of(pid: int) -> tuple[int, bool] | None:
    """(parent pid, alive) of a process; None when it is gone. Zombies are not alive."""
    fields = stat_fields(pid)
    if fields is None:
        return None
    return int(fields[1]), fields[0] not in (b"Z", b"X")


def descendants(root: int) -> list[int]:
    """Live processes below `root` in the process tree."""
    children: dict[int, list[int]] = {}
    alive: set[int] = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        info = parent_of(int(name))
        if info is None:
            continue
        children.setdefault(info[0], []).append(int(name))
        if info[1]:
            alive.add(int(name))
    found, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return [pid for pid in found if pid in alive]


def kill_descendants(root: int) -> int:
    """Stop every process below `root` (so none can fork away), then kill them; return how many."""
    seen: set[int] = set()
    for _ in range(5):
        fresh = [pid for pid in descendants(root) if pid not in seen]
        if not fresh:
            break
        for pid in fresh:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGSTOP)
        seen.update(fresh)
    for pid in seen:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return len(seen)


def confine_worker(job: dict[str, Any]) -> dict[str, Any]:
    """Everything above for a worker about to run `job`; what was applied, for the result. Caches
    besides the build cache that the worker must write (a header cache, say) go in
    `job["writable_dirs"]`."""
    import resource
    from pathlib import Path

    file_bytes = int(job["max_file_bytes"])
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # Past the file-size limit a write fails with EFBIG instead of killing the worker silently.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    Path(job["build_cache"]).mkdir(parents=True, exist_ok=True)
    dirs = [os.getcwd(), job["build_cache"], "/dev/shm", *job.get("writable_dirs", [])]
    dirs += [os.environ[name] for name in ("TRITON_CACHE_DIR",) if os.environ.get(name)]
    files = ["/dev"]  # device files; the lock files are only read (flock needs no write access)
    if str(job.get("device", "")).startswith("cuda"):
        # The CUDA driver names its threads by writing /proc/self/task/<tid>/comm, in cuInit and
        # later; denied, cuInit fails with error 304. Landlock's own ptrace rule still keeps the
        # candidate out of other processes' /proc/<pid>/mem.
        files.append("/proc")
    return {"landlock_abi": confine_writes(dirs, files), "subreaper": become_subreaper()}
