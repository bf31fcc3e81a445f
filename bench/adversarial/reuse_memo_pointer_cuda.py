"""Memo by pointer: the Gram matrix is stored under the input's device address and returned on every repeat.

Family: 5 (reusing results)
Problem: gram_symmetric
Backend: cuda
Expect: gate=none dynamic=correctness|timed_output_mismatch
Cheat: the C++ function keeps a map from x.data_ptr() to the output tensor; the first call on an
address computes it (a slow naive kernel), every later call on that address launches a token
kernel and returns the stored tensor without reading x.
Naive harness: it times the inputs it checked: every timed call is a lookup, a huge "speedup".
kevin: trial inputs are clones (new addresses, but the allocator recycles them, so a later trial
can get an earlier trial's answer: wrong output), and timed calls refill the same buffers with
fresh content, two timed outputs being checked (timed_output_mismatch).
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
        return _ext.gram_memo_by_address(x)
