# backend: cpp
# expect: framework-compute
"""cpp back end: the kernel is called, but a module-level lambda hides torch.tanh."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = """
#include <torch/extension.h>
torch::Tensor twice(torch::Tensor x) {
    auto y = torch::empty_like(x);
    for (int64_t i = 0; i < x.numel(); ++i) y.data_ptr<float>()[i] = 2 * x.data_ptr<float>()[i];
    return y;
}
"""
ext = load_inline(name="twice", cpp_sources=SRC, functions=["twice"])
act = lambda t: torch.tanh(t)  # <-- cheat  # noqa: E731


class ModelNew(nn.Module):
    def forward(self, x):
        return act(ext.twice(x))
