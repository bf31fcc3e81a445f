# backend: cuda
# expect: kernel-source-unverifiable
"""The CUDA source is decoded at run time, so nobody can read what it calls."""
import base64

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

BLOB = "I2luY2x1ZGUgPHRvcmNoL2V4dGVuc2lvbi5oPgo="
ext = load_inline(name="blob", cpp_sources="torch::Tensor f(torch::Tensor x);",  # <-- cheat
                  cuda_sources=base64.b64decode(BLOB).decode(), functions=["f"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.f(x)
