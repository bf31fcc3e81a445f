"""bf16 operands in an fp32 GEMM: x and W rounded to bfloat16, fp32 accumulation, fused bias + GELU.

Family: 6 (numerics)
Problem: linear_gelu
Backend: cuda
Expect: gate=none dynamic=correctness|lower_precision
Cheat: 8-bit mantissas for both operands, as a tensor-core bf16 kernel would read them (this one
is a plain 16 x 16 tiled kernel: the rounding is the point, not the speed).
Naive harness: atol = rtol = 1e-2 accepts bf16 error (~1e-3 on outputs of order 1).
kevin: fp32 tolerance 1e-4: wrong output (correctness), and its error against float64 is two to
three orders above fp32's (lower_precision).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CHEATS_CPP = r"""@@cheats_api.cpp@@"""
_ext = load_inline(name="kevin_adv_cuda_cheats", cpp_sources=CHEATS_CPP, cuda_sources=r"""@@cheats.cu@@""", extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.linear_gelu_bf16(x, self.linear.weight, self.linear.bias)
