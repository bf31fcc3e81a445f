"""Re-parameterising a KernelBench problem at other shapes, for re-verifying a kernel there.

KernelBench problems take their sizes from module-level constants (`batch_size = 16`, `dim = 16384`)
that get_inputs and get_init_inputs read, so a problem is re-parameterised by assigning other values
to such names: `reshape_source(source, {"batch_size": 64})` puts the Python literal `64` in place of
the value of the top-level `batch_size = ...`, and leaves every other byte of the source as it was.

A name qualifies when it is assigned exactly once at the top level (a plain `NAME = ...` or
`NAME: type = ...`) and read somewhere as a module-level name (a function's own parameters and locals
do not count). Anything else is refused with a UsageError that lists the names that qualify: setting
a name nothing reads would "verify" the same shapes again. A problem that writes its sizes into
get_inputs as literals has no such names and cannot be re-parameterised this way. Derived constants
are not recomputed in place: `rows = SIZES[SIZE]["rows"]` set to 64 becomes `rows = 64`, and a
constant computed later from another (`hidden = 4 * dim` below `dim = ...`) follows it.

This module does not run the problem: a value that makes it fail shows up in the re-verification's
verdict (blamed on the infrastructure: the reference failed), not here.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from kevin.errors import UsageError


def parse_shapes(text: str) -> dict[str, Any]:
    """`rows=256,cols=1024` -> {"rows": 256, "cols": 1024}; each value a Python literal."""
    values: dict[str, Any] = {}
    for part in (p.strip() for p in text.split(",")):
        name, equals, value = part.partition("=")
        if not equals or not name.strip().isidentifier():
            raise UsageError(
                f"--verify-shapes {text!r}: write NAME=VALUE[,NAME=VALUE...], e.g. batch_size=64"
            )
        try:
            values[name.strip()] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            raise UsageError(
                f"--verify-shapes {text!r}: {value.strip()!r} is not a Python literal (a number, a tuple, a string)"
            ) from None
    return values


def shapes_label(values: Mapping[str, Any]) -> str:
    return ",".join(f"{name}={value!r}" for name, value in values.items())


def _module_reads(node: ast.AST, local: frozenset[str]) -> set[str]:
    """Names read as module-level names under `node`: a function's parameters and the names it
    assigns (unless declared global) are its own, so reading them does not count."""
    if isinstance(node, ast.Name):
        return {node.id} if isinstance(node.ctx, ast.Load) and node.id not in local else set()
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        return set().union(*(_module_reads(child, local) for child in ast.iter_child_nodes(node)))
    arguments = node.args
    outer = [*arguments.defaults, *(d for d in arguments.kw_defaults if d is not None)]
    outer += getattr(node, "decorator_list", [])  # evaluated where the function is defined
    body = node.body if isinstance(node.body, list) else [node.body]
    params = [
        *arguments.posonlyargs,
        *arguments.args,
        *arguments.kwonlyargs,
        arguments.vararg,
        arguments.kwarg,
    ]
    walked = [child for statement in body for child in ast.walk(statement)]
    stored = {c.id for c in walked if isinstance(c, ast.Name) and isinstance(c.ctx, ast.Store)}
    declared = {name for c in walked if isinstance(c, ast.Global) for name in c.names}
    own = ({a.arg for a in params if a is not None} | stored) - declared
    reads = set().union(*(_module_reads(expression, local) for expression in outer))
    return reads.union(*(_module_reads(statement, local | own) for statement in body))


def reshape_source(source: str, values: Mapping[str, Any], *, where: str = "the module") -> str:
    """`source` with each named module-level constant assigned the given value (module docstring)."""
    tree = ast.parse(source)  # the module parsed already (kevin.search.optimize.load_module)
    assigned: dict[str, list[ast.expr]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            assigned.setdefault(node.targets[0].id, []).append(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            assigned.setdefault(node.target.id, []).append(node.value)
    read = _module_reads(tree, frozenset())
    constants = sorted(name for name, nodes in assigned.items() if len(nodes) == 1 and name in read)
    spans = []
    for name, value in values.items():
        if name not in constants:
            raise UsageError(
                f"--verify-shapes: {name} is not a module-level constant of {where} that the module reads "
                f"(assigned once at top level); its constants: {', '.join(constants) or 'none'}"
            )
        node = assigned[name][0]
        spans.append((node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, repr(value)))
    data = source.encode("utf-8")  # ast offsets count UTF-8 bytes
    starts = [0]
    for line in data.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    for line, col, end_line, end_col, text in sorted(spans, reverse=True):
        start, end = starts[line - 1] + col, starts[end_line - 1] + end_col
        data = data[:start] + text.encode("utf-8") + data[end:]
    return data.decode("utf-8")
