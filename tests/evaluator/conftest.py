"""Fixtures of the evaluator tests: a bundled cpp task with a right and a wrong candidate, for the
tests that drive `kevin eval-batch` and `EvaluationService` through the real evaluator; a real
confined runner on a tiny CPU problem; the launch of a GPU runner, caught."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[2]
BUNDLED = REPO / "kevin" / "tasks" / "bundled"


@pytest.fixture(scope="session")
def cpp_matmul(tmp_path_factory) -> SimpleNamespace:
    """The bundled 05_matmul task (small size) with its honest cpp candidate and a wrong one that
    builds the very same extension but hands the kernel half of the inner dimension (the right
    shape, the wrong sums), so one build serves both. `cache` is the build cache of the
    adversarial corpus (bench/adversarial.py, default_cache), which its slow tests fill with this
    very extension and which stays at one path across sessions (torch writes absolute paths into a
    build): warm, neither candidate builds; cold, one ~45 s build on 2 cores. The tests switch
    the baseline cache off, so the corpus's baselines there are never touched."""
    sys.path.insert(0, str(REPO / "bench"))
    from adversarial import default_cache

    honest = BUNDLED / "cpp" / "05_matmul.py"
    text = honest.read_text()
    call = "return _ext.matmul(a, b)"
    assert call in text, f"{honest} changed: the wrong twin below needs its forward"
    wrong = tmp_path_factory.mktemp("cpp_matmul") / "05_matmul_wrong.py"
    wrong.write_text(text.replace(call, "return _ext.matmul(a[:, : a.shape[1] // 2], b[: b.shape[0] // 2])"))
    return SimpleNamespace(
        problem=BUNDLED / "tasks" / "05_matmul.py", honest=honest, wrong=wrong, cache=default_cache()
    )


@pytest.fixture
def launched_runner(tmp_path, monkeypatch):
    """What `harness.launch_runner` hands a runner on the GPU back end (its lock-down, environment and
    working folder), caught by a stand-in for RunnerHandle; call it with `traced`."""
    from kevin.evaluator.worker import harness

    seen: dict = {}

    class FakeRunner:
        def __init__(self, area_bytes, *, lock, env, cwd, forked=None):
            seen.update(lock=lock, env=env, cwd=cwd, forked=forked)

        def send(self, command, **fields):
            seen["command"] = command

    monkeypatch.setattr(harness, "RunnerHandle", FakeRunner)
    spec = {
        "max_file_bytes": 1 << 20, "build_cache": str(tmp_path / "builds"), "device": "cuda:0",
        "area_bytes": 1 << 20, "cpu_threads": 1, "flush_l2": False, "fast_build": False,
    }  # fmt: skip

    def launch(traced: bool = True) -> dict:
        harness.launch_runner(spec, tmp_path / f"home{len(seen)}", traced)
        return dict(seen)

    return launch


TINY_PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2


def get_inputs():
    return [torch.randn(32, 64)]


def get_init_inputs():
    return []
"""


@pytest.fixture
def cpu_runner(tmp_path):
    """A real runner (kevin.evaluator.worker.runner), confined as the judge confines it, booted and set
    up on TINY_PROBLEM on the CPU (no model loaded: overhead cycles only)."""
    from kevin.evaluator import confine
    from kevin.evaluator.worker.handle import RunnerHandle

    home = tmp_path / "runner1"
    home.mkdir()
    lock = confine.LockDown(job_dir=str(home), readable=(str(REPO),))
    env = dict(os.environ, TMPDIR=str(home), HOME=str(home))
    handle = RunnerHandle(64 << 20, lock=lock, env=env, cwd=str(home))
    handle.request(
        "boot",
        job={
            "device": "cpu",
            "cpu_threads": 1,
            "flush_l2": False,
            "build_cache": str(tmp_path / "builds"),
            "fast_build": False,
        },
    )
    handle.request("setup", job={"precision": "fp32", "problem_source": TINY_PROBLEM, "weight_seed": 1})
    yield handle
    handle.kill()


@pytest.fixture
def overhead_cycles():
    """Run overhead cycles (no call) in a runner: `overhead_cycles(handle, spin, fetched=None,
    budget_ms=5.0, max_reps=20)`; with `fetched` (a list), the first and the last are fetched and
    their descriptions appended to it."""

    def run(handle, spin: bool, fetched: list | None = None, budget_ms: float = 5.0, max_reps: int = 20):
        seeds = iter(range(1, 10_000))
        return handle.run_cycles(
            model=False,
            spin=spin,
            seeds=lambda: next(seeds),
            warmup_ms=1.0,
            min_warmup=2,
            budget_ms=budget_ms,
            min_reps=8,
            max_reps=max_reps,
            output_bytes=32 * 64 * 4,
            fetch=lambda index, reps: fetched is not None and index in (0, reps - 1),
            on_fetch=lambda metas: fetched.append(metas) or metas,
        )

    return run
