"""triton candidate for tasks/06_conv2d.py: direct convolution (stride 1, zero padding as masked loads). Each
program owns 128 output pixels of one image x 32 output channels and, for every input channel and filter
tap, adds the outer product of a column of input pixels and a row of filter taps to an fp32 tile."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_PIXELS, BLOCK_CHANNELS = 128, 32


@triton.jit
def conv2d_kernel(
    x_ptr, weight_ptr, bias_ptr, out_ptr,
    in_channels, height, width, out_channels, out_h, out_w, pad_h, pad_w,
    KERNEL_H: tl.constexpr, KERNEL_W: tl.constexpr, BLOCK_PIXELS: tl.constexpr, BLOCK_CHANNELS: tl.constexpr,
):  # fmt: skip
    pixels = tl.program_id(0) * BLOCK_PIXELS + tl.arange(0, BLOCK_PIXELS)
    image = tl.program_id(1).to(tl.int64)
    channels = tl.program_id(2) * BLOCK_CHANNELS + tl.arange(0, BLOCK_CHANNELS)
    pixel_ok = pixels < out_h * out_w
    channel_ok = channels < out_channels
    oy = pixels // out_w
    ox = pixels % out_w
    acc = tl.zeros((BLOCK_PIXELS, BLOCK_CHANNELS), dtype=tl.float32)
    for ic in range(0, in_channels):
        plane = x_ptr + (image * in_channels + ic) * height * width
        taps = weight_ptr + (channels * in_channels + ic) * (KERNEL_H * KERNEL_W)  # weight is (O, I, KH, KW)
        for ky in tl.static_range(KERNEL_H):
            iy = oy - pad_h + ky
            row_ok = pixel_ok & (iy >= 0) & (iy < height)
            for kx in tl.static_range(KERNEL_W):
                ix = ox - pad_w + kx
                ok = row_ok & (ix >= 0) & (ix < width)
                x = tl.load(plane + iy * width + ix, mask=ok, other=0.0).to(tl.float32)
                w = tl.load(taps + ky * KERNEL_W + kx, mask=channel_ok, other=0.0).to(tl.float32)
                acc += x[:, None] * w[None, :]
    bias = tl.load(bias_ptr + channels, mask=channel_ok, other=0.0).to(tl.float32)
    acc += bias[None, :]
    out = out_ptr + (image * out_channels + channels[None, :]) * out_h * out_w + pixels[:, None]
    tl.store(out, acc, mask=pixel_ok[:, None] & channel_ok[None, :])


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        # Owns the parameters only (same shapes and initialization as the reference); never called.
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        weight = self.conv.weight.contiguous()
        bias = self.conv.bias.contiguous()
        batch, in_channels, height, width = x.shape
        out_channels, _, kernel_h, kernel_w = weight.shape
        pad_h, pad_w = self.conv.padding
        out_h = height + 2 * pad_h - kernel_h + 1
        out_w = width + 2 * pad_w - kernel_w + 1
        out = torch.empty((batch, out_channels, out_h, out_w), device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(out_h * out_w, BLOCK_PIXELS), batch, triton.cdiv(out_channels, BLOCK_CHANNELS))
        conv2d_kernel[grid](
            x, weight, bias, out,
            in_channels, height, width, out_channels, out_h, out_w, pad_h, pad_w,
            KERNEL_H=kernel_h, KERNEL_W=kernel_w, BLOCK_PIXELS=BLOCK_PIXELS, BLOCK_CHANNELS=BLOCK_CHANNELS,
            num_warps=4,
        )  # fmt: skip
        return out
