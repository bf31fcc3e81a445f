"""A pair of cores per GPU kept for timing, everything else of the evaluator on the rest
(kevin.evaluator.cores).

Issue #15's A/A batch: a 0.13 ms kernel's median rose to 0.15-0.17 ms among 16 jobs and their
builds while its minimum stayed; since session 23 a timing's two spinning threads are pinned to a
pair of cores, but compilers, booting spares and other judges could still be scheduled onto that
pair and take slices inside the timed cycles. A judge now moves itself, and so its runners, its
build broker and their compilers, off every GPU's pair on its first line, where the host has the
cores (4 a GPU); only a timing's clocked threads enter a pair.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from kevin.evaluator import cores
from kevin.evaluator.cores import CorePlan, pair_from_top, plan


def test_a_host_with_four_cores_a_gpu_keeps_a_pair_per_gpu_from_the_top():
    one = plan(range(16), 1)
    assert one.kept and one.pairs == ((15, 14),) and one.work == frozenset(range(14))
    eight = plan(range(128), 8)
    assert eight.pairs == tuple((127 - 2 * i, 126 - 2 * i) for i in range(8))
    assert eight.work == frozenset(range(112))
    assert plan(range(32), 8).work == frozenset(range(16))  # as many work cores as kept: still kept
    # A device takes its ordinal's pair modulo the GPUs: under CUDA_VISIBLE_DEVICES=2,3 of a 2-GPU
    # container the ordinals 2 and 3 still take two different pairs.
    two = plan(range(16), 2)
    assert two.timing_pair(2) == (15, 14) and two.timing_pair(3) == (13, 12)
    assert not two.work & {15, 14, 13, 12}


def test_with_too_few_cores_nothing_is_kept_and_a_pair_comes_from_all_cores():
    for allowed, gpus in ((range(2), 1), (range(3), 1), (range(24), 8), (range(16), 0)):
        nothing = plan(allowed, gpus)
        assert not nothing.kept and nothing.work == frozenset(allowed)
        assert nothing.timing_pair(1) == pair_from_top(1, allowed)
    assert plan(range(2), 1).timing_pair(0) == (1, 0)
    assert plan(range(2), 1).summary() == {"gpus": 1, "kept": [], "work": 2}
    assert plan(range(16), 1).summary() == {"gpus": 1, "kept": [[15, 14]], "work": 14}


def test_the_gpu_count_is_the_hosts_device_nodes(tmp_path):
    for name in ("nvidia0", "nvidia1", "nvidia7", "nvidiactl", "nvidia-uvm", "nvidia-modeset", "nvidia-caps"):
        (tmp_path / name).touch()
    assert cores.host_gpus(str(tmp_path)) == 3
    assert cores.host_gpus(str(tmp_path / "none")) == 0


def test_the_variable_overrides_the_count(monkeypatch, capsys):
    monkeypatch.setattr(cores, "host_gpus", lambda: 4)
    for setting, gpus in (("off", 0), ("OFF", 0), ("0", 0), ("2", 2), ("", 4)):
        monkeypatch.setenv(cores.VARIABLE, setting)
        assert cores.gpus_to_keep() == gpus
    monkeypatch.setenv(cores.VARIABLE, "all")
    assert cores.gpus_to_keep() == 4
    assert "neither 'off' nor a number" in capsys.readouterr().err


def test_the_variable_reaches_the_worker():
    from kevin.evaluator.sandbox import ENV_ALLOW

    assert cores.VARIABLE in ENV_ALLOW


def test_a_judge_that_calls_at_start_and_what_it_starts_run_on_the_work_cores():
    """A fresh interpreter, as a worker is: planned for a host of four cores and one GPU whose
    lowest core is this machine's lowest (the other three are numbers no machine here has, so this
    runs on CI's two cores), it keeps to that core; a compiler it starts inherits it; its timing
    pair is the planned one, not a pair of what it was left with."""
    low = min(os.sched_getaffinity(0))
    code = f"""
import json, os, subprocess
from kevin.evaluator import cores
from kevin.evaluator.worker.timed import timing_cores
start = cores.at_start(allowed={{{low}, 9001, 9002, 9003}}, gpus=1)
child = subprocess.run(["grep", "Cpus_allowed_list", "/proc/self/status"], capture_output=True, text=True)
print(json.dumps({{"mask": sorted(os.sched_getaffinity(0)), "child": child.stdout.split()[-1],
                  "pair": timing_cores(0), "again": cores.at_start() is start}}))
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"mask": [low], "child": str(low), "pair": [9003, 9002], "again": True}


def test_outside_a_worker_nothing_is_kept(monkeypatch):
    monkeypatch.setattr(cores, "_START", None)
    here = cores.current()
    assert here == CorePlan(frozenset(os.sched_getaffinity(0)), (), frozenset(os.sched_getaffinity(0)))


@pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 4, reason="needs four cores (one GPU's pair and two to work on)"
)
@pytest.mark.timeout(120)
def test_a_real_worker_keeps_off_the_pair_from_its_start(tmp_path):
    """A worker started as the evaluator starts one, told to keep a pair for one GPU: its mask
    leaves out the top two cores while it boots and waits for its job."""
    from kevin.evaluator.sandbox import start_worker
    from kevin.evaluator.spares import boot_spec

    allowed = os.sched_getaffinity(0)
    job = {"device": "cpu", "build_cache": str(tmp_path / "builds")}
    worker = start_worker(boot_spec(job), workdir_root=str(tmp_path), env_extra={cores.VARIABLE: "1"})
    try:
        deadline = time.monotonic() + 60
        while os.sched_getaffinity(worker.process.pid) == allowed and time.monotonic() < deadline:
            time.sleep(0.05)
        assert os.sched_getaffinity(worker.process.pid) == allowed - set(sorted(allowed)[-2:])
    finally:
        worker.discard()
