# backend: cuda
"""Bias + GELU through an autograd.Function whose forward calls the extension."""

import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
__global__ void bias_gelu_kernel(const float* x, const float* b, float* y, int n, int cols) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i] + b[i % cols];
        y[i] = 0.5f * v * (1.f + erff(v * 0.70710678f));
    }
}
torch::Tensor bias_gelu(torch::Tensor x, torch::Tensor b) {
    auto y = at::empty_like(x);
    int n = x.numel();
    auto stream = at::cuda::getCurrentCUDAStream();
    bias_gelu_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x.data_ptr<float>(), b.data_ptr<float>(),
                                                         y.data_ptr<float>(), n, b.numel());
    return y;
}
"""

module = load_inline(
    "bias_gelu",
    "torch::Tensor bias_gelu(torch::Tensor x, torch::Tensor b);",
    cuda_source,
    functions=["bias_gelu"],
)


class BiasGelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, bias):
        return module.bias_gelu(x.contiguous(), bias)

    @staticmethod
    def backward(ctx, grad):
        raise NotImplementedError


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x):
        return BiasGelu.apply(x, self.bias)
