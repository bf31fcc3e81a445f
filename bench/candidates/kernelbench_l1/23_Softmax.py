"""Honest CUDA candidate for KernelBench level 1 problem 23 (Softmax over dim 1), written by kevin's developers.

One block per row: one pass keeps a per-thread running (max, sum of exp) pair (online softmax),
a block reduction merges them, a second pass writes exp(x - max) / sum.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = "torch::Tensor run(torch::Tensor x);"

CUDA = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <cfloat>

constexpr int THREADS = 1024;

__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
    float mx = fmaxf(m, m2);
    s = (m == -FLT_MAX ? 0.f : s * expf(m - mx)) + (m2 == -FLT_MAX ? 0.f : s2 * expf(m2 - mx));
    m = mx;
}

__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
    const float* row = x + blockIdx.x * cols;
    float* out = y + blockIdx.x * cols;
    float m = -FLT_MAX, s = 0.f;
    for (int64_t j = threadIdx.x; j < cols; j += THREADS) {
        float v = row[j];
        if (v > m) { s = s * expf(m - v) + 1.f; m = v; } else { s += expf(v - m); }
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffff, m, offset);
        float s2 = __shfl_xor_sync(0xffffffff, s, offset);
        merge(m, s, m2, s2);
    }
    __shared__ float ms[THREADS / 32], ss[THREADS / 32];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) { ms[warp] = m; ss[warp] = s; }
    __syncthreads();
    if (warp == 0) {
        m = lane < THREADS / 32 ? ms[lane] : -FLT_MAX;
        s = lane < THREADS / 32 ? ss[lane] : 0.f;
        for (int offset = 16; offset > 0; offset >>= 1) {
            float m2 = __shfl_xor_sync(0xffffffff, m, offset);
            float s2 = __shfl_xor_sync(0xffffffff, s, offset);
            merge(m, s, m2, s2);
        }
        if (lane == 0) { ms[0] = m; ss[0] = s; }
    }
    __syncthreads();
    float row_max = ms[0], inv = 1.f / ss[0];
    for (int64_t j = threadIdx.x; j < cols; j += THREADS) out[j] = expf(row[j] - row_max) * inv;
}

torch::Tensor run(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.scalar_type() == torch::kFloat32, "expected a 2-D float32 CUDA tensor");
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    softmax_rows<<<input.size(0), THREADS, 0, c10::cuda::getCurrentCUDAStream()>>>(
        input.data_ptr<float>(), out.data_ptr<float>(), input.size(1));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

ext = load_inline(name="kb_l1_23", cpp_sources=CPP, cuda_sources=CUDA, functions=["run"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.run(x)
