"""cuda candidate for generated task L0_92 (seed 0, attempt 93):
Linear -> clamp(-1, 1) -> + bias -> ReLU -> HardSwish -> softmax over the features.

A tiled SGEMM against W^T (128x128 block tile, 8x8 outputs per thread, fp32 FMA accumulation) with
the Linear's bias and the four elementwise ops fused into its epilogue, then one block per row for
the softmax, in place (one pass for max and sum together, one to write)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = """
torch::Tensor linear_hardswish_softmax(torch::Tensor x, torch::Tensor weight, torch::Tensor linear_bias,
                                       torch::Tensor bias);
"""

CUDA_SOURCE = r"""
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

constexpr int kTileM = 128, kTileN = 128, kTileK = 8, kThreads = 256, kMicro = 8;
constexpr int kRowThreads = 256;

// The elementwise ops in the reference's order, each rounded to fp32 as its separate kernels do.
__device__ __forceinline__ float epilogue(float v, float linear_bias, float bias) {
    v = v + linear_bias;
    v = fminf(fmaxf(v, -1.0f), 1.0f);
    v = v + bias;
    v = fmaxf(v, 0.0f);                                  // ReLU
    return v * fminf(fmaxf(v + 3.0f, 0.0f), 6.0f) / 6.0f;  // HardSwish, as torch writes it
}

// H (M x N) = epilogue(X (M x K) @ W^T) where W is (N x K) row-major, as nn.Linear stores it.
// Both tiles are loaded along K (contiguous in X and in W) and stored transposed into padded
// shared memory; thread (tx, ty) owns rows ty + 16 r and columns tx + 16 c of the 128 x 128 tile.
__global__ void __launch_bounds__(kThreads) linear_epilogue_kernel(const float* __restrict__ X, const float* __restrict__ W,
                                                                  const float* __restrict__ linear_bias,
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
            if (gj < N) H[(int64_t)gi * N + gj] = epilogue(acc[r][c], linear_bias[gj], bias[gj]);
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

torch::Tensor linear_hardswish_softmax(torch::Tensor x, torch::Tensor weight, torch::Tensor linear_bias,
                                       torch::Tensor bias) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && linear_bias.is_cuda() && bias.is_cuda(),
                "linear_hardswish_softmax: expected CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32,
                "linear_hardswish_softmax: expected float32");
    TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1), "linear_hardswish_softmax: shapes");
    const c10::cuda::CUDAGuard guard(x.device());
    auto input = x.contiguous();
    auto w = weight.contiguous();
    auto lb = linear_bias.contiguous();
    auto bi = bias.contiguous();
    const int64_t m = input.size(0), k = input.size(1), n = w.size(0);
    TORCH_CHECK(lb.numel() == n && bi.numel() == n, "linear_hardswish_softmax: parameter sizes");
    TORCH_CHECK(m < (1LL << 31) && n < (1LL << 31) && k < (1LL << 31), "linear_hardswish_softmax: too large");
    auto output = torch::empty({m, n}, input.options());
    if (m == 0 || n == 0) return output;
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    const dim3 grid((unsigned)((n + kTileN - 1) / kTileN), (unsigned)((m + kTileM - 1) / kTileM));
    linear_epilogue_kernel<<<grid, kThreads, 0, stream>>>(input.data_ptr<float>(), w.data_ptr<float>(),
                                                          lb.data_ptr<float>(), bi.data_ptr<float>(),
                                                          output.data_ptr<float>(), (int)m, (int)n, (int)k);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    softmax_inplace_kernel<<<(unsigned)m, kRowThreads, 0, stream>>>(output.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return output;
}
"""

_ext = load_inline(
    name="kevin_generated_cuda_L0_92",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["linear_hardswish_softmax"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        # Same modules, same order, same random calls as the task's Model: a seed gives the same parameters.
        self.op0 = nn.Linear(3072, 3072)
        self.op2 = nn.Parameter(torch.randn(3072,))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.linear_hardswish_softmax(x, self.op0.weight, self.op0.bias, self.op2)
