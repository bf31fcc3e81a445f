"""cuda candidate for generated task L0_4 (seed 0, attempt 3): bmm -> + bias -> clamp(-2, 2) -> ELU(1) -> + 0.5 -> * 2.

One batched tiled SGEMM (128x128 block tile, 8x8 outputs per thread, fp32 FMA accumulation;
blockIdx.z is the batch) with every cheap op fused into its epilogue: one write of the output,
where the reference writes and rereads it five more times."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = "torch::Tensor bmm_bias_clamp_elu(torch::Tensor x, torch::Tensor b, torch::Tensor bias);"

CUDA_SOURCE = r"""
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

constexpr int kTileM = 128, kTileN = 128, kTileK = 8, kThreads = 256, kMicro = 8;

// The cheap ops in the reference's order, each rounded to fp32 as the reference's separate kernels do.
__device__ __forceinline__ float epilogue(float v, float bias) {
    v = v + bias;
    v = fminf(fmaxf(v, -2.0f), 2.0f);
    v = v <= 0.0f ? expm1f(v) : v;  // ELU, alpha 1
    v = v + 0.5f;
    return v * 2.0f;
}

// Y[z] (M x N) = epilogue(X[z] (M x K) @ B[z] (K x N)), all row-major; blockIdx.z is the batch.
// Thread (tx, ty) of the 16 x 16 grid owns rows ty + 16 r and columns tx + 16 c of the block tile,
// so shared-memory reads in a warp hit distinct banks (or broadcast) and the global stores are
// coalesced; the +4 padding keeps the transposing store of the X tile free of bank conflicts.
__global__ void __launch_bounds__(kThreads) bmm_epilogue_kernel(const float* __restrict__ X, const float* __restrict__ B,
                                                               const float* __restrict__ bias, float* __restrict__ Y,
                                                               int M, int N, int K) {
    __shared__ float Xs[kTileK][kTileM + 4];
    __shared__ float Bs[kTileK][kTileN + 4];
    const int64_t batch = blockIdx.z;
    X += batch * (int64_t)M * K;
    B += batch * (int64_t)K * N;
    Y += batch * (int64_t)M * N;
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
            const int j = idx % kTileN, p = idx / kTileN;
            const int gj = col0 + j, gp = k0 + p;
            Bs[p][j] = (gj < N && gp < K) ? B[(int64_t)gp * N + gj] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int p = 0; p < kTileK; ++p) {
            float a[kMicro], b[kMicro];
#pragma unroll
            for (int r = 0; r < kMicro; ++r) a[r] = Xs[p][ty + 16 * r];
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
            if (gj < N) Y[(int64_t)gi * N + gj] = epilogue(acc[r][c], bias[gj]);
        }
    }
}

torch::Tensor bmm_bias_clamp_elu(torch::Tensor x, torch::Tensor b, torch::Tensor bias) {
    TORCH_CHECK(x.is_cuda() && b.is_cuda() && bias.is_cuda(), "bmm_bias_clamp_elu: expected CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32 &&
                    bias.scalar_type() == torch::kFloat32,
                "bmm_bias_clamp_elu: expected float32");
    TORCH_CHECK(x.dim() == 3 && b.dim() == 3 && x.size(0) == b.size(0) && x.size(2) == b.size(1),
                "bmm_bias_clamp_elu: expected x (B, M, K) and b (B, K, N)");
    const c10::cuda::CUDAGuard guard(x.device());
    auto lhs = x.contiguous();
    auto rhs = b.contiguous();
    auto bi = bias.contiguous();
    const int64_t batch = lhs.size(0), m = lhs.size(1), k = lhs.size(2), n = rhs.size(2);
    TORCH_CHECK(bi.numel() == n, "bmm_bias_clamp_elu: bias size");
    TORCH_CHECK(batch <= 65535 && m < (1LL << 31) && n < (1LL << 31) && k < (1LL << 31), "bmm_bias_clamp_elu: too large");
    auto output = torch::empty({batch, m, n}, lhs.options());
    if (batch == 0 || m == 0 || n == 0) return output;
    const dim3 grid((unsigned)((n + kTileN - 1) / kTileN), (unsigned)((m + kTileM - 1) / kTileM), (unsigned)batch);
    bmm_epilogue_kernel<<<grid, kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        lhs.data_ptr<float>(), rhs.data_ptr<float>(), bi.data_ptr<float>(), output.data_ptr<float>(),
        (int)m, (int)n, (int)k);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return output;
}
"""

_ext = load_inline(
    name="kevin_generated_cuda_L0_4",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["bmm_bias_clamp_elu"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        # Same parameter, same random call as the task's Model: a seed gives the same bias.
        self.op1 = nn.Parameter(torch.randn(384,))

    def forward(self, x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return _ext.bmm_bias_clamp_elu(x, b, self.op1)
