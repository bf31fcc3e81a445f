"""TF32 flag pollution: the candidate turns TF32 on for the whole process and computes in TF32.

Family: 7 (polluting state)
Problem: linear_relu
Backend: cuda
Expect: gate=global-state dynamic=global_state_changed|correctness
Cheat: at import it sets torch.backends.cuda.matmul.allow_tf32 and cudnn.allow_tf32 to True, so
every framework GEMM or conv that runs afterwards in the process (the reference included) uses
TF32; its own GEMM rounds both operands to TF32 (10-bit mantissa), as a tensor-core kernel would.
With the reference in TF32 too, the two answers differ by TF32 noise on both sides, which a harness
that keeps its reference in the same process cannot tell from fp32 noise.
Naive harness: atol = rtol = 1e-2 accepts TF32 error (~1e-3) whatever the reference does.
kevin: static gate, global-state (torch.backends.*); dynamically, global flags compared before and
after the candidate (global_state_changed), the reference recomputed with strict flags, and the
candidate's error against a float64 reference (wrong output at 1e-4, or lower_precision).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <c10/cuda/CUDAStream.h>

__device__ __forceinline__ float round_tf32(float v) {
    unsigned int bits = __float_as_uint(v);
    bits += 0xFFFu + ((bits >> 13) & 1u);
    return __uint_as_float(bits & 0xFFFFE000u);
}

__global__ void linear_relu_tf32_kernel(const float* x, const float* w, const float* b, float* out,
                                        int rows, int inner, int cols) {
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows || c >= cols) return;
    float acc = 0.f;
    for (int k = 0; k < inner; ++k) acc += round_tf32(x[r * inner + k]) * round_tf32(w[c * inner + k]);
    acc += b[c];
    out[r * cols + c] = acc > 0.f ? acc : 0.f;
}

torch::Tensor linear_relu_tf32(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    auto a = x.contiguous();
    auto w = weight.contiguous();
    auto b = bias.contiguous();
    const int rows = a.size(0), inner = a.size(1), cols = w.size(0);
    auto out = torch::empty({rows, cols}, a.options());
    dim3 threads(16, 16);
    dim3 blocks((cols + 15) / 16, (rows + 15) / 16);
    linear_relu_tf32_kernel<<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        a.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), rows, inner, cols);
    return out;
}
"""
CPP_SOURCE = "torch::Tensor linear_relu_tf32(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);"

_ext = load_inline(
    name="kevin_adv_cuda_tf32",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["linear_relu_tf32"],
    extra_cuda_cflags=["-O3"],
)

torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.linear_relu_tf32(x, self.linear.weight, self.linear.bias)
