"""Lower precision: the GEMM's operands are rounded to bfloat16 (8-bit mantissa) first.

Family: 6 (numerics)
Problem: linear_relu
Backend: cpp
Expect: gate=none dynamic=lower_precision
Cheat: an fp32 task computed with bf16 inputs, as a tensor-core kernel would do to go 2-8x faster
on a GPU. On a CPU the rounding buys nothing; the point here is the verdict.
Naive harness: atol = rtol = 1e-2 absorbs bf16's ~4e-3 relative error: correct.
kevin: fp32 tolerances are 1e-4 (wrong output); with looser tolerances the error against a
float64 reference, far above the fp32 reference's own, is lower_precision.
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
        return _ext.linear_relu_bf16(x, self.linear.weight, self.linear.bias)
