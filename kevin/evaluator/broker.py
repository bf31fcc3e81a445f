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
    in any process with the judge's powers, and whose ninja step ends at the first failed command
    (ninja itself would let main.cpp's 20-30 s compile finish before it reported an error in
    cuda.cu); both run in their own process group, killed on timeout;
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

Every build command runs jailed (kevin.evaluator.buildjail): it reads the system's and the
toolchain's directories (`self.roots`) and its own, writes only its own, so a source's `#include`
or `.incbin` of the judge's files fails (before session 29 it echoed them in the compile error, or
embedded them in the library). Compile-time resource use is bounded only by the timeout. The symbol check's
own limits are in kevin.evaluator.symbols.

A failed fast build whose error is an undefined name asks a probe first (kevin.evaluator.buildfail):
a small compile with torch's headers, whose answers per name the broker keeps under the cache
root's `.probes/` (written by the broker alone, like every entry).

Why one module of ~600 lines: the broker class and its manifest checks are one protocol over one
cache layout; torch's build in a throwaway process, the request's and the flags' checks are their
own modules (kevin.evaluator.torchbuild, buildrequest, buildflags).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from kevin.evaluator import buildfail, buildflags, fastbuild, symbols, torchbuild
from kevin.evaluator.build import BuildReply, _gpu_arch, build_key, sha256_file
from kevin.evaluator.buildflags import flag_problems, toolchain_roots
from kevin.evaluator.buildrequest import Refused, normalize

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

MAX_ERROR_CHARS = 16000

_SHA256 = re.compile(r"[0-9a-f]{64}")


OWN_ERROR = "light headers: the candidate's own syntax error (kevin.evaluator.buildfail); no full build"
"""BuildReply.fallback of a fast build that failed on the candidate's own lines."""


class _Corrupt(Exception):
    """A cache entry that does not validate."""


class _OwnError(Exception):
    """A fast build failed where no header could help (kevin.evaluator.buildfail)."""

    def __init__(self, output: str) -> None:
        super().__init__("the candidate's own compile error")
        self.output = output


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


POLICY = (
    _digest_files(
        [Path(__file__), Path(buildflags.__file__), Path(symbols.__file__), Path(torchbuild.__file__)]
    )
    + symbols.POLICY_VERSION
)
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
            try:
                kind, functions, fallback, library = self._fast(arguments, staging)
            except _OwnError as failure:  # the full build would fail on the same lines: not run
                return BuildReply(
                    ok=False,
                    name=name,
                    key=key,
                    fallback=OWN_ERROR,
                    error=_truncate(buildfail.report(failure.output, name, staging, entry)),
                    error_type="RuntimeError",
                    blame="candidate",
                )
            shim = ""
            if kind == "fast":
                shim = str(self._shim_library()[0])
            else:
                shutil.rmtree(staging, ignore_errors=True)
                staging.mkdir()
                kwargs = {**arguments, "build_directory": str(staging), "verbose": False}
                ok, error_type, error = torchbuild.run(
                    "load_inline", kwargs, staging, self.timeout_s, self._overrides(), self.roots
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
            library = fastbuild.compile_library(
                plan, staging, shim, self.timeout_s, self._overrides(), readable=self.roots
            )
        except fastbuild.NotEligible as exc:
            return "", {}, str(exc), staging
        except fastbuild.FastBuildFailed as exc:
            probe = self._probe(plan, staging / "probe")
            if buildfail.own_error(exc.output, staging, fastbuild.own_lines(plan), buildfail.reserved_macros(), probe):
                raise _OwnError(exc.output) from None
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

    # probes: names torch's headers might declare (kevin.evaluator.buildfail)
    def _probe(self, plan: fastbuild.Plan, directory: Path) -> buildfail.Probe:
        """buildfail's probe for `plan`'s failed fast build: compiles with torch's headers and flags
        the names not yet answered, and keeps each decisive answer under the cache root, keyed by
        the toolchain, the plan's flags and the probe's preamble (the RL policy's mistakes repeat)."""

        def probe(file: str, text: str, names: list[str]) -> set[str]:
            preamble, _ = buildfail.probe_source(file, text, [])
            context = json.dumps(
                [
                    fastbuild.shim_key(),
                    self._overrides(),
                    file,
                    preamble,
                    plan.extra_cflags,
                    plan.extra_cuda_cflags,
                    plan.extra_include_paths,
                ]
            )
            paths = {name: self._probe_answer_path(context, name) for name in names}
            answers: dict[str, bool] = {}
            for name, path in paths.items():
                with contextlib.suppress(OSError):
                    answers[name] = path.read_text() == "undeclared"
            missing = [name for name in names if name not in answers]
            if missing:
                source, lines = buildfail.probe_source(file, text, missing)
                code, output = fastbuild.probe_compile(
                    plan, file, source, directory, self.timeout_s, self._overrides(), readable=self.roots
                )
                found = buildfail.probe_verdict(code, output, file, lines)
                for name, undeclared in (found or {}).items():
                    answers[name] = undeclared
                    _write_atomic(paths[name], "undeclared" if undeclared else "declared")
            return {name for name in names if answers.get(name)}

        return probe

    def _probe_answer_path(self, context: str, name: str) -> Path:
        digest = hashlib.sha256(f"{context}\n{name}".encode()).hexdigest()
        return self.cache_root / ".probes" / digest[:2] / digest[2:32]

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
        ok, error_type, error = torchbuild.run(
            "load", kwargs, directory, self.timeout_s, self._overrides(), self.roots
        )
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
        root = fastbuild.toolchain_root(self.cache_root) / "symbols"
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
                ok, error_type, error = torchbuild.run(
                    "load_inline", kwargs, directory, self.timeout_s, {}, self.roots
                )
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


def _write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file in its folder, so readers see all or none."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    temporary.write_text(text)
    os.replace(temporary, path)

