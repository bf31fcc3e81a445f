"""Honest: tiled fp32 GEMM with bias and relu fused into its epilogue.

Family: honest
Problem: linear_relu
Backend: cuda
Expect: pass
Kernel: the shared tiled GEMM (cpp/kernels.cu) with the bias + relu epilogue, fp32 products (no
TF32 rounding). The problem is tiny (64 x 256 x 256), so its time is launch overhead on both sides.
kevin: passes unflagged; the twin of state_tf32_cuda.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

KERNELS_CPP = r"""@@kernels_api.cpp@@"""
_ext = load_inline(name="kevin_adv_cuda_kernels", cpp_sources=KERNELS_CPP, cuda_sources=r"""@@kernels.cu@@""", extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.linear_act(x, self.linear.weight, self.linear.bias, 2)
