"""What a build request may contain: a load_inline call's arguments, checked as untrusted data.

`normalize(arguments)` takes the JSON-able bound arguments a runner sends (kevin.evaluator.build's
client) and returns them with every parameter of load_inline's own type and within size limits, or
raises `Refused` with the error load_inline would raise: sycl is refused, `use_pch` dropped (torch
would write a precompiled header into its own install), `build_directory` and `verbose` ignored.
The flags inside are judged by kevin.evaluator.buildflags; the build by kevin.evaluator.broker.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

MAX_SOURCE_BYTES = 4 << 20
MAX_LIST_ITEMS = 256
MAX_FLAG_CHARS = 1024
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")

# Bound by kevin: never part of what is built.
_IGNORED = {"build_directory", "verbose", "keep_intermediates"}
_BOOLEAN = {"with_pytorch_error_handling", "is_python_module", "no_implicit_headers", "use_pch"}
_OPTIONAL_BOOLEAN = {"with_cuda", "with_sycl"}
_FLAG_LISTS = ("extra_cflags", "extra_cuda_cflags", "extra_ldflags", "extra_include_paths")
_SYCL = ("sycl_sources", "extra_sycl_cflags")


class Refused(Exception):
    """The request is refused before any build: the candidate's arguments or flags."""

    def __init__(self, message: str, error_type: str = "RuntimeError") -> None:
        super().__init__(message)
        self.error_type = error_type


# -- arguments ------------------------------------------------------------------------------------


def _load_inline_parameters() -> dict[str, inspect.Parameter]:
    import torch.utils.cpp_extension as cpp_extension

    original = getattr(cpp_extension.load_inline, "__wrapped__", cpp_extension.load_inline)
    return dict(inspect.signature(original).parameters)


def _strings(value: Any, where: str, allow_none: bool = True) -> list[str]:
    if value is None and allow_none:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        if len(value) > MAX_LIST_ITEMS:
            raise Refused(f"load_inline(): {where} has more than {MAX_LIST_ITEMS} items", "ValueError")
        return list(value)
    raise Refused(f"load_inline(): {where} must be a string or a list of strings", "TypeError")


def normalize(arguments: Any) -> dict[str, Any]:
    """The request as a canonical dict of load_inline arguments (defaults filled, strings made
    lists, functions a {name: docstring} dict), or Refused."""
    if not isinstance(arguments, dict):
        raise Refused("kevin build broker: the request is not an object", "TypeError")
    parameters = _load_inline_parameters()
    for key in arguments:
        if key not in parameters:
            raise Refused(f"load_inline() got an unexpected keyword argument {key!r}", "TypeError")
    for key, parameter in parameters.items():
        if key not in arguments and parameter.default is inspect.Parameter.empty:
            raise Refused(f"load_inline() missing required argument: {key!r}", "TypeError")
    values = {k: arguments.get(k, p.default) for k, p in parameters.items() if k not in _IGNORED}
    name = values["name"]
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise Refused(
            f"load_inline(): name must be a C identifier of at most 100 characters, got {str(name)[:120]!r}",
            "ValueError",
        )
    out: dict[str, Any] = {"name": name}
    size = 0
    for key in ("cpp_sources", "cuda_sources"):
        if key not in values:
            continue
        out[key] = _strings(values[key], key, allow_none=key != "cpp_sources")
        size += sum(len(s.encode(errors="replace")) for s in out[key])
    if size > MAX_SOURCE_BYTES:
        raise Refused(f"load_inline(): the sources exceed {MAX_SOURCE_BYTES >> 20} MiB", "ValueError")
    for key in _SYCL:
        if key in values:
            if values[key]:
                raise Refused(f"Error building extension '{name}': kevin does not build sycl sources")
            out[key] = None
    functions = values.get("functions")
    if isinstance(functions, str):
        functions = [functions]
    if isinstance(functions, list):
        if not all(isinstance(f, str) for f in functions):
            raise Refused("load_inline(): functions must be strings", "TypeError")
        functions = {f: f for f in functions}
    if functions is not None:
        if not isinstance(functions, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in functions.items()
        ):
            raise Refused(
                f"Expected 'functions' to be a list or dict, but was {type(functions)}", "ValueError"
            )
        if len(functions) > MAX_LIST_ITEMS:
            raise Refused(f"load_inline(): more than {MAX_LIST_ITEMS} functions", "ValueError")
        for function, doc in functions.items():
            if not function.isidentifier() or len(function) > 200 or len(doc) > 4000:
                raise Refused(
                    f"load_inline(): bad function name or docstring {function[:80]!r}", "ValueError"
                )
    out["functions"] = functions
    for key in _FLAG_LISTS:
        if key in values:
            items = _strings(values[key], key)
            for item in items:
                if len(item) > MAX_FLAG_CHARS:
                    raise Refused(
                        f"load_inline(): an item of {key} exceeds {MAX_FLAG_CHARS} characters", "ValueError"
                    )
            out[key] = items
    for key in _BOOLEAN:
        if key in values:
            if not isinstance(values[key], bool):
                raise Refused(f"load_inline(): {key} must be True or False", "TypeError")
            out[key] = values[key]
    for key in _OPTIONAL_BOOLEAN:
        if key in values:
            if values[key] is not None and not isinstance(values[key], bool):
                raise Refused(f"load_inline(): {key} must be True, False or None", "TypeError")
            out[key] = values[key]
    if out.get("with_sycl"):
        raise Refused(f"Error building extension '{name}': kevin does not build sycl sources")
    if "use_pch" in out:
        out["use_pch"] = False  # torch would write a precompiled header into its own install
    unknown = set(values) - set(out)
    if unknown:  # a load_inline parameter this broker does not know how to check
        raise Refused(
            f"kevin build broker: load_inline parameter(s) not supported: {', '.join(sorted(unknown))}"
        )
    return out


