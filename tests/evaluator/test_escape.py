"""Escapes a hostile candidate tries from the runner (issue 13), against `confine.spawn_confined`
and `confine.lock_down`. Each attack is tests/data/isolation/escape.py, run as the runner would
be; where the old defence (a subreaper and a tree walk, no read rules) can be shown to fail, the
test shows that first, so that an attack that stopped working cannot pass for a defence.

They need a PID namespace (root, or unprivileged user namespaces), Landlock and a known seccomp
architecture, and skip with the reason when the machine lacks one; CI runs as root on a 6.x
kernel, where none is skipped.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import json
import os
import secrets
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kevin.evaluator import confine, procfs, seccomp_filter, spawn

REPO = Path(__file__).resolve().parents[2]
ESCAPE = REPO / "tests" / "data" / "isolation" / "escape.py"
PYTHON = sys.executable


@functools.cache
def _namespace_reason() -> str:
    """"" when spawn_confined gets a PID namespace here, else why not."""
    process = spawn.spawn_confined(["true"])
    process.wait(10)
    return "" if process.pid_namespace else process.reason


def _need_namespace() -> None:
    if _namespace_reason():
        pytest.skip(f"no PID namespace on this machine: {_namespace_reason()}")


def _need_landlock() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    if libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1)) < 1:
        pytest.skip("this kernel has no Landlock")


def _need_seccomp() -> None:
    if seccomp_filter._arch() is None:
        pytest.skip(f"no seccomp syscall table for {os.uname().machine}")


def _holders(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def _left_after(marker: str, seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while _holders(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _holders(marker)


@pytest.fixture
def marker():
    """A string only the test's daemon carries on its command line; whatever still carries it at
    the end is killed (and reaped when it is this process's child)."""
    value = str(10**12 + secrets.randbelow(10**12))
    yield value
    for pid in _holders(value):
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def _escape(*args: str) -> list[str]:
    return [PYTHON, str(ESCAPE), *args]


def _policy(job: Path, **extra) -> confine.LockDown:
    """The runner's policy: the job directory, plus the attack script's own directory (it is read
    by the interpreter after a lock applied before exec)."""
    return confine.LockDown(job_dir=str(job), readable=(str(ESCAPE.parent),), **extra)


def _locked(job: Path, *args: str) -> list[str]:
    """The attack with lock_down applied in its own process first (the in-runner call)."""
    policy = {"job_dir": str(job)}
    return _escape("--lock", json.dumps(policy), *args)


def _old_worker(job: Path, *args: str) -> list[str]:
    """The attack under the current worker's own confinement (confine_worker: Landlock on writes,
    a subreaper), run from the job directory as the worker is."""
    spec = {"max_file_bytes": 2**30, "build_cache": str(job / "builds"), "device": "cpu"}
    return _escape("--worker-confinement", json.dumps(spec), *args)


def _first_line(process) -> dict:
    line = process.stdout.readline()
    assert line, "the attack printed nothing"
    return json.loads(line)


def _applied(stderr: str) -> dict:
    """What lock_down returned, as the attack script printed it on stderr (warnings may precede)."""
    return next(json.loads(line)["lock_down"] for line in stderr.splitlines() if line.startswith('{"lock_down"'))


def _job(tmp_path: Path) -> Path:
    job = tmp_path / "jobs" / "a"
    job.mkdir(parents=True)
    return job


# (i) CLONE_PARENT + setsid + an empty environment ---------------------------------------------


def test_a_clone_parent_daemon_escapes_a_subreaper_but_not_the_namespace(marker, tmp_path):
    _need_namespace()
    # Control: the old defence. The worker is a subreaper; the daemon is its sibling, a child of
    # the worker's parent (here, this test), and the tree walk below the worker does not see it.
    worker = subprocess.Popen(_escape("--subreaper", "clone-parent", marker, "--sweep"), stdout=subprocess.PIPE)
    line, swept = _first_line(worker), _first_line(worker)
    worker.wait(10)
    assert line["clone"] > 0 and line["running"] and swept == {"swept": 0}
    assert _holders(marker), "the attack no longer escapes a subreaper: the control is broken"
    os.kill(line["clone"], signal.SIGKILL)
    os.waitpid(line["clone"], 0)

    # The namespace: the same daemon dies with it, both on kill() and when the target exits.
    for stay in (True, False):
        process = spawn.spawn_confined(
            _escape("clone-parent", marker, *(["--stay"] if stay else [])), stdout=subprocess.PIPE
        )
        assert process.pid_namespace and process.proc == "fresh", (process.reason, process.proc)
        line = _first_line(process)
        assert line["clone"] > 0 and line["running"] and _holders(marker)
        if stay:
            process.kill()
            assert process.returncode == -signal.SIGKILL
        else:
            assert process.wait(10) == 0
        assert _holders(marker) == [], "a CLONE_PARENT daemon outlived its namespace"


def test_under_lock_down_clone_parent_itself_fails(marker, tmp_path):
    _need_namespace()
    _need_seccomp()
    job = _job(tmp_path)
    for args, lock in ((_locked(job, "clone-parent", marker), None), (_escape("clone-parent", marker), _policy(job))):
        process = spawn.spawn_confined(args, stdout=subprocess.PIPE, lock=lock)
        line = _first_line(process)
        assert process.wait(10) == 0
        assert line == {"clone": -errno.EPERM}
        assert _holders(marker) == []


# (ii) a double-forked setsid daemon -------------------------------------------------------------


@pytest.mark.parametrize("namespace", [True, False], ids=["pid-namespace", "degraded-subreaper"])
def test_a_double_forked_daemon_dies_with_the_runner(marker, namespace):
    if namespace:
        _need_namespace()
    process = spawn.spawn_confined(
        _escape("double-fork", marker, "--stay"), stdout=subprocess.PIPE, pid_namespace=namespace
    )
    assert process.pid_namespace is namespace
    assert _first_line(process) == {"forked": True, "running": True}
    assert _holders(marker)
    process.kill()
    assert _holders(marker) == []
    # and when the target exits by itself
    process = spawn.spawn_confined(_escape("double-fork", marker), stdout=subprocess.PIPE, pid_namespace=namespace)
    assert _first_line(process)["running"]
    assert process.wait(10) == 0
    assert _holders(marker) == []


@pytest.mark.parametrize("thread", [False, True], ids=["main-thread", "short-lived-thread"])
def test_the_namespace_dies_with_its_spawner_not_with_its_thread(marker, thread):
    """SIGKILL the spawner: the runner and its daemon go too. Spawned from a thread that then
    ends, the runner lives on (PR_SET_PDEATHSIG would have killed it) until the spawner dies."""
    _need_namespace()
    code = f"""
        import subprocess, sys, threading, time
        from kevin.evaluator import spawn
        box = []
        def start():
            box.append(spawn.spawn_confined({_escape("double-fork", marker, "--stay")!r}, stdout=subprocess.PIPE))
        if {thread!r}:
            worker = threading.Thread(target=start)
            worker.start()
            worker.join()
        else:
            start()
        print(box[0].stdout.readline().decode().strip(), flush=True)
        time.sleep(600)
    """
    spawner = subprocess.Popen(
        [PYTHON, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(REPO))
    )
    try:
        assert json.loads(spawner.stdout.readline())["running"]
        time.sleep(0.3)
        assert _holders(marker), "the runner died with the thread that spawned it"
    finally:
        spawner.kill()
        spawner.wait()
    assert _left_after(marker, 5) == [], "the runner's daemon outlived the spawner"


def test_a_kill_past_its_grace_leaves_nothing_below_a_subreaper_spawner(marker):
    """A supervisor that does not end within the grace is SIGKILLed; its init and target, handed to
    the spawner (a subreaper, as kevin's worker is), must be gone when kill() returns: the sandbox
    walks the worker's tree right after its result and counts whatever lives there as left behind."""
    _need_namespace()
    code = f"""
        import json, os, subprocess
        from kevin.evaluator import confine, procfs, spawn
        confine.become_subreaper()
        process = spawn.spawn_confined({_escape("double-fork", marker, "--stay")!r}, stdout=subprocess.PIPE)
        process.stdout.readline()
        process.kill(grace=0.0)
        print(json.dumps([open(f"/proc/{{pid}}/comm").read().strip() for pid in procfs.descendants(os.getpid())]))
    """
    done = subprocess.run(
        [PYTHON, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [], "processes below the spawner outlived kill()"
    assert _left_after(marker, 5) == []


# (iii) and (iv) reads: another job's files, the baseline cache, lock files ---------------------


@pytest.mark.parametrize("where", ["in-process", "before-exec"])
def test_a_daemon_cannot_read_another_jobs_files_or_the_caches(tmp_path, where):
    _need_namespace()
    _need_landlock()
    job, other = _job(tmp_path), tmp_path / "jobs" / "b"
    other.mkdir()
    (other / "job.json").write_text(json.dumps({"seed": 1234, "token": "other-jobs-secret"}))
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "baselines.json").write_text("{}")
    targets = [str(other / "job.json"), str(other), str(cache / "baselines.json"), str(tmp_path / "jobs")]

    # Control: under the current worker's confinement the daemon reads all of it.
    control = subprocess.run(
        _old_worker(job, "daemon-read", str(job / "control.json"), *targets),
        capture_output=True,
        text=True,
        timeout=30,
        cwd=str(job),
    )
    assert json.loads(control.stdout) == dict.fromkeys(targets, 0), control.stderr

    out = str(job / "found.json")
    if where == "in-process":
        process = spawn.spawn_confined(_locked(job, "daemon-read", out, *targets), stdout=subprocess.PIPE)
    else:
        process = spawn.spawn_confined(
            _escape("daemon-read", out, *targets), stdout=subprocess.PIPE, lock=_policy(job)
        )
    found = _first_line(process)
    process.wait(10)
    assert found == dict.fromkeys(targets, errno.EACCES)


def test_a_lock_file_outside_the_allowed_directories_cannot_be_opened(tmp_path):
    _need_namespace()
    _need_landlock()
    job = _job(tmp_path)
    locks = tmp_path / "locks"
    locks.mkdir()
    lock_file = locks / "kevin-cpu.lock"
    lock_file.touch()
    # Control: the current worker may open it read-only and hold it (the stalled device).
    control = subprocess.run(
        _old_worker(job, "flock", str(lock_file)), capture_output=True, text=True, timeout=30, cwd=str(job)
    )
    assert json.loads(control.stdout) == {"open": 0, "flock": 0}, control.stderr
    process = spawn.spawn_confined(_locked(job, "flock", str(lock_file)), stdout=subprocess.PIPE)
    assert _first_line(process) == {"open": errno.EACCES}
    process.wait(10)


# (v) other processes, priorities, namespaces --------------------------------------------------


def test_calls_on_other_processes_and_namespaces_fail_with_eperm(tmp_path):
    _need_namespace()
    _need_seccomp()
    job = _job(tmp_path)
    # Control: as root under the current worker's confinement, these work (the renice).
    control = spawn.spawn_confined(_old_worker(job, "privileged"), stdout=subprocess.PIPE, cwd=str(job))
    found = _first_line(control)
    control.wait(10)
    if os.geteuid() == 0:
        assert found["setpriority_parent"] == 0 and found["setaffinity_parent"] == 0
        assert found["unshare_user"] == 0

    process = spawn.spawn_confined(_locked(job, "privileged", "--all"), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    found = _first_line(process)
    process.wait(10)
    applied = _applied(process.stderr.read().decode())
    expected = dict.fromkeys(found, errno.EPERM)
    expected.update(clone3=errno.ENOSYS, setaffinity_self=0, socketpair=0)
    if not applied["signals_scoped"]:
        expected["kill_parent"] = found["kill_parent"]  # Landlock ABI < 6: only the namespace guards it
    assert found == expected
    # nothing the candidate could do changed the runner's scheduling
    state = procfs.scheduling_state(process.pid) if process.poll() is None else None
    assert state is None or state["nice"] == 0


# (vi) what the runner needs still works ---------------------------------------------------------


@pytest.mark.parametrize("where", ["in-process", "before-exec"])
def test_torch_and_the_stdlib_work_under_lock_down(tmp_path, where):
    _need_namespace()
    _need_landlock()
    _need_seccomp()
    job = _job(tmp_path)
    if where == "in-process":
        process = spawn.spawn_confined(
            _locked(job, "torch"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(job)
        )
    else:
        process = spawn.spawn_confined(
            _escape("torch"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(job), lock=_policy(job)
        )
    out, err = process.stdout.read().decode(), process.stderr.read().decode()
    assert process.wait(120) == 0, err
    found = json.loads(out)
    assert found["product_finite"] and found["total_positive"] and found["thread"]
    assert found["child"] == "child" and found["torch_threads"] == 2
    assert found["stdlib"] == ["decimal", "email.parser", "sqlite3"]
    if where == "in-process":
        applied = _applied(err)
        assert err.count("lock_down: ") == len(applied["degraded"]), err  # each shortfall logged
    else:
        applied = process.lockdown
    assert applied["no_new_privs"] and applied["seccomp"] and applied["reads_confined"]
    assert applied["capabilities_dropped"] or os.geteuid() != 0
    if where == "before-exec" or applied["threads"] == 1:
        assert applied["landlock_all_threads"] and applied["degraded"] == []
    else:
        # torch's import started a thread before lock_down: said, not hidden
        assert not applied["landlock_all_threads"] or applied["landlock_abi"] >= 8
        assert any("thread" in note for note in applied["degraded"])


def test_tritons_host_side_works_under_the_gpu_runners_lock_down(tmp_path):
    """Triton's first launch, GPU aside, in a runner confined as a GPU runner is (kevin.evaluator.
    worker.harness.launch_runner: TMPDIR in the job directory): `ldconfig -p`, the launcher stub
    built with the host compiler and imported from TMPDIR, ptxas run from site-packages."""
    import shutil

    _need_namespace()
    _need_landlock()
    _need_seccomp()
    if shutil.which("cc") is None or not Path("/sbin/ldconfig").exists():
        pytest.skip("needs a host C compiler and /sbin/ldconfig, as Triton does")
    job = _job(tmp_path)
    env = dict(os.environ, TMPDIR=str(job), HOME=str(job))
    process = spawn.spawn_confined(
        _escape("triton-host"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(job), env=env,
        lock=_policy(job, cuda=True, unix_sockets=True),
    )
    out, err = process.stdout.read().decode(), process.stderr.read().decode()
    assert process.wait(120) == 0, err
    found = json.loads(out)
    assert found["ldconfig"] == 0 and found["ldconfig_lines"] > 1, found
    assert found["build"] == 0 and found["answer"] == 42, found["build_error"]
    assert found["folder"].startswith(str(job))
    assert found["ptxas"] in (None, 0), found  # None: triton not installed here
    assert process.lockdown["reads_confined"] and process.lockdown["seccomp"]


@pytest.mark.gpu
@pytest.mark.parametrize("where", ["in-process", "before-exec"])
def test_cuda_works_under_lock_down(tmp_path, where):
    """The CUDA driver under the runner's policy (cuda=True): /dev's NVIDIA entries, /proc writes
    for its thread names, the seccomp filter, no capabilities."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    _need_namespace()
    _need_landlock()
    job = _job(tmp_path)
    if where == "in-process":
        policy = {"job_dir": str(job), "cuda": True}
        args, lock = _escape("--lock", json.dumps(policy), "cuda"), None
    else:
        args, lock = _escape("cuda"), _policy(job, cuda=True)
    process = spawn.spawn_confined(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(job), lock=lock)
    out, err = process.stdout.read().decode(), process.stderr.read().decode()
    assert process.wait(300) == 0, err
    found = json.loads(out)
    assert found["product_finite"] and found["side_stream"] and found["devices"] >= 1
    applied = _applied(err) if where == "in-process" else process.lockdown
    assert applied["seccomp"] and applied["reads_confined"], applied


def test_the_namespace_has_its_own_proc_with_sysctls_read_only():
    """Inside, /proc is the namespace's (pids match, the spawner's processes are not there) and
    what a root runner could write to reach the host (/proc/sys, /proc/sysrq-trigger) is mounted
    read-only; outside, nothing changed."""
    _need_namespace()
    guarded = [path for path in ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq") if os.path.exists(path)]
    code = (
        "import os, json; print(json.dumps(dict(pid=os.getpid(), self=os.readlink('/proc/self'),"
        " processes=sum(name.isdigit() for name in os.listdir('/proc')),"
        f" read_only=[bool(os.statvfs(p).f_flag & os.ST_RDONLY) for p in {guarded!r}])))"
    )
    process = spawn.spawn_confined([PYTHON, "-c", code], stdout=subprocess.PIPE)
    found = _first_line(process)
    assert process.wait(10) == 0
    assert process.proc == "fresh"
    assert found["self"] == str(found["pid"]) and found["pid"] == 2  # pid 1 is nsinit's init
    assert found["processes"] <= 3  # init, the target, at most a dying helper
    assert found["read_only"] == [True] * len(guarded) and "/proc/sys" in guarded
    assert not os.statvfs("/proc/sys").f_flag & os.ST_RDONLY or os.geteuid() != 0


# the spawner's view of the runner ----------------------------------------------------------------


def test_the_spawner_sees_the_runners_threads_priority_and_affinity():
    _need_namespace()
    cpu = min(os.sched_getaffinity(0))
    process = spawn.spawn_confined(_escape("scheduling", "7", str(cpu), "3"), stdout=subprocess.PIPE)
    try:
        assert _first_line(process) == {"ready": True}
        assert procfs.os_thread_count(process.pid) == 4
        state = procfs.scheduling_state(process.pid)
        assert state["nice"] == 7 and state["affinity"] == [cpu] and state["policy"] == "SCHED_OTHER"
        assert len(state["threads"]) == 4
    finally:
        process.kill()


# degraded modes: said, not silent ----------------------------------------------------------------


def _spawner(code: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        **kwargs,
    )


def test_a_spawner_that_cannot_make_namespaces_says_so_once_and_still_kills_the_tree(marker):
    _need_seccomp()
    code = f"""
        import json, logging, subprocess, sys
        logging.basicConfig(stream=sys.stderr, format="%(levelname)s %(message)s")
        from kevin.evaluator import confine, seccomp_filter, spawn
        assert seccomp_filter.install() == (True, "")   # from here on no unshare, for it or its children
        seen = []
        for _ in range(2):
            process = spawn.spawn_confined({_escape("double-fork", marker, "--stay")!r}, stdout=subprocess.PIPE)
            line = json.loads(process.stdout.readline())
            process.kill()
            seen.append(dict(namespace=process.pid_namespace, reason=process.reason, running=line["running"]))
        print(json.dumps(seen))
    """
    done = _spawner(code)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert [entry["namespace"] for entry in seen] == [False, False]
    assert all(entry["running"] for entry in seen)
    assert "unshare(CLONE_NEWPID): Operation not permitted" in seen[0]["reason"]
    assert done.stderr.count("no PID namespace") == 1, done.stderr
    assert _holders(marker) == []


@pytest.mark.parametrize("setfcap", [True, False], ids=["with-setfcap", "without-setfcap"])
def test_without_cap_sys_admin_a_user_namespace_holds_the_pid_namespace(marker, setfcap):
    """A root spawner whose bounding set lacks CAP_SYS_ADMIN (so nsinit has it neither): the PID
    namespace is made inside a user namespace, which needs CAP_SETFCAP to map uid 0 (Linux 5.12+);
    without that, the reason says so and the subreaper still kills the tree."""
    if os.geteuid() != 0:
        pytest.skip("this test narrows root's capabilities; run as root")
    keep = 31 if setfcap else -1  # CAP_SETFCAP
    code = f"""
        import ctypes, json, subprocess
        from kevin.evaluator import spawn
        libc = ctypes.CDLL(None, use_errno=True)
        last = int(open("/proc/sys/kernel/cap_last_cap").read())
        for cap in range(last + 1):
            if cap != {keep}:
                assert libc.prctl(24, cap, 0, 0, 0) == 0  # PR_CAPBSET_DROP: what an exec gets back
        process = spawn.spawn_confined({_escape("double-fork", marker, "--stay")!r}, stdout=subprocess.PIPE)
        line = json.loads(process.stdout.readline())
        process.kill()
        print(json.dumps(dict(namespace=process.pid_namespace, reason=process.reason, proc=process.proc, line=line)))
    """
    done = _spawner(code)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["line"]["running"]
    assert _holders(marker) == []
    if not setfcap:
        assert not seen["namespace"] and "CAP_SETFCAP" in seen["reason"]
        assert "no PID namespace" in done.stderr
    elif not seen["namespace"]:
        pytest.skip(f"no user namespaces here: {seen['reason']}")
    else:
        assert "user namespace" in seen["reason"] and seen["proc"].startswith("fresh"), seen
