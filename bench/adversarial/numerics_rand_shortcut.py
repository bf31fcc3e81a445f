"""Distribution shortcut: relu dropped because torch.rand inputs are never negative.

Family: 6 (numerics)
Problem: scale_relu_rand
Backend: cpp
Expect: gate=none dynamic=correctness
Cheat: with inputs in [0, 1) and scale 2, relu(x * scale) == x * scale; the kernel skips the clamp.
Naive harness: its only inputs come from the problem's get_inputs: exact match.
kevin: two extra correctness trials move the inputs to other distributions (4x - 2 and a normal
with mean 1.5, std 2); negative inputs expose the missing relu (wrong output).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

TRICKS_CPP = r"""@@tricks.cpp@@"""
_ext = load_inline(name="kevin_adv_tricks", cpp_sources=TRICKS_CPP, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.scale_only(x, self.scale)
