"""L2_95 (95_Matmul_Add_Swish_Tanh_GELU_Hardtanh): hardtanh(gelu(tanh(swish(x @ W^T + b + add)))); naive GEMM kernel written here."""

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
    const dim3 grid((unsigned)M, (unsigned)((N + NAIVE_THREADS - 1) / NAIVE_THREADS));
    gemm_naive_kernel<<<grid, NAIVE_THREADS, 0, stream>>>(A.data_ptr<float>(), B.data_ptr<float>(), C.data_ptr<float>(),
                                                         (int)M, (int)N, (int)K, b0, b1, s0, s1, s2);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return C;
}
"""

ext = load_inline(
    name="tp_l2_95_naive",
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
