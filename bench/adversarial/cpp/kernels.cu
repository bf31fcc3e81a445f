// Honest CUDA kernels for the corpus's problems (bench/adversarial/problems/), built once as
// kevin_adv_cuda_kernels and shared by the honest candidates and by the cheats whose trick lives in
// Python. Every function computes its whole task on the current stream in fp32, on any input: where
// a kernel skips work, it is work the problem's own forward guarantees is zero or redundant.
#include <torch/types.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <algorithm>
#include <cmath>

namespace {

constexpr int kTile = 64;       // output tile of the GEMM kernel (kTile x kTile per block)
constexpr int kDepth = 16;      // k-slice staged in shared memory per step
constexpr int kGemmThreads = 256;
constexpr int kRowThreads = 512;

enum Structure : int { kDense = 0, kLowerTriangular = 1, kSymmetric = 2 };
enum Epilogue : int { kPlain = 0, kBiasGelu = 1, kBiasRelu = 2 };

// Element (row, col) of a logical operand is data[row * row_stride + col * col_stride].
struct Operand {
    const float* data;
    int64_t row_stride;
    int64_t col_stride;
};

void require_float_cuda(const torch::Tensor& t, const char* what) {
    TORCH_CHECK(t.is_cuda() && t.scalar_type() == torch::kFloat32, what, ": expected a float32 CUDA tensor");
}

cudaStream_t current_stream() { return c10::cuda::getCurrentCUDAStream(); }

unsigned grid_for(int64_t n, int threads) { return (unsigned)((n + threads - 1) / threads); }

// C[M, N] = A[M, K] @ B[K, N], 64 x 64 tiles, each thread 4 x 4 outputs. `structure` lets the
// kernel skip what the problem guarantees: for tril(A) @ tril(B) only k in [j, i] contributes and
// tiles above the diagonal are zero; for a symmetric product only tiles on or above the diagonal
// are computed and mirrored.
__global__ void gemm_tiled_kernel(Operand a, Operand b, const float* __restrict__ bias, float* __restrict__ c,
                                  int M, int N, int K, int structure, int epilogue) {
    __shared__ float a_tile[kDepth][kTile + 4];
    __shared__ float b_tile[kDepth][kTile + 4];
    const int m0 = blockIdx.y * kTile, n0 = blockIdx.x * kTile;
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    if (structure == kSymmetric && n0 < m0) return;  // the mirror of a tile above the diagonal
    int k_begin = 0, k_end = K;
    if (structure == kLowerTriangular) {
        if (n0 > m0 + kTile - 1) {  // every (i, j) here has j > i
            for (int e = threadIdx.x; e < kTile * kTile; e += kGemmThreads) {
                const int gm = m0 + e / kTile, gn = n0 + e % kTile;
                if (gm < M && gn < N) c[(int64_t)gm * N + gn] = 0.f;
            }
            return;
        }
        k_begin = n0;
        k_end = min(K, m0 + kTile);
    }
    float acc[4][4] = {};
    for (int k0 = k_begin; k0 < k_end; k0 += kDepth) {
        for (int e = threadIdx.x; e < kTile * kDepth; e += kGemmThreads) {
            const int mm = e / kDepth, kk = e % kDepth;
            const int gm = m0 + mm, gk = k0 + kk;
            float v = 0.f;
            if (gm < M && gk < k_end) {
                v = a.data[gm * a.row_stride + gk * a.col_stride];
                if (structure == kLowerTriangular && gk > gm) v = 0.f;
            }
            a_tile[kk][mm] = v;
        }
        for (int e = threadIdx.x; e < kTile * kDepth; e += kGemmThreads) {
            int kk, nn;
            if (b.col_stride == 1) {
                kk = e / kTile;
                nn = e % kTile;
            } else {
                nn = e / kDepth;
                kk = e % kDepth;
            }
            const int gk = k0 + kk, gn = n0 + nn;
            float v = 0.f;
            if (gn < N && gk < k_end) {
                v = b.data[gk * b.row_stride + gn * b.col_stride];
                if (structure == kLowerTriangular && gk < gn) v = 0.f;
            }
            b_tile[kk][nn] = v;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < kDepth; ++kk) {
            float av[4], bv[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) av[i] = a_tile[kk][ty * 4 + i];
#pragma unroll
            for (int j = 0; j < 4; ++j) bv[j] = b_tile[kk][tx * 4 + j];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
        __syncthreads();
    }
    for (int i = 0; i < 4; ++i) {
        const int gm = m0 + ty * 4 + i;
        if (gm >= M) continue;
        for (int j = 0; j < 4; ++j) {
            const int gn = n0 + tx * 4 + j;
            if (gn >= N) continue;
            float v = acc[i][j];
            if (epilogue == kBiasGelu) {
                v += bias[gn];
                v = 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
            } else if (epilogue == kBiasRelu) {
                v = fmaxf(v + bias[gn], 0.f);
            }
            if (structure == kLowerTriangular && gn > gm) v = 0.f;
            c[(int64_t)gm * N + gn] = v;
            if (structure == kSymmetric && n0 != m0) c[(int64_t)gn * N + gm] = v;
        }
    }
}

void launch_gemm(Operand a, Operand b, const float* bias, float* c, int M, int N, int K, int structure,
                 int epilogue) {
    dim3 blocks((N + kTile - 1) / kTile, (M + kTile - 1) / kTile);
    gemm_tiled_kernel<<<blocks, kGemmThreads, 0, current_stream()>>>(a, b, bias, c, M, N, K, structure, epilogue);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Online softmax statistics: running max m, s = sum e^(x - m), t = sum e^(x - m) * x.
struct RowStats {
    float m, s, t;
};

__device__ __forceinline__ RowStats merge(RowStats p, RowStats q) {
    const float m = fmaxf(p.m, q.m);
    if (m == -INFINITY) return p;
    const float sp = __expf(p.m - m), sq = __expf(q.m - m);
    return {m, p.s * sp + q.s * sq, p.t * sp + q.t * sq};
}

__device__ RowStats block_row_stats(const float* __restrict__ row, int64_t cols) {
    __shared__ RowStats partial[32];
    RowStats local{-INFINITY, 0.f, 0.f};
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        const float v = row[c];
        if (v > local.m) {
            const float scale = __expf(local.m - v);
            local.s *= scale;
            local.t *= scale;
            local.m = v;
        }
        const float e = __expf(v - local.m);
        local.s += e;
        local.t += e * v;
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        RowStats other{__shfl_xor_sync(0xffffffffu, local.m, offset), __shfl_xor_sync(0xffffffffu, local.s, offset),
                       __shfl_xor_sync(0xffffffffu, local.t, offset)};
        local = merge(local, other);
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) partial[warp] = local;
    __syncthreads();
    if (threadIdx.x == 0) {
        RowStats total = partial[0];
        for (int w = 1; w < (int)(blockDim.x >> 5); ++w) total = merge(total, partial[w]);
        partial[0] = total;
    }
    __syncthreads();
    RowStats result = partial[0];
    __syncthreads();  // partial may be reused by the caller's next row
    return result;
}

__global__ void softmax_rows_kernel(const float* __restrict__ in, float* __restrict__ out, int64_t cols) {
    const float* row = in + (int64_t)blockIdx.x * cols;
    float* dst = out + (int64_t)blockIdx.x * cols;
    const RowStats stats = block_row_stats(row, cols);
    const float inverse = 1.f / stats.s;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) dst[c] = __expf(row[c] - stats.m) * inverse;
}

__global__ void softmax_entropy_kernel(const float* __restrict__ in, float* __restrict__ out, int64_t cols) {
    const RowStats stats = block_row_stats(in + (int64_t)blockIdx.x * cols, cols);
    if (threadIdx.x == 0) out[blockIdx.x] = stats.m + logf(stats.s) - stats.t / stats.s;
}

__global__ void row_mean_kernel(const float* __restrict__ in, float* __restrict__ out, int64_t cols) {
    __shared__ double partial[32];
    const float* row = in + (int64_t)blockIdx.x * cols;
    double acc = 0.0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) acc += row[c];
    for (int offset = 16; offset > 0; offset >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, offset);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) partial[warp] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        double total = 0.0;
        for (int w = 0; w < (int)(blockDim.x >> 5); ++w) total += partial[w];
        out[blockIdx.x] = (float)(total / (double)cols);
    }
}

__global__ void diag_scale_rows_kernel(const float* __restrict__ d, const float* __restrict__ b,
                                       float* __restrict__ c, int64_t rows, int64_t cols) {
    const int64_t n = rows * cols;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        c[i] = d[i / cols] * b[i];
}

__global__ void scale_relu_kernel(const float* __restrict__ in, float* __restrict__ out, float scale, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = fmaxf(in[i] * scale, 0.f);
}

__global__ void gate_relu_kernel(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ z,
                                 int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const float xv = x[i];
        const float gate = 1.f / (1.f + expf(-y[i]));
        z[i] = fmaxf(xv * gate + 0.1f * xv, 0.f);
    }
}

unsigned elementwise_grid(int64_t n) { return (unsigned)std::min<int64_t>(grid_for(n, 256), 65535LL * 8); }

}  // namespace

torch::Tensor tril_matmul(torch::Tensor a, torch::Tensor b) {
    require_float_cuda(a, "tril_matmul");
    require_float_cuda(b, "tril_matmul");
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "tril_matmul: shapes do not chain");
    const c10::cuda::CUDAGuard guard(a.device());
    auto lhs = a.contiguous(), rhs = b.contiguous();
    const int M = lhs.size(0), K = lhs.size(1), N = rhs.size(1);
    auto out = torch::empty({M, N}, lhs.options());
    launch_gemm({lhs.data_ptr<float>(), K, 1}, {rhs.data_ptr<float>(), N, 1}, nullptr, out.data_ptr<float>(), M, N,
                K, kLowerTriangular, kPlain);
    return out;
}

torch::Tensor gram(torch::Tensor x) {
    require_float_cuda(x, "gram");
    TORCH_CHECK(x.dim() == 2, "gram: expected a 2-D tensor");
    const c10::cuda::CUDAGuard guard(x.device());
    auto input = x.contiguous();
    const int rows = input.size(0), inner = input.size(1);
    auto out = torch::empty({rows, rows}, input.options());
    const float* data = input.data_ptr<float>();
    launch_gemm({data, inner, 1}, {data, 1, inner}, nullptr, out.data_ptr<float>(), rows, rows, inner, kSymmetric,
                kPlain);
    return out;
}

// y = act(x @ W^T + b) with act 1 = exact GELU, 2 = relu.
torch::Tensor linear_act(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, int64_t act) {
    require_float_cuda(x, "linear_act");
    require_float_cuda(weight, "linear_act");
    require_float_cuda(bias, "linear_act");
    TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1), "linear_act: shapes");
    TORCH_CHECK(act == kBiasGelu || act == kBiasRelu, "linear_act: act is 1 (gelu) or 2 (relu)");
    const c10::cuda::CUDAGuard guard(x.device());
    auto input = x.contiguous(), w = weight.contiguous(), b = bias.contiguous();
    const int M = input.size(0), K = input.size(1), N = w.size(0);
    auto out = torch::empty({M, N}, input.options());
    launch_gemm({input.data_ptr<float>(), K, 1}, {w.data_ptr<float>(), 1, K}, b.data_ptr<float>(),
                out.data_ptr<float>(), M, N, K, kDense, (int)act);
    return out;
}

torch::Tensor diag_matmul(torch::Tensor d, torch::Tensor b) {
    require_float_cuda(d, "diag_matmul");
    require_float_cuda(b, "diag_matmul");
    TORCH_CHECK(d.dim() == 1 && b.dim() == 2 && d.size(0) == b.size(0), "diag_matmul: shapes");
    const c10::cuda::CUDAGuard guard(b.device());
    auto diag = d.contiguous(), rhs = b.contiguous();
    auto out = torch::empty_like(rhs);
    const int64_t n = rhs.numel();
    if (n == 0) return out;
    diag_scale_rows_kernel<<<elementwise_grid(n), 256, 0, current_stream()>>>(
        diag.data_ptr<float>(), rhs.data_ptr<float>(), out.data_ptr<float>(), rhs.size(0), rhs.size(1));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

torch::Tensor softmax_rows(torch::Tensor x) {
    require_float_cuda(x, "softmax_rows");
    TORCH_CHECK(x.dim() == 2, "softmax_rows: expected a 2-D tensor");
    const c10::cuda::CUDAGuard guard(x.device());
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    if (input.numel() == 0) return out;
    softmax_rows_kernel<<<(unsigned)input.size(0), kRowThreads, 0, current_stream()>>>(
        input.data_ptr<float>(), out.data_ptr<float>(), input.size(1));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

torch::Tensor softmax_entropy(torch::Tensor x) {
    require_float_cuda(x, "softmax_entropy");
    TORCH_CHECK(x.dim() == 2, "softmax_entropy: expected a 2-D tensor");
    const c10::cuda::CUDAGuard guard(x.device());
    auto input = x.contiguous();
    auto out = torch::empty({input.size(0)}, input.options());
    if (input.numel() == 0) return out;
    softmax_entropy_kernel<<<(unsigned)input.size(0), kRowThreads, 0, current_stream()>>>(
        input.data_ptr<float>(), out.data_ptr<float>(), input.size(1));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

torch::Tensor row_mean(torch::Tensor x) {
    require_float_cuda(x, "row_mean");
    TORCH_CHECK(x.dim() == 2, "row_mean: expected a 2-D tensor");
    const c10::cuda::CUDAGuard guard(x.device());
    auto input = x.contiguous();
    auto out = torch::empty({input.size(0)}, input.options());
    if (input.numel() == 0) return out;
    row_mean_kernel<<<(unsigned)input.size(0), kRowThreads, 0, current_stream()>>>(
        input.data_ptr<float>(), out.data_ptr<float>(), input.size(1));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

torch::Tensor scale_relu(torch::Tensor x, double scale) {
    require_float_cuda(x, "scale_relu");
    const c10::cuda::CUDAGuard guard(x.device());
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    const int64_t n = input.numel();
    if (n == 0) return out;
    scale_relu_kernel<<<elementwise_grid(n), 256, 0, current_stream()>>>(input.data_ptr<float>(),
                                                                          out.data_ptr<float>(), (float)scale, n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

torch::Tensor gate_relu(torch::Tensor x, torch::Tensor y) {
    require_float_cuda(x, "gate_relu");
    require_float_cuda(y, "gate_relu");
    TORCH_CHECK(x.sizes() == y.sizes(), "gate_relu: x and y differ in shape");
    const c10::cuda::CUDAGuard guard(x.device());
    auto a = x.contiguous(), g = y.contiguous();
    auto out = torch::empty_like(a);
    const int64_t n = a.numel();
    if (n == 0) return out;
    gate_relu_kernel<<<elementwise_grid(n), 256, 0, current_stream()>>>(a.data_ptr<float>(), g.data_ptr<float>(),
                                                                         out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
