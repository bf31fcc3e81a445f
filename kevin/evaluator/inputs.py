"""Inputs for correctness trials and timed calls, drawn so a candidate cannot predict or reuse them.

    trial t < trials:        the problem's own get_inputs() under seed (secret * 7919 + t), made
                             directly on the device, floating tensors cast to the precision
    trial t >= trials:       get_inputs() under its seed again, with torch's floating random draws
                             moved while it runs: every value torch.rand, randn, rand_like,
                             randn_like, normal, Tensor.uniform_ or Tensor.normal_ gives it becomes
                             4x - 2 (uniform [0,1) becomes [-2,2)), and on the next such trial a
                             fresh normal with mean 1.5 and std 2. Integer draws (randint, randperm)
                             stay as they are. get_inputs() then builds its own structure from the
                             moved values (tril, A + A.T, softmax, abs, sort), so what the problem
                             guarantees holds on every trial, while shortcuts that hold only for its
                             distribution (no negatives, small magnitudes) fail
    timed call:              fixed buffers refilled before every call (outside the clock) with a
                             fresh draw of get_inputs() under a seed of its own from the worker's
                             private RNG: new values, never rows or permutations of inputs the
                             candidate has seen, so neither a memo keyed by pointer nor one keyed
                             by content (whole inputs or single rows) has an answer; the seed is
                             enough to rebuild any call's inputs later for checking its output

The torch functions are bound when this module is imported, before any candidate exists: a shifted
draw calls these, whatever a candidate has since put in their place, and puts back what it found,
exception or not. `FreshInputs` keeps the problem's get_inputs alive while the candidate runs, so it
first removes every nn.Module class from the problem's namespace: the reference model is not
reachable from it.
Not covered: structure the moved draws cannot keep. When get_inputs() raises on them, or the
reference raises or gives non-finite outputs on them (a log of values now negative, probabilities
outside [0, 1]), the judge drops that trial and says why in the correctness record
(kevin.evaluator.worker.trials). Draws made any other way (numpy, `from torch import rand` at import,
Tensor.random_ or bernoulli_) are not moved: such a problem's shifted trials are more trials on its
own distribution, and the record says that nothing was moved.
A problem whose get_inputs() is not random (arange, constants) gives the same timed inputs every
call; nothing here can make those fresh.
"""

from __future__ import annotations

import types
from typing import Any

import torch

_randn_like = torch.randn_like
_no_grad = torch.no_grad
_cpu_generator = torch.default_generator
_cuda_manual_seed = torch.cuda.manual_seed
_device = torch.device
_Tensor = torch.Tensor
_Module = torch.nn.Module

_FLOATING_DRAWS = tuple(
    (owner, name, getattr(owner, name))
    for owner, names in (
        (torch, ("rand", "randn", "rand_like", "randn_like", "normal")),
        (torch.Tensor, ("uniform_", "normal_")),
    )
    for name in names
)
"""Where get_inputs() finds torch's floating random draws: (owner, attribute, function at import)."""

SHIFTS = ("x -> 4x - 2", "x -> normal(mean 1.5, std 2)")
"""What shifted trial t - trials does to every floating random draw: SHIFTS[(t - trials) % 2]."""

_ABSENT = object()


def prepare(value: Any, device: str, dtype: Any) -> Any:
    """Move tensors to `device`, casting floating ones to `dtype`; recurse into lists and tuples."""
    if isinstance(value, _Tensor):
        value = value.to(device)
        return value.to(dtype) if value.is_floating_point() else value
    if isinstance(value, (list, tuple)):
        return type(value)(prepare(v, device, dtype) for v in value)
    return value


def draw(get_inputs: Any, seed: int, shift: int | None, device: str, dtype: Any) -> list[Any]:
    """One draw of the problem's inputs under `seed`, its random draws moved by shift `shift` when
    given, on `device` in `dtype`. The judge and its runner both draw this way, so one seed means the
    same inputs in both processes."""
    return draw_counted(get_inputs, seed, shift, device, dtype)[0]


def draw_counted(
    get_inputs: Any, seed: int, shift: int | None, device: str, dtype: Any
) -> tuple[list[Any], int]:
    """`draw`, and how many of torch's random draws the shift moved (0 without one). Exceptions from
    get_inputs() pass through, with torch's functions put back first."""
    with _MovedDraws(shift) as moved:
        inputs = _raw(get_inputs, seed, device)
    return prepare(inputs, device, dtype), moved.count


def draw_trials(
    problem: types.ModuleType, seed: int, trials: int, distribution_trials: int, device: str, dtype: Any
) -> list[list[Any]]:
    """Every trial's inputs: trial t under seed * 7919 + t, shifted past the problem's own `trials`."""
    return [
        draw(problem.get_inputs, seed * 7919 + t, t - trials if t >= trials else None, device, dtype)
        for t in range(trials + distribution_trials)
    ]


class _MovedDraws:
    """While entered with a shift, torch's floating random draws return moved values; `count` says
    how many calls were moved. Entered with None it changes nothing."""

    def __init__(self, shift: int | None) -> None:
        self.shift, self.count, self.moving = (None if shift is None else int(shift)), 0, False
        self.found: list[tuple[Any, str, Any]] = []

    def __enter__(self) -> _MovedDraws:
        if self.shift is None:
            return self
        try:
            for owner, name, original in _FLOATING_DRAWS:
                self.found.append((owner, name, vars(owner).get(name, _ABSENT)))
                setattr(owner, name, self._moving(original))
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *_: Any) -> None:
        # What was there before, which in a runner may be a candidate's own patch: putting back
        # torch's original would be a change of the candidate's state made by us.
        for owner, name, before in reversed(self.found):
            if before is _ABSENT:
                delattr(owner, name)
            else:
                setattr(owner, name, before)
        self.found.clear()

    def _moving(self, original: Any) -> Any:
        def moved(*args: Any, **kwargs: Any) -> Any:
            if self.moving:
                # A call torch makes on the way: a TorchFunctionMode (torch.device's, which every
                # draw runs under) calls a Tensor method again by its name, so this wrapper again.
                return original(*args, **kwargs)
            self.moving = True
            try:
                value = original(*args, **kwargs)
                if isinstance(value, _Tensor) and value.is_floating_point():
                    # In place, so `out=` buffers and Tensor.uniform_'s own tensor hold the moved values.
                    with _no_grad():
                        if self.shift % 2 == 0:
                            value.mul_(4.0).sub_(2.0)
                        else:
                            value.copy_(_randn_like(value).mul_(2.0).add_(1.5))
                    self.count += 1
            finally:
                self.moving = False
            return value

        return moved


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
