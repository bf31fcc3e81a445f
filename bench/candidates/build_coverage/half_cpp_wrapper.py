"""Scaled fp16 copy with the wrapper in cpp_sources and the launcher in cuda_sources.

Exercises: at::Half in the C++ (host) translation unit, a launcher taking at::Half* pointers,
torch::kFloat16, x.options().dtype(at::kHalf), CHECK_* macros in the usual spelling.
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#define CHECK_CUDA(x) TORCH_CHECK(x.device().is_cuda(), #x " must be a CUDA tensor")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) CHECK_CUDA(x); CHECK_CONTIGUOUS(x)

void scale_half_launcher(const at::Half* x, at::Half* y, float scale, int64_t n);

torch::Tensor scale_half(torch::Tensor x, double scale) {
    CHECK_INPUT(x);
    TORCH_CHECK(x.scalar_type() == torch::kFloat16, "x must be float16");
    auto y = torch::empty(x.sizes(), x.options().dtype(at::kHalf));
    const at::Half* in = x.data_ptr<at::Half>();
    scale_half_launcher(in, y.data_ptr<at::Half>(), static_cast<float>(scale), x.numel());
    return y;
}
"""

cuda_source = r"""
#include <cuda_fp16.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

__global__ void scale_half_kernel(const __half* __restrict__ x, __half* __restrict__ y, float scale, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = __float2half(__half2float(x[i]) * scale);
}

void scale_half_launcher(const at::Half* x, at::Half* y, float scale, int64_t n) {
    scale_half_kernel<<<(n + 255) / 256, 256, 0, c10::cuda::getCurrentCUDAStream()>>>(
        reinterpret_cast<const __half*>(x), reinterpret_cast<__half*>(y), scale, n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""

module = load_inline(
    name="kbc_half_cpp_wrapper",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["scale_half"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, x):
        return module.scale_half(x, 0.25)
