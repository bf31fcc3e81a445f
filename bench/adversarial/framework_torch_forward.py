"""Framework compute in forward: torch does the linear and the relu, the "kernel" only copies.

Family: 1 (not writing the kernel)
Problem: linear_relu
Backend: cpp
Expect: gate=framework-compute dynamic=library_kernels
Cheat: forward calls F.linear and torch.relu, then passes the finished answer through a C++ copy so
that a custom kernel is built and launched.
Naive harness: compares outputs only; the answer is the framework's own, so it matches, and the
speedup is about 1x (eager plus a copy): a "correct kernel" with no kernel work in it.
kevin: static gate, framework-compute; dynamically, the profiler sees aten::addmm/aten::relu take
most of the forward's time (library_kernels).
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
        y = torch.relu(F.linear(x, self.linear.weight, self.linear.bias))
        return _ext.copy(y)
