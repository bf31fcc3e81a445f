"""The worker's confinement and the parent's checks on it, without building anything: the channel
token, Landlock on writes, the subreaper's tree walk, fresh timed inputs, and the tamper snapshot
(torch modes, kevin's own functions, clocks)."""

from __future__ import annotations

import json
import mmap
import os
import subprocess
import sys
import textwrap
import threading
import time
import types
from pathlib import Path

import pytest
import torch

from kevin.evaluator import confine, inputs, procfs
from kevin.evaluator.sandbox import Limits, _supervise

REPO = Path(__file__).resolve().parents[2]


def _python(code: str, **kwargs) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        **kwargs,
    )


def test_the_parent_drops_and_counts_lines_without_the_token():
    read_fd, write_fd = os.pipe()
    forged = {"event": "result", "result": {"stage": "ok", "correct": True}}
    code = f"""
        import json, os
        from kevin.evaluator.confine import Channel
        os.write({write_fd}, (json.dumps({forged!r}) + "\\n").encode())   # what a candidate can do
        channel = Channel({write_fd}, "secret-token")
        channel.send({{"event": "stage", "stage": "compile"}})
        channel.send({{"event": "result", "result": {{"stage": "correctness", "correct": False}}}})
    """
    env = dict(os.environ, PYTHONPATH=str(REPO))
    process = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], pass_fds=(write_fd,), env=env)
    os.close(write_fd)
    try:
        outcome = _supervise(process, read_fd, Limits(), "secret-token")
    finally:
        process.wait()
        os.close(read_fd)
    assert outcome.forged_messages == 1
    assert outcome.result == {"stage": "correctness", "correct": False}
    assert outcome.last_stage == "compile"


def test_the_channel_moves_to_a_close_on_exec_descriptor():
    read_fd, write_fd = os.pipe()
    channel = confine.Channel(write_fd, "t")
    try:
        import fcntl

        assert channel.fd != write_fd and fcntl.fcntl(channel.fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
        with pytest.raises(OSError):
            os.fstat(write_fd)  # the number the parent passed is closed
        channel.send({"event": "stage", "stage": "x"})
        message = json.loads(os.read(read_fd, 4096))
        assert confine.authentic(message, "t") and not confine.authentic(message, "u")
        assert not confine.authentic({"event": "stage"}, "t")
    finally:
        os.close(channel.fd)
        os.close(read_fd)


def test_landlock_confines_writes_to_the_allowed_directories(tmp_path):
    allowed, outside = tmp_path / "job", tmp_path / "cache"
    allowed.mkdir()
    outside.mkdir()
    (outside / "baseline.json").write_text("{}")
    done = _python(f"""
        from pathlib import Path
        from kevin.evaluator import confine
        abi = confine.confine_writes([{str(allowed)!r}], [])
        print(abi)
        if abi:
            Path({str(allowed)!r}, "ok.txt").write_text("fine")
            for write in (lambda: Path({str(outside)!r}, "baseline.json").write_text("poison"),
                          lambda: Path({str(outside)!r}, "new.txt").write_text("x"),
                          lambda: Path("/tmp/kevin-confine-test-marker").write_text("x")):
                try:
                    write()
                    print("WROTE")
                except PermissionError:
                    print("denied")
    """)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split()
    if lines[0] == "0":
        pytest.skip("this kernel has no Landlock")
    assert lines[1:] == ["denied", "denied", "denied"]
    assert (allowed / "ok.txt").read_text() == "fine"
    assert (outside / "baseline.json").read_text() == "{}"


def test_a_cuda_job_may_name_its_threads_a_cpu_job_may_not(tmp_path):
    """The CUDA driver writes /proc/self/task/<tid>/comm in cuInit; denied, CUDA fails with error 304."""
    results = {}
    for device in ("cuda:0", "cpu"):
        job = {"max_file_bytes": 2**30, "build_cache": str(tmp_path / "builds"), "device": device}
        done = _python(
            f"""
            import threading
            from kevin.evaluator import confine
            print(confine.confine_worker({job!r})["landlock_abi"])
            try:
                with open(f"/proc/self/task/{{threading.get_native_id()}}/comm", "w") as handle:
                    handle.write("kevin-named")
                print("named")
            except PermissionError:
                print("denied")
        """,
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr
        results[device] = done.stdout.split()
    if results["cpu"][0] == "0":
        pytest.skip("this kernel has no Landlock")
    assert results == {"cuda:0": [results["cuda:0"][0], "named"], "cpu": [results["cpu"][0], "denied"]}


def test_a_subreaper_finds_and_kills_a_double_forked_daemon_with_no_environment():
    done = _python("""
        import os, time
        from kevin.evaluator import confine, procfs
        assert confine.become_subreaper()
        child = os.fork()
        if child == 0:
            os.setsid()
            if os.fork():
                os._exit(0)
            os.execve("/bin/sleep", ["sleep", "60"], {})
        os.waitpid(child, 0)
        time.sleep(0.2)
        found = procfs.descendants(os.getpid())
        print(len(found), found[0] if found else 0, procfs.kill_descendants(os.getpid()))
        time.sleep(0.2)
        print(len(procfs.descendants(os.getpid())))
    """)
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    count, daemon, killed = map(int, first.split())
    assert count == 1 and killed == 1
    assert second == "0"
    assert procfs.parent_of(daemon) is None or not procfs.parent_of(daemon)[1]


def test_the_sandbox_names_each_process_it_finds_left_with_how_it_found_it():
    """`left_processes` on a verdict comes with `checks.left_processes`: which processes, in what
    state, and why they counted (below the worker, in its session, with its token)."""
    from kevin.evaluator.sandbox import _kill_everything

    code = "import os, subprocess, time\nsubprocess.Popen(['sleep', '307'])\nprint(os.getpid(), flush=True)\ntime.sleep(60)\n"
    worker = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert int(worker.stdout.readline()) == worker.pid
        deadline = time.monotonic() + 10
        while not procfs.descendants(worker.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        (child,) = procfs.descendants(worker.pid)
        found, running = _kill_everything(worker.pid, "no-such-token")
        assert found == [f"{child} sleep S below the worker"] and running == 1, found
    finally:
        worker.kill()
        worker.wait()


def test_a_process_that_has_begun_to_exit_is_told_from_a_running_one():
    """The sandbox's walk right after a result may meet a runner the worker killed, still tearing
    down: exiting (PF_EXITING, or a zombie), it was not left running."""
    me = os.getpid()
    assert procfs.running(me, procfs.stat_fields(me))
    dying = [b"R", b"1", b"1", b"1", b"0", b"-1", str(0x400000 | procfs.PF_EXITING).encode()]
    assert not procfs.running(2**22 + 1, dying)  # no such pid: no other thread to read
    assert procfs.running(2**22 + 1, [b"R", b"1", b"1", b"1", b"0", b"-1", b"4194304"])
    child = subprocess.Popen(["true"])
    deadline = time.monotonic() + 10
    while (procfs.stat_fields(child.pid) or [b"Z"])[0] != b"Z" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert procfs.parent_of(child.pid) == (me, False)  # a zombie until reaped
    child.wait()


def test_a_process_whose_leader_thread_ended_alone_is_running_and_is_killed():
    """SYS_exit from the main thread ends that thread only: /proc/<pid>/stat then says Z while the
    other threads run on. The tree walk took such a process for a zombie, so a daemon made that way
    was neither counted nor killed."""
    if os.uname().machine != "x86_64":
        pytest.skip("the test's syscall number is x86-64's")
    holder = textwrap.dedent(
        """
        import ctypes, threading, time
        threading.Thread(target=lambda: [time.sleep(0.05) for _ in iter(int, 1)]).start()
        print("ready", flush=True)
        ctypes.CDLL(None).syscall(60, 0)  # SYS_exit on x86-64: this thread alone
        """
    )
    parent_code = (
        "import subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', {holder!r}], stdout=subprocess.PIPE, text=True)\n"
        "child.stdout.readline()\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        pid = int(parent.stdout.readline())
        deadline = time.monotonic() + 10
        while procfs.stat_fields(pid)[0] != b"Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert procfs.stat_fields(pid)[0] == b"Z"  # the leader alone has ended
        assert procfs.parent_of(pid) == (parent.pid, True)
        assert procfs.descendants(parent.pid) == [pid]
        assert procfs.kill_descendants(parent.pid) == 1
        deadline = time.monotonic() + 10
        while procfs.parent_of(pid) != (parent.pid, False) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert procfs.parent_of(pid) == (parent.pid, False), "its other thread outlived the kill"
    finally:
        parent.kill()
        parent.wait()


def test_timed_inputs_are_fresh_values_not_rows_seen_before():
    problem = types.ModuleType("p")
    exec(
        "import torch\nclass Model(torch.nn.Module):\n    pass\n"
        "def get_inputs():\n    return [torch.rand(16, 8), 3]\n",
        problem.__dict__,
    )
    trials = inputs.draw_trials(problem, 7, 2, 0, "cpu", torch.float32)
    fresh = inputs.FreshInputs(problem, "cpu", torch.float32)
    assert not hasattr(problem, "Model"), "the reference stays unreachable from the kept get_inputs"
    buffers = [trials[0][0].clone(), 3]
    pointer = buffers[0].data_ptr()
    seen = {tuple(row.tolist()) for trial in trials for row in trial[0]}
    fresh.fill(buffers, 12345)
    first = buffers[0].clone()
    assert buffers[0].data_ptr() == pointer
    assert not seen & {tuple(row.tolist()) for row in buffers[0]}
    fresh.fill(buffers, 999)
    assert not torch.equal(first, buffers[0])
    fresh.fill(buffers, 12345)  # a kept timed call's inputs are rebuilt from its seed
    assert torch.equal(first, buffers[0])






def _workers_of(parent: int) -> list[int]:
    """The workers below `parent`: its children, or with KEVIN_WORKER_ZYGOTE=1 its zygote and the
    workers forked from it (they carry the zygote's command line)."""
    from kevin.evaluator.procfs import descendants

    found = []
    for pid in descendants(parent):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"kevin.evaluator.worker" in cmdline or b"kevin.evaluator.zygote" in cmdline:
            found.append(pid)
    return found


def test_a_worker_dies_with_its_supervisor(tmp_path):
    """A supervisor killed mid-evaluation (a test timeout, an OOM kill) must not leave its worker
    running: a worker stuck in a candidate would otherwise hold the device lock forever."""
    problem = (REPO / "tests" / "data" / "eval" / "problem_scale_relu.py").read_text()
    hang = (
        "import torch\n"
        "class ModelNew(torch.nn.Module):\n"
        "    def __init__(self, *args):\n"
        "        super().__init__()\n"
        "    def forward(self, x):\n"
        "        while True:\n"
        "            pass\n"
    )
    (tmp_path / "problem.py").write_text(problem)
    (tmp_path / "candidate.py").write_text(hang)
    code = f"""
        from pathlib import Path
        from kevin.evaluator.evaluate import EvalConfig, evaluate
        from kevin.tasks import Task
        task = Task.from_source(Path({str(tmp_path / "problem.py")!r}).read_text(), id="p", name="p")
        config = EvalConfig(backend="cpp", cache_dir={str(tmp_path / "cache")!r}, lock_dir={str(tmp_path)!r},
                            static_check=False, workdir_root={str(tmp_path)!r})
        evaluate(task, Path({str(tmp_path / "candidate.py")!r}).read_text(), config)
    """
    env = dict(os.environ, PYTHONPATH=str(REPO))
    supervisor = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=env)
    try:
        deadline = time.monotonic() + 60
        workers: list[int] = []
        while not workers and time.monotonic() < deadline:
            time.sleep(0.2)
            workers = _workers_of(supervisor.pid)
        assert workers, "no worker appeared"
        time.sleep(3)  # well into the candidate's endless forward
        supervisor.kill()
        supervisor.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in workers):
            time.sleep(0.1)
        alive = [pid for pid in workers if Path(f"/proc/{pid}").exists()]
        for pid in alive:
            os.kill(pid, 9)
        assert not alive, "the worker outlived its supervisor"
    finally:
        supervisor.kill()


def test_the_seccomp_program_assembles_for_x86_64_and_aarch64():
    from kevin.evaluator import seccomp_filter

    for machine in ("x86_64", "aarch64"):
        program = seccomp_filter.program(machine)
        assert program[0] == (0x20, 0, 0, 4), "the first instruction loads the architecture"
        assert all(0 <= jt <= 255 and 0 <= jf <= 255 for _, jt, jf, _ in program)
        assert any(op == 0x45 and k == seccomp_filter.CLONE_DENIED for op, _, _, k in program)  # jset
        assert program[-2:] == [(0x06, 0, 0, 0x00050000 | 1), (0x06, 0, 0, 0x00050000 | 38)]  # EPERM, ENOSYS
        assert "jset" in seccomp_filter.describe(machine)
    assert seccomp_filter.CLONE_DENIED & 0x00008000 and seccomp_filter.CLONE_DENIED & 0x10000000


def test_the_readable_roots_hold_python_and_kevin_but_not_the_jobs_parent(tmp_path):
    job = tmp_path / "jobs" / "a"
    policy = confine.LockDown(job_dir=str(job), build_cache=str(tmp_path / "builds"))
    roots = confine.readable_roots(policy)
    assert str(job) in roots and str(tmp_path / "builds") in roots
    assert sys.prefix in roots and str(REPO / "kevin") in roots
    assert not any(confine._within(str(job.parent), root) for root in roots)


def test_os_threads_and_scheduling_state_are_read_from_proc():
    import threading

    before = procfs.os_thread_count()
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert procfs.os_thread_count() == before + 1
        assert procfs.os_thread_count(os.getpid()) == before + 1
        state = procfs.scheduling_state()
        assert len(state["threads"]) == before + 1 and state["uniform"]
        assert state["nice"] == os.getpriority(os.PRIO_PROCESS, 0)
        assert state["affinity"] == sorted(os.sched_getaffinity(0))
        assert state["policy"] == "SCHED_OTHER"
    finally:
        stop.set()
        thread.join()


def test_lock_down_without_its_job_directory_fails_before_confining(tmp_path):
    done = _python(f"""
        from kevin.evaluator import confine
        try:
            confine.lock_down(confine.LockDown(job_dir={str(tmp_path / "missing")!r}))
        except FileNotFoundError:
            print("refused", open("/proc/self/status").read().count("NoNewPrivs:\\t0"))
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["refused", "1"]


def test_counters_see_this_process_fault_and_sleep():
    """procfs.counters: what the judge reads of a runner around its timing (s33)."""
    # 32 MiB of fresh pages, written: minor faults. A mapping of its own (not whatever the heap
    # holds), without huge pages (16 faults, not 8192). CI at s41's stop counted 0 faults with a
    # bytearray: the message now says what /proc/self read beside /proc/<pid>.
    pages = mmap.mmap(-1, 32 << 20)
    if hasattr(mmap, "MADV_NOHUGEPAGE"):
        pages.madvise(mmap.MADV_NOHUGEPAGE)
    before = procfs.counters(os.getpid())
    for offset in range(0, len(pages), 4096):
        pages[offset] = 1
    time.sleep(0.01)  # a voluntary switch of the main thread
    counted = procfs.counted_since(before, os.getpid())
    seen = f"{counted}; /proc/self/stat minflt {procfs.stat_fields('self')[7]!r}, pid {os.getpid()}"
    assert counted["minflt"] >= 1000 and counted["voluntary"] >= 1 and counted["majflt"] >= 0, seen
    assert procfs.counters(2**22 + 1) is None and procfs.counted_since(None, os.getpid()) is None


def test_a_thread_that_ends_between_the_reads_takes_no_switches_away():
    """s34's H100 run read `voluntary: -1` for a timed runner: the counts were summed over the threads
    alive at each read, so a thread that ended took its switches out of the second sum. Only threads
    seen at both reads are compared (and those started since count whole); the ended are counted."""

    def sleeper():
        for _ in range(200):
            time.sleep(0.0005)  # voluntary switches, then the thread ends

    ending = threading.Thread(target=sleeper)
    ending.start()
    time.sleep(0.02)
    before = procfs.counters(os.getpid())
    ending.join()
    started = threading.Thread(target=sleeper)
    started.start()
    started.join()  # born and gone between the reads: neither seen nor counted
    late = threading.Event()
    waiting = threading.Thread(target=late.wait)
    waiting.start()  # started since the first read and alive at the second: counted whole
    time.sleep(0.02)
    counted = procfs.counted_since(before, os.getpid())
    late.set()
    waiting.join()
    assert counted["voluntary"] >= 0 and counted["forced"] >= 0, counted
    assert counted["threads_ended"] == 1 and counted["threads_started"] == 1, counted
