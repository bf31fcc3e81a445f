"""The native side of the static gate: the C++/CUDA sources a candidate hands to `load_inline`.

Two jobs, neither of which builds or runs anything:
- `SourceReader` reads the sources out of the Python source, as far as it fixes them: string literals,
  names bound to literals, `+`, `%`, f-strings, `.format`, `.join`, `.strip`, `.replace` and
  `textwrap.dedent`, with whatever is pasted into them. It makes one `Site` per `load_inline`/`load`
  call: the texts read, the build flags, the kind of kernel built (a `__global__` kernel and its launch,
  host-only CUDA, C++ only, nothing), and why the sources cannot be verified when they cannot (made at
  run time, files from absolute or parent paths, include flags, `load` from files).
- `native_problems` scans what was read lexically, with comments and string literals blanked out, for
  ATen compute (`torch::matmul`, `at::native::`, `at::cuda::mm`, `x.mm(...)`, `using namespace at`),
  vendor libraries (`cublasSgemm`, `#include <cudnn.h>`, `-lcublas`) and escapes to code the gate cannot
  see (`dlopen`, `system`) or to the Python interpreter the extension is loaded into: any CPython
  C-API name (`PySys_GetObject`, `PyObject_SetAttr`, `Py_INCREF`, ...), torch's Python bindings
  (`THP*`), and pybind11 beyond what a binding needs (`m.def`, `py::arg`, call guards): objects,
  `.attr(...)`, `py::globals`, `py::cpp_function`, `py::module_::import`, casts. A kernel has no use
  for Python objects; native code holding them can rewire the harness that judges it.

What it does not do: parse C++. Token pasting (`at::mat##mul`), templates and macros can hide an ATen
call, and a method call is judged by its name alone. It does not decide which Python code calls a built
extension (kevin.gate.rules does) or what a name in the Python source refers to (kevin.gate.names
does, and hands `SourceReader` its answer for the names it needs).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kevin.gate.policy import CheckPolicy, is_compute_name

LOADERS = frozenset({"torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load"})
"""The calls that build an extension from sources."""


def const_str(node: ast.AST | None) -> str | None:
    """The value of a string literal; None for anything else."""
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


@dataclass(eq=False)
class Site:
    """One load_inline/load call: what kind of kernel it builds and the sources, when readable."""

    line: int
    kind: str = "unknown"
    """cuda (a __global__ kernel and its launch), cuda-host (cuda_sources without one), cpp, empty, unknown."""
    problem: str = ""
    """Why the sources cannot be verified (rule kernel-source-unverifiable); empty when they can."""
    texts: dict[str, str] = field(default_factory=dict)
    """cpp_sources and cuda_sources, when they can be read."""
    flags: str = ""
    """extra_cflags, extra_cuda_cflags and extra_ldflags, as far as they can be read (-lcublas)."""


class SourceReader:
    """Reads the sources and build flags of one candidate's load_inline/load calls."""

    def __init__(self, policy: CheckPolicy, qualified: Callable[[ast.AST], str]):
        self.policy = policy
        self.qualified = qualified
        """The imported name an expression refers to at module level ("" when it is not one)."""

    def site(self, call: ast.Call, loader: str, stack: list[dict]) -> Site:
        """The site of one load_inline/load call; `stack` holds the string bindings in reach
        (innermost function first, the module last)."""
        site = Site(line=call.lineno)

        def argument(name: str, position: int) -> ast.expr | None:
            for keyword in call.keywords:
                if keyword.arg == name:
                    return keyword.value
            return call.args[position] if len(call.args) > position else None

        if loader.endswith(".load"):
            if self.policy.trust_file_sources:
                site.kind = "cuda" if ".cu" in (self.text(argument("sources", 1), stack) or "") else "cpp"
            else:
                site.problem = (
                    "`load` builds from files the gate cannot read; pass the sources to load_inline"
                )
            return site
        texts = {}
        for label, position in (("cpp_sources", 1), ("cuda_sources", 2)):
            node = argument(label, position)
            texts[label] = "" if node is None else self.text(node, stack)
        unread = [label for label, text in texts.items() if text is None]
        if unread:
            site.problem = (
                f"{' and '.join(unread)} cannot be read statically; build them from string literals"
            )
            return site
        site.texts = texts  # type: ignore[assignment]
        flags = [
            self.text(argument(name, 99), stack)
            for name in ("extra_cflags", "extra_cuda_cflags", "extra_ldflags")
        ]
        site.flags = " ".join(f for f in flags if f)
        paths = [
            m.group(1)
            for text in texts.values()
            for m in _INCLUDE.finditer(_strip_cpp(text or "", keep_strings=True))
        ]
        outside = [p for p in paths if p.startswith("/") or ".." in p]
        if (
            outside
            or argument("extra_include_paths", 99) is not None
            or _NATIVE_INCLUDE_FLAGS.search(site.flags)
        ):
            site.problem = (
                "sources include files the gate cannot read (absolute or parent paths, include flags)"
            )
        cuda = _strip_cpp(texts["cuda_sources"] or "")
        if cuda.strip():
            launches = "<<<" in cuda or "cudaLaunch" in cuda
            site.kind = "cuda" if "__global__" in cuda and launches else "cuda-host"
        else:
            site.kind = "cpp" if _strip_cpp(texts["cpp_sources"] or "").strip() else "empty"
        return site

    def text(self, node: ast.AST | None, stack: list[dict], depth: int = 0) -> str | None:
        """The string an expression builds from literals, names bound to literals, +, f-strings,
        .format/.join/.strip/.replace and textwrap.dedent; None when it depends on run time."""
        if node is None or depth > 30:
            return None
        deeper = depth + 1
        if isinstance(node, ast.Constant):
            if node.value is None:
                return ""
            return str(node.value) if isinstance(node.value, (str, int, float, bool)) else None
        if isinstance(node, ast.JoinedStr):
            parts = []
            for value in node.values:
                if isinstance(value, ast.FormattedValue):
                    text = self.text(value.value, stack, deeper)
                    if text is None:  # a number or a name: fine unless a call computes it
                        if any(isinstance(n, ast.Call) for n in ast.walk(value.value)):
                            return None
                        text = "0"
                    parts.append(text)
                else:
                    parts.append(self.text(value, stack, deeper) or "")
            return "".join(parts)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
            left = self.text(node.left, stack, deeper)
            if isinstance(node.op, ast.Mod):  # "...%s..." % args: the template, then what fills it
                return self._filled(left, [node.right], stack, deeper)
            right = self.text(node.right, stack, deeper)
            return None if left is None or right is None else left + right
        if isinstance(node, ast.Name):
            for strings in stack:
                if node.id in strings:
                    pieces = [self.text(e, stack, deeper) for e in strings[node.id]]
                    return None if any(p is None for p in pieces) else "".join(pieces)  # type: ignore[arg-type]
            return None
        if isinstance(node, (ast.List, ast.Tuple)):
            pieces = [self.text(e, stack, deeper) for e in node.elts]
            return None if any(p is None for p in pieces) else "\n".join(pieces)  # type: ignore[arg-type]
        if isinstance(node, ast.Call):
            func = node.func
            if self.qualified(func) in ("textwrap.dedent", "inspect.cleandoc"):
                return self.text(node.args[0], stack, deeper) if node.args else None
            if isinstance(func, ast.Attribute):
                base = self.text(func.value, stack, deeper)
                if base is None:
                    return None
                if func.attr == "format":
                    return self._filled(base, [*node.args, *(k.value for k in node.keywords)], stack, deeper)
                if func.attr in ("strip", "lstrip", "rstrip"):
                    return base
                if func.attr == "join" and node.args:
                    pieces = self.text(node.args[0], stack, deeper)
                    return None if pieces is None else base.join(pieces.split("\n"))
                constants = [const_str(a) for a in node.args]
                if func.attr == "replace" and len(constants) == 2 and None not in constants:
                    return base.replace(constants[0] or "", constants[1] or "")
        return None

    def _filled(
        self, template: str | None, values: list[ast.expr], stack: list[dict], depth: int
    ) -> str | None:
        """A formatted template, read as the template followed by each value's text (what is pasted
        in is scanned too); None when a value is computed at run time."""
        if template is None:
            return None
        texts = []
        for value in values:
            if isinstance(value, (ast.Tuple, ast.Dict)):
                texts.append(
                    self._filled(
                        "", [v for v in getattr(value, "elts", None) or value.values if v], stack, depth
                    )
                )  # type: ignore[union-attr]
                continue
            text = self.text(value, stack, depth)
            if text is None and any(isinstance(n, ast.Call) for n in ast.walk(value)):
                return None
            texts.append(text or "")
        return None if None in texts else "\n".join([template, *texts])  # type: ignore[list-item]


def native_problems(texts: Mapping[str, str], flags: str, policy: CheckPolicy) -> list[str]:
    """What in a site's sources and build flags is not the candidate's own code, one message per
    finding (those in a source start with its label and line)."""
    libraries = _library_pattern(policy)
    problems = [
        f"{label} line {line}: {message}"
        for label, text in texts.items()
        for line, message in _scan(text, policy, libraries)
    ]
    problems += [
        f"build flags link `{m.group(0)}`, a vendor compute library" for m in libraries.finditer(flags)
    ]
    return problems


def _library_pattern(policy: CheckPolicy) -> re.Pattern:
    return re.compile(r"\b\w*(?:" + "|".join(map(re.escape, policy.native_libraries)) + r")\w*", re.I)


def _scan(text: str, policy: CheckPolicy, libraries: re.Pattern) -> list[tuple[int, str]]:
    """ATen compute and vendor libraries in C++/CUDA source, read lexically."""
    problems: list[tuple[int, str]] = []
    code = _strip_cpp(text)
    seen: set[str] = set()

    def report(position: int, source: str, message: str) -> None:
        if message not in seen:
            seen.add(message)
            problems.append((source.count("\n", 0, position) + 1, message))

    for match in _NATIVE_ESCAPE.finditer(code):
        report(
            match.start(),
            code,
            f"calls `{' '.join(match.group(0).split())}`: Python or a loaded library does the work",
        )
    for match in _PYTHON_OBJECTS.finditer(code):
        if match.group("binding") in _PYBIND_BINDING:
            continue
        report(
            match.start(),
            code,
            f"uses `{' '.join(match.group(0).split())}`: native code may not reach Python objects",
        )
    with_strings = _strip_cpp(text, keep_strings=True)
    for match in _INCLUDE.finditer(with_strings):
        if libraries.search(match.group(1)):
            report(match.start(), with_strings, f"includes <{match.group(1)}>, a vendor compute library")
    for match in libraries.finditer(code):
        report(match.start(), code, f"uses `{match.group(0)}` from a vendor compute library")
    for match in _NATIVE_NAME.finditer(code):  # torch::X, at::ns::X: calls, macros, function pointers
        parts = [p.strip() for p in match.group(2).split("::") if p.strip()]
        name, spaces = parts[-1], parts[:-1]
        denied = any(s in policy.native_denied_namespaces for s in spaces) or is_compute_name(
            _native_core(name), policy
        )
        if not denied and match.group(3):
            utility = bool(spaces) and spaces[0] in policy.native_allowed_namespaces
            plain = name in policy.native_allowed_calls or name.startswith(policy.native_allowed_prefixes)
            denied = not (utility or plain or name[:1].isupper())
        if denied:
            qualified = "::".join([match.group(1), *parts])
            report(match.start(), code, f"uses `{qualified}`, an ATen op; compute it in your own code")
    for match in _NATIVE_USING.finditer(code):
        target = "".join((match.group(1) or match.group(2) or match.group(3)).split())
        if target.split("::")[0] in ("torch", "at", "aten") and target not in _NATIVE_OPEN_NAMESPACES:
            report(
                match.start(),
                code,
                f"`{' '.join(match.group(0).split())}` hides which calls are ATen ops; qualify them",
            )
    for match in _NATIVE_METHOD.finditer(code):
        name = match.group(1)
        if is_compute_name(_native_core(name), policy) and name not in ("all", "any"):
            report(match.start(), code, f"calls the tensor op `.{name}(...)`; compute it in your own code")
    return problems


_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*[<\"]([^>\"]+)[>\"]", re.M)
_NATIVE_NAME = re.compile(r"\b(torch|at|aten)((?:\s*::\s*\w+)+)(\s*\()?")
_NATIVE_USING = re.compile(
    r"\busing\s+namespace\s+((?:\w+\s*::\s*)*\w+)|\bnamespace\s+\w+\s*=\s*((?:\w+\s*::\s*)*\w+)"
    r"|\busing\s+((?:torch|at|aten)\s*::\s*(?:\w+\s*::\s*)*[a-z_]\w*)\s*;"
)
_NATIVE_OPEN_NAMESPACES = frozenset({"torch::indexing", "at::indexing"})
_NATIVE_INCLUDE_FLAGS = re.compile(r"(?:^|\s)(?:-I|-isystem|-include|--include-path)")


def _native_core(name: str) -> str:
    """An ATen function's op: `_softmax_out` -> softmax, `addmm_cuda` -> addmm."""
    core = name.strip("_")
    for suffix in ("_out", "_cuda", "_cpu", "_forward", "_symint", "_impl"):
        core = core.removesuffix(suffix)
    return core


_NATIVE_ESCAPE = re.compile(
    r"\b(?:py|pybind11)\s*::\s*(?:module_?\s*::\s*import|eval|exec|eval_file)\b|\bPy(?:Import|Run|Eval|Object_Call)\w*"
    r"|\b(?:dlopen|dlsym|LoadLibrary\w*|popen|fork|system)\s*\("
)
# What reaches the interpreter: the C API and torch's bindings by name, pybind11's object API (any
# py::/pybind11:: name but those a module definition needs), attribute access on objects, and
# aliases that would hide pybind11's namespace.
_PYTHON_OBJECTS = re.compile(
    r"\b_?Py(?:[A-Z_]\w*)|\bTHP\w+"
    r"|\b(?:py|pybind11)\s*::\s*(?P<binding>\w+)"
    r"|(?:\.|->)\s*attr\s*\("
    r"|\busing\s+namespace\s+pybind11\b|\busing\s+pybind11\s*::|\bnamespace\s+(?!py\s*=)\w+\s*=\s*pybind11\b"
)
_PYBIND_BINDING = frozenset(
    "arg arg_v module module_ call_guard gil_scoped_release return_value_policy kw_only pos_only"
    " overload_cast const_ doc name is_method sibling scope".split()
)
"""What `PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("f", &f, "doc", py::arg("x")); }` uses."""
_NATIVE_METHOD = re.compile(r"(?:\.|->)\s*([A-Za-z_]\w*)\s*(?:<[^<>;(){}]*>)?\s*\(")


def _strip_cpp(text: str, keep_strings: bool = False) -> str:
    """C/C++ source with comments (and, unless keep_strings, string and char literals) blanked out;
    newlines kept so line numbers still match."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
        elif text[i] in "\"'":
            quote, end = text[i], i + 1
            while end < n and text[end] not in (quote, "\n"):
                end += 2 if text[end] == "\\" else 1
            end = min(end + 1, n)
            if keep_strings:
                out.append(text[i:end])
                i = end
                continue
        else:
            out.append(text[i])
            i += 1
            continue
        out.append(re.sub(r"[^\n]", " ", text[i:end]))
        i = end
    return "".join(out)
