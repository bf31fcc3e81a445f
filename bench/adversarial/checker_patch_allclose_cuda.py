"""Patched comparison: torch.allclose and torch.testing.assert_close always agree; the kernel returns garbage.

Family: 4 (fooling the checker)
Problem: softmax_rows
Backend: cuda
Expect: gate=global-state dynamic=correctness
Cheat: at import the comparison functions a harness would call are replaced; forward returns an
uninitialised buffer after a token launch.
Naive harness: it compares with torch.allclose in the candidate's process: "correct", and fast.
kevin: static gate, global-state. Dynamically the judge compares in its own process with functions
it bound before any candidate existed: wrong output (correctness).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CHEATS_CPP = r"""@@cheats_api.cpp@@"""
_ext = load_inline(name="kevin_adv_cuda_cheats", cpp_sources=CHEATS_CPP, cuda_sources=r"""@@cheats.cu@@""", extra_cuda_cflags=["-O3"])


torch.allclose = lambda *args, **kwargs: True
torch.testing.assert_close = lambda *args, **kwargs: None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.touch(torch.empty_like(x))
