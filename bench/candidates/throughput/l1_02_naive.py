"""L1_2 (2_Standard_matrix_multiplication_): C = A @ B, (M, K) by (K, N); naive GEMM kernel written here."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = "torch::Tensor matmul(torch::Tensor a, torch::Tensor b);"

cuda_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

__device__ __forceinline__ float epilogue(float v, int col, const float* __restrict__ b0, const float* __restrict__ b1, float s0, float s1, float s2) {
    return v;
}

constexpr int NAIVE_THREADS = 256;

// blockIdx.x walks the rows so the blocks resident at once share the same columns of B in L2.
__global__ void gemm_naive_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                                  int M, int N, int K, const float* __restrict__ b0, const float* __restrict__ b1, float s0, float s1, float s2) {
    const int row = blockIdx.x;
    const int col = blockIdx.y * NAIVE_THREADS + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[(int64_t)row * K + k] * B[(int64_t)k * N + col];
    C[(int64_t)row * N + col] = epilogue(acc, col, b0, b1, s0, s1, s2);
}

torch::Tensor matmul(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), "matmul: expected CUDA tensors");
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32,
                "matmul: expected float32 tensors");
    TORCH_CHECK(b.dim() == 2, "matmul: the second operand must be 2-D");
    auto A = a.contiguous();
    auto B = b.contiguous();
    const int64_t K = A.size(-1);
    const int64_t M = A.numel() / K;
    const int64_t N = B.size(1);
    TORCH_CHECK(B.size(0) == K, "matmul: inner dimensions differ");
    auto out_sizes = A.sizes().vec();
    out_sizes.back() = N;
    auto C = torch::empty(out_sizes, A.options());
    const float* b0 = nullptr;
    const float* b1 = nullptr;
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
    name="tp_l1_02_naive",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["matmul"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return ext.matmul(A, B)
