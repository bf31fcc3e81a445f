"""cuda candidate for tasks/09_bmm_scale_softmax.py: batched tiled GEMM of Q against K (K read row-major, so
no transpose is materialized) with the scale fused into its epilogue, then an in-place row softmax."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = "torch::Tensor scores_softmax(torch::Tensor q, torch::Tensor k, double scale);"

CUDA_SOURCE = r"""
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

constexpr int kTileM = 128, kTileN = 128, kTileK = 8, kThreads = 256, kMicro = 8;
constexpr int kRowThreads = 256;

// S[b] (M x N) = scale * Q[b] (M x D) @ K[b]^T, with K[b] stored (N x D) row-major; blockIdx.z is the batch.
// Both tiles are loaded along D and stored transposed into padded shared memory; thread (tx, ty)
// owns rows ty + 16 r and columns tx + 16 c of the 128 x 128 tile.
__global__ void __launch_bounds__(kThreads) scores_kernel(const float* __restrict__ Q, const float* __restrict__ Kmat,
                                                         float* __restrict__ S, int M, int N, int D, float scale) {
    __shared__ float Qs[kTileK][kTileM + 4];
    __shared__ float Ks[kTileK][kTileN + 4];
    const int64_t batch = blockIdx.z;
    Q += batch * (int64_t)M * D;
    Kmat += batch * (int64_t)N * D;
    S += batch * (int64_t)M * N;
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int row0 = blockIdx.y * kTileM, col0 = blockIdx.x * kTileN;
    float acc[kMicro][kMicro];
#pragma unroll
    for (int r = 0; r < kMicro; ++r)
#pragma unroll
        for (int c = 0; c < kMicro; ++c) acc[r][c] = 0.0f;

    for (int k0 = 0; k0 < D; k0 += kTileK) {
#pragma unroll
        for (int l = 0; l < (kTileM * kTileK) / kThreads; ++l) {
            const int idx = tid + l * kThreads;
            const int p = idx % kTileK, i = idx / kTileK;
            const int gi = row0 + i, gp = k0 + p;
            Qs[p][i] = (gi < M && gp < D) ? Q[(int64_t)gi * D + gp] : 0.0f;
        }
#pragma unroll
        for (int l = 0; l < (kTileN * kTileK) / kThreads; ++l) {
            const int idx = tid + l * kThreads;
            const int p = idx % kTileK, j = idx / kTileK;
            const int gj = col0 + j, gp = k0 + p;
            Ks[p][j] = (gj < N && gp < D) ? Kmat[(int64_t)gj * D + gp] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int p = 0; p < kTileK; ++p) {
            float a[kMicro], b[kMicro];
#pragma unroll
            for (int r = 0; r < kMicro; ++r) a[r] = Qs[p][ty + 16 * r];
#pragma unroll
            for (int c = 0; c < kMicro; ++c) b[c] = Ks[p][tx + 16 * c];
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
            if (gj < N) S[(int64_t)gi * N + gj] = acc[r][c] * scale;
        }
    }
}

// Running softmax statistics: max m and sum of exp(x - m); merging rescales to the larger max.
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
    if (v == -INFINITY) return s;
    if (v > s.max) return {v, s.sum * expf(s.max - v) + 1.0f};
    return {s.max, s.sum + expf(v - s.max)};
}

__device__ __forceinline__ MaxSum warp_max_sum(MaxSum s) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        MaxSum other = {__shfl_xor_sync(0xffffffffu, s.max, offset), __shfl_xor_sync(0xffffffffu, s.sum, offset)};
        s = merge(s, other);
    }
    return s;
}

// In place over one row per block: each element is read and then written by the same thread.
__global__ void softmax_inplace_kernel(float* data, int64_t cols) {
    __shared__ float maxes[32];
    __shared__ float sums[32];
    float* row = data + (int64_t)blockIdx.x * cols;
    MaxSum s = {-INFINITY, 0.0f};
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s = push(s, row[c]);
    s = warp_max_sum(s);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) { maxes[warp] = s.max; sums[warp] = s.sum; }
    __syncthreads();
    if (warp == 0) {
        s = lane < (int)(blockDim.x >> 5) ? MaxSum{maxes[lane], sums[lane]} : MaxSum{-INFINITY, 0.0f};
        s = warp_max_sum(s);
        if (lane == 0) { maxes[0] = s.max; sums[0] = s.sum; }
    }
    __syncthreads();
    const float row_max = maxes[0];
    const float inv = 1.0f / sums[0];
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) row[c] = expf(row[c] - row_max) * inv;
}

torch::Tensor scores_softmax(torch::Tensor q, torch::Tensor k, double scale) {
    TORCH_CHECK(q.is_cuda() && k.is_cuda(), "scores_softmax: expected CUDA tensors");
    TORCH_CHECK(q.scalar_type() == torch::kFloat32 && k.scalar_type() == torch::kFloat32, "scores_softmax: expected float32");
    TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && q.size(0) == k.size(0) && q.size(2) == k.size(2),
                "scores_softmax: expected q (B, M, D) and k (B, N, D)");
    const c10::cuda::CUDAGuard guard(q.device());
    auto qc = q.contiguous();
    auto kc = k.contiguous();
    const int64_t batch = qc.size(0), m = qc.size(1), d = qc.size(2), n = kc.size(1);
    TORCH_CHECK(batch <= 65535 && m < (1LL << 31) && n < (1LL << 31) && d < (1LL << 31), "scores_softmax: too large");
    auto output = torch::empty({batch, m, n}, qc.options());
    if (batch == 0 || m == 0 || n == 0) return output;
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    const dim3 grid((unsigned)((n + kTileN - 1) / kTileN), (unsigned)((m + kTileM - 1) / kTileM), (unsigned)batch);
    scores_kernel<<<grid, kThreads, 0, stream>>>(qc.data_ptr<float>(), kc.data_ptr<float>(), output.data_ptr<float>(),
                                                 (int)m, (int)n, (int)d, (float)scale);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    const int64_t rows = batch * m;
    TORCH_CHECK(rows <= 2147483647LL, "scores_softmax: too many rows for one grid dimension");
    softmax_inplace_kernel<<<(unsigned)rows, kRowThreads, 0, stream>>>(output.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return output;
}
"""

_ext = load_inline(
    name="kevin_bundled_cuda_09_bmm_scale_softmax",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["scores_softmax"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, head_dim: int):
        super().__init__()
        self.scale = head_dim ** -0.5

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return _ext.scores_softmax(q, k, self.scale)
