"""What a built extension may reach, read from the library itself before anything loads it.

A library's static constructors run at load, before any Python check, with the loading process's
full powers. The source cannot be trusted to say what that code calls (`extern "C" int f(const
char*) __asm__("PyRun_SimpleString");` names the Python C API without a `Py` identifier), but the
dynamic linker can only hand the library what it imports by name, and those names are in the
library: `nm -D --undefined-only` lists them, `readelf -d` the libraries and search paths it asks
for, `objdump -d` its own instructions. kevin.evaluator.broker runs `check` after every build, in
the judge's process, and refuses the build (an error the candidate reads like a link error) when

  * an import is on the deny list below (dynamic loading, native threads, new processes, raw
    `syscall`, scheduling and priority, namespaces, ptrace/prctl, signals, memory protection), or
    carries glibc's private version;
  * an import is the Python C API (`Py*`, `_Py*`): always, for a fast build (it links kevin's shim,
    never libpython); for a pybind11 build, when the name is outside the set that a reference
    pybind11 extension built with the same toolchain imports (`REFERENCE_SOURCE`, built once per
    toolchain by the broker), and likewise for libtorch_python's exports, the bridge to the
    interpreter;
  * an import is exported by none of the libraries a build of that kind may use: the C and C++
    runtimes (libc, libm, libstdc++, libgcc_s, the dynamic loader), kevin's shim (fast builds),
    torch's libraries (pybind11 builds) and the CUDA libraries the build links (cudart, cuBLAS,
    ...); so a name the process happens to hold globally (libpython, libffi, libgomp) is refused;
  * the library asks for another library outside that list, or by path (the shim is the one path
    allowed), or for a search path outside the toolchain, or for audit or filter libraries;
  * its code holds a `syscall`, `sysenter` or `int $0x80` instruction (`svc #0` on arm64): inline
    assembly.

Names are judged where the candidate's code uses them: the build's object files (`nm -u`) say
which names the candidate's own code references, so a denied name it references is refused even
when the link resolves it inside the library, and a denied import that no object references (some
toolchains, the GPU machine's among them, link pieces of libstdc++ statically, and those import
`syscall` for futex waits) is allowed when an allowed library defines it.

What this does not stop: code that computes addresses instead of importing them (an allowed libc
import plus a known offset reaches every libc function; walking the loader's link map from a
return address); for pybind11 builds, the interpreter itself, which every binding reaches
(`PyEval_GetBuiltins` and `PyObject_CallFunctionObjArgs` are in the reference set, and with them
`exec`); torch's own thread pools reached through its exported API. Those are for the runner's
confinement (seccomp, Landlock, a PID namespace) and for the process split that keeps the judge
out of the candidate's process: the symbol check removes the easy, named paths and makes the
intent visible at build time.

Why one module of ~620 lines: reading a library (ELF dynamic section, imports, exports, raw syscall
scan) and the rule that judges what it reads change together; split, each half would need the
other's internals.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

POLICY_VERSION = "1"
"""Part of every build key: a change to what is allowed rebuilds (and re-checks) every entry."""

TOOL_TIMEOUT_S = 120


class Unavailable(RuntimeError):
    """binutils is missing: the broker fails closed (no build is accepted unchecked)."""


# -- what no extension may import -----------------------------------------------------------------

DENIED: dict[str, tuple[str, ...]] = {
    "dynamic loading reaches any function by name": (
        "dl*",
        "_dl_*",
        "__dl*",
        "__libc_dl*",
        "_r_debug",
    ),
    "native threads run outside the checks (threads are counted, but not created by a kernel)": (
        "pthread_create",
        "thrd_create",
        "__pthread_create*",
        "_ZNSt6thread15_M_start_thread*",  # std::thread, std::jthread, std::async
        "timer_create",  # SIGEV_THREAD starts a thread
        "mq_notify",
        "GOMP_*",
        "omp_*",
        "kmp_*",
        "__kmpc_*",
        "_ZN2at6launch*",  # torch's inter-op pool runs a callable on another thread
        "_ZN2at14intraop_launch*",
        "_ZN3c1010ThreadPoolC*",
        "_ZN3c1014TaskThreadPoolC*",
    ),
    "new processes and raw system calls are not a kernel's business": (
        "fork",
        "vfork",
        "_Fork",
        "__fork",
        "clone",
        "clone3",
        "__clone*",
        "syscall",
        "__syscall*",
        "execve",
        "execv",
        "execvp",
        "execvpe",
        "execl",
        "execlp",
        "execle",
        "fexecve",
        "execveat",
        "posix_spawn*",
        "system",
        "popen",
        "daemon",
    ),
    "scheduling, priority, namespaces and process control belong to the evaluator": (
        "setpriority",
        "nice",
        "sched_setaffinity",
        "sched_setscheduler",
        "sched_setparam",
        "sched_setattr",
        "pthread_setaffinity_np",
        "pthread_attr_setaffinity_np",
        "pthread_setschedparam",
        "pthread_setschedprio",
        "setns",
        "unshare",
        "ptrace",
        "prctl",
        "setsid",
        "setpgid",
        "setpgrp",
        "setrlimit*",
        "prlimit*",
        "chroot",
        "mount",
        "umount*",
        "pivot_root",
        "personality",
        "set*uid",
        "set*gid",
        "setgroups",
    ),
    "signals reach other processes or take over the evaluator's handlers": (
        "kill",
        "killpg",
        "tgkill",
        "tkill",
        "sigqueue",
        "pthread_kill",
        "pthread_sigqueue",
        "sigaction",
        "__sigaction",
        "signal",
        "sigset",
        "bsd_signal",
        "ssignal",
        "__sysv_signal",
        "sigprocmask",
        "pthread_sigmask",
    ),
    "executable or shared memory is made by loaders and JITs, not kernels": (
        "mprotect",
        "pkey_*",
        "memfd_create",
        "mmap",
        "mmap64",
        "mremap",
        "shm_open",
    ),
    "glibc internals": ("__libc_*",),
}
NEVER_DENIED = frozenset({"__libc_single_threaded"})  # read by libstdc++'s shared_ptr in honest code
STANDARD_WEAK = frozenset(
    {"__gmon_start__", "_ITM_registerTMCloneTable", "_ITM_deregisterTMCloneTable", "_Jv_RegisterClasses"}
)
"""Weak references every g++-built library carries and nothing approved defines (they stay null)."""
TOOLCHAIN_WEAK = ("_ITM_*", "_ZGTt*")
"""Weak references of libstdc++'s transactional-memory clones, linked statically by toolchains
whose libstdc++.so is a script adding a static part (libstdc++_nonshared): null unless libitm is
loaded, and the transactional clones are never called by kernel code."""

_DENIED_PATTERNS = [(pattern, reason) for reason, patterns in DENIED.items() for pattern in patterns]


def denied_reason(name: str) -> str | None:
    """Why an imported name is refused outright, or None."""
    if name in NEVER_DENIED:
        return None
    for pattern, reason in _DENIED_PATTERNS:
        if fnmatch.fnmatchcase(name, pattern):
            return reason
    return None


def is_python_api(name: str) -> bool:
    return name.startswith(("Py", "_Py"))


# -- reading a library ---------------------------------------------------------------------------


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise Unavailable(f"{name} (binutils) not found: kevin cannot check what a built library imports")
    return path


def _run(command: list[str]) -> str:
    done = subprocess.run(
        command, capture_output=True, text=True, errors="replace", timeout=TOOL_TIMEOUT_S, check=False
    )
    if done.returncode != 0:
        raise Unavailable(
            f"{os.path.basename(command[0])} failed on {command[-1]}: {done.stderr.strip()[:400]}"
        )
    return done.stdout


@dataclass(frozen=True)
class Import:
    name: str
    version: str = ""
    weak: bool = False


def imports(library: Path) -> list[Import]:
    """The library's undefined dynamic symbols: what the loader resolves for it at load."""
    found = []
    for line in _run([_tool("nm"), "-D", "--undefined-only", "--format=posix", str(library)]).splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        symbol, kind = parts[0], parts[1]
        name, _, version = symbol.partition("@")
        found.append(Import(name=name, version=version.lstrip("@"), weak=kind in ("w", "v")))
    return found


@functools.lru_cache(maxsize=64)
def _exports_cached(path: str, _identity: tuple[int, int, int]) -> frozenset[str]:
    names = set()
    for line in _run([_tool("nm"), "-D", "--defined-only", "--format=posix", path]).splitlines():
        parts = line.split()
        if parts:
            names.add(parts[0].partition("@")[0])
    return frozenset(names)


def exports(library: Path) -> frozenset[str]:
    """The dynamic symbols a library defines (cached while the file is unchanged)."""
    stat = os.stat(library)
    return _exports_cached(str(library), (stat.st_ino, stat.st_size, stat.st_mtime_ns))


_DYNAMIC_LINE = re.compile(r"^\s*0x[0-9a-f]+\s+\((\w+)\)\s+(.*)$")


def dynamic_section(library: Path) -> dict[str, list[str]]:
    """Tags of the dynamic section: NEEDED, RPATH and RUNPATH with their values, the rest present."""
    tags: dict[str, list[str]] = {}
    for line in _run([_tool("readelf"), "-d", "-W", str(library)]).splitlines():
        match = _DYNAMIC_LINE.match(line)
        if not match:
            continue
        tag, rest = match.groups()
        value = re.search(r"\[(.*)\]", rest)
        tags.setdefault(tag, []).append(value.group(1) if value else rest.strip())
    return tags


_SYSCALL_INSTRUCTION = re.compile(r"\s(syscall|sysenter|int\s+\$0x80|svc\s+#?0x0|svc\s+#?0)\s*(//.*)?$")


def raw_syscalls(library: Path) -> list[str]:
    """Places in the library's code that enter the kernel directly ("function+offset: instruction")."""
    found = []
    function = "?"
    for line in _run([_tool("objdump"), "-d", "--no-show-raw-insn", "-w", str(library)]).splitlines():
        header = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
        if header:
            function = header.group(1)
            continue
        match = _SYSCALL_INSTRUCTION.search(line)
        if match:
            found.append(f"{function}: {match.group(1)}")
    return found


# -- where the allowed libraries are ----------------------------------------------------------------

SYSTEM_LIBRARIES = re.compile(
    r"(libc\.so\.6|libm\.so\.6|libstdc\+\+\.so\.6|libgcc_s\.so\.1|ld-linux[\w.-]*\.so\.\d|libpthread\.so\.0|librt\.so\.1)"
)
"""The C and C++ runtimes (libpthread and librt are empty stubs in glibc 2.34+; checked the same)."""
TORCH_LIBRARIES = re.compile(r"lib(c10|c10_cuda|torch|torch_cpu|torch_cuda|torch_python)\.so")
CUDA_LIBRARIES = re.compile(
    r"lib(cudart|cublas|cublasLt|curand|cufft|cusparse|cusolver|cuda|cudnn\w*|nvToolsExt|nvtx3interop)\.so(\.\d+)*"
)
BRIDGE_LIBRARY = "libtorch_python.so"
"""torch's Python binding: its exports are held to the reference set like the Python C API."""


def _mapped_libraries() -> dict[str, Path]:
    """Libraries this (judge) process has loaded, by file name: the C and C++ runtimes it uses."""
    found: dict[str, Path] = {}
    try:
        lines = Path("/proc/self/maps").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/") and ".so" in parts[5]:
            path = Path(parts[5].strip())
            found.setdefault(path.name, path)
    return found


@functools.lru_cache(maxsize=1)
def library_dirs() -> tuple[Path, ...]:
    """Where approved libraries are looked up, most specific first."""
    dirs: list[Path] = []
    try:
        from torch.utils import cpp_extension

        dirs.append(Path(cpp_extension.TORCH_LIB_PATH))
        cuda_home = cpp_extension.CUDA_HOME
    except Exception:  # noqa: BLE001 - no torch: only system libraries
        cuda_home = None
    for home in filter(None, [cuda_home, os.environ.get("CUDA_HOME"), "/usr/local/cuda"]):
        for sub in ("lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib", "lib64/stubs"):
            dirs.append(Path(home) / sub)
    site = Path(sysconfig.get_paths()["purelib"]) / "nvidia"
    if site.is_dir():
        dirs.extend(sorted(p for p in site.glob("*/lib") if p.is_dir()))
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    for base in ("/lib", "/usr/lib", "/lib64", "/usr/lib64"):
        dirs.append(Path(base) / multiarch if multiarch else Path(base))
        dirs.append(Path(base))
    unique = []
    for d in dirs:
        if d.is_dir() and d not in unique:
            unique.append(d)
    return tuple(unique)


@functools.lru_cache(maxsize=256)
def locate(soname: str) -> Path | None:
    """The file an approved soname loads from (the judge's own copy when it has one mapped)."""
    mapped = _mapped_libraries().get(soname)
    if mapped is not None and mapped.is_file():
        return mapped
    for directory in library_dirs():
        candidate = directory / soname
        if candidate.is_file():
            return candidate
    return None


def toolchain_library_roots() -> tuple[Path, ...]:
    """Directories a build may name as a run-time search path (rpath): the toolchain's own."""
    return tuple(Path(os.path.realpath(d)) for d in library_dirs())


# -- the check ------------------------------------------------------------------------------------


@dataclass
class Policy:
    kind: str
    """"fast" (links kevin's shim, no Python) or "pybind" (torch's own pybind11 build)."""
    python: frozenset[str] = frozenset()
    """Python C API names a plain pybind11 binding imports (pybind builds)."""
    bridge: frozenset[str] = frozenset()
    """libtorch_python exports a plain pybind11 binding imports (pybind builds)."""
    shim: Path | None = None
    """Fast builds: kevin's shim, the one library named by path."""
    rpath_roots: tuple[Path, ...] = field(default_factory=toolchain_library_roots)


def _base_libraries(policy: Policy) -> list[str]:
    names = ["libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1"]
    names += sorted(n for n in _mapped_libraries() if n.startswith("ld-linux"))
    if policy.kind == "pybind":
        names += [
            "libc10.so",
            "libtorch_cpu.so",
            "libtorch.so",
            BRIDGE_LIBRARY,
            "libc10_cuda.so",
            "libtorch_cuda.so",
        ]
    return names


def _approved(soname: str, kind: str) -> bool:
    if SYSTEM_LIBRARIES.fullmatch(soname) or CUDA_LIBRARIES.fullmatch(soname):
        return True
    return kind == "pybind" and TORCH_LIBRARIES.fullmatch(soname) is not None


def _inside(path: str, roots: Iterable[Path]) -> bool:
    real = Path(os.path.realpath(path))
    return any(real == root or root in real.parents for root in roots)


def references(objects: Iterable[Path]) -> set[str]:
    """The names the build's own object files (the candidate's compiled code) leave undefined."""
    names: set[str] = set()
    for path in objects:
        for line in _run([_tool("nm"), "--undefined-only", "--format=posix", str(path)]).splitlines():
            parts = line.split()
            if parts:
                names.add(parts[0].partition("@")[0])
    return names


def check(library: Path, policy: Policy, objects: Sequence[Path] = ()) -> list[str]:
    """Every reason the library may not be loaded (empty: it may).

    `objects`, the object files the library was linked from, tell the candidate's own references
    from what static parts of the toolchain add at link time (a libstdc++ that links its newer
    pieces statically imports `syscall` for its futex waits into every library that uses them):
    a denied name is refused when the candidate's code names it, wherever it resolves, and allowed
    as an import only when no object names it (it must still come from an allowed library). Raw
    system call instructions are looked for in the objects. Without objects the library alone is
    judged, strictly."""
    problems: list[str] = []
    referenced = references(objects) if objects else None
    providers = _linkage(library, policy, problems)
    for reason, names in _refused_imports(library, policy, providers, referenced).items():
        shown = ", ".join(sorted(names)[:12]) + (" ..." if len(names) > 12 else "")
        problems.append(f"{reason}: {shown}")
    syscalls = (
        [found for path in objects for found in raw_syscalls(path)] if objects else raw_syscalls(library)
    )
    if syscalls:
        problems.append(
            f"enters the kernel directly (raw system call instructions): {', '.join(syscalls[:6])}"
        )
    return problems


def _linkage(library: Path, policy: Policy, problems: list[str]) -> dict[str, frozenset[str]]:
    """What the library links and where it searches (problems appended); returns the exports of
    each library it may draw symbols from."""
    dynamic = dynamic_section(library)
    for tag in ("AUDIT", "DEPAUDIT", "FILTER", "AUXILIARY"):
        if tag in dynamic:
            problems.append(f"asks the loader for {tag.lower()} libraries ({', '.join(dynamic[tag])})")
    providers: dict[str, frozenset[str]] = {}
    for soname in _base_libraries(policy):
        path = locate(soname)
        if path is not None:
            providers[soname] = exports(path)
    for needed in dynamic.get("NEEDED", []):
        if policy.shim is not None and needed == str(policy.shim):
            providers["kevin shim"] = exports(policy.shim)
        elif "/" in needed:
            problems.append(f"links a library by path: {needed}")
        elif not _approved(needed, policy.kind):
            problems.append(f"links a library kevin does not allow: {needed}")
        elif needed not in providers:
            path = locate(needed)
            if path is None:
                problems.append(f"links {needed}, which kevin cannot find to check")
            else:
                providers[needed] = exports(path)
    roots = list(policy.rpath_roots) + ([policy.shim.parent] if policy.shim is not None else [])
    for tag in ("RPATH", "RUNPATH"):
        for value in dynamic.get(tag, []):
            for entry in filter(None, value.split(":")):
                if "$" in entry or not entry.startswith("/") or not _inside(entry, roots):
                    problems.append(f"searches for libraries in {entry}")
    return providers


def _refused_imports(
    library: Path, policy: Policy, providers: dict[str, frozenset[str]], referenced: set[str] | None
) -> dict[str, set[str]]:
    """Reason -> the names refused for it: what the candidate's objects name and what the library
    imports that an extension may not use."""
    bridge = providers.get(BRIDGE_LIBRARY, frozenset())
    others = [names for soname, names in providers.items() if soname != BRIDGE_LIBRARY]
    refused: dict[str, set[str]] = {}

    def python_reason(name: str) -> str | None:
        if policy.kind != "pybind":
            return "the Python C API (a fast build talks to Python only through kevin's shim)"
        if name not in policy.python:
            return "the Python C API beyond what a plain pybind11 binding imports"
        return None

    for name in sorted(referenced or ()):
        reason = python_reason(name) if is_python_api(name) else denied_reason(name)
        if reason is not None:
            refused.setdefault(reason, set()).add(name)
    for symbol in imports(library):
        name = symbol.name
        if symbol.weak and (
            name in STANDARD_WEAK or any(fnmatch.fnmatchcase(name, p) for p in TOOLCHAIN_WEAK)
        ):
            continue
        if symbol.version == "GLIBC_PRIVATE":
            refused.setdefault("glibc's private interface", set()).add(name)
            continue
        if is_python_api(name):
            reason = python_reason(name)
            if reason is not None:
                refused.setdefault(reason, set()).add(name)
            continue
        reason = denied_reason(name)
        if reason is not None and (referenced is None or name in referenced):
            refused.setdefault(reason, set()).add(name)
            continue
        if any(name in names for names in others):
            continue
        if name in bridge:
            if name not in policy.bridge:
                refused.setdefault(
                    "torch's Python binding beyond what a plain pybind11 binding imports", set()
                ).add(name)
            continue
        refused.setdefault("defined by none of the libraries an extension may use", set()).add(name)
    return refused


# -- the reference binding (pybind builds) ----------------------------------------------------------

REFERENCE_SOURCE = r"""
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

torch::Tensor k_tensor(torch::Tensor a, const torch::Tensor& b) { return a.defined() ? a : b; }
c10::optional<torch::Tensor> k_optional(c10::optional<torch::Tensor> a, c10::optional<double> b,
                                        c10::optional<int64_t> c, std::optional<bool> d) { return a; }
std::vector<torch::Tensor> k_list(std::vector<torch::Tensor> a, std::vector<int64_t> b, std::vector<double> c,
                                  std::vector<std::vector<int64_t>> d) { return a; }
std::tuple<torch::Tensor, torch::Tensor, double, int64_t, bool> k_tuple(torch::Tensor a) {
  return std::make_tuple(a, a, 1.0, int64_t(2), true);
}
torch::Tensor k_shape(torch::Tensor a, at::IntArrayRef shape, c10::optional<at::IntArrayRef> stride) { return a; }
double k_scalars(double a, float b, int c, int64_t d, bool e, std::string s, const std::string& t) { return a; }
std::string k_string(const std::string& s) { return s; }
at::Scalar k_scalar(at::Scalar s) { return s; }
at::ScalarType k_dtype(at::ScalarType t) { return t; }
c10::Device k_device(c10::Device d) { return d; }
c10::Layout k_layout(c10::Layout l) { return l; }
c10::MemoryFormat k_memory_format(c10::MemoryFormat f) { return f; }
std::map<std::string, torch::Tensor> k_dict(std::map<std::string, torch::Tensor> m) { return m; }
std::pair<int64_t, double> k_pair(std::pair<int64_t, double> p) { return p; }
void k_void() {}
float k_float(float x) { return x; }
int k_int(int x) { return x; }
bool k_bool(bool x) { return x; }

struct KState {
  explicit KState(int64_t n) : n(n) {}
  torch::Tensor apply(torch::Tensor x) const { return x; }
  int64_t n;
};

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "kevin's reference binding";
  m.attr("version") = 1;
  m.def("k_tensor", torch::wrap_pybind_function(k_tensor), "k_tensor");
  m.def("k_optional", torch::wrap_pybind_function(k_optional), "k_optional");
  m.def("k_list", torch::wrap_pybind_function(k_list), "k_list");
  m.def("k_tuple", torch::wrap_pybind_function(k_tuple), "k_tuple");
  m.def("k_shape", torch::wrap_pybind_function(k_shape), "k_shape");
  m.def("k_scalars", torch::wrap_pybind_function(k_scalars), "k_scalars");
  m.def("k_string", &k_string, "k_string");
  m.def("k_scalar", &k_scalar, "k_scalar");
  m.def("k_dtype", &k_dtype, "k_dtype");
  m.def("k_device", &k_device, "k_device");
  m.def("k_layout", &k_layout, "k_layout");
  m.def("k_memory_format", &k_memory_format, "k_memory_format");
  m.def("k_dict", &k_dict, "k_dict");
  m.def("k_pair", &k_pair, "k_pair");
  m.def("k_void", &k_void, "k_void");
  m.def("k_tensor_plain", &k_tensor, "k_tensor_plain", py::arg("a"), py::arg("b"));
  m.def("k_float", &k_float, py::arg("x") = 1.0f);
  m.def("k_int", &k_int, py::arg("x") = 1);
  m.def("k_bool", &k_bool, py::arg("x") = true);
  m.def("k_lambda", [](torch::Tensor x, double s) { return x; }, py::arg("x"), py::arg("s") = 2.0);
  m.def("k_overload", [](torch::Tensor x) { return x; });
  m.def("k_overload", [](torch::Tensor x, torch::Tensor y) { return y; });
  py::class_<KState>(m, "KState")
      .def(py::init<int64_t>())
      .def("apply", &KState::apply)
      .def_readwrite("n", &KState::n)
      .def_property_readonly("twice", [](const KState& s) { return s.n * 2; })
      .def("__repr__", [](const KState& s) { return std::string("KState"); });
}
"""
"""What honest candidates bind: every argument and return type load_inline candidates use, with and
without torch's error handling, keywords and defaults, overloads, lambdas and a small class."""


def reference_sets(library: Path) -> tuple[frozenset[str], frozenset[str]]:
    """(Python C API names, libtorch_python names) the reference binding imports."""
    bridge_path = locate(BRIDGE_LIBRARY)
    bridge = exports(bridge_path) if bridge_path is not None else frozenset()
    names = {symbol.name for symbol in imports(library)}
    python = frozenset(n for n in names if is_python_api(n))
    return python, frozenset(n for n in names if n in bridge and not is_python_api(n))


def self_test() -> None:  # pragma: no cover - a manual check: python -m kevin.evaluator.symbols LIB...
    for argument in sys.argv[1:]:
        print(argument, check(Path(argument), Policy(kind="pybind")))


if __name__ == "__main__":  # pragma: no cover
    self_test()
