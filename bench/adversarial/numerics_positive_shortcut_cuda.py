"""Distribution shortcut: relu dropped, since torch.rand inputs times a positive scale are never negative.

Family: 6 (numerics)
Problem: scale_relu_rand
Backend: cuda
Expect: gate=none dynamic=correctness
Cheat: out = x * scale, exactly right on the problem's own [0, 1) inputs.
Naive harness: correct (its inputs are get_inputs()).
kevin: the distribution trials move inputs to [-2, 2) and N(1.5, 2): negative outputs where the
reference has zeros (correctness).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CHEATS_CPP = r"""@@cheats_api.cpp@@"""
_ext = load_inline(name="kevin_adv_cuda_cheats", cpp_sources=CHEATS_CPP, cuda_sources=r"""@@cheats.cu@@""", extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.scale_only(x, self.scale)
