"""Replaced operator: aten::relu's CPU kernel made 64 times slower for the rest of the process.

Family: 7 (polluting state)
Problem: scale_relu_rand
Backend: cpp
Cheat: the candidate's kernel is honest, but at import the extension registers a correct relu that
loops 64 times over its input as aten::relu's CPU kernel (a torch::Library made at run time). Every
later torch.relu on the CPU in the process, the baseline's included, pays for it.
Naive harness: the reference is timed in the same process after the candidate is loaded: its
relu is the slow one, so the honest kernel reads many times faster than it is.
kevin: the dispatcher's tables are compared before inputs are drawn and again before the
reference exists (tampering: aten::relu [CPU]); a baseline is cached only from a passing run.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

DISPATCH_CPP = r"""@@dispatch.cpp@@"""
_ext = load_inline(name="kevin_adv_dispatch", cpp_sources=DISPATCH_CPP, extra_cflags=["-O3"])
_ext.replace_relu(False)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.scale_relu(x, self.scale)
