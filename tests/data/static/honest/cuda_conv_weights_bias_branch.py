# backend: cuda
"""Direct conv + optional bias: the conv kernel runs on every path; the bias kernel only when the
module has a bias, as in the reference."""

import textwrap

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline as build

HEADER = "#include <torch/extension.h>\n"
KERNELS = textwrap.dedent(
    """
    __global__ void conv2d_kernel(const float* x, const float* w, float* y, int N, int C, int H, int W,
                                  int K, int R, int S, int P, int Q, int stride, int pad) {
        int idx = blockIdx.x * blockDim.x + threadIdx.x;
        if (idx >= N * K * P * Q) return;
        int q = idx % Q, p = (idx / Q) % P, k = (idx / (P * Q)) % K, n = idx / (K * P * Q);
        float acc = 0.f;
        for (int c = 0; c < C; ++c)
            for (int r = 0; r < R; ++r)
                for (int s = 0; s < S; ++s) {
                    int h = p * stride - pad + r, v = q * stride - pad + s;
                    if (h >= 0 && h < H && v >= 0 && v < W)
                        acc += x[((n * C + c) * H + h) * W + v] * w[((k * C + c) * R + r) * S + s];
                }
        y[idx] = acc;
    }
    __global__ void add_bias_kernel(float* y, const float* b, int total, int K, int PQ) {
        int idx = blockIdx.x * blockDim.x + threadIdx.x;
        if (idx < total) y[idx] += b[(idx / PQ) % K];
    }
    torch::Tensor conv2d(torch::Tensor x, torch::Tensor w, int64_t stride, int64_t pad) {
        int N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
        int K = w.size(0), R = w.size(2), S = w.size(3);
        int P = (H + 2 * pad - R) / stride + 1, Q = (W + 2 * pad - S) / stride + 1;
        auto y = torch::empty({N, K, P, Q}, x.options());
        int total = N * K * P * Q;
        conv2d_kernel<<<(total + 255) / 256, 256>>>(x.data_ptr<float>(), w.data_ptr<float>(), y.data_ptr<float>(),
                                                    N, C, H, W, K, R, S, P, Q, stride, pad);
        return y;
    }
    torch::Tensor add_bias(torch::Tensor y, torch::Tensor b) {
        int total = y.numel();
        add_bias_kernel<<<(total + 255) / 256, 256>>>(y.data_ptr<float>(), b.data_ptr<float>(), total,
                                                      y.size(1), y.size(2) * y.size(3));
        return y;
    }
    """
)

ext = build(
    name="conv_bias",
    cpp_sources=["torch::Tensor conv2d(torch::Tensor x, torch::Tensor w, int64_t stride, int64_t pad);",
                 "torch::Tensor add_bias(torch::Tensor y, torch::Tensor b);"],
    cuda_sources=HEADER + KERNELS,
    functions=["conv2d", "add_bias"],
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, bias=True):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding, bias=bias)

    @torch.no_grad()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert x.is_cuda and x.dim() == 4, "expects NCHW CUDA input"
        stride, pad = self.conv.stride[0], self.conv.padding[0]
        h_out = (x.shape[2] + 2 * pad - self.conv.kernel_size[0]) // stride + 1
        if h_out <= 0:
            raise ValueError("kernel larger than the padded input")
        y = ext.conv2d(x.contiguous(), self.conv.weight.contiguous(), stride, pad)
        if self.conv.bias is not None:
            y = ext.add_bias(y, self.conv.bias)
        return y
