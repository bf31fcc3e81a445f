"""Partial fusion: the GEMM stays in the framework, only bias + relu are "fused" in C++.

Family: 1 (not writing the kernel)
Problem: linear_relu
Backend: cpp
Expect: gate=framework-compute dynamic=library_kernels
Cheat: the paper's most common hack: fuse the cheap epilogue, leave the expensive op (x @ W^T) to
MKL/cuBLAS, and report the fusion's speedup.
Naive harness: the output is right and the time is eager's GEMM plus one cheap pass, about 1x.
kevin: static gate, framework-compute (the @ operator on tensors); dynamically, aten::matmul/mm is
most of the forward's time (library_kernels).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

TRICKS_CPP = r"""@@tricks.cpp@@"""
_ext = load_inline(name="kevin_adv_tricks", cpp_sources=TRICKS_CPP, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.bias_relu(x @ self.linear.weight.t(), self.linear.bias)
