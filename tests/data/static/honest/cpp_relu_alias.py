# backend: cpp
"""ReLU on the CPU back end; torch imported as T, the builder reached through the alias."""

import torch as T
from torch import nn

CPP = r"""
#include <torch/extension.h>
#include <algorithm>

// The reference is torch.relu(x); we write the loop. (x.clamp(0) would be cheating.)
torch::Tensor relu_forward(torch::Tensor x) {
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    const float* src = input.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    const int64_t n = input.numel();
    for (int64_t i = 0; i < n; ++i) dst[i] = std::max(src[i], 0.0f);
    return out;
}
"""

relu_ext = T.utils.cpp_extension.load_inline(name="relu_cpp", cpp_sources=CPP, functions=["relu_forward"])


class ModelNew(nn.Module):
    def forward(self, x: T.Tensor) -> T.Tensor:
        out = relu_ext.relu_forward(x)
        return out.view_as(x)
