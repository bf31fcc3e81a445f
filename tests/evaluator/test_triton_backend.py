"""The triton back end's CPU-side plumbing: configuration and the CLI's refusal where it cannot run,
the runner's Triton cache inside its writable home, the first call's JIT allowance, the gate as the
evaluator's first stage, and a Triton launch in a profile counted as the candidate's own work."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import torch
from torch.autograd import DeviceType

from kevin.cli import main
from kevin.evaluator import attribution, probes
from kevin.evaluator.evaluate import EvalConfig, _baseline_cache_file, device_lock_path, evaluate
from kevin.evaluator.worker.handle import (
    CALL_FLOOR_S,
    FIRST_CALL_FLOOR_S,
    JIT_FIRST_CALL_FLOOR_S,
    call_deadline_s,
)
from kevin.tasks import Task

BUNDLED = Path(__file__).resolve().parents[2] / "kevin" / "tasks" / "bundled"


def test_triton_runs_on_the_gpu_and_shares_cudas_baselines_and_lock(tmp_path):
    triton, cuda = EvalConfig(backend="triton", cache_dir=str(tmp_path)), EvalConfig(cache_dir=str(tmp_path))
    assert triton.device == "cuda:0" and triton.on_gpu and not EvalConfig(backend="cpp").on_gpu
    task = Task.from_source((BUNDLED / "tasks" / "01_gelu_tanh.py").read_text(), id="t", name="t")
    assert _baseline_cache_file(task, triton) == _baseline_cache_file(task, cuda)
    assert device_lock_path(triton) == device_lock_path(cuda)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without CUDA")
def test_the_cli_refuses_triton_without_a_gpu_in_one_line(capsys):
    problem, candidate = BUNDLED / "tasks" / "01_gelu_tanh.py", BUNDLED / "triton" / "01_gelu_tanh.py"
    assert main(["eval", str(problem), str(candidate), "--backend", "triton"]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "--backend triton needs a CUDA GPU" in error


def test_the_first_call_of_a_triton_candidate_may_compile():
    assert call_deadline_s(1e-4, first=True, jit=True) == JIT_FIRST_CALL_FLOOR_S > FIRST_CALL_FLOOR_S
    assert call_deadline_s(1e-4, first=True) == FIRST_CALL_FLOOR_S
    assert call_deadline_s(1e-4, jit=True) == CALL_FLOOR_S  # later calls: no compile, the usual floor


def test_the_runners_triton_cache_is_inside_its_writable_home(launched_runner):
    seen = launched_runner()
    lock, cache = seen["lock"], Path(seen["env"]["TRITON_CACHE_DIR"])
    writable = [Path(lock.job_dir), *map(Path, lock.writable)]
    assert any(cache.resolve().is_relative_to(root.resolve()) for root in writable)
    assert cache.resolve() != Path(lock.job_dir).resolve()  # its own folder, beside the job's files
    assert seen["env"]["HOME"] == lock.job_dir == seen["cwd"]  # ~/.triton resolves there too


def test_the_evaluator_gates_a_triton_cheat_before_anything_runs():
    task = Task.from_source((BUNDLED / "tasks" / "01_gelu_tanh.py").read_text(), id="gelu", name="gelu")
    honest = (BUNDLED / "triton" / "01_gelu_tanh.py").read_text()
    cheat = honest.replace("return out", "return torch.nn.functional.gelu(x, approximate='tanh')")
    result = evaluate(task, cheat, EvalConfig(backend="triton"))
    assert result.stage == "static_check" and result.blame == "candidate" and result.backend == "triton"
    assert "framework-compute" in result.error


def _event(id_, name, device, parent=None, us=0.0, activity=None):
    event = types.SimpleNamespace(
        id=id_, name=name, cpu_parent=parent, device_type=device, kernels=[],
        time_range=types.SimpleNamespace(start=0.0, end=us),
    )  # fmt: skip
    if activity:
        event.activity_type = activity
    return event


def test_a_triton_launch_is_the_candidates_own_device_time():
    """A Triton kernel is launched by Triton's own launcher through the driver (cuLaunchKernelEx),
    under no ATen operator: its time is the candidate's, while an aten::mm beside it is library work
    and an allocation is neither."""
    from torch.autograd.profiler_util import Kernel

    launch = _event(11, "cuLaunchKernelEx", DeviceType.CPU, activity="cuda_driver")
    triton_kernel = _event(911, "gelu_tanh_kernel", DeviceType.CUDA, us=30.0)
    launch.kernels.append(Kernel(triton_kernel.name, 0, 30.0))
    mm = _event(12, "aten::mm", DeviceType.CPU)
    gemm = _event(912, "sm90_gemm", DeviceType.CUDA, us=10.0)
    mm.kernels.append(Kernel(gemm.name, 0, 10.0))
    empty = _event(13, "aten::empty", DeviceType.CPU)
    found = attribution.attribute_device([launch, mm, empty, triton_kernel, gemm])
    assert found.custom_us == 30.0 and found.library_ops == {"aten::mm": 10.0}
    assert found.share < probes.LIBRARY_SHARE_LIMIT
    # Torch may also leave a Triton kernel unpaired (no host event listed for its correlation): still the candidate's.
    alone = attribution.attribute_device([_event(914, "softmax_kernel", DeviceType.CUDA, us=8.0)])
    assert alone.custom_us == 8.0 and alone.library_us == 0.0
