"""kevin.evaluator.devlock across real processes: timing alone, shared work together, slots, writer order."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kevin.evaluator import devlock

REPO = Path(__file__).resolve().parents[2]

# One process: admit, then run the sections named in argv, logging (name, start, end) per section.
CHILD = r"""
import json, sys, time
from kevin.evaluator.devlock import DeviceLock
path, slots, weight, log, plan = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
lock = DeviceLock(path, slots)
time.sleep(max(0.0, float(sys.argv[6]) - time.time()))  # every process starts at its set time
admitted = time.monotonic()
lock.admit(weight)
records = [("admit", admitted, time.monotonic())]
for step in plan.split(","):
    kind, seconds = step.split(":")
    if kind == "hold":  # keep the slots, outside any section
        time.sleep(float(seconds)); records.append(("hold", 0, time.monotonic())); continue
    asked = time.monotonic()
    with (lock.exclusive() if kind == "x" else lock.shared()):
        start = time.monotonic()
        time.sleep(float(seconds))
        end = time.monotonic()
    records.append((kind, start, end, asked))
with open(log, "a") as f:
    f.write(json.dumps(records) + "\n")
"""


def start(path: Path, log: Path, plan: str, at: float, slots: int = 4, weight: int = 1) -> subprocess.Popen:
    """A process that runs `plan` from wall-clock time `at` (its interpreter starts before that, so
    start-up time on a loaded machine does not reorder the processes)."""
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), str(slots), str(weight), str(log), plan, str(at)],
        cwd=REPO,
    )


def finish(procs: list[subprocess.Popen], log: Path) -> list[list]:
    for p in procs:
        assert p.wait(timeout=60) == 0
    return [json.loads(line) for line in log.read_text().splitlines()]


def overlaps(a: list, b: list) -> bool:
    return a[1] < b[2] and b[1] < a[2]


@pytest.fixture
def lock_path(tmp_path: Path) -> Path:
    return devlock.ensure_files(tmp_path / "kevin-test.lock", 4)


def test_timing_never_overlaps_any_other_section_while_shared_sections_overlap(lock_path, tmp_path):
    log = tmp_path / "log"
    at = time.time() + 3
    procs = [start(lock_path, log, "s:0.4,x:0.15,s:0.2,x:0.1", at) for _ in range(4)]
    sections = [r for records in finish(procs, log) for r in records if r[0] in ("s", "x")]
    exclusive = [r for r in sections if r[0] == "x"]
    assert len(exclusive) == 8
    for x in exclusive:
        others = [r for r in sections if r is not x and overlaps(x, r)]
        assert not others, f"timing overlapped {others}"
    shared = [r for r in sections if r[0] == "s"]
    assert any(overlaps(a, b) for i, a in enumerate(shared) for b in shared[i + 1 :]), (
        "shared sections never ran together"
    )


def test_admission_keeps_at_most_slots_workers_and_a_heavy_job_alone(lock_path, tmp_path):
    log = tmp_path / "log"
    at = time.time() + 3
    procs = [start(lock_path, log, "hold:0.5", at, slots=2) for _ in range(3)]
    procs.append(start(lock_path, log, "hold:0.3", at + 0.1, slots=2, weight=2))
    runs = finish(procs, log)
    spans = [(records[0][2], records[1][2]) for records in runs]  # (admitted, released)
    for t in sorted(s for s, _ in spans):
        assert sum(s <= t < e for s, e in spans) <= 2
    # The weight-2 job held both slots: nothing else was admitted while it held them.
    heavy = [records for records in runs if records[1][2] - records[0][2] < 0.45]
    assert heavy, "the heavy job's hold was not found"
    h_start, h_end = heavy[0][0][2], heavy[0][1][2]
    assert all(not (s < h_end and h_start < e) for s, e in spans if (s, e) != (h_start, h_end))


def test_a_waiting_timer_is_not_overtaken_by_later_shared_sections(lock_path, tmp_path):
    log = tmp_path / "log"
    at = time.time() + 3
    first = start(lock_path, log, "s:0.8", at)
    timer = start(lock_path, log, "x:0.1", at + 0.3)  # asks while the reader holds the device
    late = start(lock_path, log, "s:0.1", at + 0.5)  # asks while the timer waits
    records = {r[1][0] + str(i): r[1] for i, r in enumerate(finish([first, timer, late], log))}
    timed = next(v for k, v in records.items() if k.startswith("x"))
    late_shared = min((v for k, v in records.items() if k.startswith("s")), key=lambda v: v[2] - v[1])
    assert late_shared[1] >= timed[2], "a shared section that asked later ran before the waiting timer"


def test_each_hold_is_recorded_with_when_it_was_asked_taken_and_let_go(lock_path, tmp_path, monkeypatch):
    """The verdict's timeline (checks.timeline) reads these: a hold's wait is held - asked."""
    monkeypatch.setattr(devlock, "SECTIONS", [])
    at = time.time() + 2.0
    holder = start(lock_path, tmp_path / "log", "s:1.0", at)  # another worker, shared for 1 s from `at`
    lock = devlock.DeviceLock(lock_path, 4)
    lock.admit(1)
    with lock.shared():
        time.sleep(0.05)
    time.sleep(max(0.0, at + 0.3 - time.time()))  # the other is inside its section by now
    with lock.exclusive():
        pass
    finish([holder], tmp_path / "log")
    lock.close()
    assert [entry[0] for entry in devlock.SECTIONS] == ["admit", "shared", "exclusive"]
    admit, shared, exclusive = devlock.SECTIONS
    assert admit[1] <= admit[2] and admit[3] is None  # admission lasts until exit
    assert shared[1] <= shared[2] and shared[3] - shared[2] >= 0.05
    assert exclusive[1] <= exclusive[2] <= exclusive[3]
    assert exclusive[2] - exclusive[1] >= 0.3, exclusive  # it waited for the other's shared section


def test_a_released_admission_frees_its_slots_and_its_record_says_when(lock_path, monkeypatch):
    """A short admitted moment (the clean calibration) lets go of its slots for others, and admits
    again later like any job; its timeline entry closes."""
    monkeypatch.setattr(devlock, "SECTIONS", [])
    lock = devlock.DeviceLock(lock_path, 4)
    lock.admit(3)
    assert devlock.slots_held(lock_path, 4) == 3
    lock.release()
    assert devlock.slots_held(lock_path, 4) == 0 and lock.weight == 0
    other = devlock.DeviceLock(lock_path, 4)
    other.admit(4)  # would block for ever if a slot were still held
    other.close()
    lock.admit(1)
    assert devlock.slots_held(lock_path, 4) == 1
    lock.close()
    first, second = devlock.SECTIONS[0], devlock.SECTIONS[2]
    assert first[0] == "admit" and first[3] >= first[2]
    assert second[0] == "admit" and second[3] is None  # the last admission lasts until exit


def test_sizing_rules():
    assert devlock.footprint_bytes(None, 7) is None
    assert devlock.footprint_bytes(10, 7) == 10 * 18
    gib = 2**30
    assert devlock.weight_for(None, 80 * gib, 4) == 4  # unknown size: alone
    assert devlock.weight_for(10 * gib, 80 * gib, 4) == 1
    assert devlock.weight_for(20 * gib, 80 * gib, 4) == 2  # a slot is 16 GiB: two of them
    assert devlock.weight_for(16 * gib, 41 * gib, 4) == 2  # s46's H100 A/A copies of 04 and 11: not alone
    assert devlock.weight_for(60 * gib, 80 * gib, 4) == 4  # past the share: alone
    assert devlock.weight_for(50 * gib, 80 * gib, 1) == 1
    with pytest.raises(ValueError):
        devlock.DeviceLock(Path("/nonexistent"), 0)


SIZING = """
import sys
import torch
from kevin.evaluator import devlock
from kevin.evaluator.worker.support import load_module
from kevin.tasks.loaders import load_bundled
problem = load_module(load_bundled("small")[0].source, "kevin_problem", "<problem>")
if sys.argv[1] == "warm":
    devlock.warm_meta()
before = set(sys.modules)
assert devlock.input_bytes_on_meta(problem)
print(len(set(sys.modules) - before))
"""


def test_after_warm_meta_sizing_a_job_on_the_meta_device_imports_nothing():
    """A worker sizes its job's inputs on the meta device in the job's setup; the first use there
    imports torch's reference ops (~1 s a candidate, every candidate: each worker is fresh). A booted
    worker (kevin.evaluator.worker.__main__.boot_up) pays it with warm_meta before its job."""

    def new_modules(mode: str) -> int:
        done = subprocess.run(
            [sys.executable, "-c", SIZING, mode], capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr
        return int(done.stdout.strip().splitlines()[-1])

    assert new_modules("cold") > 0, "sizing imports nothing cold: this test no longer shows the cost"
    assert new_modules("warm") == 0


def test_a_booted_worker_warms_the_meta_device_after_launching_its_runners(monkeypatch):
    from kevin.evaluator.worker import __main__ as worker

    calls: list[str] = []
    monkeypatch.setattr(
        worker, "launch_runner", lambda spec, path, traced=True, fork=False: calls.append(path.name) or path.name
    )
    monkeypatch.setattr(worker.devlock, "warm_meta", lambda: calls.append("warm_meta"))
    assert worker.boot_up({"device": "cpu"}) == ("runner1", "runner2")
    assert calls == ["runner1", "runner2", "warm_meta"]
    calls.clear()
    assert worker.boot_up(None) == (None, None) and calls == []
