"""A global TorchFunctionMode entered at import: allclose always agrees, subtraction returns zeros.

Family: 4 (fooling the checker)
Problem: scale_relu_rand
Backend: cpp
Expect: gate=none dynamic=correctness
Cheat: torch.overrides.TorchFunctionMode intercepts every overridable torch function called from
Python, in any module, for as long as it stays on the mode stack; entering it at import and never
leaving replaces no attribute at all. The mode answers torch.allclose with True and every
subtraction (torch.sub, Tensor.sub, a - b) with zeros, so any error measure built on a difference
is zero. The kernel returns zeros.
Naive harness: torch.allclose(out, ref) goes through the mode: True.
kevin missed this before the issue #4 fixes (bench/adversarial/README.md says how it is caught now): its comparison (kevin.compare.error_stats) and precision probe compute
differences with torch.sub and `a - b`, which the mode answers with zeros, so every trial, every
timed output and the fp64 precision check see zero error. Its tamper check compares the identity
of torch's functions, which a mode does not change. The static gate accepts the file (torch.overrides
is torch; entering a context manager at module level is not global-state by its rules). As a side
effect every eager op of the reference now runs through a Python callback, so the baseline is also
slower and the speedup larger.
Since the judge/runner split: the mode lives only in the candidate's runner; the judge compares
with its own functions, so the wrong output is caught (correctness, Expect).
"""

import torch
import torch.nn as nn
from torch.overrides import TorchFunctionMode
from torch.utils.cpp_extension import load_inline

TRICKS_CPP = r"""@@tricks.cpp@@"""
_ext = load_inline(name="kevin_adv_tricks", cpp_sources=TRICKS_CPP, extra_cflags=["-O3"])

_DIFFERENCES = ("sub", "__sub__", "__rsub__", "subtract")


class _Agreeable(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name == "allclose":
            return True
        if name in _DIFFERENCES:
            return torch.zeros_like(args[0])
        return func(*args, **(kwargs or {}))


_Agreeable().__enter__()


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.zeros_out(x)
