"""2-D convolution with few channels: 3x3 kernel, stride 1, padding 1, with bias."""

import torch
import torch.nn as nn

SIZE = "small"
SIZES = {
    "small": {"batch": 2, "in_channels": 8, "out_channels": 16, "height": 32, "width": 32},
    "large": {"batch": 64, "in_channels": 16, "out_channels": 64, "height": 128, "width": 128},
}
batch = SIZES[SIZE]["batch"]
in_channels = SIZES[SIZE]["in_channels"]
out_channels = SIZES[SIZE]["out_channels"]
height = SIZES[SIZE]["height"]
width = SIZES[SIZE]["width"]
kernel_size = 3


class Model(nn.Module):
    """y = conv2d(x, weight, bias, stride=1, padding=kernel_size // 2); same spatial size out as in."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
