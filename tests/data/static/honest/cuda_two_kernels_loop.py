# backend: cuda
"""Row-wise LayerNorm then scale, one kernel each, in a loop over stages; a ternary picks the eps."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_decl = """
torch::Tensor layernorm(torch::Tensor x, double eps);
torch::Tensor scale(torch::Tensor x, double s);
"""

cuda_code = """
#include <torch/extension.h>
__global__ void layernorm_kernel(const float* x, float* y, int cols, float eps) {
    extern __shared__ float buf[];
    const float* row = x + blockIdx.x * cols;
    float s = 0.f, ss = 0.f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) { s += row[j]; ss += row[j] * row[j]; }
    buf[threadIdx.x] = s; buf[blockDim.x + threadIdx.x] = ss;
    __syncthreads();
    for (int o = blockDim.x / 2; o > 0; o >>= 1) {
        if (threadIdx.x < o) { buf[threadIdx.x] += buf[threadIdx.x + o]; buf[blockDim.x + threadIdx.x] += buf[blockDim.x + threadIdx.x + o]; }
        __syncthreads();
    }
    float mean = buf[0] / cols, var = buf[blockDim.x] / cols - mean * mean;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) y[blockIdx.x * cols + j] = (row[j] - mean) * rsqrtf(var + eps);
}
__global__ void scale_kernel(float* y, int n, float s) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] *= s;
}
torch::Tensor layernorm(torch::Tensor x, double eps) {
    auto y = torch::empty_like(x);
    int rows = x.size(0), cols = x.size(1);
    layernorm_kernel<<<rows, 256, 2 * 256 * sizeof(float)>>>(x.data_ptr<float>(), y.data_ptr<float>(), cols, eps);
    return y;
}
torch::Tensor scale(torch::Tensor x, double s) {
    int n = x.numel();
    scale_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), n, s);
    return x;
}
"""

kernels = load_inline(name="ln_scale", cpp_sources=cpp_decl, cuda_sources=cuda_code, functions=["layernorm", "scale"])


class ModelNew(nn.Module):
    def __init__(self, scales=(0.5, 2.0), eps=None):
        super().__init__()
        self.scales = list(scales)
        self.eps = 1e-5 if eps is None else eps

    def forward(self, x):
        rows = x.numel() // x.shape[-1]
        y = kernels.layernorm(x.reshape(rows, -1).contiguous(), self.eps if self.eps > 0 else 1e-5)
        for s in self.scales:
            y = kernels.scale(y, float(s))
        return y.reshape(x.shape)
