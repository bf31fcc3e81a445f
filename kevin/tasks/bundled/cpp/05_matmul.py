"""cpp candidate for tasks/05_matmul.py: row-by-row i-p-j loop with a double accumulator row."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <algorithm>
#include <vector>

torch::Tensor matmul(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "matmul: shapes do not match");
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32, "matmul: expected float32");
    auto lhs = a.contiguous();
    auto rhs = b.contiguous();
    const int64_t m = lhs.size(0), k = lhs.size(1), n = rhs.size(1);
    auto output = torch::empty({m, n}, lhs.options());
    const float* ap = lhs.data_ptr<float>();
    const float* bp = rhs.data_ptr<float>();
    float* cp = output.data_ptr<float>();
    // Walking B row by row keeps every inner loop contiguous; the accumulator row is double so the
    // result does not depend on summation order at fp32 tolerance.
    std::vector<double> acc(n);
    for (int64_t i = 0; i < m; ++i) {
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t p = 0; p < k; ++p) {
            const double av = ap[i * k + p];
            const float* brow = bp + p * n;
            for (int64_t j = 0; j < n; ++j) acc[j] += av * brow[j];
        }
        for (int64_t j = 0; j < n; ++j) cp[i * n + j] = static_cast<float>(acc[j]);
    }
    return output;
}
"""

_ext = load_inline(
    name="kevin_bundled_cpp_05_matmul",
    cpp_sources=CPP_SOURCE,
    functions=["matmul"],
    extra_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return _ext.matmul(a, b)
