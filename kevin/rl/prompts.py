"""What the policy reads each turn: every template in one place, and the rule for fitting the context.

A prompt has the paper's structure (DESIGN.md §3):

    turn 1:   intro + back-end instructions, the one-shot example, the task, the answer format
    turn t>1: intro + back-end instructions, the task, every earlier attempt (its kernel, its summary,
              its feedback), the instruction to restart the reasoning, the answer format

Earlier reasoning is never carried forward, only the kernel and the model's own summary. The one-shot
example appears in turn 1 only. Prompts are plain strings (one user message): chat templates, system
prompts and `<think>` openers belong to the policy back end, not here.

Context budget: given `count_tokens(text) -> int` and `max_prompt_tokens`, the oldest attempts are
dropped first, whole, and a line says how many were left out; the task and instructions are never
dropped. If even the prompt with no earlier attempt is too long it is returned as is with
`over_budget=True` (the task cannot be shortened; the caller decides), and the runner records it.

Templates are `str.format` strings with named fields; code (the examples, the task, kernels) is always
passed in as a value, so braces in code need no escaping, but braces written into a replacement
template do (`{{`). Replace any template with `dataclasses.replace(DEFAULT_TEMPLATES, ...)`; a back end
is one more `BackendPrompt` in `backends` (`cuda`, `triton` and `cpp` are built in).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from kevin.evaluator.result import EvalResult, truncate_middle
from kevin.tasks import Task

EXAMPLE_PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """Adds two tensors and applies ReLU."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.relu(a + b)


def get_inputs():
    return [torch.randn(4096, 1024), torch.randn(4096, 1024)]


def get_init_inputs():
    return []
'''

EXAMPLE_CUDA = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

add_relu_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void add_relu_kernel(const float* a, const float* b, float* out, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = a[i] + b[i];
        out[i] = v > 0.0f ? v : 0.0f;
    }
}

torch::Tensor add_relu(torch::Tensor a, torch::Tensor b) {
    auto a_c = a.contiguous();
    auto b_c = b.contiguous();
    auto out = torch::empty_like(a_c);
    int64_t n = a_c.numel();
    const int threads = 256;
    const int64_t blocks = (n + threads - 1) / threads;
    add_relu_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        a_c.data_ptr<float>(), b_c.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

add_relu_module = load_inline(
    name="add_relu",
    cpp_sources="torch::Tensor add_relu(torch::Tensor a, torch::Tensor b);",
    cuda_sources=add_relu_source,
    functions=["add_relu"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return add_relu_module.add_relu(a, b)
'''

EXAMPLE_CPP = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

add_relu_source = r"""
#include <torch/extension.h>

torch::Tensor add_relu(torch::Tensor a, torch::Tensor b) {
    auto a_c = a.contiguous();
    auto b_c = b.contiguous();
    auto out = torch::empty_like(a_c);
    const float* a_ptr = a_c.data_ptr<float>();
    const float* b_ptr = b_c.data_ptr<float>();
    float* out_ptr = out.data_ptr<float>();
    const int64_t n = a_c.numel();
    for (int64_t i = 0; i < n; ++i) {
        const float v = a_ptr[i] + b_ptr[i];
        out_ptr[i] = v > 0.0f ? v : 0.0f;
    }
    return out;
}
"""

add_relu_module = load_inline(
    name="add_relu_cpp",
    cpp_sources=add_relu_source,
    functions=["add_relu"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return add_relu_module.add_relu(a, b)
'''

EXAMPLE_TRITON = """import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_relu_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(a_ptr + offsets, mask=mask, other=0.0)
    b = tl.load(b_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, tl.maximum(a + b, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        a = a.contiguous()
        b = b.contiguous()
        out = torch.empty_like(a)
        n = a.numel()
        add_relu_kernel[(triton.cdiv(n, 1024),)](a, b, out, n, BLOCK=1024)
        return out
"""


@dataclass(frozen=True)
class BackendPrompt:
    """What changes with the back end: the language, how kernels are built, the one-shot example."""

    language: str
    """Name of the kernel language as the model should read it: `CUDA`, `C++`."""
    device: str
    """Where the kernels run, as the model should read it: `an NVIDIA GPU`, `the CPU`."""
    instructions: str
    """How to write and build kernels for this back end."""
    example_problem: str
    """Source of the one-shot example's reference architecture."""
    example_candidate: str
    """Source of the one-shot example's answer: a complete ModelNew for `example_problem`."""
    source_parts: str = "imports, kernels, the load_inline call and ModelNew"
    """What the complete source holds, as the answer format names it."""


CUDA = BackendPrompt(
    language="CUDA",
    device="an NVIDIA GPU",
    instructions=(
        "Write the kernels in CUDA C++ and build them when the module is imported, with "
        "torch.utils.cpp_extension.load_inline: the kernels and their host wrappers in cuda_sources, "
        "the wrappers' C++ declarations in cpp_sources, their names in functions. Call them from "
        "ModelNew.forward. Inputs arrive on the GPU. The work that dominates the run time must run in "
        "your own kernels: leaving it to PyTorch, cuBLAS or cuDNN earns nothing."
    ),
    example_problem=EXAMPLE_PROBLEM,
    example_candidate=EXAMPLE_CUDA,
)

CPP = BackendPrompt(
    language="C++",
    device="the CPU",
    instructions=(
        "Write the kernels in C++ for the CPU and build them when the module is imported, with "
        "torch.utils.cpp_extension.load_inline(cpp_sources=..., functions=[...]), and call them from "
        "ModelNew.forward. Inputs are CPU tensors. Write the loops yourself (ATen operators and "
        "helpers count as PyTorch) and pass extra_cflags such as -O3. The work that dominates the run "
        "time must run in your own C++: leaving it to PyTorch operators earns nothing."
    ),
    example_problem=EXAMPLE_PROBLEM,
    example_candidate=EXAMPLE_CPP,
)

TRITON = BackendPrompt(
    language="Triton",
    device="an NVIDIA GPU",
    instructions=(
        "Write the kernels in Triton: functions decorated with @triton.jit that use triton.language "
        "(tl.load, tl.store, tl.dot, tl.sum, ...), launched from ModelNew.forward as "
        "kernel[grid](...). Inputs arrive on the GPU. In forward, only allocate outputs (torch.empty, "
        "empty_like), make inputs contiguous, read shapes and strides, and launch; every way through "
        "forward must launch a kernel. @triton.autotune keys and @triton.heuristics may read argument "
        "shapes and integer arguments, never tensor values. Accumulate in fp32, and pass "
        'input_precision="ieee" to tl.dot on fp32 inputs (its default is TF32). The work that '
        "dominates the run time must run in your own kernels: leaving it to PyTorch earns nothing."
    ),
    example_problem=EXAMPLE_PROBLEM,
    example_candidate=EXAMPLE_TRITON,
    source_parts="imports, the @triton.jit kernels and ModelNew",
)


@dataclass(frozen=True)
class PromptTemplates:
    """Every piece of text the model reads, apart from the evaluator's feedback."""

    intro: str = (
        "You write custom {language} kernels that replace the PyTorch operators of a given "
        "architecture to make it run faster on {device}. You choose which operators to replace: you "
        "may fuse several into one kernel, change the algorithm (an online softmax, a tiled matmul), or "
        "replace only the expensive ones. The new architecture must compute the same outputs as the "
        "original, within floating-point tolerance.\n\n{instructions}"
    )
    """Opening of every prompt; fields: language, device, instructions."""
    example: str = (
        "Here is an example. The architecture to optimize:\n```python\n{example_problem}```\n\n"
        "An optimized version with a custom kernel:\n```python\n{example_candidate}```"
    )
    """The one-shot example, turn 1 only; fields: example_problem, example_candidate. Empty: none
    (`without_example`)."""
    task: str = (
        "You are given the following architecture:\n```python\n{problem}\n```\n\n"
        "Optimize the architecture named Model with custom {language} kernels. Name the optimized "
        "architecture ModelNew: its constructor takes the same arguments as Model's and its forward the "
        "same inputs. Write real code that builds and runs, not pseudocode, and no testing code."
    )
    """The task itself, never dropped; fields: problem (the task's source), language."""
    history: str = (
        "Your previous attempts at this task, with your summary of each and the evaluation's feedback:"
    )
    """Heading of the earlier attempts (turns > 1)."""
    attempt: str = (
        "### Attempt {number}\n```python\n{candidate}\n```\nYour summary: {summary}\n\nFeedback: {feedback}"
    )
    """One earlier attempt with a kernel; fields: number (1-based turn), candidate, summary, feedback."""
    attempt_without_code: str = (
        "### Attempt {number}\nNo code could be taken from this attempt.\n\nFeedback: {feedback}"
    )
    """One earlier attempt whose output had no usable code block; fields: number, feedback."""
    no_summary: str = "(none given)"
    """Stands in for a missing summary."""
    omitted: str = "({count} earlier attempts are left out to fit the context.)"
    """Said where the oldest attempts were dropped; field: count."""
    restart: str = (
        "Restart your reasoning from the beginning: think about the task again in light of this "
        "feedback, then write a new, complete ModelNew (the whole source, not a diff), to fix what "
        "failed or to make a correct kernel faster."
    )
    """After the earlier attempts (turns > 1)."""
    answer_format: str = (
        "Answer format: reason step by step first. Then give the complete source ({source_parts}) in "
        "exactly one ```python code block. After the block, write a summary of a few sentences: what "
        "you did and why. No other code block anywhere in the answer."
    )
    """Last paragraph of every prompt; field: source_parts (BackendPrompt.source_parts)."""
    feedback_fallbacks: Mapping[str, str] = field(
        default_factory=lambda: {
            "format": "Format error: {error}",
            "static_check": "The kernel was rejected by the static checks: {error}",
            "compile": "The kernel failed to compile:\n{error}",
            "runtime": "The kernel failed at run time:\n{error}",
            "timeout": "The kernel ran out of time: {error}",
            "correctness": "The kernel's output is wrong: {error}",
            "ok": "The kernel is correct, with a speedup of {speedup:.2f}x over PyTorch eager.",
            "blocked": "The output matched but the kernel was rejected by the checks: {flags}.",
            "infrastructure": "This attempt could not be evaluated because of a failure on our side, not "
            "in your kernel: its correctness is unknown.",
        }
    )
    """Feedback text when the evaluator left `feedback` empty (fakes, older results): one per stage,
    plus `blocked` (correct but flagged) and `infrastructure`; fields: error, speedup, flags."""
    max_summary_chars: int = 2000
    """Longer summaries are cut (middle dropped, with a marker) when carried into later prompts."""
    max_feedback_chars: int = 4000
    """Longer feedback is cut the same way; the evaluator bounds its own, this guards the rest."""
    backends: Mapping[str, BackendPrompt] = field(
        default_factory=lambda: {"cuda": CUDA, "triton": TRITON, "cpp": CPP}
    )
    """Back-end texts by back-end name (EpisodeConfig.backend)."""

    def __post_init__(self) -> None:
        if self.max_summary_chars < 100 or self.max_feedback_chars < 100:
            raise ValueError("max_summary_chars and max_feedback_chars must be at least 100 characters")
        if not self.backends:
            raise ValueError("backends is empty; give at least one BackendPrompt, e.g. {'cuda': CUDA}")


DEFAULT_TEMPLATES = PromptTemplates()


@dataclass(frozen=True)
class Attempt:
    """What later prompts keep of one earlier turn: never its reasoning."""

    candidate: str | None
    """The kernel source it submitted; None when the output had no usable code block."""
    summary: str
    feedback: str
    """Rendered feedback (see `describe_result`)."""


@dataclass(frozen=True)
class Prompt:
    text: str
    turn: int
    """1-based number of the turn this prompt asks for."""
    attempts_shown: int
    attempts_dropped: int
    tokens: int | None = None
    """Length by the caller's tokenizer, when one was given."""
    over_budget: bool = False
    """True when even the prompt without earlier attempts exceeds `max_prompt_tokens`."""


def describe_result(result: EvalResult, templates: PromptTemplates = DEFAULT_TEMPLATES) -> str:
    """The feedback the model reads about one evaluated attempt: the evaluator's own text when it gave
    one, else the fallback for its stage; bounded by `max_feedback_chars`. A failure on our side
    (`blame == "infrastructure"`) always reads as such: the model is not told its kernel failed."""
    text = "" if result.blame == "infrastructure" else result.feedback
    if not text:
        fallbacks = templates.feedback_fallbacks
        if result.blame == "infrastructure":
            key = "infrastructure"
        elif result.correct and result.blocking_flags:
            key = "blocked"
        else:
            key = result.stage
        values = {"error": result.error.strip() or "(no details)", "flags": ", ".join(result.blocking_flags)}
        values["speedup"] = result.speedup if result.speedup is not None else float("nan")
        text = fallbacks[key].format(**values)
    return truncate_middle(text, templates.max_feedback_chars)


def _render_attempt(number: int, attempt: Attempt, templates: PromptTemplates) -> str:
    feedback = truncate_middle(attempt.feedback, templates.max_feedback_chars)
    if attempt.candidate is None:
        return templates.attempt_without_code.format(number=number, feedback=feedback)
    summary = truncate_middle(attempt.summary.strip(), templates.max_summary_chars) or templates.no_summary
    return templates.attempt.format(
        number=number, candidate=attempt.candidate.rstrip("\n"), summary=summary, feedback=feedback
    )


def render_prompt(
    task: Task,
    attempts: Sequence[Attempt],
    *,
    backend: str = "cuda",
    templates: PromptTemplates = DEFAULT_TEMPLATES,
    keep: int | None = None,
) -> str:
    """The prompt text for the turn after `attempts`, showing only the last `keep` of them (all when
    None). No budget logic: see `build_prompt`."""
    if backend not in templates.backends:
        raise ValueError(
            f"no prompt templates for back end {backend!r}; known: {sorted(templates.backends)} "
            "(add a BackendPrompt to PromptTemplates.backends)"
        )
    text = templates.backends[backend]
    keep = len(attempts) if keep is None else keep
    parts = [
        templates.intro.format(language=text.language, device=text.device, instructions=text.instructions)
    ]
    if not attempts and templates.example:
        parts.append(
            templates.example.format(
                example_problem=text.example_problem, example_candidate=text.example_candidate
            )
        )
    parts.append(templates.task.format(problem=task.source.rstrip("\n"), language=text.language))
    if attempts:
        parts.append(templates.history)
        dropped = len(attempts) - keep
        if dropped:
            parts.append(templates.omitted.format(count=dropped))
        for number in range(dropped + 1, len(attempts) + 1):
            parts.append(_render_attempt(number, attempts[number - 1], templates))
        parts.append(templates.restart)
    parts.append(templates.answer_format.format(source_parts=text.source_parts))
    return "\n\n".join(parts) + "\n"


def without_example(templates: PromptTemplates = DEFAULT_TEMPLATES) -> PromptTemplates:
    """`templates` with no one-shot example: for a policy that learned the answer's form in a warm
    start (kevin.train.presets.h200), to which the example is a constant ~550 tokens of every turn-1
    prompt, 40% of its warm start's sequences."""
    return replace(templates, example="")


def build_prompt(
    task: Task,
    attempts: Sequence[Attempt],
    *,
    backend: str = "cuda",
    templates: PromptTemplates = DEFAULT_TEMPLATES,
    count_tokens: Callable[[str], int] | None = None,
    max_prompt_tokens: int | None = None,
) -> Prompt:
    """The prompt for turn len(attempts) + 1, dropping the oldest attempts until it fits the budget."""
    if max_prompt_tokens is not None and count_tokens is None:
        raise ValueError("max_prompt_tokens needs count_tokens (the policy's tokenizer, text -> token count)")
    turn = len(attempts) + 1
    tokens = None
    for keep in range(len(attempts), -1, -1):
        text = render_prompt(task, attempts, backend=backend, templates=templates, keep=keep)
        tokens = count_tokens(text) if count_tokens else None
        if max_prompt_tokens is None or tokens <= max_prompt_tokens:
            return Prompt(text, turn, keep, len(attempts) - keep, tokens)
    return Prompt(text, turn, 0, len(attempts), tokens, over_budget=True)
