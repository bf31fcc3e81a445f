"""triton candidate for tasks/10_linear_residual_rmsnorm.py: a tiled GEMM against W^T (64x64 output tiles,
K in steps of 32, IEEE fp32 products as in 05_matmul.py) with the residual add of the input in its epilogue,
then one program per row for the RMSNorm (sum of squares, then the scaled row; fp32 over column chunks)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32


@triton.jit
def linear_residual_kernel(
    x_ptr, w_ptr, h_ptr, M, N,
    stride_xm, stride_xk, stride_wn, stride_wk, stride_hm,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    K = N  # the projection is square
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    inner = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + inner
        x = tl.load(
            x_ptr + rows[:, None] * stride_xm + ks[None, :] * stride_xk,
            mask=(rows[:, None] < M) & (ks[None, :] < K),
            other=0.0,
        )
        w_t = tl.load(  # the (K, N) tile of W^T, read from W (N, K) as nn.Linear stores it
            w_ptr + ks[:, None] * stride_wk + cols[None, :] * stride_wn,
            mask=(ks[:, None] < K) & (cols[None, :] < N),
            other=0.0,
        )
        acc += tl.dot(x, w_t, input_precision="ieee")
    tile = (rows[:, None] < M) & (cols[None, :] < N)
    residual = tl.load(x_ptr + rows[:, None] * stride_xm + cols[None, :] * stride_xk, mask=tile, other=0.0)
    tl.store(h_ptr + rows[:, None] * stride_hm + cols[None, :], acc + residual.to(tl.float32), mask=tile)


@triton.jit
def rms_norm_kernel(h_ptr, weight_ptr, out_ptr, n_cols, in_stride, out_stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    h_row = h_ptr + row * in_stride
    out_row = out_ptr + row * out_stride
    columns = tl.arange(0, BLOCK)
    squares = tl.zeros((BLOCK,), dtype=tl.float32)
    for first in range(0, n_cols, BLOCK):
        mask = first + columns < n_cols
        h = tl.load(h_row + first + columns, mask=mask, other=0.0).to(tl.float32)
        squares += h * h
    inv_rms = 1.0 / tl.sqrt(tl.sum(squares, axis=0) / n_cols + eps)
    for first in range(0, n_cols, BLOCK):
        mask = first + columns < n_cols
        h = tl.load(h_row + first + columns, mask=mask, other=0.0).to(tl.float32)
        weight = tl.load(weight_ptr + first + columns, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_row + first + columns, h * inv_rms * weight, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        # Same parameters in the same order as the reference (projection first, then the norm weight).
        self.proj = nn.Linear(hidden, hidden, bias=False)
        self.weight = nn.Parameter(torch.rand(hidden) + 0.5)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        proj = self.proj.weight
        weight = self.weight.contiguous()
        M, N = x.shape
        hidden = torch.empty((M, N), device=x.device, dtype=x.dtype)
        out = torch.empty((M, N), device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
        linear_residual_kernel[grid](
            x, proj, hidden, M, N,
            x.stride(0), x.stride(1), proj.stride(0), proj.stride(1), hidden.stride(0),
            BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=4,
        )  # fmt: skip
        block = min(triton.next_power_of_2(N), 2048)
        rms_norm_kernel[(M,)](
            hidden, weight, out, N, hidden.stride(0), out.stride(0), self.eps, BLOCK=block, num_warps=8
        )
        return out
