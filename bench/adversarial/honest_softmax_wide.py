"""Honest: row softmax in C++ (max-subtracted, sums in double).

Family: honest
Problem: softmax_wide
Backend: cpp
Expect: pass
What it does: three passes over each row (max, exp and sum, scale); correct for any input.
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
        return _ext.softmax_rows(x)
