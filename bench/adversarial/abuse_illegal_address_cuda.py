"""Abuse: a kernel that writes a terabyte past its output (illegal memory access, a sticky CUDA error).

Family: 8 (abuse)
Problem: softmax_rows
Backend: cuda
Expect: gate=none dynamic=runtime
Cheat: every thread stores 1 << 40 elements beyond the output. The context is unusable afterwards:
every later CUDA call in the process fails.
Naive harness: crashes on its first synchronize (broken).
kevin: the runner reports the CUDA error (stage runtime, blame candidate); the judge, in another
process with its own context, is unaffected and the next job gets a clean device.
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
        return _ext.wild_write(x)
