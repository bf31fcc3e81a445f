"""The build broker's flag allow-list: which compiler and linker flags a candidate's build may carry.

`flag_problems(arguments, roots)` reads extra_cflags, extra_cuda_cflags, extra_ldflags and
extra_include_paths of a normalized load_inline call and returns every reason to refuse them: no
compiler plugins, `-B`, spec files, wrappers, `-ccbin`, response files, pre-included files, linker
scripts or pass-through options that hide them (`-Xcompiler`, `-Wl,`, `-Xlinker`, `-Xptxas` are
opened and their contents checked), no characters the shell or ninja would interpret, and include,
library and run-time search paths only inside the toolchain (`toolchain_roots`: CUDA, torch,
Python, /usr) or directories the judge names. Used by kevin.evaluator.broker.

Why one module of ~530 lines: the allow-lists of three tools (the C++ compiler, nvcc, the linker)
are one policy, and most of the length is the tables themselves.
"""

from __future__ import annotations

import os
import re
import sysconfig
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from kevin.evaluator import symbols

_SAFE_FLAG = re.compile(r"[A-Za-z0-9_=+,./:%^ \t-]*")
"""Characters a flag may hold: torch writes flags unquoted into build.ninja, and ninja runs them
through /bin/sh, so quotes, `$`, `;`, `|`, `&`, `*`, `@`, newlines ... would be interpreted."""
_SAFE_PATH = re.compile(r"/[A-Za-z0-9_=+,./:%^-]*")


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


