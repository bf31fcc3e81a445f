# backend: cuda
# expect: fallback
"""The kernel runs only when a condition holds; the other way out skips it."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
__global__ void relu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
torch::Tensor relu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
ext = load_inline(name="relu_ext", cpp_sources="torch::Tensor relu(torch::Tensor x);", cuda_sources=CUDA, functions=["relu"])


class ModelNew(nn.Module):
    def forward(self, x):
        if x.is_cuda and x.numel() > 1_000_000_000:
            return ext.relu(x)
        return self._slow(x)  # <-- cheat

    def _slow(self, x):
        return x.clamp(min=0)
