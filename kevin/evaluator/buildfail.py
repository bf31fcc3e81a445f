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

What this does not do: it never accepts a failed link, a timeout, a missing header, a killed
compiler or anything it cannot read: those still go to the full build.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Mapping
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


def own_error(
    output: str,
    directory: Path,
    own_lines: Mapping[str, range],
    reserved: frozenset[str],
) -> list[Diagnostic] | None:
    """The fast build's errors when they are the candidate's own (see the module docstring), else
    None: the full build must decide. `directory` holds the fast build's sources, `own_lines` maps
    each source file's name to the lines holding the candidate's text (fastbuild.own_lines)."""
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
    for diagnostic in found:
        lines = own_lines.get(diagnostic.file)
        if lines is None or diagnostic.line not in lines:
            return None
        if not any(pattern.search(diagnostic.message) for pattern in SYNTAX):
            return None
        first = max(lines.start, diagnostic.line - CONTEXT_LINES)
        window = texts[diagnostic.file][first - 1 : diagnostic.line]
        for name in _IDENTIFIER.findall("\n".join(window)):
            if name in reserved or (_CAPITALS.fullmatch(name) and name not in defined):
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
