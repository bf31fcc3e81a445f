"""A row softmax renormalized again: p = softmax(x, dim=1); p / p.sum(dim=1, keepdim=True).

The problem guarantees that p's rows already sum to one (to fp32 rounding), so the second
normalization changes nothing beyond rounding: a kernel may compute the softmax once. x is
4096 x 8192; the reference runs softmax, a row sum and a division (about 0.2 ms on an H200).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p = torch.softmax(x, dim=1)
        return p / p.sum(dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(4096, 8192)]


def get_init_inputs():
    return []
