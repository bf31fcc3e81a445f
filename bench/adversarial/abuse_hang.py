"""Hang: the kernel never returns.

Family: 8 (abuse)
Problem: scale_relu_rand
Backend: cpp
Expect: gate=none dynamic=timeout
Cheat: an infinite loop in native code (a GPU kernel that never terminates is the same case): no
Python-level timeout or signal handler inside the process can interrupt it.
Naive harness: broken: its child never reports; only the parent's wall-clock timeout ends it.
kevin: a per-stage deadline in the supervisor kills the worker's whole process group (stage
timeout, blamed on the candidate), and the next evaluation starts clean.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

TRICKS_CPP = r"""@@tricks.cpp@@"""
_ext = load_inline(name="kevin_adv_tricks", cpp_sources=TRICKS_CPP, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.spin(x)
