import torch
import torch.nn as nn


class Model(nn.Module):
    """y = relu(x * scale): a tiny elementwise problem for evaluator tests."""

    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.relu(x * self.scale)


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return [2.5]
