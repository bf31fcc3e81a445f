"""Memo by content: outputs keyed by a sample of the input's values, returned when the sample repeats.

Family: 5 (reusing results)
Problem: softmax_rows
Backend: cuda
Honest-twin: honest_softmax_rows_cuda
Expect: gate=none dynamic=twin|runtime
Cheat: the key is 8 values read from the input (one per 1024 rows of column 0); a hit returns the
stored output after a one-row token launch, a miss runs the honest softmax and stores it. Right on
every input that shares the sampled values with one seen before.
Naive harness: it times the input it checked: every timed call is a hit.
kevin: every timed call gets a fresh draw of the inputs, so no key repeats: the honest kernel runs
(plus a small device-to-host read for the key) and it passes at about its twin's speed, or, where
the device is smaller than its memo of every output it has made (s44, an 80 GB H100), fails at run
time out of memory, alone on the device: `runtime` is its own doing.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

KERNELS_CPP = r"""@@kernels_api.cpp@@"""
_ext = load_inline(name="kevin_adv_cuda_kernels", cpp_sources=KERNELS_CPP, cuda_sources=r"""@@kernels.cu@@""", extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.memo: dict[tuple, torch.Tensor] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = tuple(x[::1024, 0].tolist())
        if key in self.memo:
            _ext.softmax_rows(x[:1])
            return self.memo[key]
        out = _ext.softmax_rows(x)
        self.memo[key] = out
        return out
