"""triton candidate for tasks/04_layernorm.py: one program per row; mean, then the centred variance, then
the normalized, scaled and shifted row, each a pass over column chunks with fp32 accumulation."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layer_norm_kernel(x_ptr, weight_ptr, bias_ptr, out_ptr, n_cols, row_stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * row_stride
    out_row = out_ptr + row * row_stride
    columns = tl.arange(0, BLOCK)
    total = tl.zeros((BLOCK,), dtype=tl.float32)
    for first in range(0, n_cols, BLOCK):
        mask = first + columns < n_cols
        total += tl.load(x_row + first + columns, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(total, axis=0) / n_cols
    squares = tl.zeros((BLOCK,), dtype=tl.float32)
    for first in range(0, n_cols, BLOCK):
        mask = first + columns < n_cols
        x = tl.load(x_row + first + columns, mask=mask, other=0.0).to(tl.float32)
        centred = tl.where(mask, x - mean, 0.0)
        squares += centred * centred
    rstd = 1.0 / tl.sqrt(tl.sum(squares, axis=0) / n_cols + eps)
    for first in range(0, n_cols, BLOCK):
        mask = first + columns < n_cols
        x = tl.load(x_row + first + columns, mask=mask, other=0.0).to(tl.float32)
        weight = tl.load(weight_ptr + first + columns, mask=mask, other=0.0).to(tl.float32)
        bias = tl.load(bias_ptr + first + columns, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_row + first + columns, (x - mean) * rstd * weight + bias, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        # Same modules and the same random calls as the reference, so a seed gives the same parameters.
        self.norm = nn.LayerNorm(hidden, eps=1e-5)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = x.shape[-1]
        flat = x.contiguous().view(-1, hidden)
        out = torch.empty_like(flat)
        weight = self.norm.weight.contiguous()
        bias = self.norm.bias.contiguous()
        block = min(triton.next_power_of_2(hidden), 2048)
        layer_norm_kernel[(flat.shape[0],)](
            flat, weight, bias, out, hidden, flat.stride(0), self.norm.eps, BLOCK=block, num_warps=8
        )
        return out.view(x.shape)
