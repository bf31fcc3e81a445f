"""Inputs for correctness trials and timed calls, drawn so a candidate cannot predict or reuse them.

    trial t < trials:        the problem's own get_inputs() under seed (secret * 7919 + t), made
                             directly on the device, floating tensors cast to the precision
    trial t >= trials:       the same draw moved to another distribution (floating inputs only):
                             x -> 4x - 2 (uniform [0,1) becomes [-2,2)), then a normal with mean 1.5
                             and std 2; shortcuts that hold only for the problem's own distribution
                             (no negatives, small magnitudes) fail there
    timed call:              fixed buffers refilled before every call with one of two trial input
                             sets rolled along dim 0 by a random shift, so memoizing by pointer
                             returns a stale answer; (set, shifts) is enough to rebuild any call's
                             inputs later for checking its output

The torch functions are bound when this module is imported, before any candidate exists.
Not covered: a problem whose inputs must satisfy constraints (positive, normalized) may have an
undefined reference on the moved distributions; the worker skips those trials rather than fail.
"""

from __future__ import annotations

import types
from typing import Any

import torch

_roll = torch.roll
_randn_like = torch.randn_like
_Tensor = torch.Tensor


def prepare(value: Any, device: str, dtype: Any) -> Any:
    """Move tensors to `device`, casting floating ones to `dtype`; recurse into lists and tuples."""
    if isinstance(value, _Tensor):
        value = value.to(device)
        return value.to(dtype) if value.is_floating_point() else value
    if isinstance(value, (list, tuple)):
        return type(value)(prepare(v, device, dtype) for v in value)
    return value


def shift_distribution(value: Any, which: int) -> Any:
    if not isinstance(value, _Tensor) or not value.is_floating_point():
        return value
    if which % 2 == 0:
        return value * 4.0 - 2.0
    return _randn_like(value) * 2.0 + 1.5


def draw_trials(
    problem: types.ModuleType, seed: int, trials: int, distribution_trials: int, device: str, dtype: Any
) -> list[list[Any]]:
    drawn = []
    for t in range(trials + distribution_trials):
        torch.manual_seed(seed * 7919 + t)
        with torch.device(device):
            inputs = list(problem.get_inputs())
        if t >= trials:
            inputs = [shift_distribution(x, t - trials) for x in inputs]
        drawn.append(prepare(inputs, device, dtype))
    return drawn


def rollable(value: Any) -> bool:
    return isinstance(value, _Tensor) and value.dim() > 0 and value.shape[0] > 0


def fill(buffers: list[Any], pool: list[Any], shifts: list[int]) -> None:
    """Write `pool` rolled by `shifts` into `buffers` in place (non-rollable entries are left alone)."""
    for buf, src, shift in zip(buffers, pool, shifts, strict=True):
        if rollable(buf):
            buf.copy_(_roll(src, shift, 0))
