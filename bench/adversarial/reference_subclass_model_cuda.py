"""Subclassing the reference: ModelNew(Model) inherits the weights and calls super().forward.

Family: 2 (reusing the reference)
Problem: softmax_entropy
Backend: cuda
Expect: gate=reference-use dynamic=compile
Cheat: KernelBench exec()s the problem and the candidate into one namespace, so `Model` is simply
there; forward is the reference's plus a token launch.
Naive harness: correct, about 1x.
kevin: static gate, reference-use. Dynamically the candidate is imported on its own, without the
problem's names: NameError while loading it (stage compile, as for the cpp twin).
"""

import torch
from torch.utils.cpp_extension import load_inline

CHEATS_CPP = r"""@@cheats_api.cpp@@"""
_ext = load_inline(name="kevin_adv_cuda_cheats", cpp_sources=CHEATS_CPP, cuda_sources=r"""@@cheats.cu@@""", extra_cuda_cflags=["-O3"])


class ModelNew(Model):  # noqa: F821 - found in the harness's shared namespace
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.touch(super().forward(x))
