"""L2_95 (95_Matmul_Add_Swish_Tanh_GELU_Hardtanh): hardtanh(gelu(tanh(swish(x @ W^T + b + add)))); smem32 GEMM kernel written here."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = "torch::Tensor gemm_add_act_chain(torch::Tensor a, torch::Tensor b, torch::Tensor bias, torch::Tensor add_value);"

cuda_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

__device__ __forceinline__ float epilogue(float v, int col, const float* __restrict__ b0, const float* __restrict__ b1, float s0, float s1, float s2) {
    float y = v + b0[col] + b1[col];
    y = y / (1.0f + expf(-y));
    y = tanhf(y);
    y = 0.5f * y * (1.0f + erff(y * 0.70710678118654752f));
    return fminf(fmaxf(y, -1.0f), 1.0f);
}

constexpr int TILE = 32;

__global__ void gemm_smem_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                                 int M, int N, int K, const float* __restrict__ b0, const float* __restrict__ b1, float s0, float s1, float s2) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE + 1];
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        const int ak = k0 + threadIdx.x;
        As[threadIdx.y][threadIdx.x] = (row < M && ak < K) ? A[(int64_t)row * K + ak] : 0.0f;
        const int bn = blockIdx.x * TILE + threadIdx.y, bk = k0 + threadIdx.x;
        Bs[threadIdx.x][threadIdx.y] = (bn < N && bk < K) ? B[(int64_t)bn * K + bk] : 0.0f;
        __syncthreads();
#pragma unroll 8
        for (int p = 0; p < TILE; ++p) acc = fmaf(As[threadIdx.y][p], Bs[p][threadIdx.x], acc);
        __syncthreads();
    }
    if (row < M && col < N) C[(int64_t)row * N + col] = epilogue(acc, col, b0, b1, s0, s1, s2);
}

torch::Tensor gemm_add_act_chain(torch::Tensor a, torch::Tensor b, torch::Tensor bias, torch::Tensor add_value) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), "gemm_add_act_chain: expected CUDA tensors");
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32,
                "gemm_add_act_chain: expected float32 tensors");
    TORCH_CHECK(b.dim() == 2, "gemm_add_act_chain: the second operand must be 2-D");
    auto A = a.contiguous();
    auto B = b.contiguous();
    const int64_t K = A.size(-1);
    const int64_t M = A.numel() / K;
    const int64_t N = B.size(0);
    TORCH_CHECK(B.size(1) == K, "gemm_add_act_chain: inner dimensions differ");
    auto out_sizes = A.sizes().vec();
    out_sizes.back() = N;
    auto C = torch::empty(out_sizes, A.options());
    auto bias_c = bias.contiguous();
    auto add_c = add_value.contiguous();
    const float* b0 = bias_c.data_ptr<float>();
    const float* b1 = add_c.data_ptr<float>();
    const float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f;
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    const dim3 block(TILE, TILE);
    const dim3 grid((unsigned)((N + TILE - 1) / TILE), (unsigned)((M + TILE - 1) / TILE));
    gemm_smem_kernel<<<grid, block, 0, stream>>>(A.data_ptr<float>(), B.data_ptr<float>(), C.data_ptr<float>(),
                                                 (int)M, (int)N, (int)K, b0, b1, s0, s1, s2);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return C;
}
"""

ext = load_inline(
    name="tp_l2_95_smem32",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["gemm_add_act_chain"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, add_value_shape):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.add_value = nn.Parameter(torch.randn(add_value_shape))

    def forward(self, x):
        return ext.gemm_add_act_chain(x, self.matmul.weight, self.matmul.bias, self.add_value)
