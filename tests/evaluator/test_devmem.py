"""The device plan (kevin.evaluator.devmem): booted workers' CUDA contexts may fill half the device,
spares are cut to fit beside the workers in flight, and admission shares only what is left.

Session 34's H100 training run kept 12 workers in flight and 16 spares, three CUDA processes each:
the contexts alone took most of the 79 GiB, and kevin's own calibration and input draws ran out of
memory (22 verdicts lost, blamed on kevin). The same pool fitted the H200's 141 GiB."""

from __future__ import annotations

import os
import stat

import pytest

from kevin.evaluator import devmem
from kevin.evaluator.evaluate import EvalConfig
from kevin.evaluator.service import EvaluationService

MIB = 1 << 20
H100 = 81559 * MIB  # what nvidia-smi reports for an H100 80GB HBM3
H200 = 143771 * MIB


def test_the_session_34_pool_did_not_fit_an_h100_and_the_plan_cuts_its_spares():
    assert (12 + 16) * devmem.WORKER_BYTES > 0.75 * H100  # the pool that ran out of memory
    plan = devmem.plan(H100, in_flight=12, spares=16)
    assert plan.spares == 5
    assert plan.reserved_bytes == 17 * devmem.WORKER_BYTES <= devmem.CONTEXT_SHARE * H100
    assert "5 spare workers per device, not 16" in plan.notice()


def test_an_h200_keeps_the_spares_asked_for_and_a_small_device_none():
    plan = devmem.plan(H200, in_flight=12, spares=16)
    assert (plan.spares, plan.notice()) == (16, None)
    small = devmem.plan(24 << 30, in_flight=12, spares=4)
    assert small.spares == 0
    assert "lower max_in_flight" in small.notice()  # the workers in flight alone pass the share


def fake_smi(tmp_path, monkeypatch, body: str) -> None:
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\n" + body + "\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")


def test_the_device_size_comes_from_nvidia_smi_and_none_when_it_cannot_say(tmp_path, monkeypatch):
    fake_smi(tmp_path, monkeypatch, 'echo "$@" > ' + str(tmp_path / "args") + "; echo 81559")
    assert devmem.device_total_bytes("GPU-1234") == H100
    assert (tmp_path / "args").read_text().split()[:2] == ["-i", "GPU-1234"]
    fake_smi(tmp_path, monkeypatch, "echo 'No devices were found'; exit 6")
    assert devmem.device_total_bytes("0") is None
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert devmem.device_total_bytes("0") is None


@pytest.mark.parametrize("backend", ["cuda", "triton"])
def test_a_gpu_service_plans_its_devices_spares_and_tells_its_workers_what_is_reserved(
    backend, monkeypatch, capsys
):
    asked = []
    monkeypatch.setattr(devmem, "device_total_bytes", lambda name: asked.append(name) or H100)
    with EvaluationService(EvalConfig(backend=backend), max_in_flight=12, spare_workers=16) as service:
        assert service.spares.max_idle == 5
        assert service.config.device_reserved_bytes == 17 * devmem.WORKER_BYTES
    assert asked == ["0"]
    assert "5 spare workers per device, not 16" in capsys.readouterr().err


def test_the_plan_takes_the_smallest_device_and_the_workers_each_gets(monkeypatch):
    sizes = {"0": H200, "1": H100}
    monkeypatch.setattr(devmem, "device_total_bytes", sizes.get)
    with EvaluationService(
        EvalConfig(backend="cuda"), max_in_flight=12, spare_workers=16, device_indices=[0, 1]
    ) as service:
        assert service.device_plan.in_flight == 6  # round-robin over two devices
        assert service.spares.max_idle == 11 and service.device_plan.device_bytes == H100


def test_a_cpu_service_or_an_unknown_device_is_left_as_asked(monkeypatch):
    monkeypatch.setattr(devmem, "device_total_bytes", lambda name: pytest.fail("asked on the CPU"))
    with EvaluationService(EvalConfig(backend="cpp"), max_in_flight=3, spare_workers=7) as service:
        assert service.spares.max_idle == 7 and service.config.device_reserved_bytes == 0
    monkeypatch.setattr(devmem, "device_total_bytes", lambda name: None)
    with EvaluationService(EvalConfig(backend="cuda"), max_in_flight=3) as service:
        assert service.spares.max_idle == 3 and service.config.device_reserved_bytes == 0


def test_a_ray_actor_plans_its_own_gpu(monkeypatch):
    from kevin.evaluator.ray_service import _EvalActor

    monkeypatch.setattr(devmem, "device_total_bytes", lambda name: H100)
    actor = _EvalActor(EvalConfig(backend="cuda", device_index=3), spare_workers=12)
    assert actor.config.device_index == 0 and actor.spares.max_idle == 5
    assert actor.config.device_reserved_bytes == 17 * devmem.WORKER_BYTES
    actor.spares.close()


# -- a job's wait for device memory (kevin.evaluator.devlock.wait_for_memory) --------------------------------


class _Device:
    """torch.cuda's mem_get_info over a script of free amounts (the last repeats), on a fake clock."""

    def __init__(self, frees_gib, total_gib):
        self.frees, self.total, self.now, self.reads = list(frees_gib), total_gib, 0.0, 0
        self.cuda = self

    def mem_get_info(self):
        free = self.frees[min(self.reads, len(self.frees) - 1)]
        self.reads += 1
        return int(free * 2**30), int(self.total * 2**30)

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def _wait(monkeypatch, frees_gib, need_gib=None, reserved_gib=0.0, total_gib=80.0):
    from kevin.evaluator import devlock

    device = _Device(frees_gib, total_gib)
    monkeypatch.setattr(devlock.time, "monotonic", device.monotonic)
    monkeypatch.setattr(devlock.time, "sleep", device.sleep)
    need = None if need_gib is None else int(need_gib * 2**30)
    return devlock.wait_for_memory(device, need, int(reserved_gib * 2**30), patience_s=30.0)


def test_a_job_alone_does_not_sit_out_the_patience_for_memory_the_booted_contexts_hold(monkeypatch):
    # s45 (H100, 16 in flight, 1 spare): 17 workers' contexts planned at ~39 GiB of 80; free memory
    # held still at 38 GiB, under half the device, and each job alone waited the whole 30 s.
    reserved = devmem.WORKER_BYTES * 17 / 2**30
    assert _wait(monkeypatch, [38.0], reserved_gib=reserved) <= 0.5
    # ... while a context still being torn down is waited for until the free amount holds still
    assert _wait(monkeypatch, [20.0, 30.0, 34.0, 35.0], reserved_gib=reserved) == pytest.approx(1.0)


def test_without_a_plan_a_job_alone_still_waits_for_half_the_device(monkeypatch):
    assert _wait(monkeypatch, [38.0]) == pytest.approx(30.0)  # the patience: nothing reserved
    assert _wait(monkeypatch, [41.0]) == pytest.approx(0.25)  # still at half of 80: two reads
    assert _wait(monkeypatch, [75.0]) == 0.0


def test_a_shared_job_waits_for_what_it_needs(monkeypatch):
    assert _wait(monkeypatch, [2.0, 4.0, 9.0], need_gib=8.0, reserved_gib=39.0) == pytest.approx(0.5)
    assert _wait(monkeypatch, [2.0], need_gib=8.0, reserved_gib=39.0) == pytest.approx(30.0)
