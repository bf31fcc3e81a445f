"""Kevin's work for later weighs less than a timing, also between sessions (kevin.evaluator.cores.nicer_session).

Where the kernel groups sessions (autogroups, on in most distributions and on the CI and GPU
machines), a process's nice value weighs only against its own session; between sessions the CPU is
shared by autogroup, each at its own nice. Session 25 found two kinds of work meant to yield to
timings that competed as equals: compilers (nice 10, but each build in a session of its own) and a
batch's spares booting ahead (a worker and its two runners importing torch, the runners in sessions
of their own). On 2 cores with `--jobs 2`, a 1.1 ms C++ kernel timed at 2.4-3.8 ms in 5 of 6 copies
beside them; with both at a tenth of the weight, in 0 of 6.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kevin.evaluator import cores
from kevin.evaluator.fastbuild import BUILD_NICENESS, run_killable
from kevin.evaluator.procfs import descendants
from kevin.evaluator.sandbox import SPARE_NICENESS, start_worker
from kevin.evaluator.spares import boot_spec
from kevin.evaluator.worker.handle import RUNNER_NAME

needs_autogroups = pytest.mark.skipif(
    not Path("/proc/self/autogroup").exists(), reason="a kernel without scheduler autogroups"
)


RUNNER = b"kevin.evaluator.worker.runner"


def autogroup_nice(pid: int | str) -> int:
    """A session's autogroup nice; a process in the kernel's root autogroup (never in a session
    started since autogroups were on, as on the CI machine) reads an empty file and weighs as 0."""
    fields = Path(f"/proc/{pid}/autogroup").read_text().split()
    return int(fields[-1]) if fields else 0


@needs_autogroups
def test_a_build_runs_in_a_session_of_its_own_at_the_build_niceness(tmp_path):
    own = Path("/proc/self/autogroup").read_text()
    returncode, output = run_killable(["cat", "/proc/self/autogroup"], tmp_path, 30)
    assert returncode == 0 and output.split()[-1] == str(BUILD_NICENESS), output
    assert Path("/proc/self/autogroup").read_text() == own  # the caller's own session is left as it was


@needs_autogroups
def test_a_build_does_not_start_before_its_session_is_niced(tmp_path, monkeypatch):
    """Niced from outside once started, a short command read its session at nice 0 (the stop of
    session 28 failed CI on it): the command now waits until the weight is set, however late."""
    real = cores.nicer_session

    def late(pid: int, niceness: int) -> str:
        time.sleep(0.3)
        return real(pid, niceness)

    monkeypatch.setattr(cores, "nicer_session", late)
    returncode, output = run_killable(["cat", "/proc/self/autogroup"], tmp_path, 30)
    assert returncode == 0 and output.split()[-1] == str(BUILD_NICENESS), output
    returncode, output = run_killable(["sh", "-c", "cat; nice"], tmp_path, 30)
    assert returncode == 0 and output.strip() == str(BUILD_NICENESS), output  # stdin reads empty, as before


@needs_autogroups
def test_where_cores_are_kept_for_timing_a_build_keeps_its_sessions_weight(tmp_path, monkeypatch):
    """No build can run on a kept timing core: lowering its session's weight there only starved it
    against spares booting for later jobs (session 26 on the H200: 14.5 s a build against 4.7)."""
    monkeypatch.setattr(cores, "_START", cores.plan(range(8), 1))
    assert cores.current().kept
    own = Path("/proc/self/autogroup").read_text()
    returncode, output = run_killable(["cat", "/proc/self/autogroup"], tmp_path, 30)
    assert returncode == 0 and output.split()[-1] == "0", output
    assert output.split()[0] != own.split()[0] if own.split() else True  # still a session of its own
    returncode, output = run_killable(["sh", "-c", "nice"], tmp_path, 30)
    assert returncode == 0 and output.strip() == str(BUILD_NICENESS), output  # the process stays nicer


def test_a_change_the_kernel_defers_is_tried_again_then_given_up(monkeypatch):
    """Unprivileged, the kernel takes one autogroup change per 0.1 s host-wide (EAGAIN otherwise)."""
    writes: list[str] = []
    refusals = iter([True, True, False])

    class Handle:
        def __init__(self, path: str, mode: str) -> None:
            assert path == "/proc/1234/autogroup" and mode == "w"
            if next(refusals, False):
                raise BlockingIOError(11, "Resource temporarily unavailable")

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def write(self, text: str) -> None:
            writes.append(text)

    monkeypatch.setattr(cores, "open", Handle, raising=False)
    assert cores.nicer_session(1234, 10) == "set" and writes == ["10"]

    def refuse(path: str, mode: str):
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(cores, "open", refuse, raising=False)
    monkeypatch.setattr(cores, "AUTOGROUP_WAIT_S", 0.05)
    started = time.monotonic()
    assert cores.nicer_session(1234, 10) == "unchanged (the kernel's rate limit)"
    assert 0.05 <= time.monotonic() - started < 1.0

    def missing(path: str, mode: str):
        raise FileNotFoundError(2, "No such file or directory")

    monkeypatch.setattr(cores, "open", missing, raising=False)
    assert cores.nicer_session(1234, 10) == "unchanged (No such file or directory)"


def spec(tmp_path: Path, device: str) -> dict:
    return boot_spec(
        {"device": device, "build_cache": str(tmp_path / "builds"), "cpu_threads": 1, "max_file_bytes": 1 << 20}
    )


@needs_autogroups
@pytest.mark.slow
def test_a_spare_on_the_cpu_back_end_boots_at_the_spare_niceness_with_its_runners(tmp_path):
    worker = start_worker(spec(tmp_path, "cpu"), workdir_root=str(tmp_path), ahead=True)
    try:
        assert worker.niced and autogroup_nice(worker.process.pid) == SPARE_NICENESS
        runners: list[int] = []
        deadline = time.monotonic() + 60
        while len(runners) < 2 and time.monotonic() < deadline:  # both runners launched by its boot
            time.sleep(0.2)
            runners = [
                pid
                for pid in descendants(worker.process.pid)
                if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[1:3] == [b"-m", RUNNER]
                or Path(f"/proc/{pid}/comm").read_bytes().strip() == RUNNER_NAME  # forked from the worker
            ]
        assert len(runners) == 2, "the spare did not launch its runners"
        assert [autogroup_nice(pid) for pid in runners] == [SPARE_NICENESS] * 2
        for pid in runners:  # the worker's session (its autogroup), a process group of their own
            assert os.getsid(pid) == worker.process.pid and os.getpgid(pid) == pid
    finally:
        worker.discard()

    fresh = start_worker(spec(tmp_path, "cpu"), workdir_root=str(tmp_path))  # a job's own: full weight
    try:
        assert not fresh.niced and autogroup_nice(fresh.process.pid) == 0
    finally:
        fresh.discard()


@needs_autogroups
@pytest.mark.slow
def test_a_spare_on_a_gpu_back_end_boots_nicer_and_does_its_device_work_at_full_weight(tmp_path):
    """Its imports weigh a tenth (session 26: a step's 16 replacement spares slowed that step's own
    runners to 45-110 s); its device work holds the device lock shared, which a slower boot would
    hold longer: the worker puts its session back before it. Without a GPU that device work fails at
    its first CUDA call and the boot ends there, so a weight put back only after it would stay at 10."""
    gpu = start_worker(spec(tmp_path, "cuda:0"), workdir_root=str(tmp_path), ahead=True)
    try:
        assert gpu.niced and autogroup_nice(gpu.process.pid) == SPARE_NICENESS
        deadline = time.monotonic() + 90
        while autogroup_nice(gpu.process.pid) != 0 and time.monotonic() < deadline:
            assert gpu.process.poll() is None, gpu.log_path.read_text()
            time.sleep(0.1)
        assert autogroup_nice(gpu.process.pid) == 0, "the spare's device work was not at full weight"
    finally:
        gpu.discard()


def test_a_confined_process_signals_only_its_own_process_group():
    """A runner stays in its spawner's session where there is no terminal (for the weight above), so
    it must still lead a process group of its own: kill(0) from candidate code then reaches only its
    own runner, never the judge that spawned it nor the other runner. The spawner here is a process
    in a session of its own (no terminal, as a worker), so a regression signals it, not pytest."""
    import subprocess
    import sys

    spawner = (
        "import signal, subprocess, sys, time\n"
        "from kevin.evaluator import spawn\n"
        "caught = []\n"
        "signal.signal(signal.SIGUSR1, lambda number, frame: caught.append(number))\n"
        "code = 'import os, signal; signal.signal(signal.SIGUSR1, signal.SIG_IGN); os.kill(0, signal.SIGUSR1)'\n"
        "process = spawn.spawn_confined([sys.executable, '-c', code], stdout=subprocess.PIPE)\n"
        "print('target', process.wait(30), flush=True)\n"
        "time.sleep(0.2)\n"
        "print('caught', len(caught), flush=True)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", spawner], capture_output=True, text=True, timeout=60, start_new_session=True
    )
    assert done.stdout.split() == ["target", "0", "caught", "0"], (done.returncode, done.stdout, done.stderr)


def test_a_locked_down_runner_cannot_reweigh_the_session_it_shares_with_its_judge(tmp_path):
    """Sharing the worker's session means sharing its autogroup: a candidate that could write
    /proc/self/autogroup would lower the weight of its judge and of the control runner that times
    the baseline (an inflated baseline, a larger speedup). The runner's lock-down denies the write.
    Run from a session of its own, so that a regression reweighs only that session."""
    import subprocess
    import sys

    job = tmp_path / "job"
    job.mkdir()
    attack = tmp_path / "attack.py"
    attack.write_text('open("/proc/self/autogroup", "w").write("19")\n')
    spawner = tmp_path / "spawner.py"
    spawner.write_text(
        "import subprocess, sys\n"
        "from kevin.evaluator import confine, spawn\n"
        f"lock = confine.LockDown(job_dir={str(job)!r}, readable=({str(tmp_path)!r},))\n"
        f"process = spawn.spawn_confined([sys.executable, {str(attack)!r}], stderr=subprocess.PIPE, lock=lock)\n"
        "error = process.stderr.read().decode()\n"
        "nice = open('/proc/self/autogroup').read().split()[-1]\n"
        "print(process.wait(30), 'PermissionError' in error, nice)\n"
    )
    done = subprocess.run(
        [sys.executable, str(spawner)], capture_output=True, text=True, timeout=60, start_new_session=True
    )
    assert done.stdout.split() == ["1", "True", "0"], (done.stdout, done.stderr)
