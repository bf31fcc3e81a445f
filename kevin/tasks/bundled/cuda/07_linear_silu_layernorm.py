"""cuda candidate for tasks/07_linear_silu_layernorm.py: tiled GEMM against W^T with bias + SiLU fused into
its epilogue, then one block per row for the LayerNorm, in place."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = """
torch::Tensor linear_silu_layernorm(torch::Tensor x, torch::Tensor weight, torch::Tensor bias,
                                    torch::Tensor gamma, torch::Tensor beta, double eps);
"""

CUDA_SOURCE = r"""
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

constexpr int kTileM = 128, kTileN = 128, kTileK = 8, kThreads = 256, kMicro = 8;
constexpr int kRowThreads = 256;

// H (M x N) = silu(X (M x K) @ W^T + bias) where W is (N x K) row-major, as nn.Linear stores it.
// Both tiles are loaded along K (contiguous in X and in W) and stored transposed into padded
// shared memory; thread (tx, ty) owns rows ty + 16 r and columns tx + 16 c of the 128 x 128 tile.
__global__ void __launch_bounds__(kThreads) linear_silu_kernel(const float* __restrict__ X, const float* __restrict__ W,
                                                              const float* __restrict__ bias, float* __restrict__ H,
                                                              int M, int N, int K) {
    __shared__ float Xs[kTileK][kTileM + 4];
    __shared__ float Ws[kTileK][kTileN + 4];
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
            Xs[p][i] = (gi < M && gp < K) ? X[(int64_t)gi * K + gp] : 0.0f;
        }
#pragma unroll
        for (int l = 0; l < (kTileN * kTileK) / kThreads; ++l) {
            const int idx = tid + l * kThreads;
            const int p = idx % kTileK, j = idx / kTileK;
            const int gj = col0 + j, gp = k0 + p;
            Ws[p][j] = (gj < N && gp < K) ? W[(int64_t)gj * K + gp] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int p = 0; p < kTileK; ++p) {
            float a[kMicro], b[kMicro];
#pragma unroll
            for (int r = 0; r < kMicro; ++r) a[r] = Xs[p][ty + 16 * r];
#pragma unroll
            for (int c = 0; c < kMicro; ++c) b[c] = Ws[p][tx + 16 * c];
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
            if (gj < N) {
                const float h = acc[r][c] + bias[gj];
                H[(int64_t)gi * N + gj] = h / (1.0f + expf(-h));
            }
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

// In place: each element is read and then written by the same thread, so no __restrict__ on data.
__global__ void layer_norm_inplace_kernel(float* data, const float* __restrict__ gamma,
                                          const float* __restrict__ beta, int64_t cols, float eps) {
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
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) row[c] = (row[c] - mean) * rstd * gamma[c] + beta[c];
}

torch::Tensor linear_silu_layernorm(torch::Tensor x, torch::Tensor weight, torch::Tensor bias,
                                    torch::Tensor gamma, torch::Tensor beta, double eps) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda() && gamma.is_cuda() && beta.is_cuda(),
                "linear_silu_layernorm: expected CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32,
                "linear_silu_layernorm: expected float32");
    TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1), "linear_silu_layernorm: shapes");
    const c10::cuda::CUDAGuard guard(x.device());
    auto input = x.contiguous();
    auto w = weight.contiguous();
    auto b = bias.contiguous();
    auto g = gamma.contiguous();
    auto be = beta.contiguous();
    const int64_t m = input.size(0), k = input.size(1), n = w.size(0);
    TORCH_CHECK(b.numel() == n && g.numel() == n && be.numel() == n, "linear_silu_layernorm: parameter sizes");
    TORCH_CHECK(m < (1LL << 31) && n < (1LL << 31) && k < (1LL << 31), "linear_silu_layernorm: dimension too large");
    auto output = torch::empty({m, n}, input.options());
    if (m == 0 || n == 0) return output;
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    const dim3 grid((unsigned)((n + kTileN - 1) / kTileN), (unsigned)((m + kTileM - 1) / kTileM));
    linear_silu_kernel<<<grid, kThreads, 0, stream>>>(input.data_ptr<float>(), w.data_ptr<float>(),
                                                      b.data_ptr<float>(), output.data_ptr<float>(),
                                                      (int)m, (int)n, (int)k);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    layer_norm_inplace_kernel<<<(unsigned)m, kRowThreads, 0, stream>>>(output.data_ptr<float>(), g.data_ptr<float>(),
                                                                       be.data_ptr<float>(), n, (float)eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return output;
}
"""

_ext = load_inline(
    name="kevin_bundled_cuda_07_linear_silu_layernorm",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["linear_silu_layernorm"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        # Same modules, same order, same random calls as the reference: a seed gives the same parameters.
        self.linear = nn.Linear(in_features, out_features)
        self.norm = nn.LayerNorm(out_features, eps=1e-5)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.linear_silu_layernorm(x, self.linear.weight, self.linear.bias,
                                          self.norm.weight, self.norm.bias, self.norm.eps)
