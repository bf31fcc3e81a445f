"""Writes the throughput benchmark's candidate set (bench/eval_throughput.py) and its manifest.

    python bench/candidates/throughput/generate.py        # rewrites the *.py candidates and manifest.json
    python bench/candidates/throughput/generate.py DIR    # writes them into DIR instead (a check)

Every candidate is a KernelBench-style file of its own: a ModelNew that builds its CUDA with
load_inline at import (`#include <torch/extension.h>`, functions declared in cpp_sources), as a
model would write it. The set mixes correct kernels, correct-but-slow ones, wrong results (wrong
formula, wrong index, missing term, a bad launch) and compile errors (typos, wrong types, a
declaration that does not match its definition). Each file is a distinct source with a distinct
extension name, so no two share a build.

The manifest records, per candidate, the problem file (relative to a KernelBench directory), the
kind (correct, slow, wrong, compile_error) and the verdict we expect (correct, wrong,
compile_error), with a note saying what is wrong where something is. Expectations are ours, made
by reading the code against the reference; the benchmark reports where either harness disagrees.

After them come the hang candidates (kind hang, expected verdict timeout: `hang_catalogue`): each
builds and passes the static gate, and its first call never returns (a kernel spinning on a flag, a
host loop in forward, two deadlocks). They join a benchmark pass only with `--hangs`.

Problems are KernelBench level 1-2 ones whose inputs are moderate (tens to hundreds of MB) and whose
reference runs in milliseconds on an H200: matmuls, a diagonal scaling, LayerNorm, GELU, cross
entropy, and GEMM fusions (1024 x 8192 by 8192 x 8192) where the candidate writes the GEMM too.

Why one file of ~1450 lines: most of it is the candidates' CUDA texts, data written out as code;
the generating logic is a small loop at the end.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

HEADER = r"""#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
"""

# -- GEMM building blocks ---------------------------------------------------------------------------
# C (M x N) = epilogue(A (M x K) @ op(B)), op(B) = B^T when B is N x K ("nk", nn.Linear's weight),
# B when it is K x N ("kn"). The epilogue sees the accumulator, the column and the fusion's
# parameters (two per-column vectors and three scalars, unused ones ignored).

EPI_PARAMS = "const float* __restrict__ b0, const float* __restrict__ b1, float s0, float s1, float s2"
EPI_ARGS = "b0, b1, s0, s1, s2"


def tiled_kernel(layout: str, tile: int, tile_k: int, micro: int) -> str:
    """A register-blocked shared-memory GEMM: 256 threads, each owning micro x micro outputs."""
    if layout == "nk":
        load_b = """        for (int l = 0; l < (TN * TK) / THREADS; ++l) {
            const int idx = tid + l * THREADS;
            const int p = idx % TK, j = idx / TK;
            const int gj = col0 + j, gk = k0 + p;
            Bs[p][j] = (gj < N && gk < K) ? B[(int64_t)gj * K + gk] : 0.0f;
        }"""
    else:
        load_b = """        for (int l = 0; l < (TN * TK) / THREADS; ++l) {
            const int idx = tid + l * THREADS;
            const int j = idx % TN, p = idx / TN;
            const int gj = col0 + j, gk = k0 + p;
            Bs[p][j] = (gj < N && gk < K) ? B[(int64_t)gk * N + gj] : 0.0f;
        }"""
    return f"""
constexpr int TM = {tile}, TN = {tile}, TK = {tile_k}, THREADS = 256, MICRO = {micro};

// Each block computes a TM x TN tile of C; thread (tx, ty) owns rows ty + 16 r and columns tx + 16 c.
__global__ void __launch_bounds__(THREADS) gemm_tiled_kernel(
    const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
    int M, int N, int K, {EPI_PARAMS}) {{
    __shared__ float As[TK][TM + 4];
    __shared__ float Bs[TK][TN + 4];
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int row0 = blockIdx.y * TM, col0 = blockIdx.x * TN;
    float acc[MICRO][MICRO];
#pragma unroll
    for (int r = 0; r < MICRO; ++r)
#pragma unroll
        for (int c = 0; c < MICRO; ++c) acc[r][c] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += TK) {{
        for (int l = 0; l < (TM * TK) / THREADS; ++l) {{
            const int idx = tid + l * THREADS;
            const int p = idx % TK, i = idx / TK;
            const int gi = row0 + i, gk = k0 + p;
            As[p][i] = (gi < M && gk < K) ? A[(int64_t)gi * K + gk] : 0.0f;
        }}
{load_b}
        __syncthreads();
#pragma unroll
        for (int p = 0; p < TK; ++p) {{
            float a[MICRO], b[MICRO];
#pragma unroll
            for (int r = 0; r < MICRO; ++r) a[r] = As[p][ty + 16 * r];
#pragma unroll
            for (int c = 0; c < MICRO; ++c) b[c] = Bs[p][tx + 16 * c];
#pragma unroll
            for (int r = 0; r < MICRO; ++r)
#pragma unroll
                for (int c = 0; c < MICRO; ++c) acc[r][c] = fmaf(a[r], b[c], acc[r][c]);
        }}
        __syncthreads();
    }}
#pragma unroll
    for (int r = 0; r < MICRO; ++r) {{
        const int gi = row0 + ty + 16 * r;
        if (gi >= M) continue;
#pragma unroll
        for (int c = 0; c < MICRO; ++c) {{
            const int gj = col0 + tx + 16 * c;
            if (gj < N) C[(int64_t)gi * N + gj] = epilogue(acc[r][c], gj, {EPI_ARGS});
        }}
    }}
}}
"""


def tiled_launch() -> str:
    return f"""    const dim3 grid((unsigned)((N + TN - 1) / TN), (unsigned)((M + TM - 1) / TM));
    gemm_tiled_kernel<<<grid, THREADS, 0, stream>>>(A.data_ptr<float>(), B.data_ptr<float>(), C.data_ptr<float>(),
                                                    (int)M, (int)N, (int)K, {EPI_ARGS});"""


def smem_kernel(layout: str) -> str:
    """The textbook 32 x 32 shared-memory tile, one output per thread."""
    if layout == "nk":
        load_b = """        const int bn = blockIdx.x * TILE + threadIdx.y, bk = k0 + threadIdx.x;
        Bs[threadIdx.x][threadIdx.y] = (bn < N && bk < K) ? B[(int64_t)bn * K + bk] : 0.0f;"""
    else:
        load_b = """        const int bk = k0 + threadIdx.y;
        Bs[threadIdx.y][threadIdx.x] = (bk < K && col < N) ? B[(int64_t)bk * N + col] : 0.0f;"""
    return f"""
constexpr int TILE = 32;

__global__ void gemm_smem_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                                 int M, int N, int K, {EPI_PARAMS}) {{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE + 1];
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {{
        const int ak = k0 + threadIdx.x;
        As[threadIdx.y][threadIdx.x] = (row < M && ak < K) ? A[(int64_t)row * K + ak] : 0.0f;
{load_b}
        __syncthreads();
#pragma unroll 8
        for (int p = 0; p < TILE; ++p) acc = fmaf(As[threadIdx.y][p], Bs[p][threadIdx.x], acc);
        __syncthreads();
    }}
    if (row < M && col < N) C[(int64_t)row * N + col] = epilogue(acc, col, {EPI_ARGS});
}}
"""


def smem_launch() -> str:
    return f"""    const dim3 block(TILE, TILE);
    const dim3 grid((unsigned)((N + TILE - 1) / TILE), (unsigned)((M + TILE - 1) / TILE));
    gemm_smem_kernel<<<grid, block, 0, stream>>>(A.data_ptr<float>(), B.data_ptr<float>(), C.data_ptr<float>(),
                                                 (int)M, (int)N, (int)K, {EPI_ARGS});"""


def naive_kernel(layout: str, k_bound: str = "K") -> str:
    """One thread per output and a plain loop over K: correct, and slow."""
    b_index = "(int64_t)col * K + k" if layout == "nk" else "(int64_t)k * N + col"
    return f"""
constexpr int NAIVE_THREADS = 256;

// blockIdx.x walks the rows so the blocks resident at once share the same columns of B in L2.
__global__ void gemm_naive_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                                  int M, int N, int K, {EPI_PARAMS}) {{
    const int row = blockIdx.x;
    const int col = blockIdx.y * NAIVE_THREADS + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < {k_bound}; ++k) acc += A[(int64_t)row * K + k] * B[{b_index}];
    C[(int64_t)row * N + col] = epilogue(acc, col, {EPI_ARGS});
}}
"""


def naive_launch() -> str:
    return f"""    const dim3 grid((unsigned)M, (unsigned)((N + NAIVE_THREADS - 1) / NAIVE_THREADS));
    gemm_naive_kernel<<<grid, NAIVE_THREADS, 0, stream>>>(A.data_ptr<float>(), B.data_ptr<float>(), C.data_ptr<float>(),
                                                         (int)M, (int)N, (int)K, {EPI_ARGS});"""


GEMM_VARIANTS = {
    "tiled128": (lambda layout: tiled_kernel(layout, 128, 8, 8), tiled_launch),
    "tiled64": (lambda layout: tiled_kernel(layout, 64, 16, 4), tiled_launch),
    "smem32": (smem_kernel, smem_launch),
    "naive": (naive_kernel, naive_launch),
}

# -- the problems: how each fusion maps onto the GEMM -----------------------------------------------


class Fusion:
    """One problem's GEMM plus epilogue: its function signature, what feeds the epilogue, ModelNew."""

    def __init__(self, problem, function, layout, params, prelude, epilogue, init, forward_args, doc, post=None):
        self.problem = problem
        self.function = function
        self.layout = layout
        self.params = params  # C++ parameters after (a, b)
        self.prelude = prelude  # C++ lines that define b0, b1, s0, s1, s2 from the parameters
        self.epilogue = epilogue  # body of the epilogue device function
        self.init = init  # ModelNew.__init__ (signature line and body)
        self.forward_args = forward_args  # Python arguments of the extension call in forward
        self.doc = doc
        self.post = post  # (CUDA kernels, C++ lines run after the GEMM and returning the result)


MATMUL_PRELUDE = """    const float* b0 = nullptr;
    const float* b1 = nullptr;
    const float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f;"""

MATMUL_INIT = """    def __init__(self):
        super().__init__()
"""


def linear_init(args: str, body: str) -> str:
    return f"""    def __init__(self, {args}):
        super().__init__()
{body}"""


BIAS_PRELUDE = """    auto bias_c = bias.contiguous();
    const float* b0 = bias_c.data_ptr<float>();
    const float* b1 = nullptr;"""

GELU_ERF = "0.5f * y * (1.0f + erff(y * 0.70710678118654752f))"

FUSIONS = {
    "L1_1": Fusion(
        "level1/1_Square_matrix_multiplication_.py", "matmul", "kn", "", MATMUL_PRELUDE, "    return v;",
        MATMUL_INIT, "A, B", "C = A @ B for square float32 matrices",
    ),
    "L1_2": Fusion(
        "level1/2_Standard_matrix_multiplication_.py", "matmul", "kn", "", MATMUL_PRELUDE, "    return v;",
        MATMUL_INIT, "A, B", "C = A @ B, (M, K) by (K, N)",
    ),
    "L1_10": Fusion(
        "level1/10_3D_tensor_matrix_multiplication.py", "tensor_matmul", "kn", "", MATMUL_PRELUDE,
        "    return v;", MATMUL_INIT, "A, B", "(N, M, K) @ (K, L): the leading dims flattened into rows",
    ),
    "L1_17": Fusion(
        "level1/17_Matmul_with_transposed_B.py", "matmul_bt", "nk", "", MATMUL_PRELUDE, "    return v;",
        MATMUL_INIT, "A, B", "C = A @ B.T with B stored (N, K)",
    ),
    "L2_76": Fusion(
        "level2/76_Gemm_Add_ReLU.py", "gemm_add_relu", "nk", ", torch::Tensor bias", BIAS_PRELUDE
        + "\n    const float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f;",
        "    const float y = v + b0[col];\n    return y > 0.0f ? y : 0.0f;",
        linear_init(
            "in_features, out_features, bias_shape",
            "        self.gemm = nn.Linear(in_features, out_features, bias=False)\n"
            "        self.bias = nn.Parameter(torch.randn(bias_shape))\n",
        ),
        "x, self.gemm.weight, self.bias", "relu(x @ W^T + bias)",
    ),
    "L2_63": Fusion(
        "level2/63_Gemm_ReLU_Divide.py", "gemm_relu_div", "nk", ", torch::Tensor bias, double divisor",
        BIAS_PRELUDE + "\n    const float s0 = (float)divisor, s1 = 0.0f, s2 = 0.0f;",
        "    const float y = fmaxf(v + b0[col], 0.0f);\n    return y / s0;",
        linear_init(
            "in_features, out_features, divisor",
            "        self.linear = nn.Linear(in_features, out_features)\n        self.divisor = divisor\n",
        ),
        "x, self.linear.weight, self.linear.bias, self.divisor", "relu(x @ W^T + b) / divisor",
    ),
    "L2_12": Fusion(
        "level2/12_Gemm_Multiply_LeakyReLU.py", "gemm_mul_leaky", "nk",
        ", torch::Tensor bias, double multiplier, double slope",
        BIAS_PRELUDE + "\n    const float s0 = (float)multiplier, s1 = (float)slope, s2 = 0.0f;",
        "    const float y = (v + b0[col]) * s0;\n    return y >= 0.0f ? y : y * s1;",
        linear_init(
            "in_features, out_features, multiplier, negative_slope",
            "        self.gemm = nn.Linear(in_features, out_features)\n"
            "        self.multiplier = multiplier\n        self.negative_slope = negative_slope\n",
        ),
        "x, self.gemm.weight, self.gemm.bias, self.multiplier, self.negative_slope",
        "leaky_relu((x @ W^T + b) * multiplier)",
    ),
    "L2_86": Fusion(
        "level2/86_Matmul_Divide_GELU.py", "gemm_div_gelu", "nk", ", torch::Tensor bias, double divisor",
        BIAS_PRELUDE + "\n    const float s0 = (float)divisor, s1 = 0.0f, s2 = 0.0f;",
        f"    const float y = (v + b0[col]) / s0;\n    return {GELU_ERF};",
        linear_init(
            "input_size, output_size, divisor",
            "        self.linear = nn.Linear(input_size, output_size)\n        self.divisor = divisor\n",
        ),
        "x, self.linear.weight, self.linear.bias, self.divisor", "gelu((x @ W^T + b) / divisor), exact erf GELU",
    ),
    "L2_70": Fusion(
        "level2/70_Gemm_Sigmoid_Scaling_ResidualAdd.py", "gemm_sigmoid_residual", "nk",
        ", torch::Tensor bias, double scaling",
        BIAS_PRELUDE + "\n    const float s0 = (float)scaling, s1 = 0.0f, s2 = 0.0f;",
        "    const float y = v + b0[col];\n    const float sig = 1.0f / (1.0f + expf(-y));\n    return sig * s0 + y;",
        linear_init(
            "input_size, hidden_size, scaling_factor",
            "        self.gemm = nn.Linear(input_size, hidden_size)\n        self.scaling_factor = scaling_factor\n",
        ),
        "x, self.gemm.weight, self.gemm.bias, self.scaling_factor", "h = x @ W^T + b; sigmoid(h) * scale + h",
    ),
    "L2_29": Fusion(
        "level2/29_Matmul_Mish_Mish.py", "gemm_mish_mish", "nk", ", torch::Tensor bias",
        BIAS_PRELUDE + "\n    const float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f;",
        "    const float y = mish(v + b0[col]);\n    return mish(y);",
        linear_init(
            "in_features, out_features", "        self.linear = nn.Linear(in_features, out_features)\n"
        ),
        "x, self.linear.weight, self.linear.bias", "mish(mish(x @ W^T + b))",
    ),
    "L2_81": Fusion(
        "level2/81_Gemm_Swish_Divide_Clamp_Tanh_Clamp.py", "gemm_swish_tanh", "nk", ", torch::Tensor bias",
        BIAS_PRELUDE + "\n    const float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f;",
        "    float y = v + b0[col];\n    y = y / (1.0f + expf(-y));\n    y = y / 2.0f;\n"
        "    y = fminf(fmaxf(y, -1.0f), 1.0f);\n    y = tanhf(y);\n    return fminf(fmaxf(y, -1.0f), 1.0f);",
        linear_init(
            "in_features, out_features, bias=True",
            "        self.gemm = nn.Linear(in_features, out_features, bias=bias)\n",
        ),
        "x, self.gemm.weight, self.gemm.bias", "clamp(tanh(clamp(swish(x @ W^T + b) / 2)))",
    ),
    "L2_95": Fusion(
        "level2/95_Matmul_Add_Swish_Tanh_GELU_Hardtanh.py", "gemm_add_act_chain", "nk",
        ", torch::Tensor bias, torch::Tensor add_value",
        """    auto bias_c = bias.contiguous();
    auto add_c = add_value.contiguous();
    const float* b0 = bias_c.data_ptr<float>();
    const float* b1 = add_c.data_ptr<float>();
    const float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f;""",
        "    float y = v + b0[col] + b1[col];\n    y = y / (1.0f + expf(-y));\n    y = tanhf(y);\n"
        f"    y = {GELU_ERF};\n    return fminf(fmaxf(y, -1.0f), 1.0f);",
        linear_init(
            "in_features, out_features, add_value_shape",
            "        self.matmul = nn.Linear(in_features, out_features)\n"
            "        self.add_value = nn.Parameter(torch.randn(add_value_shape))\n",
        ),
        "x, self.matmul.weight, self.matmul.bias, self.add_value",
        "hardtanh(gelu(tanh(swish(x @ W^T + b + add))))",
    ),
}

BLOCK_REDUCE = r"""
__device__ __forceinline__ float warp_max(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

// Reductions over the block (blockDim.x a multiple of 32); every thread gets the result.
__device__ float block_max(float v) {
    __shared__ float part[33];
    __syncthreads();
    v = warp_max(v);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (int)(blockDim.x >> 5) ? part[lane] : -INFINITY;
        v = warp_max(v);
        if (lane == 0) part[32] = v;
    }
    __syncthreads();
    return part[32];
}

__device__ float block_sum(float v) {
    __shared__ float part[33];
    __syncthreads();
    v = warp_sum(v);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (int)(blockDim.x >> 5) ? part[lane] : 0.0f;
        v = warp_sum(v);
        if (lane == 0) part[32] = v;
    }
    __syncthreads();
    return part[32];
}
"""

SOFTMAX_ROWS = r"""
// In place, one block per row: max, then the sum of exp(x - max), then the normalized values.
__global__ void softmax_rows_kernel(float* data, int64_t cols) {
    float* row = data + (int64_t)blockIdx.x * cols;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, row[j]);
    m = block_max(m);
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += expf(row[j] - m);
    const float inv = 1.0f / block_sum(s);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) row[j] = expf(row[j] - m) * inv;
}
"""

SOFTMAX_SERIAL = r"""
// In place, one thread per row, three serial passes over its row.
__global__ void softmax_rows_kernel(float* data, int64_t rows, int64_t cols) {
    const int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float* row = data + r * cols;
    float m = -INFINITY;
    for (int64_t j = 0; j < cols; ++j) m = fmaxf(m, row[j]);
    float s = 0.0f;
    for (int64_t j = 0; j < cols; ++j) s += expf(row[j] - m);
    for (int64_t j = 0; j < cols; ++j) row[j] = expf(row[j] - m) / s;
}
"""

LSE_MISH_ROWS = r"""
__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// One block per row: logsumexp over the row, then out = lse * mish(lse).
__global__ void lse_mish_rows_kernel(const float* __restrict__ h, float* __restrict__ out, int64_t cols) {
    const float* row = h + (int64_t)blockIdx.x * cols;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, row[j]);
    m = block_max(m);
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += expf(row[j] - m);
    s = block_sum(s);
    if (threadIdx.x == 0) {
        const float lse = m + logf(s);
        out[blockIdx.x] = lse * (lse * tanhf(softplus(lse)));
    }
}
"""

FUSIONS["L2_99"] = Fusion(
    "level2/99_Matmul_GELU_Softmax.py", "gemm_gelu_softmax", "nk", ", torch::Tensor bias",
    BIAS_PRELUDE + "\n    const float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f;",
    f"    const float y = v + b0[col];\n    return {GELU_ERF};",
    linear_init("in_features, out_features", "        self.linear = nn.Linear(in_features, out_features)\n"),
    "x, self.linear.weight, self.linear.bias", "softmax(gelu(x @ W^T + b), dim=1): GEMM with GELU, then rows",
    post=(
        BLOCK_REDUCE + SOFTMAX_ROWS,
        """    softmax_rows_kernel<<<(unsigned)M, 512, 0, stream>>>(C.data_ptr<float>(), N);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return C;""",
    ),
)

FUSIONS["L2_22"] = Fusion(
    "level2/22_Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish.py", "gemm_clamp_lse_mish", "nk",
    ", torch::Tensor bias, double scale, double clamp_min, double clamp_max",
    BIAS_PRELUDE + "\n    const float s0 = (float)scale, s1 = (float)clamp_min, s2 = (float)clamp_max;",
    "    float y = (v + b0[col]) * s0;\n    y = y + y;\n    return fminf(fmaxf(y, s1), s2);",
    linear_init(
        "input_size, hidden_size, scale_factor, clamp_min, clamp_max",
        "        self.matmul = nn.Linear(input_size, hidden_size)\n        self.scale_factor = scale_factor\n"
        "        self.clamp_min = clamp_min\n        self.clamp_max = clamp_max\n",
    ),
    "x, self.matmul.weight, self.matmul.bias, self.scale_factor, self.clamp_min, self.clamp_max",
    "h = clamp(2 * scale * (x @ W^T + b)); lse = logsumexp(h, 1); lse * mish(lse)",
    post=(
        BLOCK_REDUCE + LSE_MISH_ROWS,
        """    auto out = torch::empty({M, 1}, A.options());
    lse_mish_rows_kernel<<<(unsigned)M, 512, 0, stream>>>(C.data_ptr<float>(), out.data_ptr<float>(), N);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;""",
    ),
)

MISH = """
__device__ __forceinline__ float mish(float x) {
    const float sp = x > 20.0f ? x : log1pf(expf(x));
    return x * tanhf(sp);
}
"""


def gemm_candidate(fusion: Fusion, variant: str, ext_name: str, doc: str, *, epilogue: str | None = None,
                   mutate=None, post=None, extra_device: str = "", declaration: str | None = None) -> str:
    """The CUDA + Python source of one GEMM candidate; `mutate` edits the CUDA text (for the
    wrong and compile-error variants)."""
    kernel, launch = GEMM_VARIANTS[variant]
    epilogue_body = epilogue if epilogue is not None else fusion.epilogue
    post = post if post is not None else fusion.post
    device_helpers = extra_device + (MISH if "mish(" in epilogue_body else "")
    n_dim, k_dim = ("0", "1") if fusion.layout == "nk" else ("1", "0")
    post_kernels, finish = post if post else ("", "    return C;")
    cuda = (
        HEADER
        + device_helpers
        + f"""
__device__ __forceinline__ float epilogue(float v, int col, {EPI_PARAMS}) {{
{epilogue_body}
}}
"""
        + kernel(fusion.layout)
        + post_kernels
        + f"""
torch::Tensor {fusion.function}(torch::Tensor a, torch::Tensor b{fusion.params}) {{
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), "{fusion.function}: expected CUDA tensors");
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32,
                "{fusion.function}: expected float32 tensors");
    TORCH_CHECK(b.dim() == 2, "{fusion.function}: the second operand must be 2-D");
    auto A = a.contiguous();
    auto B = b.contiguous();
    const int64_t K = A.size(-1);
    const int64_t M = A.numel() / K;
    const int64_t N = B.size({n_dim});
    TORCH_CHECK(B.size({k_dim}) == K, "{fusion.function}: inner dimensions differ");
    auto out_sizes = A.sizes().vec();
    out_sizes.back() = N;
    auto C = torch::empty(out_sizes, A.options());
{fusion.prelude}
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
{launch()}
    C10_CUDA_KERNEL_LAUNCH_CHECK();
{finish}
}}
"""
    )
    if mutate is not None:
        mutated = mutate(cuda)
        assert mutated != cuda, f"mutation changed nothing in {ext_name}"
        cuda = mutated
    default_declaration = f"torch::Tensor {fusion.function}(torch::Tensor a, torch::Tensor b{fusion.params});"
    forward_sig = "A, B" if fusion.forward_args.startswith("A, B") else "x"
    return python_file(doc, declaration if declaration is not None else default_declaration, cuda, ext_name, fusion.function, fusion.init,
                       f"    def forward(self, {forward_sig}):\n        return ext.{fusion.function}({fusion.forward_args})\n")


def python_file(doc: str, declaration: str, cuda: str, ext_name: str, function: str, init: str, forward: str) -> str:
    return f'''"""{doc}"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = "{declaration}"

cuda_source = r"""
{cuda.strip()}
"""

ext = load_inline(
    name="{ext_name}",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["{function}"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
{init}
{forward}'''


def replace(old: str, new: str, count: int = 1):
    def edit(text: str) -> str:
        assert old in text, f"{old!r} not in the source"
        return text.replace(old, new, count)

    return edit


# -- the hand-written (non-GEMM) candidates --------------------------------------------------------

DIAG_HOST_CHECKS = """    TORCH_CHECK(a.is_cuda() && b.is_cuda(), "diag_matmul: expected CUDA tensors");
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32, "diag_matmul: expected float32");
    TORCH_CHECK(a.dim() == 1 && b.dim() == 2 && a.size(0) == b.size(0), "diag_matmul: expected (N,) and (N, M)");
    auto d = a.contiguous();
    auto B = b.contiguous();
    auto out = torch::empty_like(B);
    const int64_t rows = B.size(0), cols = B.size(1);
    const int64_t total = rows * cols;
    if (total == 0) return out;
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();"""

DIAG_ELEMENTWISE = HEADER + r"""
// out[i, j] = d[i] * b[i, j], one thread per element (grid-stride for very large inputs).
__global__ void diag_scale_kernel(const float* __restrict__ d, const float* __restrict__ b, float* __restrict__ out,
                                  int64_t total, int64_t cols) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        out[i] = d[i / cols] * b[i];
    }
}

torch::Tensor diag_matmul(torch::Tensor a, torch::Tensor b) {
""" + DIAG_HOST_CHECKS + r"""
    const int threads = 256;
    int64_t blocks = (total + threads - 1) / threads;
    if (blocks > (1 << 20)) blocks = 1 << 20;
    diag_scale_kernel<<<(unsigned)blocks, threads, 0, stream>>>(d.data_ptr<float>(), B.data_ptr<float>(),
                                                                 out.data_ptr<float>(), total, cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

DIAG_VEC4 = HEADER + r"""
// One block per row; the row's scale is read once and the row is moved as float4.
__global__ void diag_rows_vec4_kernel(const float* __restrict__ d, const float4* __restrict__ b,
                                      float4* __restrict__ out, int64_t cols4) {
    const float s = d[blockIdx.x];
    const float4* src = b + (int64_t)blockIdx.x * cols4;
    float4* dst = out + (int64_t)blockIdx.x * cols4;
    for (int64_t j = threadIdx.x; j < cols4; j += blockDim.x) {
        float4 v = src[j];
        v.x *= s;
        v.y *= s;
        v.z *= s;
        v.w *= s;
        dst[j] = v;
    }
}

__global__ void diag_rows_scalar_kernel(const float* __restrict__ d, const float* __restrict__ b,
                                        float* __restrict__ out, int64_t cols) {
    const float s = d[blockIdx.x];
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        out[(int64_t)blockIdx.x * cols + j] = s * b[(int64_t)blockIdx.x * cols + j];
    }
}

torch::Tensor diag_matmul(torch::Tensor a, torch::Tensor b) {
""" + DIAG_HOST_CHECKS + r"""
    const bool aligned = cols % 4 == 0 && reinterpret_cast<uintptr_t>(B.data_ptr<float>()) % 16 == 0 &&
                         reinterpret_cast<uintptr_t>(out.data_ptr<float>()) % 16 == 0;
    if (aligned) {
        diag_rows_vec4_kernel<<<(unsigned)rows, 256, 0, stream>>>(
            d.data_ptr<float>(), reinterpret_cast<const float4*>(B.data_ptr<float>()),
            reinterpret_cast<float4*>(out.data_ptr<float>()), cols / 4);
    } else {
        diag_rows_scalar_kernel<<<(unsigned)rows, 256, 0, stream>>>(d.data_ptr<float>(), B.data_ptr<float>(),
                                                                     out.data_ptr<float>(), cols);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

DIAG_ROW_PER_THREAD = HEADER + r"""
// One thread per row walks its whole row.
__global__ void diag_row_kernel(const float* __restrict__ d, const float* __restrict__ b, float* __restrict__ out,
                                int64_t rows, int64_t cols) {
    const int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float s = d[r];
    for (int64_t j = 0; j < cols; ++j) out[r * cols + j] = s * b[r * cols + j];
}

torch::Tensor diag_matmul(torch::Tensor a, torch::Tensor b) {
""" + DIAG_HOST_CHECKS + r"""
    const int threads = 128;
    diag_row_kernel<<<(unsigned)((rows + threads - 1) / threads), threads, 0, stream>>>(
        d.data_ptr<float>(), B.data_ptr<float>(), out.data_ptr<float>(), rows, cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

GELU_TANH = r"""
__device__ __forceinline__ float new_gelu(float x) {
    const float k = 0.7978845608028654f;  // sqrt(2 / pi)
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}
"""

GELU_HOST_CHECKS = """    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "new_gelu: expected a float32 CUDA tensor");
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    const int64_t n = input.numel();
    if (n == 0) return out;
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();"""

GELU_SCALAR = HEADER + GELU_TANH + r"""
__global__ void new_gelu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = new_gelu(x[i]);
}

torch::Tensor new_gelu_forward(torch::Tensor x) {
""" + GELU_HOST_CHECKS + r"""
    const int threads = 256;
    new_gelu_kernel<<<(unsigned)((n + threads - 1) / threads), threads, 0, stream>>>(
        input.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

GELU_VEC4 = HEADER + GELU_TANH + r"""
__global__ void new_gelu_vec4_kernel(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 v = x[i];
        v.x = new_gelu(v.x);
        v.y = new_gelu(v.y);
        v.z = new_gelu(v.z);
        v.w = new_gelu(v.w);
        y[i] = v;
    }
}

__global__ void new_gelu_tail_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t begin, int64_t n) {
    const int64_t i = begin + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = new_gelu(x[i]);
}

torch::Tensor new_gelu_forward(torch::Tensor x) {
""" + GELU_HOST_CHECKS + r"""
    const int threads = 256;
    const int64_t n4 = n / 4;
    if (n4 > 0) {
        int64_t blocks = (n4 + threads - 1) / threads;
        if (blocks > 65536) blocks = 65536;
        new_gelu_vec4_kernel<<<(unsigned)blocks, threads, 0, stream>>>(
            reinterpret_cast<const float4*>(input.data_ptr<float>()), reinterpret_cast<float4*>(out.data_ptr<float>()), n4);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    if (n4 * 4 < n) {
        new_gelu_tail_kernel<<<1, threads, 0, stream>>>(input.data_ptr<float>(), out.data_ptr<float>(), n4 * 4, n);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return out;
}
"""


def gelu_grid_stride(blocks_expr: str, threads: int, comment: str) -> str:
    return HEADER + GELU_TANH + f"""
// {comment}
__global__ void new_gelu_strided_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {{
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) y[i] = new_gelu(x[i]);
}}

torch::Tensor new_gelu_forward(torch::Tensor x) {{
{GELU_HOST_CHECKS}
    int device = 0, sms = 0;
    C10_CUDA_CHECK(cudaGetDevice(&device));
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    const int blocks = {blocks_expr};
    new_gelu_strided_kernel<<<blocks, {threads}, 0, stream>>>(input.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}}
"""


LAYERNORM_HOST_CHECKS = """    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "layer_norm: expected CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "layer_norm: expected float32");
    auto input = x.contiguous();
    auto w = weight.contiguous();
    auto b = bias.contiguous();
    const int64_t cols = w.numel();
    TORCH_CHECK(b.numel() == cols && cols > 0 && input.numel() % cols == 0, "layer_norm: shape mismatch");
    const int64_t rows = input.numel() / cols;
    auto out = torch::empty_like(input);
    if (rows == 0) return out;
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();"""

LAYERNORM_THREE_PASS = HEADER + r"""
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

// Pass 3: normalize every element with its row's statistics, then the affine transform.
__global__ void normalize_kernel(const float* __restrict__ x, const float2* __restrict__ stats,
                                 const float* __restrict__ w, const float* __restrict__ b, float* __restrict__ y,
                                 int64_t total, int64_t cols) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const int64_t row = i / cols, col = i - row * cols;
        const float2 st = stats[row];
        y[i] = (x[i] - st.x) * st.y * w[col] + b[col];
    }
}

torch::Tensor layer_norm(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
""" + LAYERNORM_HOST_CHECKS + r"""
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
    int64_t blocks = (total + THREADS - 1) / THREADS;
    if (blocks > 65536) blocks = 65536;
    normalize_kernel<<<(unsigned)blocks, THREADS, 0, stream>>>(input.data_ptr<float>(),
                                                               reinterpret_cast<const float2*>(stats.data_ptr<float>()),
                                                               w.data_ptr<float>(), b.data_ptr<float>(),
                                                               out.data_ptr<float>(), total, cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""


def layernorm_per_segment(segment_expr: str, comment: str) -> str:
    """One block per `segment` of elements: statistics over the segment, then normalize it."""
    return HEADER + f"""
constexpr int THREADS = 1024;

__device__ __forceinline__ double warp_sum_d(double v) {{
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}}

// Sum over the block in double; every thread gets the total.
__device__ double block_sum_d(double v) {{
    __shared__ double part[THREADS / 32 + 1];
    __syncthreads();
    v = warp_sum_d(v);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {{
        v = part[lane];
        v = warp_sum_d(v);
        if (lane == 0) part[THREADS / 32] = v;
    }}
    __syncthreads();
    return part[THREADS / 32];
}}

// {comment}
__global__ void __launch_bounds__(THREADS) layer_norm_segment_kernel(
    const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
    float* __restrict__ y, int64_t segment, int64_t cols, double eps) {{
    const int64_t start = (int64_t)blockIdx.x * segment;
    double s = 0.0, q = 0.0;
    for (int64_t j = threadIdx.x; j < segment; j += THREADS) {{
        const double v = x[start + j];
        s += v;
        q += v * v;
    }}
    s = block_sum_d(s);
    q = block_sum_d(q);
    const double mean = s / (double)segment;
    double var = q / (double)segment - mean * mean;
    if (var < 0.0) var = 0.0;
    const float m = (float)mean, rstd = (float)(1.0 / sqrt(var + eps));
    for (int64_t j = threadIdx.x; j < segment; j += THREADS) {{
        const int64_t col = (start + j) % cols;
        y[start + j] = (x[start + j] - m) * rstd * w[col] + b[col];
    }}
}}

torch::Tensor layer_norm(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {{
{LAYERNORM_HOST_CHECKS}
    const int64_t segment = {segment_expr};
    layer_norm_segment_kernel<<<(unsigned)(input.numel() / segment), THREADS, 0, stream>>>(
        input.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), segment, cols, eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}}
"""


CE_HOST_CHECKS = """    TORCH_CHECK(logits.is_cuda() && targets.is_cuda(), "cross_entropy: expected CUDA tensors");
    TORCH_CHECK(logits.scalar_type() == torch::kFloat32 && logits.dim() == 2, "cross_entropy: expected (B, C) float32");
    TORCH_CHECK(targets.scalar_type() == torch::kInt64 && targets.numel() == logits.size(0),
                "cross_entropy: expected (B,) int64 targets");
    auto x = logits.contiguous();
    auto t = targets.contiguous();
    const int64_t rows = x.size(0), cols = x.size(1);
    auto row_loss = torch::empty({rows}, x.options());
    auto out = torch::empty(std::vector<int64_t>{}, x.options());
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();"""

CE_MEAN = r"""
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
"""


def ce_block_per_row(threads: int, divide: str = "true") -> str:
    return HEADER + BLOCK_REDUCE + CE_MEAN + r"""
// One block per row: loss = logsumexp(x) - x[target].
__global__ void row_loss_kernel(const float* __restrict__ x, const int64_t* __restrict__ t, float* __restrict__ loss,
                                int64_t cols) {
    const float* row = x + (int64_t)blockIdx.x * cols;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, row[j]);
    m = block_max(m);
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += expf(row[j] - m);
    s = block_sum(s);
    if (threadIdx.x == 0) loss[blockIdx.x] = m + logf(s) - row[t[blockIdx.x]];
}

torch::Tensor cross_entropy(torch::Tensor logits, torch::Tensor targets) {
""" + CE_HOST_CHECKS + f"""
    row_loss_kernel<<<(unsigned)rows, {threads}, 0, stream>>>(x.data_ptr<float>(), t.data_ptr<int64_t>(),
                                                          row_loss.data_ptr<float>(), cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    mean_kernel<<<1, 1024, 0, stream>>>(row_loss.data_ptr<float>(), out.data_ptr<float>(), rows, {divide});
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}}
"""


CE_WARP_PER_ROW = HEADER + CE_MEAN + r"""
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
""" + CE_HOST_CHECKS + r"""
    row_loss_warp_kernel<<<(unsigned)((rows + WARPS - 1) / WARPS), WARPS * 32, 0, stream>>>(
        x.data_ptr<float>(), t.data_ptr<int64_t>(), row_loss.data_ptr<float>(), rows, cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    mean_kernel<<<1, 1024, 0, stream>>>(row_loss.data_ptr<float>(), out.data_ptr<float>(), rows, true);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

CE_THREAD_PER_ROW = HEADER + CE_MEAN + r"""
// One thread per row: max, then sum of exp, then the loss, all serial over the row.
__global__ void row_loss_serial_kernel(const float* __restrict__ x, const int64_t* __restrict__ t,
                                       float* __restrict__ loss, int64_t rows, int64_t cols) {
    const int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* row = x + r * cols;
    float m = -INFINITY;
    for (int64_t j = 0; j < cols; ++j) m = fmaxf(m, row[j]);
    float s = 0.0f;
    for (int64_t j = 0; j < cols; ++j) s += expf(row[j] - m);
    loss[r] = m + logf(s) - row[t[r]];
}

torch::Tensor cross_entropy(torch::Tensor logits, torch::Tensor targets) {
""" + CE_HOST_CHECKS + r"""
    row_loss_serial_kernel<<<(unsigned)((rows + 127) / 128), 128, 0, stream>>>(
        x.data_ptr<float>(), t.data_ptr<int64_t>(), row_loss.data_ptr<float>(), rows, cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    mean_kernel<<<1, 1024, 0, stream>>>(row_loss.data_ptr<float>(), out.data_ptr<float>(), rows, true);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""


# -- the catalogue -----------------------------------------------------------------------------------

MATMUL_FORWARD = "    def forward(self, A, B):\n        return ext.{fn}(A, B)\n"
LAYERNORM_INIT = """    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)
"""
LAYERNORM_FORWARD = "    def forward(self, x):\n        return ext.layer_norm(x, self.ln.weight, self.ln.bias, self.ln.eps)\n"
GELU_FORWARD = "    def forward(self, x):\n        return ext.new_gelu_forward(x)\n"
CE_FORWARD = "    def forward(self, predictions, targets):\n        return ext.cross_entropy(predictions, targets)\n"

DECLARATIONS = {
    "diag_matmul": "torch::Tensor diag_matmul(torch::Tensor a, torch::Tensor b);",
    "new_gelu_forward": "torch::Tensor new_gelu_forward(torch::Tensor x);",
    "layer_norm": "torch::Tensor layer_norm(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps);",
    "cross_entropy": "torch::Tensor cross_entropy(torch::Tensor logits, torch::Tensor targets);",
}

PROBLEMS = {
    "L1_12": "level1/12_Matmul_with_diagonal_matrices_.py",
    "L1_40": "level1/40_LayerNorm.py",
    "L1_88": "level1/88_MinGPTNewGelu.py",
    "L1_95": "level1/95_CrossEntropyLoss.py",
}
PROBLEMS.update({key: fusion.problem for key, fusion in FUSIONS.items()})


def handwritten(problem: str, function: str, cuda: str, ext_name: str, doc: str, init: str, forward: str,
                mutate=None, declaration: str | None = None) -> str:
    if mutate is not None:
        mutated = mutate(cuda)
        assert mutated != cuda, f"mutation changed nothing in {ext_name}"
        cuda = mutated
    return python_file(doc, declaration or DECLARATIONS[function], cuda, ext_name, function, init, forward)


def catalogue() -> list[dict]:
    """(name, problem key, kind, expected verdict, note, source) for every candidate."""
    rows: list[dict] = []

    def add(name: str, key: str, kind: str, note: str, source: str) -> None:
        expected = {"correct": "correct", "slow": "correct", "wrong": "wrong", "compile_error": "compile_error"}[kind]
        rows.append({"name": name, "key": key, "kind": kind, "expected": expected, "note": note, "source": source})

    def gemm(name: str, key: str, kind: str, variant: str, note: str, **options) -> None:
        fusion = FUSIONS[key]
        doc = f"{key} ({Path(fusion.problem).stem}): {fusion.doc}; {variant} GEMM kernel written here."
        add(name, key, kind, note, gemm_candidate(fusion, variant, f"tp_{name}", doc, **options))

    # Level 1 matmuls.
    gemm("l1_01_tiled128", "L1_1", "correct", "tiled128", "")
    gemm("l1_01_smem32", "L1_1", "correct", "smem32", "")
    gemm("l1_01_b_transposed", "L1_1", "wrong", "tiled128",
         "reads B as if it were stored transposed (B[j][k] for B[k][j])",
         mutate=replace("B[(int64_t)gk * N + gj]", "B[(int64_t)gj * K + gk]"))
    gemm("l1_01_tensor_as_pointer", "L1_1", "compile_error", "tiled128",
         "passes the tensor A where the kernel takes const float*",
         mutate=replace("<<<grid, THREADS, 0, stream>>>(A.data_ptr<float>(),", "<<<grid, THREADS, 0, stream>>>(A,"))
    gemm("l1_02_tiled64", "L1_2", "correct", "tiled64", "")
    gemm("l1_02_naive", "L1_2", "slow", "naive", "one thread per output, no tiling")
    gemm("l1_02_k_off_by_one", "L1_2", "wrong", "naive", "the K loop stops one short (k < K - 1)",
         mutate=replace("for (int k = 0; k < K; ++k)", "for (int k = 0; k < K - 1; ++k)"))
    gemm("l1_10_tiled128", "L1_10", "correct", "tiled128", "")
    gemm("l1_10_naive", "L1_10", "slow", "naive", "one thread per output, no tiling")
    gemm("l1_10_missing_semicolon", "L1_10", "compile_error", "tiled64", "a statement without its semicolon",
         mutate=replace("const int64_t K = A.size(-1);", "const int64_t K = A.size(-1)"))
    gemm("l1_17_tiled128", "L1_17", "correct", "tiled128", "")
    gemm("l1_17_smem32", "L1_17", "correct", "smem32", "")
    gemm("l1_17_untransposed", "L1_17", "wrong", "smem32",
         "indexes B as (K, N) although it is stored (N, K); same shapes, other values",
         mutate=replace("B[(int64_t)bn * K + bk]", "B[(int64_t)bk * N + bn]"))
    gemm("l1_17_undeclared", "L1_17", "compile_error", "tiled128", "uses n where the variable is N",
         mutate=replace("const dim3 grid((unsigned)((N + TN - 1) / TN)", "const dim3 grid((unsigned)((n + TN - 1) / TN)"))

    # Level 1 hand-written ones.
    diag_doc = "L1_12 (diag(A) @ B): out[i, j] = A[i] * B[i, j]"
    diag_forward = MATMUL_FORWARD.format(fn="diag_matmul")
    add("l1_12_elementwise", "L1_12", "correct", "", handwritten(
        "L1_12", "diag_matmul", DIAG_ELEMENTWISE, "tp_l1_12_elementwise", diag_doc + ", one thread per element.",
        MATMUL_INIT, diag_forward))
    add("l1_12_rows_vec4", "L1_12", "correct", "", handwritten(
        "L1_12", "diag_matmul", DIAG_VEC4, "tp_l1_12_rows_vec4", diag_doc + ", a block per row, float4.",
        MATMUL_INIT, diag_forward))
    add("l1_12_row_per_thread", "L1_12", "slow", "one thread walks a whole row (uncoalesced)", handwritten(
        "L1_12", "diag_matmul", DIAG_ROW_PER_THREAD, "tp_l1_12_row_per_thread", diag_doc + ", a thread per row.",
        MATMUL_INIT, diag_forward))
    add("l1_12_column_scale", "L1_12", "wrong", "scales columns (A[j]) instead of rows (A[i])", handwritten(
        "L1_12", "diag_matmul", DIAG_ELEMENTWISE, "tp_l1_12_column_scale", diag_doc + ", one thread per element.",
        MATMUL_INIT, diag_forward, mutate=replace("out[i] = d[i / cols] * b[i];", "out[i] = d[i % cols] * b[i];")))

    ln_doc = "L1_40 (LayerNorm over the last three dims, 4M elements per row)"
    add("l1_40_three_pass", "L1_40", "correct", "", handwritten(
        "L1_40", "layer_norm", LAYERNORM_THREE_PASS, "tp_l1_40_three_pass",
        ln_doc + ": chunk statistics in double, per-row finalize, elementwise normalize.", LAYERNORM_INIT,
        LAYERNORM_FORWARD))
    add("l1_40_block_per_row", "L1_40", "slow", "one block per row: 16 blocks on a 132-SM GPU", handwritten(
        "L1_40", "layer_norm", layernorm_per_segment("cols", "One block per row: statistics, then normalize."),
        "tp_l1_40_block_per_row", ln_doc + ": one block per row.", LAYERNORM_INIT, LAYERNORM_FORWARD))
    add("l1_40_last_dim_only", "L1_40", "wrong", "normalizes over the last dim (256) instead of all three",
        handwritten("L1_40", "layer_norm",
                    layernorm_per_segment("input.size(-1)", "One block per segment of the last dimension."),
                    "tp_l1_40_last_dim_only", ln_doc + ": one block per segment.", LAYERNORM_INIT,
                    LAYERNORM_FORWARD))
    add("l1_40_const_write", "L1_40", "compile_error", "writes the result through the const input pointer",
        handwritten("L1_40", "layer_norm", LAYERNORM_THREE_PASS, "tp_l1_40_const_write",
                    ln_doc + ": normalized in place.", LAYERNORM_INIT, LAYERNORM_FORWARD,
                    mutate=replace("        y[i] = (x[i] - st.x) * st.y * w[col] + b[col];",
                                   "        x[i] = (x[i] - st.x) * st.y * w[col] + b[col];")))

    gelu_doc = "L1_88 (MinGPT new GELU, tanh form)"
    add("l1_88_scalar", "L1_88", "correct", "", handwritten(
        "L1_88", "new_gelu_forward", GELU_SCALAR, "tp_l1_88_scalar", gelu_doc + ": one thread per element.",
        MATMUL_INIT, GELU_FORWARD))
    add("l1_88_vec4", "L1_88", "correct", "", handwritten(
        "L1_88", "new_gelu_forward", GELU_VEC4, "tp_l1_88_vec4", gelu_doc + ": float4 grid-stride loop.",
        MATMUL_INIT, GELU_FORWARD))
    add("l1_88_grid_stride", "L1_88", "correct", "", handwritten(
        "L1_88", "new_gelu_forward", gelu_grid_stride("sms * 8", 256, "A grid of 8 blocks per SM walks the tensor."),
        "tp_l1_88_grid_stride", gelu_doc + ": grid sized to the GPU.", MATMUL_INIT, GELU_FORWARD))
    add("l1_88_few_blocks", "L1_88", "slow", "32 blocks for 67M elements", handwritten(
        "L1_88", "new_gelu_forward", gelu_grid_stride("32", 256, "A small fixed grid walks the tensor."),
        "tp_l1_88_few_blocks", gelu_doc + ": a small fixed grid.", MATMUL_INIT, GELU_FORWARD))
    add("l1_88_missing_half", "L1_88", "wrong", "drops the 0.5 factor", handwritten(
        "L1_88", "new_gelu_forward", GELU_SCALAR, "tp_l1_88_missing_half", gelu_doc + ": one thread per element.",
        MATMUL_INIT, GELU_FORWARD, mutate=replace("return 0.5f * x * (1.0f", "return x * (1.0f")))
    add("l1_88_tanhff", "L1_88", "compile_error", "calls tanhff (no such function)", handwritten(
        "L1_88", "new_gelu_forward", GELU_VEC4, "tp_l1_88_tanhff", gelu_doc + ": float4 grid-stride loop.",
        MATMUL_INIT, GELU_FORWARD, mutate=replace("tanhf(k *", "tanhff(k *")))

    ce_doc = "L1_95 (cross entropy, mean over 32768 rows of 4096 classes)"
    add("l1_95_block_per_row", "L1_95", "correct", "", handwritten(
        "L1_95", "cross_entropy", ce_block_per_row(256), "tp_l1_95_block_per_row",
        ce_doc + ": a block per row, then a one-block mean.", MATMUL_INIT, CE_FORWARD))
    add("l1_95_warp_per_row", "L1_95", "correct", "", handwritten(
        "L1_95", "cross_entropy", CE_WARP_PER_ROW, "tp_l1_95_warp_per_row",
        ce_doc + ": a warp per row with an online logsumexp.", MATMUL_INIT, CE_FORWARD))
    add("l1_95_thread_per_row", "L1_95", "slow", "one thread per row, serial over 4096 classes", handwritten(
        "L1_95", "cross_entropy", CE_THREAD_PER_ROW, "tp_l1_95_thread_per_row", ce_doc + ": a thread per row.",
        MATMUL_INIT, CE_FORWARD))
    add("l1_95_sum_not_mean", "L1_95", "wrong", "returns the sum of the row losses, not their mean", handwritten(
        "L1_95", "cross_entropy", ce_block_per_row(512, divide="false"), "tp_l1_95_sum_not_mean",
        ce_doc + ": a block per row, then a one-block reduction.", MATMUL_INIT, CE_FORWARD))
    add("l1_95_block_2048", "L1_95", "wrong", "launches 2048 threads per block: the launch fails at run time",
        handwritten("L1_95", "cross_entropy", ce_block_per_row(2048), "tp_l1_95_block_2048",
                    ce_doc + ": a block per row, then a one-block mean.", MATMUL_INIT, CE_FORWARD))
    add("l1_95_declaration_mismatch", "L1_95", "compile_error",
        "cpp_sources declares a signature the CUDA source never defines (undefined symbol at load)",
        handwritten("L1_95", "cross_entropy", CE_WARP_PER_ROW, "tp_l1_95_declaration_mismatch",
                    ce_doc + ": a warp per row with an online logsumexp.", MATMUL_INIT, CE_FORWARD,
                    declaration="torch::Tensor cross_entropy(torch::Tensor logits, torch::Tensor targets, int64_t classes);"))

    # Level 2: GEMM fusions.
    gemm("l2_76_fused", "L2_76", "correct", "tiled128", "")
    gemm("l2_76_epilogue_kernel", "L2_76", "correct", "tiled64", "",
         epilogue="    return v;",
         post=(r"""
__global__ void bias_relu_kernel(float* __restrict__ c, const float* __restrict__ bias, int64_t total, int64_t cols) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const float y = c[i] + bias[i % cols];
        c[i] = y > 0.0f ? y : 0.0f;
    }
}
""", """    bias_relu_kernel<<<4096, 256, 0, stream>>>(C.data_ptr<float>(), b0, M * N, N);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return C;"""))
    gemm("l2_76_no_bias", "L2_76", "wrong", "tiled128", "forgets the bias before the ReLU",
         epilogue="    return v > 0.0f ? v : 0.0f;")
    gemm("l2_76_missing_brace", "L2_76", "compile_error", "tiled128", "a loop body missing its closing brace",
         mutate=replace("            Bs[p][j] = (gj < N && gk < K) ? B[(int64_t)gj * K + gk] : 0.0f;\n        }",
                        "            Bs[p][j] = (gj < N && gk < K) ? B[(int64_t)gj * K + gk] : 0.0f;\n"))
    gemm("l2_63_fused", "L2_63", "correct", "tiled128", "")
    gemm("l2_63_naive", "L2_63", "slow", "naive", "one thread per output reading W row-wise (uncoalesced)")
    gemm("l2_63_multiply", "L2_63", "wrong", "tiled128", "multiplies by the divisor instead of dividing",
         epilogue="    const float y = fmaxf(v + b0[col], 0.0f);\n    return y * s0;")
    gemm("l2_63_double_pointer", "L2_63", "compile_error", "tiled64",
         "passes a double* bias to a const float* parameter",
         mutate=replace("const float* b0 = bias_c.data_ptr<float>();", "const double* b0 = bias_c.data_ptr<double>();"))
    gemm("l2_12_fused", "L2_12", "correct", "tiled128", "")
    gemm("l2_12_smem32", "L2_12", "correct", "smem32", "")
    gemm("l2_12_slope_swapped", "L2_12", "wrong", "tiled64", "applies the negative slope to the positive side",
         epilogue="    const float y = (v + b0[col]) * s0;\n    return y >= 0.0f ? y * s1 : y;")
    gemm("l2_22_fused", "L2_22", "correct", "tiled128", "")
    gemm("l2_22_naive", "L2_22", "slow", "naive", "one thread per output reading W row-wise (uncoalesced)")
    gemm("l2_22_no_residual", "L2_22", "wrong", "tiled128", "drops the x + x (scales once)",
         epilogue="    float y = (v + b0[col]) * s0;\n    return fminf(fmaxf(y, s1), s2);")
    gemm("l2_86_fused", "L2_86", "correct", "tiled128", "")
    gemm("l2_86_tiled64", "L2_86", "correct", "tiled64", "")
    gemm("l2_86_no_divisor", "L2_86", "wrong", "tiled128", "forgets to divide by the divisor",
         epilogue=f"    const float y = v + b0[col];\n    return {GELU_ERF};")
    gemm("l2_70_fused", "L2_70", "correct", "tiled128", "")
    gemm("l2_70_two_kernels", "L2_70", "correct", "smem32", "",
         epilogue="    return v + b0[col];",
         post=(r"""
__global__ void sigmoid_residual_kernel(float* __restrict__ h, int64_t total, float scale) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const float y = h[i];
        h[i] = y + scale / (1.0f + expf(-y));
    }
}
""", """    sigmoid_residual_kernel<<<4096, 256, 0, stream>>>(C.data_ptr<float>(), M * N, s0);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return C;"""))
    gemm("l2_70_no_residual", "L2_70", "wrong", "tiled64", "forgets the residual add",
         epilogue="    const float y = v + b0[col];\n    return s0 / (1.0f + expf(-y));")
    gemm("l2_99_fused", "L2_99", "correct", "tiled128", "")
    gemm("l2_99_serial_softmax", "L2_99", "slow", "tiled64", "softmax with one thread per row, serial",
         post=(BLOCK_REDUCE + SOFTMAX_SERIAL, """    softmax_rows_kernel<<<(unsigned)((M + 127) / 128), 128, 0, stream>>>(C.data_ptr<float>(), M, N);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return C;"""))
    gemm("l2_99_shfl_missing_mask", "L2_99", "compile_error", "tiled128", "__shfl_xor_sync called without its mask",
         mutate=replace("v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));", "v = fmaxf(v, __shfl_xor_sync(v, offset));"))
    gemm("l2_29_fused", "L2_29", "correct", "tiled128", "")
    gemm("l2_29_tiled64", "L2_29", "correct", "tiled64", "")
    gemm("l2_29_single_mish", "L2_29", "wrong", "tiled128", "applies Mish once",
         epilogue="    return mish(v + b0[col]);")
    gemm("l2_81_fused", "L2_81", "correct", "tiled128", "")
    gemm("l2_81_divide_first", "L2_81", "wrong", "tiled64", "halves before the Swish instead of after",
         epilogue="    float y = (v + b0[col]) / 2.0f;\n    y = y / (1.0f + expf(-y));\n"
                  "    y = fminf(fmaxf(y, -1.0f), 1.0f);\n    y = tanhf(y);\n    return fminf(fmaxf(y, -1.0f), 1.0f);")
    gemm("l2_81_float32_type", "L2_81", "compile_error", "tiled128", "data_ptr<float32>: no such type in C++",
         mutate=replace("C.data_ptr<float>(),\n", "C.data_ptr<float32>(),\n"))
    gemm("l2_95_fused", "L2_95", "correct", "tiled128", "")
    gemm("l2_95_smem32", "L2_95", "correct", "smem32", "")
    gemm("l2_95_naive", "L2_95", "slow", "naive", "one thread per output reading W row-wise (uncoalesced)")
    return rows


# -- the hang candidates (bench/eval_throughput.py --hangs) ------------------------------------------
# Each compiles, passes the static gate and loads; its first call never returns, so only kevin's
# per-call deadline (kevin.evaluator.worker.handle.call_deadline_s) ends it: the runner is killed and
# the result is stage "timeout", blamed on the candidate. Three ways to never return: a GPU spin (a
# kernel waiting for a flag nothing sets), a host loop (Python, in forward), and two deadlocks (blocks
# of one grid waiting for blocks that cannot start; the host waiting for a kernel that waits for it).

GELU_GPU_SPIN = HEADER + GELU_TANH + r"""
// Each block waits at its start until the go flag is raised, then applies GELU to its slice. The
// flag was to be raised by the host once the launch was queued; nothing ever raises it.
__global__ void new_gelu_gated_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n,
                                      const volatile int* go) {
    if (threadIdx.x == 0) {
        while (*go == 0) {
        }
    }
    __syncthreads();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = new_gelu(x[i]);
}

torch::Tensor new_gelu_forward(torch::Tensor x) {
""" + GELU_HOST_CHECKS + r"""
    auto go = torch::zeros({1}, input.options().dtype(torch::kInt32));
    const int threads = 256;
    new_gelu_gated_kernel<<<(unsigned)((n + threads - 1) / threads), threads, 0, stream>>>(
        input.data_ptr<float>(), out.data_ptr<float>(), n, go.data_ptr<int>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

HOST_LOOP_INIT = """    def __init__(self):
        super().__init__()
        self.ready = False
"""
HOST_LOOP_FORWARD = """    def forward(self, A, B):
        out = ext.diag_matmul(A, B)
        # Hand the result on once it is marked ready; nothing ever marks it.
        while not self.ready:
            pass
        return out
"""

CE_GRID_BARRIER = HEADER + BLOCK_REDUCE + r"""
// One block per row writes its loss (logsumexp(x) - x[target]); the blocks then meet at a grid-wide
// barrier (an arrival counter) so that block 0 can take the mean. With one block per row (32768) most
// blocks are not resident: those that are spin at the barrier, and the others never start.
__global__ void row_loss_barrier_kernel(const float* __restrict__ x, const int64_t* __restrict__ t,
                                        float* __restrict__ loss, float* __restrict__ out, int64_t cols,
                                        unsigned int* arrived) {
    const float* row = x + (int64_t)blockIdx.x * cols;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, row[j]);
    m = block_max(m);
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += expf(row[j] - m);
    s = block_sum(s);
    if (threadIdx.x == 0) {
        loss[blockIdx.x] = m + logf(s) - row[t[blockIdx.x]];
        __threadfence();
        atomicAdd(arrived, 1u);
        while (atomicAdd(arrived, 0u) < gridDim.x) {
        }
    }
    __syncthreads();
    if (blockIdx.x == 0) {
        float total = 0.0f;
        for (int64_t i = threadIdx.x; i < (int64_t)gridDim.x; i += blockDim.x) total += loss[i];
        total = block_sum(total);
        if (threadIdx.x == 0) out[0] = total / (float)gridDim.x;
    }
}

torch::Tensor cross_entropy(torch::Tensor logits, torch::Tensor targets) {
""" + CE_HOST_CHECKS + r"""
    auto arrived = torch::zeros({1}, x.options().dtype(torch::kInt32));
    row_loss_barrier_kernel<<<(unsigned)rows, 256, 0, stream>>>(
        x.data_ptr<float>(), t.data_ptr<int64_t>(), row_loss.data_ptr<float>(), out.data_ptr<float>(), cols,
        reinterpret_cast<unsigned int*>(arrived.data_ptr<int>()));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""


def layernorm_host_waits() -> str:
    """LAYERNORM_THREE_PASS whose normalize pass waits for a release flag the host writes only after
    it has waited for the stream to drain: the host waits for the kernel, the kernel for the host."""
    edits = [
        replace("""                                 int64_t total, int64_t cols) {
    const int64_t stride""", """                                 int64_t total, int64_t cols, const volatile int* released) {
    if (threadIdx.x == 0) {
        while (*released == 0) {
        }
    }
    __syncthreads();
    const int64_t stride"""),
        replace("// Pass 3: normalize every element with its row's statistics, then the affine transform.",
                "// Pass 3: once the host releases it, normalize every element with its row's statistics, then the\n"
                "// affine transform."),
        replace("""    const int64_t total = rows * cols;
""", """    const int64_t total = rows * cols;
    auto released = torch::zeros({1}, input.options().dtype(torch::kInt32));
"""),
        replace("""                                                               out.data_ptr<float>(), total, cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;""", """                                                               out.data_ptr<float>(), total, cols,
                                                               released.data_ptr<int>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    // The statistics are final once the stream has drained: then release the normalize pass.
    C10_CUDA_CHECK(cudaStreamSynchronize(stream));
    C10_CUDA_CHECK(cudaMemsetAsync(released.data_ptr<int>(), 1, sizeof(int), stream));
    return out;"""),
    ]
    cuda = LAYERNORM_THREE_PASS
    for edit in edits:
        cuda = edit(cuda)
    return cuda


def hang_catalogue() -> list[dict]:
    """The hang candidates, in catalogue()'s row format: kind "hang", expected verdict "timeout" (what
    kevin's EvalResult says of a call that never returns). manifest.json lists them after the others;
    bench/eval_throughput.py runs them only with --hangs."""
    rows: list[dict] = []

    def add(name: str, key: str, note: str, source: str) -> None:
        rows.append({"name": name, "key": key, "kind": "hang", "expected": "timeout", "note": note, "source": source})

    add("l1_88_gpu_spin", "L1_88", "GPU spin: every block waits for a go flag nothing sets", handwritten(
        "L1_88", "new_gelu_forward", GELU_GPU_SPIN, "tp_l1_88_gpu_spin",
        "L1_88 (MinGPT new GELU, tanh form): one thread per element, each block gated by a go flag.",
        MATMUL_INIT, GELU_FORWARD))
    add("l1_12_host_loop", "L1_12", "host loop: forward polls a Python flag nothing sets", handwritten(
        "L1_12", "diag_matmul", DIAG_ELEMENTWISE, "tp_l1_12_host_loop",
        "L1_12 (diag(A) @ B): out[i, j] = A[i] * B[i, j], one thread per element, handed on when ready.",
        HOST_LOOP_INIT, HOST_LOOP_FORWARD))
    add("l1_95_grid_barrier", "L1_95",
        "deadlock between blocks: a grid-wide barrier in a grid of 32768 blocks, most never resident",
        handwritten("L1_95", "cross_entropy", CE_GRID_BARRIER, "tp_l1_95_grid_barrier",
                    "L1_95 (cross entropy, mean over 32768 rows of 4096 classes): a block per row, a grid "
                    "barrier, then block 0 takes the mean.", MATMUL_INIT, CE_FORWARD))
    add("l1_40_host_waits", "L1_40",
        "deadlock between host and device: the host drains the stream before releasing the kernel in it",
        handwritten("L1_40", "layer_norm", layernorm_host_waits(), "tp_l1_40_host_waits",
                    "L1_40 (LayerNorm over the last three dims, 4M elements per row): three passes, the "
                    "last released by the host.", LAYERNORM_INIT, LAYERNORM_FORWARD))
    return rows


def main(out: Path = HERE) -> None:
    """Write every candidate and manifest.json into `out` (this folder by default): catalogue()'s rows,
    then hang_catalogue()'s."""
    rows = catalogue() + hang_catalogue()
    names = [row["name"] for row in rows]
    assert len(set(names)) == len(names), "candidate names must be unique"
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("l[12]_*.py"):
        old.unlink()
    manifest = []
    for row in rows:
        (out / f"{row['name']}.py").write_text(row["source"])
        manifest.append(
            {
                "id": row["name"],
                "problem": PROBLEMS[row["key"]],
                "problem_id": row["key"],
                "candidate": f"{row['name']}.py",
                "kind": row["kind"],
                "expected": row["expected"],
                "note": row["note"],
            }
        )
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["kind"]] = counts.get(row["kind"], 0) + 1
    print(f"{len(rows)} candidates over {len({r['key'] for r in rows})} problems: {counts}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
