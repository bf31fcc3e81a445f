"""triton candidate for tasks/02_row_sum.py: one program per row, fp32 partial sums over column chunks."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, n_cols, row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    start = x_ptr + row * row_stride
    columns = tl.arange(0, BLOCK)
    partial = tl.zeros((BLOCK,), dtype=tl.float32)
    for first in range(0, n_cols, BLOCK):
        mask = first + columns < n_cols
        partial += tl.load(start + first + columns, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row, tl.sum(partial, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty((rows,), device=x.device, dtype=x.dtype)
        block = min(triton.next_power_of_2(cols), 4096)
        row_sum_kernel[(rows,)](x, out, cols, x.stride(0), BLOCK=block, num_warps=8)
        return out
