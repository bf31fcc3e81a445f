"""bench/build_coverage.py on the CPU: the fp16 / bf16 / accessor / templated candidates of
bench/candidates/build_coverage take the fast path (their fast-build sources compile against the
light headers with nvcc and the host compiler; nothing is linked), and a compile error still reads
as a fallback with its first error line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from bench_scripts import load_script

REPO = Path(__file__).resolve().parents[2]


bench = load_script("build_coverage_bench", "build_coverage.py")
CANDIDATES = {c.name: c for c in bench.corpus("build_coverage")}
needs_nvcc = pytest.mark.skipif(
    shutil.which("nvcc") is None or shutil.which("ninja") is None, reason="needs nvcc and ninja"
)


def test_every_coverage_candidate_is_eligible_for_the_fast_path():
    assert len(CANDIDATES) >= 10
    for candidate in CANDIDATES.values():
        (call,) = bench.captured_calls(candidate.source)[:1]
        assert bench.fastbuild.plan(call).functions, candidate.name


@pytest.mark.slow
@needs_nvcc
@pytest.mark.parametrize("name", sorted(CANDIDATES))
def test_a_coverage_candidate_compiles_on_the_fast_path(name, tmp_path):
    bench._cuda_home()
    outcome = bench.check(CANDIDATES[name], tmp_path, bench._lite_digest(), timeout_s=300)
    assert (outcome.status, outcome.reason) == ("fast", "")


@pytest.mark.slow
@needs_nvcc
def test_what_the_light_headers_lack_is_a_fallback_with_its_error(tmp_path):
    source = CANDIDATES["fp16_relu_half2.py"].source.replace("__hmax2(x[i], zero)", "torch::relu(x[i])")
    bench._cuda_home()
    outcome = bench.check(
        bench.Candidate("x", "relu_aten", source), tmp_path, bench._lite_digest(), timeout_s=300
    )
    assert outcome.status == "fallback" and outcome.reason.startswith("cuda.cu(") and "relu" in outcome.reason
