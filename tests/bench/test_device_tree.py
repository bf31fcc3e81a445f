"""The tree a device call carries has room for a learning run's carry.

A call takes the working tree and the carried paths, 64 MiB in all (the device README). A learning
run crosses sessions as parts of ~45 MiB (bench/learning_carry.py: s28's step-5 carry was 43.3 MiB)
plus the evaluator's shim (~0.7 MiB); the tracked files must leave that room. Session 32 found them
at 28 MB, too many for the carry, and gzipped the large JSON/JSONL of older sessions' results
(readers take `.gz`: kevin.rl.episodes.stored). Should this fail, gzip more of bench/results."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CALL_BYTES = 64 * 2**20
CARRY_BYTES = 46 * 2**20  # a 26.8M-parameter run's parts, with a margin
SHIM_BYTES = 1 * 2**20


def tracked_bytes() -> int:
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True
    ).stdout.split(b"\0")
    return sum((REPO / name.decode()).stat().st_size for name in listed if name and (REPO / name.decode()).is_file())


@pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(), reason="not a git checkout")
def test_the_tracked_files_leave_room_for_a_learning_carry():
    size = tracked_bytes()
    room = CALL_BYTES - CARRY_BYTES - SHIM_BYTES
    assert size <= room, (
        f"tracked files {size / 2**20:.1f} MiB: a device call has {room / 2**20:.1f} MiB beside a learning "
        "run's carry; gzip large results (bench/results/**/*.jsonl)"
    )
