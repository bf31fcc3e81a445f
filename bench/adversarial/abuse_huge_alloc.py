"""Huge allocation: the kernel hoards up to 8 GiB of host memory before computing.

Family: 8 (abuse)
Problem: scale_relu_rand
Backend: cpp
Expect: gate=none dynamic=compile
Cheat: 256 MiB pieces, each memset so it is resident, never freed, never checked for NULL (a
failed malloc becomes a write through a null pointer). On a shared node this takes memory from
every other job; past the node's memory it is the OOM killer's choice what dies.
Naive harness: broken: with the address space its child is given (8 GiB, standing in for the
machine) a malloc fails and the child dies with SIGSEGV; without a limit it would take the memory.
kevin: the supervisor polls the resident memory of the worker's whole session and kills it past
the limit (runtime stage, "used more than N GiB", blamed on the candidate).
Since the judge/runner split: its extension (sidedoor.cpp, shared with the thread cheats) links
std::thread, which the build broker's symbol check refuses, so it stops at compile before it
allocates (Expect); the memory watch is tested on its own in tests/evaluator/test_evaluate_cpp.py.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SIDEDOOR_CPP = r"""@@sidedoor.cpp@@"""
_ext = load_inline(name="kevin_adv_sidedoor", cpp_sources=SIDEDOOR_CPP, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.scale_relu_hungry(x, self.scale)
