"""L1_95 (cross entropy, mean over 32768 rows of 4096 classes): a warp per row with an online logsumexp."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = "torch::Tensor cross_entropy(torch::Tensor logits, torch::Tensor targets, int64_t classes);"

cuda_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

// One block folds the per-row losses (in double) into their mean, or their sum when divide is false.
__global__ void mean_kernel(const float* __restrict__ v, float* __restrict__ out, int64_t n, bool divide) {
    __shared__ double part[32];
    double s = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += v[i];
    for (int offset = 16; offset > 0; offset >>= 1) s += __shfl_xor_sync(0xffffffffu, s, offset);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) part[warp] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        double total = 0.0;
        for (int i = 0; i < (int)(blockDim.x >> 5); ++i) total += part[i];
        out[0] = (float)(divide ? total / (double)n : total);
    }
}

constexpr int WARPS = 8;

// One warp per row with an online (max, sum) pair per lane, merged across the warp.
__global__ void row_loss_warp_kernel(const float* __restrict__ x, const int64_t* __restrict__ t,
                                     float* __restrict__ loss, int64_t rows, int64_t cols) {
    const int64_t r = (int64_t)blockIdx.x * WARPS + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (r >= rows) return;
    const float* row = x + r * cols;
    float m = -INFINITY, s = 0.0f;
    for (int64_t j = lane; j < cols; j += 32) {
        const float v = row[j];
        if (v > m) {
            s = s * expf(m - v) + 1.0f;
            m = v;
        } else {
            s += expf(v - m);
        }
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, offset);
        const float s2 = __shfl_xor_sync(0xffffffffu, s, offset);
        const float mx = fmaxf(m, m2);
        s = (s == 0.0f ? 0.0f : s * expf(m - mx)) + (s2 == 0.0f ? 0.0f : s2 * expf(m2 - mx));
        m = mx;
    }
    if (lane == 0) loss[r] = m + logf(s) - row[t[r]];
}

torch::Tensor cross_entropy(torch::Tensor logits, torch::Tensor targets) {
    TORCH_CHECK(logits.is_cuda() && targets.is_cuda(), "cross_entropy: expected CUDA tensors");
    TORCH_CHECK(logits.scalar_type() == torch::kFloat32 && logits.dim() == 2, "cross_entropy: expected (B, C) float32");
    TORCH_CHECK(targets.scalar_type() == torch::kInt64 && targets.numel() == logits.size(0),
                "cross_entropy: expected (B,) int64 targets");
    auto x = logits.contiguous();
    auto t = targets.contiguous();
    const int64_t rows = x.size(0), cols = x.size(1);
    auto row_loss = torch::empty({rows}, x.options());
    auto out = torch::empty(std::vector<int64_t>{}, x.options());
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    row_loss_warp_kernel<<<(unsigned)((rows + WARPS - 1) / WARPS), WARPS * 32, 0, stream>>>(
        x.data_ptr<float>(), t.data_ptr<int64_t>(), row_loss.data_ptr<float>(), rows, cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    mean_kernel<<<1, 1024, 0, stream>>>(row_loss.data_ptr<float>(), out.data_ptr<float>(), rows, true);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

ext = load_inline(
    name="tp_l1_95_declaration_mismatch",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["cross_entropy"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return ext.cross_entropy(predictions, targets)
