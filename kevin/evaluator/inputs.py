"""Inputs for correctness trials and timed calls, drawn so a candidate cannot predict or reuse them.

    trial t < trials:        the problem's own get_inputs() under seed (secret * 7919 + t), made
                             directly on the device, floating tensors cast to the precision
    trial t >= trials:       the same draw moved to another distribution (floating inputs only):
                             x -> 4x - 2 (uniform [0,1) becomes [-2,2)), then a normal with mean 1.5
                             and std 2; shortcuts that hold only for the problem's own distribution
                             (no negatives, small magnitudes) fail there
    timed call:              fixed buffers refilled before every call (outside the clock) with a
                             fresh draw of get_inputs() under a seed of its own from the worker's
                             private RNG: new values, never rows or permutations of inputs the
                             candidate has seen, so neither a memo keyed by pointer nor one keyed
                             by content (whole inputs or single rows) has an answer; the seed is
                             enough to rebuild any call's inputs later for checking its output

The torch functions are bound when this module is imported, before any candidate exists.
`FreshInputs` keeps the problem's get_inputs alive while the candidate runs, so it first removes
every nn.Module class from the problem's namespace: the reference model is not reachable from it.
Not covered: a problem whose inputs must satisfy constraints (positive, normalized) may have an
undefined reference on the moved distributions; the worker skips those trials rather than fail.
A problem whose get_inputs() is not random (arange, constants) gives the same timed inputs every
call; nothing here can make those fresh.
"""

from __future__ import annotations

import types
from typing import Any

import torch

_randn_like = torch.randn_like
_cpu_generator = torch.default_generator
_cuda_manual_seed = torch.cuda.manual_seed
_device = torch.device
_Tensor = torch.Tensor
_Module = torch.nn.Module


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


def draw(get_inputs: Any, seed: int, shift: int | None, device: str, dtype: Any) -> list[Any]:
    """One draw of the problem's inputs under `seed`, moved to distribution `shift` when given,
    on `device` in `dtype`. The judge and its runner both draw this way, so one seed means the same
    inputs in both processes."""
    inputs = _raw(get_inputs, seed, device)
    if shift is not None:
        inputs = [shift_distribution(x, int(shift)) for x in inputs]
    return prepare(inputs, device, dtype)


def draw_trials(
    problem: types.ModuleType, seed: int, trials: int, distribution_trials: int, device: str, dtype: Any
) -> list[list[Any]]:
    """Every trial's inputs: trial t under seed * 7919 + t, shifted past the problem's own `trials`."""
    return [
        draw(problem.get_inputs, seed * 7919 + t, t - trials if t >= trials else None, device, dtype)
        for t in range(trials + distribution_trials)
    ]


def _raw(get_inputs: Any, seed: int, device: str) -> list[Any]:
    # The generators get_inputs() can draw from on this device; torch.manual_seed seeds the same
    # ones (and every other device's) at 300 us a call, which a timing loop of 1000 calls notices.
    _cpu_generator.manual_seed(seed)
    if device.startswith("cuda"):
        _cuda_manual_seed(seed)
    with _device(device):
        return list(get_inputs())


class FreshInputs:
    """Fresh content for timed calls: `fill(buffers, seed)` writes a new draw into fixed buffers."""

    def __init__(self, problem: types.ModuleType, device: str, dtype: Any) -> None:
        for name, value in list(vars(problem).items()):
            if isinstance(value, type) and issubclass(value, _Module):
                delattr(problem, name)
        self._get_inputs = problem.get_inputs
        self.device, self.dtype = device, dtype

    def fill(self, buffers: list[Any], seed: int) -> None:
        values = prepare(_raw(self._get_inputs, seed, self.device), self.device, self.dtype)
        for index, (buf, value) in enumerate(zip(buffers, values, strict=True)):
            if not isinstance(buf, _Tensor):
                continue
            if not isinstance(value, _Tensor) or value.shape != buf.shape:
                raise ValueError(f"get_inputs() gave input {index} a different shape on a new draw")
            buf.copy_(value)
