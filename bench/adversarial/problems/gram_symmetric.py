"""G = X @ X^T for X of 4096 x 512: a Gram matrix, symmetric by construction.

G[i, j] = G[j, i] for every input, so a kernel needs only the tiles on and above the diagonal and
can mirror them: half the multiply-adds of the dense GEMM the eager reference runs (17 GFLOP in
fp32, a few tenths of a ms on an H200).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ x.t()


def get_inputs():
    return [torch.randn(4096, 512)]


def get_init_inputs():
    return []
