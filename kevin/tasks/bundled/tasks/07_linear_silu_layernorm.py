"""Fusion chain: Linear (GEMM + bias) -> SiLU -> LayerNorm with learned weight and bias."""

import torch
import torch.nn as nn
import torch.nn.functional as F

SIZE = "small"
SIZES = {
    "small": {"batch": 32, "in_features": 256, "out_features": 256},
    "large": {"batch": 4096, "in_features": 4096, "out_features": 4096},
}
batch = SIZES[SIZE]["batch"]
in_features = SIZES[SIZE]["in_features"]
out_features = SIZES[SIZE]["out_features"]


class Model(nn.Module):
    """h = x @ W^T + b; s = h * sigmoid(h); y = layer_norm(s) * gamma + beta over out_features."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.norm = nn.LayerNorm(out_features, eps=1e-5)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.linear(x)
        x = F.silu(x)
        return self.norm(x)


def get_inputs():
    return [torch.randn(batch, in_features)]


def get_init_inputs():
    return [in_features, out_features]
