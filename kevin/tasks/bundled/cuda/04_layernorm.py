"""cuda candidate for tasks/04_layernorm.py: one block per row; mean, then centred variance, then the affine write."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = "torch::Tensor layer_norm_rows(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps);"

CUDA_SOURCE = r"""
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

constexpr int kThreads = 256;

__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

// Sum over the block; every thread gets the total. Safe to call repeatedly (leading barrier).
__device__ float block_sum(float v) {
    __shared__ float partial[33];
    __syncthreads();
    v = warp_sum(v);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (int)(blockDim.x >> 5) ? partial[lane] : 0.0f;
        v = warp_sum(v);
        if (lane == 0) partial[32] = v;
    }
    __syncthreads();
    return partial[32];
}

// The row is read three times; at these row lengths the second and third reads come from L2.
__global__ void layer_norm_kernel(const float* __restrict__ in, const float* __restrict__ weight,
                                  const float* __restrict__ bias, float* __restrict__ out,
                                  int64_t cols, float eps, bool vec4) {
    const float* row = in + (int64_t)blockIdx.x * cols;
    float* dst = out + (int64_t)blockIdx.x * cols;
    const int64_t cols4 = cols / 4;
    float acc = 0.0f;
    if (vec4) {
        const float4* row4 = reinterpret_cast<const float4*>(row);
        for (int64_t c = threadIdx.x; c < cols4; c += blockDim.x) {
            const float4 v = row4[c];
            acc += (v.x + v.y) + (v.z + v.w);
        }
    } else {
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) acc += row[c];
    }
    const float mean = block_sum(acc) / (float)cols;
    acc = 0.0f;
    if (vec4) {
        const float4* row4 = reinterpret_cast<const float4*>(row);
        for (int64_t c = threadIdx.x; c < cols4; c += blockDim.x) {
            const float4 v = row4[c];
            const float a = v.x - mean, b = v.y - mean, d = v.z - mean, e = v.w - mean;
            acc += (a * a + b * b) + (d * d + e * e);
        }
    } else {
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
            const float d = row[c] - mean;
            acc += d * d;
        }
    }
    const float rstd = rsqrtf(block_sum(acc) / (float)cols + eps);
    if (vec4) {
        const float4* row4 = reinterpret_cast<const float4*>(row);
        const float4* w4 = reinterpret_cast<const float4*>(weight);
        const float4* b4 = reinterpret_cast<const float4*>(bias);
        float4* dst4 = reinterpret_cast<float4*>(dst);
        for (int64_t c = threadIdx.x; c < cols4; c += blockDim.x) {
            const float4 v = row4[c], w = w4[c], b = b4[c];
            dst4[c] = make_float4((v.x - mean) * rstd * w.x + b.x, (v.y - mean) * rstd * w.y + b.y,
                                  (v.z - mean) * rstd * w.z + b.z, (v.w - mean) * rstd * w.w + b.w);
        }
    } else {
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) dst[c] = (row[c] - mean) * rstd * weight[c] + bias[c];
    }
}

static bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

torch::Tensor layer_norm_rows(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() == 2,
                "layer_norm_rows: expected a 2-D float32 CUDA tensor");
    TORCH_CHECK(weight.is_cuda() && bias.is_cuda(), "layer_norm_rows: parameters must be on the GPU");
    const c10::cuda::CUDAGuard guard(x.device());
    auto input = x.contiguous();
    auto w = weight.contiguous();
    auto b = bias.contiguous();
    const int64_t rows = input.size(0), cols = input.size(1);
    TORCH_CHECK(w.numel() == cols && b.numel() == cols, "layer_norm_rows: weight/bias size mismatch");
    auto output = torch::empty_like(input);
    if (rows == 0 || cols == 0) return output;
    TORCH_CHECK(rows <= 2147483647LL, "layer_norm_rows: too many rows for one grid dimension");
    const float* in = input.data_ptr<float>();
    float* out = output.data_ptr<float>();
    const bool vec4 = cols % 4 == 0 && aligned16(in) && aligned16(out) && aligned16(w.data_ptr<float>())
                      && aligned16(b.data_ptr<float>());
    layer_norm_kernel<<<(unsigned)rows, kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        in, w.data_ptr<float>(), b.data_ptr<float>(), out, cols, (float)eps, vec4);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return output;
}
"""

_ext = load_inline(
    name="kevin_bundled_cuda_04_layernorm",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["layer_norm_rows"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        # Same modules and the same random calls as the reference, so a seed gives the same parameters.
        self.norm = nn.LayerNorm(hidden, eps=1e-5)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.layer_norm_rows(x, self.norm.weight, self.norm.bias, self.norm.eps)
