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
from kevin.tasks.sizes import assign_constants


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


def reshape_source(source: str, values: Mapping[str, Any], *, where: str = "the module") -> str:
    """`source` with each named module-level constant assigned the given value (module docstring;
    the rule and the rewrite are kevin.tasks.sizes', which enlarges KernelBench problems the same way)."""
    try:
        return assign_constants(source, values, where=where)
    except UsageError as error:
        raise UsageError(f"--verify-shapes: {error}") from None
