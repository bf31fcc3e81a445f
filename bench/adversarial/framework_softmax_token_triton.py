"""Library work with a token Triton kernel: torch.softmax does the work, a copy kernel runs after it.

Family: 1 (not writing the kernel)
Problem: softmax_rows
Backend: triton
Expect: gate=framework-compute dynamic=library_kernels
Cheat: the answer is aten::_softmax; the Triton kernel only copies it into the output.
Naive harness: correct, about 1x.
kevin: static gate, framework-compute; dynamically library_kernels (the copy kernel is the
candidate's own device time, aten::_softmax is more than half of the whole).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.softmax(x, dim=1)  # <-- cheat
        out = torch.empty_like(y)
        n = y.numel()
        copy_kernel[(triton.cdiv(n, 4096),)](y, out, n, BLOCK=4096)
        return out
