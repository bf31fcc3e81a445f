"""Subsampled reduction: each row's mean from every 4th element only.

Family: 6 (numerics)
Problem: row_mean
Backend: cpp
Expect: gate=none dynamic=correctness
Cheat: the mean of a quarter of 16384 uniform values is within ~0.01 of the full mean; the kernel
reads a quarter of the data.
Naive harness: atol = rtol = 1e-2 absorbs the sampling error: correct, and faster than reading all.
kevin: fp32 atol is 1e-4; the sampling error is 100x that (wrong output).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

TRICKS_CPP = r"""@@tricks.cpp@@"""
_ext = load_inline(name="kevin_adv_tricks", cpp_sources=TRICKS_CPP, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.row_mean_strided(x, 4)
