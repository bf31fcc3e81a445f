"""cuda candidate for tasks/10_linear_residual_rmsnorm.py: tiled GEMM against W^T with the residual add fused
into its epilogue, then one block per row for the RMSNorm, in place."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = "torch::Tensor linear_residual_rmsnorm(torch::Tensor x, torch::Tensor proj, torch::Tensor weight, double eps);"

CUDA_SOURCE = r"""
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

constexpr int kTileM = 128, kTileN = 128, kTileK = 8, kThreads = 256, kMicro = 8;
constexpr int kRowThreads = 256;

// H (M x N) = X (M x N) @ W^T + X for a square W (N x N, row-major as nn.Linear stores it).
// Both tiles are loaded along the reduction dimension and stored transposed into padded shared
// memory; thread (tx, ty) owns rows ty + 16 r and columns tx + 16 c of the 128 x 128 tile.
__global__ void __launch_bounds__(kThreads) linear_residual_kernel(const float* __restrict__ X, const float* __restrict__ W,
                                                                  float* __restrict__ H, int M, int N) {
    __shared__ float Xs[kTileK][kTileM + 4];
    __shared__ float Ws[kTileK][kTileN + 4];
    const int K = N;
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
            if (gj < N) H[(int64_t)gi * N + gj] = acc[r][c] + X[(int64_t)gi * N + gj];
        }
    }
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

// In place over one row per block: each element is read and then written by the same thread.
__global__ void rms_norm_inplace_kernel(float* data, const float* __restrict__ weight, int64_t cols, float eps) {
    __shared__ float partial[33];
    float* row = data + (int64_t)blockIdx.x * cols;
    float acc = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) acc += row[c] * row[c];
    acc = warp_sum(acc);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) partial[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        acc = lane < (int)(blockDim.x >> 5) ? partial[lane] : 0.0f;
        acc = warp_sum(acc);
        if (lane == 0) partial[32] = acc;
    }
    __syncthreads();
    const float inv_rms = rsqrtf(partial[32] / (float)cols + eps);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) row[c] = row[c] * inv_rms * weight[c];
}

torch::Tensor linear_residual_rmsnorm(torch::Tensor x, torch::Tensor proj, torch::Tensor weight, double eps) {
    TORCH_CHECK(x.is_cuda() && proj.is_cuda() && weight.is_cuda(), "linear_residual_rmsnorm: expected CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && proj.scalar_type() == torch::kFloat32,
                "linear_residual_rmsnorm: expected float32");
    TORCH_CHECK(x.dim() == 2 && proj.dim() == 2 && proj.size(0) == x.size(1) && proj.size(1) == x.size(1),
                "linear_residual_rmsnorm: expected x (B, H) and a square (H, H) projection");
    const c10::cuda::CUDAGuard guard(x.device());
    auto input = x.contiguous();
    auto w = proj.contiguous();
    auto g = weight.contiguous();
    const int64_t m = input.size(0), n = input.size(1);
    TORCH_CHECK(g.numel() == n, "linear_residual_rmsnorm: weight size");
    TORCH_CHECK(m < (1LL << 31) && n < (1LL << 31), "linear_residual_rmsnorm: dimension too large");
    auto output = torch::empty_like(input);
    if (m == 0 || n == 0) return output;
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    const dim3 grid((unsigned)((n + kTileN - 1) / kTileN), (unsigned)((m + kTileM - 1) / kTileM));
    linear_residual_kernel<<<grid, kThreads, 0, stream>>>(input.data_ptr<float>(), w.data_ptr<float>(),
                                                          output.data_ptr<float>(), (int)m, (int)n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    rms_norm_inplace_kernel<<<(unsigned)m, kRowThreads, 0, stream>>>(output.data_ptr<float>(), g.data_ptr<float>(),
                                                                     n, (float)eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return output;
}
"""

_ext = load_inline(
    name="kevin_bundled_cuda_10_linear_residual_rmsnorm",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["linear_residual_rmsnorm"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        # Same parameters in the same order as the reference (projection first, then the norm weight).
        self.proj = nn.Linear(hidden, hidden, bias=False)
        self.weight = nn.Parameter(torch.rand(hidden) + 0.5)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.linear_residual_rmsnorm(x, self.proj.weight, self.weight, self.eps)
