"""Fusion chain: Conv2d (3x3, padding 1) -> per-channel scale -> ReLU -> 2x2 max pooling."""

import torch
import torch.nn as nn
import torch.nn.functional as F

SIZE = "small"
SIZES = {
    "small": {"batch": 2, "in_channels": 4, "out_channels": 8, "height": 32, "width": 32},
    "large": {"batch": 32, "in_channels": 32, "out_channels": 64, "height": 128, "width": 128},
}
batch = SIZES[SIZE]["batch"]
in_channels = SIZES[SIZE]["in_channels"]
out_channels = SIZES[SIZE]["out_channels"]
height = SIZES[SIZE]["height"]
width = SIZES[SIZE]["width"]
kernel_size = 3


class Model(nn.Module):
    """y = max_pool2d(relu(conv2d(x) * scale[c]), 2); scale is a learned (out_channels, 1, 1) tensor."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.scale = nn.Parameter(torch.rand(out_channels, 1, 1) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        x = x * self.scale
        x = torch.relu(x)
        return F.max_pool2d(x, kernel_size=2)


def get_inputs():
    return [torch.randn(batch, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
