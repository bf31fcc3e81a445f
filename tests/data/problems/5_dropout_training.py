"""Nondeterministic: dropout in training mode, the nn.Module default (validate says nondeterministic)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.dropout = nn.Dropout(p=0.5)

    def forward(self, x):
        return self.dropout(x) * 2.0


def get_inputs():
    return [torch.rand(64, 64)]


def get_init_inputs():
    return []
