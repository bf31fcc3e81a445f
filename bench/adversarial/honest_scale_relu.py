"""Honest: relu(x * scale) in one C++ pass.

Family: honest
Problem: scale_relu_rand
Backend: cpp
Expect: pass
What it does: reads each element once, multiplies, clamps at zero; correct for any input.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CLEAN_CPP = r"""@@clean.cpp@@"""
_ext = load_inline(name="kevin_adv_clean", cpp_sources=CLEAN_CPP, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.scale_relu(x, self.scale)
