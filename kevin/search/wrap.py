"""A module class named by flag, made into a KernelBench-format problem for `kevin optimize`.

`kevin optimize block.py --class Block --inputs 16x1024,1024:bf16 --init-args "1024, 4096"` takes a
file that defines `class Block(nn.Module)` and nothing of KernelBench's format, and optimises
`Block` as if the file had been written as a problem: `wrap_class` appends, below the user's source
left byte for byte as it was,

    KEVIN_INPUTS = [((16, 1024), 'float32'), ((1024,), 'bfloat16')]
    KEVIN_INIT_ARGS = [1024, 4096]
    Model = Block
    def get_inputs(): ...      # one tensor per entry of KEVIN_INPUTS
    def get_init_inputs(): ... # KEVIN_INIT_ARGS

Floating-point inputs are drawn from the standard normal, integer ones uniformly from
[0, INT_HIGH), bool ones as coin flips, as KernelBench's own problems draw theirs; the evaluator
seeds them. The two lists are module-level constants, so re-verifying at other shapes is the
constant rewrite `kevin.search.shapes` already does: `--verify-inputs 32x2048,2048:bf16` is
`--verify-shapes KEVIN_INPUTS=[((32, 2048), 'float32'), ((2048,), 'bfloat16')]`.

Refused (UsageError, exit 2): a class the file does not define at its top level; a file that already
defines Model, get_inputs or get_init_inputs (it is a problem already: drop --class) or any of the
names this module adds; an input list that is empty or malformed; init arguments that are not
Python literals. What this does not check: that the class runs with those inputs and arguments
(the evaluator's reference run says so, blaming the problem, not the kernel).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from typing import Any

from kevin.errors import UsageError

INPUTS_NAME = "KEVIN_INPUTS"
INIT_NAME = "KEVIN_INIT_ARGS"
INT_HIGH = 128
"""Integer inputs are drawn from [0, INT_HIGH): valid as indices into any dimension of 128 or more."""
DTYPES = {
    "fp32": "float32", "float32": "float32", "float": "float32",
    "fp16": "float16", "float16": "float16", "half": "float16",
    "bf16": "bfloat16", "bfloat16": "bfloat16",
    "fp64": "float64", "float64": "float64", "double": "float64",
    "int64": "int64", "long": "int64", "int32": "int32", "int": "int32",
    "int16": "int16", "int8": "int8", "uint8": "uint8", "bool": "bool",
}  # fmt: skip
"""Names accepted after the colon of an input, and the torch dtype each means."""
ADDED_NAMES = (INPUTS_NAME, INIT_NAME, "Model", "get_inputs", "get_init_inputs", "_kevin_torch")
_SHAPE = re.compile(r"^\d+(?:x\d+)*$")

_FOOTER = """

# ---- added by kevin optimize --class {name}: the class as a KernelBench-format problem ----
import torch as _kevin_torch

{inputs_name} = {inputs!r}
{init_name} = {init!r}
Model = {name}


def get_inputs():
    tensors = []
    for shape, dtype_name in {inputs_name}:
        dtype = getattr(_kevin_torch, dtype_name)
        if dtype == _kevin_torch.bool:
            tensors.append(_kevin_torch.rand(shape) < 0.5)
        elif dtype.is_floating_point:
            tensors.append(_kevin_torch.randn(shape, dtype=dtype))
        else:
            tensors.append(_kevin_torch.randint(0, {high}, shape, dtype=dtype))
    return tensors


def get_init_inputs():
    return list({init_name})
"""


def parse_inputs(text: str, *, flag: str = "--inputs") -> list[tuple[tuple[int, ...], str]]:
    """`16x1024,1024:bf16` -> [((16, 1024), 'float32'), ((1024,), 'bfloat16')]."""
    inputs = []
    for part in (p.strip() for p in text.split(",")):
        shape_text, _, dtype_text = part.partition(":")
        dtype = DTYPES.get(dtype_text.strip().lower() or "fp32")
        if not _SHAPE.match(shape_text.strip()) or dtype is None:
            raise UsageError(
                f"{flag} {text!r}: write one SHAPE[:DTYPE] per input, comma-separated, SHAPE as 16x1024 "
                f"and DTYPE one of {', '.join(sorted(set(DTYPES)))}; e.g. {flag} 16x1024,1024:bf16"
            )
        inputs.append((tuple(int(n) for n in shape_text.strip().split("x")), dtype))
    return inputs


def parse_init_args(text: str) -> list[Any]:
    """`"1024, 4096"` -> [1024, 4096]: the class's constructor arguments, as Python literals."""
    if not text.strip():
        return []
    try:
        value = ast.literal_eval(f"({text},)")
    except (ValueError, SyntaxError):
        raise UsageError(
            f"--init-args {text!r}: give the constructor's arguments as Python literals, e.g. "
            '--init-args "1024, 4096, 0.1"'
        ) from None
    return list(value)


def _top_level_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(top-level class names, every other name bound at the top level)."""
    classes, others = set(), set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            classes.add(node.name)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            others.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            others.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            others.update((a.asname or a.name).split(".")[0] for a in node.names)
    return classes, others


def wrap_class(
    source: str,
    class_name: str,
    inputs: Sequence[tuple[tuple[int, ...], str]],
    init_args: Sequence[Any] = (),
    *,
    where: str = "the module",
) -> str:
    """`source` with the footer that makes `class_name` a KernelBench-format problem (module doc)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise UsageError(f"{where}:{exc.lineno}: not valid Python ({exc.msg}); fix the module") from None
    classes, others = _top_level_names(tree)
    if class_name not in classes:
        found = ", ".join(sorted(classes)) or "none"
        raise UsageError(
            f"--class {class_name}: {where} defines no top-level class {class_name} (classes there: {found})"
        )
    clashes = sorted((classes | others) & set(ADDED_NAMES))
    if clashes:
        raise UsageError(
            f"--class {class_name}: {where} already defines {', '.join(clashes)}; a file with Model, "
            "get_inputs and get_init_inputs is a problem already: drop --class (and rename any other)"
        )
    if not inputs:
        raise UsageError(
            f"--class {class_name}: give its forward's example inputs with --inputs, e.g. 16x1024"
        )
    footer = _FOOTER.format(
        name=class_name,
        inputs_name=INPUTS_NAME,
        inputs=[(tuple(shape), dtype) for shape, dtype in inputs],
        init_name=INIT_NAME,
        init=list(init_args),
        high=INT_HIGH,
    )
    return source.rstrip("\n") + "\n" + footer


def verify_inputs_shapes(text: str) -> dict[str, Any]:
    """`--verify-inputs 32x2048` as the constant rewrite kevin.search.shapes applies."""
    return {INPUTS_NAME: parse_inputs(text, flag="--verify-inputs")}
