"""bench/learning_launch.sh's detached mode: one run outlives the device call that started it (its own
process session), later calls wait on it and collect, and every call returns what exists so far.

A stand-in for bench/learning_run.py (LEARN_SCRIPT) writes the files the real run writes, at the
moments it writes them, so the test checks the shell's part: start once, survive the caller's
process group being killed (what the device machine does when a call returns), collect."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "learning_launch.sh"

STAND_IN = """
import argparse, json, os, pathlib, sys, time
parser = argparse.ArgumentParser()
parser.add_argument("--out"); parser.add_argument("--work"); parser.add_argument("--cache-dir")
parser.add_argument("--budget-s", type=float); parser.add_argument("--resume", action="store_true")
parser.add_argument("--carry-in"); parser.add_argument("--carry-out")
args, _ = parser.parse_known_args()
work = pathlib.Path(args.work)
(work / "rl").mkdir(parents=True, exist_ok=True)
with open(os.environ["STARTS"], "a") as handle:
    handle.write(f"{os.getpid()} budget={args.budget_s} resume={args.resume} in={args.carry_in} out={args.carry_out}\\n")
metrics = work / "rl" / "metrics.jsonl"
for step in range(3):
    with metrics.open("a") as handle:
        handle.write(json.dumps({"step": step}) + "\\n")
    print(f"step {step}", flush=True)
    time.sleep(float(os.environ["STEP_S"]))
out = pathlib.Path(args.out)
out.mkdir(parents=True, exist_ok=True)
(out / "table.txt").write_text("the report\\n")
if args.carry_out:
    staging = pathlib.Path(args.carry_out + ".partial")
    staging.mkdir(parents=True)
    for n in range(2):
        (staging / f"carry.tgz.part{n:02d}").write_bytes(b"part")
    staging.rename(args.carry_out)
print("done", flush=True)
"""


def _call(
    tmp_path: Path, n: int, wait_s: float, *, cut: tuple[float, int] | None = None, **env: str
) -> tuple[subprocess.CompletedProcess, Path]:
    """One device call; `cut` = (seconds, signal): the machine ends the call's process group then."""
    out = tmp_path / f"out{n}"
    out.mkdir()
    environ = {
        **os.environ,
        "OUT": str(out),
        "DETACH": "1",
        "CALL": str(n),
        "WAIT_S": str(wait_s),
        "LEARN_ROOT": str(tmp_path / "root"),
        "LEARN_SCRIPT": str(tmp_path / "stand_in.py"),
        "LEARN_BUDGET_S": "30",
        "STARTS": str(tmp_path / "starts.txt"),
        **env,
    }
    # Its own session, as a device call is; killing that group afterwards is what the machine does.
    process = subprocess.Popen(
        ["bash", str(SCRIPT)], cwd=REPO, env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )
    if cut is None:
        stdout, _ = process.communicate(timeout=120)
    else:
        try:
            stdout, _ = process.communicate(timeout=cut[0])
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, cut[1])
            stdout, _ = process.communicate(timeout=60)
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, ""), out


def _names(archive: Path) -> set[str]:
    with tarfile.open(archive) as tar:
        return set(tar.getnames())


@pytest.mark.skipif(sys.platform != "linux", reason="setsid and process sessions: Linux")
def test_a_detached_run_outlives_its_call_and_a_later_call_collects_it(tmp_path):
    (tmp_path / "stand_in.py").write_text(STAND_IN)
    started = time.monotonic()
    first, out1 = _call(tmp_path, 1, wait_s=1, STEP_S="2")
    assert first.returncode == 0, first.stdout
    assert time.monotonic() - started < 15, "the first call waits WAIT_S, not for the run"
    assert "started the detached run" in first.stdout
    assert "the run goes on" in first.stdout
    names = _names(out1 / "learn1.tgz")
    assert "kevin-learn/rl/metrics.jsonl" in names, names  # what exists so far comes back
    assert not any(name.startswith("learn/") for name in names)

    pid = int((tmp_path / "root" / "kevin-learn-detached" / "pid").read_text())
    os.kill(pid, 0)  # alive after the caller's process group was killed

    second, out2 = _call(tmp_path, 2, wait_s=60, STEP_S="2")
    assert second.returncode == 0, second.stdout
    assert "waiting on the detached run" in second.stdout
    assert "the run has ended" in second.stdout
    assert "learn/table.txt" in _names(out2 / "learn2.tgz")
    log = (out2 / "learning_run2.log").read_text()
    assert "step 2" in log and "done" in log and "learning_run exit 0" in log
    starts = (tmp_path / "starts.txt").read_text().splitlines()
    assert len(starts) == 1 and "budget=30.0 resume=False" in starts[0], starts


@pytest.mark.skipif(sys.platform != "linux", reason="setsid and process sessions: Linux")
def test_a_detached_run_is_bounded_by_its_budget(tmp_path):
    """The run's own timeout (budget + 60 s) ends a run that would not stop: here budget -55."""
    (tmp_path / "stand_in.py").write_text(STAND_IN)
    call, out = _call(tmp_path, 1, wait_s=30, STEP_S="20", LEARN_BUDGET_S="-55")
    assert "the run has ended" in call.stdout, call.stdout
    assert "learning_run exit 124" in (out / "learning_run1.log").read_text()


@pytest.mark.skipif(sys.platform != "linux", reason="setsid and process sessions: Linux")
def test_carry_in_and_out_reach_the_run_and_the_parts_come_back_when_it_ends(tmp_path):
    (tmp_path / "stand_in.py").write_text(STAND_IN)
    carried = tmp_path / "carried_parts"
    carried.mkdir()
    # steps long enough that the run is still going after the call's live-carry attempt (~5 s)
    first, out1 = _call(tmp_path, 1, wait_s=1, STEP_S="6", CARRY_IN=str(carried), CARRY_OUT="1")
    assert "the run goes on" in first.stdout, first.stdout
    assert not list(out1.glob("carry.tgz.part*")), "no parts before the run has written them whole"
    assert "no live carry yet" in first.stdout and "has no checkpoint" in first.stdout, first.stdout
    second, out2 = _call(tmp_path, 2, wait_s=60, STEP_S="1")
    assert "the run has ended" in second.stdout, second.stdout
    assert sorted(p.name for p in out2.glob("carry.tgz.part*")) == ["carry.tgz.part00", "carry.tgz.part01"]
    (start,) = (tmp_path / "starts.txt").read_text().splitlines()
    assert f"in={carried} out={tmp_path / 'root' / 'kevin-learn-carry'}" in start, start



PACK_STAND_IN = """
import argparse, pathlib
parser = argparse.ArgumentParser()
parser.add_argument("command"); parser.add_argument("--work"); parser.add_argument("--out")
args = parser.parse_args()
out = pathlib.Path(args.out)
out.mkdir(parents=True, exist_ok=True)
steps = (pathlib.Path(args.work) / "rl" / "metrics.jsonl").read_text().count("\\n")
(out / "carry.tgz.part00").write_text(f"live after {steps} steps")
print(f"carry-out 1 part after {steps} steps")
"""


@pytest.mark.skipif(sys.platform != "linux", reason="setsid and process sessions: Linux")
def test_a_call_that_leaves_the_run_going_returns_a_live_carry(tmp_path):
    """A machine lost to a late next call (s13-s15) then costs the steps since the last checkpoint,
    not the run: the call packs what the run has (here a stand-in packer) and returns the parts."""
    (tmp_path / "stand_in.py").write_text(STAND_IN)
    (tmp_path / "pack.py").write_text(PACK_STAND_IN)
    first, out1 = _call(
        tmp_path, 1, wait_s=3, STEP_S="2", CARRY_OUT="1", CARRY_SCRIPT=str(tmp_path / "pack.py")
    )
    assert "the run goes on" in first.stdout and "live carry: carry-out 1 part" in first.stdout, first.stdout
    assert (out1 / "carry.tgz.part00").read_text().startswith("live after")
    # without CARRY_OUT no packing is tried
    second, out2 = _call(tmp_path, 2, wait_s=60, STEP_S="2", CARRY_SCRIPT=str(tmp_path / "pack.py"))
    assert "the run has ended" in second.stdout and "live carry" not in second.stdout


def _stop_the_run(tmp_path: Path) -> None:
    pid = int((tmp_path / "root" / "kevin-learn-detached" / "pid").read_text())
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@pytest.mark.skipif(sys.platform != "linux", reason="setsid and process sessions: Linux")
def test_a_call_killed_outright_still_returns_the_log_and_files_of_its_last_snapshot(tmp_path):
    """s21: the device cut a call at its limit (537 s, below the WAIT_S of 540) and nothing came back,
    because the log and files were copied into $OUT only after the wait. SIGKILL gives no chance to
    collect: what comes back is what the periodic snapshot put there."""
    (tmp_path / "stand_in.py").write_text(STAND_IN)
    try:
        call, out = _call(tmp_path, 1, wait_s=60, cut=(5, signal.SIGKILL), STEP_S="2", SNAPSHOT_S="1")
    finally:
        _stop_the_run(tmp_path)
    assert call.returncode == -signal.SIGKILL
    assert "step 0" in (out / "learning_run1.log").read_text()
    assert "kevin-learn/rl/metrics.jsonl" in _names(out / "learn1.tgz")
    assert not list(out.glob("*.tmp")), "only whole snapshots land in $OUT"


@pytest.mark.skipif(sys.platform != "linux", reason="setsid and process sessions: Linux")
def test_a_call_ended_by_sigterm_collects_before_it_exits(tmp_path):
    (tmp_path / "stand_in.py").write_text(STAND_IN)
    try:  # no periodic snapshot within the call: only the trap can have written $OUT
        call, out = _call(tmp_path, 1, wait_s=60, cut=(4, signal.SIGTERM), STEP_S="2", SNAPSHOT_S="1000")
    finally:
        _stop_the_run(tmp_path)
    assert call.returncode == 143, call.stdout
    assert "cut short by a signal" in call.stdout
    log = (out / "learning_run1.log").read_text()
    assert "step 0" in log and "done" not in log
    assert "kevin-learn/rl/metrics.jsonl" in _names(out / "learn1.tgz")
