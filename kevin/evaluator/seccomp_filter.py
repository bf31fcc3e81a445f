"""The runner's seccomp filter: classic BPF assembled here, installed with the seccomp(2) syscall.

Why raw BPF and not a library: the GPU machines bring their own Python and cannot install
packages, and libseccomp may be missing there; the one pure-Python binding (pyseccomp, a ctypes
wrapper) has had no release since 2021. The filter is short enough to read whole (`describe()`
prints it) and every rule is exercised by tests/evaluator/test_escape.py.

What the filter does (nothing is ever killed: a denied call fails with an errno, so torch and the
CUDA driver keep working and a candidate's attempt shows up as a failed call):

  * a syscall of another architecture (i386 `int 0x80` from a 64-bit process) or the x32 ABI:
    ENOSYS; otherwise every rule could be sidestepped by the other numbering;
  * `clone3`: ENOSYS. Its flags sit in a struct in memory, which a filter cannot read; glibc
    (2.34+) then falls back to `clone`, whose flags are checked;
  * `clone` with CLONE_PARENT (a child that escapes its parent's subtree) or any CLONE_NEW*
    namespace flag: EPERM;
  * `sched_setaffinity` for a pid other than 0 (the calling thread): EPERM;
  * `socket` of any family but AF_NETLINK (AF_UNIX when `unix`, AF_INET/AF_INET6 when `network`):
    EPERM. Landlock here confines TCP but not connect() to a named unix socket (a root runner could
    reach systemd's or a container runtime's socket and run anything outside), UDP, or AF_VSOCK
    (a virtual machine's channel to its host). `socketpair` stays: it reaches no one. The CUDA
    driver makes an AF_UNIX socket in cuInit (error 304 without it), so a CUDA runner has `unix`;
  * `ioctl` TIOCSTI and TIOCLINUX (typing into a terminal the runner inherited): EPERM;
  * EPERM, whatever the arguments: namespaces and mounts (unshare, setns, mount, umount2,
    pivot_root, chroot and the new mount API: open_tree, move_mount, fsopen, fsconfig, fsmount,
    fspick, mount_setattr), other processes' memory (ptrace, process_vm_readv/writev, kcmp,
    pidfd_getfd, process_madvise), priorities (setpriority, sched_setparam, sched_setscheduler, sched_setattr,
    ioprio_set), kernel surfaces no kernel candidate needs (kexec_load, kexec_file_load, bpf,
    perf_event_open, keyctl, add_key, request_key, personality, userfaultfd, io_uring_setup,
    io_uring_enter, io_uring_register), and what only a privileged process could misuse: the
    runner runs as root on the GPU machine (init_module, finit_module, delete_module, iopl, ioperm,
    modify_ldt, reboot, swapon, swapoff, settimeofday, clock_settime, clock_adjtime, adjtimex,
    sethostname, setdomainname, acct, quotactl, quotactl_fd, open_by_handle_at,
    name_to_handle_at, syslog, vhangup).

`adjtimex`/`clock_adjtime` matter beyond privilege: they change the rate of CLOCK_MONOTONIC, the
clock every timing in kevin reads. The filter is installed with SECCOMP_FILTER_FLAG_TSYNC (every
thread of the process, including the ones torch and the CUDA driver already started) and
SECCOMP_FILTER_FLAG_SPEC_ALLOW (kernels before 5.16 would otherwise turn on the speculative
store bypass mitigation for the filtered process and slow its CPU code, the candidate's timing).

Only x86_64 and aarch64 are known; elsewhere `install` says so and installs nothing.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import sys

# linux/audit.h
_AUDIT_ARCH_X86_64 = 0xC000003E
_AUDIT_ARCH_AARCH64 = 0xC00000B7
_X32_SYSCALL_BIT = 0x40000000

# linux/filter.h, linux/seccomp.h
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_SECCOMP_SET_MODE_FILTER = 1
_FLAG_TSYNC, _FLAG_SPEC_ALLOW = 1, 4
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]
_OFF_NR, _OFF_ARCH, _OFF_ARG0_LOW = 0, 4, 16  # the low half of args[0] on a little-endian machine

_AF_UNIX, _AF_INET, _AF_INET6, _AF_NETLINK = 1, 2, 10, 16
_TIOCSTI, _TIOCLINUX = 0x5412, 0x541C
_OFF_ARG1_LOW = 24
_CLONE_PARENT = 0x00008000
_CLONE_NEW = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
CLONE_DENIED = _CLONE_PARENT | _CLONE_NEW
"""CLONE_PARENT and CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET (CLONE_NEWTIME
shares its bit with the exit signal in `clone` and is only accepted by clone3 and unshare)."""

_DENIED = (
    "unshare setns mount umount2 pivot_root chroot open_tree move_mount fsopen fsconfig fsmount fspick "
    "mount_setattr ptrace process_vm_readv process_vm_writev kcmp pidfd_getfd process_madvise setpriority sched_setparam "
    "sched_setscheduler sched_setattr ioprio_set kexec_load kexec_file_load bpf perf_event_open keyctl "
    "add_key request_key personality userfaultfd io_uring_setup io_uring_enter io_uring_register "
    "init_module finit_module delete_module iopl ioperm modify_ldt reboot swapon swapoff settimeofday "
    "clock_settime clock_adjtime adjtimex sethostname setdomainname acct quotactl quotactl_fd "
    "open_by_handle_at name_to_handle_at syslog vhangup"
).split()

# Syscall numbers: arch/x86/entry/syscalls/syscall_64.tbl and include/uapi/asm-generic/unistd.h.
_X86_64 = {
    "clone": 56, "clone3": 435, "sched_setaffinity": 203, "seccomp": 317, "socket": 41, "ioctl": 16,
    "process_madvise": 440,
    "unshare": 272, "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442, "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312,
    "pidfd_getfd": 438, "setpriority": 141, "sched_setparam": 142, "sched_setscheduler": 144,
    "sched_setattr": 314, "ioprio_set": 251, "kexec_load": 246, "kexec_file_load": 320, "bpf": 321,
    "perf_event_open": 298, "keyctl": 250, "add_key": 248, "request_key": 249, "personality": 135,
    "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "init_module": 175, "finit_module": 313, "delete_module": 176, "iopl": 172, "ioperm": 173,
    "modify_ldt": 154, "reboot": 169, "swapon": 167, "swapoff": 168, "settimeofday": 164,
    "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159, "sethostname": 170,
    "setdomainname": 171, "acct": 163, "quotactl": 179, "quotactl_fd": 443, "open_by_handle_at": 304,
    "name_to_handle_at": 303, "syslog": 103, "vhangup": 153,
}  # fmt: skip
_AARCH64 = {
    "clone": 220, "clone3": 435, "sched_setaffinity": 122, "seccomp": 277, "socket": 198, "ioctl": 29,
    "process_madvise": 440,
    "unshare": 97, "setns": 268, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442, "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "kcmp": 272,
    "pidfd_getfd": 438, "setpriority": 140, "sched_setparam": 118, "sched_setscheduler": 119,
    "sched_setattr": 274, "ioprio_set": 30, "kexec_load": 104, "kexec_file_load": 294, "bpf": 280,
    "perf_event_open": 241, "keyctl": 219, "add_key": 217, "request_key": 218, "personality": 92,
    "userfaultfd": 282, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "init_module": 105, "finit_module": 273, "delete_module": 106, "reboot": 142, "swapon": 224,
    "swapoff": 225, "settimeofday": 170, "clock_settime": 112, "clock_adjtime": 266, "adjtimex": 171,
    "sethostname": 161, "setdomainname": 162, "acct": 89, "quotactl": 60, "quotactl_fd": 443,
    "open_by_handle_at": 265, "name_to_handle_at": 264, "syslog": 116, "vhangup": 58,
}  # fmt: skip
# (arm64 has no iopl, ioperm or modify_ldt)
_ARCHES = {"x86_64": (_AUDIT_ARCH_X86_64, _X86_64), "aarch64": (_AUDIT_ARCH_AARCH64, _AARCH64)}


class _Instruction(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Instruction))]


def _arch() -> tuple[int, dict[str, int]] | None:
    if sys.byteorder != "little":
        return None
    return _ARCHES.get(platform.machine())


def program(
    machine: str | None = None, network: bool = False, unix: bool = False
) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions for `machine` (this one when None); `network`
    lets AF_INET and AF_INET6 sockets be made (TCP is then Landlock's to confine)."""
    arch, numbers = _ARCHES[machine] if machine else (_arch() or (None, None))
    if arch is None:
        raise OSError(errno.ENOSYS, f"no seccomp syscall table for {platform.machine()}")
    # Assembled with symbolic jump targets: each entry is (code, target_true, target_false, k),
    # a target being a label or None (the next instruction). ioctl comes first: the CUDA driver
    # makes many, and each one runs the filter up to its rule.
    code: list[tuple[int, object, object, int]] = [
        (_LD_W_ABS, None, None, _OFF_ARCH),
        (_JEQ_K, None, "enosys", arch),
        (_LD_W_ABS, None, None, _OFF_NR),
        (_JEQ_K, "ioctl", None, numbers["ioctl"]),
    ]
    if arch == _AUDIT_ARCH_X86_64:
        code.append((_JGE_K, "enosys", None, _X32_SYSCALL_BIT))
    code += [
        (_JEQ_K, "clone", None, numbers["clone"]),
        (_JEQ_K, "socket", None, numbers["socket"]),
        (_JEQ_K, "affinity", None, numbers["sched_setaffinity"]),
        (_JEQ_K, "enosys", None, numbers["clone3"]),
    ]
    code += [(_JEQ_K, "eperm", None, numbers[name]) for name in _DENIED if name in numbers]
    labels = {"allow": len(code)}
    code.append((_RET_K, None, None, _RET_ALLOW))
    labels["ioctl"] = len(code)
    code += [
        (_LD_W_ABS, None, None, _OFF_ARG1_LOW),
        (_JEQ_K, "eperm", None, _TIOCSTI),
        (_JEQ_K, "eperm", "allow_late", _TIOCLINUX),
    ]
    labels["clone"] = len(code)
    code += [(_LD_W_ABS, None, None, _OFF_ARG0_LOW), (_JSET_K, "eperm", "allow_late", CLONE_DENIED)]
    labels["socket"] = len(code)
    families = [_AF_NETLINK] + ([_AF_UNIX] if unix else []) + ([_AF_INET, _AF_INET6] if network else [])
    code.append((_LD_W_ABS, None, None, _OFF_ARG0_LOW))
    code += [(_JEQ_K, "allow_late", None, family) for family in families]
    code.append((_RET_K, None, None, _RET_ERRNO | errno.EPERM))
    labels["affinity"] = len(code)
    # pid_t is the low 32 bits; the kernel truncates the register the same way.
    code += [(_LD_W_ABS, None, None, _OFF_ARG0_LOW), (_JEQ_K, "allow_late", "eperm", 0)]
    labels["allow_late"] = len(code)
    code.append((_RET_K, None, None, _RET_ALLOW))
    labels["eperm"] = len(code)
    code.append((_RET_K, None, None, _RET_ERRNO | errno.EPERM))
    labels["enosys"] = len(code)
    code.append((_RET_K, None, None, _RET_ERRNO | errno.ENOSYS))

    def offset(index: int, target: object) -> int:
        if target is None:
            return 0
        jump = labels[str(target)] - index - 1
        if not 0 <= jump <= 255:
            raise ValueError(f"seccomp jump out of range at {index}")
        return jump

    return [(op, offset(i, jt), offset(i, jf), k) for i, (op, jt, jf, k) in enumerate(code)]


def describe(machine: str | None = None) -> str:
    """The filter in a readable listing (for a reviewer, not for the kernel)."""
    names = {_LD_W_ABS: "ld", _JEQ_K: "jeq", _JGE_K: "jge", _JSET_K: "jset", _RET_K: "ret"}
    return "\n".join(
        f"{i:3d}  {names[op]:4s} {k:#010x}" + (f"  jt+{jt} jf+{jf}" if op not in (_LD_W_ABS, _RET_K) else "")
        for i, (op, jt, jf, k) in enumerate(program(machine))
    )


def install(network: bool = False, unix: bool = False) -> tuple[bool, str]:
    """Install the filter on every thread of this process: (installed, what falls short: "" when
    nothing does). Sets no_new_privs first (seccomp requires it without CAP_SYS_ADMIN)."""
    if _arch() is None:
        return False, f"no seccomp syscall table for {platform.machine()} ({sys.byteorder}-endian)"
    _, numbers = _arch()  # type: ignore[misc]
    instructions = program(network=network, unix=unix)
    array = (_Instruction * len(instructions))(*[_Instruction(*ins) for ins in instructions])
    prog = _Program(len(instructions), array)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(ctypes.get_errno())}"
    for flags in (_FLAG_TSYNC | _FLAG_SPEC_ALLOW, _FLAG_TSYNC):
        result = libc.syscall(
            ctypes.c_long(numbers["seccomp"]),
            ctypes.c_uint(_SECCOMP_SET_MODE_FILTER),
            ctypes.c_uint(flags),
            ctypes.byref(prog),
        )
        if result == 0:
            return True, ""
        if result > 0:  # TSYNC names a thread that could not be synchronised
            return False, f"seccomp TSYNC failed on thread {result}"
        if ctypes.get_errno() != errno.EINVAL:
            break
    err = ctypes.get_errno()
    if err == errno.ENOSYS:
        # Linux < 3.17: no seccomp(2); the prctl form confines the calling thread only.
        if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) == 0:
            return True, "calling thread only (no seccomp(2) syscall, no TSYNC)"
        err = ctypes.get_errno()
    return False, f"seccomp: {os.strerror(err)}"
