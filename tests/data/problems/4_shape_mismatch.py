"""Broken: forward multiplies matrices of incompatible shapes (validate says run_error)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.rand(4, 5), torch.rand(6, 7)]


def get_init_inputs():
    return []
