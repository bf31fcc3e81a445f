"""Building candidate extensions: plain `load_inline` semantics, a content-addressed cache.

Candidates call `torch.utils.cpp_extension.load_inline(...)` at import, exactly as they would under
the original KernelBench harness. In the process that imports the candidate, kevin replaces that
function (and `load_inline` in modules that already imported it), in one of two ways.

`install_client(request, log)`, for a runner that cannot write the build cache: each call binds
its arguments against the real signature (every torch version's keywords work, a wrong call raises
the same TypeError), sends them as JSON data through `request` to the judge's build broker
(kevin.evaluator.broker, which validates them, keys, builds, checks the library's imports and
hashes it), checks the library it is told to load against the broker's sha256 and loads it (through
kevin's shim for a fast build, as a Python module for torch's own build). A failed build raises
what load_inline raises, so the model reads the same compile errors and the compile-stage verdict
sees the same text. Nothing is built or written in the runner.

`install(cache_root, log, fast)`, the legacy in-process path (the current worker): builds in the
candidate's own process, which

  * keys the build by everything that changes its output: the sources, functions, flags, include
    paths, the torch version, the CUDA arch list and the compilers; the same key always reuses one
    build directory under the cache root, so an identical candidate is a cache hit (ninja finds
    nothing to do and the module is loaded directly);
  * serializes concurrent builds of the same key with a file lock;
  * discards a fast build whose manifest names a library outside its own directory.

Both record each build (name, key, seconds, cache hit, error) so the evaluator can tell a compile
error from a Python error at import, and report build times.

What `install` does not protect: the cache directory is writable by the worker, so a hostile
candidate can rewrite libraries in it for later builds (manifests that leave their entry are
refused, a replaced library is not detected), and its C++ runs with the worker's powers. Use
`install_client` with a broker, and a runner that cannot write the cache, for untrusted candidates.
What `install_client` does not protect: the runner is the candidate's own process, so a candidate
can always load other code there itself; the hash check makes sure kevin's loader loads exactly what
the broker built and checked (the broker never rewrites a published entry in place).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import inspect
import json
import os
import shutil
import sys
import time
import types
from collections.abc import Callable
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


def _toolchain_fingerprint(gpu: str | None = None) -> dict[str, str]:
    """What a build's output depends on beyond its arguments; `gpu` overrides the detected GPUs."""
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
        "gpu": _gpu_arch() if gpu is None else gpu,
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


def build_key(bound: dict[str, Any], gpu: str | None = None, policy: str | None = None) -> str:
    """sha256 over the call's meaningful arguments and the toolchain (and the broker's policy)."""
    payload = {k: v for k, v in bound.items() if k not in _IGNORED_ARGS}
    payload["toolchain"] = _toolchain_fingerprint(gpu)
    if policy is not None:
        payload["kevin_policy"] = policy
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
                    try:
                        module = fastbuild.load(fast_directory, cache_root)
                        record.fast = True
                    except fastbuild.BadManifest as exc:  # planted by another candidate: build afresh
                        record.cache_hit = False
                        record.fallback = f"discarded a bad cache entry: {exc}"[:300]
                        shutil.rmtree(directory, ignore_errors=True)
                        directory.mkdir(parents=True, exist_ok=True)
                if module is None and not record.cache_hit and fast:
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
    load_inline.__wrapped__ = original  # type: ignore[attr-defined]
    cpp_extension.load_inline = load_inline


# -- the runner's side of the build broker ---------------------------------------------------------

REPLY_KINDS = ("fast", "pybind", "library")
_ERROR_TYPES: dict[str, type[Exception]] = {
    "RuntimeError": RuntimeError,
    "TypeError": TypeError,
    "ValueError": ValueError,
    "OSError": OSError,
    "ImportError": ImportError,
}


@dataclass
class BuildReply:
    """The broker's answer to one load_inline call (JSON-able: `to_dict` / `from_dict`)."""

    ok: bool
    name: str = ""
    key: str = ""
    kind: str = ""
    """"fast" (kevin's light build, loaded through the shim), "pybind" (torch's own build, imported
    as a Python module) or "library" (torch's own build with is_python_module=False)."""
    path: str = ""
    """The library to load, inside its cache entry."""
    sha256: str = ""
    functions: dict[str, str] = field(default_factory=dict)
    """Fast builds: each bound function's signature code (kevin.evaluator.fastbuild)."""
    shim_path: str = ""
    shim_sha256: str = ""
    cache_hit: bool = False
    seconds: float = 0.0
    fallback: str = ""
    """Why the fast path was not used, when it was not."""
    discarded: str = ""
    """Why an existing cache entry for this key was thrown away and rebuilt (tampering, a bad manifest)."""
    error: str = ""
    """When not ok: the text load_inline would raise (compile errors, refused flags or symbols)."""
    error_type: str = ""
    blame: str = ""
    """When not ok: "candidate" (its sources, flags or arguments) or "infrastructure"."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> BuildReply:
        """Parse a reply, checking every field's type (ValueError otherwise)."""
        if not isinstance(data, dict):
            raise ValueError(f"build reply is not an object: {type(data).__name__}")
        values: dict[str, Any] = {}
        for item in dataclasses.fields(cls):
            if item.name not in data:
                if item.name == "ok":
                    raise ValueError("build reply without 'ok'")
                continue
            value = data[item.name]
            expected = {"ok": bool, "cache_hit": bool, "seconds": (int, float), "functions": dict}.get(
                item.name, str
            )
            if not isinstance(value, expected) or (expected is not bool and isinstance(value, bool)):
                raise ValueError(f"build reply field {item.name!r} has type {type(value).__name__}")
            values[item.name] = value
        reply = cls(**values)
        if reply.ok and reply.kind not in REPLY_KINDS:
            raise ValueError(f"build reply of unknown kind {reply.kind!r}")
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in reply.functions.items()):
            raise ValueError("build reply functions must map names to signatures")
        return reply


class BuildIntegrityError(RuntimeError):
    """The library on disk is not the one the broker built (its sha256 differs): not loaded."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _verify(path: Path, expected: str, what: str) -> None:
    actual = sha256_file(path)
    if actual != expected:
        raise BuildIntegrityError(
            f"kevin: {what} {path} does not match the sha256 the build broker recorded "
            f"(expected {expected[:16]}..., found {actual[:16]}...); it was replaced after the build, not loading it"
        )


def _jsonable(value: Any, where: str) -> Any:
    """A load_inline argument as JSON data, or TypeError for values that cannot be sent."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (list, tuple)):
        return [_jsonable(item, where) for item in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError(f"load_inline(): {where} must map strings to strings")
        return {k: _jsonable(v, where) for k, v in value.items()}
    raise TypeError(f"load_inline(): {where} of type {type(value).__name__} is not supported")


def _import_extension(name: str, path: Path) -> Any:
    """Import a built pybind11 extension exactly as torch's load_inline does."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import extension {name} from {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_VERIFIED_SHIMS: dict[tuple[str, str], fastbuild.Shim] = {}


def load_reply(reply: BuildReply) -> Any:
    """Load the library a successful reply names, after checking it is the one the broker built."""
    path = Path(reply.path)
    _verify(path, reply.sha256, "the library")
    if reply.kind == "fast":
        shim_key = (reply.shim_path, reply.shim_sha256)
        if shim_key not in _VERIFIED_SHIMS:
            _verify(Path(reply.shim_path), reply.shim_sha256, "kevin's shim")
            _VERIFIED_SHIMS[shim_key] = fastbuild.load_shim(Path(reply.shim_path))
        return fastbuild.load_library(path, reply.name, reply.functions, _VERIFIED_SHIMS[shim_key])
    if reply.kind == "pybind":
        return _import_extension(reply.name, path)
    import torch

    torch.ops.load_library(str(path))
    return str(path)


def install_client(request: Callable[[dict[str, Any]], dict[str, Any]], log: BuildLog) -> None:
    """Replace `load_inline` in this (the runner's) process with a client of the judge's build broker.

    Each call binds its arguments against the real signature (so a wrong call raises the same
    TypeError), sends them as JSON data through `request` (which returns the broker's reply as a
    dict: kevin.evaluator.broker.Broker.build(...).to_dict() on the judge's side), checks the
    library's sha256 against the reply and loads it: through kevin's shim for a fast build, as a
    Python module for a pybind11 build. A failed build raises what load_inline raises (RuntimeError
    "Error building extension '<name>': <compiler output>"), so candidates and the compile-stage
    verdict read the same text. Nothing is built or written in this process."""
    import torch.utils.cpp_extension as cpp_extension

    original = getattr(cpp_extension.load_inline, "__wrapped__", cpp_extension.load_inline)
    signature = inspect.signature(original)

    def load_inline(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = {k: _jsonable(v, k) for k, v in bound.arguments.items() if k not in _IGNORED_ARGS}
        record = BuildRecord(name=str(arguments.get("name")), key="")
        log.records.append(record)
        started = time.perf_counter()
        log.active = True
        try:
            reply = BuildReply.from_dict(request(arguments))
            record.key, record.cache_hit, record.fallback = reply.key, reply.cache_hit, reply.fallback
            record.fast = reply.kind == "fast"
            if not reply.ok:
                raise _ERROR_TYPES.get(reply.error_type, RuntimeError)(reply.error)
            module = load_reply(reply)
            if isinstance(module, types.ModuleType):
                record.module = module
            return module
        except BaseException as exc:
            record.error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            log.active = False
            record.seconds = time.perf_counter() - started

    load_inline.__doc__ = original.__doc__
    load_inline.__wrapped__ = original  # type: ignore[attr-defined]
    cpp_extension.load_inline = load_inline
