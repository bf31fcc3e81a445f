"""Parse what the policy wrote in one turn into reasoning, one candidate source and a summary.

The expected shape (DESIGN.md §2): reasoning, then exactly one fenced code block holding the whole
candidate (a Python source defining `ModelNew`), then a short summary of the changes.

The rules, in order:

1. Reasoning in `<think>...</think>` is set apart first and never searched for code: models sketch
   code while they think. The answer is what follows the last `</think>`. A completion with only a
   closing `</think>` is accepted (chat templates that open the think block in the prompt). A `<think>`
   that is never closed is a format error: the output was cut before the answer.
2. In the answer, a code block is a line opening with three or more backticks (an optional language
   tag after them) up to a line holding only at least as many backticks. The tag is not checked.
3. Zero code blocks is a format error. **Several code blocks is a format error too**, never "take the
   last one": the text cannot tell us which block is the kernel, and guessing would reward a format
   the next prompt asks the model not to use. A block opened and never closed is a format error (the
   output was cut at the token limit).
4. The block must define `ModelNew` (`class ModelNew` or `ModelNew = ...`); an empty block or one
   without it is a format error. Deeper checks are the static gate's job (`kevin.gate`).
5. Text before the block (outside `<think>`) is reasoning too; text after it is the summary. A
   missing summary is allowed (empty string): the model loses its own notes for the next turn, and a
   correct kernel should not score 0 for a missing sentence.

A format error is feedback, not a crash: `format_error_result` turns it into an `EvalResult` with
stage `format`, blame `policy` (score 0), whose `feedback` tells the model the rule it broke. This
module does not judge the code itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kevin.evaluator.result import EvalResult

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"

_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,})[ \t]*([^`\s]*)[^`]*$")
_FENCE_CLOSE = re.compile(r"^ {0,3}(`{3,})[ \t]*$")
_DEFINES_MODEL_NEW = re.compile(r"^[ \t]*(class[ \t]+ModelNew\b|ModelNew[ \t]*=)", re.MULTILINE)

FORMAT_RULE = (
    "Write your reasoning first, then exactly one fenced code block (```python ... ```) holding the "
    "complete source that defines ModelNew, then a short summary of what you changed. Do not put any "
    "other code block in your answer."
)
"""The rule restated in every format-error feedback."""


@dataclass(frozen=True)
class ParsedCompletion:
    """One turn's output taken apart. `candidate` is None exactly when `error` says why."""

    reasoning: str
    """Everything before the code block, `<think>` content included; never carried to later turns."""
    candidate: str | None
    """The code block's content: the source handed to the evaluator."""
    summary: str
    """Text after the code block, stripped; carried to later turns' prompts."""
    language: str = ""
    """The code block's language tag as written (`python`, `py`, or empty), for the record."""
    error: str | None = None
    """What is wrong with the format, in one sentence; None when the completion is usable."""

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class _Block:
    start: int  # index of the opening fence line
    end: int  # index of the closing fence line
    language: str
    content: str


def _code_blocks(lines: list[str]) -> tuple[list[_Block], bool]:
    """Fenced blocks in `lines`, and whether a block was left open at the end."""
    blocks: list[_Block] = []
    index = 0
    while index < len(lines):
        opened = _FENCE_OPEN.match(lines[index])
        if not opened:
            index += 1
            continue
        ticks = len(opened.group(1))
        for closing in range(index + 1, len(lines)):
            closed = _FENCE_CLOSE.match(lines[closing])
            if closed and len(closed.group(1)) >= ticks:
                content = "\n".join(lines[index + 1 : closing])
                blocks.append(_Block(index, closing, opened.group(2), content))
                index = closing + 1
                break
        else:
            return blocks, True
    return blocks, False


def _split_think(text: str) -> tuple[str, str, str | None]:
    """(reasoning, answer, error) by the <think> rule."""
    close = text.rfind(THINK_CLOSE)
    if close >= 0:
        reasoning = text[:close].replace(THINK_OPEN, "", 1).strip()
        return reasoning, text[close + len(THINK_CLOSE) :], None
    if THINK_OPEN in text:
        return text.strip(), "", "the reasoning was never finished: <think> was opened but never closed"
    return "", text, None


def parse_completion(text: str) -> ParsedCompletion:
    """Take one completion apart by the rules in the module docstring."""
    reasoning, answer, error = _split_think(text)
    if error:
        return ParsedCompletion(reasoning=reasoning, candidate=None, summary="", error=error)
    lines = answer.splitlines()
    blocks, left_open = _code_blocks(lines)
    problem = None
    if left_open:
        problem = "a code block was opened but never closed (was the output cut at the token limit?)"
    elif not blocks:
        problem = "the answer has no fenced code block"
    elif len(blocks) > 1:
        problem = f"the answer has {len(blocks)} code blocks; exactly one is allowed"
    if problem:
        return ParsedCompletion(reasoning=reasoning, candidate=None, summary="", error=problem)
    block = blocks[0]
    before = "\n".join(lines[: block.start]).strip()
    reasoning = "\n\n".join(part for part in (reasoning, before) if part)
    summary = "\n".join(lines[block.end + 1 :]).strip()
    if not block.content.strip():
        problem = "the code block is empty"
    elif not _DEFINES_MODEL_NEW.search(block.content):
        problem = "the code block does not define ModelNew (write `class ModelNew(nn.Module)`)"
    return ParsedCompletion(
        reasoning=reasoning,
        candidate=None if problem else block.content,
        summary=summary,
        language=block.language,
        error=problem,
    )


def format_error_result(error: str, *, task_id: str = "") -> EvalResult:
    """The verdict on a completion that holds no usable candidate: score 0, the policy's fault."""
    return EvalResult(
        stage="format",
        error=error,
        feedback=f"Format error: {error}. {FORMAT_RULE}",
        blame="policy",
        task_id=task_id,
    )
