"""cuda candidate for tasks/06_conv2d.py: direct convolution; each block stages one input channel's tile
(with halo) and the matching filter taps in shared memory and produces 16x16 pixels x 16 output channels."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = "torch::Tensor conv2d_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, int64_t pad_h, int64_t pad_w);"

CUDA_SOURCE = r"""
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

constexpr int kTile = 16;          // output pixels per block side; one thread per pixel
constexpr int kChannels = 16;      // output channels per block
constexpr int kMaxKernel = 7;
constexpr int kMaxHalo = kTile + kMaxKernel - 1;

// grid: x = spatial tile, y = group of kChannels output channels, z = image. Stride 1, zero padding.
__global__ void __launch_bounds__(kTile * kTile) conv2d_kernel(
        const float* __restrict__ in, const float* __restrict__ weight, const float* __restrict__ bias,
        float* __restrict__ out, int in_ch, int height, int width, int out_ch, int kh, int kw,
        int pad_h, int pad_w, int out_h, int out_w, int tiles_w) {
    __shared__ float tile[kMaxHalo * kMaxHalo];
    __shared__ float taps[kMaxKernel * kMaxKernel * kChannels];  // [ky * kw + kx][oc]
    const int tx = threadIdx.x % kTile, ty = threadIdx.x / kTile;
    const int ox0 = (blockIdx.x % tiles_w) * kTile, oy0 = (blockIdx.x / tiles_w) * kTile;
    const int oc0 = blockIdx.y * kChannels;
    const int n = blockIdx.z;
    const int halo_w = kTile + kw - 1, halo_h = kTile + kh - 1;
    const int ntaps = kh * kw;
    float acc[kChannels];
#pragma unroll
    for (int c = 0; c < kChannels; ++c) acc[c] = 0.0f;

    for (int ic = 0; ic < in_ch; ++ic) {
        const float* plane = in + ((int64_t)n * in_ch + ic) * height * width;
        for (int t = threadIdx.x; t < halo_h * halo_w; t += blockDim.x) {
            const int iy = oy0 - pad_h + t / halo_w, ix = ox0 - pad_w + t % halo_w;
            tile[t] = (iy >= 0 && iy < height && ix >= 0 && ix < width) ? plane[(int64_t)iy * width + ix] : 0.0f;
        }
        for (int t = threadIdx.x; t < ntaps * kChannels; t += blockDim.x) {
            const int c = t % kChannels, tap = t / kChannels;
            const int oc = oc0 + c;
            taps[t] = oc < out_ch ? weight[((int64_t)oc * in_ch + ic) * ntaps + tap] : 0.0f;
        }
        __syncthreads();
        for (int ky = 0; ky < kh; ++ky) {
            for (int kx = 0; kx < kw; ++kx) {
                const float v = tile[(ty + ky) * halo_w + tx + kx];
                const float* w = taps + (ky * kw + kx) * kChannels;
#pragma unroll
                for (int c = 0; c < kChannels; ++c) acc[c] = fmaf(v, w[c], acc[c]);
            }
        }
        __syncthreads();
    }
    const int oy = oy0 + ty, ox = ox0 + tx;
    if (oy >= out_h || ox >= out_w) return;
#pragma unroll
    for (int c = 0; c < kChannels; ++c) {
        const int oc = oc0 + c;
        if (oc < out_ch) out[(((int64_t)n * out_ch + oc) * out_h + oy) * out_w + ox] = acc[c] + bias[oc];
    }
}

torch::Tensor conv2d_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, int64_t pad_h, int64_t pad_w) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "conv2d_forward: expected CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32, "conv2d_forward: expected float32");
    TORCH_CHECK(x.dim() == 4 && weight.dim() == 4 && weight.size(1) == x.size(1), "conv2d_forward: NCHW input, OIHW weight");
    const c10::cuda::CUDAGuard guard(x.device());
    auto input = x.contiguous();
    auto w = weight.contiguous();
    auto b = bias.contiguous();
    const int64_t batch = input.size(0), in_ch = input.size(1), height = input.size(2), width = input.size(3);
    const int64_t out_ch = w.size(0), kh = w.size(2), kw = w.size(3);
    TORCH_CHECK(kh <= kMaxKernel && kw <= kMaxKernel, "conv2d_forward: kernel larger than 7 not supported");
    TORCH_CHECK(pad_h <= kh - 1 && pad_w <= kw - 1, "conv2d_forward: padding must be smaller than the kernel");
    TORCH_CHECK(batch <= 65535, "conv2d_forward: batch too large for one grid dimension");
    const int64_t out_h = height + 2 * pad_h - kh + 1, out_w = width + 2 * pad_w - kw + 1;
    TORCH_CHECK(out_h > 0 && out_w > 0, "conv2d_forward: input smaller than the kernel");
    auto output = torch::empty({batch, out_ch, out_h, out_w}, input.options());
    if (batch == 0 || out_ch == 0) return output;
    const int64_t tiles_w = (out_w + kTile - 1) / kTile, tiles_h = (out_h + kTile - 1) / kTile;
    const dim3 grid((unsigned)(tiles_w * tiles_h), (unsigned)((out_ch + kChannels - 1) / kChannels), (unsigned)batch);
    conv2d_kernel<<<grid, kTile * kTile, 0, c10::cuda::getCurrentCUDAStream()>>>(
        input.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), output.data_ptr<float>(),
        (int)in_ch, (int)height, (int)width, (int)out_ch, (int)kh, (int)kw, (int)pad_h, (int)pad_w,
        (int)out_h, (int)out_w, (int)tiles_w);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return output;
}
"""

_ext = load_inline(
    name="kevin_bundled_cuda_06_conv2d",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["conv2d_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        # Owns the parameters only (same shapes and initialization as the reference); never called.
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pad_h, pad_w = self.conv.padding
        return _ext.conv2d_forward(x, self.conv.weight, self.conv.bias, pad_h, pad_w)
