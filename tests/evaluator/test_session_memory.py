"""The worker's memory limit counts each page once: runners forked from their judge share its pages.

s32 on the H100: with a 3 GiB limit, honest cpp candidates were killed "for more than 3 GiB of host
memory during compile" when the judge (CUDA torch and the profiler's modules imported) and its two
forked runners were each charged the whole of their shared, copy-on-write pages (resident sizes
summed). A session whose resident sizes pass the limit is now measured again in proportional set
sizes before it is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from kevin.evaluator import sandbox

MB = 2**20
SIZE = 256 * MB

FORKER = f"""
import os, sys, time
data = b"x" * {SIZE}  # written: resident
for _ in range(3):
    if os.fork() == 0:
        time.sleep(60)
        os._exit(0)
print("ready", flush=True)
time.sleep(60)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_pages_shared_by_forks_count_once():
    process = subprocess.Popen(
        [sys.executable, "-c", FORKER], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert process.stdout.readline().strip() == "ready"
        time.sleep(0.5)  # the children have run past their fork
        below = sandbox.descendants(process.pid)
        assert len(below) == 3, below
        # Four processes share one 256 MB buffer: resident sizes summed come to over 1 GB. Under a
        # limit they pass, the session is measured again in proportional set sizes.
        resident = sandbox._session_memory_bytes(process.pid, limit=8 * SIZE)
        assert resident >= 4 * SIZE, f"{resident / MB:.0f} MB"
        measured = sandbox._session_memory_bytes(process.pid, limit=2 * SIZE)
        assert SIZE <= measured < 1.5 * SIZE, f"{measured / MB:.0f} MB"
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
