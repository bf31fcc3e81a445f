"""C = tril(A) @ tril(B) for 2048 x 2048 matrices: a product of lower-triangular matrices.

The structure is guaranteed by the problem itself, not by the inputs: forward takes the lower
triangles, so C is lower triangular and C[i, j] = sum over j <= k <= i of A[i, k] * B[k, j], about a
sixth of a dense GEMM's multiply-adds, on any input (the evaluator's shifted distributions too).
The eager reference runs two tril kernels and a dense fp32 GEMM (a few tenths of a ms on an H200).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.tril(a) @ torch.tril(b)


def get_inputs():
    return [torch.randn(2048, 2048), torch.randn(2048, 2048)]


def get_init_inputs():
    return []
