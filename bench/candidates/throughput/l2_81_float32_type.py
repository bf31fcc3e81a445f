"""L2_81 (81_Gemm_Swish_Divide_Clamp_Tanh_Clamp): clamp(tanh(clamp(swish(x @ W^T + b) / 2))); tiled128 GEMM kernel written here."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = "torch::Tensor gemm_swish_tanh(torch::Tensor a, torch::Tensor b, torch::Tensor bias);"

cuda_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

__device__ __forceinline__ float epilogue(float v, int col, const float* __restrict__ b0, const float* __restrict__ b1, float s0, float s1, float s2) {
    float y = v + b0[col];
    y = y / (1.0f + expf(-y));
    y = y / 2.0f;
    y = fminf(fmaxf(y, -1.0f), 1.0f);
    y = tanhf(y);
    return fminf(fmaxf(y, -1.0f), 1.0f);
}

constexpr int TM = 128, TN = 128, TK = 8, THREADS = 256, MICRO = 8;

// Each block computes a TM x TN tile of C; thread (tx, ty) owns rows ty + 16 r and columns tx + 16 c.
__global__ void __launch_bounds__(THREADS) gemm_tiled_kernel(
    const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
    int M, int N, int K, const float* __restrict__ b0, const float* __restrict__ b1, float s0, float s1, float s2) {
    __shared__ float As[TK][TM + 4];
    __shared__ float Bs[TK][TN + 4];
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int row0 = blockIdx.y * TM, col0 = blockIdx.x * TN;
    float acc[MICRO][MICRO];
#pragma unroll
    for (int r = 0; r < MICRO; ++r)
#pragma unroll
        for (int c = 0; c < MICRO; ++c) acc[r][c] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += TK) {
        for (int l = 0; l < (TM * TK) / THREADS; ++l) {
            const int idx = tid + l * THREADS;
            const int p = idx % TK, i = idx / TK;
            const int gi = row0 + i, gk = k0 + p;
            As[p][i] = (gi < M && gk < K) ? A[(int64_t)gi * K + gk] : 0.0f;
        }
        for (int l = 0; l < (TN * TK) / THREADS; ++l) {
            const int idx = tid + l * THREADS;
            const int p = idx % TK, j = idx / TK;
            const int gj = col0 + j, gk = k0 + p;
            Bs[p][j] = (gj < N && gk < K) ? B[(int64_t)gj * K + gk] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int p = 0; p < TK; ++p) {
            float a[MICRO], b[MICRO];
#pragma unroll
            for (int r = 0; r < MICRO; ++r) a[r] = As[p][ty + 16 * r];
#pragma unroll
            for (int c = 0; c < MICRO; ++c) b[c] = Bs[p][tx + 16 * c];
#pragma unroll
            for (int r = 0; r < MICRO; ++r)
#pragma unroll
                for (int c = 0; c < MICRO; ++c) acc[r][c] = fmaf(a[r], b[c], acc[r][c]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < MICRO; ++r) {
        const int gi = row0 + ty + 16 * r;
        if (gi >= M) continue;
#pragma unroll
        for (int c = 0; c < MICRO; ++c) {
            const int gj = col0 + tx + 16 * c;
            if (gj < N) C[(int64_t)gi * N + gj] = epilogue(acc[r][c], gj, b0, b1, s0, s1, s2);
        }
    }
}

torch::Tensor gemm_swish_tanh(torch::Tensor a, torch::Tensor b, torch::Tensor bias) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), "gemm_swish_tanh: expected CUDA tensors");
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32,
                "gemm_swish_tanh: expected float32 tensors");
    TORCH_CHECK(b.dim() == 2, "gemm_swish_tanh: the second operand must be 2-D");
    auto A = a.contiguous();
    auto B = b.contiguous();
    const int64_t K = A.size(-1);
    const int64_t M = A.numel() / K;
    const int64_t N = B.size(0);
    TORCH_CHECK(B.size(1) == K, "gemm_swish_tanh: inner dimensions differ");
    auto out_sizes = A.sizes().vec();
    out_sizes.back() = N;
    auto C = torch::empty(out_sizes, A.options());
    auto bias_c = bias.contiguous();
    const float* b0 = bias_c.data_ptr<float>();
    const float* b1 = nullptr;
    const float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f;
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    const dim3 grid((unsigned)((N + TN - 1) / TN), (unsigned)((M + TM - 1) / TM));
    gemm_tiled_kernel<<<grid, THREADS, 0, stream>>>(A.data_ptr<float>(), B.data_ptr<float>(), C.data_ptr<float32>(),
                                                    (int)M, (int)N, (int)K, b0, b1, s0, s1, s2);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return C;
}
"""

ext = load_inline(
    name="tp_l2_81_float32_type",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["gemm_swish_tanh"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=bias)

    def forward(self, x):
        return ext.gemm_swish_tanh(x, self.gemm.weight, self.gemm.bias)
