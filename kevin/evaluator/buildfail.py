"""Is a failed fast build the candidate's own error? Then torch's full build is not run for it.

A fast build (kevin.evaluator.fastbuild) compiles the candidate's very sources with kevin's light
headers; when it fails, the broker runs torch's full `load_inline` build, because the failure may be
the light headers' (a type, function or macro they lack). That full build parses torch's headers:
18-48 s on the H200 under an RL step's load (session 10), for candidates that nearly always fail
again on the same line. A policy under RL writes many such candidates, and a step waits for its
slowest one.

This module decides, from the fast build's compiler output alone, when the full build cannot
succeed, and errs towards running it. The fast build's `main.cpp` and `cuda.cu` hold the
candidate's text at the very lines `load_inline` writes (fastbuild.own_lines), so an error in those
lines that cannot depend on any header fails the full build too. `own_error` accepts a failure only
when all of these hold:

* at least one error was read, and every one is located in the candidate's own lines of `main.cpp`
  or `cuda.cu` (none in a header, in kevin's binding block or in the include lines);
* every error is a lexical or syntactic one that no declaration can change (`SYNTAX`: a missing
  `;` or `)`, a stray character, an unterminated string, a malformed number). Errors that name an
  identifier, a type or a member (undefined, no member, no matching overload, ...) are never
  accepted: a header might declare it;
* no identifier on the error's line or the two before it is a macro that torch's headers or the
  light headers define anywhere (`reserved_macros`: every `#define` in both include trees), nor an
  all-capitals name the candidate does not define itself (a C library macro such as FLT_MAX that
  torch's headers may include and the light ones not). A macro is the one way a header can turn a
  line's tokens into a syntax error or out of one;
* nvcc's own count ("N errors detected in the compilation of") agrees with the errors read, so a
  diagnostic in a format this module does not parse cannot hide.

An undefined name (`identifier "buf" is undefined`, `'buf' was not declared in this scope`: 27 of
the 37 failed builds of s11's learning run, 45 s each for a full build that failed again) is the
candidate's own only if no torch header declares it where the candidate uses it. That is asked of
the compiler itself, with a probe (`probe_source`): a small file with the full build's own preamble,
the candidate's include lines and using-directives, and one `sizeof(NAME)` per name, compiled with
torch's flags and headers (the broker runs it and caches each name's answer per preamble). A name
counts as undeclared only when the probe's one error on its line says so. And only where lookup in
the candidate's file cannot differ from the probe's: no `#if`, no macro of its own above an include
(it may configure the header), no namespace of its own (a `namespace at {` would extend torch's), no
class with a base (inherited members), and the name not
used as a call or template on its line (argument-dependent lookup searches the arguments'
namespaces). Without a probe (the default), undefined names go to the full build as before.

What this does not do: it never accepts a failed link, a timeout, a missing header, a killed
compiler or anything it cannot read: those still go to the full build.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

_EDG = re.compile(r"^(?P<file>\S+?)\((?P<line>\d+)\): (?P<kind>(?:catastrophic )?error)(?: #[\w-]+)?: (?P<message>.*)$")
"""nvcc's front end (EDG): `/b/cuda.cu(7): error: expected a ";"`."""
_GCC = re.compile(r"^(?P<file>\S+?):(?P<line>\d+):(?:\d+:)? (?P<kind>(?:fatal )?error): (?P<message>.*)$")
"""The host compiler: `/b/main.cpp:5:10: error: expected ';' before '}' token`."""
_EDG_COUNT = re.compile(r"^(\d+) errors? detected in the compilation of ")

SYNTAX = tuple(
    re.compile(pattern)
    for pattern in (
        # nvcc (EDG)
        r'^expected an? "[^"]+"$',
        r"^expected an expression$",
        r"^expected a declaration$",
        r"^expected a statement$",
        r"^expected an identifier$",
        r"^unrecognized token$",
        r"^user-defined literal operator not found$",
        r"^extra text after expected end of number$",
        r"^missing closing quote$",
        # g++
        r"^expected '[^']+'(?: or '[^']+')* (?:before|at end of input)",
        r"^expected primary-expression before ",
        r"^expected unqualified-id before ",
        r"^expected declaration before ",
        r"^expected initializer before ",
        r"^stray '.{1,4}' in program$",
        r"^missing terminating . character$",
        r"^unterminated comment$",
    )
)
"""Diagnostics about the candidate's characters and grammar alone."""

UNDEFINED = (
    re.compile(r'^identifier "(?P<name>[A-Za-z_]\w*)" is undefined$'),  # nvcc (EDG)
    # g++, in the C locale's quotes or a UTF-8 locale's
    re.compile(r"^['\u2018](?P<name>[A-Za-z_]\w*)['\u2019] was not declared in this scope(?:; did you mean .+\?)?$"),
)
"""Diagnostics that a name is not declared where it is used: the candidate's own only if a probe
says no header declares it either."""

_CONDITIONAL = re.compile(r"^[ \t]*#[ \t]*(?:if|ifdef|ifndef|elif)\b", re.M)
_NAMESPACE = re.compile(r"\bnamespace\b")
_USING_NAMESPACE = re.compile(r"\busing\s+namespace\b")
_DERIVED = re.compile(r"\b(?:class|struct)\s+\w+(?:\s+final)?\s*:(?!:)")
_INCLUDE_LINE = re.compile(r"^[ \t]*#[ \t]*include\b.*$", re.M)
_MACRO_LINE = re.compile(r"^[ \t]*#[ \t]*(?:define|undef)\b", re.M)
_USING_LINE = re.compile(r"^[ \t]*using\s+(?:namespace\s+)?[\w:]+\s*;", re.M)
PROBE_PREFIX = "__kevin_probe_"

_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_CAPITALS = re.compile(r"[A-Z][A-Z0-9_]+")
_DEFINE = re.compile(rb"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)", re.M)
CONTEXT_LINES = 2
"""Lines before an error's line whose identifiers are checked too (a declaration may end there)."""


@dataclass(frozen=True)
class Diagnostic:
    file: str
    """The source file's name (main.cpp, cuda.cu)."""
    line: int
    message: str


def diagnostics(output: str) -> tuple[list[Diagnostic], int | None]:
    """(every error read from a compiler output, nvcc's own error count or None when it gave none)."""
    found: list[Diagnostic] = []
    counted: int | None = None
    for raw in output.splitlines():
        line = raw.rstrip()
        count = _EDG_COUNT.match(line)
        if count:
            counted = (counted or 0) + int(count.group(1))
            continue
        match = _EDG.match(line) or _GCC.match(line)
        if match:
            found.append(Diagnostic(Path(match["file"]).name, int(match["line"]), match["message"].strip()))
    return found, counted


def _scan_defines(roots: Iterable[str | Path]) -> frozenset[str]:
    names: set[str] = set()
    for root in roots:
        for directory, _, files in os.walk(root):
            for name in files:
                try:
                    text = (Path(directory) / name).read_bytes()
                except OSError:
                    continue
                names.update(match.decode() for match in _DEFINE.findall(text))
    return frozenset(names)


@functools.lru_cache(maxsize=4)
def _reserved(roots: tuple[str, ...]) -> frozenset[str]:
    return _scan_defines(roots)


def reserved_macros(extra_roots: Iterable[str | Path] = ()) -> frozenset[str]:
    """Every macro name `#define`d anywhere in torch's include trees and kevin's light headers
    (a superset of what either build can define; about 1 s once per process)."""
    from torch.utils import cpp_extension

    from kevin.evaluator.fastbuild import LITE_INCLUDE

    roots = [*cpp_extension.include_paths(), str(LITE_INCLUDE), *map(str, extra_roots)]
    return _reserved(tuple(dict.fromkeys(roots)))


def _own_names(sources: Iterable[str]) -> set[str]:
    """All-capitals names the candidate defines itself (macros, constants)."""
    text = "\n".join(sources)
    names = {match.decode() for match in _DEFINE.findall(text.encode())}
    names.update(re.findall(r"\b([A-Z][A-Z0-9_]+)\s*(?:=|\[|\()", text))
    return names


Probe = Callable[[str, str, list[str]], set[str]]
"""(file, the candidate's text in it, names) -> the names no header declares there (a subset)."""


def undefined_name(message: str) -> str | None:
    for pattern in UNDEFINED:
        match = pattern.match(message)
        if match:
            return match["name"]
    return None


def lookup_is_plain(text: str) -> bool:
    """Whether unqualified lookup in the candidate's file `text` can only find what a probe at the
    file's top finds, or its own names: no conditional compilation, no namespace of its own, no
    class with a base (module docstring)."""
    namespaces = len(_NAMESPACE.findall(text)) - len(_USING_NAMESPACE.findall(text))
    if _CONDITIONAL.search(text) or namespaces or _DERIVED.search(text):
        return False
    # A macro of its own above an include may configure what that header declares; the probe
    # includes the headers without it.
    includes = [m.start() for m in _INCLUDE_LINE.finditer(text)]
    macros = [m.start() for m in _MACRO_LINE.finditer(text)]
    return not (includes and macros and min(macros) < max(includes))


def probe_source(file: str, text: str, names: Iterable[str]) -> tuple[str, dict[int, str]]:
    """The probe for `names` used in the candidate's `file` (main.cpp or cuda.cu; `text`: the
    candidate's own lines there): the preamble the full build writes above them, the candidate's
    include lines and using-directives/-declarations, then one line per name. (source, the line
    number of each name's probe)."""
    from kevin.evaluator.fastbuild import CUDA_PREAMBLE

    preamble = list(CUDA_PREAMBLE) if file.endswith(".cu") else ["#include <torch/extension.h>"]
    lines = [*preamble, *_INCLUDE_LINE.findall(text), *(m.strip() for m in _USING_LINE.findall(text))]
    probes: dict[int, str] = {}
    for index, name in enumerate(sorted(set(names))):
        lines.append(f"static inline void {PROBE_PREFIX}{index}() {{ (void)sizeof({name}); }}")
        probes[len(lines)] = name
    return "\n".join(lines) + "\n", probes


def probe_verdict(returncode: int, output: str, file: str, probes: Mapping[int, str]) -> dict[str, bool] | None:
    """Each probed name: True when the compiler called it undeclared (the one error on its line says
    so), False when it compiled or failed otherwise (the name exists in some form). None when the
    probe answers nothing: an error anywhere else (an include line it could not compile), a killed
    or timed-out compiler, an output with no error it can read."""
    if returncode == 0:
        return dict.fromkeys(probes.values(), False)
    found, _ = diagnostics(output)
    if returncode < 0 or not found or any(d.file != file or d.line not in probes for d in found):
        return None
    by_line: dict[int, list[Diagnostic]] = {}
    for diagnostic in found:
        by_line.setdefault(diagnostic.line, []).append(diagnostic)
    return {
        name: len(by_line.get(line, [])) == 1 and undefined_name(by_line[line][0].message) == name
        for line, name in probes.items()
    }


def own_error(
    output: str,
    directory: Path,
    own_lines: Mapping[str, range],
    reserved: frozenset[str],
    probe: Probe | None = None,
) -> list[Diagnostic] | None:
    """The fast build's errors when they are the candidate's own (see the module docstring), else
    None: the full build must decide. `directory` holds the fast build's sources, `own_lines` maps
    each source file's name to the lines holding the candidate's text (fastbuild.own_lines);
    `probe` answers for undefined names (without one they go to the full build)."""
    found, counted = diagnostics(output)
    if not found:
        return None
    edg = [d for d in found if d.file.endswith(".cu")]
    if edg and counted != len(edg):
        return None
    texts: dict[str, list[str]] = {}
    for name in own_lines:
        try:
            texts[name] = (directory / name).read_text(errors="replace").splitlines()
        except OSError:
            return None
    candidate_text = [
        line for name, lines in texts.items() for number, line in enumerate(lines, 1) if number in own_lines[name]
    ]
    defined = _own_names(candidate_text)
    undefined: dict[str, set[str]] = {}
    for diagnostic in found:
        lines = own_lines.get(diagnostic.file)
        if lines is None or diagnostic.line not in lines:
            return None
        name = undefined_name(diagnostic.message)
        if name is not None:
            line = texts[diagnostic.file][diagnostic.line - 1]
            if probe is None or re.search(rf"\b{name}\s*[(<]", line):
                return None
            undefined.setdefault(diagnostic.file, set()).add(name)
        elif not any(pattern.search(diagnostic.message) for pattern in SYNTAX):
            return None
        first = max(lines.start, diagnostic.line - CONTEXT_LINES)
        window = texts[diagnostic.file][first - 1 : diagnostic.line]
        for name in _IDENTIFIER.findall("\n".join(window)):
            if name in reserved or (_CAPITALS.fullmatch(name) and name not in defined):
                return None
    for file, names in sorted(undefined.items()):
        own_text = "\n".join(texts[file][number - 1] for number in own_lines[file] if number <= len(texts[file]))
        if not lookup_is_plain(own_text) or probe(file, own_text, sorted(names)) != names:
            return None
    return found


def report(output: str, name: str, staging: Path, entry: Path) -> str:
    """The failure as the full build reports one: `Error building extension`, then ninja's output
    less its command lines (they name kevin's light headers), with the entry's path for the
    staging directory's."""
    kept: list[str] = []
    skip_next = False
    for line in output.splitlines():
        if skip_next:
            skip_next = False
            continue
        if re.match(r"^\[\d+/\d+\] ", line) or line.startswith("ninja: Entering directory"):
            continue
        if line.startswith("FAILED: "):
            skip_next = True  # ninja prints the failed command on the next line
        kept.append(line.replace(str(staging), str(entry)))
    return f"Error building extension '{name}': " + "\n".join(kept) + "\n"
