"""cpp candidate for tasks/07_linear_silu_layernorm.py: per row, GEMV + bias + SiLU into a buffer, then LayerNorm."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <cmath>
#include <vector>

torch::Tensor linear_silu_layernorm(torch::Tensor x, torch::Tensor weight, torch::Tensor bias,
                                    torch::Tensor gamma, torch::Tensor beta, double eps) {
    TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1), "linear_silu_layernorm: shapes");
    auto input = x.contiguous();
    auto w = weight.contiguous();
    auto b = bias.contiguous();
    auto g = gamma.contiguous();
    auto be = beta.contiguous();
    const int64_t batch = input.size(0), in_f = input.size(1), out_f = w.size(0);
    auto output = torch::empty({batch, out_f}, input.options());
    const float* in = input.data_ptr<float>();
    const float* wp = w.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    const float* gp = g.data_ptr<float>();
    const float* bep = be.data_ptr<float>();
    float* out = output.data_ptr<float>();
    std::vector<float> act(out_f);
    for (int64_t r = 0; r < batch; ++r) {
        const float* xr = in + r * in_f;
        double total = 0.0;
        for (int64_t j = 0; j < out_f; ++j) {
            const float* wr = wp + j * in_f;  // row j of W is column j of W^T: contiguous dot product
            double acc = 0.0;
            for (int64_t p = 0; p < in_f; ++p) acc += static_cast<double>(xr[p]) * wr[p];
            const float h = static_cast<float>(acc) + bp[j];
            const float s = h / (1.0f + std::exp(-h));
            act[j] = s;
            total += s;
        }
        const double mean = total / out_f;
        double squares = 0.0;
        for (int64_t j = 0; j < out_f; ++j) {
            const double d = act[j] - mean;
            squares += d * d;
        }
        const double rstd = 1.0 / std::sqrt(squares / out_f + eps);
        float* dst = out + r * out_f;
        for (int64_t j = 0; j < out_f; ++j) dst[j] = static_cast<float>((act[j] - mean) * rstd * gp[j] + bep[j]);
    }
    return output;
}
"""

_ext = load_inline(
    name="kevin_bundled_cpp_07_linear_silu_layernorm",
    cpp_sources=CPP_SOURCE,
    functions=["linear_silu_layernorm"],
    extra_cflags=["-O3"],
)


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
        return _ext.linear_silu_layernorm(x, self.linear.weight, self.linear.bias,
                                          self.norm.weight, self.norm.bias, self.norm.eps)
