"""A thread started at import that keeps a core busy for the life of the process (gate off).

The baseline-poisoning attack with a Python thread (the native one is refused at build by the
broker's symbol check): before the judge left the candidate's process, the baseline was timed in
this same process while the thread spun, and cached. Now the judge counts this process's OS threads
from /proc, and times the baseline in a runner that never loaded a candidate, after this one is gone.
"""

import threading

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


def _spin():
    while True:
        pass


threading.Thread(target=_spin, daemon=True).start()

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

_ext = load_inline(name="kevin_isolation_thread_python", cpp_sources=CPP_SOURCE, functions=["gelu_tanh"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.gelu_tanh(x)
