"""Confinement of the process that runs candidate code, and the checks made on it from outside.

Two generations live here. The current worker confines itself (`confine_worker`):

  channel      the parent's pipe is moved to a random high, close-on-exec descriptor, and every
               message carries the job's token; the parent (kevin.evaluator.sandbox) drops and
               counts any line without it.
  writes       Landlock (`confine_writes`): writes only under the job directory, the build cache
               and /dev/shm, device files and (CUDA) /proc.
  children     a child subreaper: kevin.evaluator.procfs's `descendants()` finds detached daemons
               for its `kill_descendants`.

What that does not stop (issue 13 demonstrated each): code in the worker reads the token from its
memory and forges messages; a `clone(CLONE_PARENT)` daemon is the worker's sibling, outside the
tree walk; reads are not confined (another job's job file, the baseline cache, lock files); native
threads and priority changes go unseen.

The runner of the judge/runner split is confined from outside and before candidate code exists:

  spawn_confined   (kevin.evaluator.spawn) the runner in a PID namespace of its own (kevin.evaluator.nsinit is its init),
                   with its own /proc; when the runner exits, on `kill()`, or when the spawner
                   dies, the kernel kills every process in the namespace, however it detached.
                   Without privilege, a user namespace holds it; without either, a subreaper and a
                   tree kill, said in `.pid_namespace`/`.reason` and logged once.
  lock_down        no_new_privs; Landlock reads limited to the Python installation, kevin, system
                   directories, the job directory and the build cache (read-only), writes to the
                   job directory and a short list of device files (and /proc for CUDA), no TCP,
                   signals and abstract unix sockets scoped to the runner; no capabilities; the
                   seccomp filter of kevin.evaluator.seccomp_filter (namespaces, mounts, ptrace,
                   CLONE_PARENT, priorities and affinity of others, kernel interfaces: EPERM).
                   Given to `spawn_confined(lock=...)` it applies before the runner's exec, so
                   every thread the runner ever has is under it.
  os_thread_count, scheduling_state
                   (kevin.evaluator.procfs) what a trusted process reads from /proc after the
                   candidate ran: OS threads (native ones included), nice value, scheduler policy
                   and affinity per thread.

What the runner's confinement does not stop: anything inside the runner's own process (its memory,
its outputs: the judge must not believe what the runner says about itself); UDP and connections
to named unix sockets (Landlock's network rules here cover TCP); reading files the allow-list grants
(other build-cache entries when the whole cache is readable, /etc, /sys); the CPU and GPU time it
spends (a cgroup's job); with `lock_down` called in-process, threads that existed before it, on
kernels without Landlock TSYNC (ABI 8), keep full file access and their capabilities (reported as
`landlock_all_threads: False`). The runner still runs as root on the GPU machine: with its
capabilities gone and the filter in place, what is left of root is file ownership (root's files
under the allowed paths) and, for CUDA jobs, writes to the namespace's own /proc (its /proc/sys
and /proc/sysrq-trigger are mounted read-only there; without the namespace's /proc, lock_down
warns).

Why one module of ~540 lines: everything a process does to confine itself or another (the
channel, Landlock rule sets, capabilities, the lock-down) shares the raw syscall plumbing kept here;
the spawning is kevin.evaluator.spawn, the reads of /proc kevin.evaluator.procfs.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
import sys
from collections.abc import Iterable
from typing import Any, NamedTuple

from kevin.evaluator.procfs import os_thread_count, status_fields

# json, hmac, secrets, logging are imported where used: nsinit imports this module in the
# runner's process just before its exec, where every millisecond is paid per evaluation.

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
        import secrets

        limit = min(resource.getrlimit(resource.RLIMIT_NOFILE)[0], 1 << 16)
        self.fd = fcntl.fcntl(
            fd, fcntl.F_DUPFD_CLOEXEC, limit // 2 + secrets.randbelow(max(limit // 2 - 64, 1))
        )
        os.close(fd)
        self._token = token

    def send(self, message: dict[str, Any]) -> None:
        import json

        data = (json.dumps(dict(message, auth=self._token), default=str) + "\n").encode()
        while data:
            written = _write(self.fd, data)
            data = data[written:]


def authentic(message: dict[str, Any], token: str) -> bool:
    """Whether a channel message carries the job's token (constant-time comparison)."""
    import hmac

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


# ---------------------------------------------------------------------------------------------
# The runner's confinement: a PID namespace around it, and lock_down before candidate code.

_warned: set[str] = set()


def _warn_once(key: str, message: str) -> None:
    """One warning per process and kind of shortfall: never silent, never a flood."""
    if key not in _warned:
        import logging

        _warned.add(key)
        logging.getLogger(__name__).warning("%s", message)


# Landlock rights (include/uapi/linux/landlock.h) beyond the write rights above.
_EXECUTE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 2, 1 << 3
_MAKE_CHAR, _MAKE_BLOCK = 1 << 6, 1 << 11
_IOCTL_DEV = 1 << 15
_READ = _EXECUTE | _READ_FILE | _READ_DIR
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV  # what a file rule may carry
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX = 1 << 0
_RESTRICT_TSYNC = 1 << 3  # ABI 8: every thread of the process, not only the caller
_PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4

# /dev entries the runner may use (read, write, ioctl): the usual character devices and the
# NVIDIA ones. Not /dev itself: that would cover /dev/shm (other processes' shared memory, the
# judge's too), block devices and raw controllers a root process could read the disk through,
# terminals (/dev/tty, /dev/pts) and /dev/vsock. Descriptors the runner inherits are not affected.
_DEVICES = ("null", "zero", "full", "random", "urandom", "nvidia*")


class LockDown(NamedTuple):
    """What a runner may touch once candidate code can run.

    job_dir      read and write (create, rename, delete; no device nodes); everything else is
                 read-only or out of reach.
    build_cache  read-only (the build broker writes it). Better the job's own entries than the
                 whole cache: every other entry is another candidate's code.
    readable     extra read-only paths (another Python installation, data the job reads).
    writable     extra writable directories; keep them per job (a TRITON_CACHE_DIR or TMPDIR
                 shared between jobs is a cache the next job trusts).
    devices      extra /dev entry names (shell patterns) beside `_DEVICES`.
    cuda         /proc writable: the CUDA driver names its threads in /proc/self/task/*/comm and
                 cuInit fails (error 304) when it cannot.
    confine_reads  Landlock read rules (off: writes only, as `confine_writes`).
    network      TCP bind/connect allowed (off: denied where Landlock has network rules, ABI 4+,
                 and AF_INET/AF_INET6 sockets refused by the seccomp filter).
    unix_sockets AF_UNIX sockets may be made (on with `cuda`: the CUDA driver makes one in cuInit
                 and fails with error 304 without it). Landlock does not confine connect() to a
                 named unix socket, so with them a root runner reaches any socket file it can
                 name (systemd's, a container runtime's); keep such sockets off the GPU machine.
    seccomp, drop_capabilities  the seccomp filter (kevin.evaluator.seccomp_filter) and an empty
                 capability set (effective, permitted, inheritable, ambient and bounding).
    etc          None: all of /etc is readable (runners); else only these entries of it (builds,
                 kevin.evaluator.buildjail: a root process owns /etc/shadow and the host's ssh keys,
                 and reads them even without capabilities).
    """

    job_dir: str
    build_cache: str | None = None
    readable: tuple[str, ...] = ()
    writable: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()
    cuda: bool = False
    confine_reads: bool = True
    network: bool = False
    unix_sockets: bool = False
    seccomp: bool = True
    drop_capabilities: bool = True
    etc: tuple[str, ...] | None = None


def _package_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def readable_roots(policy: LockDown) -> list[str]:
    """Every path the runner may read (before `policy.readable`): the running Python, its
    site-packages, kevin's own package, the system's directories and the job's."""
    import site
    import sysconfig

    roots = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    # The virtual environment by its executable's path too: under `python -S` (nsinit) sys.prefix
    # is the base installation, site.py being what reads pyvenv.cfg.
    for executable in (os.path.abspath(sys.executable), os.path.realpath(sys.executable)):
        roots.append(os.path.dirname(os.path.dirname(executable)))
    roots += [
        path
        for key, path in sysconfig.get_paths().items()
        if key in ("stdlib", "platstdlib", "purelib", "platlib")
    ]
    with contextlib.suppress(AttributeError):
        roots += site.getsitepackages() + [site.getusersitepackages()]
    roots += [
        path for path in sys.path if os.path.basename(path.rstrip("/")) in ("site-packages", "dist-packages")
    ]
    roots.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the kevin package
    roots += [
        "/usr",
        "/lib",
        "/lib64",
        "/lib32",
        "/bin",
        "/sbin",
        "/etc",
        "/proc",
        "/sys",
        "/opt",
        "/usr/local",
    ]
    if policy.etc is not None:
        roots.remove("/etc")
        roots += [os.path.join("/etc", name) for name in policy.etc]
    roots.append(policy.job_dir)
    if policy.build_cache:
        roots.append(policy.build_cache)
    return list(dict.fromkeys(os.path.abspath(path) for path in roots if path))


def _device_entries(patterns: Iterable[str]) -> list[str]:
    import fnmatch
    import stat

    found = []
    with contextlib.suppress(OSError):
        for name in sorted(os.listdir("/dev")):
            path = os.path.join("/dev", name)
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue
            if stat.S_ISBLK(mode) or stat.S_ISLNK(mode) or name in ("shm", "mqueue"):
                continue
            if any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns):
                found.append(path)
    return found


def _within(path: str, root: str) -> bool:
    path, root = os.path.realpath(path), os.path.realpath(root)
    return path == root or path.startswith(root.rstrip("/") + "/")


def _add_path_rule(libc: Any, ruleset: int, path: str, rights: int) -> bool:
    """A rule that `path` (and, for a directory, everything beneath) grants `rights`; False when the
    path does not exist. Rights a file cannot carry are dropped for a file."""
    import stat

    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= _FILE_RIGHTS
        if not rights:
            return True
        rule = _PathBeneath(rights, fd)
        if libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule({path})")
    finally:
        os.close(fd)
    return True


def _landlock(policy: LockDown, libc: Any, notes: list[str]) -> dict[str, Any]:
    done: dict[str, Any] = {
        "landlock_abi": 0, "writes_confined": False, "reads_confined": False,
        "network_confined": False, "signals_scoped": False, "landlock_all_threads": False,
    }  # fmt: skip
    abi = libc.syscall(
        _SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION)
    )
    if abi < 1:
        notes.append(f"no Landlock ({os.strerror(ctypes.get_errno())}): reads and writes are not confined")
        return done
    handled = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE_ALL
    handled |= (_REFER if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0) | (_IOCTL_DEV if abi >= 5 else 0)
    if policy.confine_reads:
        handled |= _READ
    network = _NET_BIND_TCP | _NET_CONNECT_TCP if abi >= 4 and not policy.network else 0
    scoped = _SCOPE_SIGNAL | _SCOPE_ABSTRACT_UNIX if abi >= 6 else 0
    fields = [handled] + ([network] if abi >= 4 else []) + ([scoped] if abi >= 6 else [])
    attr = (ctypes.c_uint64 * len(fields))(*fields)
    ruleset = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), 0)
    if ruleset < 0:
        notes.append(f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}: nothing confined")
        return done
    write_dir = handled & ~(_READ | _MAKE_CHAR | _MAKE_BLOCK | _IOCTL_DEV)  # no device nodes anywhere
    device = (_READ_FILE | _READ_DIR | _WRITE_FILE | _TRUNCATE | _IOCTL_DEV) & handled
    try:
        if policy.confine_reads:
            for path in [*readable_roots(policy), *policy.readable]:
                _add_path_rule(libc, ruleset, path, handled & _READ)
        for path in [policy.job_dir, *policy.writable]:
            _add_path_rule(libc, ruleset, path, handled & (write_dir | _READ))
        for path in _device_entries(_DEVICES + tuple(policy.devices)):
            _add_path_rule(libc, ruleset, path, device)
        if policy.cuda:
            _add_path_rule(libc, ruleset, "/proc", handled & (_WRITE_FILE | _TRUNCATE | _READ))
        threads = os_thread_count()
        flags = _RESTRICT_TSYNC if abi >= 8 else 0
        if libc.syscall(_SYS_RESTRICT_SELF, ruleset, flags) != 0:
            notes.append(f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}: nothing confined")
            return done
    finally:
        os.close(ruleset)
    done.update(
        landlock_abi=int(abi),
        writes_confined=True,
        reads_confined=policy.confine_reads,
        network_confined=bool(network) or policy.network,
        signals_scoped=bool(scoped),
        landlock_all_threads=bool(flags) or threads == 1,
    )
    if policy.confine_reads:
        granted = [*readable_roots(policy), *policy.readable]
        parent = os.path.dirname(os.path.abspath(policy.job_dir.rstrip("/")))
        above = [root for root in granted if _within(parent, root)]
        if above:
            notes.append(f"the job directory's siblings are readable: its parent is under {above[0]}")
    if abi < 4 and not policy.network:
        notes.append(f"Landlock ABI {abi} has no network rules: TCP is not confined")
    if abi < 6:
        notes.append(f"Landlock ABI {abi} cannot scope signals or abstract unix sockets")
    if not done["landlock_all_threads"]:
        notes.append(
            f"Landlock ABI {abi} confines the calling thread only: {threads - 1} thread(s) started "
            "before lock_down keep full file access (start the runner with spawn_confined(lock=...))"
        )
    return done


def _drop_capabilities(libc: Any, notes: list[str]) -> bool:
    """Empty every capability set of this thread, the bounding set included (so that no exec,
    even as uid 0, gets one back)."""
    try:
        with open("/proc/sys/kernel/cap_last_cap") as handle:
            last = int(handle.read())
    except (OSError, ValueError):
        last = 63
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    for cap in range(last + 1):
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # EPERM without CAP_SETPCAP: checked below

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    data = (ctypes.c_uint32 * 6)()  # two {effective, permitted, inheritable} words, all zero
    if libc.capset(ctypes.byref(Header(0x20080522, 0)), data) != 0:
        notes.append(f"capset: {os.strerror(ctypes.get_errno())}: capabilities kept")
        return False
    # The bounding set matters to a uid-0 process only (an exec as root gets it back); without
    # CAP_SETPCAP it cannot be emptied, and no_new_privs keeps file capabilities out anyway.
    sets = ("CapEff", "CapPrm", "CapInh", "CapAmb") + (("CapBnd",) if os.geteuid() == 0 else ())
    status = status_fields("thread-self")
    if any(int(status.get(key, "0"), 16) for key in sets):
        notes.append(
            "capabilities left after dropping them: " + ", ".join(f"{key} {status.get(key)}" for key in sets)
        )
        return False
    others = [
        tid for tid in os.listdir("/proc/self/task")
        if int(status_fields(f"self/task/{tid}").get("CapEff", "0"), 16)
    ]  # fmt: skip
    if others:
        notes.append(f"{len(others)} thread(s) started before lock_down keep their capabilities")
    return True


def _lock_down(policy: LockDown) -> tuple[dict[str, Any], list[str]]:
    from kevin.evaluator import seccomp_filter

    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    notes: list[str] = []
    if not os.path.isdir(policy.job_dir):
        raise FileNotFoundError(errno.ENOENT, "lock_down: no job directory", policy.job_dir)
    done: dict[str, Any] = {"threads": os_thread_count()}
    done["no_new_privs"] = libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
    if not done["no_new_privs"]:
        notes.append(f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(ctypes.get_errno())}")
    done.update(_landlock(policy, libc, notes))
    done["capabilities_dropped"] = _drop_capabilities(libc, notes) if policy.drop_capabilities else False
    if policy.seccomp:
        unix = policy.unix_sockets or policy.cuda
        done["seccomp"], shortfall = seccomp_filter.install(network=policy.network, unix=unix)
        if shortfall:
            notes.append(f"seccomp: {shortfall}")
    else:
        done["seccomp"] = False
    if policy.cuda and os.getuid() == 0 and not os.statvfs("/proc/sys").f_flag & os.ST_RDONLY:
        notes.append("/proc is writable for CUDA and /proc/sys is not read-only: root may set sysctls")
    done["degraded"] = notes
    return done, notes


def lock_down(policy: LockDown) -> dict[str, Any]:
    """Confine this process before any candidate code is imported: no_new_privs, Landlock (reads
    limited to `readable_roots`, writes to the job directory and device files, TCP denied, signals
    and abstract unix sockets scoped to the domain), no capabilities, then the seccomp filter.
    Irreversible. Returns what was applied; every shortfall (old kernel, unknown architecture,
    threads started earlier) is listed under "degraded" and logged once per process.

    Landlock and capabilities are per thread: threads that exist now stay outside them unless the
    kernel has Landlock TSYNC (ABI 8). Call it before torch starts its thread pools, or better,
    give the policy to `spawn_confined(lock=...)`, which applies it before the runner's exec."""
    done, notes = _lock_down(policy)
    for note in notes:
        _warn_once(note.split(":")[0], f"lock_down: {note}")
    return done


def lock_down_marshal(policy: bytes) -> bytes:
    """`lock_down` for a policy and a result in `marshal` form, logging nothing: what nsinit's
    target runs before its exec (marshal needs no import, both ends run the same interpreter)."""
    import marshal

    fields = {
        key: tuple(value) if isinstance(value, list) else value
        for key, value in marshal.loads(policy).items()
    }
    return marshal.dumps(_lock_down(LockDown(**fields))[0])
