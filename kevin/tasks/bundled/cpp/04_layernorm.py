"""cpp candidate for tasks/04_layernorm.py: two-pass mean and variance per row in double."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <cmath>

torch::Tensor layer_norm_rows(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
    TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32, "layer_norm_rows: expected a 2-D float32 tensor");
    auto input = x.contiguous();
    auto w = weight.contiguous();
    auto b = bias.contiguous();
    const int64_t rows = input.size(0);
    const int64_t cols = input.size(1);
    TORCH_CHECK(w.numel() == cols && b.numel() == cols, "layer_norm_rows: weight/bias size mismatch");
    auto output = torch::empty_like(input);
    const float* in = input.data_ptr<float>();
    const float* wp = w.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    float* out = output.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = in + r * cols;
        float* dst = out + r * cols;
        double total = 0.0;
        for (int64_t c = 0; c < cols; ++c) total += row[c];
        const double mean = total / cols;
        double squares = 0.0;
        for (int64_t c = 0; c < cols; ++c) {
            const double d = row[c] - mean;
            squares += d * d;
        }
        const double rstd = 1.0 / std::sqrt(squares / cols + eps);
        for (int64_t c = 0; c < cols; ++c) {
            dst[c] = static_cast<float>((row[c] - mean) * rstd * wp[c] + bp[c]);
        }
    }
    return output;
}
"""

_ext = load_inline(
    name="kevin_bundled_cpp_04_layernorm",
    cpp_sources=CPP_SOURCE,
    functions=["layer_norm_rows"],
    extra_cflags=["-O3"],
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
