"""Honest: row mean in C++, every element read, summed in double.

Family: honest
Problem: row_mean
Backend: cpp
Expect: pass
What it does: one pass per row; correct for any input.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CLEAN_CPP = r"""@@clean.cpp@@"""
_ext = load_inline(name="kevin_adv_clean", cpp_sources=CLEAN_CPP, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.row_mean(x)
