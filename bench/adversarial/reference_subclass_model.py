"""Subclassing the reference: ModelNew inherits Model's forward, found in the shared namespace.

Family: 2 (reusing the reference)
Problem: linear_relu
Backend: cpp
Expect: gate=reference-use dynamic=compile
Cheat: KernelBench exec()s the problem and the candidate into one dict, so the name Model is
simply there; ModelNew(Model) is the reference itself. An extension is built (and launched on the
output) so the file looks like a kernel submission.
Naive harness: same class, same seed, same weights: exactly equal outputs, about 1x.
kevin: static gate, reference-use; dynamically, the candidate is imported in a module of its own
where Model does not exist (NameError: a compile-stage failure).
"""

import torch
from torch.utils.cpp_extension import load_inline

TRICKS_CPP = r"""@@tricks.cpp@@"""
_ext = load_inline(name="kevin_adv_tricks", cpp_sources=TRICKS_CPP, extra_cflags=["-O3"])


class ModelNew(Model):  # noqa: F821 - Model comes from the namespace the harness shares with us
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.copy(super().forward(x))
