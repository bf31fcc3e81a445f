"""Dies mid-forward after printing a fake verdict: validate must say run_error, not trust stdout."""

import os

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        print('{"status": "ok", "reason": "", "footprint_bytes": 0}', flush=True)
        os._exit(0)


def get_inputs():
    return [torch.rand(4)]


def get_init_inputs():
    return []
