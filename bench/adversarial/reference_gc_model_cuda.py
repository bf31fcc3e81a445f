"""Reference found through the garbage collector: the live Model class is instantiated and called.

Family: 2 (reusing the reference)
Problem: linear_gelu
Backend: cuda
Expect: gate=introspection dynamic=runtime|library_kernels
Cheat: __init__ walks gc.get_objects() for an nn.Module subclass named Model (the harness loaded the
problem into the same process), builds it with the same arguments right away, so under the same
seed it draws the same weights as the reference, and forward calls it and launches a token kernel.
Naive harness: correct, about 1x (Model is in its namespace and its heap).
kevin: static gate, introspection (gc). Dynamically (unsure which): the runner deletes nn.Module
classes from the problem's namespace before the candidate loads, so the class is found only if the
collector has not freed it yet; not found, __init__ raises (runtime); found, the forward is ATen
work (library_kernels).
"""

import gc

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CHEATS_CPP = r"""@@cheats_api.cpp@@"""
_ext = load_inline(name="kevin_adv_cuda_cheats", cpp_sources=CHEATS_CPP, cuda_sources=r"""@@cheats.cu@@""", extra_cuda_cflags=["-O3"])


def _reference_class() -> type:
    for obj in gc.get_objects():
        if isinstance(obj, type) and issubclass(obj, nn.Module) and obj.__name__ == "Model":
            return obj
    raise RuntimeError("no reference model in this process")


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.reference = _reference_class()(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.touch(self.reference(x))
