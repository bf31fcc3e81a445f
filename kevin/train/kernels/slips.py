"""The `slip` bug (a wrong constant or sign in a task's first op) in both its forms, and whether it
shows in a task's output at all.

A `wrong_slip` variant is labelled wrong: the corpus's labels, its baseline's `by_label` counts and
the GPU test of the labels take that on trust. Some slips do not change the output, so the label
would be false: softmax is blind to a shift (softmax(x - c) = softmax(x + c), and after a scale
too), a row's max is blind to relu's floor moving from 0 to 0.1, and tanh saturates the same after
scale 3 or 6. A scan of every chain of the family at its GPU columns (s41) found 78 of 7,646 slips
that the comparator passes: 77 such, and one 0.7% error under its noise floor (gelu's, before a
sigmoid and an 8192-column softmax). `slip_shows` asks the comparator itself, on inputs drawn as the
task's problem draws them, and a kernel writer makes `wrong_slip` only where it says yes."""

from __future__ import annotations

import functools

from kevin.train.family import OPS, TaskSpec

SLIPS = {
    "relu": "fmaxf(v, 0.1f)",
    "gelu": "0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.44715f * v * v * v)))",
    "sigmoid": "1.0f / (1.0f + expf(v))",
    "silu": "v / (1.0f + expf(v))",
    "tanh": "tanhf(2.0f * v)",
    "scale": "v * {c2}",
    "bias": "v - {c}",
    "leaky": "v > 0.0f ? v * {c} : v",
}
"""Each op's slipped C expression of `v` (`{c}` the constant, `{c2}` twice it)."""

TORCH_SLIPS = {
    "relu": "torch.clamp({x}, min=0.1)",
    "gelu": "0.5 * {x} * (1.0 + torch.tanh(0.7978845608 * ({x} + 0.44715 * {x} ** 3)))",
    "sigmoid": "1.0 / (1.0 + torch.exp({x}))",
    "silu": "{x} / (1.0 + torch.exp({x}))",
    "tanh": "torch.tanh(2.0 * {x})",
    "scale": "{x} * (2.0 * {c})",
    "bias": "{x} - {c}",
    "leaky": "torch.where({x} > 0, {x} * {c}, {x})",
}
"""The same slips as torch lines, as `Op.torch_form` writes an op (tests check the two agree): the
line that applies the op in a task's forward is swapped for its slip's (`slipped_source`)."""

ROWS = 16
"""Rows drawn for the check: the output's statistics, not its size, decide the comparator's rules."""


def slipped_source(spec: TaskSpec) -> str:
    """The task's problem file with its first op slipped: the line its forward applies that op with,
    in the slip's torch form (chains hold distinct ops, so the line is there once)."""
    (name, constant), init_name = spec.ops[0], spec.constant_names[0]
    value = repr(constant) if init_name is None else f"self.{init_name}"
    line = "x = " + OPS[name].torch_form.format(x="x", c=value)
    source = spec.source()
    if source.count(f" {line}\n") != 1:
        raise ValueError(f"{spec.name}: the forward does not apply {name} as `{line}` once")
    return source.replace(f" {line}\n", " x = " + TORCH_SLIPS[name].format(x="x", c=value) + "\n")


def task_output(spec: TaskSpec, cols: int, *, slip: bool, seed: int = 0):
    """The task's output on `ROWS` rows of `cols` columns: its own problem file run (its Model, its
    get_inputs, its get_init_inputs), with its first op slipped when `slip`. Torch's global RNG is
    left as it was."""
    import torch

    namespace: dict = {}
    exec(compile(slipped_source(spec) if slip else spec.source(), f"<{spec.name}>", "exec"), namespace)
    namespace["ROWS"], namespace["COLS"] = ROWS, cols  # get_inputs reads them when called
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        inputs = namespace["get_inputs"]()
        return namespace["Model"](*namespace["get_init_inputs"]())(*inputs)


@functools.lru_cache(maxsize=4096)
def slip_shows(spec: TaskSpec, large: bool) -> bool:
    """Whether the comparator (fp32 tolerances) rejects the slipped output of `spec` at its GPU shape's
    columns (`large`) or its CPU one's."""
    from kevin.evaluator.compare import compare
    from kevin.evaluator.evaluate import DEFAULT_TOLERANCE

    if not spec.ops:
        return False
    cols = (spec.shape if large else spec.small_shape)[1]
    tolerance = DEFAULT_TOLERANCE["fp32"]
    report = compare(
        [task_output(spec, cols, slip=True)], [task_output(spec, cols, slip=False)], tolerance, tolerance
    )
    return not report["ok"]
