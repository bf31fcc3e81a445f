"""bench/naive_harness.py leaves nothing running when the process that called it is killed (s44: a
spinning candidate's child outlived a bench cut at its call's limit and shared the GPU with the
next calls' timings)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from kevin.evaluator.procfs import descendants, parent_of

REPO = Path(__file__).resolve().parents[2]

HANGING = textwrap.dedent(
    """
    import torch
    class ModelNew(torch.nn.Module):
        def __init__(self, s):
            super().__init__()
        def forward(self, x):
            while True:
                pass
    """
)

DRIVER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {bench!r})
    from naive_harness import naive_eval
    naive_eval(open({problem!r}).read(), sys.stdin.read(), timeout_s=600)
    """
)


def test_a_hanging_candidates_child_dies_with_the_harness_that_started_it():
    problem = str(REPO / "bench" / "adversarial" / "problems" / "scale_relu_rand.py")
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER.format(bench=str(REPO / "bench"), problem=problem)],
        stdin=subprocess.PIPE,
        text=True,
    )
    try:
        driver.stdin.write(HANGING)
        driver.stdin.close()
        deadline = time.monotonic() + 60
        while not (child := descendants(driver.pid)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert child, "the harness never started its child"
        time.sleep(0.5)  # past the child's exec: the setup before it is what is tested
        driver.send_signal(signal.SIGKILL)
        driver.wait()
        deadline = time.monotonic() + 10
        while (left := parent_of(child[0])) and left[1] and time.monotonic() < deadline:
            time.sleep(0.05)
        left = bool(left and left[1])
        if left:
            os.kill(child[0], signal.SIGKILL)
        assert not left, "the candidate's child outlived the harness that started it"
    finally:
        driver.kill()
