"""The static gate: reject, before anything is built, candidates that do not do the work themselves.

`check_source(source, backend, policy)` parses a candidate (it never imports or runs it) and returns a
`CheckReport`: `ok`, and violations that each carry a stable `rule` id, a `line` and a `message` written
for the model. `kevin check CANDIDATE [--backend cuda|triton|cpp] [--json]` prints the report and exits 1
when the candidate is rejected. The evaluator runs the gate first (stage `static_check`), so a rejected
candidate costs no compile time.

How it reads a candidate. The *compute path* is `ModelNew.forward` plus every function, method, lambda
and local class it reaches: helpers, `self.method(...)`, module-level functions, local modules held in
attributes or `nn.ModuleList`/`nn.Sequential`, `autograd.Function.apply`, functions passed as values.
Names are followed through imports and aliases (`import torch as T`, `import torch.nn.functional as F2`,
`from torch import relu as r`, `mm = torch.matmul`, `getattr(torch, "matmul")`, `self.act = F.gelu`,
dicts and lists of functions, `functools.partial`) and through function parameters (what a call site
passes, the callee receives). A light type inference tells tensors (forward's arguments, parameters,
buffers, allocations, kernel outputs and their views) from shapes and Python numbers, so `n * 4` is shape
arithmetic while `out * 4` is a PyTorch kernel. Comments, strings and docstrings are data: mentioning
`torch.matmul` in a docstring triggers nothing. The C++/CUDA sources handed to `load_inline` are read
lexically (comments and string literals stripped), since they are code too.

Where the work is done: this module holds the policy, the report and the command; `check_source` runs
`kevin.checks_python.Gate`, which applies the rules to the Python source with the name resolution of
`kevin.checks_names`, the C++/CUDA reading of `kevin.checks_native` and the path analysis of
`kevin.checks_paths`.

Rules (ids are stable; `RULES` has the one-line descriptions):
- `framework-compute`: the compute path calls framework compute. Every call into `torch` (and numpy,
  cupy, scipy, jax, ...) is compute unless `CheckPolicy.allowed_calls` lists it; tensor methods named in
  `CheckPolicy.compute_ops` (`x.relu()`, `x.sum()`, `.mm`, `.softmax`, in-place and `__matmul__` forms);
  `@`; arithmetic, comparisons and `abs/max/min/sum/pow` on tensors; calling an `nn` layer (or
  `nn.Sequential`, a `torch.compile`d function, a subclass of an `nn` layer that keeps its `forward`);
  indexing a tensor with a tensor (a gather); referencing a framework op as a value
  (`reduce(torch.matmul, ...)`, a parameter default `act=torch.relu`).
- `native-framework-compute`: the C++/CUDA sources use ATen instead of their own code (`torch::matmul`,
  `at::cuda::mm`, `at::native::`, `x.mm(...)`, in a call, a macro or a function pointer; `using namespace
  at` hides which calls are ATen, so it is rejected too), vendor libraries (cuBLAS, cuDNN, cuFFT, ...:
  `#include <cublas_v2.h>`, `cublasSgemm`, `-lcublas` in the build flags), or escape to code the gate
  cannot see (`py::module_::import`, `PyRun_*`, `dlopen`, `system`).
- `fallback`: `try/except` (or `contextlib.suppress`) in the compute path, or a path through `forward`
  that launches no custom kernel (`if x.is_cuda: return ext.f(x)` with another way out, flag-controlled
  branches, `ext.f(x) if FLAG else x`). A branch that skips one of several kernels is fine as long as
  every path launches at least one.
- `reference-use`: `Model` subclassed, instantiated, imported (from any module, under any alias),
  reached as an attribute (`reference.Model`) or looked up by name (`globals()["Model"]`,
  `getattr(m, "Model")`). A copy of the reference class left unused in the file is tolerated.
- `no-custom-kernel`: no kernel of the back end's kind exists: cuda needs `load_inline` with
  `cuda_sources` holding a `__global__` function and its launch; cpp needs `load_inline` with C++
  `cpp_sources`; triton needs a `@triton.jit` function.
- `kernel-not-called`: such a kernel exists but nothing in the compute path calls the built extension's
  functions (or launches the triton kernel with `kernel[grid](...)`).
- `kernel-source-unverifiable`: kernel sources the gate cannot read: assembled at run time (decoded,
  read from files), including files from absolute or parent paths or include flags (`-I`,
  `extra_include_paths`), or built with `load` from files (`CheckPolicy.trust_file_sources` relaxes
  the last). Sources built from literals, names, `+`, f-strings, `.format`, `.join`, `.replace` and
  `textwrap.dedent` are read, with whatever is pasted into them.
- `dynamic-code`: code the gate cannot follow: `exec`, `eval`, `compile`, `__import__`, `importlib`,
  `runpy`, `pickle`/`marshal`, `ctypes`/`cffi`, `builtins`, `getattr`/`setattr`/`delattr` with a computed
  name, star imports. Rejected anywhere in the candidate, not only in the compute path.
- `introspection`: `gc`, `inspect`, `traceback`, `__main__`, `sys._getframe`, `sys.modules`, `globals()`,
  `locals()`, `vars()`, frame and function internals (`f_back`, `__globals__`, `__dict__`, ...): the
  ways to reach the grader's objects or the reference's output.
- `concurrency`: threads, processes, subprocesses (`threading`, `multiprocessing`, `subprocess`,
  `asyncio`, `os.fork`, `os.system`, ...): work that escapes the clock.
- `global-state`: assigning attributes of imported modules (`torch.allclose = ...`,
  `torch.backends.cudnn.allow_tf32 = ...`) or calling `torch.set_*`/`torch.backends.*` setters: state
  shared with the reference and the checker.
- `forward-hijack`: what the harness calls is not `ModelNew.forward`: `forward`/`__call__`/`__class__`
  assigned, forward hooks, `__call__`/`__getattr__`/`__getattribute__`/`__new__` defined on ModelNew or a
  local class it inherits from, metaclasses or class decorators on them, `ModelNew` rebound, functions
  of a built extension replaced (`ext.f = torch.relu`).
- `disallowed-import`: a module outside `CheckPolicy.allowed_imports` (torch, triton, numpy, einops and
  utility stdlib modules), or a relative import: another library could do the work (torchvision.ops,
  xformers, ...). numpy and einops may be imported, but their compute in the compute path is
  framework compute like torch's (`einops.rearrange`, a view, is allowed).
- `missing-model-new`: no `class ModelNew` with a `forward`. `syntax`: the source does not parse.

Allowed by default in the compute path: allocation (`torch.empty`, `empty_like`, `empty_strided`,
`torch.Tensor()`, and also `zeros`, `ones`, `full`, their `_like` forms and `arange`: allocation plus a
fill is not the computation a task asks for, and kernels often need a zeroed accumulator or an index); views and shape queries (`view`, `reshape`,
`permute`, `transpose`, `flatten`, `squeeze`, `unsqueeze`, `expand`, `narrow`, `split`, `chunk`, `size`,
`shape`, `dim`, `stride`, `numel`, `is_contiguous`, `data_ptr`); data movement the kernels need
(`contiguous`, `clone`, `copy_`, `to(device/dtype)`, `float()`/`half()`, indexing and slice assignment;
whether a cast lowers precision is the dynamic numerics check's job); device and stream queries
(`torch.cuda.current_stream`, `get_device_properties`, ...); `torch.no_grad`; `nn.Parameter`, buffers
and containers; `nn.Linear`/`nn.Conv2d`/... built in `__init__` to own weights, as long as their forward
is not called in the compute path (`self.conv.weight`, `self.conv.stride` are fine); `load_inline` and
calls into the built extension; `triton.cdiv`, `triton.next_power_of_2`; `math`. Outside the compute path
(module level, `__init__`, `get_inputs`) framework calls are allowed: they build weights, not outputs.

What a static gate cannot catch (the dynamic checks in the evaluator exist for these):
- types it guesses: every argument of forward is taken for a tensor unless annotated `int`, `float`,
  `bool` or `str` (so `s * 2` on an unannotated scalar is rejected);
- dispatch it cannot resolve: objects of unknown type (a tensor hidden in a list, a parameter passed
  through `*args`), methods that share a name with nothing in `compute_ops`, attribute lookups on
  objects built by code it does not model; computed `getattr`, `exec` and `eval` are rejected instead of
  followed, at the cost of the odd honest candidate that uses them;
- what the kernel computes: a custom kernel that copies its input, precomputes or caches results,
  works on other streams or in lower precision, or returns a buffer reused across calls;
- loops are assumed to run (a kernel launched only inside `for _ in range(self.n)` counts as launched);
- C++ is read lexically, not parsed: token pasting (`at::mat##mul`) or a template can hide an ATen
  call, and a method call in C++ is judged by its name only;
- Python that computes without a recognisable op: a tensor smuggled in through a container or a
  parameter the gate could not type, then used in arithmetic (`sum(...)` over a list of tensors);
- side doors at run time: files written and read back, environment variables, libraries the kernel
  itself loads.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from kevin.errors import UsageError

BACKENDS: tuple[str, ...] = ("cuda", "triton", "cpp")

RULES: Mapping[str, str] = MappingProxyType(
    {
        "syntax": "the candidate does not parse as Python",
        "missing-model-new": "no class ModelNew with a forward method",
        "framework-compute": "the compute path does its work with framework ops (torch, F, nn layers, @, tensor arithmetic)",
        "native-framework-compute": "the C++/CUDA sources call ATen/torch compute or cuBLAS/cuDNN instead of their own code",
        "fallback": "a path can skip the custom kernel: try/except in the compute path, or a way through forward that launches none",
        "reference-use": "the reference Model is subclassed, instantiated, imported or looked up by name",
        "no-custom-kernel": "no custom kernel of the back end's kind is defined",
        "kernel-not-called": "a custom kernel is defined but nothing reached from forward launches it",
        "kernel-source-unverifiable": "kernel sources the gate cannot read (assembled at run time, or built from files)",
        "dynamic-code": "code the gate cannot follow: exec/eval/compile/__import__/importlib/ctypes, computed getattr, star imports",
        "introspection": "frames, gc, inspect, globals(), sys.modules: ways to reach the grader's objects",
        "concurrency": "threads, processes or subprocesses started by the candidate",
        "global-state": "the candidate changes an imported module's state (monkeypatching, torch.backends flags, torch.set_*)",
        "forward-hijack": "what the harness calls is not ModelNew.forward (forward/__call__ replaced, hooks, metaclass)",
        "disallowed-import": "imports a module outside the policy's allow list (a library that could do the work)",
    }
)


def words(text: str) -> frozenset[str]:
    """The space-separated words of `text`, as a set (how the gate's name tables are written)."""
    return frozenset(text.split())


_ALLOCATION = "empty empty_like empty_strided zeros zeros_like ones ones_like full full_like arange tensor as_tensor Tensor"
_VIEWS = (
    "reshape flatten unflatten transpose permute squeeze unsqueeze narrow t movedim moveaxis swapaxes "
    "swapdims split chunk unbind as_strided broadcast_to view_as_real view_as_complex select"
)
_QUERIES = (
    "is_tensor is_floating_point is_complex numel device dtype Size finfo iinfo get_default_dtype "
    "promote_types result_type no_grad inference_mode enable_grad"
)
_CUDA_QUERIES = (
    "current_stream default_stream current_device device get_device_properties get_device_capability "
    "get_device_name is_available device_count synchronize"
)

QUERY_CALLS: frozenset[str] = frozenset(
    [f"torch.{name}" for name in _QUERIES.split()] + [f"torch.cuda.{name}" for name in _CUDA_QUERIES.split()]
)
"""Framework calls that answer a question (a dtype, a device, a stream) rather than make a tensor."""

ALLOWED_CALLS: frozenset[str] = (
    frozenset(f"torch.{name}" for name in f"{_ALLOCATION} {_VIEWS}".split())
    | QUERY_CALLS
    | {"torch.nn.Parameter", "torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load"}
    | {"einops.rearrange"}
)

COMPUTE_OPS: frozenset[str] = words(
    """
    abs absolute acos acosh adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d adaptive_max_pool1d
    adaptive_max_pool2d adaptive_max_pool3d add addbmm addcdiv addcmul addmm addmv addr all allclose amax amin
    aminmax any argmax argmin argsort asin asinh atan atan2 atanh avg_pool1d avg_pool2d avg_pool3d baddbmm
    batch_norm bernoulli bilinear bincount bitwise_and bitwise_not bitwise_or bitwise_xor bmm cat cdist ceil
    celu chain_matmul cholesky clamp clamp_max clamp_min clip concat concatenate conv1d conv2d conv3d
    conv_transpose1d conv_transpose2d conv_transpose3d convolution cos cosh cosine_similarity count_nonzero
    cross cross_entropy cummax cummin cumprod cumsum deg2rad diag diag_embed diff digamma dist div divide dot
    dropout dstack einsum elu embedding eq equal erf erfc erfinv exp exp2 expm1 flip fliplr flipud float_power
    floor floor_divide fmax fmin fmod frac gather gcd ge gelu ger glu group_norm gt hardshrink hardsigmoid
    hardswish hardtanh heaviside histc hstack hypot index_add index_fill index_put index_reduce index_select
    inner instance_norm interpolate inverse isclose isfinite isinf isnan kl_div kron kthvalue l1_loss
    layer_norm lcm ldexp le leaky_relu lerp lgamma linear local_response_norm log log10 log1p log2 log_softmax
    logaddexp logaddexp2 logcumsumexp logdet logical_and logical_not logical_or logical_xor logit logsigmoid
    logsumexp lt lu masked_fill masked_scatter masked_select matmul matrix_power max max_pool1d max_pool2d
    max_pool3d maximum mean median min minimum mish mm mode mse_loss mul multiply mv mvlgamma nan_to_num
    nanmean nanmedian nanquantile nansum ne neg negative nll_loss norm normalize outer pad pairwise_distance
    pdist pixel_shuffle pixel_unshuffle pow prelu prod quantile rad2deg reciprocal relu relu6 remainder renorm
    repeat repeat_interleave roll round rrelu rsqrt scaled_dot_product_attention scatter scatter_add
    scatter_reduce selu sgn sigmoid sign signbit silu sin sinc sinh slogdet smooth_l1_loss softmax softmin
    softplus softshrink softsign sort sqrt square stack std std_mean sub subtract sum svd take tan tanh
    tanhshrink tensordot threshold tile topk trace trapezoid tril triu true_divide trunc unique
    unique_consecutive upsample var var_mean vdot vstack where xlogy
    """
)

_DUNDER_OPS = words(
    "add sub mul matmul truediv floordiv mod pow neg abs and or xor lshift rshift invert lt le gt ge eq ne"
)

FRAMEWORK_NAMESPACES: tuple[str, ...] = (
    "torch", "numpy", "cupy", "cupyx", "scipy", "jax", "jaxlib", "tensorflow", "einops",
    "flash_attn", "xformers", "apex", "transformer_engine", "triton.ops",
)  # fmt: skip

OP_NAMESPACES: tuple[str, ...] = (
    "torch.nn.functional.", "torch.ops.", "torch._C.", "torch.Tensor.", "torch.special.",
    "torch.linalg.", "torch.fft.", "torch.sparse.", "torch._refs.", "torch._prims.",
)  # fmt: skip


def _table(*groups: tuple[str, str]) -> Mapping[str, str]:
    """{name: rule} from (rule, space-separated names) pairs."""
    return MappingProxyType({name: rule for rule, names in groups for name in names.split()})


FORBIDDEN_MODULES: Mapping[str, str] = _table(
    ("introspection", "gc inspect traceback __main__"),
    ("dynamic-code", "importlib runpy marshal pickle dill cloudpickle code codeop builtins ctypes cffi"),
    (
        "concurrency",
        "threading _thread multiprocessing subprocess concurrent asyncio signal torch.multiprocessing",
    ),
)

FORBIDDEN_NAMES: Mapping[str, str] = _table(
    (
        "dynamic-code",
        "builtins.exec builtins.eval builtins.compile builtins.__import__ builtins.breakpoint "
        "builtins.__builtins__ operator.attrgetter operator.methodcaller",
    ),
    (
        "introspection",
        "builtins.globals builtins.locals builtins.vars sys._getframe sys._current_frames sys.modules "
        "sys.settrace sys.setprofile",
    ),
    ("concurrency", "os.fork os.forkpty os.system os.popen os.spawn os.exec os.posix_spawn"),
)

FORBIDDEN_ATTRIBUTES: Mapping[str, str] = _table(
    (
        "introspection",
        "f_back f_globals f_locals f_code f_builtins tb_frame tb_next gi_frame cr_frame ag_frame __globals__ "
        "__code__ __closure__ __builtins__ __subclasses__ __dict__ __self__ __base__ __bases__ __loader__ __spec__",
    ),
    ("dynamic-code", "__getattribute__ __getattr__"),
)

ALLOWED_IMPORTS: tuple[str, ...] = (
    "torch", "triton", "numpy", "einops", "math", "cmath", "os", "sys", "typing", "typing_extensions", "functools",
    "itertools", "collections", "dataclasses", "textwrap", "string", "re", "enum", "abc", "numbers", "warnings",
    "__future__", "operator", "contextlib", "copy", "hashlib", "random", "time", "struct", "logging", "pathlib",
    "tempfile",
)  # fmt: skip

GLOBAL_STATE_CALLS: tuple[str, ...] = (
    "torch.set_", "torch.backends.", "torch.use_deterministic_algorithms", "torch._C._set",
    "torch.cuda.set_sync_debug_mode",
)  # fmt: skip

NATIVE_ALLOWED_CALLS: frozenset[str] = words(
    "empty empty_like empty_strided zeros zeros_like ones ones_like full full_like from_blob tensor "
    "dtype device layout requires_grad"
)
NATIVE_ALLOWED_PREFIXES: tuple[str, ...] = ("check", "is", "get")
NATIVE_ALLOWED_NAMESPACES: tuple[str, ...] = ("cuda", "indexing")
NATIVE_DENIED_NAMESPACES: tuple[str, ...] = (
    "native", "_ops", "nn", "functional", "linalg", "fft", "special", "blas", "sparse",
)  # fmt: skip
NATIVE_LIBRARIES: tuple[str, ...] = ("blas", "cudnn", "cufft", "cusparse", "cusolver", "lapack")


@dataclass(frozen=True)
class CheckPolicy:
    """What the static gate accepts. The defaults are the paper's policy (`paper()`); every set is
    explicit so a reader can see exactly what is allowed, and a run can tighten or relax one rule."""

    allowed_calls: frozenset[str] = ALLOWED_CALLS
    """Framework functions the compute path may call: allocation (empty*, zeros*, ones*, full*),
    views, shape/device/stream queries, torch.no_grad, nn.Parameter and the extension builders."""
    compute_ops: frozenset[str] = COMPUTE_OPS
    """Op names that are framework compute when called as a method on a tensor (or on an object the
    gate cannot type), when referenced as a value from a framework namespace, or when called as a
    tensor method in the C++ sources. In-place (`add_`) and dunder (`__matmul__`) forms are included."""
    framework_namespaces: tuple[str, ...] = FRAMEWORK_NAMESPACES
    """Modules whose every call in the compute path is framework compute unless `allowed_calls` has it."""
    op_namespaces: tuple[str, ...] = OP_NAMESPACES
    """Prefixes under which any name referenced as a value in the compute path is a framework op."""
    allowed_imports: tuple[str, ...] = ALLOWED_IMPORTS
    """Modules (and their submodules) a candidate may import; any other library might do the work for
    it (torchvision.ops, xformers, ...), so importing it is rule disallowed-import."""
    forbidden_modules: Mapping[str, str] = field(default_factory=lambda: FORBIDDEN_MODULES)
    """Modules a candidate may not import anywhere (prefix match), each mapped to the rule that says why."""
    forbidden_names: Mapping[str, str] = field(default_factory=lambda: FORBIDDEN_NAMES)
    """Qualified-name prefixes (builtins included) a candidate may not touch anywhere, with their rule."""
    forbidden_attributes: Mapping[str, str] = field(default_factory=lambda: FORBIDDEN_ATTRIBUTES)
    """Attribute names (frames, function internals) a candidate may not read anywhere, with their rule."""
    global_state_calls: tuple[str, ...] = GLOBAL_STATE_CALLS
    """Call prefixes that change process-wide framework state (rule global-state)."""
    native_allowed_calls: frozenset[str] = NATIVE_ALLOWED_CALLS
    """`torch::NAME(`/`at::NAME(` functions the C++ sources may call (allocation, tensor options)."""
    native_allowed_prefixes: tuple[str, ...] = NATIVE_ALLOWED_PREFIXES
    """Lower-case `torch::`/`at::` function prefixes allowed in C++ (checks and queries)."""
    native_allowed_namespaces: tuple[str, ...] = NATIVE_ALLOWED_NAMESPACES
    """`at::`/`torch::` sub-namespaces whose functions are runtime utilities (`at::cuda::getCurrentCUDAStream`)."""
    native_denied_namespaces: tuple[str, ...] = NATIVE_DENIED_NAMESPACES
    """`at::`/`torch::` sub-namespaces that are compute whatever the function (`at::native::`, `torch::nn::`)."""
    native_libraries: tuple[str, ...] = NATIVE_LIBRARIES
    """Substrings (case-insensitive) of identifiers and headers naming vendor compute libraries."""
    kernel_kinds: Mapping[str, tuple[str, ...]] = field(
        default_factory=lambda: MappingProxyType({"cuda": ("cuda",), "triton": ("triton",), "cpp": ("cpp",)})
    )
    """Per back end, the kernel kinds that satisfy no-custom-kernel and kernel-not-called."""
    reference_name: str = "Model"
    """The reference class a candidate may not use."""
    candidate_class: str = "ModelNew"
    """The class the harness instantiates; its forward is the root of the compute path."""
    kernel_on_every_path: bool = True
    """Require every way through forward to launch a custom kernel (rule fallback)."""
    allow_computed_getattr: bool = False
    """Allow getattr/setattr/delattr with a computed name (the gate cannot follow them)."""
    trust_file_sources: bool = False
    """Accept `load(sources=[files])` as a kernel even though the gate cannot read the files."""

    def __post_init__(self) -> None:
        for backend, kinds in self.kernel_kinds.items():
            if backend not in BACKENDS or not set(kinds) <= {"cuda", "cpp", "triton"}:
                raise ValueError(
                    f"kernel_kinds[{backend!r}] = {kinds!r}: back ends are {BACKENDS}, kinds cuda/cpp/triton"
                )
        for table in (self.forbidden_modules, self.forbidden_names, self.forbidden_attributes):
            unknown = set(table.values()) - set(RULES)
            if unknown:
                raise ValueError(f"unknown rule ids {sorted(unknown)}; known: {sorted(RULES)}")


def is_compute_name(name: str, policy: CheckPolicy) -> bool:
    """Whether a function or method name is framework compute under `policy`: a name in
    `compute_ops`, its in-place form (`add_`), or an arithmetic dunder (`__matmul__`, `__radd__`)."""
    ops = policy.compute_ops
    if name.startswith("__") and name.endswith("__"):
        core = name[2:-2]
        return core in _DUNDER_OPS or (core[:1] in ("r", "i") and core[1:] in _DUNDER_OPS)
    return name in ops or (name.endswith("_") and name[:-1] in ops)


def paper() -> CheckPolicy:
    """The paper's policy: no framework compute, no fallbacks, no reference, a kernel on every path."""
    return CheckPolicy()


DEFAULT_POLICY = paper()


@dataclass(frozen=True)
class Violation:
    rule: str
    """Stable rule id (see RULES)."""
    line: int
    """1-based line in the candidate source (0 when the whole file is at fault)."""
    message: str

    def to_dict(self) -> dict[str, object]:
        return {"rule": self.rule, "line": self.line, "message": self.message}


@dataclass(frozen=True)
class CheckReport:
    backend: str
    violations: tuple[Violation, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def rules(self) -> list[str]:
        return sorted({v.rule for v in self.violations})

    def to_dict(self) -> dict[str, object]:
        return {"ok": self.ok, "backend": self.backend, "violations": [v.to_dict() for v in self.violations]}

    def summary(self) -> str:
        """The report as text for a person or the model's next prompt."""
        if self.ok:
            return f"static check passed (backend {self.backend})"
        lines = [f"static check rejected the candidate (backend {self.backend}):"]
        lines += [f"  line {v.line}: [{v.rule}] {v.message}" for v in self.violations]
        return "\n".join(lines)


def check_source(source: str, backend: str = "cuda", policy: CheckPolicy | None = None) -> CheckReport:
    """Run the static gate on a candidate's source. Never raises for a bad candidate (a source that
    does not parse is a `syntax` violation); raises UsageError for an unknown back end."""
    if backend not in BACKENDS:
        raise UsageError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    policy = policy or DEFAULT_POLICY
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return CheckReport(backend, (Violation("syntax", exc.lineno or 0, f"does not parse: {exc.msg}"),))
    except (ValueError, RecursionError) as exc:
        return CheckReport(backend, (Violation("syntax", 0, f"does not parse: {exc}"),))
    from kevin.checks_python import Gate  # here, not at the top: checks_python imports this module

    try:
        found = Gate(tree, policy, backend).run()
    except RecursionError:
        found = [Violation("syntax", 0, "nested too deeply to analyse; simplify the candidate")]
    unique: dict[tuple[str, int], Violation] = {}
    for violation in found:
        unique.setdefault((violation.rule, violation.line), violation)
    return CheckReport(backend, tuple(sorted(unique.values(), key=lambda v: (v.line, v.rule))))


def check_file(path: str | Path, backend: str = "cuda", policy: CheckPolicy | None = None) -> CheckReport:
    """`check_source` on a file; UsageError when it cannot be read."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"candidate file not found: {path} (pass the path of a .py file)")
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read candidate {path}: {exc}") from exc
    return check_source(source, backend, policy)


# ---------------------------------------------------------------------------------------------------
# The command.


def register_commands(subparsers) -> None:
    parser = subparsers.add_parser(
        "check",
        help="static gate: does a candidate write its own kernel? (exit 1 when rejected)",
        description="Read a candidate (never run it) and reject framework compute, fallbacks, use of the "
        "reference, and missing or unused custom kernels. Exit 0 accepted, 1 rejected, 2 bad usage.",
    )
    parser.add_argument("candidate", metavar="CANDIDATE", help="path of the candidate source (.py)")
    parser.add_argument("--backend", choices=BACKENDS, default="cuda", help="kernel back end (default: cuda)")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.set_defaults(run=_run_check)


def _run_check(args: argparse.Namespace) -> int:
    report = check_file(args.candidate, args.backend)
    if args.json:
        print(json.dumps({"candidate": str(args.candidate), **report.to_dict()}))
    else:
        verdict = "accepted" if report.ok else "rejected"
        print(f"{args.candidate}: {verdict} (backend {report.backend})", file=sys.stdout)
        for v in report.violations:
            print(f"  line {v.line}: [{v.rule}] {v.message}")
    return 0 if report.ok else 1
