"""cuda candidate for generated task L0_2 (seed 0, attempt 1): x @ b -> LayerNorm -> + bias -> Mish.

A shared-memory tiled SGEMM (128x128 block tile, 8x8 outputs per thread, fp32 FMA accumulation),
then one block per row that normalizes, adds the bias and applies Mish in place: the matmul's
output is written once and read once, where the reference makes four passes over it."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = """
torch::Tensor matmul_layernorm_bias_mish(torch::Tensor x, torch::Tensor b, torch::Tensor gamma,
                                         torch::Tensor beta, torch::Tensor bias, double eps);
"""

CUDA_SOURCE = r"""
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

constexpr int kTileM = 128, kTileN = 128, kTileK = 8, kThreads = 256, kMicro = 8;
constexpr int kRowThreads = 256;

// C (M x N) = A (M x K) @ B (K x N), all row-major. Thread (tx, ty) of the 16 x 16 grid owns rows
// ty + 16 r and columns tx + 16 c of the block tile, so shared-memory reads in a warp hit distinct
// banks (or broadcast) and the global stores are coalesced; the +4 padding keeps the transposing
// store of the A tile free of bank conflicts.
__global__ void __launch_bounds__(kThreads) matmul_kernel(const float* __restrict__ A, const float* __restrict__ B,
                                                         float* __restrict__ C, int M, int N, int K) {
    __shared__ float As[kTileK][kTileM + 4];
    __shared__ float Bs[kTileK][kTileN + 4];
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int row0 = blockIdx.y * kTileM, col0 = blockIdx.x * kTileN;
    float acc[kMicro][kMicro];
#pragma unroll
    for (int r = 0; r < kMicro; ++r)
#pragma unroll
        for (int c = 0; c < kMicro; ++c) acc[r][c] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += kTileK) {
#pragma unroll
        for (int l = 0; l < (kTileM * kTileK) / kThreads; ++l) {
            const int idx = tid + l * kThreads;
            const int p = idx % kTileK, i = idx / kTileK;
            const int gi = row0 + i, gp = k0 + p;
            As[p][i] = (gi < M && gp < K) ? A[(int64_t)gi * K + gp] : 0.0f;
        }
#pragma unroll
        for (int l = 0; l < (kTileN * kTileK) / kThreads; ++l) {
            const int idx = tid + l * kThreads;
            const int j = idx % kTileN, p = idx / kTileN;
            const int gj = col0 + j, gp = k0 + p;
            Bs[p][j] = (gj < N && gp < K) ? B[(int64_t)gp * N + gj] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int p = 0; p < kTileK; ++p) {
            float a[kMicro], b[kMicro];
#pragma unroll
            for (int r = 0; r < kMicro; ++r) a[r] = As[p][ty + 16 * r];
#pragma unroll
            for (int c = 0; c < kMicro; ++c) b[c] = Bs[p][tx + 16 * c];
#pragma unroll
            for (int r = 0; r < kMicro; ++r)
#pragma unroll
                for (int c = 0; c < kMicro; ++c) acc[r][c] = fmaf(a[r], b[c], acc[r][c]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < kMicro; ++r) {
        const int gi = row0 + ty + 16 * r;
        if (gi >= M) continue;
#pragma unroll
        for (int c = 0; c < kMicro; ++c) {
            const int gj = col0 + tx + 16 * c;
            if (gj < N) C[(int64_t)gi * N + gj] = acc[r][c];
        }
    }
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

// Sum over the block; every thread gets the total. Safe to call repeatedly (leading barrier).
__device__ float block_sum(float v) {
    __shared__ float partial[33];
    __syncthreads();
    v = warp_sum(v);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (int)(blockDim.x >> 5) ? partial[lane] : 0.0f;
        v = warp_sum(v);
        if (lane == 0) partial[32] = v;
    }
    __syncthreads();
    return partial[32];
}

// mish(v) = v * tanh(softplus(v)), written as torch's CUDA kernel writes it.
__device__ __forceinline__ float mish(float v) { return v * tanhf(log1pf(expf(v))); }

// In place, one block per row: LayerNorm (biased variance, as torch), then + bias, then Mish.
// Each element is read and then written by the same thread, so no __restrict__ on data.
__global__ void layernorm_bias_mish_kernel(float* data, const float* __restrict__ gamma,
                                           const float* __restrict__ beta, const float* __restrict__ bias,
                                           int64_t cols, float eps) {
    float* row = data + (int64_t)blockIdx.x * cols;
    float acc = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) acc += row[c];
    const float mean = block_sum(acc) / (float)cols;
    acc = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        const float d = row[c] - mean;
        acc += d * d;
    }
    const float rstd = rsqrtf(block_sum(acc) / (float)cols + eps);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        const float normed = (row[c] - mean) * rstd * gamma[c] + beta[c];
        row[c] = mish(normed + bias[c]);
    }
}

torch::Tensor matmul_layernorm_bias_mish(torch::Tensor x, torch::Tensor b, torch::Tensor gamma,
                                         torch::Tensor beta, torch::Tensor bias, double eps) {
    TORCH_CHECK(x.is_cuda() && b.is_cuda() && gamma.is_cuda() && beta.is_cuda() && bias.is_cuda(),
                "matmul_layernorm_bias_mish: expected CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32,
                "matmul_layernorm_bias_mish: expected float32");
    TORCH_CHECK(x.dim() == 2 && b.dim() == 2 && x.size(1) == b.size(0), "matmul_layernorm_bias_mish: shapes");
    const c10::cuda::CUDAGuard guard(x.device());
    auto lhs = x.contiguous();
    auto rhs = b.contiguous();
    auto g = gamma.contiguous();
    auto be = beta.contiguous();
    auto bi = bias.contiguous();
    const int64_t m = lhs.size(0), k = lhs.size(1), n = rhs.size(1);
    TORCH_CHECK(g.numel() == n && be.numel() == n && bi.numel() == n, "matmul_layernorm_bias_mish: parameter sizes");
    TORCH_CHECK(m < (1LL << 31) && n < (1LL << 31) && k < (1LL << 31), "matmul_layernorm_bias_mish: too large");
    auto output = torch::empty({m, n}, lhs.options());
    if (m == 0 || n == 0) return output;
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    const dim3 grid((unsigned)((n + kTileN - 1) / kTileN), (unsigned)((m + kTileM - 1) / kTileM));
    matmul_kernel<<<grid, kThreads, 0, stream>>>(lhs.data_ptr<float>(), rhs.data_ptr<float>(),
                                                 output.data_ptr<float>(), (int)m, (int)n, (int)k);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    layernorm_bias_mish_kernel<<<(unsigned)m, kRowThreads, 0, stream>>>(
        output.data_ptr<float>(), g.data_ptr<float>(), be.data_ptr<float>(), bi.data_ptr<float>(), n, (float)eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return output;
}
"""

_ext = load_inline(
    name="kevin_generated_cuda_L0_2",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["matmul_layernorm_bias_mish"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        # Same modules, same order, same random calls as the task's Model: a seed gives the same parameters.
        self.op1 = nn.LayerNorm(2048)
        self.op2 = nn.Parameter(torch.randn(2048,))

    def forward(self, x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return _ext.matmul_layernorm_bias_mish(x, b, self.op1.weight, self.op1.bias, self.op2, self.op1.eps)
