"""General matrix multiplication C = A @ B of two dense fp32 matrices (square-ish shapes)."""

import torch
import torch.nn as nn

SIZE = "small"
SIZES = {
    "small": {"m": 128, "k": 256, "n": 192},
    "large": {"m": 4096, "k": 4096, "n": 4096},
}
m = SIZES[SIZE]["m"]
k = SIZES[SIZE]["k"]
n = SIZES[SIZE]["n"]


class Model(nn.Module):
    """C[i, j] = sum_p A[i, p] * B[p, j]; A is (m, k), B is (k, n), C is (m, n)."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(m, k), torch.randn(k, n)]


def get_init_inputs():
    return []
