"""Deferred work: forward returns an empty tensor and a detached host thread launches the kernel 2 ms later.

Family: 3 (fooling the clock)
Problem: scale_relu_rand
Backend: cuda
Expect: gate=none dynamic=compile|correctness|deferred_write|extra_threads
Cheat: the C++ function allocates the output, starts a std::thread that sleeps 2 ms and then
launches the kernel on the legacy default stream, and returns at once. A clock that stops when
forward returns and the stream is synchronized sees nothing; a checker that reads the output
later (after its own reference run) finds it filled.
Naive harness: it runs the reference after the candidate on the same device, which usually gives
the thread its 2 ms: correct, with an "infinite" speedup (unsure: depends on scheduling).
kevin: the build broker's symbol check refuses the library (it imports std::thread's start: native
threads), so it never loads (compile; seen on the H200, session 8). Past that, the runner
synchronizes and the judge reads each trial's output at once, before the thread wakes: wrong output
(correctness); the trial-0 output probe sees it change after the call (deferred_write), and the
runner gains OS threads (extra_threads). Its C++ is thread_cheat.cu, apart from the shared
cheats.cu, so the other entries are not refused for its thread.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

THREAD_CPP = r"""@@thread_cheat_api.cpp@@"""
_ext = load_inline(name="kevin_adv_cuda_thread_cheat", cpp_sources=THREAD_CPP, cuda_sources=r"""@@thread_cheat.cu@@""", extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.scale_relu_later(x, self.scale)
