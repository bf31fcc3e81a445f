# backend: cpp
# expect: no-custom-kernel
"""cpp back end with no extension at all: PyTorch does everything."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):  # <-- cheat
    def forward(self, x):
        return torch.relu(x)
