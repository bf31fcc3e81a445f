"""Workers forked from a zygote (`KEVIN_WORKER_ZYGOTE=1`, kevin.evaluator.zygote, session 27).

A forked worker must judge as an executed one, and leave nothing behind however its service, its
zygote or itself end. Each test fails without the piece it names.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from test_evaluate_cpp import cache_dir, candidate, config, task  # noqa: F401 - the cpp back end's fixtures

from kevin.evaluator import zygote
from kevin.evaluator.evaluate import evaluate
from kevin.evaluator.sandbox import start_worker

REPO = Path(__file__).resolve().parents[2]


def _spec(root: Path) -> dict:
    return {
        "device": "cpu", "build_cache": str(root / "builds"), "fast_build": True, "cpu_threads": 1,
        "flush_l2": False, "area_bytes": 1 << 24, "max_file_bytes": 1 << 26, "device_lock": None,
        "device_slots": 1,
    }  # fmt: skip


def _gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def test_a_forked_worker_judges_as_an_executed_one(task, config, monkeypatch):  # noqa: F811 - fixtures
    monkeypatch.setenv(zygote.VARIABLE, "1")
    result = evaluate(task, candidate("scale_relu"), config)
    assert result.stage == "ok" and result.correct and result.passed, result.error + result.log
    assert result.checks["worker_boot"]["zygote"] is True
    assert result.checks["confinement"]["forked"]  # and its runners forked from it in turn
    wrong = evaluate(task, candidate("scale_only"), config)
    assert wrong.stage == "correctness" and not wrong.correct


def test_a_forked_worker_is_a_session_leader_and_its_status_comes_back(tmp_path, monkeypatch):
    """Its session is how the sandbox finds and kills a worker: it must lead one from the moment its
    pid comes back (a spare discarded at once was stopped before its setsid, in nobody's session,
    and never killed: the suite hung)."""
    monkeypatch.setenv(zygote.VARIABLE, "1")
    for _ in range(8):
        worker = start_worker(_spec(tmp_path), workdir_root=str(tmp_path))
        try:
            assert os.getsid(worker.process.pid) == worker.process.pid
            assert os.getpgid(worker.process.pid) == worker.process.pid
        finally:
            worker.discard()
        assert worker.process.returncode == -signal.SIGKILL
    worker = start_worker(_spec(tmp_path), workdir_root=str(tmp_path))
    try:
        assert isinstance(worker.process, zygote.ZygoteChild)
        assert worker.process.poll() is None
        worker.process.send_signal(signal.SIGTERM)
        assert worker.process.wait(30) == -signal.SIGTERM
    finally:
        worker.discard()


def test_workers_die_with_their_zygote_and_the_zygote_with_its_service(tmp_path):
    code = f"""
        import json, os, sys
        from pathlib import Path
        os.environ["KEVIN_WORKER_ZYGOTE"] = "1"
        from kevin.evaluator import zygote
        from kevin.evaluator.sandbox import start_worker
        from test_zygote import _spec
        worker = start_worker(_spec(Path({str(tmp_path)!r})), workdir_root={str(tmp_path)!r})
        print(json.dumps([worker.process.pid, zygote.shared({{}}).process.pid]), flush=True)
        sys.stdin.read()
    """
    path = os.pathsep.join([str(REPO), str(Path(__file__).parent)])
    service = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True, env=dict(os.environ, PYTHONPATH=path),
    )  # fmt: skip
    try:
        worker, zygote_pid = json.loads(service.stdout.readline())
    finally:
        service.kill()  # no atexit, no cleanup: only the control socket's end tells the zygote
        service.wait()
    assert _gone(zygote_pid, 15), "the zygote outlived its service"
    assert _gone(worker, 15), "a forked worker outlived its service"


def test_a_worker_forked_from_the_zygote_holds_none_of_its_descriptors(tmp_path, monkeypatch):
    """The zygote's control socket and other workers' pipes would let a worker (and what it starts)
    ask for forks or read another job."""
    monkeypatch.setenv(zygote.VARIABLE, "1")
    first = start_worker(_spec(tmp_path), workdir_root=str(tmp_path))
    second = start_worker(_spec(tmp_path), workdir_root=str(tmp_path))
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the fork's pid comes back before the child has set up
            if os.path.exists(second.workdir / "runner1"):  # its boot has begun: set up long before
                break
            time.sleep(0.05)
        targets = _descriptors(second.process.pid)
        # stdin, the log twice, its job pipe and channel; what it opened itself since (files, pipes of
        # its runners, anon inodes) are not sockets of the zygote's.
        assert targets[0] == "/dev/null" and targets[1] == targets[2] == str(second.log_path)
        zygote_sockets = {t for t in _descriptors(zygote.shared({}).process.pid) if t.startswith("socket:")}
        assert not set(targets) & zygote_sockets
        # Nor the zygote's SIGCHLD handler (its wake-up on a child's end): an executed worker has none.
        assert not _caught(second.process.pid) & (1 << (signal.SIGCHLD - 1))
    finally:
        for worker in (first, second):
            worker.discard()


def _caught(pid: int) -> int:
    """The mask of signals `pid` has handlers for (/proc's SigCgt)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return int(line.split()[1], 16)
    raise AssertionError(f"no SigCgt for {pid}")


def _descriptors(pid: int) -> list[str]:
    """What each open descriptor of `pid` points at, by number (those closed meanwhile left out)."""
    found = []
    for fd in sorted(int(name) for name in os.listdir(f"/proc/{pid}/fd")):
        try:
            found.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
    return found


@pytest.mark.parametrize("value", ["0", ""])
def test_without_the_variable_workers_are_executed(tmp_path, monkeypatch, value):
    monkeypatch.setenv(zygote.VARIABLE, value)
    worker = start_worker(_spec(tmp_path), workdir_root=str(tmp_path))
    try:
        assert isinstance(worker.process, subprocess.Popen)
    finally:
        worker.discard()
