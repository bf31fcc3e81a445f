"""Polluted thread pool from Python: torch.set_num_threads(32) at import.

Family: 7 (polluting state)
Problem: scale_relu_rand
Backend: cpp
Expect: gate=global-state dynamic=global_state_changed
Follow-up: honest_scale_relu
Cheat: the same oversubscription as state_omp_threads, through the framework's own setter; the
kernel is honest.
Naive harness: reference timed after the candidate in the same process: inflated speedup.
kevin: static gate, global-state (torch.set_*). Without the gate the dynamic checks miss it when
the baseline is timed in the worker (not cached): the thread count is not among the global flags
compared before and after the candidate.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CLEAN_CPP = r"""@@clean.cpp@@"""
_ext = load_inline(name="kevin_adv_clean", cpp_sources=CLEAN_CPP, extra_cflags=["-O3"])

torch.set_num_threads(32)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.scale_relu(x, self.scale)
