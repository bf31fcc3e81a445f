"""Hangs: forward sleeps far longer than any test timeout (validate says timeout)."""

import time

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        time.sleep(600)
        return x


def get_inputs():
    return [torch.rand(4)]


def get_init_inputs():
    return []
