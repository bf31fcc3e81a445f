"""Spare workers: booted before their job, given a job only for the spec they booted for, never left behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kevin.evaluator.evaluate import EvalConfig, device_lock_file, evaluate
from kevin.evaluator.sandbox import Limits, start_worker
from kevin.evaluator.service import EvaluationService
from kevin.evaluator.spares import SparePool, boot_spec, pool_key
from kevin.evaluator.timing import TimingConfig
from kevin.tasks import load_tasks

HONEST = Path(__file__).parents[2] / "kevin" / "tasks" / "bundled" / "cpp" / "01_gelu_tanh.py"


class FakeSpare:
    def __init__(self) -> None:
        self.live = True
        self.discarded = False

    def alive(self) -> bool:
        return self.live

    def discard(self) -> None:
        self.discarded = True


def test_the_pool_hands_out_live_spares_and_keeps_a_few_ready():
    pool = SparePool(max_idle=1)
    started: list[FakeSpare] = []

    def start() -> FakeSpare:
        started.append(FakeSpare())
        return started[-1]

    assert pool.take("a", start) is None and len(started) == 1  # none yet; one started for later
    assert pool.take("b", start) is None and len(started) == 2  # another spec has its own
    first = pool.take("a", start)
    assert first is started[0] and len(started) == 3
    started[2].live = False  # a spare that died while it waited is discarded, never handed out
    assert pool.take("a", start) is None and started[2].discarded and len(started) == 4
    assert pool.idle() == 2
    pool.close()
    assert started[1].discarded and started[3].discarded and not first.discarded
    assert pool.take("a", start) is None and len(started) == 4  # a closed pool starts none


def test_a_pool_keeps_no_more_than_it_is_asked_to():
    pool = SparePool(max_idle=0)
    assert pool.take("a", lambda: pytest.fail("a pool of none started a spare")) is None


@pytest.fixture(scope="module")
def task():
    return next(t for t in load_tasks() if t.id == "B_01")


def config(tmp_path: Path, **changes) -> EvalConfig:
    fields = dict(
        backend="cpp",
        cache_dir=str(tmp_path / "cache"),
        lock_dir=str(tmp_path),
        timing=TimingConfig(budget_ms=100.0, warmup_ms=10.0),
        cpu_threads=1,
        static_check=False,
        workdir_root=str(tmp_path),
        limits=Limits(host_memory_bytes=3 * 2**30),
    )
    return EvalConfig(**{**fields, **changes})


@pytest.mark.slow
def test_the_next_job_goes_to_a_worker_booted_before_it(task, tmp_path):
    with EvaluationService(config(tmp_path), max_in_flight=1) as service:
        first, second = service.map([(task, HONEST.read_text())] * 2)
        spare_pids = [s.process.pid for idle in service.spares._idle.values() for s in idle]
        assert spare_pids  # one waits for a third job
    assert first.passed and second.passed, (first.error, second.error)
    assert first.checks["worker_boot"]["spare"] is False
    boot = second.checks["worker_boot"]
    # Both runners (the candidate's and the clean one that brackets its timing) booted ahead.
    expected = {
        "spare": True, "booted": True, "control_booted": True, "job_wait_s": boot["job_wait_s"],
        "zygote": os.environ.get("KEVIN_WORKER_ZYGOTE") == "1",  # forked from the service's zygote
    }  # fmt: skip
    if os.path.exists("/proc/self/autogroup"):  # booted at a spare's weight, given full weight for its job
        expected["weight_restored"] = "set"
    assert boot == expected
    # Booted while the first evaluation ran, at a tenth of its weight on the CPU back end (sandbox.
    # SPARE_NICENESS): on a busy 2-core host the job may come before that boot is done.
    assert boot["job_wait_s"] >= 0.0
    for pid in spare_pids:  # closing the service ended the spare that never got a job
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] in "ZX"
    assert not list(tmp_path.glob("kevin-job-*"))


@pytest.mark.slow
def test_a_worker_booted_for_another_spec_starts_its_runner_afresh(task, tmp_path):
    cfg = config(tmp_path)
    other = boot_spec(
        {
            "device": "cpu",
            "build_cache": str(tmp_path / "elsewhere"),
            "cpu_threads": 1,
            "area_bytes": 1 << 30,
            "max_file_bytes": 1 << 20,
        }
    )
    pool = SparePool(max_idle=0)
    wrong = start_worker(other, workdir_root=str(tmp_path))
    job_spec = boot_spec(
        {
            "device": "cpu",
            "build_cache": str(cfg.build_cache),
            "cpu_threads": 1,
            "timing": {"flush_l2": True},
            "area_bytes": cfg.limits.host_memory_bytes // 2,
            "max_file_bytes": cfg.limits.max_file_bytes,
            "device_lock": str(device_lock_file(cfg)),
            "device_slots": cfg.device_slots,
        }
    )
    pool._idle[pool_key(job_spec, str(tmp_path), None)] = [wrong]  # a pool bug, simulated
    result = evaluate(task, HONEST.read_text(), cfg, spares=pool)
    assert result.passed, result.error
    assert result.checks["worker_boot"]["spare"] is True and result.checks["worker_boot"]["booted"] is False
    assert result.checks["worker_boot"]["control_booted"] is False
