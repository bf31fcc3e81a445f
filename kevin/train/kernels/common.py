"""What the kernel writers share: the `Variant` record, the Python frame around the kernels, the
elementwise function `f` of a task's op chain (and its slipped, wrong twin), and the plan's words."""

from __future__ import annotations

import re
from dataclasses import dataclass
from string import Template

from kevin.train.family import OPS, TaskSpec, c_float
from kevin.train.kernels.slips import SLIPS

LABELS = ("honest", "slow", "wrong")


@dataclass(frozen=True)
class Variant:
    name: str
    """Which way of writing it: `vec4_grid_t256`, `tree_t512`, `wrong_quarter`, ..."""
    label: str
    plan: str
    """The reasoning line before the code."""
    summary: str
    """The sentence after the code."""
    source: str
    """The candidate file."""


# ---------------------------------------------------------------------------------------------
# Shared pieces: the Python frame, the elementwise function, the plan's words

CUDA_FRAME = Template('''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

$code"""

module = load_inline(
    name="$name",
    cpp_sources="torch::Tensor run($params);",
    cuda_sources=source,
    functions=["run"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__($init_params):
        super().__init__()$init_body

    def forward(self, $args):
        return module.run($call)
''')

CPP_FRAME = Template('''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = r"""
#include <torch/extension.h>
#include <cmath>

$code"""

module = load_inline(
    name="$name",
    cpp_sources=source,
    functions=["run"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__($init_params):
        super().__init__()$init_body

    def forward(self, $args):
        return module.run($call)
''')

STREAM = "0, at::cuda::getCurrentCUDAStream()"


NOTE = "// "
"""How a line of `f` that names the next op begins (`elementwise_fn`)."""

CONSTANTS = "K"
"""With the `init` constant form, the kernel source's array of the task's constants: `K[0]`, `K[1]`, ...
in the order of the Model's constructor arguments (CUDA: `__constant__` memory the host wrapper fills
on the call's stream; C++: a static the wrapper sets)."""


def op_expr(name: str, constant: float | None, *, slip: bool = False, slot: int | None = None) -> str:
    """Op `name`'s C expression of `v`; its constant the literal `constant`, or `K[slot]` when a slot
    is given (the `init` form)."""
    form = SLIPS[name] if slip else OPS[name].c_form
    if constant is None:
        return form
    if slot is not None:
        return form.format(c=f"{CONSTANTS}[{slot}]", c2=f"(2.0f * {CONSTANTS}[{slot}])")
    return form.format(c=c_float(constant), c2=c_float(constant * 2))


def op_exprs(spec: TaskSpec, *, slip: bool = False) -> list[str]:
    """Each op's expression of `v` in order, as the task's constant form carries its constant (`slip`:
    the first op slipped)."""
    slots = spec.constant_slots
    return [
        op_expr(name, constant, slip=slip and index == 0, slot=slots[index])
        for index, (name, constant) in enumerate(spec.ops)
    ]


def constants_decl(spec: TaskSpec, cuda: bool) -> str:
    """The `init` form's declaration of `K` and a blank line (nothing with the literal form)."""
    count = len(spec.init_values)
    return f"{'__constant__' if cuda else 'static'} float {CONSTANTS}[{count}];\n\n" if count else ""


def elementwise_fn(spec: TaskSpec, cuda: bool, *, slip: bool = False) -> str:
    """The task's elementwise ops as one function `f` of a value, a note naming each op (the plan's
    word for it, `op_names`) on the line before the op's own. The notes make every line of `f` a
    copy of what is just before it: the op's word from the plan, then its C form from the word. With
    the C lines alone (sessions 13-41), the warm start wrote the plan right and `f` from memory: 9 of
    s41's 12 failed held-out kernels named the task's chain in the plan and wrote another in `f`
    (`silu, tanh and leaky` planned, silu, leaky, leaky written)."""
    qualifier = "__device__ __forceinline__" if cuda else "static inline"
    lines = [constants_decl(spec, cuda) + f"{qualifier} float f(float v) {{"]
    for word, expr in zip(op_names(spec), op_exprs(spec, slip=slip)):
        lines += [f"    {NOTE}{word}", f"    v = {expr};"]
    lines += ["    return v;", "}", ""]
    return "\n".join(lines)


def host_start(spec: TaskSpec, cuda: bool) -> list[str]:
    """The host wrapper's first lines: its signature, then (the `init` form) the constants put where
    `f` reads them, on the call's stream on the GPU."""
    lines = [f"torch::Tensor run({params(spec)}) {{"]
    names = spec.init_names
    if not names:
        return lines
    if not cuda:
        return lines + [f"    {CONSTANTS}[{slot}] = (float){name};" for slot, name in enumerate(names)]
    values = ", ".join(f"(float){name}" for name in names)
    return lines + [
        f"    const float k[{len(names)}] = {{{values}}};",
        f"    AT_CUDA_CHECK(cudaMemcpyToSymbolAsync({CONSTANTS}, k, sizeof(k), 0, cudaMemcpyHostToDevice,",
        "                                          at::cuda::getCurrentCUDAStream()));",
    ]


NUMBER = r"(-?[0-9][0-9.e+-]*f)"
"""A C float literal as `c_float` writes one (a group: the constant)."""
SLOT = rf"(\(?(?:2\.0f \* )?{CONSTANTS}\[[0-9]+\]\)?)"
"""The `init` form's `K[i]` (or a slip's `(2.0f * K[i])`) in a constant's place (a group)."""


def op_line_patterns(*, slots: bool = True) -> list[tuple[str, re.Pattern]]:
    """(op name, a pattern for a line of `f` that applies it) per op of the family, in OPS order: the
    line as `elementwise_fn` writes it, with any C float literal (or, with `slots`, the `init` form's
    `K[i]`) in the constant's place (group 1)."""
    constant = f"({NUMBER[1:-1]}|{SLOT[1:-1]})" if slots else NUMBER  # one group either way
    patterns = []
    for op in OPS.values():
        text = re.escape(op.c_form).replace(re.escape("{c}"), constant)
        patterns.append((op.name, re.compile(rf"^    v = {text};$", re.M)))
    return patterns


def params(spec: TaskSpec) -> str:
    tensors = [f"torch::Tensor {name}" for name in spec.inputs]
    return ", ".join(tensors + [f"double {name}" for name in spec.init_names])


def _file(spec: TaskSpec, cuda: bool, name: str, code: str) -> str:
    frame = CUDA_FRAME if cuda else CPP_FRAME
    ext = f"{spec.kind}_{name}" if cuda else f"{spec.kind}_{name}_cpp"
    names = spec.init_names
    return frame.substitute(
        code=code,
        name=ext,
        params=params(spec),
        args=", ".join(spec.inputs),
        init_params=", ".join(["self", *names]),
        init_body="".join(f"\n        self.{name} = float({name})" for name in names),
        call=", ".join([*spec.inputs, *(f"self.{name}" for name in names)]),
    )


def op_names(spec: TaskSpec) -> list[str]:
    """Each op as the plan and `f`'s notes name it, with the literal form's constant (`scale(3.0)`);
    the `init` form names the op alone (`scale`): its code holds no constant to copy."""
    literal = spec.constant_form == "literal"
    return [name if c is None or not literal else f"{name}({c!r})" for name, c in spec.ops]


def _op_words(spec: TaskSpec) -> str:
    """The ops as the plan names them (`scale(3.0), gelu and relu`): the plan is written just before
    `f`, whose notes copy its words in order, and the plan copies the prompt's docstring
    (TaskSpec.describe spells them alike)."""
    names = op_names(spec)
    if spec.kind == "residual":
        names = ["the residual add", *names]
    if not names:
        return ""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _what(spec: TaskSpec, fused: bool = True) -> str:
    """The plan's first half: what goes into which kernel."""
    ops = _op_words(spec)
    if spec.kind in ("act", "residual"):
        if not fused:
            return f"run {ops} as separate kernels"
        return f"fuse {ops} into one kernel" if " and " in ops else f"one kernel for {ops}"
    task = f"the row {spec.reduce}" if spec.kind == "rowreduce" else "the row softmax"
    if not ops:
        return f"one kernel for {task}"
    if not fused:
        return f"one kernel for {ops}, then a second one for {task}"
    return f"fuse {ops} into the loads of {task}"


def _past(what: str) -> str:
    for present, past in (("fuse ", "Fused "), ("run ", "Ran "), ("one kernel", "Wrote one kernel")):
        if what.startswith(present):
            return past + what[len(present) :]
    return what


def variant(
    spec: TaskSpec, cuda: bool, name: str, label: str, how: str, code: str, *, fused: bool = True
) -> Variant:
    what = _what(spec, fused)
    summary = f"{_past(what)}: {how}."
    return Variant(name, label, f"Plan: {what}; {how}.", summary, _file(spec, cuda, name, code))


def threads_words(count: int) -> str:
    return f"{count} threads per block"


REDUCE_INIT = {"sum": "0.0f", "mean": "0.0f", "max": "-INFINITY"}
REDUCE_COMBINE = {"sum": "a + b", "mean": "a + b", "max": "fmaxf(a, b)"}


def final(spec: TaskSpec, value: str) -> str:
    return f"{value} / (float)cols" if spec.reduce == "mean" else value
