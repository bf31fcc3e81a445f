"""Degenerate: softmax over a dimension of size 1 is 1.0 whatever the input (validate says degenerate)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.rand(128, 1)]


def get_init_inputs():
    return []
