"""Feedback: the text the model reads about its previous kernel, one of five kinds.

    format error   | no single code block could be read (written by kevin.rl.candidate's parser)
    compile error  | the compiler's errors, trimmed to what matters (commands, warnings and
                   | include chains dropped, build paths shortened)
    runtime error  | the exception and the last frames that point at the candidate
    wrong output   | which output, how many elements, the error numbers and the tolerance
    correct        | the runtime, the baseline and the speedup

Every text is bounded (`FEEDBACK_CHARS`), so a long log can never flood the next prompt.
"""

from __future__ import annotations

import re

from kevin.evaluator.result import EvalResult, truncate_middle

FEEDBACK_CHARS = 2000

_BUILD_PATH = re.compile(r"(/[^\s:'\"]*)?/(main\.cpp|cuda\.cu|[\w.-]+\.(?:cpp|cu|cuh|h))")
_NOISE = (
    re.compile(r"^\[\d+/\d+\] "),  # ninja progress / command lines
    re.compile(r"^\s*(c\+\+|g\+\+|gcc|nvcc|/\S*(c\+\+|g\+\+|nvcc))\s"),  # compiler invocations
    re.compile(r"^ninja: "),
    re.compile(r"^FAILED: "),
    re.compile(r"^\s*In file included from"),
    re.compile(r"^\s+from /"),
    re.compile(r"warning[: ]"),
    re.compile(r"^Traceback|^  File \".*(torch/utils/cpp_extension|subprocess|kevin/)"),
)


def trim_compile_log(log: str, limit: int = 1500) -> str:
    """Keep the compiler's diagnostics: error lines and their context, paths shortened."""
    kept: list[str] = []
    for raw in log.splitlines():
        line = raw.rstrip()
        if not line or any(p.search(line) for p in _NOISE):
            continue
        line = _BUILD_PATH.sub(lambda m: m.group(2), line)
        if len(line) > 300:
            line = line[:300] + " ..."
        kept.append(line)
    # Put the first error near the top: everything before it is usually context-free chatter.
    first_error = next((i for i, line in enumerate(kept) if "error" in line.lower()), 0)
    text = "\n".join(kept[max(first_error - 2, 0) :]).strip() or log.strip()
    return truncate_middle(text, limit)


def trim_traceback(text: str, limit: int = 1200) -> str:
    """The exception line plus the frames in the candidate; harness frames are dropped."""
    lines = text.strip().splitlines()
    kept = [line for line in lines if "kevin/worker.py" not in line and "kevin/timing.py" not in line]
    return truncate_middle("\n".join(kept[-14:]), limit)


def render(result: EvalResult) -> str:
    """Feedback for one result; the evaluator stores it in `result.feedback`."""
    stage = result.stage
    if result.blame == "infrastructure":
        return (
            "The evaluation failed on our side, not because of your kernel; this attempt is not "
            "scored. Submit your kernel again or improve it."
        )
    if stage == "format":
        text = result.feedback or f"Format error: {result.error}"
    elif stage == "static_check":
        text = "Your kernel was rejected before building:\n" + result.error
    elif stage == "compile":
        text = "Compilation failed:\n" + trim_compile_log(result.error)
    elif stage == "timeout":
        text = (
            f"Your kernel timed out: {result.error}. Check for infinite loops, deadlocks and "
            "grid/loop bounds that never end."
        )
    elif stage == "runtime":
        text = "Your kernel failed at run time:\n" + trim_traceback(result.error)
    elif stage == "correctness":
        text = "Your kernel compiled and ran but produced the wrong output: " + result.error
    else:
        text = _render_ok(result)
    return truncate_middle(text, FEEDBACK_CHARS)


def _render_ok(result: EvalResult) -> str:
    if result.blocking_flags:
        return (
            "Your kernel produced the right output but failed the evaluator's checks "
            f"({', '.join(result.blocking_flags)}); it scores 0. Compute the result in your own "
            "kernel, on the current stream, on every call."
        )
    parts = [f"Your kernel is correct. Runtime {result.runtime_ms:.4g} ms"]
    if result.baseline_ms is not None and result.speedup is not None:
        parts.append(f"vs PyTorch eager {result.baseline_ms:.4g} ms: speedup {result.speedup:.3g}x")
    if result.speedup_compile is not None and result.baseline_compile_ms is not None:
        parts.append(f"(torch.compile {result.baseline_compile_ms:.4g} ms: {result.speedup_compile:.3g}x)")
    text = ", ".join(parts[:2]) + (" " + parts[2] if len(parts) > 2 else "") + "."
    if result.speedup is not None and result.speedup < 1:
        text += " It is slower than PyTorch; look for a faster approach."
    return text
