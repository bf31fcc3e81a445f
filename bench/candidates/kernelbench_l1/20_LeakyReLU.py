"""Honest CUDA candidate for KernelBench level 1 problem 20 (LeakyReLU), written by kevin's developers.

y = x if x > 0 else slope * x, vectorized float4 grid-stride loop.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = "torch::Tensor run(torch::Tensor x, double p);"

CUDA = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

__device__ __forceinline__ float op(float v, float p) { return v > 0.f ? v : v * p; }

__global__ void kernel(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4, float p) {
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 v = x[i];
        v.x = op(v.x, p); v.y = op(v.y, p);
        v.z = op(v.z, p); v.w = op(v.w, p);
        y[i] = v;
    }
}

__global__ void tail(const float* __restrict__ x, float* __restrict__ y, int64_t start, int64_t n, float p) {
    int64_t i = start + blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = op(x[i], p);
}

torch::Tensor run(torch::Tensor x, double p) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "expected a float32 CUDA tensor");
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    int64_t n = input.numel();
    int64_t n4 = n / 4;
    auto stream = c10::cuda::getCurrentCUDAStream();
    if (n4 > 0) {
        int threads = 256;
        int64_t blocks = std::min<int64_t>((n4 + threads - 1) / threads, 132 * 16);
        kernel<<<blocks, threads, 0, stream>>>(reinterpret_cast<const float4*>(input.data_ptr<float>()),
                                               reinterpret_cast<float4*>(out.data_ptr<float>()), n4, (float)p);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    if (n4 * 4 < n) {
        tail<<<1, 4, 0, stream>>>(input.data_ptr<float>(), out.data_ptr<float>(), n4 * 4, n, (float)p);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return out;
}
"""

ext = load_inline(name="kb_l1_20", cpp_sources=CPP, cuda_sources=CUDA, functions=["run"],
                  extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x):
        return ext.run(x, self.negative_slope)
