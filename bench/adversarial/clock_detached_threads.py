"""Work that escapes the clock: repeated calls hand the GEMM to a detached std::thread.

Family: 3 (fooling the clock)
Problem: linear_relu
Backend: cpp
Expect: gate=none dynamic=compile
Cheat: the first call on an input buffer computes before returning (so the correctness check sees
the right answer); every later call on the same buffer (a timing loop) hands the GEMM to a detached
std::thread and returns at once (one such thread at a time: while it is busy, a call's output is
simply never filled). The clock measures a thread launch at most.
Naive harness: it checks one call and times 20 more on the same input without looking at their
outputs: correct, and a speedup of launch time vs a GEMM.
kevin: timed calls read the same buffers with new content, and two timed outputs are checked when
the call returns (timed_output_mismatch); correctness trials on recycled buffers get unfinished
outputs (wrong output); outputs that change after return are deferred_write.
Since the judge/runner split: the build broker's symbol check refuses an extension that starts
std::thread (native threads run outside the checks), so it stops at compile (Expect).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SIDEDOOR_CPP = r"""@@sidedoor.cpp@@"""
_ext = load_inline(name="kevin_adv_sidedoor", cpp_sources=SIDEDOOR_CPP, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.linear_relu_async(x, self.linear.weight, self.linear.bias)
