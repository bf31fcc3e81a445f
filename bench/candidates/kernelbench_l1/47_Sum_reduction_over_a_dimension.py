"""Honest CUDA candidate for KernelBench level 1 problem 47 (sum over one dimension, keepdim), by kevin's developers.

The tensor is viewed as (outer, reduce, inner); one thread per (outer, inner) output walks the
reduced dimension, so a warp reads 32 consecutive floats per step (coalesced). Accumulates in
double so the result does not drift from the reference over long reductions.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = "torch::Tensor run(torch::Tensor x, int64_t dim);"

CUDA = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

__global__ void sum_middle(const float* __restrict__ x, float* __restrict__ y,
                           int64_t outer, int64_t reduce, int64_t inner) {
    int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (idx >= outer * inner) return;
    int64_t o = idx / inner, i = idx % inner;
    const float* p = x + o * reduce * inner + i;
    double acc = 0.0;
    #pragma unroll 8
    for (int64_t r = 0; r < reduce; ++r) acc += p[r * inner];
    y[idx] = (float)acc;
}

torch::Tensor run(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "expected a float32 CUDA tensor");
    auto input = x.contiguous();
    if (dim < 0) dim += input.dim();
    int64_t outer = 1, inner = 1, reduce = input.size(dim);
    for (int64_t d = 0; d < dim; ++d) outer *= input.size(d);
    for (int64_t d = dim + 1; d < input.dim(); ++d) inner *= input.size(d);
    auto sizes = input.sizes().vec();
    sizes[dim] = 1;
    auto out = torch::empty(sizes, input.options());
    int threads = 256;
    int64_t blocks = (outer * inner + threads - 1) / threads;
    sum_middle<<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        input.data_ptr<float>(), out.data_ptr<float>(), outer, reduce, inner);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

ext = load_inline(name="kb_l1_47", cpp_sources=CPP, cuda_sources=CUDA, functions=["run"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return ext.run(x, self.dim)
