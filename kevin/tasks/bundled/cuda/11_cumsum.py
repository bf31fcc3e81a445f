"""cuda candidate for tasks/11_cumsum.py: one block per row, walking it in 4096-element chunks: a coalesced
load into shared memory, a sequential scan of 8 elements per thread, a warp-shuffle scan of the
thread totals, and a running carry from chunk to chunk."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = "torch::Tensor row_cumsum(torch::Tensor x);"

CUDA_SOURCE = r"""
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

constexpr int kThreads = 512;
constexpr int kItems = 8;
constexpr int kChunk = kThreads * kItems;
constexpr int kWarps = kThreads / 32;

// One padding slot per 32 elements: thread t reads elements t * kItems + j, which would otherwise
// put 4 threads of a warp on every bank.
__device__ __forceinline__ int padded(int i) { return i + (i >> 5); }

__global__ void __launch_bounds__(kThreads) row_cumsum_kernel(const float* __restrict__ in, float* __restrict__ out,
                                                             int64_t cols) {
    __shared__ float chunk[kChunk + kChunk / 32];
    __shared__ float warp_totals[kWarps];
    const float* row = in + (int64_t)blockIdx.x * cols;
    float* dst = out + (int64_t)blockIdx.x * cols;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float carry = 0.0f;
    for (int64_t base = 0; base < cols; base += kChunk) {
        const int count = (int)((cols - base) < kChunk ? (cols - base) : kChunk);
        for (int i = threadIdx.x; i < kChunk; i += kThreads) chunk[padded(i)] = i < count ? row[base + i] : 0.0f;
        __syncthreads();

        float local[kItems];
        float running = 0.0f;
#pragma unroll
        for (int j = 0; j < kItems; ++j) {
            running += chunk[padded(threadIdx.x * kItems + j)];
            local[j] = running;
        }
        float inclusive = running;
#pragma unroll
        for (int offset = 1; offset < 32; offset <<= 1) {
            const float up = __shfl_up_sync(0xffffffffu, inclusive, offset);
            if (lane >= offset) inclusive += up;
        }
        if (lane == 31) warp_totals[warp] = inclusive;
        __syncthreads();
        if (warp == 0) {
            float total = lane < kWarps ? warp_totals[lane] : 0.0f;
#pragma unroll
            for (int offset = 1; offset < 32; offset <<= 1) {
                const float up = __shfl_up_sync(0xffffffffu, total, offset);
                if (lane >= offset) total += up;
            }
            if (lane < kWarps) warp_totals[lane] = total;
        }
        __syncthreads();
        const float before_warp = warp > 0 ? warp_totals[warp - 1] : 0.0f;
        const float prefix = carry + before_warp + (inclusive - running);
#pragma unroll
        for (int j = 0; j < kItems; ++j) chunk[padded(threadIdx.x * kItems + j)] = prefix + local[j];
        const float chunk_total = warp_totals[kWarps - 1];
        __syncthreads();
        for (int i = threadIdx.x; i < count; i += kThreads) dst[base + i] = chunk[padded(i)];
        carry += chunk_total;
        __syncthreads();  // the next chunk overwrites chunk[] and warp_totals[]
    }
}

torch::Tensor row_cumsum(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() == 2,
                "row_cumsum: expected a 2-D float32 CUDA tensor");
    const c10::cuda::CUDAGuard guard(x.device());
    auto input = x.contiguous();
    const int64_t rows = input.size(0), cols = input.size(1);
    auto output = torch::empty_like(input);
    if (rows == 0 || cols == 0) return output;
    TORCH_CHECK(rows <= 2147483647LL, "row_cumsum: too many rows for one grid dimension");
    row_cumsum_kernel<<<(unsigned)rows, kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        input.data_ptr<float>(), output.data_ptr<float>(), cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return output;
}
"""

_ext = load_inline(
    name="kevin_bundled_cuda_11_cumsum",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["row_cumsum"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.row_cumsum(x)
