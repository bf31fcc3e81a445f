# backend: cuda
"""GEMM + bias + ReLU in one kernel. The reference computes torch.relu(torch.matmul(x, w.T) + b) and
uses F.linear; this docstring mentions them, and so do the comments below, which must not matter."""

import torch
import torch.nn as nn
import torch.utils.cpp_extension as cpp_ext

TILE = 16

# A naive version would be: return F.relu(x @ self.linear.weight.t() + self.linear.bias)
CUDA_SRC = f"""
#include <torch/extension.h>
// not torch::matmul: a tiled kernel of our own (at::matmul would be cheating)
#define TILE {TILE}
__global__ void gemm_bias_relu_kernel(const float* x, const float* w, const float* b, float* y,
                                      int M, int N, int K) {{
    __shared__ float xs[TILE][TILE];
    __shared__ float ws[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += TILE) {{
        xs[threadIdx.y][threadIdx.x] = (row < M && k0 + threadIdx.x < K) ? x[row * K + k0 + threadIdx.x] : 0.f;
        ws[threadIdx.y][threadIdx.x] = (col < N && k0 + threadIdx.y < K) ? w[col * K + k0 + threadIdx.y] : 0.f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += xs[threadIdx.y][k] * ws[k][threadIdx.x];
        __syncthreads();
    }}
    if (row < M && col < N) y[row * N + col] = fmaxf(acc + b[col], 0.f);
}}

torch::Tensor gemm_bias_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {{
    const int M = x.size(0), K = x.size(1), N = w.size(0);
    auto y = torch::empty({{M, N}}, x.options());
    dim3 block(TILE, TILE), grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    gemm_bias_relu_kernel<<<grid, block>>>(x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(),
                                          y.data_ptr<float>(), M, N, K);
    return y;
}}
"""

_fused = cpp_ext.load_inline(
    name="gemm_bias_relu",
    cpp_sources="torch::Tensor gemm_bias_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b);",
    cuda_sources=CUDA_SRC,
    functions=["gemm_bias_relu"],
)


class ModelNew(nn.Module):
    """Owns its weights through nn.Linear (so a seed gives the reference's parameters) but never
    calls it: `self.linear(x)` would be torch.matmul in disguise."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = x.contiguous()
        return self._launch(x, self.linear.weight, self.linear.bias)

    def _launch(self, x, weight, bias):
        """Helper between forward and the extension."""
        return self._gemm(x.view(-1, x.size(-1)), weight.contiguous(), bias).view(*x.shape[:-1], -1)

    def _gemm(self, x2d, weight, bias):
        if x2d.numel() == 0 or x2d.size(0) < 1:
            raise ValueError("empty input")
        return _fused.gemm_bias_relu(x2d, weight, bias)
