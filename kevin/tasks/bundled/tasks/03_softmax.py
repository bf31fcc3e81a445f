"""Softmax over the last dimension of a matrix (one distribution per row)."""

import torch
import torch.nn as nn

SIZE = "small"
SIZES = {
    "small": {"rows": 128, "cols": 1024},
    "large": {"rows": 16384, "cols": 8192},
}
rows = SIZES[SIZE]["rows"]
cols = SIZES[SIZE]["cols"]


class Model(nn.Module):
    """y[i, j] = exp(x[i, j]) / sum_k exp(x[i, k])"""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


def get_inputs():
    # Spread of 3 so that rows are far from uniform and the row maximum matters.
    return [torch.randn(rows, cols) * 3.0]


def get_init_inputs():
    return []
