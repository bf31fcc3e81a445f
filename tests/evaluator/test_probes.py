"""kevin.evaluator.probes pieces that need no GPU: reading streams out of a profile, the blocking flags."""

from __future__ import annotations

import types

from torch.autograd import DeviceType

from kevin.evaluator import probes
from kevin.evaluator.result import BLOCKING_FLAGS, EvalResult


def _event(name: str, device: DeviceType, stream: int):
    return types.SimpleNamespace(
        name=lambda: name, device_type=lambda: device, device_resource_id=lambda: stream
    )


def _profile(*events):
    results = types.SimpleNamespace(events=lambda: list(events))
    return types.SimpleNamespace(profiler=types.SimpleNamespace(kineto_results=results))


def test_device_streams_groups_device_activity_by_stream_and_ignores_host_events():
    prof = _profile(
        _event("fill_kernel", DeviceType.CUDA, 7),
        _event("cudaLaunchKernel", DeviceType.CPU, 7),
        _event("scale_relu_kernel", DeviceType.CUDA, 13),
        _event("Memcpy DtoD", DeviceType.CUDA, 7),
    )
    assert probes.device_streams(prof) == {7: ["fill_kernel", "Memcpy DtoD"], 13: ["scale_relu_kernel"]}


def test_a_profile_without_kineto_results_has_no_streams():
    assert probes.device_streams(types.SimpleNamespace()) == {}


def test_side_stream_blocks_the_score():
    assert "side_stream" in BLOCKING_FLAGS
    result = EvalResult(stage="ok", compiled=True, correct=True, speedup=11.0, flags=["side_stream"])
    assert not result.passed




def test_an_out_of_memory_beside_other_workers_is_rerun_alone_but_not_one_alone():
    from kevin.evaluator.evaluate import EvalConfig, _out_of_memory_beside_others

    config = EvalConfig(backend="cuda", device_slots=4)
    shared = EvalResult(
        stage="runtime",
        blame="candidate",
        error="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB",
        checks={"device_admission": {"weight": 1, "slots": 4}},
    )
    assert _out_of_memory_beside_others(shared, config)
    alone = EvalResult(**{**shared.to_dict(), "checks": {"device_admission": {"weight": 4, "slots": 4}}})
    assert not _out_of_memory_beside_others(alone, config)
    other_error = EvalResult(**{**shared.to_dict(), "error": "illegal memory access"})
    assert not _out_of_memory_beside_others(other_error, config)
    assert not _out_of_memory_beside_others(shared, EvalConfig(backend="cpp"))






