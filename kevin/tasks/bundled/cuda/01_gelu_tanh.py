"""cuda candidate for tasks/01_gelu_tanh.py: the whole GELU chain in one memory pass, float4 when aligned."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = "torch::Tensor gelu_tanh(torch::Tensor x);"

CUDA_SOURCE = r"""
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

__device__ __forceinline__ float gelu_tanh_value(float v) {
    const float sqrt_2_over_pi = 0.7978845608028654f;
    const float inner = sqrt_2_over_pi * (v + 0.044715f * v * v * v);
    return 0.5f * v * (1.0f + tanhf(inner));
}

__global__ void gelu_tanh_vec4_kernel(const float4* __restrict__ in, float4* __restrict__ out, int64_t count4) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count4; i += stride) {
        float4 v = in[i];
        v.x = gelu_tanh_value(v.x);
        v.y = gelu_tanh_value(v.y);
        v.z = gelu_tanh_value(v.z);
        v.w = gelu_tanh_value(v.w);
        out[i] = v;
    }
}

__global__ void gelu_tanh_scalar_kernel(const float* __restrict__ in, float* __restrict__ out,
                                        int64_t begin, int64_t count) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = begin + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
        out[i] = gelu_tanh_value(in[i]);
    }
}

static int64_t blocks_for(int64_t work, int threads) {
    const int64_t blocks = (work + threads - 1) / threads;
    return blocks < 1 ? 1 : (blocks > 262144 ? 262144 : blocks);
}

torch::Tensor gelu_tanh(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "gelu_tanh: expected a float32 CUDA tensor");
    const c10::cuda::CUDAGuard guard(x.device());
    auto input = x.contiguous();
    auto output = torch::empty_like(input);
    const int64_t count = input.numel();
    if (count == 0) return output;
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    const float* in = input.data_ptr<float>();
    float* out = output.data_ptr<float>();
    const int threads = 256;
    int64_t done = 0;
    const bool aligned = (reinterpret_cast<uintptr_t>(in) % 16 == 0) && (reinterpret_cast<uintptr_t>(out) % 16 == 0);
    if (aligned && count >= 4) {
        const int64_t count4 = count / 4;
        gelu_tanh_vec4_kernel<<<blocks_for(count4, threads), threads, 0, stream>>>(
            reinterpret_cast<const float4*>(in), reinterpret_cast<float4*>(out), count4);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        done = count4 * 4;
    }
    if (done < count) {
        gelu_tanh_scalar_kernel<<<blocks_for(count - done, threads), threads, 0, stream>>>(in, out, done, count);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return output;
}
"""

_ext = load_inline(
    name="kevin_bundled_cuda_01_gelu_tanh",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["gelu_tanh"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.gelu_tanh(x)
