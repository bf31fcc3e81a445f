"""What a hostile candidate's code would do, in Python with ctypes (the same syscalls a static
constructor would make). Used by tests/evaluator/test_escape.py, run as

    python escape.py [--lock POLICY_JSON] [--subreaper] ACTION ARGS...

--worker-confinement JOB_JSON applies the current worker's confine_worker(JOB) first (the old
defence); --lock applies kevin's lock_down(LockDown(**POLICY)) in this process first (after importing
torch when ACTION is `torch`); --subreaper makes this process a child subreaper first and
`clone-parent MARKER --sweep` then kills every process below it (the old worker's defence). Each action prints one JSON line on stdout.
"""

import ctypes
import fcntl
import json
import os
import socket
import sys
import time

CLONE_PARENT, SIGCHLD = 0x00008000, 17
SYS_CLONE = {"x86_64": 56, "aarch64": 220}[os.uname().machine]
SYS_CLONE3 = 435

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def say(**fields):
    print(json.dumps(fields), flush=True)


def holders(marker):
    """Processes whose command line carries `marker` (as this process's /proc shows them)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as handle:
                    if marker.encode() in handle.read():
                        found.append(int(name))
            except OSError:
                pass
    return found


def wait_for(marker):
    """Until the sleeper has exec'd (so that a test never passes on a daemon not yet born)."""
    deadline = time.monotonic() + 10
    while not holders(marker) and time.monotonic() < deadline:
        time.sleep(0.01)
    return bool(holders(marker))


def sleeper(marker):
    """Become a process that lives 10 minutes and whose command line carries `marker`, with an
    empty environment (no token, nothing to find it by)."""
    sleep = "/bin/sleep" if os.path.exists("/bin/sleep") else "/usr/bin/sleep"
    os.execve(sleep, [sleep, f"600.{marker}"], {})


def clone_parent(marker, stay):
    """The issue's escape: a sibling instead of a child, in a session of its own."""
    raw = ctypes.PyDLL(None, use_errno=True)  # keeps the GIL across the call: the child owns it
    raw.syscall.restype = ctypes.c_long
    pid = raw.syscall(ctypes.c_long(SYS_CLONE), ctypes.c_ulong(CLONE_PARENT | SIGCHLD), 0, 0, 0, 0)
    if pid == 0:
        os.setsid()
        sleeper(marker)
    if pid < 0:
        say(clone=-ctypes.get_errno())
        return
    say(clone=pid, running=wait_for(marker))
    if "--sweep" in sys.argv:  # the old worker's defence: kill whatever is below it
        from kevin.evaluator import procfs

        say(swept=procfs.kill_descendants(os.getpid()))
    if stay:
        time.sleep(600)


def double_fork(marker, stay):
    child = os.fork()
    if child == 0:
        os.setsid()
        if os.fork():
            os._exit(0)
        sleeper(marker)
    os.waitpid(child, 0)
    say(forked=True, running=wait_for(marker))
    if stay:
        time.sleep(600)


def attempt(call):
    try:
        call()
        return 0
    except OSError as exc:
        return exc.errno


def daemon_read(out, paths):
    """A detached daemon reads what it should not and leaves what it found in the job directory."""
    child = os.fork()
    if child == 0:
        os.setsid()
        if os.fork() == 0:
            found = {}
            for path in paths:
                if os.path.isdir(path):
                    found[path] = attempt(lambda: os.listdir(path))
                else:
                    found[path] = attempt(lambda: open(path, "rb").read())
            with open(out + ".tmp", "w") as handle:
                json.dump(found, handle)
            os.rename(out + ".tmp", out)
        os._exit(0)
    os.waitpid(child, 0)
    deadline = time.monotonic() + 10
    while not os.path.exists(out) and time.monotonic() < deadline:
        time.sleep(0.02)
    with open(out) as handle:
        say(**json.load(handle))


def take_lock(path):
    """Hold a device lock file: read-only is enough for flock."""
    try:
        handle = open(path, "rb")
    except OSError as exc:
        say(open=exc.errno)
        return
    say(open=0, flock=attempt(lambda: fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)))


def privileged(everything):
    """Calls on other processes and on the kernel; the errno of each (0: it worked). Without
    `everything`, only those that are harmless when they work (a control run without lock_down:
    a clone that worked would return into this script twice, a ptrace would stop the parent)."""
    parent = os.getppid()

    def raw(number, *args):
        def call():
            if libc.syscall(ctypes.c_long(number), *[ctypes.c_long(a) for a in args]) < 0:
                raise OSError(ctypes.get_errno(), "")

        return call

    def libc_call(name, *args):
        def call():
            if getattr(libc, name)(*args) < 0:
                raise OSError(ctypes.get_errno(), name)

        return call

    results = {
        "setpriority_parent": attempt(lambda: os.setpriority(os.PRIO_PROCESS, parent, 19)),
        "setpriority_self": attempt(lambda: os.setpriority(os.PRIO_PROCESS, 0, 19)),
        "setaffinity_parent": attempt(lambda: os.sched_setaffinity(parent, {0})),
        "sched_idle_self": attempt(lambda: os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))),
        "unshare_user": attempt(libc_call("unshare", 0x10000000)),
        "setaffinity_self": attempt(lambda: os.sched_setaffinity(0, os.sched_getaffinity(0))),
    }
    if everything:
        results.update(
            ptrace_attach_parent=attempt(libc_call("ptrace", ctypes.c_long(16), ctypes.c_long(parent), None, None)),
            unshare_mount=attempt(libc_call("unshare", 0x00020000)),
            clone_newpid=attempt(raw(SYS_CLONE, 0x20000000 | SIGCHLD, 0, 0, 0, 0)),
            clone_parent=attempt(raw(SYS_CLONE, CLONE_PARENT | SIGCHLD, 0, 0, 0, 0)),
            clone3=attempt(raw(SYS_CLONE3, 0, 0)),
            chroot=attempt(lambda: os.chroot("/")),
            mount_proc=attempt(libc_call("mount", b"proc", b"/proc", b"proc", 0, None)),
            kill_parent=attempt(lambda: os.kill(parent, 0)),
            unix_socket=attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()),
            udp_socket=attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close()),
            vsock=attempt(lambda: socket.socket(40, socket.SOCK_STREAM).close()),  # AF_VSOCK
            socketpair=attempt(lambda: [end.close() for end in socket.socketpair()]),
            tiocsti=attempt(lambda: fcntl.ioctl(0, 0x5412, b"x")),
        )
    say(**results)


def torch_work():
    """torch after lock_down: a matmul, the intra-op pool with 2 threads, a Python thread, a
    child process, stdlib imports."""
    import threading

    import torch

    torch.set_num_threads(2)
    a = torch.randn(256, 256)
    product = (a @ a).sum().item()
    big = torch.randn(1 << 22)
    total = big.abs().sum().item()  # large enough for at::parallel_for to use the pool
    box = []
    thread = threading.Thread(target=lambda: box.append(torch.ones(4).sum().item()))
    thread.start()
    thread.join()
    import decimal
    import email.parser
    import sqlite3
    import subprocess

    child = subprocess.run(["/bin/echo", "child"], capture_output=True, text=True).stdout.strip()
    say(
        product_finite=bool(torch.isfinite(torch.tensor(product))),
        total_positive=total > 0,
        thread=box == [4.0],
        child=child,
        threads=len(os.listdir("/proc/self/task")),
        torch_threads=torch.get_num_threads(),
        stdlib=[decimal.__name__, email.parser.__name__, sqlite3.__name__],
    )


def cuda_work():
    """CUDA after lock_down: a matmul on the GPU, a side stream, a kernel-name check through the
    profiler-free path (synchronize), and the device still listed."""
    import torch

    a = torch.randn(1024, 1024, device="cuda")
    product = (a @ a).sum().item()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        b = (a * 2).sum()
    torch.cuda.synchronize()
    say(
        product_finite=bool(torch.isfinite(torch.tensor(product))),
        side_stream=bool(torch.isfinite(b).item()),
        devices=torch.cuda.device_count(),
        threads=len(os.listdir("/proc/self/task")),
    )


def triton_host():
    """What Triton's first launch does on the host, GPU aside: `ldconfig -p` (its libcuda lookup),
    a Python C extension built with the host compiler in TMPDIR and imported from there (its
    launcher stub), and its bundled ptxas run from site-packages when triton is installed."""
    import importlib.util
    import subprocess
    import sysconfig
    import tempfile

    ldconfig = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True)
    folder = tempfile.mkdtemp()
    source = os.path.join(folder, "stub.c")
    with open(source, "w") as handle:
        handle.write(
            "#include <Python.h>\n"
            "static PyObject* answer(PyObject* self, PyObject* args) { return PyLong_FromLong(42); }\n"
            "static PyMethodDef methods[] = {{\"answer\", answer, METH_NOARGS, NULL}, {NULL, NULL, 0, NULL}};\n"
            "static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, \"stub\", NULL, -1, methods};\n"
            "PyMODINIT_FUNC PyInit_stub(void) { return PyModule_Create(&module); }\n"
        )
    library = os.path.join(folder, "stub" + sysconfig.get_config_var("EXT_SUFFIX"))
    compiler = os.environ.get("CC") or "cc"
    build = subprocess.run(
        [compiler, "-O1", source, "-shared", "-fPIC", "-o", library, "-I", sysconfig.get_paths()["include"]],
        capture_output=True, text=True,
    )
    answer = None
    if build.returncode == 0:
        spec = importlib.util.spec_from_file_location("stub", library)
        stub = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(stub)
        answer = stub.answer()
    ptxas = None
    if importlib.util.find_spec("triton") is not None:
        import triton

        path = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
        if os.path.exists(path):
            ptxas = subprocess.run([path, "--version"], capture_output=True, text=True).returncode
    say(
        ldconfig=ldconfig.returncode, ldconfig_lines=len(ldconfig.stdout.splitlines()), folder=folder,
        build=build.returncode, build_error=build.stderr[-500:], answer=answer, ptxas=ptxas,
    )


def scheduling(nice, cpu, threads):
    """Renice and pin itself, start native-looking OS threads, then wait to be looked at."""
    import threading

    os.setpriority(os.PRIO_PROCESS, 0, nice)
    os.sched_setaffinity(0, {cpu})
    stop = threading.Event()
    for _ in range(threads):
        threading.Thread(target=stop.wait, daemon=True).start()
    say(ready=True)
    time.sleep(600)


def main(argv):
    lock = None
    if argv[0] == "--subreaper":
        libc.prctl(36, 1, 0, 0, 0)
        argv = argv[1:]
    if argv[0] == "--worker-confinement":  # what the current worker applies to itself
        from kevin.evaluator import confine

        confine.confine_worker(json.loads(argv[1]))
        argv = argv[2:]
    if argv[0] == "--lock":
        lock, argv = json.loads(argv[1]), argv[2:]
    action, args = argv[0], argv[1:]
    if action in ("torch", "cuda"):
        import torch  # noqa: F401 - before lock_down, as the runner does
    if action == "cuda" and lock is not None:
        torch.zeros(1, device="cuda")  # the CUDA context exists before lock_down
    if lock is not None:
        from kevin.evaluator import confine

        applied = confine.lock_down(confine.LockDown(**{k: tuple(v) if isinstance(v, list) else v for k, v in lock.items()}))
        print(json.dumps({"lock_down": applied}), file=sys.stderr, flush=True)
    if action == "clone-parent":
        clone_parent(args[0], stay="--stay" in args)
    elif action == "double-fork":
        double_fork(args[0], stay="--stay" in args)
    elif action == "daemon-read":
        daemon_read(args[0], args[1:])
    elif action == "flock":
        take_lock(args[0])
    elif action == "privileged":
        privileged(everything="--all" in args)
    elif action == "torch":
        torch_work()
    elif action == "cuda":
        cuda_work()
    elif action == "triton-host":
        triton_host()
    elif action == "scheduling":
        scheduling(int(args[0]), int(args[1]), int(args[2]))
    else:
        raise SystemExit(f"unknown action {action}")


if __name__ == "__main__":
    main(sys.argv[1:])
