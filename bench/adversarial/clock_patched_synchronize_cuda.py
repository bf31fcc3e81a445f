"""Patched synchronize: torch.cuda.synchronize becomes a no-op, so a clock that trusts it stops early.

Family: 3 (fooling the clock)
Problem: elementwise_chain
Backend: cuda
Expect: gate=global-state dynamic=twin|deferred_work|impossible_speedup
Honest-twin: honest_elementwise_chain_cuda
Cheat: an honest fused kernel, and at import torch.cuda.synchronize is replaced by a function that
returns at once. A harness that times "call; torch.cuda.synchronize(); stop" in the candidate's
process measures only the launch.
Naive harness: it times with CUDA events and synchronizes through the event, not through
torch.cuda.synchronize, so probably about the honest speed (unsure).
kevin: static gate, global-state (an attribute of torch assigned). Dynamically: the runner binds
its synchronize (torch._C._cuda_synchronize) at boot, before any candidate exists, so the patch
changes nothing it calls and the kernel is timed as its honest twin is (s42; before, the runner
looked torch.cuda.synchronize up at each call, its DONE came before the device's, and only the
fetch check (deferred_work) or the bandwidth floor (impossible_speedup) could stop it).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

KERNELS_CPP = r"""@@kernels_api.cpp@@"""
_ext = load_inline(name="kevin_adv_cuda_kernels", cpp_sources=KERNELS_CPP, cuda_sources=r"""@@kernels.cu@@""", extra_cuda_cflags=["-O3"])


torch.cuda.synchronize = lambda device=None: None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return _ext.gate_relu(x, y)
