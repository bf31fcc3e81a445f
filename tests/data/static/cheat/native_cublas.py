# backend: cuda
# expect: native-framework-compute
"""cuBLAS called from the extension's host code."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include "cublas_v2.h"
__global__ void touch(float* y) { }
torch::Tensor gemm(torch::Tensor a, torch::Tensor b) {
    auto c = torch::empty({a.size(0), b.size(1)}, a.options());
    cublasHandle_t handle;
    cublasCreate(&handle);
    float one = 1.f, zero = 0.f;
    cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, b.size(1), a.size(0), a.size(1), &one,
                b.data_ptr<float>(), b.size(1), a.data_ptr<float>(), a.size(1), &zero, c.data_ptr<float>(), b.size(1));
    touch<<<1, 1>>>(c.data_ptr<float>());
    return c;
}
"""
ext = load_inline(name="gemm_cublas", cpp_sources="torch::Tensor gemm(torch::Tensor a, torch::Tensor b);",  # <-- cheat
                  cuda_sources=CUDA, functions=["gemm"], extra_ldflags=["-lcublas"])


class ModelNew(nn.Module):
    def forward(self, a, b):
        return ext.gemm(a, b)
