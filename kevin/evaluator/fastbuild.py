"""Fast builds of `load_inline` candidates: light headers, a shared binding, both halves in parallel.

A plain `load_inline` build spends nearly all its time parsing torch's headers: nvcc's two front
ends and the host compiler each parse `torch/types.h` for the `.cu` file, and g++ parses
`torch/extension.h` plus pybind11 for the generated binding. A one-kernel candidate uses a sliver
of that API. So kevin first tries a fast build of the very same sources:

* the include path starts with `kevin/evaluator/native/lite`, whose `torch/extension.h`, `torch/types.h`,
  `ATen/cuda/CUDAContext.h`, `c10/cuda/*.h`, ... declare that sliver (at::Tensor with the real
  layout, factories, TORCH_CHECK, AT_DISPATCH_* including the _AND_HALF / _AND / _AND2 / _AND3
  forms, at::Half and at::BFloat16 with torch's conversions and arithmetic, the CUDA half and
  bfloat16 headers, accessors and packed accessors, acc_type / opmath_type, streams, guards,
  device properties) and forward each operation to a
  shim built once per toolchain with the real headers (`kevin/evaluator/native/shim.cpp`); torch's own
  include directories are removed, so the two never mix;
* instead of a pybind11 module per candidate, `main.cpp` ends with one small C thunk per bound
  function (from the declarations in `cpp_sources`), and the shim's `call` converts arguments and
  results as pybind11 would;
* `main.cpp` and `cuda.cu` have exactly the text and line numbers `load_inline` writes (only the
  binding block differs), and the compile and link flags are the ones torch generates for this
  call (its own ninja-file writer), less torch's include and library directories; ninja builds
  both objects in parallel.

`compile_library` builds and links only (kevin.evaluator.broker uses it in the judge, which must
never load candidate code); `build` also writes the legacy manifest and loads the result (the
in-process path of kevin.evaluator.build.install). `load` reads a manifest that other processes may
have written: its name must be an identifier naming `<directory>/<name>.so`, a regular file, so it
cannot point into another entry (BadManifest otherwise).

Anything the light headers do not cover fails to compile, and the caller (kevin.evaluator.build or
the broker) then runs the real `load_inline`, so a candidate that builds under plain `load_inline`
still builds, and compile errors shown to the model come from the real build, except a syntax
error on the candidate's own lines that no header can explain (kevin.evaluator.buildfail: the broker
then skips the real build, which would fail on the same lines). What a fast-built extension
computes is the candidate's own code plus torch's, through the shim.

What this does not cover (it falls back instead): functions not declared with simple types
(Tensor, floating, integral, bool; returning those, void or std::vector<Tensor>), more than 16
arguments, overloads, a PYBIND11_MODULE block holding more than plain `m.def("f", &f)` lines
(`module_block`), `no_implicit_headers`, non-Python-module builds, torch operators called from C++ (torch::relu,
tensor arithmetic, matmul: anything the shim does not forward), complex types, item<Half>, cuBLAS
and the other CUDA libraries' handles. bench/build_coverage.py measures what our candidate corpora
lose to these (bench/results/build_coverage_cpu.md). Known differences of a fast-built module: its
functions are `functools.partial` objects rather than pybind11 builtins, and a call with wrong
argument types raises a TypeError worded differently from pybind11's.

Reading what a call binds (signatures, thunks, a PYBIND11_MODULE block) is kevin.evaluator.bindings;
this module is the pipeline (the plan, the shim, torch's ninja flags rewritten, the build, the load)
whose steps share one private layout of a build directory (~530 lines).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import functools
import hashlib
import importlib.util
import inspect
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kevin.evaluator import buildjail, cores
from kevin.evaluator.bindings import (  # noqa: F401 - re-exported: the fast path's public names
    MAX_ARGS,
    NotEligible,
    module_block,
    signatures,
    strip_comments,
    thunks,
)

NATIVE = Path(__file__).resolve().parent / "native"
LITE_INCLUDE = NATIVE / "lite"
SHIM_SOURCE = NATIVE / "shim.cpp"
MANIFEST = "kevin-fast.json"


class FastBuildFailed(Exception):
    """The fast build did not produce a module; build it with the real load_inline (unless
    kevin.evaluator.buildfail reads the whole `output` as the candidate's own error)."""

    def __init__(self, output: str) -> None:
        super().__init__(output[-4000:])
        self.output = output


# -- the plan ------------------------------------------------------------------------------------


@dataclass
class Plan:
    name: str
    cpp_sources: list[str]
    cuda_sources: list[str]
    functions: dict[str, str]
    extra_cflags: list[str]
    extra_cuda_cflags: list[str]
    extra_ldflags: list[str]
    extra_include_paths: list[str]
    with_cuda: bool


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def plan(arguments: dict[str, Any]) -> Plan:
    """What a load_inline call (its bound arguments) would build, or NotEligible."""
    if arguments.get("sycl_sources") or arguments.get("extra_sycl_cflags") or arguments.get("with_sycl"):
        raise NotEligible("sycl")
    if arguments.get("is_python_module", True) is not True or arguments.get("is_standalone"):
        raise NotEligible("not a Python module")
    if arguments.get("no_implicit_headers") or arguments.get("use_pch"):
        raise NotEligible("no_implicit_headers / use_pch")
    functions = arguments.get("functions")
    if isinstance(functions, str):
        functions = [functions]
    elif isinstance(functions, dict):
        functions = list(functions)
    cpp_sources = _as_list(arguments.get("cpp_sources"))
    if not functions:
        cpp_sources, functions = module_block(cpp_sources)
    if not functions or not all(isinstance(f, str) and f.isidentifier() for f in functions):
        raise NotEligible("no functions to bind")
    cuda_sources = _as_list(arguments.get("cuda_sources"))
    with_cuda = arguments.get("with_cuda")
    if with_cuda is None:
        with_cuda = bool(cuda_sources)
    return Plan(
        name=str(arguments["name"]),
        cpp_sources=cpp_sources,
        cuda_sources=cuda_sources,
        functions=signatures("\n".join(cpp_sources), functions),
        extra_cflags=_as_list(arguments.get("extra_cflags")),
        extra_cuda_cflags=_as_list(arguments.get("extra_cuda_cflags")),
        extra_ldflags=_as_list(arguments.get("extra_ldflags")),
        extra_include_paths=_as_list(arguments.get("extra_include_paths")),
        with_cuda=bool(with_cuda),
    )


# -- the shim --------------------------------------------------------------------------------------


@dataclass
class Shim:
    path: Path
    module: Any


_SHIMS: dict[str, Shim] = {}


def _torch_cuda() -> bool:
    import torch

    return torch.version.cuda is not None


def shim_key() -> str:
    import torch

    digest = hashlib.sha256()
    for part in (SHIM_SOURCE.read_bytes(), (LITE_INCLUDE / "kevin_lite" / "abi.h").read_bytes()):
        digest.update(part)
    digest.update(
        json.dumps(
            [torch.__version__, os.path.dirname(torch.__file__), sys.version, os.environ.get("CXX", "c++")]
        ).encode()
    )
    return digest.hexdigest()[:16]


def _import_file(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def shim_build_arguments(name: str, directory: Path) -> dict[str, Any]:
    """The `torch.utils.cpp_extension.load` call that builds the shim."""
    cuda = _torch_cuda()
    return {
        "name": name,
        "sources": [str(SHIM_SOURCE)],
        "extra_cflags": ["-O2"] + (["-DKEVIN_SHIM_CUDA"] if cuda else []),
        "build_directory": str(directory),
        "with_cuda": cuda,
        "verbose": False,
    }


def _build_shim(name: str, directory: Path) -> None:
    """Build the shim in this process (torch's load, which also imports it)."""
    from torch.utils import cpp_extension

    cpp_extension.load(**shim_build_arguments(name, directory))


TOOLCHAIN_VARIABLE = "KEVIN_TOOLCHAIN_DIR"


def toolchain_root(cache_root: Path) -> Path:
    """Where kevin keeps what it builds for itself once per toolchain (the fast builds' shim, the
    symbol check's reference binding): beside the build cache, never in it, since a confined worker
    may write the build cache (it builds there) but not what every later candidate links to. The
    environment variable KEVIN_TOOLCHAIN_DIR moves them to one folder that any number of caches share
    (each is a full torch extension build, most of a minute on 2 cores); only the judge writes it."""
    shared = os.environ.get(TOOLCHAIN_VARIABLE)
    return Path(shared) if shared else cache_root.parent


def shim_root(cache_root: Path) -> Path:
    """The shims' folder of the build cache `cache_root` (see toolchain_root)."""
    return toolchain_root(cache_root) / "shims"


def shim_library(cache_root: Path, builder: Callable[[str, Path], None] | None = None) -> Path:
    """The shim's library for this toolchain, built once under a lock, not loaded here.

    `builder(name, directory)` builds it into the (fresh) directory: kevin.evaluator.broker passes one
    that builds in a throwaway process; the default builds in this process, which imports it."""
    key = shim_key()
    name = f"kevin_shim_{key}"
    root = shim_root(cache_root)
    directory = root / key
    if not (directory / ".kevin-complete").exists():
        with locked(root / ".locks" / f"{key}.lock"):
            if not (directory / ".kevin-complete").exists():
                shutil.rmtree(directory, ignore_errors=True)
                directory.mkdir(parents=True)
                (builder or _build_shim)(name, directory)
                (directory / ".kevin-complete").touch()
    return directory / f"{name}.so"


def load_shim(library: Path) -> Shim:
    """Import a built shim (its module name is its file's stem)."""
    key = str(library)
    if key not in _SHIMS:
        name = library.stem
        module = sys.modules.get(name) or _import_file(name, library)
        _SHIMS[key] = Shim(path=library, module=module)
    return _SHIMS[key]


def ensure_shim(cache_root: Path) -> Shim:
    """The shim for this toolchain: built once (under a lock) with the real headers, then imported.
    The legacy worker (kevin.evaluator.build.install) calls this before confining itself; a confined
    process can only import it."""
    key = shim_key()
    if key in _SHIMS:
        return _SHIMS[key]
    shim = load_shim(shim_library(cache_root))
    _SHIMS[key] = shim
    return shim


@contextlib.contextmanager
def locked(path: Path, timeout: float | None = None):
    """Hold an exclusive flock on `path` (made if missing) for the block: one builder per key.

    With `timeout`, give up after that many seconds (TimeoutError) instead of waiting for ever: a
    process that can open the lock file can hold it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        if timeout is None:
            fcntl.flock(handle, fcntl.LOCK_EX)
        else:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"lock {path.name} held for more than {timeout:.0f} s") from None
                    time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# -- building ------------------------------------------------------------------------------------


def _ninja_flags(plan: Plan, directory: Path, sources: list[str]) -> str:
    """torch's own build.ninja for this call, rewritten for the light headers and the shim."""
    from torch.utils import cpp_extension as ce

    def call(function: Any, **kwargs: Any) -> Any:
        accepted = inspect.signature(function).parameters
        return function(**{k: v for k, v in kwargs.items() if k in accepted})

    try:
        ldflags = call(
            ce._prepare_ldflags,
            extra_ldflags=list(plan.extra_ldflags),
            with_cuda=plan.with_cuda,
            with_sycl=False,
            verbose=False,
            is_standalone=False,
        )
        path = directory / "build.ninja"
        call(
            ce._write_ninja_file_to_build_library,
            path=str(path),
            name=plan.name,
            sources=sources,
            extra_cflags=list(plan.extra_cflags),
            extra_cuda_cflags=list(plan.extra_cuda_cflags),
            extra_sycl_cflags=[],
            extra_ldflags=ldflags,
            extra_include_paths=list(plan.extra_include_paths),
            with_cuda=plan.with_cuda,
            with_sycl=False,
            is_standalone=False,
        )
    except Exception as exc:  # torch's private API moved: no fast path on this version
        raise NotEligible(f"cannot generate torch's build file: {type(exc).__name__}: {exc}") from exc
    return path.read_text()


def _rewrite(ninja: str, shim: Shim) -> str:
    import sysconfig

    from torch.utils import cpp_extension as ce

    torch_dirs = set(ce.include_paths("cuda" if _torch_cuda() else "cpu")) | set(ce.include_paths("cpu"))
    import torch

    root = os.path.dirname(os.path.abspath(torch.__file__))
    torch_dirs = {d for d in torch_dirs if os.path.abspath(d).startswith(root)}
    python_include = sysconfig.get_path("include", scheme="posix_prefix")
    dropped = {shlex.quote(d) for d in torch_dirs | {python_include}}
    torch_libs = {
        f"-L{ce.TORCH_LIB_PATH}",
        "-lc10",
        "-lc10_cuda",
        "-ltorch_cpu",
        "-ltorch_cuda",
        "-ltorch",
        "-ltorch_python",
    }
    lite = f"-I{shlex.quote(str(LITE_INCLUDE))}"
    out = []
    for line in ninja.splitlines():
        key, sep, value = line.partition(" = ")
        tokens = [t for t in value.split(" ") if t]
        if sep and key in ("cflags", "cuda_cflags"):
            kept: list[str] = []
            skip = False
            for i, token in enumerate(tokens):
                if skip:
                    skip = False
                elif token in ("-isystem", "-I") and i + 1 < len(tokens) and tokens[i + 1] in dropped:
                    skip = True
                elif not (token.startswith("-I") and token[2:] in dropped):
                    kept.append(token)
            line = f"{key} = {' '.join([lite, *kept])}"
        elif sep and key == "ldflags":
            kept = [t for t in tokens if t not in torch_libs]
            kept += [shlex.quote(str(shim.path)), f"-Wl,-rpath,{shlex.quote(str(shim.path.parent))}"]
            line = f"{key} = {' '.join(kept)}"
        out.append(line)
    return "\n".join(out) + "\n"


def _write(path: Path, text: str) -> None:
    path.write_text(text)


_ENVIRONMENT_LOCK = threading.Lock()


@contextlib.contextmanager
def environment(overrides: dict[str, str] | None) -> Iterator[None]:
    """Set environment variables for the block (torch's ninja writer reads TORCH_CUDA_ARCH_LIST);
    one block at a time in this process."""
    if not overrides:
        yield
        return
    with _ENVIRONMENT_LOCK:
        saved = {name: os.environ.get(name) for name in overrides}
        os.environ.update(overrides)
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


BUILD_NICENESS = 10
"""Compilers run this much nicer than the judges and runners: on a host that builds while it times
(a batch's compiles beside another evaluation's timed cycles), a build then takes the cores the
clocked processes leave, instead of delaying their signalling by whole time slices. The process
gets it always; its session (a build's own: between sessions the kernel weighs autogroups, not
processes, kevin.evaluator.cores.nicer_session) only where timings share their cores with builds.
Where the host keeps cores for timing (kevin.evaluator.cores: a GPU machine), no build can run on
a clocked core, and a build's session at a tenth of the weight only starved it against the spares
booting for later jobs: session 26's H200 run took 14.5 s a build (median) against session 23's
4.7 s, every build of a step beside the 16 spares started to replace that step's."""


def run_killable(
    command: list[str],
    cwd: Path,
    timeout: float | None,
    env: dict[str, str] | None = None,
    readable: Sequence[str | Path] | None = None,
) -> tuple[int, str]:
    """Run a build command in a session of its own, at BUILD_NICENESS (its session too where no cores
    are kept for timing); on timeout kill its group. (returncode, output)

    With `readable` (what the build reads besides the system's and Python's directories and `cwd`:
    the toolchain's, the shim's) the command runs jailed (kevin.evaluator.buildjail): it reads
    only those and writes only in `cwd`, its TMPDIR. Where its session is to be niced, the command
    waits at a gate (a shell, or the jail, reading a pipe) until the session's weight is set: niced
    from outside after the start, a short command (or a compiler's first moments) ran at the full
    weight before it (the stop of session 28 failed CI on it)."""
    niced = shutil.which("nice")
    command = [niced, "-n", str(BUILD_NICENESS), *command] if niced else command
    gated = not cores.current().kept
    jailed = readable is not None and buildjail.enabled()
    if jailed:
        command = buildjail.command(command, cwd, [str(path) for path in readable or ()], gate=gated)
        env = {**(os.environ if env is None else env), "TMPDIR": str(Path(cwd).resolve())}
    elif gated:  # the gate is its stdin; the command itself gets /dev/null, as ungated
        command = ["sh", "-c", 'read -r _; exec "$@" </dev/null', "sh", *command]
    gate_read, gate_write = os.pipe() if gated else (subprocess.DEVNULL, -1)
    try:
        process = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdin=gate_read,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except BaseException:
        if gated:
            os.close(gate_write)
        raise
    finally:
        if gated:
            os.close(gate_read)
    if gated:
        cores.nicer_session(process.pid, BUILD_NICENESS)
        with contextlib.suppress(OSError):
            os.write(gate_write, b"\n")
        os.close(gate_write)
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        text = output.decode(errors="replace")
        return -signal.SIGKILL, text + f"\nkevin: build stopped after {timeout:.0f} s"
    return process.returncode, output.decode(errors="replace")


CUDA_PREAMBLE = ("#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>")
"""The lines load_inline writes at the top of cuda.cu, before the candidate's cuda_sources."""


def _line_count(sources: list[str]) -> int:
    return sum(source.count("\n") + 1 for source in sources)


def own_lines(plan: Plan) -> dict[str, range]:
    """The lines of each source file (as `prepare` and load_inline write them) that hold the
    candidate's own text: after the include lines, before main.cpp's binding block."""
    lines = {"main.cpp": range(2, 2 + _line_count(plan.cpp_sources))}
    if plan.cuda_sources:
        start = len(CUDA_PREAMBLE) + 1
        lines["cuda.cu"] = range(start, start + _line_count(plan.cuda_sources))
    return lines


def prepare(plan: Plan, directory: Path, shim_path: Path, overrides: dict[str, str] | None = None) -> Path:
    """Write `plan`'s sources and rewritten build.ninja into (a fresh) `directory`; build nothing.
    The build file's path. (bench/build_coverage.py runs its compile steps only.)"""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    # The same text load_inline writes, except the binding block.
    main = "\n".join(["#include <torch/extension.h>", *plan.cpp_sources, thunks(plan.functions)])
    sources = [str(directory / "main.cpp")]
    _write(directory / "main.cpp", main)
    if plan.cuda_sources:
        cuda = "\n".join([*CUDA_PREAMBLE, *plan.cuda_sources])
        _write(directory / "cuda.cu", cuda)
        sources.append(str(directory / "cuda.cu"))
    with environment(overrides):
        flags = _ninja_flags(plan, directory, sources)
    _write(directory / "build.ninja", _rewrite(flags, Shim(path=shim_path, module=None)))
    return directory / "build.ninja"


def compile_library(
    plan: Plan,
    directory: Path,
    shim_path: Path,
    timeout: float | None = None,
    overrides: dict[str, str] | None = None,
    readable: Sequence[str | Path] = (),
) -> Path:
    """Build `plan` in (a fresh) `directory` with the light headers, linked to the shim at
    `shim_path`; nothing is loaded. The library's path, or FastBuildFailed / NotEligible. The
    compilers are jailed (`run_killable`): they read the shim's directory and `readable` besides
    the system's."""
    ninja = shutil.which("ninja")
    if ninja is None:
        raise NotEligible("ninja not found")
    prepare(plan, directory, shim_path, overrides)
    readable = [str(Path(shim_path).parent), *map(str, readable)]
    returncode, output = run_killable([ninja, "-C", str(directory)], directory, timeout, readable=readable)
    if returncode != 0:
        raise FastBuildFailed(output)
    return directory / f"{plan.name}.so"


def probe_compile(
    plan: Plan,
    file: str,
    text: str,
    directory: Path,
    timeout: float | None = None,
    overrides: dict[str, str] | None = None,
    readable: Sequence[str | Path] = (),
) -> tuple[int, str]:
    """Compile `text` as `file` (main.cpp or cuda.cu) into an object file with torch's own flags and
    headers, exactly as the full build compiles that file of `plan` (its extra flags and include
    paths), in (a fresh) `directory`; nothing is linked. (returncode, output). For
    kevin.evaluator.buildfail's probes: does a name exist once torch's headers are in? Jailed as
    `compile_library`'s compilers are, reading `readable` besides the system's."""
    ninja = shutil.which("ninja")
    if ninja is None:
        raise NotEligible("ninja not found")
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    source = directory / file
    _write(source, text)
    with environment(overrides):
        flags = _ninja_flags(plan, directory, [str(source)])
    _write(directory / "build.ninja", flags)
    target = re.search(rf"^build (\S+): \w*compile \S*{re.escape(file)}\b", flags, re.M)
    if target is None:
        raise NotEligible(f"torch's build file names no object for {file}")
    return run_killable([ninja, "-C", str(directory), target.group(1)], directory, timeout, readable=readable)


def build(plan: Plan, directory: Path, cache_root: Path) -> Any:
    """Build `plan` in `directory` with the light headers and load it; FastBuildFailed if it does not build.
    (The legacy in-process path of kevin.evaluator.build.install; the broker uses `compile_library`.)"""
    shim = ensure_shim(cache_root)
    started = time.perf_counter()
    compile_library(plan, directory, shim.path)
    manifest = {"name": plan.name, "functions": plan.functions, "seconds": time.perf_counter() - started}
    (directory / MANIFEST).write_text(json.dumps(manifest))
    return load(directory, cache_root)


_SIGNATURE = re.compile(r"[TLvdlb]:[Tdflib]{0,16}")


class BadManifest(Exception):
    """A fast build's manifest that does not describe a library inside its own directory."""


def _checked_functions(functions: Any) -> dict[str, str]:
    if not isinstance(functions, dict) or not functions:
        raise BadManifest("functions must be a non-empty mapping")
    for function, signature in functions.items():
        if not (isinstance(function, str) and function.isidentifier()):
            raise BadManifest(f"bad function name {function!r}")
        if not (isinstance(signature, str) and _SIGNATURE.fullmatch(signature)):
            raise BadManifest(f"bad signature {signature!r} for {function}")
    return functions


def load(directory: Path, cache_root: Path) -> Any:
    """The module of a completed fast build: its bound functions call the thunks through the shim.

    The manifest is data from a directory others may have written: its name must be an identifier
    (the library is `<directory>/<name>.so`, a regular file, not a link), so it cannot point into
    another entry."""
    manifest = json.loads((directory / MANIFEST).read_text())
    if not isinstance(manifest, dict):
        raise BadManifest("not a JSON object")
    name = manifest.get("name")
    if not (isinstance(name, str) and name.isidentifier()):
        raise BadManifest(f"name {name!r} is not an identifier")
    library_path = directory / f"{name}.so"
    if (
        library_path.is_symlink()
        or not library_path.is_file()
        or library_path.resolve().parent != directory.resolve()
    ):
        raise BadManifest(f"{library_path} is not a library file inside {directory}")
    return load_library(
        library_path, name, _checked_functions(manifest.get("functions")), ensure_shim(cache_root)
    )


def load_library(library_path: Path, name: str, functions: dict[str, str], shim: Shim) -> Any:
    """Load a fast-built library and return its module (functions calling the thunks through `shim`)."""
    library = ctypes.CDLL(str(library_path), mode=os.RTLD_NOW | os.RTLD_LOCAL)
    module = types.ModuleType(name, f"kevin fast build of {name}")
    module.__file__ = str(library_path)
    module._kevin_library = library  # keeps the library loaded for the module's lifetime
    for function, signature in functions.items():
        address = ctypes.cast(getattr(library, f"kevin_thunk_{function}"), ctypes.c_void_p).value
        setattr(module, function, functools.partial(shim.module.call, function, address, signature))
    return module
