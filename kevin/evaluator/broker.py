"""The build broker: candidates' extensions built, checked and cached by the judge, never loaded by it.

The runner (the process that loads a candidate) cannot write the build cache. Its `load_inline`
(kevin.evaluator.build.install_client) sends the call's bound arguments, as JSON data, to the
judge, whose `Broker.build(arguments)` answers with a `BuildReply`: the library to load and its
sha256, or the error load_inline would raise. In the broker:

  * the arguments are untrusted data: exactly load_inline's parameters, each of its type, within
    size limits; sycl is refused; `use_pch` is dropped (torch would write a precompiled header into
    its own install), `build_directory` and `verbose` are ignored;
  * every flag (extra_cflags, extra_cuda_cflags, extra_ldflags, extra_include_paths) is checked
    against an allow-list (`flag_problems`): no compiler plugins, `-B`, spec files, wrappers,
    `-ccbin`, response files, pre-included files, linker scripts or pass-through options that hide
    them (`-Xcompiler`, `-Wl,`, `-Xlinker`, `-Xptxas` are opened and their contents checked), no
    characters the shell or ninja would interpret, and include, library and run-time search paths
    only inside the toolchain (CUDA, torch, Python, /usr) or directories the judge names
    (`extra_roots`), never a directory a candidate can write (its contents are not in the key);
  * the key is computed here (content-addressed: arguments, toolchain, GPU arch, kevin's native
    sources and this policy), so a runner cannot choose where its build lands;
  * a miss builds in a fresh staging directory: first kevin's fast path (compile and link only,
    kevin.evaluator.fastbuild), else torch's own load_inline in a throwaway Python process whose
    last step (importing the module) is replaced by returning its path, so no candidate code runs
    in any process with the judge's powers; both run in their own process group, killed on timeout;
  * the built library is checked (kevin.evaluator.symbols: imports, libraries, search paths, raw
    system calls); a refusal reads like a link error;
  * the library's sha256 goes into the entry's manifest (`kevin-entry.json`, written only here) and
    the staging directory is renamed atomically to `<cache>/<name>-<key[:20]>`;
  * a hit re-validates the manifest (the exact keys and types; the library is `<name>.so` in the
    entry itself, a regular file, not a link; the key matches) and the library's hash; an entry
    that fails is moved aside and rebuilt (the reply says why in `discarded`);
  * brokers of many judge processes share one cache: a per-key flock (with a timeout: any
    process that can open the lock file can hold it) serializes builds of one key.

What the runner must be allowed: read (not list: Landlock READ_FILE without READ_DIR) the entries
under the cache root and the shims beside it. It needs no write access anywhere in the cache.

What this does not stop: the compilers run with the judge's read access, so a source can
`#include` or `.incbin` any file the judge can read and have it echoed in a compile error or
embedded in its library; run the broker's builds under read rules (Landlock) that leave out job
directories and secrets. Compile-time resource use is bounded only by the timeout. The symbol check's
own limits are in kevin.evaluator.symbols.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import re
import shutil
import stat
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from kevin.evaluator import fastbuild, symbols
from kevin.evaluator.build import BuildReply, _gpu_arch, build_key, sha256_file

__all__ = ["Broker", "BuildReply", "flag_problems", "normalize"]

MANIFEST = "kevin-entry.json"
MANIFEST_FORMAT = 1
_MANIFEST_KEYS = {
    "format",
    "name",
    "key",
    "kind",
    "library",
    "sha256",
    "functions",
    "shim",
    "fallback",
    "build_seconds",
}

MAX_SOURCE_BYTES = 4 << 20
MAX_LIST_ITEMS = 256
MAX_FLAG_CHARS = 1024
MAX_ERROR_CHARS = 16000

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_SAFE_FLAG = re.compile(r"[A-Za-z0-9_=+,./:%^ \t-]*")
"""Characters a flag may hold: torch writes flags unquoted into build.ninja, and ninja runs them
through /bin/sh, so quotes, `$`, `;`, `|`, `&`, `*`, `@`, newlines ... would be interpreted."""
_SAFE_PATH = re.compile(r"/[A-Za-z0-9_=+,./:%^-]*")

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


class _Corrupt(Exception):
    """A cache entry that does not validate."""


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


# -- flags ----------------------------------------------------------------------------------------


def toolchain_roots(extra: Iterable[Path] = ()) -> tuple[Path, ...]:
    """Directories whose headers and libraries a build may name: installed with the toolchain,
    written by no job (CUDA, torch, Python's headers, /usr), plus `extra`."""
    candidates: list[str] = []
    try:
        import torch
        from torch.utils import cpp_extension

        candidates.append(os.path.dirname(torch.__file__))
        candidates.append(cpp_extension.CUDA_HOME or "")
    except Exception:  # noqa: BLE001 - no torch: the system directories only
        pass
    candidates += [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"]
    paths = sysconfig.get_paths()
    candidates += [paths.get("include", ""), paths.get("platinclude", "")]
    site = Path(paths["purelib"]) / "nvidia"
    candidates.append(str(site) if site.is_dir() else "")
    candidates += ["/usr/include", "/usr/local/include", "/usr/lib", "/usr/lib64", "/lib", "/lib64"]
    candidates += [str(p) for p in symbols.library_dirs()]
    candidates += [str(p) for p in extra]
    roots: list[Path] = []
    for candidate in candidates:
        if candidate and os.path.isdir(candidate):
            real = Path(os.path.realpath(candidate))
            if real not in roots and real != Path("/"):
                roots.append(real)
    return tuple(roots)


def _path_problem(path: str, roots: Sequence[Path]) -> str | None:
    if not _SAFE_PATH.fullmatch(path):
        if not path.startswith("/"):
            return "relative paths resolve inside kevin's build directory: name an absolute path"
        return "the path holds characters kevin does not pass to a shell"
    real = Path(os.path.realpath(path))
    if any(real == root or root in real.parents for root in roots):
        return None
    return "outside the toolchain's directories (CUDA, torch, Python, /usr): a build may read only those"


_CXX_DENIED: list[tuple[re.Pattern[str], str]] = [
    (re.compile(p), reason)
    for p, reason in [
        (r"-fplugin.*", "compiler plugins run code inside the compiler"),
        (r"-B.*", "-B changes where the compiler finds its own programs"),
        (r"--?specs.*", "spec files rewrite the compiler driver's commands"),
        (r"--?wrapper.*", "-wrapper runs the compiler's programs under another program"),
        (
            r"-W[lap](,.*)?",
            "-Wl, -Wa and -Wp pass options past the checks (link options belong in extra_ldflags)",
        ),
        (
            r"-X(linker|assembler|preprocessor)",
            "-Xlinker, -Xassembler and -Xpreprocessor pass options past the checks",
        ),
        (
            r"--?(include|imacros|iprefix|iwithprefix|iwithprefixbefore|isysroot|imultilib|imultiarch|sysroot)\b.*",
            "pre-included files and re-rooted include paths read files kevin has not checked",
        ),
        (r"--include-directory.*|--system-header-prefix.*", "name include directories with -I or -isystem"),
        (
            r"-(o|x|c|S|E|M|MM|MD|MMD|MP|MG)|-(MF|MT|MQ|dump|aux-info|print-|save-temps|-print).*",
            "the build owns the compiler's outputs and modes",
        ),
        (
            r"-fopenmp(?!-simd).*|-fopenacc.*|-foffload.*|-ftree-parallelize-loops.*|-fgnu-tm",
            "OpenMP, OpenACC and offloading run work on native threads",
        ),
        (
            r"-f(no-)?(profile|auto-profile|branch-probabilities|test-coverage|coverage|dump|opt-info|"
            r"save-optimization-record|callgraph-info|deps)(.*)|--coverage",
            "profiling, coverage and dump options read or write files outside the build",
        ),
        (r"-f(no-)?(sanitize|instrument|patchable-function-entry).*", "instrumentation runtimes and hooks"),
        (
            r"-f(no-)?(use-ld|ld-path|use-linker-plugin|lto|fat-lto).*|--ld-path.*",
            "the linker and its plugins are kevin's",
        ),
        (r"-f(no-)?modules?.*", "C++ modules read and write a module cache or run a mapper program"),
        (
            r"-f(no-)?(compare-debug|self-test|wpa|ltrans|resolution|preprocessed|directives-only|working-directory).*",
            "internal driver modes",
        ),
        (
            r"-(static|nostdlib|nodefaultlibs|nostartfiles|nostdinc|nostdinc\+\+|pie|no-pie|rdynamic|r)\b.*",
            "kevin links the library itself",
        ),
    ]
]
_CXX_ALLOWED = [
    re.compile(p)
    for p in [
        r"-O([0-3sgz]|fast)?",
        r"-g([0-3]|gdb[0-3]?|dwarf(-[2-5])?)?",
        r"-std=(c|gnu)\+\+(98|03|0x|11|1y|14|1z|17|2a|20|2b|23|2c|26)",
        r"-D[A-Za-z_]\w*(=.*)?",
        r"-U[A-Za-z_]\w*",
        r"-W(no-)?(error=)?[a-z0-9][a-z0-9+=-]*",
        r"-Werror|-w|-pedantic(-errors)?|-pthread|-shared|-v|-H",
        r"-m(arch|tune|cpu|fpmath|cmodel|prefer-vector-width)=[\w.-]+",
        r"-m(no-)?(avx[\w-]*|sse[\w.]*|ssse3|fma4?|f16c|bmi2?|popcnt|lzcnt|amx-[\w-]+|vzeroupper|64|fp16|sve2?)",
        r"-f(no-)?[A-Za-z0-9][A-Za-z0-9+-]*(=[A-Za-z0-9_.,+:-]*)?",
        r"--param=[a-z0-9-]+=\d+",
    ]
]
_CXX_PATH_OPTIONS = ("-isystem", "-iquote", "-idirafter", "-I", "-L")


def _cxx_problems(tokens: list[str], where: str, roots: Sequence[Path]) -> list[str]:
    problems: list[str] = []
    i = 0
    while i < len(tokens):
        token, step = tokens[i], 1
        option = next((o for o in _CXX_PATH_OPTIONS if token.startswith(o)), None)
        if option is not None:
            path = token[len(option) :]
            if not path:
                if i + 1 >= len(tokens):
                    problems.append(f"{where}: {token} without a directory")
                    break
                path, step = tokens[i + 1], 2
            problem = _path_problem(path, roots)
            if problem:
                problems.append(f"{where}: {option} {path}: {problem}")
        elif token in ("-D", "-U", "--param"):
            if i + 1 >= len(tokens):
                problems.append(f"{where}: {token} without a value")
                break
            joined = token + tokens[i + 1] if token != "--param" else f"--param={tokens[i + 1]}"
            problems += _cxx_problems([joined], where, roots)
            step = 2
        elif token.startswith("-l"):
            problems += _ld_problems([token], where, roots)
        else:
            problem = _cxx_flag_problem(token)
            if problem:
                problems.append(f"{where}: {token}: {problem}")
        i += step
    return problems


def _cxx_flag_problem(token: str) -> str | None:
    for pattern, reason in _CXX_DENIED:
        if pattern.fullmatch(token):
            return reason
    if any(pattern.fullmatch(token) for pattern in _CXX_ALLOWED):
        return None
    return "not on kevin's list of compiler flags"


# nvcc: options by name (leading dashes dropped); each may carry a value after "=" or as the next token.
_NVCC_SWITCHES = {
    "use_fast_math",
    "use-fast-math",
    "expt-relaxed-constexpr",
    "expt-extended-lambda",
    "extended-lambda",
    "lineinfo",
    "generate-line-info",
    "G",
    "device-debug",
    "g",
    "debug",
    "res-usage",
    "resource-usage",
    "restrict",
    "w",
    "disable-warnings",
    "display-error-number",
    "no-display-error-number",
    "extra-device-vectorization",
    "allow-unsupported-compiler",
    "no-host-device-initializer-list",
    "no-host-device-move-forward",
    "Wreorder",
    "Wno-deprecated-gpu-targets",
    "Wno-deprecated-declarations",
    "Wext-lambda-captures-this",
    "Wdefault-stream-launch",
    "Wmissing-launch-bounds",
    "source-in-ptx",
    "O0",
    "O1",
    "O2",
    "O3",
    "Werror",
    "keep-device-functions",
}
_ARCH = r"(sm|compute|lto)_\d+[af]?"
_NVCC_VALUES: dict[str, re.Pattern[str]] = {
    name: re.compile(pattern)
    for names, pattern in [
        (("arch", "gpu-architecture"), rf"({_ARCH}|native|all|all-major)(,{_ARCH})*"),
        (("code", "gpu-code"), rf"{_ARCH}(,{_ARCH})*"),
        (("gencode", "generate-code"), rf"arch={_ARCH},code={_ARCH}(,{_ARCH})*"),
        (("std",), r"c\+\+(03|11|14|17|20|23)"),
        (("maxrregcount", "t", "threads", "split-compile", "optimize", "O"), r"\d{1,4}"),
        (
            (
                "ftz",
                "prec-div",
                "prec-sqrt",
                "fmad",
                "rdc",
                "relocatable-device-code",
                "static-global-template-stub",
                "dopt",
                "extensible-whole-program",
            ),
            r"true|false|on|off",
        ),
        (("default-stream",), r"legacy|null|per-thread"),
        (("diag-suppress", "diag-warn", "diag-error"), r"[\w,-]+"),
        (
            ("Werror",),
            r"(cross-execution-space-call|reorder|default-stream-launch|missing-launch-bounds|ext-lambda-captures-this|deprecated-declarations|all-warnings)(,[\w-]+)*",
        ),
    ]
    for name in names
}
_NVCC_NESTED = {"Xcompiler", "compiler-options", "Xptxas", "ptxas-options", "Xcudafe"}
_NVCC_PATHS = {"I", "include-path", "isystem", "system-include"}
_NVCC_MACROS = {"D", "define-macro", "U", "undefine-macro"}
_NVCC_DENIED: dict[str, str] = {
    **dict.fromkeys(("ccbin", "compiler-bindir"), "-ccbin chooses the host compiler"),
    **dict.fromkeys(("optf", "options-file"), "options files read arguments from a file"),
    **dict.fromkeys(
        (
            "Xlinker",
            "linker-options",
            "Xnvlink",
            "nvlink-options",
            "Xarchive",
            "archive-options",
            "Xfatbin",
            "fatbin-options",
            "forward-unknown-to-host-compiler",
            "forward-unknown-to-host-linker",
            "forward-unknown-opts",
        ),
        "passes options past the checks",
    ),
    **dict.fromkeys(("include", "pre-include"), "pre-included files are files kevin has not checked"),
    **dict.fromkeys(
        (
            "o",
            "output-file",
            "odir",
            "output-directory",
            "MF",
            "dependency-output",
            "keep",
            "keep-dir",
            "save-temps",
            "time",
            "fdevice-time-trace",
            "generate-dependencies",
            "M",
            "MM",
            "MD",
            "MMD",
            "E",
            "preprocess",
            "ptx",
            "cubin",
            "fatbin",
            "lib",
            "link",
            "dlink",
            "device-link",
            "shared",
            "run",
            "run-args",
            "dryrun",
            "x",
            "cuda",
            "c",
            "compile",
            "host-linker-script",
            "libdevice-directory",
            "target-directory",
            "nvvmir-library",
            "use-local-env",
            "cudart",
            "cudadevrt",
            "l",
            "library",
            "L",
            "library-path",
        ),
        "the build owns nvcc's modes, outputs and libraries",
    ),
}
_PTXAS = re.compile(
    r"-v|--verbose|-O[0-3]|--opt-level=[0-3]|-?-warn-(spills|lmem-usage)|--warn-on-(spills|local-memory-usage|"
    r"double-precision-use)|-dlcm=(ca|cg)|-dscm=(wb|cg|cs|wt)|--def-(load|store)-cache=\w+|"
    r"-?-allow-expensive-optimizations(=(true|false))?|-?-maxrregcount=\d+|--fmad=(true|false)|-lineinfo|"
    r"--generate-line-info|--suppress-stack-size-warning|-Werror|--warning-as-error|--register-usage-level=\d+"
)
_CUDAFE = re.compile(r"--?diag[_-](suppress|warning|error|remark)(=[\w,-]+)?|--display_error_number|[\w-]+")


def _nvcc_problems(tokens: list[str], where: str, roots: Sequence[Path]) -> list[str]:
    problems: list[str] = []
    i = 0
    while i < len(tokens):
        token, step = tokens[i], 1
        if not token.startswith("-"):
            problems.append(f"{where}: {token}: not an nvcc option (a file or a stray value)")
            i += 1
            continue
        joined = next((j for j in ("-isystem", "-I", "-D", "-U") if token.startswith(j) and token != j), None)
        if joined is not None:  # -I/usr/include, -DFOO=1: the value joined to the option
            name, equals, value = joined[1:], "=", token[len(joined) :]
        else:
            name, equals, value = token.lstrip("-").partition("=")
        takes_value = (
            name in _NVCC_VALUES or name in _NVCC_NESTED or name in _NVCC_PATHS or name in _NVCC_MACROS
        )
        if takes_value and not equals and name not in _NVCC_SWITCHES:
            if i + 1 >= len(tokens):
                problems.append(f"{where}: {token} without a value")
                break
            value, step = tokens[i + 1], 2
        shown = f"{token} {value}" if step == 2 else token
        if name in _NVCC_DENIED:
            problems.append(f"{where}: {shown}: {_NVCC_DENIED[name]}")
        elif name in ("Xcompiler", "compiler-options"):
            problems += _cxx_problems(_split_commas(value), f"{where}: -Xcompiler", roots)
        elif name in ("Xptxas", "ptxas-options"):
            for part in _split_commas(value):
                if not _PTXAS.fullmatch(part):
                    problems.append(f"{where}: -Xptxas {part}: not on kevin's list of ptxas options")
        elif name == "Xcudafe":
            for part in _split_commas(value):
                if not _CUDAFE.fullmatch(part) or not part.startswith("-"):
                    problems.append(f"{where}: -Xcudafe {part}: not on kevin's list of front-end options")
        elif name in _NVCC_PATHS:
            problem = _path_problem(value, roots)
            if problem:
                problems.append(f"{where}: -I {value}: {problem}")
        elif name in _NVCC_MACROS:
            if not re.fullmatch(r"[A-Za-z_]\w*(=.*)?", value) or (name.startswith("U") and "=" in value):
                problems.append(f"{where}: {shown}: not a macro definition")
        elif name in _NVCC_VALUES and (equals or step == 2):
            if not _NVCC_VALUES[name].fullmatch(value):
                problems.append(f"{where}: {shown}: value not on kevin's list")
        elif name in _NVCC_SWITCHES and not equals:
            pass
        else:
            problems.append(f"{where}: {token}: not on kevin's list of nvcc options")
        i += step
    return problems


def _split_commas(value: str) -> list[str]:
    return [part for part in value.split(",") if part]


ALLOWED_LIBRARIES = {
    "cudart",
    "cuda",
    "cublas",
    "cublasLt",
    "curand",
    "cufft",
    "cusparse",
    "cusolver",
    "cudnn",
    "nvToolsExt",
    "c10",
    "c10_cuda",
    "torch",
    "torch_cpu",
    "torch_cuda",
    "torch_python",
    "m",
    "stdc++",
    "pthread",
}
_WL_SWITCHES = {
    "-O0",
    "-O1",
    "-O2",
    "--as-needed",
    "--no-as-needed",
    "--no-undefined",
    "--gc-sections",
    "--no-gc-sections",
    "-s",
    "--strip-all",
    "--strip-debug",
    "-S",
    "--build-id",
    "--hash-style=gnu",
    "--hash-style=both",
    "--enable-new-dtags",
    "--disable-new-dtags",
    "--icf=all",
    "--icf=none",
}
_WL_Z = {"defs", "now", "lazy", "relro", "norelro", "noexecstack"}


def _ld_problems(tokens: list[str], where: str, roots: Sequence[Path]) -> list[str]:
    problems: list[str] = []
    i = 0
    while i < len(tokens):
        token, step = tokens[i], 1
        if token.startswith("-l"):
            library = token[2:] or (tokens[i + 1] if i + 1 < len(tokens) else "")
            step = 1 if token[2:] else 2
            if library.startswith(":") or library not in ALLOWED_LIBRARIES:
                problems.append(
                    f"{where}: -l{library}: links a library kevin does not allow (allowed: {', '.join(sorted(ALLOWED_LIBRARIES))})"
                )
        elif token.startswith("-L"):
            path = token[2:] or (tokens[i + 1] if i + 1 < len(tokens) else "")
            step = 1 if token[2:] else 2
            problem = _path_problem(path, roots)
            if problem:
                problems.append(f"{where}: -L {path}: {problem}")
        elif token.startswith("-Wl,"):
            problems += [f"{where}: {token}: {p}" for p in _wl_problems(token[4:].split(","), roots)]
        elif token in ("-shared", "-fPIC", "-fpic", "-pthread", "-g", "-s") or re.fullmatch(
            r"-O[0-3s]?", token
        ):
            pass
        elif token in ("-fopenmp", "-lgomp", "-fopenacc"):
            problems.append(f"{where}: {token}: OpenMP runs work on native threads")
        elif not token.startswith("-"):
            problems.append(
                f"{where}: {token}: linking a file by path is not allowed (use -l with an allowed library)"
            )
        else:
            problem = next((r for p, r in _CXX_DENIED if p.fullmatch(token)), None)
            problems.append(f"{where}: {token}: {problem or 'not on the list of link flags kevin allows'}")
        i += step
    return problems


def _wl_problems(parts: list[str], roots: Sequence[Path]) -> list[str]:
    problems: list[str] = []
    i = 0
    while i < len(parts):
        part, step = parts[i], 1
        if part in ("-rpath", "--rpath", "-R") or part.startswith(("-rpath=", "--rpath=")):
            path = part.partition("=")[2] if "=" in part else (parts[i + 1] if i + 1 < len(parts) else "")
            step = 1 if "=" in part else 2
            problem = _path_problem(path, roots)
            if problem:
                problems.append(f"run-time search path {path}: {problem}")
        elif part == "-z":
            value = parts[i + 1] if i + 1 < len(parts) else ""
            step = 2
            if value not in _WL_Z:
                problems.append(f"-z {value}: not on kevin's list of linker options")
        elif part not in _WL_SWITCHES:
            problems.append(
                f"{part}: not on kevin's list of linker options (no scripts, wraps, plugins or response files)"
            )
        i += step
    return problems


def _tokens(items: list[str], where: str) -> tuple[list[str], list[str]]:
    """Split flags as the shell will (they reach it unquoted); problems for characters it would interpret."""
    tokens: list[str] = []
    problems: list[str] = []
    for item in items:
        if "@" in item:
            problems.append(
                f"{where}: {item!r}: response files (@file) read arguments from a file kevin has not checked"
            )
        elif not _SAFE_FLAG.fullmatch(item):
            bad = sorted({c for c in item if not _SAFE_FLAG.fullmatch(c)})
            problems.append(
                f"{where}: {item!r}: characters the shell or ninja would interpret: {''.join(bad)!r}"
            )
        else:
            tokens += item.split()
    return tokens, problems


def flag_problems(arguments: dict[str, Any], roots: Sequence[Path]) -> list[str]:
    """Every reason the (normalized) call's flags and include paths are refused (empty: accepted)."""
    problems: list[str] = []
    tokens, found = _tokens(arguments.get("extra_cflags") or [], "extra_cflags")
    problems += found + _cxx_problems(tokens, "extra_cflags", roots)
    tokens, found = _tokens(arguments.get("extra_cuda_cflags") or [], "extra_cuda_cflags")
    problems += found + _nvcc_problems(tokens, "extra_cuda_cflags", roots)
    tokens, found = _tokens(arguments.get("extra_ldflags") or [], "extra_ldflags")
    problems += found + _ld_problems(tokens, "extra_ldflags", roots)
    for path in arguments.get("extra_include_paths") or []:
        problem = _path_problem(path, roots)
        if problem:
            problems.append(f"extra_include_paths: {path}: {problem}")
    return problems


# -- the throwaway build process ----------------------------------------------------------------------

_TORCH_BUILD = r"""
import json, os, sys
spec = json.load(open(sys.argv[1]))
result = {"ok": False, "error_type": "SystemError", "error": "kevin: the build process did not finish"}
try:
    import torch.utils.cpp_extension as ce
    if not callable(getattr(ce, "_import_module_from_library", None)):
        raise SystemError("kevin: this torch has no _import_module_from_library: the broker will not build by loading")
    # torch's last step imports (runs) the library: here it only names it.
    ce._import_module_from_library = lambda name, path, is_python_module: os.path.join(path, name + ce.LIB_EXT)
    getattr(ce, spec["function"])(**spec["kwargs"])
    result = {"ok": True, "error_type": "", "error": ""}
except BaseException as exc:
    result = {"ok": False, "error_type": type(exc).__name__, "error": str(exc)}
with open(spec["result"], "w") as handle:
    json.dump(result, handle)
"""


def _torch_build(
    function: str, kwargs: dict[str, Any], directory: Path, timeout: float, overrides: dict[str, str]
) -> tuple[bool, str, str]:
    """Run torch's `function` (load_inline or load) in a throwaway process: (ok, error_type, error)."""
    result = directory / ".kevin-build-result.json"
    spec = directory / ".kevin-build-spec.json"
    spec.write_text(json.dumps({"function": function, "kwargs": kwargs, "result": str(result)}))
    command = [
        sys.executable,
        *(["-P"] if sys.version_info >= (3, 11) else []),
        "-c",
        _TORCH_BUILD,
        str(spec),
    ]
    returncode, output = fastbuild.run_killable(command, directory, timeout, env={**os.environ, **overrides})
    try:
        done = json.loads(result.read_text())
    except (OSError, ValueError):
        if returncode < 0:
            return False, "TimeoutError", f"the build took more than {timeout:.0f} s"
        return (
            False,
            "SystemError",
            f"kevin: the build process ended without a result (exit {returncode}): {output[-2000:]}",
        )
    finally:
        spec.unlink(missing_ok=True)
        result.unlink(missing_ok=True)
    return bool(done.get("ok")), str(done.get("error_type", "")), str(done.get("error", ""))


def _objects(directory: Path) -> list[Path]:
    """The object files a build in `directory` linked (main.o, cuda.cuda.o: the candidate's code)."""
    return sorted(p for p in directory.glob("*.o") if p.is_file() and not p.is_symlink())


def _truncate(text: str) -> str:
    if len(text) <= MAX_ERROR_CHARS:
        return text
    head = MAX_ERROR_CHARS * 3 // 4
    return text[:head] + "\n... (kevin cut the build output here) ...\n" + text[-(MAX_ERROR_CHARS - head) :]


def _digest_files(paths: Iterable[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


POLICY = _digest_files([Path(__file__), Path(symbols.__file__)]) + symbols.POLICY_VERSION
"""Part of every key: a change to the broker's or the symbol check's rules rebuilds every entry."""


# -- the broker -------------------------------------------------------------------------------------------


class Broker:
    """Builds candidates' extensions for runners that cannot; one per judge process (thread-safe)."""

    def __init__(
        self,
        cache_root: Path,
        *,
        fast: bool = True,
        device_arch: str | None = None,
        timeout_s: float = 900.0,
        lock_timeout_s: float | None = None,
        extra_roots: Sequence[Path] = (),
    ) -> None:
        """`device_arch`: the GPUs' compute capabilities ("9.0"), part of the key and the arch torch
        builds for; None detects them in this process, "" means none. `extra_roots`: directories
        (read-only to every job: a CUTLASS checkout, say) a build may name as include or library
        paths besides the toolchain's."""
        self.cache_root = Path(cache_root)
        self.fast = fast
        self.device_arch = _gpu_arch() if device_arch is None else device_arch
        self.timeout_s = timeout_s
        self.lock_timeout_s = lock_timeout_s if lock_timeout_s is not None else timeout_s + 60
        self.roots = toolchain_roots(extra_roots)
        self._lock = threading.Lock()
        self._shim: tuple[Path, str, tuple[int, int, int]] | None = None
        self._reference: tuple[frozenset[str], frozenset[str]] | None = None

    def prepare(self) -> None:
        """Build what every later request needs once per toolchain (kevin's shim, the reference
        binding of the symbol check), so that no candidate's build waits for them: call it when the
        judge starts. Raises symbols.Unavailable when either cannot be built."""
        self._sweep()
        if self.fast:
            self._shim_library()
        self._reference_sets()

    def _sweep(self) -> None:
        """Remove staging and trash directories left by brokers killed mid-build (older than any
        build may take)."""
        horizon = time.time() - 2 * (self.timeout_s + self.lock_timeout_s)
        for root in (self.staging_root, self.cache_root / ".trash"):
            for path in root.glob("*") if root.is_dir() else ():
                try:
                    if os.lstat(path).st_mtime < horizon:
                        shutil.rmtree(path, ignore_errors=True)
                except FileNotFoundError:
                    pass

    # paths
    @property
    def staging_root(self) -> Path:
        return self.cache_root / ".staging"

    @property
    def lock_root(self) -> Path:
        return self.cache_root / ".locks"

    def entry(self, name: str, key: str) -> Path:
        return self.cache_root / f"{name}-{key[:20]}"

    def key(self, arguments: dict[str, Any]) -> str:
        return build_key(arguments, gpu=self.device_arch, policy=POLICY)

    def _overrides(self) -> dict[str, str]:
        """The arch torch builds for: the judge's TORCH_CUDA_ARCH_LIST, else the device's."""
        if os.environ.get("TORCH_CUDA_ARCH_LIST") or not self.device_arch:
            return {}
        return {"TORCH_CUDA_ARCH_LIST": ";".join(sorted(set(self.device_arch.split(","))))}

    # the request
    def build(self, arguments: dict[str, Any]) -> BuildReply:
        """Build (or find) the extension a load_inline call describes; never raises for bad input."""
        started = time.perf_counter()
        name = str(arguments.get("name", "")) if isinstance(arguments, dict) else ""
        try:
            normalized = normalize(arguments)
            name = normalized["name"]
            problems = flag_problems(normalized, self.roots)
            if problems:
                raise Refused(
                    f"Error building extension '{name}': kevin's build broker refuses these flags:\n"
                    + "\n".join(f"  {p}" for p in problems)
                )
            key = self.key(normalized)
            entry = self.entry(name, key)
            with fastbuild.locked(self.lock_root / f"{key}.lock", timeout=self.lock_timeout_s):
                reply, discarded = self._hit(entry, name, key)
                if reply is None:
                    reply = self._miss(normalized, entry, key)
                    reply.discarded = discarded
        except Refused as exc:
            reply = BuildReply(
                ok=False, name=name, error=str(exc), error_type=exc.error_type, blame="candidate"
            )
        except (TimeoutError, symbols.Unavailable, OSError) as exc:
            reply = BuildReply(
                ok=False,
                name=name,
                error=f"kevin build broker: {exc}",
                error_type="RuntimeError",
                blame="infrastructure",
            )
        except Exception as exc:  # noqa: BLE001 - a broker bug must not take the judge down
            reply = BuildReply(
                ok=False,
                name=name,
                error=f"kevin build broker: {type(exc).__name__}: {exc}",
                error_type="RuntimeError",
                blame="infrastructure",
            )
        reply.seconds = time.perf_counter() - started
        return reply

    # hits
    def _hit(self, entry: Path, name: str, key: str) -> tuple[BuildReply | None, str]:
        try:
            status = os.lstat(entry)
        except FileNotFoundError:
            return None, ""
        try:
            if not stat.S_ISDIR(status.st_mode):
                raise _Corrupt("the entry is not a directory")
            manifest = self._read_manifest(entry, name, key)
        except _Corrupt as exc:
            self._discard(entry)
            return None, str(exc)
        reply = BuildReply(
            ok=True,
            name=name,
            key=key,
            kind=manifest["kind"],
            path=str(entry / manifest["library"]),
            sha256=manifest["sha256"],
            functions=manifest["functions"],
            cache_hit=True,
            fallback=manifest["fallback"],
        )
        if reply.kind == "fast":
            shim_path, reply.shim_sha256 = self._shim_library()
            reply.shim_path = str(shim_path)
        return reply, ""

    def _read_manifest(self, entry: Path, name: str, key: str) -> dict[str, Any]:
        path = entry / MANIFEST
        try:
            status = os.lstat(path)
        except FileNotFoundError:
            raise _Corrupt("no manifest") from None
        if not stat.S_ISREG(status.st_mode) or status.st_size > 1 << 20:
            raise _Corrupt("the manifest is not a small regular file")
        try:
            data = json.loads(path.read_text())
        except ValueError as exc:
            raise _Corrupt(f"the manifest is not JSON: {exc}") from None
        if not isinstance(data, dict) or set(data) != _MANIFEST_KEYS:
            raise _Corrupt("the manifest's keys are not kevin's")
        if data["format"] != MANIFEST_FORMAT or data["name"] != name or data["key"] != key:
            raise _Corrupt("the manifest describes another build")
        if data["kind"] not in ("fast", "pybind", "library"):
            raise _Corrupt(f"unknown kind {data['kind']!r}")
        library = data["library"]
        parts = PurePosixPath(library).parts if isinstance(library, str) else ()
        if (
            library != f"{name}.so"
            or len(parts) != 1
            or ".." in parts
            or PurePosixPath(library).is_absolute()
        ):
            raise _Corrupt(f"the manifest's library {str(library)[:200]!r} is not {name}.so inside the entry")
        if not isinstance(data["sha256"], str) or not _SHA256.fullmatch(data["sha256"]):
            raise _Corrupt("the manifest's sha256 is malformed")
        if not isinstance(data["fallback"], str) or not isinstance(data["build_seconds"], (int, float)):
            raise _Corrupt("the manifest's fields have the wrong types")
        if data["kind"] == "fast":
            try:
                fastbuild._checked_functions(data["functions"])
            except fastbuild.BadManifest as exc:
                raise _Corrupt(f"the manifest's functions: {exc}") from None
            if data["shim"] != str(self._shim_library()[0]):
                raise _Corrupt("the manifest names another shim")
        elif data["functions"] != {} or data["shim"] != "":
            raise _Corrupt("the manifest's fields do not fit its kind")
        file = entry / library
        try:
            status = os.lstat(file)
        except FileNotFoundError:
            raise _Corrupt("the library is missing") from None
        if not stat.S_ISREG(status.st_mode) or Path(os.path.realpath(file)).parent != Path(
            os.path.realpath(entry)
        ):
            raise _Corrupt("the library is not a regular file inside the entry")
        if sha256_file(file) != data["sha256"]:
            raise _Corrupt("the library's sha256 differs from the manifest (replaced after the build)")
        return data

    def _discard(self, entry: Path) -> None:
        """Move a bad entry out of the way (atomically), then delete it."""
        trash = self.cache_root / ".trash"
        trash.mkdir(parents=True, exist_ok=True)
        target = Path(tempfile.mkdtemp(prefix=entry.name + ".", dir=trash))
        os.rename(entry, target / "entry")
        shutil.rmtree(target, ignore_errors=True)

    # misses
    def _miss(self, arguments: dict[str, Any], entry: Path, key: str) -> BuildReply:
        name = arguments["name"]
        self.staging_root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f"{entry.name}.", dir=self.staging_root))
        started = time.perf_counter()
        try:
            kind, functions, fallback, library = self._fast(arguments, staging)
            shim = ""
            if kind == "fast":
                shim = str(self._shim_library()[0])
            else:
                shutil.rmtree(staging, ignore_errors=True)
                staging.mkdir()
                kwargs = {**arguments, "build_directory": str(staging), "verbose": False}
                ok, error_type, error = _torch_build(
                    "load_inline", kwargs, staging, self.timeout_s, self._overrides()
                )
                if not ok:
                    text = _truncate(error.replace(str(staging), str(entry)))
                    infrastructure = error_type == "SystemError"
                    return BuildReply(
                        ok=False,
                        name=name,
                        key=key,
                        fallback=fallback,
                        error=text
                        if error_type != "TimeoutError"
                        else f"Error building extension '{name}': {text}",
                        error_type="RuntimeError"
                        if error_type in ("TimeoutError", "SystemError")
                        else error_type,
                        blame="infrastructure" if infrastructure else "candidate",
                    )
                kind = "pybind" if arguments.get("is_python_module", True) else "library"
                library = staging / f"{name}.so"
            problems = symbols.check(library, self._policy(kind), _objects(staging))
            if problems:
                return BuildReply(
                    ok=False,
                    name=name,
                    key=key,
                    kind=kind,
                    fallback=fallback,
                    error=f"Error building extension '{name}': kevin refuses the built library, which would reach "
                    "what an extension may not use:\n" + "\n".join(f"  {p}" for p in problems),
                    error_type="RuntimeError",
                    blame="candidate",
                )
            digest = sha256_file(library)
            manifest = {
                "format": MANIFEST_FORMAT,
                "name": name,
                "key": key,
                "kind": kind,
                "library": library.name,
                "sha256": digest,
                "functions": functions,
                "shim": shim,
                "fallback": fallback,
                "build_seconds": time.perf_counter() - started,
            }
            (staging / MANIFEST).write_text(json.dumps(manifest, indent=1))
            os.chmod(staging, 0o755)  # mkdtemp's 0o700 would hide the entry from a runner of another uid
            if os.path.lexists(entry):  # an invalid entry appeared (we hold the key's lock)
                self._discard(entry)
            os.rename(staging, entry)
            reply = BuildReply(
                ok=True,
                name=name,
                key=key,
                kind=kind,
                path=str(entry / library.name),
                sha256=digest,
                functions=functions,
                fallback=fallback,
            )
            if kind == "fast":
                shim_path, reply.shim_sha256 = self._shim_library()
                reply.shim_path = str(shim_path)
            return reply
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _fast(self, arguments: dict[str, Any], staging: Path) -> tuple[str, dict[str, str], str, Path]:
        """(kind, functions, fallback reason, library): kind "fast" when the fast path built it, else ""."""
        if not self.fast:
            return "", {}, "fast builds are off", staging
        try:
            plan = fastbuild.plan(arguments)
            shim, _ = self._shim_library()
            library = fastbuild.compile_library(plan, staging, shim, self.timeout_s, self._overrides())
        except fastbuild.NotEligible as exc:
            return "", {}, str(exc), staging
        except fastbuild.FastBuildFailed as exc:
            lines = [line for line in str(exc).splitlines() if "error" in line]
            return "", {}, "light headers: " + (lines[0] if lines else "build failed")[:300], staging
        except (symbols.Unavailable, TimeoutError):
            raise
        except Exception as exc:  # noqa: BLE001 - any surprise in the fast path means: use the real build
            return "", {}, f"fast path error: {type(exc).__name__}: {exc}"[:300], staging
        policy = self._policy("fast")
        problems = symbols.check(library, policy, _objects(staging))
        if problems and all(p.startswith("defined by none") for p in problems):
            # Names the light headers leave unresolved: the real build decides.
            return "", {}, "fast build left names unresolved: " + problems[0][:250], staging
        return "fast", plan.functions, "", library

    # the shim and the symbol policies
    def _shim_library(self) -> tuple[Path, str]:
        """kevin's shim for this toolchain (built once, in a throwaway process) and its sha256."""
        with self._lock:
            path = fastbuild.shim_library(self.cache_root, builder=self._build_shim)
            status = os.stat(path)
            identity = (status.st_ino, status.st_size, status.st_mtime_ns)
            if self._shim is None or self._shim[0] != path or self._shim[2] != identity:
                self._shim = (path, sha256_file(path), identity)
            return self._shim[0], self._shim[1]

    def _build_shim(self, name: str, directory: Path) -> None:
        kwargs = fastbuild.shim_build_arguments(name, directory)
        ok, error_type, error = _torch_build("load", kwargs, directory, self.timeout_s, self._overrides())
        if not ok:
            raise symbols.Unavailable(f"kevin's shim did not build: {error_type}: {error[-2000:]}")

    def _policy(self, kind: str) -> symbols.Policy:
        if kind == "fast":
            return symbols.Policy(kind="fast", shim=self._shim_library()[0], rpath_roots=self._rpath_roots())
        python, bridge = self._reference_sets()
        return symbols.Policy(kind="pybind", python=python, bridge=bridge, rpath_roots=self._rpath_roots())

    def _rpath_roots(self) -> tuple[Path, ...]:
        return tuple(dict.fromkeys([*symbols.toolchain_library_roots(), *self.roots]))

    def _reference_sets(self) -> tuple[frozenset[str], frozenset[str]]:
        """The Python C API and libtorch_python names a plain pybind11 binding imports, from a
        reference binding built once per toolchain (beside the cache, under a lock)."""
        with self._lock:
            if self._reference is not None:
                return self._reference
        import torch

        digest = hashlib.sha256(
            json.dumps(
                [
                    symbols.REFERENCE_SOURCE,
                    symbols.POLICY_VERSION,
                    torch.__version__,
                    os.path.dirname(torch.__file__),
                    sys.version,
                    os.environ.get("CXX", "c++"),
                ]
            ).encode()
        ).hexdigest()[:16]
        root = self.cache_root.parent / "symbols"
        directory = root / digest
        record = directory / "reference.json"
        name = f"kevin_reference_{digest}"
        with fastbuild.locked(root / ".locks" / f"{digest}.lock", timeout=self.lock_timeout_s):
            sets = None
            try:
                data = json.loads(record.read_text())
                library = directory / f"{name}.so"
                if sha256_file(library) == data["sha256"]:
                    sets = (frozenset(data["python"]), frozenset(data["bridge"]))
            except (OSError, ValueError, KeyError, TypeError):
                sets = None
            if sets is None:
                shutil.rmtree(directory, ignore_errors=True)
                directory.mkdir(parents=True)
                kwargs = {
                    "name": name,
                    "cpp_sources": [symbols.REFERENCE_SOURCE],
                    "functions": None,
                    "extra_cflags": ["-O2"],
                    "build_directory": str(directory),
                    "verbose": False,
                }
                ok, error_type, error = _torch_build("load_inline", kwargs, directory, self.timeout_s, {})
                if not ok:
                    raise symbols.Unavailable(
                        f"kevin's reference binding did not build: {error_type}: {error[-2000:]}"
                    )
                library = directory / f"{name}.so"
                sets = symbols.reference_sets(library)
                record.write_text(
                    json.dumps(
                        {"sha256": sha256_file(library), "python": sorted(sets[0]), "bridge": sorted(sets[1])}
                    )
                )
        with self._lock:
            self._reference = sets
        return sets
