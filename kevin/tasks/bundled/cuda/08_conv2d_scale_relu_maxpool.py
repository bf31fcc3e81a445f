"""cuda candidate for tasks/08_conv2d_scale_relu_maxpool.py: one kernel. Each block computes a 16x16 conv tile
for 16 output channels (input tile and filter taps staged in shared memory, one input channel at a
time), applies scale and ReLU, and max-pools the tile 2x2 from shared memory into an 8x8 output tile."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = """
torch::Tensor conv_scale_relu_pool(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, torch::Tensor scale,
                                   int64_t pad_h, int64_t pad_w);
"""

CUDA_SOURCE = r"""
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

constexpr int kTile = 16;          // conv outputs per block side; one thread per conv output pixel
constexpr int kPooled = kTile / 2; // pooled outputs per block side
constexpr int kChannels = 16;      // output channels per block
constexpr int kMaxKernel = 7;
constexpr int kMaxHalo = kTile + kMaxKernel - 1;

// grid: x = pooled spatial tile, y = group of kChannels output channels, z = image. Conv stride 1.
__global__ void __launch_bounds__(kTile * kTile) conv_scale_relu_pool_kernel(
        const float* __restrict__ in, const float* __restrict__ weight, const float* __restrict__ bias,
        const float* __restrict__ scale, float* __restrict__ out, int in_ch, int height, int width, int out_ch,
        int kh, int kw, int pad_h, int pad_w, int pooled_h, int pooled_w, int tiles_w) {
    __shared__ float tile[kMaxHalo * kMaxHalo];
    __shared__ float taps[kMaxKernel * kMaxKernel * kChannels];  // [ky * kw + kx][oc]
    __shared__ float activated[kChannels][kTile][kTile + 1];
    const int tx = threadIdx.x % kTile, ty = threadIdx.x / kTile;
    const int px0 = (blockIdx.x % tiles_w) * kPooled, py0 = (blockIdx.x / tiles_w) * kPooled;
    const int ox0 = 2 * px0, oy0 = 2 * py0;
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
    // Same rounding order as the reference: (conv + bias), then * scale, then ReLU.
#pragma unroll
    for (int c = 0; c < kChannels; ++c) {
        const int oc = oc0 + c;
        float v = 0.0f;
        if (oc < out_ch) v = fmaxf((acc[c] + bias[oc]) * scale[oc], 0.0f);
        activated[c][ty][tx] = v;
    }
    __syncthreads();
    for (int t = threadIdx.x; t < kChannels * kPooled * kPooled; t += blockDim.x) {
        const int c = t / (kPooled * kPooled), py = (t / kPooled) % kPooled, px = t % kPooled;
        const int oc = oc0 + c, gy = py0 + py, gx = px0 + px;
        if (oc >= out_ch || gy >= pooled_h || gx >= pooled_w) continue;
        const float best = fmaxf(fmaxf(activated[c][2 * py][2 * px], activated[c][2 * py][2 * px + 1]),
                                 fmaxf(activated[c][2 * py + 1][2 * px], activated[c][2 * py + 1][2 * px + 1]));
        out[(((int64_t)n * out_ch + oc) * pooled_h + gy) * pooled_w + gx] = best;
    }
}

torch::Tensor conv_scale_relu_pool(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, torch::Tensor scale,
                                   int64_t pad_h, int64_t pad_w) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda() && scale.is_cuda(),
                "conv_scale_relu_pool: expected CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32,
                "conv_scale_relu_pool: expected float32");
    TORCH_CHECK(x.dim() == 4 && weight.dim() == 4 && weight.size(1) == x.size(1),
                "conv_scale_relu_pool: NCHW input, OIHW weight");
    const c10::cuda::CUDAGuard guard(x.device());
    auto input = x.contiguous();
    auto w = weight.contiguous();
    auto b = bias.contiguous();
    auto s = scale.contiguous();
    const int64_t batch = input.size(0), in_ch = input.size(1), height = input.size(2), width = input.size(3);
    const int64_t out_ch = w.size(0), kh = w.size(2), kw = w.size(3);
    TORCH_CHECK(s.numel() == out_ch && b.numel() == out_ch, "conv_scale_relu_pool: per-channel parameter sizes");
    TORCH_CHECK(kh <= kMaxKernel && kw <= kMaxKernel, "conv_scale_relu_pool: kernel larger than 7 not supported");
    TORCH_CHECK(pad_h <= kh - 1 && pad_w <= kw - 1, "conv_scale_relu_pool: padding must be smaller than the kernel");
    TORCH_CHECK(batch <= 65535, "conv_scale_relu_pool: batch too large for one grid dimension");
    const int64_t conv_h = height + 2 * pad_h - kh + 1, conv_w = width + 2 * pad_w - kw + 1;
    const int64_t pooled_h = conv_h / 2, pooled_w = conv_w / 2;  // max_pool2d(2) floors odd sizes
    TORCH_CHECK(pooled_h > 0 && pooled_w > 0, "conv_scale_relu_pool: input too small");
    auto output = torch::empty({batch, out_ch, pooled_h, pooled_w}, input.options());
    if (batch == 0 || out_ch == 0) return output;
    const int64_t tiles_w = (pooled_w + kPooled - 1) / kPooled, tiles_h = (pooled_h + kPooled - 1) / kPooled;
    const dim3 grid((unsigned)(tiles_w * tiles_h), (unsigned)((out_ch + kChannels - 1) / kChannels), (unsigned)batch);
    conv_scale_relu_pool_kernel<<<grid, kTile * kTile, 0, c10::cuda::getCurrentCUDAStream()>>>(
        input.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), s.data_ptr<float>(),
        output.data_ptr<float>(), (int)in_ch, (int)height, (int)width, (int)out_ch, (int)kh, (int)kw,
        (int)pad_h, (int)pad_w, (int)pooled_h, (int)pooled_w, (int)tiles_w);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return output;
}
"""

_ext = load_inline(
    name="kevin_bundled_cuda_08_conv2d_scale_relu_maxpool",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["conv_scale_relu_pool"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        # Same parameters in the same order as the reference (conv first, then scale).
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.scale = nn.Parameter(torch.rand(out_channels, 1, 1) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pad_h, pad_w = self.conv.padding
        return _ext.conv_scale_relu_pool(x, self.conv.weight, self.conv.bias, self.scale, pad_h, pad_w)
