"""What a load_inline call binds, read from its C++ text for the fast build (kevin.evaluator.fastbuild).

    signatures    each bound function's signature code ("R:PPP": return and parameter kinds) from
                  its one declaration in cpp_sources; anything but simple types is NotEligible
    thunks        the C entry points the shim calls, one per bound function
    module_block  without `functions=`, the names a PYBIND11_MODULE block of plain m.def lines binds,
                  and the sources without the block

All of it is text reading: nothing is compiled or loaded here. Comments and literals are blanked
before any structure is read (`strip_comments`, `_blank_in_place`), so a declaration or a binding
inside a comment or a string never counts.
"""

from __future__ import annotations

import re

MAX_ARGS = 16


class NotEligible(Exception):
    """The call is outside what the fast path covers; build it with the real load_inline."""


# -- signatures --------------------------------------------------------------------------------

_TENSOR = r"(?:(?:torch|at)\s*::\s*)?Tensor"
_RETURN_TYPES = [
    (re.compile(rf"^{_TENSOR}$"), "T"),
    (re.compile(rf"^std\s*::\s*vector\s*<\s*{_TENSOR}\s*>$"), "L"),
    (re.compile(r"^void$"), "v"),
    (re.compile(r"^(?:double|float)$"), "d"),
    (re.compile(r"^(?:int64_t|int32_t|int|long|long\s+int|long\s+long)$"), "l"),
    (re.compile(r"^bool$"), "b"),
]
_PARAM_TYPES = [
    (re.compile(rf"^(?:const\s+)?{_TENSOR}(?:\s*const)?\s*&?$"), "T"),
    (re.compile(r"^(?:const\s+)?double$"), "d"),
    (re.compile(r"^(?:const\s+)?float$"), "f"),
    (re.compile(r"^(?:const\s+)?(?:int64_t|long|long\s+int|long\s+long)$"), "l"),
    (re.compile(r"^(?:const\s+)?(?:int|int32_t)$"), "i"),
    (re.compile(r"^(?:const\s+)?bool$"), "b"),
]
_SPECIFIERS = re.compile(r"^(?:(?:static|inline|extern|constexpr|\[\[nodiscard\]\])\s+)+")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*$")


def strip_comments(text: str) -> str:
    """C++ source with comments and string/char literals blanked (newlines kept)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        two = text[i : i + 2]
        if two == "//":
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif two == "/*":
            j = text.find("*/", i + 2)
            end = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, end))
            i = end
        elif text[i] in "\"'":
            quote, j = text[i], i + 1
            while j < n and text[j] != quote:
                j += 2 if text[j] == "\\" else 1
            out.append(quote + quote)
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _normalize(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r"\s*::\s*", "::", text)
    text = re.sub(r"\s*&\s*", "&", text)
    text = re.sub(r"\s*<\s*", "<", text)
    return re.sub(r"\s*>\s*", ">", text)


def _param_code(param: str) -> str:
    text = _normalize(param.split("=", 1)[0])
    for pattern, code in _PARAM_TYPES:
        if pattern.match(text):
            return code
    # Drop a trailing parameter name and try again.
    name = _IDENTIFIER.search(text)
    if name and name.start() > 0:
        bare = text[: name.start()].strip()
        for pattern, code in _PARAM_TYPES:
            if pattern.match(bare):
                return code
    raise NotEligible(f"parameter type not covered: {param.strip()!r}")


def _return_code(text: str) -> str | None:
    text = _SPECIFIERS.sub("", _normalize(text))
    for pattern, code in _RETURN_TYPES:
        if pattern.match(text):
            return code
    return None


def signatures(cpp_text: str, functions: list[str]) -> dict[str, str]:
    """Map each bound function to its signature code "R:PPP" from its declarations in cpp_sources."""
    code = strip_comments(cpp_text)
    found: dict[str, str] = {}
    for name in functions:
        codes = set()
        for match in re.finditer(
            rf"\b{re.escape(name)}\s*\(([^()]*)\)\s*(?:const\s*)?(?:noexcept\s*)?[;{{]", code
        ):
            start = max(code.rfind(c, 0, match.start()) for c in ";{}") + 1
            line_start = code.rfind("\n", 0, match.start()) + 1
            head = code[start : match.start()]
            if "#" in head:  # a preprocessor line between the last statement and the name
                head = code[line_start : match.start()]
            returned = _return_code(head)
            if returned is None:
                continue  # a call (`return f(x);`), not a declaration
            params = match.group(1).strip()
            plist = [] if params in ("", "void") else [p for p in params.split(",")]
            codes.add(returned + ":" + "".join(_param_code(p) for p in plist))
        if len(codes) != 1:
            raise NotEligible(f"{name}: {'no declaration' if not codes else 'overloaded'} in cpp_sources")
        signature = codes.pop()
        if len(signature) - 2 > MAX_ARGS:
            raise NotEligible(f"{name}: more than {MAX_ARGS} arguments")
        found[name] = signature
    return found


_THUNK_ARG = {
    "T": "*static_cast<at::Tensor*>(a[{i}])",
    "d": "*static_cast<double*>(a[{i}])",
    "f": "static_cast<float>(*static_cast<double*>(a[{i}]))",
    "l": "*static_cast<int64_t*>(a[{i}])",
    "i": "static_cast<int>(*static_cast<int64_t*>(a[{i}]))",
    "b": "*static_cast<bool*>(a[{i}])",
}
_THUNK_BODY = {
    "T": "new (r) at::Tensor({call});",
    "L": "new (r) std::vector<at::Tensor>({call});",
    "d": "*static_cast<double*>(r) = static_cast<double>({call});",
    "l": "*static_cast<int64_t*>(r) = static_cast<int64_t>({call});",
    "b": "*static_cast<bool*>(r) = static_cast<bool>({call});",
    "v": "(void)r; {call};",
}


def thunks(functions: dict[str, str]) -> str:
    """The C entry points the shim calls, one per bound function (replaces the PYBIND11_MODULE block)."""
    lines = ["#include <new>", "#include <vector>"]
    for name, signature in functions.items():
        args = ", ".join(_THUNK_ARG[c].format(i=i) for i, c in enumerate(signature[2:]))
        body = _THUNK_BODY[signature[0]].format(call=f"{name}({args})")
        lines.append(
            f'extern "C" __attribute__((visibility("default"))) void kevin_thunk_{name}(void** a, void* r) {{ {body} }}'
        )
    return "\n".join(lines)


_MODULE_HEAD = re.compile(r"PYBIND11_MODULE\s*\(\s*TORCH_EXTENSION_NAME\s*,\s*(\w+)\s*\)\s*\{")


def _blank_in_place(text: str) -> str:
    """`text` with comments turned to spaces and string/char literals' contents to '_', position for
    position (newlines kept), so structure found in it maps back onto `text`."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        two = text[i : i + 2]
        if two in ("//", "/*"):
            end = text.find("\n", i) if two == "//" else text.find("*/", i + 2)
            end = n if end < 0 else (end if two == "//" else end + 2)
            for k in range(i, end):
                out[k] = "\n" if text[k] == "\n" else " "
            i = end
        elif text[i] in "\"'":
            j = i + 1
            while j < n and text[j] != text[i]:
                j += 2 if text[j] == "\\" else 1
            for k in range(i + 1, min(j, n)):
                out[k] = "\n" if text[k] == "\n" else "_"
            i = j + 1
        else:
            i += 1
    return "".join(out)


def module_block(cpp_sources: list[str]) -> tuple[list[str], list[str]]:
    """Without `functions=`, the bindings of a PYBIND11_MODULE block written in cpp_sources (what
    a model often writes): the sources without the block, and the names it binds. Only a block made
    of plain `m.def("f", &f[, "doc"]);` lines, each binding a function under its own name, is
    reproduced; anything else in it (classes, lambdas, py::arg, another name) is NotEligible."""
    blanks = [_blank_in_place(text) for text in cpp_sources]
    found = [(i, m) for i, blank in enumerate(blanks) for m in _MODULE_HEAD.finditer(blank)]
    if not found:
        raise NotEligible("no functions to bind")
    if len(found) > 1:
        raise NotEligible("more than one PYBIND11_MODULE block")
    index, head = found[0]
    text, blank = cpp_sources[index], blanks[index]
    depth, end = 0, -1
    for position in range(head.end() - 1, len(blank)):
        depth += {"{": 1, "}": -1}.get(blank[position], 0)
        if depth == 0:
            end = position
            break
    if end < 0:
        raise NotEligible("unbalanced PYBIND11_MODULE block")
    binding = re.compile(
        rf'{re.escape(head.group(1))}\s*\.\s*def\s*\(\s*"(_+)"\s*,\s*&?\s*(\w+)\s*(?:,\s*"_*"\s*)?\)\s*'
    )
    names: list[str] = []
    for statement in re.finditer(r"[^;]+", blank[head.end() : end]):
        if not statement.group().strip():
            continue
        matched = binding.fullmatch(statement.group().strip())
        if matched is None:
            raise NotEligible("PYBIND11_MODULE holds more than m.def lines")
        offset = head.end() + statement.start() + (len(statement.group()) - len(statement.group().lstrip()))
        name = text[offset + matched.start(1) : offset + matched.end(1)]  # the literal, from the source
        if name != matched.group(2):
            raise NotEligible(f"PYBIND11_MODULE binds {matched.group(2)} as {name!r}")
        names.append(name)
    if not names or len(set(names)) != len(names):
        raise NotEligible("no functions to bind" if not names else "a name bound twice (overloads)")
    stripped = text[: head.start()] + "\n" * text.count("\n", head.start(), end + 1) + text[end + 1 :]
    return [*cpp_sources[:index], stripped, *cpp_sources[index + 1 :]], names
