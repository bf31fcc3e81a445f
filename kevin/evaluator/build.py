"""Building candidate extensions: plain `load_inline` semantics, a content-addressed cache.

Candidates call `torch.utils.cpp_extension.load_inline(...)` at import, exactly as they would under
the original KernelBench harness. Inside the sandboxed worker, `install()` replaces that function
(and `load_inline` in modules that already imported it) with a wrapper that

  * binds the call's arguments against the real signature, so every torch version's keywords work;
  * keys the build by everything that changes its output: the sources, functions, flags, include
    paths, the torch version, the CUDA arch list and the compilers; the same key always reuses one
    build directory under the cache root, so an identical candidate is a cache hit (ninja finds
    nothing to do and the module is loaded directly);
  * serializes concurrent builds of the same key with a file lock;
  * records each build (name, key, seconds, cache hit, error) so the evaluator can tell a compile
    error from a Python error at import, and report build times.

Compile errors surface exactly as torch raises them (the compiler's log inside the exception), so
the model reads the same errors it would read under plain `load_inline`.

What this does not protect: the cache directory is writable by the worker, so a hostile candidate
could plant files in it for later builds. Run evaluation with a cache per trust domain (the default
cache lives under the user's cache directory; tests use a temporary one).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kevin.evaluator import fastbuild

# Arguments that do not change what is built.
_IGNORED_ARGS = {"verbose", "build_directory", "keep_intermediates"}


@dataclass
class BuildRecord:
    name: str
    key: str
    seconds: float = 0.0
    cache_hit: bool = False
    error: str = ""
    fast: bool = False
    """Built (or cached) by kevin.evaluator.fastbuild rather than the real load_inline."""
    fallback: str = ""
    """Why the fast path was not used, when it was not."""
    module: Any = field(default=None, repr=False, compare=False)
    """The loaded extension (not serialized): kevin.evaluator.probes instruments it while tracing."""


@dataclass
class BuildLog:
    records: list[BuildRecord] = field(default_factory=list)
    active: bool = False
    """True while a build is running: an exception raised then is a compile error."""

    def to_list(self) -> list[dict[str, Any]]:
        return [
            {
                "name": r.name,
                "key": r.key,
                "seconds": r.seconds,
                "cache_hit": r.cache_hit,
                "fast": r.fast,
                "fallback": r.fallback,
                "error": r.error,
            }
            for r in self.records
        ]

    @property
    def modules(self) -> list[Any]:
        return [r.module for r in self.records if r.module is not None]


def default_cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kevin" / "builds"


def _toolchain_fingerprint() -> dict[str, str]:
    import torch

    return {
        "torch": torch.__version__,
        # torch writes absolute include paths into build.ninja: two environments with the same
        # version must not share a build directory, or each rebuilds the other's work.
        "torch_path": os.path.dirname(torch.__file__),
        "cuda": str(torch.version.cuda),
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "arch": os.environ.get("TORCH_CUDA_ARCH_LIST", ""),
        "cxx": os.environ.get("CXX", "c++"),
        "nvcc": shutil.which("nvcc") or "",
        "gpu": _gpu_arch(),
        "native": _native_digest(),
    }


def _gpu_arch() -> str:
    """The visible GPUs' compute capabilities: torch builds for exactly these by default."""
    import torch

    if not torch.cuda.is_available():
        return ""
    capabilities = (torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count()))
    return ",".join(f"{major}.{minor}" for major, minor in capabilities)


def _native_digest() -> str:
    """kevin's light headers and shim: a fast build depends on them."""
    digest = hashlib.sha256()
    native = Path(__file__).resolve().parent / "native"
    for path in sorted(native.rglob("*")):
        if path.is_file() and path.suffix in (".h", ".cpp"):
            digest.update(path.relative_to(native).as_posix().encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def build_key(bound: dict[str, Any]) -> str:
    """sha256 over the call's meaningful arguments and the toolchain."""
    payload = {k: v for k, v in bound.items() if k not in _IGNORED_ARGS}
    payload["toolchain"] = _toolchain_fingerprint()
    text = json.dumps(payload, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


def _fast_or_none(arguments: dict[str, Any], directory: Path, cache_root: Path, record: BuildRecord) -> Any:
    """The fast build's module, or None (with the reason recorded) when the real build must run."""
    try:
        module = fastbuild.build(fastbuild.plan(arguments), directory, cache_root)
    except fastbuild.FastBuildFailed as exc:
        lines = [line for line in str(exc).splitlines() if "error" in line]
        record.fallback = "light headers: " + (lines[0] if lines else "build failed")[:300]
    except fastbuild.NotEligible as exc:
        record.fallback = str(exc)
    except Exception as exc:  # noqa: BLE001 - any surprise in the fast path means: use the real build
        record.fallback = f"fast path error: {type(exc).__name__}: {exc}"[:300]
    else:
        record.fast = True
        return module
    shutil.rmtree(directory, ignore_errors=True)
    return None


def install(cache_root: Path, log: BuildLog, fast: bool = True) -> None:
    """Replace `load_inline` for everything imported after this call (and modules already holding it).

    With `fast`, a cache miss first tries kevin.evaluator.fastbuild (light headers, shared binding) and
    falls back to the real build when that does not produce a module."""
    import torch.utils.cpp_extension as cpp_extension

    original = cpp_extension.load_inline
    signature = inspect.signature(original)

    def load_inline(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        key = build_key(arguments)
        name = str(arguments["name"])
        directory = cache_root / f"{name}-{key[:20]}"
        directory.mkdir(parents=True, exist_ok=True)
        arguments["build_directory"] = str(directory)
        arguments["verbose"] = False
        record = BuildRecord(name=name, key=key)
        log.records.append(record)
        started = time.perf_counter()
        log.active = True
        try:
            with fastbuild.locked(cache_root / ".locks" / f"{key}.lock"):
                complete = directory / ".kevin-complete"
                record.cache_hit = complete.exists()
                if not record.cache_hit:
                    # A build killed half-way can leave a truncated library that ninja would call
                    # up to date, and torch's own lock file, which would make the next build wait
                    # forever: start such a directory afresh (we hold the key's lock).
                    shutil.rmtree(directory, ignore_errors=True)
                    directory.mkdir(parents=True, exist_ok=True)
                (directory / "lock").unlink(missing_ok=True)  # torch's own baton, stale if a build was killed
                fast_directory = directory / "fast"
                module = None
                if record.cache_hit and (fast_directory / "kevin-fast.json").exists():
                    module = fastbuild.load(fast_directory, cache_root)
                    record.fast = True
                elif not record.cache_hit and fast:
                    module = _fast_or_none(arguments, fast_directory, cache_root, record)
                if module is None:
                    module = original(**arguments)
                complete.touch()
                record.module = module
                return module
        except BaseException as exc:
            record.error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            log.active = False
            record.seconds = time.perf_counter() - started

    load_inline.__doc__ = original.__doc__
    cpp_extension.load_inline = load_inline
