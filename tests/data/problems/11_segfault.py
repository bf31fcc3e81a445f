"""Crashes the interpreter in forward (validate says run_error, naming the signal)."""

import os
import signal

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        os.kill(os.getpid(), signal.SIGSEGV)
        return x


def get_inputs():
    return [torch.rand(4)]


def get_init_inputs():
    return []
