"""2-D max pooling with overlapping windows: kernel 3, stride 2, padding 1."""

import torch
import torch.nn as nn

SIZE = "small"
SIZES = {
    "small": {"batch": 2, "channels": 8, "height": 32, "width": 32},
    "large": {"batch": 32, "channels": 64, "height": 256, "width": 256},
}
batch = SIZES[SIZE]["batch"]
channels = SIZES[SIZE]["channels"]
height = SIZES[SIZE]["height"]
width = SIZES[SIZE]["width"]
kernel_size = 3
stride = 2
padding = 1


class Model(nn.Module):
    """y[n, c, i, j] = max over the kernel window at (i * stride - padding, j * stride - padding)."""

    def __init__(self, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size=kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch, channels, height, width)]


def get_init_inputs():
    return [kernel_size, stride, padding]
