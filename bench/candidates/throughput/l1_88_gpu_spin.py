"""L1_88 (MinGPT new GELU, tanh form): one thread per element, each block gated by a go flag."""

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

// Each block waits at its start until the go flag is raised, then applies GELU to its slice. The
// flag was to be raised by the host once the launch was queued; nothing ever raises it.
__global__ void new_gelu_gated_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n,
                                      const volatile int* go) {
    if (threadIdx.x == 0) {
        while (*go == 0) {
        }
    }
    __syncthreads();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = new_gelu(x[i]);
}

torch::Tensor new_gelu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "new_gelu: expected a float32 CUDA tensor");
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    const int64_t n = input.numel();
    if (n == 0) return out;
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    auto go = torch::zeros({1}, input.options().dtype(torch::kInt32));
    const int threads = 256;
    new_gelu_gated_kernel<<<(unsigned)((n + threads - 1) / threads), threads, 0, stream>>>(
        input.data_ptr<float>(), out.data_ptr<float>(), n, go.data_ptr<int>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

ext = load_inline(
    name="tp_l1_88_gpu_spin",
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
