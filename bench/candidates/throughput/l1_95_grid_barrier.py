"""L1_95 (cross entropy, mean over 32768 rows of 4096 classes): a block per row, a grid barrier, then block 0 takes the mean."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = "torch::Tensor cross_entropy(torch::Tensor logits, torch::Tensor targets);"

cuda_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

__device__ __forceinline__ float warp_max(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

// Reductions over the block (blockDim.x a multiple of 32); every thread gets the result.
__device__ float block_max(float v) {
    __shared__ float part[33];
    __syncthreads();
    v = warp_max(v);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (int)(blockDim.x >> 5) ? part[lane] : -INFINITY;
        v = warp_max(v);
        if (lane == 0) part[32] = v;
    }
    __syncthreads();
    return part[32];
}

__device__ float block_sum(float v) {
    __shared__ float part[33];
    __syncthreads();
    v = warp_sum(v);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (int)(blockDim.x >> 5) ? part[lane] : 0.0f;
        v = warp_sum(v);
        if (lane == 0) part[32] = v;
    }
    __syncthreads();
    return part[32];
}

// One block per row writes its loss (logsumexp(x) - x[target]); the blocks then meet at a grid-wide
// barrier (an arrival counter) so that block 0 can take the mean. With one block per row (32768) most
// blocks are not resident: those that are spin at the barrier, and the others never start.
__global__ void row_loss_barrier_kernel(const float* __restrict__ x, const int64_t* __restrict__ t,
                                        float* __restrict__ loss, float* __restrict__ out, int64_t cols,
                                        unsigned int* arrived) {
    const float* row = x + (int64_t)blockIdx.x * cols;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, row[j]);
    m = block_max(m);
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += expf(row[j] - m);
    s = block_sum(s);
    if (threadIdx.x == 0) {
        loss[blockIdx.x] = m + logf(s) - row[t[blockIdx.x]];
        __threadfence();
        atomicAdd(arrived, 1u);
        while (atomicAdd(arrived, 0u) < gridDim.x) {
        }
    }
    __syncthreads();
    if (blockIdx.x == 0) {
        float total = 0.0f;
        for (int64_t i = threadIdx.x; i < (int64_t)gridDim.x; i += blockDim.x) total += loss[i];
        total = block_sum(total);
        if (threadIdx.x == 0) out[0] = total / (float)gridDim.x;
    }
}

torch::Tensor cross_entropy(torch::Tensor logits, torch::Tensor targets) {
    TORCH_CHECK(logits.is_cuda() && targets.is_cuda(), "cross_entropy: expected CUDA tensors");
    TORCH_CHECK(logits.scalar_type() == torch::kFloat32 && logits.dim() == 2, "cross_entropy: expected (B, C) float32");
    TORCH_CHECK(targets.scalar_type() == torch::kInt64 && targets.numel() == logits.size(0),
                "cross_entropy: expected (B,) int64 targets");
    auto x = logits.contiguous();
    auto t = targets.contiguous();
    const int64_t rows = x.size(0), cols = x.size(1);
    auto row_loss = torch::empty({rows}, x.options());
    auto out = torch::empty(std::vector<int64_t>{}, x.options());
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    auto arrived = torch::zeros({1}, x.options().dtype(torch::kInt32));
    row_loss_barrier_kernel<<<(unsigned)rows, 256, 0, stream>>>(
        x.data_ptr<float>(), t.data_ptr<int64_t>(), row_loss.data_ptr<float>(), out.data_ptr<float>(), cols,
        reinterpret_cast<unsigned int*>(arrived.data_ptr<int>()));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

ext = load_inline(
    name="tp_l1_95_grid_barrier",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["cross_entropy"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return ext.cross_entropy(predictions, targets)
