"""Layer normalization over the last dimension, with a learned (non-trivial) weight and bias."""

import torch
import torch.nn as nn

SIZE = "small"
SIZES = {
    "small": {"rows": 64, "hidden": 1024},
    "large": {"rows": 32768, "hidden": 4096},
}
rows = SIZES[SIZE]["rows"]
hidden = SIZES[SIZE]["hidden"]


class Model(nn.Module):
    """y = (x - mean(x)) / sqrt(var(x) + 1e-5) * weight + bias, statistics per row (biased variance)."""

    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=1e-5)
        # nn.LayerNorm starts at weight=1, bias=0; random values make the affine part observable.
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    return [torch.randn(rows, hidden) * 2.0 + 1.0]


def get_init_inputs():
    return [hidden]
