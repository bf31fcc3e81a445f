"""A native thread started at library load that keeps a core busy (the baseline-poisoning attack).

A static constructor in the C++ starts a std::thread (no `pthread` name in the source) that spins
for the life of the process. Before the judge left the candidate's process, the baseline was timed
in this same process, slowed by the spinning thread, and cached: every later candidate of the task
inherited the inflated baseline. Now the baseline is timed in a runner that never loaded a
candidate, after this one is gone, and the judge counts this process's OS threads from /proc.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <atomic>
#include <cmath>
#include <thread>

static std::atomic<unsigned long> spins{0};

static int start_spinner() {
    std::thread([] { for (;;) spins.fetch_add(1, std::memory_order_relaxed); }).detach();
    return 0;
}
static int started = start_spinner();

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

_ext = load_inline(name="kevin_isolation_thread_spin", cpp_sources=CPP_SOURCE, functions=["gelu_tanh"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.gelu_tanh(x)
