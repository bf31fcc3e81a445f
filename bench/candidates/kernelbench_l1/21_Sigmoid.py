"""Honest CUDA candidate for KernelBench level 1 problem 21 (Sigmoid), written by kevin's developers.

y = 1 / (1 + exp(-x)), vectorized float4 grid-stride loop.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = "torch::Tensor run(torch::Tensor x);"

CUDA = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

__device__ __forceinline__ float op(float v) { return 1.f / (1.f + expf(-v)); }

__global__ void kernel(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 v = x[i];
        v.x = op(v.x); v.y = op(v.y);
        v.z = op(v.z); v.w = op(v.w);
        y[i] = v;
    }
}

__global__ void tail(const float* __restrict__ x, float* __restrict__ y, int64_t start, int64_t n) {
    int64_t i = start + blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = op(x[i]);
}

torch::Tensor run(torch::Tensor x) {
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
                                               reinterpret_cast<float4*>(out.data_ptr<float>()), n4);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    if (n4 * 4 < n) {
        tail<<<1, 4, 0, stream>>>(input.data_ptr<float>(), out.data_ptr<float>(), n4 * 4, n);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return out;
}
"""

ext = load_inline(name="kb_l1_21", cpp_sources=CPP, cuda_sources=CUDA, functions=["run"],
                  extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return ext.run(x)
