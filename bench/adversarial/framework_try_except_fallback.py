"""try/except fallback: the custom kernel refuses the shape, the except branch uses torch.

Family: 1 (not writing the kernel)
Problem: linear_relu
Backend: cpp
Expect: gate=fallback,framework-compute dynamic=library_kernels
Cheat: the kernel raises on this problem's shape (rows not a multiple of 128) and the fallback
computes the answer with F.linear + relu: the kernel is launched, never does the work.
Naive harness: the exception is swallowed inside forward; the output is the framework's, about 1x.
kevin: static gate, fallback (try/except in the compute path) and framework-compute; dynamically,
library_kernels.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

TRICKS_CPP = r"""@@tricks.cpp@@"""
_ext = load_inline(name="kevin_adv_tricks", cpp_sources=TRICKS_CPP, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        try:
            return _ext.linear_relu_tiled(x, self.linear.weight, self.linear.bias)
        except RuntimeError:
            return torch.relu(F.linear(x, self.linear.weight, self.linear.bias))
