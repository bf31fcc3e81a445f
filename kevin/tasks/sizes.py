"""A problem's module-level size constants: which names qualify, their values, and rewriting them.

KernelBench problems take their sizes from module-level constants (`batch_size = 16`, `N = 2048 * 2`)
that `get_inputs` and `get_init_inputs` read. A name qualifies as a constant when it is assigned
exactly once at the top level (a plain `NAME = ...` or `NAME: type = ...`; `a = b = 1` does not) and
read somewhere as a module-level name (a function's own parameters and locals do not count).
`int_constants` evaluates those whose value is integer arithmetic (`+ - * // **`) over literals and
earlier constants; `assign_constants` puts Python literals in place of values and leaves every other
byte of the source as it was, so the rewritten file is a pure function of the original and the values.

This reads the source with `ast` and never imports or runs it. kevin.search.shapes does the same
for `--verify-shapes` and could call this (search may import tasks; the reverse may not).
"""

from __future__ import annotations

import ast
import operator
from collections import Counter
from collections.abc import Mapping
from typing import Any

from kevin.errors import UsageError

_INT_OPERATORS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Pow: operator.pow,
}


def _own_names(function: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    """Parameters and names a function assigns (unless declared global): reading them is local."""
    arguments = function.args
    params = [
        *arguments.posonlyargs,
        *arguments.args,
        *arguments.kwonlyargs,
        arguments.vararg,
        arguments.kwarg,
    ]
    body = function.body if isinstance(function.body, list) else [function.body]
    nodes = [node for statement in body for node in ast.walk(statement)]
    stored = {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    declared = {name for n in nodes if isinstance(n, ast.Global) for name in n.names}
    return ({a.arg for a in params if a is not None} | stored) - declared


def module_reads(node: ast.AST, local: frozenset[str] = frozenset()) -> set[str]:
    """Names read under `node` as module-level names (not parameters or locals of a function)."""
    if isinstance(node, ast.Name):
        return {node.id} if isinstance(node.ctx, ast.Load) and node.id not in local else set()
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        # defaults and decorators are evaluated where the function is defined, the body inside it
        outside = [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
        outside += getattr(node, "decorator_list", [])
        inside = local | _own_names(node)
        body = node.body if isinstance(node.body, list) else [node.body]
        reads = set().union(*(module_reads(e, local) for e in outside))
        return reads.union(*(module_reads(statement, inside) for statement in body))
    return set().union(*(module_reads(child, local) for child in ast.iter_child_nodes(node)))


def module_constants(source: str | ast.Module) -> dict[str, ast.expr]:
    """Name -> value expression of each qualifying module-level constant, in source order."""
    tree = ast.parse(source) if isinstance(source, str) else source
    values: dict[str, ast.expr] = {}
    assignments: Counter[str] = Counter()
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            target, value = node.target.id, node.value
        else:
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                # `a = b = 1`, `a, b = ...`, `a += 1`, names set in a top-level block: not constants
                stored = [
                    n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
                ]
                assignments.update(stored + stored)
            continue
        values.setdefault(target, value)
        assignments[target] += 1
    read = module_reads(tree)
    return {name: value for name, value in values.items() if assignments[name] == 1 and name in read}


def _int_value(node: ast.expr, known: Mapping[str, int]) -> int | None:
    if isinstance(node, ast.Constant):
        return node.value if type(node.value) is int else None
    if isinstance(node, ast.Name):
        return known.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _int_value(node.operand, known)
        return None if value is None else -value
    if isinstance(node, ast.BinOp) and type(node.op) in _INT_OPERATORS:
        left, right = _int_value(node.left, known), _int_value(node.right, known)
        if left is None or right is None or (isinstance(node.op, ast.Pow) and not 0 <= right <= 64):
            return None
        if isinstance(node.op, ast.FloorDiv) and right == 0:
            return None
        return _INT_OPERATORS[type(node.op)](left, right)
    return None


def int_constants(source: str | ast.Module) -> dict[str, int]:
    """Name -> value of each qualifying constant whose value is integer arithmetic, in source order."""
    values: dict[str, int] = {}
    for name, node in module_constants(source).items():
        value = _int_value(node, values)
        if value is not None:
            values[name] = value
    return values


def function_reads(source: str | ast.Module, function: str) -> set[str]:
    """Module-level names that the top-level function `function` reads (empty when there is none)."""
    tree = ast.parse(source) if isinstance(source, str) else source
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function]
    return module_reads(found[0]) if found else set()


def assign_constants(source: str, values: Mapping[str, Any], *, where: str = "the module") -> str:
    """`source` with each named constant's value replaced by the literal `repr(value)`.

    Raises UsageError naming the qualifying constants when a name is not one: setting a name that
    nothing reads, or one assigned twice, would not change what the problem computes.
    """
    constants = module_constants(source)
    spans = []
    for name, value in values.items():
        if name not in constants:
            raise UsageError(
                f"{name} is not a module-level constant of {where} that the module reads "
                f"(assigned once at top level); its constants: {', '.join(constants) or 'none'}"
            )
        node = constants[name]
        spans.append((node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, repr(value)))
    data = source.encode("utf-8")  # ast offsets count UTF-8 bytes
    starts = [0]
    for line in data.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    for line, col, end_line, end_col, text in sorted(spans, reverse=True):
        start, end = starts[line - 1] + col, starts[end_line - 1] + end_col
        data = data[:start] + text.encode("utf-8") + data[end:]
    return data.decode("utf-8")
