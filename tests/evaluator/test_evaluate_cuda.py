"""The evaluator on a GPU (cuda back end): the failure families with CUDA candidates of our own.

One CUDA extension (one build, shared through the build cache) holds every kernel; each candidate
calls a different one. Marked `gpu`: skipped without CUDA, run on the GPU machine.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kevin.evaluator.evaluate import EvalConfig, evaluate
from kevin.evaluator.sandbox import Limits
from kevin.evaluator.timing import TimingConfig
from kevin.tasks import Task

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

DATA = Path(__file__).parents[1] / "data" / "eval"

CPP_DECL = """
torch::Tensor scale_relu(torch::Tensor x, double scale);
torch::Tensor scale_only(torch::Tensor x, double scale);
torch::Tensor illegal_access(torch::Tensor x, double scale);
torch::Tensor spin(torch::Tensor x, double scale);
torch::Tensor device_assert(torch::Tensor x, double scale);
torch::Tensor side_stream(torch::Tensor x, double scale);
torch::Tensor side_stream_once(torch::Tensor x, double scale);
torch::Tensor library_inside(torch::Tensor x, double scale);
"""

CUDA_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <cassert>

__global__ void scale_relu_kernel(const float* x, float* y, float s, int64_t n, int relu) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i] * s; y[i] = (relu && v < 0.f) ? 0.f : v; }
}

__global__ void illegal_kernel(float* y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i + (1LL << 40)] = 1.f;
}

__global__ void spin_kernel(volatile int* flag) {
    while (*flag == 0) { }
}

__global__ void assert_kernel(const float* x, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) assert(x[i] > 1e30f);
}

static torch::Tensor launch(torch::Tensor x, double scale, int relu, cudaStream_t stream) {
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    int64_t n = input.numel();
    int threads = 256;
    int64_t blocks = (n + threads - 1) / threads;
    scale_relu_kernel<<<blocks, threads, 0, stream>>>(input.data_ptr<float>(), out.data_ptr<float>(),
                                                      (float)scale, n, relu);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

torch::Tensor scale_relu(torch::Tensor x, double scale) {
    return launch(x, scale, 1, c10::cuda::getCurrentCUDAStream());
}

torch::Tensor scale_only(torch::Tensor x, double scale) {
    return launch(x, scale, 0, c10::cuda::getCurrentCUDAStream());
}

torch::Tensor illegal_access(torch::Tensor x, double scale) {
    auto out = torch::empty_like(x);
    int64_t n = x.numel();
    illegal_kernel<<<(n + 255) / 256, 256, 0, c10::cuda::getCurrentCUDAStream()>>>(out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

torch::Tensor spin(torch::Tensor x, double scale) {
    auto flag = torch::zeros({1}, x.options().dtype(torch::kInt32));
    spin_kernel<<<1, 1, 0, c10::cuda::getCurrentCUDAStream()>>>(flag.data_ptr<int>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return launch(x, scale, 1, c10::cuda::getCurrentCUDAStream());
}

torch::Tensor device_assert(torch::Tensor x, double scale) {
    int64_t n = x.numel();
    assert_kernel<<<(n + 255) / 256, 256, 0, c10::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return launch(x, scale, 1, c10::cuda::getCurrentCUDAStream());
}

static void after_current(cudaStream_t other) {
    // Work on `other` starts only after what is queued on the current stream (the inputs' copies):
    // without this the side-stream kernels race the judge's input refill and are sometimes wrong.
    static cudaEvent_t ready = nullptr;
    if (!ready) cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
    cudaEventRecord(ready, c10::cuda::getCurrentCUDAStream());
    cudaStreamWaitEvent(other, ready, 0);
}

torch::Tensor side_stream(torch::Tensor x, double scale) {
    // Right answer, computed on a stream the event clock does not cover.
    static cudaStream_t other = nullptr;
    if (!other) cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking);
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    int64_t n = input.numel();
    after_current(other);  // the input may still be in flight on the current stream
    for (int k = 0; k < 20; ++k)
        scale_relu_kernel<<<(n + 255) / 256, 256, 0, other>>>(input.data_ptr<float>(), out.data_ptr<float>(),
                                                             (float)scale, n, 1);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;  // not synchronized: the harness's end event fires before the work is done
}

torch::Tensor side_stream_once(torch::Tensor x, double scale) {
    // One short kernel on another stream: too small to delay the final synchronize visibly.
    static cudaStream_t other = nullptr;
    if (!other) cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking);
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    int64_t n = input.numel();
    after_current(other);
    scale_relu_kernel<<<(n + 255) / 256, 256, 0, other>>>(input.data_ptr<float>(), out.data_ptr<float>(),
                                                         (float)scale, n, 1);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

torch::Tensor library_inside(torch::Tensor x, double scale) {
    // ATen does the work from the extension's own C++, beside a token kernel of its own.
    auto y = torch::relu(x * scale);
    launch(x.narrow(0, 0, 1), scale, 1, c10::cuda::getCurrentCUDAStream());
    return y;
}
"""

FUNCTIONS = [
    "scale_relu",
    "scale_only",
    "illegal_access",
    "spin",
    "device_assert",
    "side_stream",
    "side_stream_once",
    "library_inside",
]


def candidate(
    call: str, body: str = "", name: str = "kevin_test_cuda_ext", cuda: str = CUDA_SRC, prelude: str = ""
) -> str:
    return f"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
{prelude}
ext = load_inline(name={name!r}, cpp_sources={CPP_DECL!r}, cuda_sources={cuda!r}, functions={FUNCTIONS!r})


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
{body}        return ext.{call}(x, self.scale)
"""


@pytest.fixture(scope="module")
def task() -> Task:
    source = (
        (DATA / "problem_scale_relu.py")
        .read_text()
        .replace("torch.randn(64, 256)", "torch.randn(4096, 4096)")
    )
    return Task.from_source(source, id="scale_relu_gpu", name="scale_relu_gpu")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("kevin-cache"))


@pytest.fixture
def config(cache_dir, tmp_path) -> EvalConfig:
    limits = Limits(
        stage_timeouts_s={
            "setup": 120,
            "compile": 600,
            "wait_gpu": 600,
            "inputs": 60,
            "correctness": 30,
            "timing": 60,
            "reference": 60,
            "baseline": 60,
            "done": 10,
        }
    )
    return EvalConfig(
        backend="cuda",
        cache_dir=cache_dir,
        static_check=False,
        timing=TimingConfig(budget_ms=300),
        limits=limits,
        workdir_root=str(tmp_path),
        baseline_cache=False,
    )


def test_honest_cuda_candidate(task, config):
    result = evaluate(task, candidate("scale_relu"), config)
    assert result.stage == "ok", result.error + result.log
    assert result.passed and result.flags == []
    assert result.timing["clock"] == "judge_cycle"
    assert 0.3 < result.speedup < 5, result.speedup
    # Outputs reach the judge through page-locked shared memory: a 64 MB output's fetch at well
    # over 5 GB/s (staged through pageable memory it ran at about 1 GB/s on the H200).
    assert result.checks["fetch_ms"]["clean_median"] < 64e6 / 5e9 * 1e3, result.checks["fetch_ms"]
    assert all(result.checks["settled"].values()), result.checks["settled"]
    assert "H" in result.device or result.device  # the GPU's name is recorded
    # The candidate ran in a runner of its own: a PID namespace, locked down before it started.
    confinement = result.checks["confinement"]
    assert confinement["pid_namespace"] is True
    assert confinement["lockdown"]["seccomp"] and confinement["lockdown"]["reads_confined"]


def test_library_work_beside_a_token_kernel_is_flagged(task, config):
    """Issue #14 finding 1: on the H200, torch doing the work beside one trivial kernel of the
    candidate's read as a library share of 0.17-0.49 (operator and kernel events both summed) and
    passed. Each kernel now counts once, for the operator that launched it."""
    body = "        y = torch.relu(x * self.scale)\n        ext.scale_relu(x[:1, :256], self.scale)\n"
    result = evaluate(
        task,
        candidate("scale_relu", body=body).replace("return ext.scale_relu(x, self.scale)", "return y"),
        config,
    )
    assert result.correct and "library_kernels" in result.flags and not result.passed, result.flags
    assert result.checks["trace"]["library_share"] > 0.9, result.checks["trace"]
    assert result.checks["trace"]["traced_calls"] >= 3
    # the kernel table (profile feedback): ATen's kernels marked the library's, the token one custom
    whose = {row["whose"] for row in result.checks["trace"]["kernels"]}
    assert {"library", "custom"} <= whose, result.checks["trace"]["kernels"]


def test_library_work_inside_the_extensions_own_call_is_flagged(task, config):
    """Session 38 (H100): kevin's range around each extension call has a device-side shadow spanning
    the work inside it, which was counted as the candidate's: ATen inside the extension read as a
    share of ~0.5 (not flagged), its custom time all shadow."""
    result = evaluate(task, candidate("library_inside"), config)
    trace = result.checks["trace"]
    assert result.correct and "library_kernels" in result.flags and not result.passed, result.flags
    assert trace["library_share"] > 0.9, trace
    assert not any(row["name"].startswith("kevin::") for row in trace["kernels"]), trace["kernels"]


def test_an_honest_kernels_trace_has_no_library_work(task, config):
    result = evaluate(task, candidate("scale_relu"), config)
    assert result.passed and result.checks["trace"]["library_share"] < 0.05, result.checks["trace"]
    assert result.checks["trace"]["custom_us"] > 0
    # The profiler saw kevin's marker and the kernel's work (s42: a trace without either is blind).
    assert result.checks["trace"]["marker_seen"] and result.checks["trace"]["device_activities"] > 0
    # Its launches are seen in the API records too (s43: the device records can be lost alone).
    assert result.checks["trace"]["launch_calls"] > 0, result.checks["trace"]
    top = result.checks["trace"]["kernels"][0]
    assert "scale_relu" in top["name"] and top["whose"] == "custom" and top["us"] > 0, top
    # Only the candidate's own work: no range's shadow, no copy of the runner's inputs (s38).
    names = [row["name"] for row in result.checks["trace"]["kernels"]]
    assert not [n for n in names if n.startswith(("kevin::", "Memcpy"))], result.checks["trace"]["kernels"]


def test_wrong_cuda_candidate(task, config):
    result = evaluate(task, candidate("scale_only"), config)
    assert result.stage == "correctness" and not result.correct and result.blame == "candidate"


def test_illegal_memory_access_then_a_healthy_evaluation(task, config):
    bad = evaluate(task, candidate("illegal_access"), config)
    assert bad.stage == "runtime" and not bad.correct and bad.blame == "candidate"
    assert "illegal" in bad.error.lower() or "CUDA" in bad.error
    good = evaluate(task, candidate("scale_relu"), config)
    assert good.stage == "ok" and good.passed


def test_kernel_that_never_terminates_times_out(task, config):
    started = time.monotonic()
    result = evaluate(task, candidate("spin"), config)
    assert result.stage == "timeout" and result.blame == "candidate"
    assert time.monotonic() - started < 120
    # issue #15: the judge kills the runner (and its CUDA context) once the first call passes 10 s,
    # instead of holding the device for the stage's limit.
    assert "ran past 10.0 s" in result.error and result.stage_seconds["correctness"] < 15, (
        result.stage_seconds
    )
    after = evaluate(task, candidate("scale_relu"), config)
    assert after.stage == "ok"


def test_device_side_assert(task, config):
    result = evaluate(task, candidate("device_assert"), config)
    assert result.stage == "runtime" and not result.correct


def test_gpu_out_of_memory_is_a_runtime_failure(task, config):
    body = "        hog = torch.empty(1 << 40, dtype=torch.float32, device=x.device)\n"
    result = evaluate(task, candidate("scale_relu", body=body), config)
    assert result.stage == "runtime" and "memory" in result.error.lower()


def test_cuda_compile_error(task, config):
    broken = CUDA_SRC.replace("if (i < n) { float v", "if (i < n) { float v = undeclared_symbol; float w", 1)
    result = evaluate(task, candidate("scale_relu", name="kevin_test_cuda_broken", cuda=broken), config)
    assert result.stage == "compile" and not result.compiled
    assert "undeclared_symbol" in result.feedback


def test_work_on_another_stream_is_inside_the_judges_clock_and_is_flagged(task, config):
    # The runner synchronizes the whole device before it answers, and the judge's clock runs until
    # then: twenty kernels on a side stream cost what twenty kernels cost.
    honest = evaluate(task, candidate("scale_relu"), config)
    result = evaluate(task, candidate("side_stream"), config)
    seen = (result.stage, result.error[-400:], result.flags, result.checks.get("trace"))
    assert result.correct, seen
    assert result.runtime_ms > 5 * honest.runtime_ms, (result.runtime_ms, honest.runtime_ms)
    assert "side_stream" in result.flags and not result.passed, seen


def test_one_short_kernel_on_another_stream_is_flagged_by_the_trace(task, config):
    result = evaluate(task, candidate("side_stream_once"), config)
    seen = (result.stage, result.error[-400:], result.flags, result.checks.get("trace"))
    assert result.correct, seen
    assert "side_stream" in result.flags and not result.passed, seen
    assert result.checks["trace"]["side_streams"], seen


ESCAPES = r"""
import ctypes, json, os
_attempts = {}
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_child = _libc.syscall(56, 0x00008000 | 17, 0, 0, 0, 0)  # clone(CLONE_PARENT | SIGCHLD)
if _child == 0:
    os.execv("/bin/sleep", ["sleep", "303"])
_attempts["clone_parent"] = [int(_child), ctypes.get_errno()]
try:
    _attempts["sibling_jobs"] = len(os.listdir(os.path.dirname(os.path.dirname(os.getcwd()))))
except OSError as _exc:
    _attempts["sibling_jobs"] = "denied"
try:
    os.open("/dev/shm/kevin-probe", os.O_CREAT | os.O_WRONLY)
    _attempts["dev_shm"] = "written"
except OSError:
    _attempts["dev_shm"] = "denied"
open("attempts.json", "w").write(json.dumps(_attempts))
"""


def test_the_runner_is_confined_on_the_gpu_too(task, config, tmp_path):
    import dataclasses
    import json

    config = dataclasses.replace(config, keep_workdir=True)
    result = evaluate(task, candidate("scale_relu", prelude=ESCAPES), config)
    assert result.stage == "ok", result.error + result.log
    (report,) = tmp_path.glob("kevin-job-*/runner1/attempts.json")
    attempts = json.loads(report.read_text())
    assert attempts["clone_parent"] == [-1, 1]  # EPERM: no child of the supervisor's
    assert attempts["sibling_jobs"] == "denied" and attempts["dev_shm"] == "denied"
