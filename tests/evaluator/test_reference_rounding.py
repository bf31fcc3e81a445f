"""A trial the fp32 reference's own rounding fails gets a second look against the reference run in
float64 (kevin.evaluator.worker.reference.compare_trial).

The bundled matmul, which adds up in double, failed one CPU evaluation in 40 (CI, stop 49): under
the x -> 4x - 2 trial an element of C sat near zero with terms in the thousands, and torch's fp32
sum was 7e-4 from the truth, past 1e-4 + 1e-4 x |ref|. Here the same cancellation is made certain:
(x + y) - x with x near 1e8 is a multiple of 8 in fp32 and y in float64.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from kevin.evaluator import inputs as trial_inputs
from kevin.evaluator.compare import compare, summarize_trials
from kevin.evaluator.worker.reference import ReferenceStage


class Cancels(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return (x + y) - x


class Float32Only(Cancels):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if x.dtype != torch.float32:
            raise TypeError("this problem has no float64 path")
        return super().forward(x, y)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(32, 64) * 1e3 + 1e8, torch.randn(32, 64)]


class Judge(ReferenceStage):
    """The parts of the harness the reference stage reads."""

    def __init__(self, model: nn.Module) -> None:
        self.torch, self.model, self.compare = torch, model, compare
        self.job = {"atol": 1e-4, "rtol": 1e-4}
        self.device, self.dtype, self.flags = "cpu", torch.float32, []

    def draw(self, seed: int, shift: int | None = None) -> list[torch.Tensor]:
        return trial_inputs.draw(get_inputs, seed, shift, self.device, self.dtype)

    def sync(self) -> None:
        pass


@pytest.mark.parametrize("shift", [None, 0, 1])
def test_a_candidate_nearer_the_truth_than_the_fp32_reference_passes(shift):
    judge = Judge(Cancels())
    x, y = judge.draw(7, shift)
    expected = [judge.model(x, y)]
    truth = [((x.double() + y.double()) - x.double()).float()]
    assert not compare(truth, expected, 1e-4, 1e-4)["ok"]  # the premise: fp32 rounding fails it
    report = judge.compare_trial(truth, expected, 7, shift)
    assert report["ok"], report
    assert "outside tolerance" in report["past_reference_rounding"]
    summary = summarize_trials([{"ok": True}, report], 1e-4, 1e-4)
    assert summary["passed_against_float64"] == [2] and summary["trials_passed"] == 2


def test_a_wrong_candidate_still_fails_with_the_fp32_reports_reason():
    judge = Judge(Cancels())
    x, y = judge.draw(7)
    expected = [judge.model(x, y)]
    wrong = [((x.double() + y.double()) - x.double() + 0.01).float()]
    first = compare(wrong, expected, 1e-4, 1e-4)
    report = judge.compare_trial(wrong, expected, 7, None)
    assert not report["ok"] and report["reason"] == first["reason"]
    assert "past_reference_rounding" not in report


def test_the_reference_passes_without_a_second_look():
    judge = Judge(Cancels())
    x, y = judge.draw(3)
    expected = [judge.model(x, y)]
    report = judge.compare_trial([expected[0].clone()], expected, 3, None)
    assert report["ok"] and "past_reference_rounding" not in report


def test_a_problem_without_a_float64_path_keeps_the_fp32_verdict():
    judge = Judge(Float32Only())
    x, y = judge.draw(5)
    expected = [judge.model(x, y)]
    truth = [((x.double() + y.double()) - x.double()).float()]
    report = judge.compare_trial(truth, expected, 5, None)
    assert not report["ok"] and "past_reference_rounding" not in report


def test_the_second_look_casts_the_truth_to_the_references_dtype():
    """The float64 outputs are compared in the reference's dtype, as the candidate's must be: a
    float16 reference's candidate in float16 passes on its float64 twin cast to float16."""
    judge = Judge(Cancels())
    x, y = judge.draw(11)
    expected = [judge.model(x, y).half()]
    truth = [((x.double() + y.double()) - x.double()).half()]
    report = judge.compare_trial(truth, expected, 11, None)
    assert report["ok"] and "past_reference_rounding" in report, report


def test_a_float64_forward_the_caller_has_is_used_instead_of_another():
    """Trial 0's float64 forward (made for the precision check) serves its second look too."""
    judge = Judge(Cancels())
    x, y = judge.draw(7)
    expected = [judge.model(x, y)]
    exact = judge.forward64([x, y])
    judge.draw = lambda *_: pytest.fail("a second float64 forward was made")
    report = judge.compare_trial([exact[0].float()], expected, 7, None, exact)
    assert report["ok"] and "past_reference_rounding" in report, report


# -- end to end: a cpp candidate that adds up in double, judged by a real worker ------------------

PROBLEM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """(x + y) - x, with x near 1e8: in fp32 a multiple of 8, in exact arithmetic y."""

    def forward(self, x, y):
        return (x + y) - x


def get_inputs():
    return [torch.randn(32, 64) * 1e3 + 1e8, torch.randn(32, 64)]


def get_init_inputs():
    return []
'''

CPP = r"""
#include <torch/extension.h>

torch::Tensor cancel(torch::Tensor x, torch::Tensor y, double offset) {
    auto a = x.contiguous();
    auto b = y.contiguous();
    auto out = torch::empty_like(a);
    const float* ap = a.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    float* op = out.data_ptr<float>();
    for (int64_t i = 0; i < a.numel(); ++i)
        op[i] = static_cast<float>((static_cast<double>(ap[i]) + bp[i]) - ap[i] + offset);
    return out;
}
"""


def _candidate(offset: float) -> str:
    return f'''
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

ext = load_inline(name="kevin_test_cancel", cpp_sources={CPP!r}, functions=["cancel"])


class ModelNew(nn.Module):
    def forward(self, x, y):
        return ext.cancel(x, y, {offset!r})
'''


@pytest.mark.slow
def test_the_judge_passes_a_double_candidate_and_fails_a_wrong_one(tmp_path):
    from kevin.evaluator.evaluate import EvalConfig, evaluate
    from kevin.evaluator.timing import TimingConfig
    from kevin.tasks import Task

    task = Task.from_source(PROBLEM, id="cancel", name="cancel")
    config = EvalConfig(
        backend="cpp",
        cache_dir=str(tmp_path / "cache"),
        lock_dir=str(tmp_path),
        timing=TimingConfig(budget_ms=50, warmup_ms=5),
        workdir_root=str(tmp_path),
    )
    exact = evaluate(task, _candidate(0.0), config)
    assert exact.stage == "ok", exact.error + exact.log
    trials = config.trials + config.distribution_trials
    assert exact.correctness["passed_against_float64"] == list(range(1, trials + 1)), exact.correctness
    assert "timed_output_mismatch" not in " ".join(exact.flags), exact.flags
    wrong = evaluate(task, _candidate(0.01), config)  # the same build: only the offset differs
    assert wrong.stage == "correctness" and "outside tolerance" in wrong.error, wrong.error
