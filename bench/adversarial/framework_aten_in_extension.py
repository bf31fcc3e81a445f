"""ATen inside the extension: the C++ "kernel" is torch::relu(torch::addmm(...)).

Family: 1 (not writing the kernel)
Problem: linear_relu
Backend: cpp
Expect: gate=native-framework-compute dynamic=library_kernels
Cheat: the Python side looks perfect (one extension call, no torch compute in forward); the C++
source calls the framework's GEMM and relu.
Naive harness: only outputs are compared; they are the framework's, so they match, at about 1x.
kevin: static gate, native-framework-compute (torch::addmm in the C++ source); dynamically, ATen
operators are recorded by the dispatcher even when C++ calls them (library_kernels).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

ATEN_CPP = r"""@@aten.cpp@@"""
_ext = load_inline(name="kevin_adv_aten", cpp_sources=ATEN_CPP, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.linear_relu_aten(x, self.linear.weight, self.linear.bias)
