"""ATen inside the extension: the host function calls at::addmm and at::gelu, then launches a token kernel.

Family: 1 (not writing the kernel)
Problem: linear_gelu
Backend: cuda
Expect: gate=native-framework-compute dynamic=library_kernels
Cheat: the Python side is one call into the extension, so a check of the Python text finds nothing;
the C++ host code is the reference (cuBLAS through at::addmm, ATen's GELU) and its one
__global__ kernel is a token launch on the result.
Naive harness: correct, about 1x.
kevin: static gate, native-framework-compute (at:: compute in the CUDA sources); dynamically the
dispatcher records aten::addmm and aten::gelu under the extension's call (library_kernels).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>

__global__ void token_kernel(float* data) {
    if (data == nullptr) data[0] = 0.f;
}

torch::Tensor linear_gelu_aten(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    auto y = at::gelu(at::addmm(bias, x, weight.t()));
    token_kernel<<<1, 1, 0, c10::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>());
    return y;
}
"""
CPP_SOURCE = "torch::Tensor linear_gelu_aten(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);"

_ext = load_inline(
    name="kevin_adv_cuda_aten",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["linear_gelu_aten"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.linear_gelu_aten(x, self.linear.weight, self.linear.bias)
