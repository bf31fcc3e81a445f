"""LayerNorm over the last dimension for fp32 / fp64 / fp16 / bf16, with at::acc_type accumulation.

Exercises: AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, ...),
ATen/AccumulateType.h (at::acc_type<scalar_t, true>), warp shuffles, weight and bias of the
input's dtype, an epsilon passed as double.
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/AccumulateType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

template <typename acc_t>
__device__ acc_t warp_sum(acc_t v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffff, v, offset);
    return v;
}

// One warp per row.
template <typename scalar_t>
__global__ void layernorm_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ w,
                                 const scalar_t* __restrict__ b, scalar_t* __restrict__ y,
                                 int64_t rows, int64_t cols, double eps) {
    using acc_t = at::acc_type<scalar_t, true>;
    const int64_t row = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= rows) return;
    const scalar_t* in = x + row * cols;
    acc_t sum = 0, sq = 0;
    for (int64_t c = lane; c < cols; c += 32) {
        const acc_t v = static_cast<acc_t>(in[c]);
        sum += v;
        sq += v * v;
    }
    sum = __shfl_sync(0xffffffff, warp_sum(sum), 0);
    sq = __shfl_sync(0xffffffff, warp_sum(sq), 0);
    const acc_t mean = sum / cols;
    const acc_t rstd = rsqrt(sq / cols - mean * mean + static_cast<acc_t>(eps));
    for (int64_t c = lane; c < cols; c += 32) {
        const acc_t v = (static_cast<acc_t>(in[c]) - mean) * rstd;
        y[row * cols + c] = static_cast<scalar_t>(v * static_cast<acc_t>(w[c]) + static_cast<acc_t>(b[c]));
    }
}

torch::Tensor layernorm(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(weight.scalar_type() == x.scalar_type() && bias.scalar_type() == x.scalar_type(),
                "weight and bias must have x's dtype");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    const int64_t cols = input.size(-1), rows = input.numel() / cols;
    const int warps = 8;
    AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, input.scalar_type(), "layernorm", [&] {
        layernorm_kernel<scalar_t><<<(rows + warps - 1) / warps, warps * 32, 0, at::cuda::getCurrentCUDAStream()>>>(
            input.data_ptr<scalar_t>(), weight.contiguous().data_ptr<scalar_t>(), bias.contiguous().data_ptr<scalar_t>(),
            out.data_ptr<scalar_t>(), rows, cols, eps);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

module = load_inline(
    name="kbc_dispatch_and2_layernorm",
    cpp_sources="torch::Tensor layernorm(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps);",
    cuda_sources=cuda_source,
    functions=["layernorm"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x):
        return module.layernorm(x, self.ln.weight, self.ln.bias, self.ln.eps)
