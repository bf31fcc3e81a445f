"""cpp candidate for tasks/10_linear_residual_rmsnorm.py: per row, GEMV + residual into a buffer, then RMSNorm."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <cmath>
#include <vector>

torch::Tensor linear_residual_rmsnorm(torch::Tensor x, torch::Tensor proj, torch::Tensor weight, double eps) {
    TORCH_CHECK(x.dim() == 2 && proj.dim() == 2 && proj.size(0) == x.size(1) && proj.size(1) == x.size(1),
                "linear_residual_rmsnorm: expected x (B, H) and a square (H, H) projection");
    auto input = x.contiguous();
    auto w = proj.contiguous();
    auto g = weight.contiguous();
    const int64_t batch = input.size(0), hidden = input.size(1);
    auto output = torch::empty_like(input);
    const float* in = input.data_ptr<float>();
    const float* wp = w.data_ptr<float>();
    const float* gp = g.data_ptr<float>();
    float* out = output.data_ptr<float>();
    std::vector<float> h(hidden);
    for (int64_t r = 0; r < batch; ++r) {
        const float* xr = in + r * hidden;
        double squares = 0.0;
        for (int64_t j = 0; j < hidden; ++j) {
            const float* wr = wp + j * hidden;
            double acc = 0.0;
            for (int64_t p = 0; p < hidden; ++p) acc += static_cast<double>(xr[p]) * wr[p];
            const float v = static_cast<float>(acc) + xr[j];
            h[j] = v;
            squares += static_cast<double>(v) * v;
        }
        const double inv_rms = 1.0 / std::sqrt(squares / hidden + eps);
        float* dst = out + r * hidden;
        for (int64_t j = 0; j < hidden; ++j) dst[j] = static_cast<float>(h[j] * inv_rms * gp[j]);
    }
    return output;
}
"""

_ext = load_inline(
    name="kevin_bundled_cpp_10_linear_residual_rmsnorm",
    cpp_sources=CPP_SOURCE,
    functions=["linear_residual_rmsnorm"],
    extra_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        # Same parameters in the same order as the reference (projection first, then the norm weight).
        self.proj = nn.Linear(hidden, hidden, bias=False)
        self.weight = nn.Parameter(torch.rand(hidden) + 0.5)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.linear_residual_rmsnorm(x, self.proj.weight, self.weight, self.eps)
