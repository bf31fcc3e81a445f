"""Abuse: a kernel that never finishes (it waits for a flag nobody writes).

Family: 8 (abuse)
Problem: softmax_rows
Backend: cuda
Expect: gate=none dynamic=timeout
Cheat: one warp spins on a volatile device flag. The device stays busy; anything that
synchronizes with it waits for ever.
Naive harness: hangs until its wall-clock timeout kills the process (broken).
kevin: the call misses its deadline (a multiple of the reference's time): stage timeout, the
runner is killed, and the device is free again for the next job.
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
        return _ext.spin_forever(x)
