"""Runners forked from their judge (`spawn_confined(target=...)`, session 27): a runner that starts
with torch already imported must be confined exactly as one that executes afresh.

Each test fails without the piece it names: the target's descriptors (only those passed), the
supervisor and init going on as nsinit alone (no copy of the spawner's memory), the exit status
and the kill, the spawner's death, the lock, the heap policy, and when a fork is refused.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from test_escape import (  # noqa: F401 - marker: the fixture
    REPO,
    _escape,
    _first_line,
    _holders,
    _left_after,
    _need_landlock,
    _need_namespace,
    marker,
)

from kevin.evaluator import confine, spawn

MB = 1 << 20


def _exec(argv: list[str]):
    """A target that becomes `argv` (an attack script), as a forked runner could."""

    def run() -> int:
        os.execv(argv[0], argv)
        return 127

    return run


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / MB


def test_the_target_holds_only_the_descriptors_passed_and_starts_with_the_spawners_modules(tmp_path):
    import torch  # noqa: F401 - what a judge has imported when it forks its runners

    secret = os.open(__file__, os.O_RDONLY)  # a judge's job pipe, another runner's socket ...
    read_end, write_end = os.pipe()
    try:

        def target() -> int:
            fds = sorted(int(name) for name in os.listdir("/proc/self/fd"))
            seen = {"fds": fds, "torch": "torch" in sys.modules, "cwd": os.getcwd(), "env": os.environ.get("X_K")}
            os.write(write_end, json.dumps(seen).encode())
            return 0

        process = spawn.spawn_confined(
            ["runner"], pass_fds=[write_end], target=target, cwd=str(tmp_path), env=dict(os.environ, X_K="v")
        )
        assert process.wait(30) == 0
        seen = json.loads(os.read(read_end, 4096))
    finally:
        for fd in (secret, read_end, write_end):
            os.close(fd)
    # 0-2, the descriptor passed, and the one listing /proc/self/fd: nothing of the spawner's.
    assert secret not in seen["fds"] or secret == write_end
    assert len([fd for fd in seen["fds"] if fd > 2]) == 2 and write_end in seen["fds"]
    assert seen["torch"] and seen["cwd"] == str(tmp_path) and seen["env"] == "v"


def test_the_supervisor_and_init_keep_no_copy_of_the_spawner(tmp_path):
    _need_namespace()
    import torch  # noqa: F401

    ballast = bytearray(300 * MB)  # written: resident in the spawner, and in a fork of it until exec
    ballast[:: 4096] = b"x" * len(ballast[:: 4096])
    process = spawn.spawn_confined(["runner"], target=lambda: time.sleep(30))
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            commands = {pid: Path(f"/proc/{pid}/cmdline").read_bytes() for pid in (process.supervisor_pid, process.init_pid)}
            if all(b"--resume=" in command for command in commands.values()):
                break
            time.sleep(0.05)
        assert b"nsinit.py\0--resume=supervisor" in commands[process.supervisor_pid]
        assert b"nsinit.py\0--resume=init" in commands[process.init_pid]
        assert _rss_mb(process.supervisor_pid) < 64 and _rss_mb(process.init_pid) < 64
        assert _rss_mb(process.pid) > 300  # the target is the fork: the spawner's pages, shared
    finally:
        process.kill()
    assert process.returncode == -9
    del ballast


@pytest.mark.parametrize("how", ["code", "signal", "exception"])
def test_the_targets_end_is_the_supervisors(how):
    def target() -> int:
        if how == "signal":
            os.kill(os.getpid(), 11)
        if how == "exception":
            raise RuntimeError("the runner broke")
        return 7

    process = spawn.spawn_confined(["runner"], target=target, stderr=subprocess.PIPE)
    code = process.wait(30)
    assert code == {"code": 7, "signal": -11, "exception": 1}[how]
    if how == "exception":
        assert b"RuntimeError: the runner broke" in process.stderr.read()


def test_a_forked_runners_daemon_dies_with_it_and_with_the_spawner(marker):  # noqa: F811
    _need_namespace()
    process = spawn.spawn_confined(["runner"], target=_exec(_escape("double-fork", marker, "--stay")), stdout=subprocess.PIPE)
    assert _first_line(process) == {"forked": True, "running": True}
    process.kill()
    assert _left_after(marker, 5) == []
    # The spawner killed outright: the lifeline reaches the supervisor after its exec too.
    code = f"""
        import subprocess, sys, time
        import torch
        from kevin.evaluator import spawn
        from test_fork_spawn import _exec
        process = spawn.spawn_confined(["runner"], target=_exec({_escape("double-fork", marker, "--stay")!r}), stdout=subprocess.PIPE)
        print(process.stdout.readline().decode().strip(), flush=True)
        time.sleep(600)
    """
    path = os.pathsep.join([str(REPO), str(Path(__file__).parent)])
    spawner = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=path))
    try:
        assert json.loads(spawner.stdout.readline())["running"]
        assert _holders(marker)
    finally:
        spawner.kill()
        spawner.wait()
    assert _left_after(marker, 5) == [], "a forked runner's daemon outlived the spawner"


def test_the_lock_holds_in_a_forked_runner(tmp_path):
    _need_namespace()
    _need_landlock()
    job, other = tmp_path / "job", tmp_path / "other"
    job.mkdir()
    other.mkdir()
    (other / "secret").write_text("another job's")
    read_end, write_end = os.pipe()

    def target() -> int:
        try:
            (other / "secret").read_text()
            seen = "read"
        except PermissionError:
            seen = "denied"
        os.write(write_end, seen.encode())
        return 0

    policy = confine.LockDown(job_dir=str(job))
    process = spawn.spawn_confined(["runner"], pass_fds=[write_end], target=target, lock=policy, cwd=str(job))
    try:
        assert process.wait(30) == 0
        assert os.read(read_end, 64) == b"denied"
        assert process.lockdown and process.lockdown["reads_confined"]
    finally:
        os.close(read_end)
        os.close(write_end)


HEAP = """
import contextlib, ctypes, io, json, os
import torch
from kevin.evaluator import spawn
from kevin.evaluator.worker import harness
from test_runner_heap import FREE_AND_AGAIN  # its pattern: three 1 MB blocks written and freed, again

def faults(prepare):
    read_end, write_end = os.pipe()
    def target():
        # The judge's heap in the bad mode, made certain: every megabyte block mmapped afresh. Where a
        # judge's history had already moved glibc's adaptive threshold past a megabyte (the H100's
        # CUDA torch, session 30), a fork without the policy paid nothing more and the check below
        # could not tell.
        ctypes.CDLL(None).mallopt(harness._M_MMAP_THRESHOLD, 128 * 1024)
        if prepare:
            harness.runner_heap()
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(FREE_AND_AGAIN, {})
        os.write(write_end, printed.getvalue().encode())
        return 0
    assert spawn.spawn_confined(["runner"], pass_fds=[write_end], target=target).wait(30) == 0
    return json.loads(os.read(read_end, 4096))

print(json.dumps({"policy": faults(True), "none": faults(False)}))
"""


def _fresh(code: str, *args: str) -> object:
    """The last line `code` prints as JSON, run in a fresh interpreter: what a fork inherits (the heap's
    state, Python's threads) is then a worker's at its boot, not whatever this test process has."""
    path = os.pathsep.join([str(REPO), str(Path(__file__).parent)])
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120,
        env=dict(os.environ, PYTHONPATH=path),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap")
def test_a_forked_runner_gets_the_runners_heap_policy_that_its_start_would_have_read():
    """A fork reads no GLIBC_TUNABLES (its glibc started in the judge): harness.runner_heap sets
    RUNNER_MALLOC by mallopt. The pattern is tests/evaluator/test_runner_heap.py's bad mode."""
    seen = _fresh(HEAP)
    assert max(seen["policy"][1:]) < 16, seen  # the heap keeps the memory for the next call
    # What a fork without it pays every call: at least one of the three blocks mapped afresh. Not all
    # three: a block can come from free space the judge's heap already had (malloc serves a request
    # above the mmap threshold from the heap's top when it fits), whose pages the fork pays once, by
    # copy-on-write, on its first call (the H100's CUDA torch, session 34: 770 then 514 each call).
    assert min(seen["none"][1:]) >= MB // 4096 * 0.9, seen


FORKABLE = """
import json, os, threading
from kevin.evaluator import spawn
no_torch = spawn.forkable()
import torch
ok = spawn.forkable()
stop = threading.Event()
thread = threading.Thread(target=stop.wait)
thread.start()
beside_thread = spawn.forkable()
stop.set()
thread.join()
os.environ[spawn.FORK_VARIABLE] = "0"
print(json.dumps([no_torch, ok, beside_thread, spawn.forkable()]))
"""


def test_a_fork_is_refused_beside_a_python_thread_and_when_switched_off():
    no_torch, ok, beside_thread, off = _fresh(FORKABLE)
    assert "torch is not imported" in no_torch and ok == ""
    assert beside_thread == "2 Python threads"
    assert off == f"{spawn.FORK_VARIABLE}=0"


def _spec(root: Path) -> dict:
    return {
        "max_file_bytes": 1 << 26, "build_cache": str(root / "builds"), "device": "cpu", "area_bytes": 1 << 24,
        "cpu_threads": 1, "flush_l2": False, "fast_build": True,
    }  # fmt: skip


MAPS = """
import json, os, sys
from pathlib import Path
import torch
from kevin.evaluator.worker import harness
from test_fork_spawn import _spec
root = Path(sys.argv[1])
runners = [harness.launch_runner(_spec(root), root / f"home{i}", traced=False, fork=True) for i in range(2)]
seen = []
for runner in runners:
    runner.reply("boot")
    maps = Path(f"/proc/{runner.pid}/maps").read_text()
    inodes = sorted({line.split()[4] for line in maps.splitlines() if "kevin-exchange" in line})
    seen.append({"forked": runner.confinement["forked"], "inodes": inodes, "own": str(os.fstat(runner.area.fd).st_ino)})
for runner in runners:
    runner.kill()
print(json.dumps(seen))
"""


def test_a_booted_runner_maps_no_other_exchange_than_its_own(tmp_path):
    """The control runner is forked after the candidate's runner exists: without unmapping, it would
    hold the candidate's exchange area (and its judge's mapping of its own) in its memory."""
    for runner in _fresh(MAPS, str(tmp_path)):
        assert runner["forked"] and runner["inodes"] == [runner["own"]], runner


SEALED = """
import json, sys
from pathlib import Path
import torch
from kevin.evaluator import spawn
from kevin.evaluator.worker import harness
from test_fork_spawn import _spec
root = Path(sys.argv[1])
before = spawn.forkable()
spawn.seal_forks("the job is read")
runner = harness.launch_runner(_spec(root), root / "home", fork=True)
print(json.dumps([before, spawn.forkable(), runner.confinement["forked"]]))
runner.kill()
"""


def test_no_runner_is_forked_once_the_judge_has_read_its_job(tmp_path):
    """The job's secrets (seed, channel token) would be in a fork's memory: the worker seals forks
    as soon as it has read its job, and a runner launched after is executed afresh."""
    assert _fresh(SEALED, str(tmp_path)) == ["", "the job is read", False]
    source = (REPO / "kevin" / "evaluator" / "worker" / "__main__.py").read_text()
    assert source.index("spawn.seal_forks(") < source.index("Channel(int(argv[2])")  # before the job is used


def test_a_kill_right_after_the_start_is_never_lost_in_the_supervisors_exec():
    """S reports ready, then replaces its image (nsinit alone): a SIGTERM in between must wait for the
    new image's handler (blocked across the exec), not take the default action or be dropped."""
    for _ in range(10):
        process = spawn.spawn_confined(["runner"], target=lambda: time.sleep(60))
        process.kill(grace=10.0)
        assert process.returncode == -9  # nsinit's own end after a kill: SIGTERM's default gives -15
        assert not Path(f"/proc/{process.pid}").exists() or "Z" in Path(f"/proc/{process.pid}/stat").read_text().split()[2]


PROFILER = """
import json, os, sys
from pathlib import Path
import torch
from kevin.evaluator.worker import harness
from test_fork_spawn import _spec
root = Path(sys.argv[1])
os.environ["KEVIN_RUNNER_FORK"] = sys.argv[2]
runner = harness.launch_runner(_spec(root), root / "home", traced=True, fork=True)
reply = runner.reply("boot")
runner.kill()
print(json.dumps([runner.confinement["forked"], reply["profiler_imports"], reply["seconds"]["profiler"]]))
"""


@pytest.mark.parametrize("fork", ["1", "0"])
def test_a_forked_runner_warms_the_profiler_without_importing(tmp_path, fork):
    """The profiler's first start imports torch._inductor (with torch._dynamo, sympy, triton: ~900
    modules; 5.6-6.9 s of every traced runner's start on the H200 in session 28, under the device
    lock shared). The judge imports them before it forks, so a forked runner's warm-up imports none;
    a runner executed afresh still pays them (the count shows the measure can see them)."""
    forked, imported, _seconds = _fresh(PROFILER, str(tmp_path), fork)
    assert forked is (fork == "1")
    if forked:
        assert imported == 0, imported
    else:
        assert imported > 100, imported


DRIVER = """
import ctypes, json, sys
from pathlib import Path
import torch
from kevin.evaluator import probes, spawn
from kevin.evaluator.worker import harness
from test_fork_spawn import _spec
root, fake = Path(sys.argv[1]), sys.argv[2]
before = spawn.cuda_driver_started()
mapped = sorted({line.split()[-1] for line in open("/proc/self/maps") if "/libcuda.so" in line})
probes.preload_profiler = lambda: ctypes.CDLL(fake)  # as if those imports had loaded the driver
runner = harness.launch_runner(_spec(root), root / "home", traced=True, fork=True)
runner.reply("boot")
print(json.dumps([before, runner.confinement["forked"], spawn.forkable(), mapped]))
runner.kill()
"""

STAND_IN = """
int cuDeviceGetCount(int *count) {{ *count = 1; return {answer}; }}
"""


def _stand_in(folder: Path, answer: int) -> Path:
    """A libcuda.so.1 whose cuDeviceGetCount answers `answer` (3: not started; 0: started)."""
    folder.mkdir()
    path = folder / "libcuda.so.1"
    source = STAND_IN.format(answer=answer)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(path), "-x", "c", "-"], input=source, text=True, check=True)
    return path


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler for a stand-in libcuda")
def test_a_preload_that_starts_the_cuda_driver_seals_the_forks(tmp_path):
    """A child forked after the CUDA driver has started cannot use CUDA, and torch.cuda.is_initialized
    does not see a driver another library started: the preload's imports are checked for it (a
    stand-in libcuda.so.1 here, answering as a started driver), and the runner then starts afresh.
    Torch's import may map the real driver (the GPU machine's does, s32) but starts none."""
    fake = _stand_in(tmp_path / "lib", answer=0)
    before, forked, reason, mapped = _fresh(DRIVER, str(tmp_path), str(fake))
    assert before is False, f"the CUDA driver was started before the preload, by torch's import: {mapped}"
    assert forked is False
    assert reason == "importing the profiler's modules started the CUDA driver"


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler for a stand-in libcuda")
def test_a_driver_mapped_but_not_started_keeps_the_forks(tmp_path):
    """The GPU machine's torch maps libcuda.so at its import without starting it, and forks of it use
    CUDA: a mapped driver that answers CUDA_ERROR_NOT_INITIALIZED does not seal the forks (s32's H100
    found the old check, `libcuda.so` in the maps, unable to tell the two apart there)."""
    fake = _stand_in(tmp_path / "lib", answer=3)
    before, forked, reason, mapped = _fresh(DRIVER, str(tmp_path), str(fake))
    assert before is False
    assert forked is True, reason
    assert reason == ""
