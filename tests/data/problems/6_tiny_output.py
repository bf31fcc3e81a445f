"""Degenerate: outputs around 1e-7, so returning zeros would pass atol=1e-4 (validate says degenerate)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.tanh(x) * 1e-7


def get_inputs():
    return [torch.rand(32, 32)]


def get_init_inputs():
    return []
