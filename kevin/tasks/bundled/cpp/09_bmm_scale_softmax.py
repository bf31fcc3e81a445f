"""cpp candidate for tasks/09_bmm_scale_softmax.py: per query row, dot products with every key, scale, softmax."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <cmath>

torch::Tensor scores_softmax(torch::Tensor q, torch::Tensor k, double scale) {
    TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && q.size(0) == k.size(0) && q.size(2) == k.size(2),
                "scores_softmax: expected q (B, M, D) and k (B, N, D)");
    auto qc = q.contiguous();
    auto kc = k.contiguous();
    const int64_t batch = qc.size(0), m = qc.size(1), d = qc.size(2), n = kc.size(1);
    auto output = torch::empty({batch, m, n}, qc.options());
    const float* qp = qc.data_ptr<float>();
    const float* kp = kc.data_ptr<float>();
    float* out = output.data_ptr<float>();
    const float scale_f = static_cast<float>(scale);
    for (int64_t b = 0; b < batch; ++b) {
        for (int64_t i = 0; i < m; ++i) {
            const float* qrow = qp + (b * m + i) * d;
            float* dst = out + (b * m + i) * n;
            float row_max = -INFINITY;
            for (int64_t j = 0; j < n; ++j) {
                const float* krow = kp + (b * n + j) * d;
                double acc = 0.0;
                for (int64_t p = 0; p < d; ++p) acc += static_cast<double>(qrow[p]) * krow[p];
                const float s = static_cast<float>(acc) * scale_f;
                dst[j] = s;
                row_max = std::fmax(row_max, s);
            }
            double total = 0.0;
            for (int64_t j = 0; j < n; ++j) {
                const float e = std::exp(dst[j] - row_max);
                dst[j] = e;
                total += e;
            }
            const float inv = static_cast<float>(1.0 / total);
            for (int64_t j = 0; j < n; ++j) dst[j] *= inv;
        }
    }
    return output;
}
"""

_ext = load_inline(
    name="kevin_bundled_cpp_09_bmm_scale_softmax",
    cpp_sources=CPP_SOURCE,
    functions=["scores_softmax"],
    extra_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, head_dim: int):
        super().__init__()
        self.scale = head_dim ** -0.5

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return _ext.scores_softmax(q, k, self.scale)
