"""Behaviour by call count: honest for the first 12 calls, then the last answer returned for ever.

Family: 5 (reusing results)
Problem: scale_relu_rand
Backend: cuda
Expect: gate=none dynamic=timed_output_mismatch
Cheat: checkers call a few times, timing loops call hundreds of times. After 12 calls forward
launches the kernel on one row (a token) and returns the previous output.
Naive harness: one checked call, then timed calls on the same input: every timed call is free.
kevin: the correctness trials (7) and the trace fit in the honest calls; the timed calls get fresh
inputs and two sampled timed outputs are compared with the reference (timed_output_mismatch).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

KERNELS_CPP = r"""@@kernels_api.cpp@@"""
_ext = load_inline(name="kevin_adv_cuda_kernels", cpp_sources=KERNELS_CPP, cuda_sources=r"""@@kernels.cu@@""", extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale
        self.calls = 0
        self.last = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls > 12 and self.last is not None:
            _ext.scale_relu(x[:1], self.scale)
            return self.last
        self.last = _ext.scale_relu(x, self.scale)
        return self.last
