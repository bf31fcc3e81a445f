# Written by kevin optimize: a drop-in ModelNew for Model in 88_MinGPTNewGelu.py (task L1_88).
# Search verdict: passed, 9.525x over PyTorch eager (trajectory 3, turn 3).
# Re-verified, fresh seed: passed, 8.789x.
# Command: kevin optimize /work/main/.kb/level1/88_MinGPTNewGelu.py --replay bench/results/kernelbench_replay/records.jsonl --trajectories 4 --turns 3 --backend cuda --out /root/out/s/search/optimize_L1_88
# Same constructor arguments and forward inputs as Model.

"""L1_88 (MinGPT new GELU, tanh form): float4 grid-stride loop."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = "torch::Tensor new_gelu_forward(torch::Tensor x);"

cuda_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

__device__ __forceinline__ float new_gelu(float x) {
    const float k = 0.7978845608028654f;  // sqrt(2 / pi)
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

__global__ void new_gelu_vec4_kernel(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 v = x[i];
        v.x = new_gelu(v.x);
        v.y = new_gelu(v.y);
        v.z = new_gelu(v.z);
        v.w = new_gelu(v.w);
        y[i] = v;
    }
}

__global__ void new_gelu_tail_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t begin, int64_t n) {
    const int64_t i = begin + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = new_gelu(x[i]);
}

torch::Tensor new_gelu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "new_gelu: expected a float32 CUDA tensor");
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    const int64_t n = input.numel();
    if (n == 0) return out;
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    const int threads = 256;
    const int64_t n4 = n / 4;
    if (n4 > 0) {
        int64_t blocks = (n4 + threads - 1) / threads;
        if (blocks > 65536) blocks = 65536;
        new_gelu_vec4_kernel<<<(unsigned)blocks, threads, 0, stream>>>(
            reinterpret_cast<const float4*>(input.data_ptr<float>()), reinterpret_cast<float4*>(out.data_ptr<float>()), n4);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    if (n4 * 4 < n) {
        new_gelu_tail_kernel<<<1, threads, 0, stream>>>(input.data_ptr<float>(), out.data_ptr<float>(), n4 * 4, n);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return out;
}
"""

ext = load_inline(
    name="tp_l1_88_vec4",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["new_gelu_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.new_gelu_forward(x)