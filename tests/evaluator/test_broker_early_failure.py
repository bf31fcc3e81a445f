"""The broker's full build (torch's load_inline in a throwaway process) ends at its first failed
command: ninja itself lets every running command finish before it reports a failure, so a syntax
error in cuda.cu waited for main.cpp's pybind11 compile (20-30 s on the H200, more on 2 cores).

A hand-written build file shows the mechanism in seconds; the nvcc tests build real candidates on a
CPU (compile only: nothing runs on a GPU, and a CPU torch has no CUDA libraries to link against).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
import torch
import torch.utils.cpp_extension as cpp_extension

from kevin.evaluator import torchbuild
from kevin.evaluator.broker import Broker

needs_nvcc = pytest.mark.skipif(
    shutil.which("nvcc") is None or shutil.which("ninja") is None, reason="needs nvcc and ninja"
)

TOY_BUILD = """\
rule run
  command = $cmd
build broken.o: run
  cmd = echo 'broken.cu(1): error: expected a ";"'; exit 2
build slow.o: run
  cmd = sleep 60 && touch slow.o
build all: phony broken.o slow.o
default all
"""


@pytest.mark.skipif(shutil.which("ninja") is None, reason="needs ninja")
def test_the_first_failed_command_stops_the_others_and_its_output_is_the_error(tmp_path, monkeypatch):
    monkeypatch.delenv("MAX_JOBS", raising=False)  # both commands start at once
    (tmp_path / "build.ninja").write_text(TOY_BUILD)
    started = time.perf_counter()
    ok, error_type, error = torchbuild.run(
        "_run_ninja_build",  # the build process's ninja step, called directly
        {
            "build_directory": str(tmp_path),
            "verbose": False,
            "error_prefix": "Error building extension 'toy'",
        },
        tmp_path,
        300,
        {},
    )
    seconds = time.perf_counter() - started
    assert not ok and error_type == "RuntimeError"
    assert error.startswith("Error building extension 'toy': ")
    assert "FAILED: " in error and 'broken.cu(1): error: expected a ";"' in error
    assert error.endswith("ninja: build stopped: subcommand failed.\n")
    # The throwaway process starts Python and imports torch (seconds); ninja would have waited 60 s.
    assert seconds < 40 and not (tmp_path / "slow.o").exists(), seconds


# -- real candidates, compiled with nvcc --------------------------------------------------------------

DECLARATION = "torch::Tensor twice(torch::Tensor x);"
KERNEL = r"""
__global__ void twice_kernel(const float* in, float* out, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * in[i];
}

torch::Tensor twice(torch::Tensor x) {
    auto out = torch::empty_like(x);
    twice_kernel<<<(unsigned)((x.numel() + 255) / 256), 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
    return out;
}
"""
BROKEN = KERNEL.replace("threadIdx.x;", "threadIdx.x")


def _cuda_home() -> str:
    nvcc = Path(shutil.which("nvcc")).resolve()
    for home in (os.environ.get("CUDA_HOME"), nvcc.parent.parent, "/usr/local/cuda"):
        if home and (Path(home) / "include" / "cuda_runtime.h").exists():
            return str(home)
    pytest.skip("no CUDA toolkit headers beside nvcc")


@pytest.fixture
def full_build(tmp_path, monkeypatch):
    """build(name, cuda_sources) -> (reply, the object files the full build left): torch's build
    only (no fast path). A CPU build of torch sets CUDA_HOME to None whatever the environment says
    and then refuses CUDA sources: the build process is told where this machine's toolkit is."""
    home = cpp_extension.CUDA_HOME or _cuda_home()
    monkeypatch.setattr(
        torchbuild,
        "SCRIPT",
        f"import torch.utils.cpp_extension as ce\nce.CUDA_HOME = ce.CUDA_HOME or {home!r}\n"
        + torchbuild.SCRIPT,
    )
    objects: list[list[str]] = []
    original = torchbuild.run

    def seen(function, kwargs, directory, timeout, overrides, readable=()):
        answer = original(function, kwargs, directory, timeout, overrides, readable)
        objects.append(sorted(p.name for p in directory.glob("*.o")))
        return answer

    monkeypatch.setattr(torchbuild, "run", seen)
    broker = Broker(tmp_path / "builds", device_arch="9.0", fast=False)

    def build(name, cuda_sources):
        reply = broker.build(
            {"name": name, "cpp_sources": DECLARATION, "cuda_sources": cuda_sources, "functions": ["twice"]}
        )
        return reply, objects[-1]

    return build


@pytest.mark.slow
@needs_nvcc
def test_a_syntax_error_in_cuda_sources_is_reported_without_waiting_for_main_cpp(full_build):
    reply, objects = full_build("kevin_early_broken", BROKEN)
    assert not reply.ok and reply.error_type == "RuntimeError" and reply.blame == "candidate", reply
    assert reply.error.startswith("Error building extension 'kevin_early_broken': ")
    assert "FAILED: " in reply.error and 'cuda.cu(7): error: expected a ";"' in reply.error, reply.error
    assert "1 error detected in the compilation of" in reply.error  # nvcc's own summary
    assert reply.error.endswith("ninja: build stopped: subcommand failed.\n")
    # nvcc fails after parsing torch/types.h, well before g++ is through torch/extension.h and
    # pybind11; the build stopped g++ there, so main.cpp never became main.o.
    assert objects == [], objects


@pytest.mark.slow
@needs_nvcc
def test_an_honest_cuda_candidate_still_compiles_both_halves_and_links(full_build):
    reply, objects = full_build("kevin_early_honest", KERNEL)
    assert objects == ["cuda.cuda.o", "main.o"]
    if torch.version.cuda is None:  # a CPU torch: the link step ran and found no libc10_cuda
        assert not reply.ok and "-lc10_cuda" in reply.error and "FAILED: " in reply.error, reply.error
    else:
        assert reply.ok and reply.kind == "pybind", reply.error
