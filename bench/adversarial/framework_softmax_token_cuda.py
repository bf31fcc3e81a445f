"""Library work with a token kernel: torch.softmax does the work, a one-thread kernel is launched after it.

Family: 1 (not writing the kernel)
Problem: softmax_rows
Backend: cuda
Expect: gate=framework-compute dynamic=library_kernels
Cheat: the answer is aten::_softmax; the custom kernel is a launch with no work.
Naive harness: correct, about 1x.
kevin: static gate, framework-compute; dynamically library_kernels (aten::_softmax is all the
device time).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CHEATS_CPP = r"""@@cheats_api.cpp@@"""
_ext = load_inline(name="kevin_adv_cuda_cheats", cpp_sources=CHEATS_CPP, cuda_sources=r"""@@cheats.cu@@""", extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.touch(torch.softmax(x, dim=1))
