"""Fusion chain: square Linear without bias -> residual add of the input -> RMSNorm with a learned weight."""

import torch
import torch.nn as nn

SIZE = "small"
SIZES = {
    "small": {"batch": 32, "hidden": 256},
    "large": {"batch": 4096, "hidden": 4096},
}
batch = SIZES[SIZE]["batch"]
hidden = SIZES[SIZE]["hidden"]


class Model(nn.Module):
    """h = x @ W^T + x; y = h / sqrt(mean(h^2 over hidden) + eps) * weight."""

    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.proj = nn.Linear(hidden, hidden, bias=False)
        self.weight = nn.Parameter(torch.rand(hidden) + 0.5)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.proj(x) + x
        rms = torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return h * rms * self.weight


def get_inputs():
    return [torch.randn(batch, hidden)]


def get_init_inputs():
    return [hidden]
