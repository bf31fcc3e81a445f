"""What a build's compilers may read and write: their build directory and the toolchain, nothing else
of the judge's.

The build broker (kevin.evaluator.broker) compiles a candidate's sources in the judge's process
tree. Until session 29 the compilers ran with the judge's own read access, so a source could
`#include "/root/.ssh/id_rsa"` (or `.incbin` it) and have the file echoed in a compile error, which
becomes the policy's feedback and the episode log (a hosted model's prompt, with `kevin optimize`),
or embedded in its library. Now every build command runs through this program:

    python -I -S buildjail.py POLICY -- ARGV

(stdlib only until the policy is read; POLICY is a marshal of its fields, in hex). It waits for a
line on its stdin when the policy says `gate` (kevin.evaluator.fastbuild.run_killable writes it once
the build's session has its scheduler weight), then confines itself with
kevin.evaluator.confine's Landlock policy for a build:

  * reads: the system's and Python's directories (`confine.readable_roots`: /usr, /lib, /proc, the
    interpreter and its site-packages, kevin's package; of /etc only `ETC`: the loader's cache, the
    time zone, the name service's files), the toolchain's (torch, CUDA, Python's headers, the
    broker's `extra_roots`: kevin.evaluator.buildflags.toolchain_roots), the shim's directory and the
    build directory. Not the judge's home, job directories, caches, /tmp, the run's files,
    /etc/shadow or ssh keys; /proc shows no other process's environment or memory (Landlock denies
    ptrace-like access outside its domain);
  * writes: the build directory only (it is the compilers' TMPDIR too);
  * no_new_privs and no capabilities (root loses its access to files it does not own); TCP
    denied and signals scoped where Landlock has them. No seccomp filter: compilers and ninja fork,
    spawn and map as they like.

Then stdin is /dev/null, and ARGV is executed. Where the kernel has no Landlock the build runs as
before (`KEVIN_BUILD_JAIL=0` asks for that too). What a build can still read: the system
directories above, and what the exit code and the output of a compiler say about them.
"""

from __future__ import annotations

import os
import sys

VARIABLE = "KEVIN_BUILD_JAIL"
"""`0` runs builds with the judge's own file access (no jail)."""

ETC = (
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "ld.so.preload", "localtime", "alternatives",
    "nsswitch.conf", "passwd", "group", "host.conf", "os-release", "lsb-release", "debian_version",
)  # fmt: skip
"""What of /etc a build reads (what compilers, ninja and torch's build opened there under strace,
and the release files): not /etc/shadow, ssh host keys or anything else a root judge owns."""


def enabled() -> bool:
    return os.environ.get(VARIABLE, "1") != "0"


def command(argv: list[str], directory: str | os.PathLike, readable: list[str], *, gate: bool) -> list[str]:
    """ARGV run under the jail of a build in `directory` that may also read `readable`; with `gate`
    it starts once a line arrives on its stdin."""
    import marshal

    policy = {
        "job_dir": os.path.abspath(directory),
        "readable": [os.path.abspath(path) for path in readable],
        "gate": gate,
        "root": os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    }
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), marshal.dumps(policy).hex(), "--", *argv]


def _lock(policy: dict) -> None:
    import marshal

    sys.path.insert(0, policy["root"])
    from kevin.evaluator import confine

    fields = {"job_dir": policy["job_dir"], "readable": policy["readable"], "seccomp": False, "etc": ETC}
    confine.lock_down_marshal(marshal.dumps(fields))  # quiet: its notes would read as compiler output


def main(args: list[str]) -> int:
    import marshal

    if len(args) < 3 or args[1] != "--":
        print("buildjail: usage: buildjail.py POLICY -- ARGV", file=sys.stderr)
        return 2
    policy = marshal.loads(bytes.fromhex(args[0]))
    argv = args[2:]
    if policy["gate"]:
        os.read(0, 1)  # the session is niced: one byte, or the end of the pipe
    _lock(policy)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        print(f"buildjail: cannot run {argv[0]}: {exc.strerror}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
