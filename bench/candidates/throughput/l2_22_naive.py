"""L2_22 (22_Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish): h = clamp(2 * scale * (x @ W^T + b)); lse = logsumexp(h, 1); lse * mish(lse); naive GEMM kernel written here."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = "torch::Tensor gemm_clamp_lse_mish(torch::Tensor a, torch::Tensor b, torch::Tensor bias, double scale, double clamp_min, double clamp_max);"

cuda_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

__device__ __forceinline__ float epilogue(float v, int col, const float* __restrict__ b0, const float* __restrict__ b1, float s0, float s1, float s2) {
    float y = (v + b0[col]) * s0;
    y = y + y;
    return fminf(fmaxf(y, s1), s2);
}

constexpr int NAIVE_THREADS = 256;

// blockIdx.x walks the rows so the blocks resident at once share the same columns of B in L2.
__global__ void gemm_naive_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                                  int M, int N, int K, const float* __restrict__ b0, const float* __restrict__ b1, float s0, float s1, float s2) {
    const int row = blockIdx.x;
    const int col = blockIdx.y * NAIVE_THREADS + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[(int64_t)row * K + k] * B[(int64_t)col * K + k];
    C[(int64_t)row * N + col] = epilogue(acc, col, b0, b1, s0, s1, s2);
}

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

__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// One block per row: logsumexp over the row, then out = lse * mish(lse).
__global__ void lse_mish_rows_kernel(const float* __restrict__ h, float* __restrict__ out, int64_t cols) {
    const float* row = h + (int64_t)blockIdx.x * cols;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, row[j]);
    m = block_max(m);
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += expf(row[j] - m);
    s = block_sum(s);
    if (threadIdx.x == 0) {
        const float lse = m + logf(s);
        out[blockIdx.x] = lse * (lse * tanhf(softplus(lse)));
    }
}

torch::Tensor gemm_clamp_lse_mish(torch::Tensor a, torch::Tensor b, torch::Tensor bias, double scale, double clamp_min, double clamp_max) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), "gemm_clamp_lse_mish: expected CUDA tensors");
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32,
                "gemm_clamp_lse_mish: expected float32 tensors");
    TORCH_CHECK(b.dim() == 2, "gemm_clamp_lse_mish: the second operand must be 2-D");
    auto A = a.contiguous();
    auto B = b.contiguous();
    const int64_t K = A.size(-1);
    const int64_t M = A.numel() / K;
    const int64_t N = B.size(0);
    TORCH_CHECK(B.size(1) == K, "gemm_clamp_lse_mish: inner dimensions differ");
    auto out_sizes = A.sizes().vec();
    out_sizes.back() = N;
    auto C = torch::empty(out_sizes, A.options());
    auto bias_c = bias.contiguous();
    const float* b0 = bias_c.data_ptr<float>();
    const float* b1 = nullptr;
    const float s0 = (float)scale, s1 = (float)clamp_min, s2 = (float)clamp_max;
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    const dim3 grid((unsigned)M, (unsigned)((N + NAIVE_THREADS - 1) / NAIVE_THREADS));
    gemm_naive_kernel<<<grid, NAIVE_THREADS, 0, stream>>>(A.data_ptr<float>(), B.data_ptr<float>(), C.data_ptr<float>(),
                                                         (int)M, (int)N, (int)K, b0, b1, s0, s1, s2);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    auto out = torch::empty({M, 1}, A.options());
    lse_mish_rows_kernel<<<(unsigned)M, 512, 0, stream>>>(C.data_ptr<float>(), out.data_ptr<float>(), N);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

ext = load_inline(
    name="tp_l2_22_naive",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["gemm_clamp_lse_mish"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, scale_factor, clamp_min, clamp_max):
        super().__init__()
        self.matmul = nn.Linear(input_size, hidden_size)
        self.scale_factor = scale_factor
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x):
        return ext.gemm_clamp_lse_mish(x, self.matmul.weight, self.matmul.bias, self.scale_factor, self.clamp_min, self.clamp_max)
