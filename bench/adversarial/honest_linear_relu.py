"""Honest: linear + relu as a plain C++ triple loop (slow next to MKL, but all its own work).

Family: honest
Problem: linear_relu
Backend: cpp
Expect: pass
What it does: owns an nn.Linear for its weights (same initialization as the reference) and computes
relu(x @ W^T + b) itself, one dot product per output element.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CLEAN_CPP = r"""@@clean.cpp@@"""
_ext = load_inline(name="kevin_adv_clean", cpp_sources=CLEAN_CPP, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.linear_relu(x, self.linear.weight, self.linear.bias)
