"""triton candidate for tasks/07_linear_silu_layernorm.py: a tiled GEMM against W^T (64x64 output tiles, K in
steps of 32, IEEE fp32 products as in 05_matmul.py) with the bias and SiLU in its epilogue, then one
program per row for the LayerNorm (mean, centred variance, normalize; fp32 passes over column chunks)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32


@triton.jit
def linear_silu_kernel(
    x_ptr, w_ptr, bias_ptr, h_ptr, M, N, K,
    stride_xm, stride_xk, stride_wn, stride_wk, stride_hm,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
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
    h = acc + tl.load(bias_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)[None, :]
    h = h / (1.0 + tl.exp(-h))  # SiLU: h * sigmoid(h)
    tl.store(
        h_ptr + rows[:, None] * stride_hm + cols[None, :],
        h,
        mask=(rows[:, None] < M) & (cols[None, :] < N),
    )


@triton.jit
def layer_norm_kernel(
    h_ptr, gamma_ptr, beta_ptr, out_ptr, n_cols, in_stride, out_stride, eps, BLOCK: tl.constexpr
):
    row = tl.program_id(0).to(tl.int64)
    h_row = h_ptr + row * in_stride
    out_row = out_ptr + row * out_stride
    columns = tl.arange(0, BLOCK)
    total = tl.zeros((BLOCK,), dtype=tl.float32)
    for first in range(0, n_cols, BLOCK):
        mask = first + columns < n_cols
        total += tl.load(h_row + first + columns, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(total, axis=0) / n_cols
    squares = tl.zeros((BLOCK,), dtype=tl.float32)
    for first in range(0, n_cols, BLOCK):
        mask = first + columns < n_cols
        h = tl.load(h_row + first + columns, mask=mask, other=0.0).to(tl.float32)
        centred = tl.where(mask, h - mean, 0.0)
        squares += centred * centred
    rstd = 1.0 / tl.sqrt(tl.sum(squares, axis=0) / n_cols + eps)
    for first in range(0, n_cols, BLOCK):
        mask = first + columns < n_cols
        h = tl.load(h_row + first + columns, mask=mask, other=0.0).to(tl.float32)
        gamma = tl.load(gamma_ptr + first + columns, mask=mask, other=0.0).to(tl.float32)
        beta = tl.load(beta_ptr + first + columns, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_row + first + columns, (h - mean) * rstd * gamma + beta, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        # Same modules, same order, same random calls as the reference: a seed gives the same parameters.
        self.linear = nn.Linear(in_features, out_features)
        self.norm = nn.LayerNorm(out_features, eps=1e-5)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        weight = self.linear.weight
        bias = self.linear.bias.contiguous()
        gamma = self.norm.weight.contiguous()
        beta = self.norm.bias.contiguous()
        M, K = x.shape
        N = weight.shape[0]
        hidden = torch.empty((M, N), device=x.device, dtype=x.dtype)
        out = torch.empty((M, N), device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
        linear_silu_kernel[grid](
            x, weight, bias, hidden, M, N, K,
            x.stride(0), x.stride(1), weight.stride(0), weight.stride(1), hidden.stride(0),
            BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=4,
        )  # fmt: skip
        block = min(triton.next_power_of_2(N), 2048)
        eps = self.norm.eps
        layer_norm_kernel[(M,)](
            hidden, gamma, beta, out, N, hidden.stride(0), out.stride(0), eps, BLOCK=block, num_warps=8
        )
        return out
