"""Shrinks the judge's shared area at import (gate off): every memfd it holds, truncated to nothing.

Had the area's size not been sealed, the judge's next read of its mapping would be a SIGBUS: the
judge killed by the candidate instead of a verdict on it. What each attempt gave is left in
`shrink.json` beside the runner for the test to read.
"""

import json
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_attempts = {}
for _name in os.listdir("/proc/self/fd"):
    try:
        _target = os.readlink(f"/proc/self/fd/{_name}")
    except OSError:
        continue
    if _target.startswith("/memfd:kevin-exchange"):
        try:
            os.ftruncate(int(_name), 0)
            _attempts[_name] = "shrunk"
        except OSError as _exc:
            _attempts[_name] = _exc.strerror
with open("shrink.json", "w") as _out:
    json.dump(_attempts, _out)

CPP_SOURCE = r"""
#include <cmath>

torch::Tensor gelu_tanh(torch::Tensor x) {
    auto input = x.contiguous();
    auto output = torch::empty_like(input);
    const float* in = input.data_ptr<float>();
    float* out = output.data_ptr<float>();
    for (int64_t i = 0; i < input.numel(); ++i) {
        const float v = in[i];
        out[i] = 0.5f * v * (1.0f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    }
    return output;
}
"""

_ext = load_inline(name="kevin_isolation_shrink_exchange", cpp_sources=CPP_SOURCE, functions=["gelu_tanh"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.gelu_tanh(x)
