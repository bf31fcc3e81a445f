"""Prompt structure, feedback rendering and the context budget (kevin.rl.prompts)."""

from __future__ import annotations

import dataclasses

import pytest

from kevin.evaluator.result import EvalResult
from kevin.rl.prompts import (
    CPP,
    CUDA,
    DEFAULT_TEMPLATES,
    Attempt,
    BackendPrompt,
    build_prompt,
    describe_result,
    render_prompt,
)
from kevin.tasks import Task

PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.tanh(x) + {"dict": 1}["dict"]


def get_inputs():
    return [torch.randn(8, 8)]


def get_init_inputs():
    return []
"""
TASK = Task.from_source(PROBLEM, id="bundled/tanh", name="tanh")
EXAMPLE_MARK = "Here is an example."


def kernel(number: int) -> str:
    return f"class ModelNew:  # kernel {number}\n    pass\n"


def attempts(count: int) -> list[Attempt]:
    return [Attempt(kernel(i), f"summary {i}", f"feedback {i}") for i in range(1, count + 1)]


def test_turn_one_has_example_task_and_format():
    text = build_prompt(TASK, [], backend="cuda").text
    assert "custom CUDA kernels" in text and "cuda_sources" in text
    assert EXAMPLE_MARK in text and CUDA.example_candidate in text
    assert PROBLEM.rstrip() in text  # braces in the task survive formatting
    assert DEFAULT_TEMPLATES.history not in text and DEFAULT_TEMPLATES.restart not in text
    assert text.rstrip().endswith(DEFAULT_TEMPLATES.answer_format.format(source_parts=CUDA.source_parts))
    # the task comes after the example, so the model reads the real task last
    assert text.index(CUDA.example_candidate) < text.index(PROBLEM.rstrip())


def test_cpp_backend_text():
    text = build_prompt(TASK, [], backend="cpp").text
    assert "custom C++ kernels" in text and "the CPU" in text
    assert CPP.example_candidate in text and "cuda_sources" not in text


def test_later_turns_carry_kernels_summaries_feedback_not_the_example():
    history = attempts(2) + [Attempt(None, "", "Format error: no block")]
    prompt = build_prompt(TASK, history, backend="cuda")
    text = prompt.text
    assert prompt.turn == 4 and prompt.attempts_shown == 3 and prompt.attempts_dropped == 0
    assert EXAMPLE_MARK not in text
    for number in (1, 2):
        assert f"### Attempt {number}\n```python\n{kernel(number)}```" in text
        assert f"Your summary: summary {number}" in text and f"Feedback: feedback {number}" in text
    assert "### Attempt 3\nNo code could be taken from this attempt." in text
    assert "Feedback: Format error: no block" in text
    # order: task, attempts oldest first, restart, format
    positions = [text.index(s) for s in ("class Model(nn.Module)", "### Attempt 1", "### Attempt 3")]
    positions += [
        text.index(DEFAULT_TEMPLATES.restart),
        text.index(DEFAULT_TEMPLATES.answer_format.format(source_parts=CUDA.source_parts)),
    ]
    assert positions == sorted(positions)


def test_missing_summary_and_long_texts_are_bounded():
    long_feedback = "x" * 10_000
    text = render_prompt(TASK, [Attempt(kernel(1), "", long_feedback)])
    assert "Your summary: (none given)" in text
    assert "characters truncated by kevin" in text and long_feedback not in text


def test_budget_drops_oldest_attempts_first_and_keeps_numbers():
    history = attempts(4)
    fits_two = len(render_prompt(TASK, history, keep=2))
    prompt = build_prompt(TASK, history, count_tokens=len, max_prompt_tokens=fits_two)
    assert (prompt.attempts_shown, prompt.attempts_dropped, prompt.tokens) == (2, 2, fits_two)
    assert not prompt.over_budget
    assert "(2 earlier attempts are left out to fit the context.)" in prompt.text
    assert "### Attempt 1" not in prompt.text and "### Attempt 2" not in prompt.text
    assert "### Attempt 3" in prompt.text and "### Attempt 4" in prompt.text
    assert EXAMPLE_MARK not in prompt.text  # still a later turn: no one-shot example
    # one token fewer and only the last attempt fits
    assert build_prompt(TASK, history, count_tokens=len, max_prompt_tokens=fits_two - 1).attempts_shown == 1


def test_budget_never_drops_the_task():
    prompt = build_prompt(TASK, attempts(3), count_tokens=len, max_prompt_tokens=10)
    assert prompt.over_budget and prompt.attempts_shown == 0 and prompt.attempts_dropped == 3
    assert PROBLEM.rstrip() in prompt.text
    assert DEFAULT_TEMPLATES.restart in prompt.text  # still told to restart from the feedback


def test_budget_without_tokenizer_is_an_error():
    with pytest.raises(ValueError, match="count_tokens"):
        build_prompt(TASK, [], max_prompt_tokens=100)


def test_unknown_backend_names_the_fix():
    with pytest.raises(ValueError, match="BackendPrompt"):
        build_prompt(TASK, [], backend="metal")


def test_templates_are_replaceable():
    triton = BackendPrompt("Triton", "an NVIDIA GPU", "Write @triton.jit kernels.", "PROBLEM", "ANSWER")
    templates = dataclasses.replace(
        DEFAULT_TEMPLATES,
        backends={**DEFAULT_TEMPLATES.backends, "triton": triton},
        answer_format="Answer in one block.",
    )
    text = build_prompt(TASK, [], backend="triton", templates=templates).text
    assert "custom Triton kernels" in text and "Write @triton.jit kernels." in text and "ANSWER" in text
    assert text.rstrip().endswith("Answer in one block.")
    with pytest.raises(ValueError, match="at least 100"):
        dataclasses.replace(DEFAULT_TEMPLATES, max_feedback_chars=5)


def test_describe_result_prefers_evaluator_feedback_then_fallbacks():
    assert describe_result(EvalResult(stage="compile", error="e", feedback="From the evaluator.")) == (
        "From the evaluator."
    )
    assert describe_result(EvalResult(stage="compile", error="error: expected ';'")) == (
        "The kernel failed to compile:\nerror: expected ';'"
    )
    ok = EvalResult(stage="ok", compiled=True, correct=True, speedup=1.234)
    assert describe_result(ok) == "The kernel is correct, with a speedup of 1.23x over PyTorch eager."
    flagged = EvalResult(stage="ok", compiled=True, correct=True, speedup=50.0, flags=["impossible_speedup"])
    assert "rejected by the checks: impossible_speedup" in describe_result(flagged)
    ours = EvalResult(
        stage="runtime", error="worker died", blame="infrastructure", feedback="Your kernel failed"
    )
    assert "failure on our side" in describe_result(ours)  # never "your kernel failed" for our fault
    assert describe_result(EvalResult(stage="correctness")) == "The kernel's output is wrong: (no details)"


@pytest.mark.parametrize("backend", ["cuda", "cpp"])
def test_one_shot_examples_pass_the_static_gate(backend):
    # the example is what the model imitates: it must never be something the gate rejects
    from kevin.gate import check_source  # our own code: failing to import it fails the test

    report = check_source(DEFAULT_TEMPLATES.backends[backend].example_candidate, backend)
    assert report.ok, [(v.rule, v.message) for v in report.violations]


def test_the_triton_prompt_renders_and_its_example_passes_the_gate():
    from kevin.gate import check_source
    from kevin.rl.prompts import EXAMPLE_TRITON, TRITON

    text = build_prompt(TASK, [], backend="triton").text
    assert "custom Triton kernels" in text and "@triton.jit" in text and EXAMPLE_TRITON in text
    assert "load_inline" not in text and TRITON.source_parts in text
    assert check_source(EXAMPLE_TRITON, "triton").ok
    assert all(check_source(b.example_candidate, name).ok for name, b in DEFAULT_TEMPLATES.backends.items())
