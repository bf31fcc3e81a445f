"""kevin.evaluator.probes pieces that need no GPU: reading streams out of a profile, attributing device
work to its launchers (fake profiler events), the library share over several calls, the blocking flags."""

from __future__ import annotations

import time
import types

import pytest
from torch.autograd import DeviceType
from torch.autograd.profiler_util import Kernel

from kevin.evaluator import attribution, probes
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




class _Op(types.SimpleNamespace):
    """A FunctionEvent as torch's profiler builds it: host operators carry their kernels' device
    time as their own, and each kernel is also an event of its own, correlated to its launcher."""


def _host(id_: int, name: str, parent=None, device_us: float = 0.0) -> _Op:
    return _Op(
        id=id_, name=name, cpu_parent=parent, device_type=DeviceType.CPU, linked_correlation_id=0, kernels=[],
        time_range=types.SimpleNamespace(start=0.0, end=1.0), self_device_time_total=device_us,
        self_cpu_time_total=1.0, cpu_time_total=1.0,
    )  # fmt: skip


def _kernel(name: str, launcher: _Op, us: float) -> _Op:
    return _Op(
        id=900 + launcher.id, name=name, cpu_parent=None, device_type=DeviceType.CUDA,
        linked_correlation_id=launcher.id, time_range=types.SimpleNamespace(start=10.0, end=10.0 + us),
        self_device_time_total=us, self_cpu_time_total=0.0, cpu_time_total=0.0,
    )  # fmt: skip


def _paired(events: list[_Op]) -> list[_Op]:
    """The events as torch's profiler hands them out: each device activity appended (name, device,
    duration) to the `kernels` of every unlinked host event whose id its correlation names, and, as
    in torch 2.11, no link field left on the events themselves."""
    for device in (e for e in events if e.device_type == DeviceType.CUDA):
        for host in events:
            if host.device_type == DeviceType.CPU and host.linked_correlation_id == 0 and host.id == device.linked_correlation_id:
                host.kernels.append(Kernel(device.name, 0, device.time_range.end - device.time_range.start))
    for event in events:
        del event.linked_correlation_id
    return events


def _library_gemm_with_token_kernel() -> list[_Op]:
    """torch.mm does the work (100 us); the candidate's own kernel is a token (5 us)."""
    forward = _host(1, "kevin::ext::forward", device_us=5.0)
    mm = _host(2, "aten::mm", parent=forward, device_us=100.0)
    empty = _host(3, "aten::empty", parent=forward)
    fill = _host(4, "aten::fill_", parent=forward, device_us=2.0)
    return _paired([
        forward, mm, empty, fill,
        _kernel("sm90_xmma_gemm_f32f32", mm, 100.0),
        _kernel("token_kernel", forward, 5.0),
        _kernel("vectorized_elementwise_kernel", fill, 2.0),
        _kernel("Memcpy DtoD (Device -> Device)", forward, 50.0),
    ])  # fmt: skip


def test_device_work_is_counted_once_and_given_to_the_operator_that_launched_it():
    # Regression (issue #14, H200): operator and kernel events were both summed, so a forward done
    # by ATen topped out near a share of 0.5 and a token kernel beside torch.mm passed.
    found = attribution.attribute_device(_library_gemm_with_token_kernel())
    assert found.library_us == 100.0 and found.custom_us == 5.0
    assert found.allowed_us == 52.0  # the fill and the copy: not compute, not the candidate's
    assert found.library_ops == {"aten::mm": 100.0}
    assert found.share > probes.LIBRARY_SHARE_LIMIT


def test_a_runtime_call_whose_id_collides_with_an_operators_is_not_taken_for_the_launcher():
    forward = _host(7, "kevin::ext::forward")
    launch = _host(5, "cudaLaunchKernel")  # CUDA's correlation space: its own 5, linked to op 5
    launch.linked_correlation_id = 5
    mm = _host(5, "aten::mm", parent=forward)
    found = attribution.attribute_device(_paired([mm, forward, _kernel("gemm", mm, 40.0), launch]))
    assert found.library_ops == {"aten::mm": 40.0}


def test_an_unlinked_runtime_call_with_an_operators_id_does_not_hide_the_operators_kernels():
    """On the H200 (session 8) torch.relu(x * s) beside a token kernel read as a library share of 0:
    the runner's synchronize between traced calls is a runtime call outside every operator, so it
    is linked to nothing, and its id (CUDA's correlation space) can equal an operator's. Taken for a
    host operator it replaced aten::mul as the launcher of mul's kernel, which then read as the
    candidate's own."""
    forward = _host(1, "kevin::ext::forward")
    mul = _host(2, "aten::mul")
    relu = _host(3, "aten::relu")
    sync_a = _host(2, "cudaDeviceSynchronize")  # after the operators in the event list
    sync_b = _host(3, "cudaStreamSynchronize")
    sync_a.activity_type = sync_b.activity_type = "cuda_runtime"
    events = [forward, mul, relu, sync_a, sync_b]
    events = _paired(events + [_kernel("elementwise_mul", mul, 30.0), _kernel("elementwise_relu", relu, 30.0), _kernel("token", forward, 2.0)])
    assert sync_a.kernels and sync_b.kernels  # torch lists the kernels under the colliding calls too
    found = attribution.attribute_device(events)
    assert found.library_ops == {"aten::mul": 30.0, "aten::relu": 30.0} and found.custom_us == 2.0
    # Without an activity type (older torch), a compute operator sharing the id still wins.
    del sync_a.activity_type, sync_b.activity_type
    assert attribution.attribute_device(events).library_ops == {"aten::mul": 30.0, "aten::relu": 30.0}


def test_device_time_torch_paired_with_no_operator_is_the_candidates():
    """A kernel launched by the candidate's own launcher (triton, a raw driver call) has no operator."""
    mm = _host(2, "aten::mm")
    orphan = _kernel("triton_poi_fused", _host(77, "(never listed)"), 12.0)
    found = attribution.attribute_device(_paired([mm, _kernel("gemm", mm, 40.0), orphan]))
    assert found.library_ops == {"aten::mm": 40.0} and found.custom_us == 12.0


def test_a_kernel_launched_inside_a_compute_operator_is_library_work_whatever_is_inside():
    outer = _host(1, "aten::linear")
    inner = _host(2, "aten::t", parent=outer)  # an allowed view, inside a compute operator
    found = attribution.attribute_device(_paired([outer, inner, _kernel("gemm", inner, 30.0)]))
    assert found.library_ops == {"aten::linear": 30.0} and found.custom_us == 0.0


def _aten_inside_the_extension(linked: bool, marked: str) -> list[_Op]:
    """The extension's own C++ calls torch::relu(x * s) (60 us of ATen kernels) beside a 2 us token
    kernel, all inside kevin's range `kevin::ext::forward`, whose device-side shadow (CUDA's
    `gpu_user_annotation`) spans all three; `linked`: torch also lists the shadow among the range's
    kernels; `marked`: how the shadow says what it is (torch's flag, or only its activity type)."""
    forward = _host(1, "kevin::ext::forward")
    forward.is_user_annotation = True
    mul = _host(2, "aten::mul", parent=forward)
    relu = _host(3, "aten::relu", parent=forward)
    launch = _host(4, "cudaLaunchKernel", parent=forward)
    launch.activity_type = "cuda_runtime"
    shadow = _kernel("kevin::ext::forward", forward if linked else _host(99, "(never listed)"), 64.0)
    if marked == "flag":
        shadow.is_user_annotation = True
    else:
        shadow.activity_type = "gpu_user_annotation"
    return _paired([
        forward, mul, relu, launch,
        _kernel("elementwise_mul", mul, 30.0), _kernel("elementwise_relu", relu, 30.0),
        _kernel("token_kernel", launch, 2.0), shadow,
    ])  # fmt: skip


@pytest.mark.parametrize("linked", [True, False], ids=["linked", "unlinked"])
@pytest.mark.parametrize("marked", ["flag", "activity_type"])
def test_a_ranges_device_shadow_is_not_the_candidates_work(linked, marked):
    """Session 38 (H100, torch 2.11): the trace listed `kevin::ext::new_gelu_forward` as a custom
    kernel at its kernel's time. Around ATen work inside the extension the shadow matched the
    library's time, so the share read ~0.5 and was not flagged."""
    found = attribution.attribute_device(_aten_inside_the_extension(linked, marked))
    assert found.library_us == 60.0 and found.custom_us == 2.0
    assert found.share > probes.LIBRARY_SHARE_LIMIT
    assert {name for name, _ in found.kernels} == {"elementwise_mul", "elementwise_relu", "token_kernel"}


def test_the_runners_input_copies_stay_out_of_the_candidates_kernel_table():
    """Session 38: the winner's table listed the runner's clone of a 256 MB input (`Memcpy DtoD`, a
    third of its device time). Copies under kevin's range are left out; work under it is not."""
    copies = _host(1, attribution.INPUT_COPIES_RANGE)
    clone = _host(2, "aten::clone", parent=copies)
    copy = _host(3, "aten::copy_", parent=clone)
    mm = _host(4, "aten::mm", parent=copies)  # a candidate's range of that name hides no library work
    own_copy = _host(5, "aten::copy_")  # the candidate's own copy, outside the range
    found = attribution.attribute_device(_paired([
        copies, clone, copy, mm, own_copy,
        _kernel("Memcpy DtoD (Device -> Device)", copy, 170.0), _kernel("gemm", mm, 40.0),
        _kernel("Memcpy DtoD (Device -> Device)", own_copy, 3.0),
    ]))  # fmt: skip
    table = {(row["name"], row["whose"]): row["us"] for row in attribution.kernel_table(found)}
    assert table == {("gemm", "library"): 40.0, ("Memcpy DtoD (Device -> Device)", "allowed"): 3.0}
    assert found.library_ops == {"aten::mm": 40.0} and found.allowed_us == 173.0


class _FakeProfile:
    """torch.profiler.profile's stand-in: hands out the same events for every look."""

    events_list: list = []

    def __init__(self, activities):
        self.profiler = types.SimpleNamespace()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def events(self):
        return list(self.events_list)


def test_the_cuda_trace_flags_a_token_kernel_beside_library_work(monkeypatch):
    import torch.profiler

    monkeypatch.setattr(torch.profiler, "profile", _FakeProfile)
    monkeypatch.setattr(_FakeProfile, "events_list", _library_gemm_with_token_kernel())
    monkeypatch.setattr(probes, "current_stream_ids", lambda sync: set())
    trace = probes.trace_forward(lambda: None, True, lambda: None, [])
    assert "library_kernels" in trace["flags"], trace
    assert trace["library_share"] > 0.9
    assert trace["device_activities"] == 4 and trace["marker_seen"] is False  # the four kernel events


def test_a_blind_profiler_is_asked_once_more_then_said_blind_without_a_flag(monkeypatch):
    """s34, s39, s41: honest kernels whose trace held no device work at all were flagged
    `no_custom_kernel`. A look with no device activity where kevin's marker, profiled right after,
    is not seen either is the profiler's failure: taken again once, then `blind`, no flag."""
    import torch.profiler

    monkeypatch.setattr(torch.profiler, "profile", _FakeProfile)
    monkeypatch.setattr(_FakeProfile, "events_list", [_host(1, "kevin::ext::forward")])
    markers = []
    monkeypatch.setattr(probes, "current_stream_ids", lambda sync: markers.append(1) or set())
    calls = []
    trace = probes.trace_forward(lambda: calls.append(1), True, lambda: None, [])
    assert trace["blind"] is True and trace["flags"] == [], trace
    assert len(markers) == 3  # once before the looks, once after each of the two blind ones
    assert len(calls) == 1 + 2 * probes.TRACE_MAX_CALLS  # instant calls: each look's most


def test_a_profiler_that_sees_the_marker_but_no_candidate_work_flags_no_custom_kernel(monkeypatch):
    """The marker seen: the profiler works, so a forward with no device work of its own (a CPU
    computation returned as the output) is what `no_custom_kernel` is for."""
    import torch.profiler

    monkeypatch.setattr(torch.profiler, "profile", _FakeProfile)
    monkeypatch.setattr(_FakeProfile, "events_list", [_host(1, "kevin::ext::forward")])
    monkeypatch.setattr(probes, "current_stream_ids", lambda sync: {7})
    trace = probes.trace_forward(lambda: None, True, lambda: None, [])
    assert "blind" not in trace and "no_custom_kernel" in trace["flags"], trace
    assert trace["device_activities"] == 0 and trace["marker_seen"] is True


def test_an_empty_look_with_the_marker_seen_is_taken_again_before_any_flag(monkeypatch):
    """s46 (H100 A/A pass, 16 in flight): one of eight copies of an honest cumsum kernel was flagged
    `no_custom_kernel` from a look with no device activity and no launch recorded, kevin's marker
    seen. A second look saw its kernel in the other seven's way: the flag waits for it."""
    import torch.profiler

    forward = _host(1, "kevin::ext::forward")
    work = _paired([forward, _api(2, "cudaLaunchKernel"), _kernel("row_cumsum_kernel", forward, 360.0)])
    looks = []

    class EmptyFirst(_FakeProfile):
        def events(self):
            looks.append(1)
            return [_host(1, "kevin::ext::forward")] if len(looks) == 1 else list(work)

    monkeypatch.setattr(torch.profiler, "profile", EmptyFirst)
    monkeypatch.setattr(probes, "current_stream_ids", lambda sync: {7})
    trace = probes.trace_forward(lambda: None, True, lambda: None, [])
    assert len(looks) == 2 and trace["flags"] == [] and trace["custom_us"] > 0, trace


def _api(id_: int, name: str, kind: str = "cuda_runtime") -> _Op:
    """A CUDA runtime or driver API record as torch's profiler hands it out: a host event."""
    return _Op(**{**vars(_host(id_, name)), "activity_type": kind})


def test_launch_calls_count_the_api_records_that_put_work_on_the_device():
    annotation = _Op(**{**vars(_host(9, "cudaLaunchKernel")), "is_user_annotation": True})
    events = [
        _api(1, "cudaLaunchKernel"), _api(2, "cuLaunchKernelEx", "cuda_driver"),
        _api(3, "cudaMemcpyToSymbolAsync"), _api(4, "cudaMemsetAsync"), _api(5, "cudaGraphLaunch"),
        _api(6, "cudaDeviceSynchronize"), _api(7, "cudaStreamIsCapturing"), _host(8, "aten::empty"),
        _api(12, "cudaLaunchHostFunc"), _api(13, "cuLaunchHostFunc", "cuda_driver"),  # no device work
        annotation,  # a candidate's range named like a launch is not an API record
        _Op(**{**vars(_host(10, "cudaLaunchKernel")), "activity_type": "cpu_op"}),
        _kernel("scale_relu_kernel", _host(11, "kevin::ext::forward"), 3.0),
    ]  # fmt: skip
    assert attribution.launch_calls(events) == 5


def test_launches_recorded_without_their_device_work_make_the_look_blind_not_the_candidate(monkeypatch):
    """s43 (H100): two honest kernels (2.8x and 3.65x) were flagged `no_custom_kernel` with no
    device activity in their looks and kevin's marker seen: kineto drops device records whose
    timestamps CUPTI gave in another clock (pytorch/pytorch#192021) while the API records stay. Launches
    with no device work are the profiler's loss: taken again once, then `blind`, no flag."""
    import torch.profiler

    monkeypatch.setattr(torch.profiler, "profile", _FakeProfile)
    events = [_host(1, "kevin::ext::forward"), _api(2, "cudaMemcpyToSymbolAsync"), _api(3, "cudaLaunchKernel")]
    monkeypatch.setattr(_FakeProfile, "events_list", events)
    markers = []
    monkeypatch.setattr(probes, "current_stream_ids", lambda sync: markers.append(1) or {7})
    trace = probes.trace_forward(lambda: None, True, lambda: None, [])
    assert trace["blind"] is True and trace["flags"] == [] and trace["launch_calls"] == 2, trace
    assert len(markers) == 1  # the launches say it: no marker needed after the looks
    # The candidate's own range named like a launch changes nothing: no API record, no launch.
    fake = _Op(**{**vars(_host(2, "cudaLaunchKernel")), "is_user_annotation": True})
    monkeypatch.setattr(_FakeProfile, "events_list", [_host(1, "kevin::ext::forward"), fake])
    trace = probes.trace_forward(lambda: None, True, lambda: None, [])
    assert "blind" not in trace and "no_custom_kernel" in trace["flags"] and trace["launch_calls"] == 0, trace


def test_the_share_is_over_several_calls_not_the_one_that_was_profiled():
    """A forward that does its work in torch on odd calls and in its own code on even calls: one
    profiled call (the second, after a discarded start-up call) saw only its own code."""
    import torch

    a = torch.rand(256, 256)
    calls = [0]

    def spin() -> None:  # the candidate's own work, ~0.2 ms of Python
        end = time.perf_counter() + 2e-4
        while time.perf_counter() < end:
            pass

    ext = types.SimpleNamespace(spin=spin)

    def forward() -> None:
        calls[0] += 1
        if calls[0] % 2:
            for _ in range(4):
                torch.mm(a, a)
        else:
            ext.spin()

    trace = probes.trace_forward(forward, False, lambda: None, [ext])
    assert trace["traced_calls"] >= probes.TRACE_MIN_CALLS
    assert "library_kernels" in trace["flags"], trace


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
    # kevin's own draw or calibration out of memory beside others (the H100, session 34): alone too.
    ours = EvalResult(**{**shared.to_dict(), "blame": "infrastructure"})
    assert _out_of_memory_beside_others(ours, config)
    assert not _out_of_memory_beside_others(EvalResult(**{**shared.to_dict(), "blame": "none"}), config)
    # Cut to the verdict's length in the middle of torch's message, its head gone (s34).
    cut = (
        "kevin worker failed during correctness: Traceback (most recent call last):\n  File ...\n"
        "[... 2080 characters truncated by kevin ...]\n MiB memory in use. Process 27077 has 1.85 GiB memory"
        " in use. Of the allocated memory 512.00 MiB is allocated by PyTorch, and 0 bytes is reserved by"
        " PyTorch but unallocated. If reserved but unallocated memory is large try setting"
        " PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation."
    )
    assert _out_of_memory_beside_others(EvalResult(**{**ours.to_dict(), "error": cut}), config)


def test_a_thread_that_ended_does_not_hide_one_the_candidate_started():
    # Regression (session 7): the check compared counts, so a runner thread that ended while a slow
    # build ran cancelled the candidate's own thread (3 before, 3 after) and extra_threads missed it.
    from kevin.evaluator.worker.timed import thread_changes

    before = {101: "python", 102: "pt_main_thread", 103: "kineto"}
    after = {101: "python", 102: "pt_main_thread", 240: "python"}
    changes = thread_changes(before, after)
    assert changes["new"] == ["python"] and changes["gone"] == ["kineto"]
    assert changes["started"] == ["python"]
    assert thread_changes(before, dict(before))["started"] == []
    # A tool thread replaced by one of the same name (a profiling session's own) is not the candidate's.
    churned = {101: "python", 102: "pt_main_thread", 300: "kineto"}
    assert thread_changes(before, churned)["started"] == []


def test_a_changed_setting_is_recorded_as_before_and_after_and_a_bad_reply_as_data():
    from kevin.evaluator.worker.timed import state_changes

    before = {"num_threads": 1, "float32_matmul_precision": "highest", "matmul.allow_tf32": False}
    after = dict(before, num_threads=4)
    assert state_changes(before, after) == {"num_threads": ["1", "4"]}
    assert state_changes(before, ["x" * 500]) == {"(reply)": [str(before)[:60], str(["x" * 500])[:60]]}


def test_explain_names_each_blocking_flag_with_the_numbers_behind_it():
    """A blocked verdict is correct and has a speedup; without this line a log, a report or a failed
    test shows no reason (CI's s16 run: three honest kernels blocked, the flag never printed)."""
    checks = {
        "fetch_excess_ms": 1.31,
        "fetch_ms": {"clean_median": 0.2, "timed": [1.5, 1.6, 1.9]},
        "fetch_copy_ms": {"own": 0.05, "timed": [0.06]},
        "runner_counters": {"candidate": {"timed": {"minflt": 40}}},
        "runner_threads": {"before": 3, "after": 4, "new": ["python"], "gone": [], "started": ["python"]},
        "left_processes": ["812 python R below the worker"],
        "trace": {"library_share": 0.93, "library_ops_us": {"aten::mm": 40.0}, "custom_us": 0.0},
    }
    flags = ["deferred_work", "extra_threads", "left_processes", "library_kernels", "inputs_mutated", "slow_warmup"]
    blocked = EvalResult(stage="ok", compiled=True, correct=True, speedup=0.3, flags=flags, checks=checks)
    line = blocked.explain()
    assert line.startswith("blocked: deferred_work (fetch_excess_ms=1.31, fetch_ms={")
    # the copy's own time beside the fetch's: a slow copy or slow signalling (s33: honest Triton
    # kernels flagged on small tasks in a cold, busy batch, and not alone)
    assert 'fetch_copy_ms={"own": 0.05, "timed": [0.06]}, runner_counters.candidate={"timed": {"minflt": 40}})' in line
    assert 'extra_threads (runner_threads.started=["python"])' in line
    assert 'left_processes (left_processes=["812 python R below the worker"])' in line
    assert 'library_kernels (trace.library_share=0.93, trace.library_ops_us={"aten::mm": 40.0})' in line
    assert line.endswith("; inputs_mutated") and "slow_warmup" not in line and "\n" not in line
    wrong = EvalResult(stage="correctness", compiled=True, error="max abs error 3.1\nmore", blame="candidate")
    assert wrong.explain() == "correctness (candidate): max abs error 3.1"
    ours = EvalResult(stage="ok", compiled=True, correct=True, speedup=1.0, blame="infrastructure")
    assert ours.explain() == "ok (infrastructure): no error text"
    assert EvalResult(stage="ok", compiled=True, correct=True, speedup=1.0).explain() == ""


def test_the_kernel_table_names_each_kernel_once_with_whose_it_is():
    """For the profile feedback (kevin.rl.profiles): every device kernel by name, launches and time,
    library work marked, the orphan kernel the candidate's, copies allowed."""
    events = _library_gemm_with_token_kernel() + _paired([_kernel("triton_poi_fused", _host(77, "(never listed)"), 12.0)])
    found = attribution.attribute_device(events)
    table = {(row["name"], row["whose"]): (row["launches"], row["us"]) for row in attribution.kernel_table(found)}
    assert table == {
        ("sm90_xmma_gemm_f32f32", "library"): (1, 100.0),
        ("Memcpy DtoD (Device -> Device)", "allowed"): (1, 50.0),
        ("triton_poi_fused", "custom"): (1, 12.0),
        ("token_kernel", "custom"): (1, 5.0),
        ("vectorized_elementwise_kernel", "allowed"): (1, 2.0),
    }
    assert [row["us"] for row in attribution.kernel_table(found)] == [100.0, 50.0, 12.0, 5.0, 2.0]  # heaviest first


def test_the_judge_keeps_only_well_formed_kernel_rows_from_the_runner():
    rows = [
        {"name": "k" * 500, "whose": "custom", "launches": 2, "us": 10.5},
        {"name": "x", "whose": "mine", "launches": 1, "us": 1.0},  # not a known owner
        {"name": "y", "whose": "library", "launches": float("nan"), "us": 1.0},
        {"name": "z", "whose": "library", "launches": 1, "us": -1.0},
        {"name": 3, "whose": "custom", "launches": 1, "us": 1.0},
        {"name": "w", "whose": "custom", "launches": True, "us": 1.0},
        "not a row",
    ] + [{"name": f"n{i}", "whose": "custom", "launches": 1, "us": 1.0} for i in range(20)]
    clean = attribution.clean_kernel_table(rows)
    assert clean[0] == {"name": "k" * attribution.KERNEL_NAME_CHARS, "whose": "custom", "launches": 2.0, "us": 10.5}
    assert [row["name"] for row in clean[1:]] == ["n0"]  # the other rows of the first KERNELS_REPORTED: junk
    assert attribution.clean_kernel_table({"kernels": 1}) == [] and attribution.clean_kernel_table(None) == []
    assert len(attribution.clean_kernel_table(rows[7:])) == attribution.KERNELS_REPORTED


def test_traced_kernels_reads_a_verdicts_table_back_as_data():
    from kevin.evaluator.attribution import traced_kernels

    row = {"name": "k", "whose": "custom", "launches": 4.0, "us": 12.0}
    assert traced_kernels({"trace": {"kernels": [row], "traced_calls": 4}}) == ([row], 4)
    bad = {"name": "x", "whose": "custom", "launches": float("nan"), "us": 1.0}
    assert traced_kernels({"trace": {"kernels": [bad, row], "traced_calls": 2}}) == ([row], 2)
    for checks in (None, {}, {"trace": "no"}, {"trace": {"kernels": [row]}}, {"trace": {"kernels": [row], "traced_calls": 0}},
                   {"trace": {"kernels": [row], "traced_calls": True}}, {"trace": {"kernels": [], "traced_calls": 3}}):
        assert traced_kernels(checks) is None, checks


def test_every_runner_tears_cupti_down_when_a_profile_ends(launched_runner, monkeypatch):
    """The candidate's runner profiles (a warm-up at boot, the trace) before it is timed; the control
    runner that brackets it and times the baseline never does. A profiler that left CUPTI subscribed
    would slow the candidate's CUDA calls alone (pytorch/pytorch#144455), so Kineto is told to tear it
    down, whatever the host's environment says."""
    monkeypatch.setenv("TEARDOWN_CUPTI", "0")
    for traced in (True, False):
        assert launched_runner(traced)["env"]["TEARDOWN_CUPTI"] == "1"


def test_a_cut_error_keeps_the_start_of_its_last_line():
    """s34: torch's out-of-memory message, with its list of the device's processes, was longer than
    the tail a verdict's error keeps, and the cut took the exception's name and its first words."""
    from kevin.evaluator.result import ERROR_CHARS, truncate_middle

    frames = "".join(f'  File "f{i}.py", line {i}, in f\n    g()\n' for i in range(40))
    processes = " ".join(f"Process {i} has 868.00 MiB memory in use." for i in range(80))
    error = (
        "Traceback (most recent call last):\n" + frames + "torch.OutOfMemoryError: CUDA out of memory. "
        "Tried to allocate 128.00 MiB. " + processes + " If reserved ... PYTORCH_CUDA_ALLOC_CONF=..."
    )
    for limit in (ERROR_CHARS, 600):
        cut = truncate_middle(error, limit)
        assert len(cut) <= limit
        assert cut.startswith("Traceback (most recent call last):\n  File")
        assert "\ntorch.OutOfMemoryError: CUDA out of memory. Tried" in cut
        assert cut.endswith("PYTORCH_CUDA_ALLOC_CONF=...") and cut.count("truncated by kevin") == 2
    assert EvalResult(stage="runtime", error=error).error == truncate_middle(error, ERROR_CHARS)
    # A short last line, or little room: the head and the tail as before, one marker.
    lines = "line\n" * 1000
    assert truncate_middle(lines, 300).count("truncated by kevin") == 1
    assert len(truncate_middle(lines, 300)) <= 300 and truncate_middle("short", 300) == "short"
    assert truncate_middle(error, 200).count("truncated by kevin") == 1


def test_a_blind_trace_is_the_infrastructures_failure_not_the_candidates():
    """The judge's side: a runner's `blind` trace ends the verdict blamed on kevin (the trainer drops
    it from its group unscored), where an empty trace was `no_custom_kernel` against the kernel."""
    from kevin.evaluator.worker.support import Failure
    from kevin.evaluator.worker.trials import TrialsStage

    class Runner:
        def request(self, command, **_):
            assert command == "trace"
            return {"ok": True, "trace": {"blind": True, "traced_calls": 32, "flags": []}}

    judge = object.__new__(TrialsStage)
    judge.job, judge.reference_call_s, judge.flags = {"seed": 1}, 0.001, []
    judge.stage_name = "timing"
    with pytest.raises(Failure) as failed:
        judge.trace_candidate(Runner())
    assert failed.value.fields["blame"] == "infrastructure" and failed.value.fields["stage"] == "runtime"
    assert "profiler recorded no device work" in failed.value.fields["error"] and judge.flags == []
