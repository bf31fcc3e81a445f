"""triton candidate for tasks/12_maxpool2d.py: one lane per output element over the flattened output;
the window is walked in the kernel, padded positions load -inf and never win."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def max_pool_kernel(
    x_ptr, out_ptr, total, height, width, out_h, out_w,
    KERNEL: tl.constexpr, STRIDE: tl.constexpr, PADDING: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    index = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    valid = index < total
    ox = index % out_w
    oy = (index // out_w) % out_h
    plane = index // (out_w * out_h)
    source = x_ptr + plane * height * width
    best = tl.full((BLOCK,), -float("inf"), dtype=tl.float32)
    for ky in tl.static_range(KERNEL):
        iy = oy * STRIDE - PADDING + ky
        row_ok = (iy >= 0) & (iy < height)
        for kx in tl.static_range(KERNEL):
            ix = ox * STRIDE - PADDING + kx
            ok = valid & row_ok & (ix >= 0) & (ix < width)
            value = tl.load(source + iy * width + ix, mask=ok, other=-float("inf")).to(tl.float32)
            best = tl.maximum(best, value)
    tl.store(out_ptr + index, best, mask=valid)


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        batch, channels, height, width = x.shape
        k, s, p = self.kernel_size, self.stride, self.padding
        out_h = (height + 2 * p - k) // s + 1
        out_w = (width + 2 * p - k) // s + 1
        out = torch.empty((batch, channels, out_h, out_w), device=x.device, dtype=x.dtype)
        total = out.numel()
        max_pool_kernel[(triton.cdiv(total, BLOCK),)](
            x, out, total, height, width, out_h, out_w, KERNEL=k, STRIDE=s, PADDING=p, BLOCK=BLOCK
        )
        return out
