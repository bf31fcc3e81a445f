"""Mean of each row of 16384 uniform [0, 1) values."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mean(x, dim=1)


def get_inputs():
    return [torch.rand(64, 16384)]


def get_init_inputs():
    return []
