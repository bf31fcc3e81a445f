"""cuda candidate for tasks/12_maxpool2d.py: one thread per output element (consecutive threads along the
output row, so loads of neighbouring windows coalesce); padded positions never win, NaN propagates."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = "torch::Tensor max_pool(torch::Tensor x, int64_t kernel, int64_t stride, int64_t padding);"

CUDA_SOURCE = r"""
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

constexpr int kThreads = 256;

__global__ void max_pool_kernel(const float* __restrict__ in, float* __restrict__ out, int64_t total,
                                int height, int width, int out_h, int out_w, int kernel, int stride, int padding) {
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += step) {
        const int ox = (int)(idx % out_w);
        const int oy = (int)((idx / out_w) % out_h);
        const int64_t plane = idx / ((int64_t)out_w * out_h);
        const float* src = in + plane * height * width;
        const int y0 = oy * stride - padding, x0 = ox * stride - padding;
        float best = -INFINITY;
        for (int ky = 0; ky < kernel; ++ky) {
            const int iy = y0 + ky;
            if (iy < 0 || iy >= height) continue;
            for (int kx = 0; kx < kernel; ++kx) {
                const int ix = x0 + kx;
                if (ix < 0 || ix >= width) continue;
                const float v = src[(int64_t)iy * width + ix];
                if (v > best || isnan(v)) best = v;
            }
        }
        out[idx] = best;
    }
}

torch::Tensor max_pool(torch::Tensor x, int64_t kernel, int64_t stride, int64_t padding) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() == 4,
                "max_pool: expected an NCHW float32 CUDA tensor");
    TORCH_CHECK(kernel > 0 && stride > 0 && padding >= 0 && 2 * padding <= kernel, "max_pool: bad window");
    const c10::cuda::CUDAGuard guard(x.device());
    auto input = x.contiguous();
    const int64_t height = input.size(2), width = input.size(3);
    const int64_t out_h = (height + 2 * padding - kernel) / stride + 1;
    const int64_t out_w = (width + 2 * padding - kernel) / stride + 1;
    TORCH_CHECK(out_h > 0 && out_w > 0, "max_pool: input smaller than the window");
    auto output = torch::empty({input.size(0), input.size(1), out_h, out_w}, input.options());
    const int64_t total = output.numel();
    if (total == 0) return output;
    int64_t blocks = (total + kThreads - 1) / kThreads;
    if (blocks > 1048576) blocks = 1048576;
    max_pool_kernel<<<(unsigned)blocks, kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        input.data_ptr<float>(), output.data_ptr<float>(), total, (int)height, (int)width, (int)out_h, (int)out_w,
        (int)kernel, (int)stride, (int)padding);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return output;
}
"""

_ext = load_inline(
    name="kevin_bundled_cuda_12_maxpool2d",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["max_pool"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.max_pool(x, self.kernel_size, self.stride, self.padding)
