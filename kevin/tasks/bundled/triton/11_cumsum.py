"""triton candidate for tasks/11_cumsum.py: one program per row; each column chunk is scanned with
tl.cumsum and shifted by the running total of the chunks before it (fp32 throughout)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def cumsum_kernel(x_ptr, out_ptr, n_cols, in_stride, out_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    columns = tl.arange(0, BLOCK)
    carry = tl.zeros((1,), dtype=tl.float32)
    for first in range(0, n_cols, BLOCK):
        mask = first + columns < n_cols
        x = tl.load(x_ptr + row * in_stride + first + columns, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + row * out_stride + first + columns, tl.cumsum(x, axis=0) + carry, mask=mask)
        carry += tl.sum(x, axis=0)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty_like(x)
        block = min(triton.next_power_of_2(cols), 2048)
        cumsum_kernel[(rows,)](x, out, cols, x.stride(0), out.stride(0), BLOCK=block, num_warps=8)
        return out
