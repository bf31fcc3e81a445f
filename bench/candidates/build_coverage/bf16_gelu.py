"""GELU (tanh) on a bf16 tensor: c10::BFloat16 storage as __nv_bfloat16, computed in float.

Exercises: data_ptr<c10::BFloat16>, __nv_bfloat16 / __nv_bfloat162 from cuda_bf16.h,
__bfloat1622float2 / __floats2bfloat162_rn, a dtype check against torch::kBFloat16.
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_bf16.h>
#include <ATen/cuda/CUDAContext.h>

__device__ __forceinline__ float gelu(float v) {
    return 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
}

__global__ void gelu_bf16_kernel(const __nv_bfloat162* __restrict__ x, __nv_bfloat162* __restrict__ y,
                                 const __nv_bfloat16* __restrict__ xs, __nv_bfloat16* __restrict__ ys, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (2 * i + 1 < n) {
        float2 v = __bfloat1622float2(x[i]);
        y[i] = __floats2bfloat162_rn(gelu(v.x), gelu(v.y));
    } else if (2 * i < n) {
        ys[2 * i] = __float2bfloat16(gelu(__bfloat162float(xs[2 * i])));
    }
}

torch::Tensor gelu_bf16(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cuda(), "x must be on the GPU");
    TORCH_CHECK(x.dtype() == torch::kBFloat16, "x must be bfloat16");
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    const int64_t n = input.numel();
    const auto* in = reinterpret_cast<const __nv_bfloat16*>(input.data_ptr<c10::BFloat16>());
    auto* o = reinterpret_cast<__nv_bfloat16*>(out.data_ptr<c10::BFloat16>());
    const int64_t threads = 256, pairs = (n + 1) / 2;
    gelu_bf16_kernel<<<(pairs + threads - 1) / threads, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        reinterpret_cast<const __nv_bfloat162*>(in), reinterpret_cast<__nv_bfloat162*>(o), in, o, n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

module = load_inline(
    name="kbc_bf16_gelu",
    cpp_sources="torch::Tensor gelu_bf16(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["gelu_bf16"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, x):
        return module.gelu_bf16(x)
