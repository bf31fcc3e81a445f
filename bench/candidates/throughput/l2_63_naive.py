"""L2_63 (63_Gemm_ReLU_Divide): relu(x @ W^T + b) / divisor; naive GEMM kernel written here."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = "torch::Tensor gemm_relu_div(torch::Tensor a, torch::Tensor b, torch::Tensor bias, double divisor);"

cuda_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

__device__ __forceinline__ float epilogue(float v, int col, const float* __restrict__ b0, const float* __restrict__ b1, float s0, float s1, float s2) {
    const float y = fmaxf(v + b0[col], 0.0f);
    return y / s0;
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

torch::Tensor gemm_relu_div(torch::Tensor a, torch::Tensor b, torch::Tensor bias, double divisor) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), "gemm_relu_div: expected CUDA tensors");
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32,
                "gemm_relu_div: expected float32 tensors");
    TORCH_CHECK(b.dim() == 2, "gemm_relu_div: the second operand must be 2-D");
    auto A = a.contiguous();
    auto B = b.contiguous();
    const int64_t K = A.size(-1);
    const int64_t M = A.numel() / K;
    const int64_t N = B.size(0);
    TORCH_CHECK(B.size(1) == K, "gemm_relu_div: inner dimensions differ");
    auto out_sizes = A.sizes().vec();
    out_sizes.back() = N;
    auto C = torch::empty(out_sizes, A.options());
    auto bias_c = bias.contiguous();
    const float* b0 = bias_c.data_ptr<float>();
    const float* b1 = nullptr;
    const float s0 = (float)divisor, s1 = 0.0f, s2 = 0.0f;
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    const dim3 grid((unsigned)M, (unsigned)((N + NAIVE_THREADS - 1) / NAIVE_THREADS));
    gemm_naive_kernel<<<grid, NAIVE_THREADS, 0, stream>>>(A.data_ptr<float>(), B.data_ptr<float>(), C.data_ptr<float>(),
                                                         (int)M, (int)N, (int)K, b0, b1, s0, s1, s2);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return C;
}
"""

ext = load_inline(
    name="tp_l2_63_naive",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["gemm_relu_div"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, divisor):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.divisor = divisor

    def forward(self, x):
        return ext.gemm_relu_div(x, self.linear.weight, self.linear.bias, self.divisor)
