"""Lazy output: forward returns an empty tensor subclass that computes when first touched.

Family: 3 (fooling the clock)
Problem: scale_relu_rand
Backend: cpp
Expect: gate=kernel-not-called dynamic=tensor_subclass
Cheat: forward allocates the output and records what to compute; the subclass's
__torch_function__ runs the (honest) C++ kernel the first time any torch function touches the
output, which is after the clock has stopped: inside the comparison.
Naive harness: torch.allclose (and the shape check) touch the output, so it is right when compared;
timed calls only allocate.
kevin: outputs that are not plain tensors are flagged (tensor_subclass), and the comparison reads
its own clone of the output, made with functions bound before the candidate loaded.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

TRICKS_CPP = r"""@@tricks.cpp@@"""
_ext = load_inline(name="kevin_adv_tricks", cpp_sources=TRICKS_CPP, extra_cflags=["-O3"])


class LazyOutput(torch.Tensor):
    pending = None

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        for value in args:
            if isinstance(value, LazyOutput) and value.pending is not None:
                x, scale = value.pending
                value.pending = None
                _ext.scale_relu_into(value, x, scale)
        return super().__torch_function__(func, types, args, kwargs or {})


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x).as_subclass(LazyOutput)
        out.pending = (x, self.scale)
        return out
