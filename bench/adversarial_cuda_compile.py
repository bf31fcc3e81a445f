"""Compile-check every `cuda` corpus entry on a machine without a GPU (or with one): one line each.

For each entry of `load_corpus("cuda")` (bench/adversarial/*_cuda.py and the bundled honest cuda
candidates with --bundled), the rendered candidate is parsed, never imported: every `load_inline(...)`
call's keyword arguments are read from the source (string literals and module-level names bound to
them), the two files torch would write are assembled as load_inline does (`#include
<torch/extension.h>` plus generated bindings for `functions=`; `torch/types.h`, `cuda.h`,
`cuda_runtime.h` before the CUDA source), and each is compiled to an object file:

    main.cpp  with the C++ compiler torch uses (`c++`, or $CXX), torch's and Python's include paths,
              -std=c++20 -fPIC -DTORCH_EXTENSION_NAME=<name> -DTORCH_API_INCLUDE_EXTENSION_H,
              the C++11 ABI flag torch was built with, and the call's extra_cflags
    cuda.cu   with nvcc: torch's COMMON_NVCC_FLAGS, -std=c++20, sm_90a (the H200's
              TORCH_CUDA_ARCH_LIST), the call's extra_cuda_cflags

Nothing is linked or loaded. Builds shared by several candidates (the same sources and flags) are
compiled once; a passing build is remembered under --work (by the hash of its sources and flags),
so a second run only compiles what changed. A CPU build of torch ships the c10/cuda headers but not
the generated c10/cuda/impl/cuda_cmake_macros.h; a one-line stand-in is written under --work.

Usage:  nice -n 10 python bench/adversarial_cuda_compile.py [--only GLOB] [--bundled] [--force]
Exit status 1 when any entry fails to compile.
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from adversarial import load_corpus, render  # noqa: E402

NVCC_FLAGS = [
    "-D__CUDA_NO_HALF_OPERATORS__",
    "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-D__CUDA_NO_HALF2_OPERATORS__",
    "--expt-relaxed-constexpr",
    "-std=c++20",
    "-gencode=arch=compute_90a,code=sm_90a",
    "--compiler-options=-fPIC",
    "-diag-suppress=3306",  # torch's own headers: bit-field initializers (C++20), noise here
]
CMAKE_MACROS = "#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n"


def load_inline_calls(source: str) -> list[dict]:
    """The keyword arguments of every load_inline call, with module-level string names resolved."""
    tree = ast.parse(source)
    names: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                names[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass

    def value(node: ast.AST) -> object:
        if isinstance(node, ast.Name):
            return names[node.id]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return value(node.left) + value(node.right)
        return ast.literal_eval(node)

    calls = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", getattr(node.func, "attr", "")) == "load_inline"
        ):
            calls.append({kw.arg: value(kw.value) for kw in node.keywords if kw.arg})
    return calls


def as_list(value: object) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def translation_units(call: dict) -> tuple[str, str]:
    """main.cpp and cuda.cu as torch's load_inline writes them (cuda.cu empty when there is none)."""
    cpp = ["#include <torch/extension.h>", *as_list(call.get("cpp_sources"))]
    functions = call.get("functions")
    if functions is not None:
        functions = {f: f for f in as_list(functions)} if not isinstance(functions, dict) else functions
        cpp.append("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {")
        cpp += [f'm.def("{f}", torch::wrap_pybind_function({f}), "{doc}");' for f, doc in functions.items()]
        cpp.append("}")
    cuda = as_list(call.get("cuda_sources"))
    if cuda:
        cuda = ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>", *cuda]
    return "\n".join(cpp), "\n".join(cuda)


def include_flags(work: Path) -> list[str]:
    from torch.utils.cpp_extension import include_paths

    shim = work / "shim"
    macros = shim / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h"
    macros.parent.mkdir(parents=True, exist_ok=True)
    macros.write_text(CMAKE_MACROS)
    paths = [str(shim), *include_paths(), sysconfig.get_paths()["include"]]
    return [f"-I{p}" for p in paths]


def compile_call(call: dict, work: Path, includes: list[str], force: bool) -> str:
    """'ok', 'ok (cached)' or the first lines of the compiler's complaint."""
    import torch

    name = call.get("name", "ext")
    cpp, cuda = translation_units(call)
    defines = [f"-DTORCH_EXTENSION_NAME={name}", "-DTORCH_API_INCLUDE_EXTENSION_H"]
    defines.append(f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}")
    cflags, cuda_cflags = as_list(call.get("extra_cflags")), as_list(call.get("extra_cuda_cflags"))
    key = hashlib.sha256(repr((cpp, cuda, cflags, cuda_cflags, defines)).encode()).hexdigest()[:16]
    folder = work / key
    if (folder / "ok").exists() and not force:
        return "ok (cached)"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    steps = []
    (folder / "main.cpp").write_text(cpp)
    compiler = os.environ.get("CXX", "c++")
    steps.append(
        [compiler, "-c", "main.cpp", "-o", "main.o", "-std=c++20", "-fPIC", *defines, *includes, *cflags]
    )
    if cuda:
        (folder / "cuda.cu").write_text(cuda)
        steps.append(
            ["nvcc", "-c", "cuda.cu", "-o", "cuda.o", *NVCC_FLAGS, *defines, *includes, *cuda_cflags]
        )
    for step in steps:
        done = subprocess.run(step, cwd=folder, capture_output=True, text=True)
        if done.returncode != 0:
            errors = [
                line for line in done.stderr.splitlines() if "error" in line
            ] or done.stderr.splitlines()
            return f"FAILED ({step[0]}): " + " | ".join(errors[:3])[:400]
    (folder / "ok").write_text("")
    return "ok"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="*", help="glob over entry names")
    parser.add_argument("--bundled", action="store_true", help="also the bundled honest cuda candidates")
    parser.add_argument("--force", action="store_true", help="recompile builds that passed before")
    parser.add_argument("--work", default="/tmp/kevin-adversarial-cuda-compile")
    args = parser.parse_args(argv)
    work = Path(args.work)
    includes = include_flags(work)
    failed = 0
    for entry in load_corpus("cuda"):
        if not fnmatch.fnmatch(entry.name, args.only) or (
            entry.name.startswith("bundled_") and not args.bundled
        ):
            continue
        try:
            calls = load_inline_calls(render(entry.path))
        except (KeyError, ValueError, SyntaxError) as exc:
            calls, verdicts = [], [f"FAILED (reading the load_inline call): {type(exc).__name__}: {exc}"]
        else:
            verdicts = [f"{c.get('name')}: {compile_call(c, work, includes, args.force)}" for c in calls]
            if not calls:
                verdicts = ["no load_inline call"]
        bad = any("FAILED" in v for v in verdicts)
        failed += bad
        print(f"{entry.name:40s} {'FAILED' if bad else 'ok':6s} " + "; ".join(verdicts), flush=True)
    print(f"{failed} entr{'y' if failed == 1 else 'ies'} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
