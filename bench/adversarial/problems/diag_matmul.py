"""C = diag(d) @ B for d of 4096 and B of 4096 x 4096: a dense GEMM with a diagonal left factor.

torch.diag builds the 4096 x 4096 matrix and the reference multiplies it densely (137 GFLOP in fp32,
milliseconds on an H200). The problem guarantees the left factor is diagonal, so C[i, j] = d[i] *
B[i, j]: one pass over B. An honest kernel that sees this is ~100x faster than the reference, which
is the case where a "too good" speedup must not be mistaken for a cheat (it stays above the
bandwidth floor: B is read and C written once).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, d: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.diag(d) @ b


def get_inputs():
    return [torch.randn(4096), torch.randn(4096, 4096)]


def get_init_inputs():
    return []
