"""cuda candidate for tasks/03_softmax.py: one block per row; an online (max, sum) pass, then a normalize pass."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = "torch::Tensor row_softmax(torch::Tensor x);"

CUDA_SOURCE = r"""
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

constexpr int kThreads = 256;

// Running softmax statistics: max m and sum of exp(x - m). Merging two of them rescales the smaller max.
struct MaxSum {
    float max;
    float sum;
};

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
    const float m = fmaxf(a.max, b.max);
    if (m == -INFINITY) return {m, 0.0f};
    return {m, a.sum * expf(a.max - m) + b.sum * expf(b.max - m)};
}

__device__ __forceinline__ MaxSum push(MaxSum s, float v) {
    if (v == -INFINITY) return s;  // contributes exp(-inf) = 0; avoids exp(-inf - -inf) = NaN
    if (v > s.max) return {v, s.sum * expf(s.max - v) + 1.0f};
    return {s.max, s.sum + expf(v - s.max)};
}

__device__ MaxSum block_max_sum(MaxSum s) {
    __shared__ float maxes[32];
    __shared__ float sums[32];
    for (int offset = 16; offset > 0; offset >>= 1) {
        MaxSum other = {__shfl_xor_sync(0xffffffffu, s.max, offset), __shfl_xor_sync(0xffffffffu, s.sum, offset)};
        s = merge(s, other);
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) { maxes[warp] = s.max; sums[warp] = s.sum; }
    __syncthreads();
    if (warp == 0) {
        const int warps = blockDim.x >> 5;
        s = lane < warps ? MaxSum{maxes[lane], sums[lane]} : MaxSum{-INFINITY, 0.0f};
        for (int offset = 16; offset > 0; offset >>= 1) {
            MaxSum other = {__shfl_xor_sync(0xffffffffu, s.max, offset), __shfl_xor_sync(0xffffffffu, s.sum, offset)};
            s = merge(s, other);
        }
        if (lane == 0) { maxes[0] = s.max; sums[0] = s.sum; }
    }
    __syncthreads();
    return {maxes[0], sums[0]};
}

__global__ void row_softmax_kernel(const float* __restrict__ in, float* __restrict__ out, int64_t cols, bool vec4) {
    const float* row = in + (int64_t)blockIdx.x * cols;
    float* dst = out + (int64_t)blockIdx.x * cols;
    MaxSum s = {-INFINITY, 0.0f};
    if (vec4) {
        const float4* row4 = reinterpret_cast<const float4*>(row);
        for (int64_t c = threadIdx.x; c < cols / 4; c += blockDim.x) {
            const float4 v = row4[c];
            s = push(push(push(push(s, v.x), v.y), v.z), v.w);
        }
    } else {
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s = push(s, row[c]);
    }
    s = block_max_sum(s);
    const float inv = 1.0f / s.sum;
    if (vec4) {
        const float4* row4 = reinterpret_cast<const float4*>(row);
        float4* dst4 = reinterpret_cast<float4*>(dst);
        for (int64_t c = threadIdx.x; c < cols / 4; c += blockDim.x) {
            float4 v = row4[c];
            v.x = expf(v.x - s.max) * inv;
            v.y = expf(v.y - s.max) * inv;
            v.z = expf(v.z - s.max) * inv;
            v.w = expf(v.w - s.max) * inv;
            dst4[c] = v;
        }
    } else {
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) dst[c] = expf(row[c] - s.max) * inv;
    }
}

torch::Tensor row_softmax(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() == 2,
                "row_softmax: expected a 2-D float32 CUDA tensor");
    const c10::cuda::CUDAGuard guard(x.device());
    auto input = x.contiguous();
    const int64_t rows = input.size(0), cols = input.size(1);
    auto output = torch::empty_like(input);
    if (rows == 0 || cols == 0) return output;
    TORCH_CHECK(rows <= 2147483647LL, "row_softmax: too many rows for one grid dimension");
    const float* in = input.data_ptr<float>();
    float* out = output.data_ptr<float>();
    const bool vec4 = (cols % 4 == 0) && (reinterpret_cast<uintptr_t>(in) % 16 == 0)
                      && (reinterpret_cast<uintptr_t>(out) % 16 == 0);
    row_softmax_kernel<<<(unsigned)rows, kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(in, out, cols, vec4);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return output;
}
"""

_ext = load_inline(
    name="kevin_bundled_cuda_03_softmax",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["row_softmax"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.row_softmax(x)
