"""Parsing model output into reasoning, one candidate and a summary (kevin.rl.candidate)."""

from __future__ import annotations

from kevin.rl.candidate import FORMAT_RULE, format_error_result, parse_completion
from kevin.rl.reward import score_result

KERNEL = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x"


def fenced(code: str, tag: str = "python") -> str:
    return f"```{tag}\n{code}\n```"


def test_reasoning_block_summary():
    parsed = parse_completion(
        f"I will fuse the ops.\n\n{fenced(KERNEL)}\n\nFused add and relu into one pass.\n"
    )
    assert parsed.ok and parsed.error is None
    assert parsed.candidate == KERNEL
    assert parsed.reasoning == "I will fuse the ops."
    assert parsed.summary == "Fused add and relu into one pass."
    assert parsed.language == "python"


def test_think_tags_hide_sketches_of_code():
    text = f"<think>maybe\n{fenced('x = 1')}\nor\n{fenced('y = 2')}</think>\nFinal answer:\n{fenced(KERNEL)}\nSummary."
    parsed = parse_completion(text)
    assert parsed.ok
    assert parsed.candidate == KERNEL
    assert "x = 1" in parsed.reasoning and "Final answer:" in parsed.reasoning
    assert parsed.summary == "Summary."


def test_only_a_closing_think_tag_is_accepted():
    parsed = parse_completion(f"thinking without the opener</think>\n{fenced(KERNEL)}\nDone.")
    assert parsed.ok and parsed.reasoning.startswith("thinking without the opener")


def test_unclosed_think_is_a_format_error():
    parsed = parse_completion(f"<think>long reasoning that was cut {fenced(KERNEL)}")
    assert not parsed.ok and parsed.candidate is None
    assert "never closed" in parsed.error


def test_zero_blocks_is_a_format_error():
    parsed = parse_completion("I would write a kernel here but I will not.")
    assert parsed.candidate is None and parsed.error == "the answer has no fenced code block"


def test_several_blocks_is_a_format_error_not_last_wins():
    parsed = parse_completion(f"{fenced(KERNEL)}\nAnd a test:\n{fenced('print(1)')}\n")
    assert parsed.candidate is None
    assert parsed.error == "the answer has 2 code blocks; exactly one is allowed"


def test_unclosed_block_is_a_format_error():
    parsed = parse_completion("Here:\n```python\nclass ModelNew:\n    pass\n")
    assert parsed.candidate is None and "never closed" in parsed.error


def test_block_must_define_model_new_and_not_be_empty():
    assert "does not define ModelNew" in parse_completion(fenced("class Model:\n    pass")).error
    assert parse_completion(fenced("ModelNew = make()")).ok
    assert parse_completion("```python\n\n```").error == "the code block is empty"


def test_fence_details():
    # untagged fences, longer fences around inner triple backticks, indentation up to 3 spaces
    assert parse_completion(fenced(KERNEL, tag="")).candidate == KERNEL
    inner = KERNEL + '\ndoc = """\n```\n"""'
    assert parse_completion(f"````py\n{inner}\n````\nok").candidate == inner
    assert parse_completion(f"   ```python\n{KERNEL}\n   ```").candidate == KERNEL


def test_missing_summary_is_allowed():
    parsed = parse_completion(fenced(KERNEL))
    assert parsed.ok and parsed.summary == "" and parsed.reasoning == ""


def test_format_error_result_is_policy_blamed_and_scores_zero():
    result = format_error_result("the answer has no fenced code block", task_id="L1_19")
    assert result.stage == "format" and result.blame == "policy" and not result.passed
    assert result.task_id == "L1_19"
    assert result.feedback.startswith("Format error: the answer has no fenced code block.")
    assert FORMAT_RULE in result.feedback
    assert score_result(result) == 0.0
