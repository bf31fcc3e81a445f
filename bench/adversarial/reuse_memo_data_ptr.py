"""Memoized by address: the output is cached per input data_ptr and returned on every repeat.

Family: 5 (reusing results)
Problem: linear_relu
Backend: cpp
Expect: gate=none dynamic=timed_output_mismatch|correctness
Cheat: the first call on a buffer computes (slowly, honestly) and stores the output under the
buffer's address; later calls on that address return the stored tensor without reading the input.
Naive harness: it times the same input objects it checked, so the timed calls are table lookups:
correct, and orders of magnitude "faster" than the GEMM.
kevin: timed calls read the same buffers with new content each time, and two timed outputs are
checked (timed_output_mismatch); correctness trials whose clones land on a recycled address get
a stale answer (wrong output): which comes first depends on where the allocator puts each
trial's inputs, so either is expected.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

TRICKS_CPP = r"""@@tricks.cpp@@"""
_ext = load_inline(name="kevin_adv_tricks", cpp_sources=TRICKS_CPP, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.linear_relu_memo_ptr(x, self.linear.weight, self.linear.bias)
