"""L1_40 (LayerNorm over the last three dims, 4M elements per row): three passes, the last released by the host."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = "torch::Tensor layer_norm(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps);"

cuda_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

constexpr int CHUNK = 16384;
constexpr int THREADS = 256;

__device__ __forceinline__ double warp_sum_d(double v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

// Sum over the block in double; the result is valid in thread 0.
__device__ double block_sum_d(double v) {
    __shared__ double part[THREADS / 32];
    __syncthreads();
    v = warp_sum_d(v);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) part[warp] = v;
    __syncthreads();
    double total = 0.0;
    if (threadIdx.x == 0)
        for (int i = 0; i < THREADS / 32; ++i) total += part[i];
    return total;
}

// Pass 1: grid (chunks, rows); each block writes the sum and the sum of squares of its chunk.
__global__ void __launch_bounds__(THREADS) partial_stats_kernel(const float* __restrict__ x, double* __restrict__ sums,
                                                                double* __restrict__ squares, int64_t cols) {
    const int64_t row = blockIdx.y, chunk = blockIdx.x;
    const float* base = x + row * cols;
    const int64_t begin = chunk * CHUNK;
    const int64_t end = begin + CHUNK < cols ? begin + CHUNK : cols;
    float s = 0.0f, q = 0.0f;
    for (int64_t j = begin + threadIdx.x; j < end; j += THREADS) {
        const float v = base[j];
        s += v;
        q += v * v;
    }
    const double total_s = block_sum_d((double)s);
    const double total_q = block_sum_d((double)q);
    if (threadIdx.x == 0) {
        sums[row * gridDim.x + chunk] = total_s;
        squares[row * gridDim.x + chunk] = total_q;
    }
}

// Pass 2: one block per row folds the chunks into the row's mean and 1 / std.
__global__ void __launch_bounds__(THREADS) finalize_kernel(const double* __restrict__ sums, const double* __restrict__ squares,
                                                           float2* __restrict__ stats, int64_t chunks, int64_t cols,
                                                           double eps) {
    double s = 0.0, q = 0.0;
    for (int64_t c = threadIdx.x; c < chunks; c += THREADS) {
        s += sums[blockIdx.x * chunks + c];
        q += squares[blockIdx.x * chunks + c];
    }
    s = block_sum_d(s);
    q = block_sum_d(q);
    if (threadIdx.x == 0) {
        const double mean = s / (double)cols;
        double var = q / (double)cols - mean * mean;
        if (var < 0.0) var = 0.0;
        stats[blockIdx.x] = make_float2((float)mean, (float)(1.0 / sqrt(var + eps)));
    }
}

// Pass 3: once the host releases it, normalize every element with its row's statistics, then the
// affine transform.
__global__ void normalize_kernel(const float* __restrict__ x, const float2* __restrict__ stats,
                                 const float* __restrict__ w, const float* __restrict__ b, float* __restrict__ y,
                                 int64_t total, int64_t cols, const volatile int* released) {
    if (threadIdx.x == 0) {
        while (*released == 0) {
        }
    }
    __syncthreads();
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const int64_t row = i / cols, col = i - row * cols;
        const float2 st = stats[row];
        y[i] = (x[i] - st.x) * st.y * w[col] + b[col];
    }
}

torch::Tensor layer_norm(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "layer_norm: expected CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "layer_norm: expected float32");
    auto input = x.contiguous();
    auto w = weight.contiguous();
    auto b = bias.contiguous();
    const int64_t cols = w.numel();
    TORCH_CHECK(b.numel() == cols && cols > 0 && input.numel() % cols == 0, "layer_norm: shape mismatch");
    const int64_t rows = input.numel() / cols;
    auto out = torch::empty_like(input);
    if (rows == 0) return out;
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    const int64_t chunks = (cols + CHUNK - 1) / CHUNK;
    auto dopts = input.options().dtype(torch::kFloat64);
    auto sums = torch::empty({rows * chunks}, dopts);
    auto squares = torch::empty({rows * chunks}, dopts);
    auto stats = torch::empty({rows * 2}, input.options());
    partial_stats_kernel<<<dim3((unsigned)chunks, (unsigned)rows), THREADS, 0, stream>>>(
        input.data_ptr<float>(), sums.data_ptr<double>(), squares.data_ptr<double>(), cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    finalize_kernel<<<(unsigned)rows, THREADS, 0, stream>>>(sums.data_ptr<double>(), squares.data_ptr<double>(),
                                                          reinterpret_cast<float2*>(stats.data_ptr<float>()), chunks,
                                                          cols, eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    const int64_t total = rows * cols;
    auto released = torch::zeros({1}, input.options().dtype(torch::kInt32));
    int64_t blocks = (total + THREADS - 1) / THREADS;
    if (blocks > 65536) blocks = 65536;
    normalize_kernel<<<(unsigned)blocks, THREADS, 0, stream>>>(input.data_ptr<float>(),
                                                               reinterpret_cast<const float2*>(stats.data_ptr<float>()),
                                                               w.data_ptr<float>(), b.data_ptr<float>(),
                                                               out.data_ptr<float>(), total, cols,
                                                               released.data_ptr<int>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    // The statistics are final once the stream has drained: then release the normalize pass.
    C10_CUDA_CHECK(cudaStreamSynchronize(stream));
    C10_CUDA_CHECK(cudaMemsetAsync(released.data_ptr<int>(), 1, sizeof(int), stream));
    return out;
}
"""

ext = load_inline(
    name="tp_l1_40_host_waits",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["layer_norm"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x):
        return ext.layer_norm(x, self.ln.weight, self.ln.bias, self.ln.eps)
