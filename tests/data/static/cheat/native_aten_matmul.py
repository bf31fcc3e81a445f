# backend: cuda
# expect: native-framework-compute
"""The extension's host code calls torch::matmul; the __global__ kernel is decoration."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
__global__ void relu_kernel(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = y[i] > 0.f ? y[i] : 0.f;
}
torch::Tensor gemm_relu(torch::Tensor x, torch::Tensor w) {
    auto y = torch::matmul(x, w.t()).contiguous();
    int n = y.numel();
    relu_kernel<<<(n + 255) / 256, 256>>>(y.data_ptr<float>(), n);
    return y;
}
"""
ext = load_inline(name="gemm_relu", cpp_sources="torch::Tensor gemm_relu(torch::Tensor x, torch::Tensor w);",  # <-- cheat
                  cuda_sources=CUDA, functions=["gemm_relu"])


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.w = nn.Parameter(torch.randn(n, n))

    def forward(self, x):
        return ext.gemm_relu(x, self.w)
