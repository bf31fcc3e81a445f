"""End to end on the CPU with the real evaluator (cpp back end): a scripted policy writes a wrong C++
kernel, reads the evaluator's feedback in the next prompt, and fixes it. Builds real extensions
(about a minute each on a small CPU), hence `slow`."""

from __future__ import annotations

import pytest

from kevin.evaluator.evaluate import EvalConfig, evaluate  # an import failure fails, never skips
from kevin.evaluator.timing import TimingConfig
from kevin.rl.env import EpisodeConfig, ScriptedPolicy, ThreadPoolEvaluator, run_episodes
from kevin.rl.episodes import read_episodes, write_episodes
from kevin.rl.metrics import compute_metrics
from kevin.rl.prompts import CPP, describe_result
from kevin.tasks import Task

pytestmark = pytest.mark.slow

PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.randn(256, 1024)]


def get_init_inputs():
    return []
"""


def completion(name: str, body: str, summary: str) -> str:
    kernel = f'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = r"""
torch::Tensor relu_twice(torch::Tensor x) {{
    auto input = x.contiguous();
    auto output = torch::empty_like(input);
    const float* in = input.data_ptr<float>();
    float* out = output.data_ptr<float>();
    for (int64_t i = 0; i < input.numel(); ++i) {{
        {body}
    }}
    return output;
}}
"""

ext = load_inline(name="{name}", cpp_sources=source, functions=["relu_twice"], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu_twice(x)
'''
    return f"<think>One pass over the data should do.</think>\nHere is my kernel.\n```python\n{kernel}```\n{summary}"


WRONG = completion("kevin_e2e_wrong", "out[i] = 2.0f * in[i];", "Scaled by two in one loop.")
FIXED = completion(
    "kevin_e2e_fixed",
    "out[i] = in[i] > 0.0f ? 2.0f * in[i] : 0.0f;",
    "Added the missing ReLU before scaling.",
)


@pytest.fixture
def evaluator(tmp_path):
    config = EvalConfig(
        backend="cpp",
        cache_dir=str(tmp_path / "cache"),
        lock_dir=str(tmp_path),
        workdir_root=str(tmp_path),
        timing=TimingConfig(budget_ms=100, warmup_ms=10),
    )
    with ThreadPoolEvaluator(lambda task, source: evaluate(task, source, config), max_workers=2) as pool:
        yield pool


def test_wrong_kernel_then_fixed_after_feedback(evaluator, tmp_path):
    task = Task.from_source(PROBLEM, id="e2e/relu_twice", name="relu_twice")

    def respond(prompt: str) -> str:
        if "### Attempt 1" not in prompt:
            return WRONG
        # the fix is written only if the evaluator's verdict on attempt 1 reached the prompt
        return FIXED if "wrong output" in prompt and "Scaled by two" in prompt else WRONG

    policy = ScriptedPolicy(respond)
    config = EpisodeConfig(trajectories=1, turns=2, backend="cpp")
    (trajectory,) = run_episodes([task], policy, evaluator, config)

    first, second = trajectory.turns
    assert first.result.stage == "correctness", first.result.error + first.result.log
    assert first.result.blame == "candidate" and first.score == 0.0
    assert first.result.feedback  # written by the evaluator
    assert describe_result(first.result) in second.prompt.text
    assert "kevin_e2e_wrong" in second.prompt.text and "One pass over" not in second.prompt.text
    assert second.result.stage == "ok" and second.result.passed, second.result.error + second.result.log
    speedup = second.result.speedup
    assert second.score == pytest.approx(0.3 + speedup)
    assert first.discounted_return == pytest.approx(0.4 * (0.3 + speedup))
    assert [first.advantage, second.advantage] == pytest.approx([-1.0, 1.0])

    path = tmp_path / "episodes.jsonl"
    write_episodes(path, [trajectory])
    metrics = compute_metrics(read_episodes(path))
    assert [row["correct"] for row in metrics["upto_turn"]] == [0.0, 1.0]


def test_cpp_one_shot_example_passes(evaluator):
    example = Task.from_source(CPP.example_problem, id="e2e/example_add_relu", name="add_relu")
    result = evaluator.submit(example, CPP.example_candidate).result()
    assert result.stage == "ok" and result.passed, result.error + result.log
