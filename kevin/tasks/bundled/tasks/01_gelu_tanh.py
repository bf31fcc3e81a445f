"""GELU with the tanh approximation, written out as the chain of elementwise ops eager runs."""

import math

import torch
import torch.nn as nn

SIZE = "small"
SIZES = {
    "small": {"rows": 64, "cols": 1024},
    "large": {"rows": 8192, "cols": 8192},
}
rows = SIZES[SIZE]["rows"]
cols = SIZES[SIZE]["cols"]


class Model(nn.Module):
    """y = 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))"""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))
        return 0.5 * x * (1.0 + torch.tanh(inner))


def get_inputs():
    return [torch.randn(rows, cols) * 2.0]


def get_init_inputs():
    return []
