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
import builtins
import json
import re
import sys
from collections.abc import Iterator, Mapping
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


def _words(text: str) -> frozenset[str]:
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

ALLOWED_CALLS: frozenset[str] = frozenset(
    [f"torch.{name}" for name in f"{_ALLOCATION} {_VIEWS} {_QUERIES}".split()]
    + [f"torch.cuda.{name}" for name in _CUDA_QUERIES.split()]
    + ["torch.nn.Parameter", "torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load"]
    + ["einops.rearrange"]
)

COMPUTE_OPS: frozenset[str] = _words(
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

_DUNDER_OPS = _words(
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

NATIVE_ALLOWED_CALLS: frozenset[str] = _words(
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
    try:
        found = _Gate(tree, policy, backend).run()
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
# What the gate knows about torch's API shape (not policy: facts used to type values).

_LOADERS = frozenset({"torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load"})
_NON_TENSOR_METHODS = _words(
    "size dim ndimension numel nelement stride storage_offset item tolist data_ptr element_size "
    "is_contiguous is_floating_point is_complex get_device untyped_storage is_pinned type __len__"
)
_TENSOR_ATTRIBUTES = _words("T mT H mH data real imag grad")
_LAYER_TENSOR_ATTRIBUTES = _words("weight bias running_mean running_var in_proj_weight in_proj_bias")
_CONTAINER_CLASSES = _words("Sequential ModuleList ModuleDict")
_TENSOR_CLASSES = _words("Parameter Buffer ParameterList ParameterDict Tensor")
_OBJECT_FACTORIES = frozenset({"torch.compile", "torch.jit.script", "torch.jit.trace"})
_NON_TENSOR_CALLS = frozenset(f"torch.{name}" for name in _QUERIES.split()) | {
    f"torch.cuda.{name}" for name in _CUDA_QUERIES.split()
}
_TENSOR_BUILTINS = frozenset(
    f"builtins.{name}" for name in ("abs", "max", "min", "sum", "pow", "round", "divmod")
)
_MODULE_BASES = frozenset(
    {
        "torch.nn.Module",
        "torch.nn.modules.module.Module",
        "torch.autograd.Function",
        "torch.autograd.function.Function",
    }
)
_HIJACK_ATTRIBUTES = _words(
    "forward __call__ __class__ _call_impl _wrapped_call_impl __getattr__ __getattribute__ _forward_hooks "
    "_forward_pre_hooks"
)
_HIJACK_METHODS = _words("__call__ __getattribute__ __getattr__ __new__ _call_impl _wrapped_call_impl")
_HOOK_METHODS = _words(
    "register_forward_hook register_forward_pre_hook register_module_forward_hook register_module_forward_pre_hook"
)
_SITE_KINDS = {
    "cuda": "a CUDA kernel",
    "cuda-host": "cuda_sources without a launched __global__ kernel",
    "cpp": "C++ only",
    "empty": "no code",
    "unknown": "sources the gate cannot read",
}
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_TRY_NODES = tuple({ast.Try, getattr(ast, "TryStar", ast.Try)})


@dataclass(eq=False)
class _Site:
    """One load_inline/load call: what kind of kernel it builds and the sources, when readable."""

    line: int
    kind: str = "unknown"
    """cuda (a __global__ kernel and its launch), cuda-host (cuda_sources without one), cpp, empty, unknown."""
    problem: str = ""
    """Why the sources cannot be verified (rule kernel-source-unverifiable); empty when they can."""
    texts: dict[str, str] = field(default_factory=dict)
    """cpp_sources and cuda_sources, when they can be read."""
    flags: str = ""
    """extra_cflags, extra_cuda_cflags and extra_ldflags, as far as they can be read (-lcublas)."""


@dataclass(frozen=True)
class _Ref:
    """What an expression evaluates to, as far as the gate can tell.

    kind: qual (an imported name, `name` dotted), func/method (a local function; `node`), class,
    self/instance (of `cls`), super, ext (a built extension; `site`), extfunc (a function of one),
    triton (a jit kernel), launcher (`kernel[grid]`), object (a framework module or compiled function,
    calling it is framework compute), container (`items`), tensor (`name`: the framework call that
    made it, if any), tainted (holds a framework op)."""

    kind: str
    name: str = ""
    node: ast.AST | None = None
    cls: ast.ClassDef | None = None
    owner: ast.ClassDef | None = None
    items: tuple[_Ref | None, ...] = ()
    site: _Site | None = None
    skip: int = 0
    """Leading parameters not filled by call arguments (self, ctx)."""


_TENSOR = _Ref("tensor")


class _Scope:
    def __init__(self, names: dict, parent: _Scope | None = None, owner=None, self_cls=None):
        self.names, self.parent, self.owner, self.self_cls = names, parent, owner, self_cls

    def lookup(self, name: str) -> _Ref | None:
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.names:
                return scope.names[name]
            scope = scope.parent
        if hasattr(builtins, name) or name == "__builtins__":
            return _Ref("qual", f"builtins.{name}")
        return None


def _walk_local(node: ast.AST) -> Iterator[ast.AST]:
    """Descendants in source order, not entering nested functions, lambdas or classes."""
    for child in ast.iter_child_nodes(node):
        yield child
        if not isinstance(child, _SCOPES):
            yield from _walk_local(child)


def _src(node: ast.AST, limit: int = 60) -> str:
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _const_str(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _params(fn: ast.AST) -> list[str]:
    args = fn.args  # type: ignore[attr-defined]
    return [a.arg for a in args.posonlyargs + args.args]


def _decorated(fn: ast.AST, name: str) -> bool:
    return any(isinstance(d, ast.Name) and d.id == name for d in getattr(fn, "decorator_list", []))


class _Gate:
    """One analysis of one candidate. Whole-file rules first, then the compute path, then kernels."""

    def __init__(self, tree: ast.Module, policy: CheckPolicy, backend: str):
        self.tree, self.policy, self.backend = tree, policy, backend
        self.found: list[Violation] = []
        self.env: dict[str, _Ref | None] = {}
        self.module = _Scope(self.env)
        self.parents = {id(c): p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
        self.sites: dict[int, _Site] = {}
        self.strings: dict[str, list[ast.expr]] = {}
        self.memo: dict[tuple, object] = {}
        self.busy: set[tuple] = set()
        # Compute-path state, rebuilt by each pass of _compute_path.
        self.keys: dict[tuple, tuple] = {}
        self.params: dict[tuple, dict[str, _Ref | None]] = {}
        self.kernel_calls: dict[int, str] = {}
        self.call_targets: dict[int, list[tuple]] = {}
        self.scanned: set[tuple] = set()
        self.queue: list[tuple] = []
        self.changed = False

    def add(self, rule: str, node: ast.AST | None, message: str, sink: list | None = None) -> None:
        line = getattr(node, "lineno", 0) if node is not None else 0
        (self.found if sink is None else sink).append(Violation(rule, line, message))

    # -- the whole analysis ------------------------------------------------------------------------

    def run(self) -> list[Violation]:
        self.strings = self._strings_of(self.tree)
        self._bind_block(self.tree.body, self.module)
        self._bind_globals()
        self._collect_sites()
        self._file_rules()
        candidate = self._candidate()
        launched: set[str] | None = None
        if candidate is None:
            self.add(
                "missing-model-new", None, f"no class {self.policy.candidate_class}; define it with a forward"
            )
        else:
            launched = self._check_forward(candidate)
        self._check_kernels(candidate, launched)
        return self.found

    def _candidate(self) -> ast.ClassDef | None:
        ref = self.env.get(self.policy.candidate_class)
        return ref.cls if ref is not None and ref.kind == "class" else None

    def _check_forward(self, cls: ast.ClassDef) -> set[str] | None:
        """Scan the compute path; the kinds of kernel it launches, or None when there is no forward."""
        forward = self._member(cls, "forward", bound=True)
        if forward is None:
            self.add("missing-model-new", cls, f"class {cls.name} has no forward method")
            return None
        if forward.kind == "object":
            self.add(
                "framework-compute", cls, f"{cls.name} inherits forward from `{forward.name}`; write your own"
            )
            return None
        if forward.kind not in ("func", "method") or not isinstance(forward.node, _FUNCTIONS):
            self.add(
                "forward-hijack", cls, f"{cls.name}.forward is bound to something the gate cannot follow"
            )
            return None
        sink = self._compute_path(forward, cls)
        self.found.extend(sink)
        accepted = self.policy.kernel_kinds.get(self.backend, ())
        launched = set(self.kernel_calls.values())
        if self.policy.kernel_on_every_path and launched & set(accepted):
            self._check_paths(forward.node)
        return launched

    # -- binding names -----------------------------------------------------------------------------

    def _bind_block(self, body: list[ast.stmt], scope: _Scope) -> None:
        """Module level (and blocks in it, such as `try: import triton`), in source order."""
        for st in body:
            if isinstance(st, (ast.Import, ast.ImportFrom)):
                self._bind_import(st, scope.names)
            elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                scope.names[st.name] = _Ref("triton" if self._is_jit(st) else "func", node=st)
            elif isinstance(st, ast.ClassDef):
                scope.names[st.name] = _Ref("class", cls=st)
            elif isinstance(st, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                self._bind_assign(st, scope)
            else:
                for name in ("body", "orelse", "finalbody"):
                    self._bind_block(getattr(st, name, None) or [], scope)
                for handler in getattr(st, "handlers", None) or []:
                    self._bind_block(handler.body, scope)

    def _bind_import(self, st: ast.Import | ast.ImportFrom, names: dict) -> None:
        if isinstance(st, ast.Import):
            for alias in st.names:
                if alias.asname:
                    names[alias.asname] = _Ref("qual", alias.name)
                else:
                    top = alias.name.split(".")[0]
                    names[top] = _Ref("qual", top)
            return
        module = "." * st.level + (st.module or "")
        for alias in st.names:
            if alias.name != "*":
                names[alias.asname or alias.name] = _Ref(
                    "qual", f"{module}.{alias.name}" if module else alias.name
                )

    def _bind_globals(self) -> None:
        """`global X; X = load_inline(...)` inside a function binds the module's X too (lazy builds)."""
        for fn in ast.walk(self.tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            declared = {n for st in _walk_local(fn) if isinstance(st, ast.Global) for n in st.names}
            for st in _walk_local(fn):
                if isinstance(st, ast.Assign) and declared:
                    for target in st.targets:
                        if isinstance(target, ast.Name) and target.id in declared:
                            self.env[target.id] = self._merge(
                                self.env.get(target.id), self.ref(st.value, self.module)
                            )

    def _bind_assign(self, st: ast.AST, scope: _Scope) -> None:
        value = getattr(st, "value", None)
        if value is None:
            return
        ref = self.ref(value, scope)
        if isinstance(st, ast.AugAssign):
            if isinstance(st.target, ast.Name):
                old = scope.names.get(st.target.id)
                tensor = (old is not None and old.kind == "tensor") or (
                    ref is not None and ref.kind == "tensor"
                )
                scope.names[st.target.id] = _TENSOR if tensor else old
            return
        for target in st.targets if isinstance(st, ast.Assign) else [st.target]:
            self._bind_target(target, value, ref, scope)

    def _bind_target(self, target: ast.AST, value: ast.AST | None, ref: _Ref | None, scope: _Scope) -> None:
        if isinstance(target, ast.Name):
            scope.names[target.id] = self._merge(scope.names.get(target.id), ref)
        elif isinstance(target, ast.Starred):
            self._bind_target(target.value, None, ref, scope)
        elif isinstance(target, (ast.Tuple, ast.List)):
            pairs = isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts)
            for i, element in enumerate(target.elts):
                if pairs:
                    self._bind_target(element, value.elts[i], self.ref(value.elts[i], scope), scope)
                else:
                    self._bind_target(element, None, self._item(ref), scope)
        elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and ref is not None:
            old = scope.lookup(target.value.id)
            if old is None or old.kind == "container":
                items = (old.items if old is not None else ()) + (ref,)
                scope.names[target.value.id] = _Ref("container", items=items)

    def _bind_loop(self, target: ast.AST, iterable: ast.AST, scope: _Scope) -> None:
        if isinstance(iterable, ast.Call) and isinstance(target, (ast.Tuple, ast.List)):
            func = self.ref(iterable.func, scope)
            name = func.name if func is not None and func.kind == "qual" else ""
            if name == "builtins.enumerate" and len(target.elts) == 2 and iterable.args:
                self._bind_target(target.elts[0], None, None, scope)
                self._bind_target(target.elts[1], None, self._item(self.ref(iterable.args[0], scope)), scope)
                return
            if name == "builtins.zip":
                for element, arg in zip(target.elts, iterable.args):
                    self._bind_target(element, None, self._item(self.ref(arg, scope)), scope)
                return
        self._bind_target(target, None, self._item(self.ref(iterable, scope)), scope)

    def _bind_growth(self, call: ast.Call, scope: _Scope) -> None:
        """`layers.append(nn.Linear(...))` and friends: the list now holds what was added."""
        func = call.func
        if not isinstance(func, ast.Attribute) or not isinstance(func.value, ast.Name):
            return
        if func.attr not in ("append", "extend", "insert", "add"):
            return
        added, old = self.ref(call.args[-1], scope), scope.lookup(func.value.id)
        if added is None or (old is not None and old.kind != "container"):
            return
        new = added.items if added.kind == "container" and func.attr == "extend" else (added,)
        old_items = old.items if old is not None else ()
        scope.names[func.value.id] = _Ref("container", old.name if old else "", items=old_items + new)

    def _scope_for(self, fn: ast.AST, owner, self_cls, params: Mapping[str, _Ref | None]) -> _Scope:
        names: dict[str, _Ref | None] = {}
        scope = _Scope(names, self.module, owner, self_cls)
        args = fn.args  # type: ignore[attr-defined]
        every = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
        every += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
        names.update(dict.fromkeys(every))
        positional = _params(fn)
        if owner is not None and positional and not _decorated(fn, "staticmethod"):
            kind = "class" if _decorated(fn, "classmethod") else "self"
            names[positional[0]] = _Ref(kind, cls=self_cls)
        names.update(params)
        defaults = list(zip(reversed(args.posonlyargs + args.args), reversed(args.defaults)))
        defaults += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
        for arg, default in defaults:  # `def forward(self, x, act=torch.relu)`: act holds torch.relu
            names[arg.arg] = self._merge(names.get(arg.arg), self.ref(default, self.module))
        if isinstance(fn, ast.Lambda):
            return scope
        declared: set[str] = set()
        for _ in range(2):  # twice, so a name bound late but used early is still typed
            for node in _walk_local(fn):
                if isinstance(node, (ast.Global, ast.Nonlocal)):
                    declared.update(node.names)
                    for name in node.names:
                        names.pop(name, None)
                elif isinstance(node, (ast.Import, ast.ImportFrom)):
                    self._bind_import(node, names)
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names[node.name] = _Ref("triton" if self._is_jit(node) else "func", node=node)
                elif isinstance(node, ast.ClassDef):
                    names[node.name] = _Ref("class", cls=node)
                elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    if not any(isinstance(t, ast.Name) and t.id in declared for t in targets):
                        self._bind_assign(node, scope)
                elif isinstance(node, ast.NamedExpr):
                    self._bind_target(node.target, node.value, self.ref(node.value, scope), scope)
                elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                    self._bind_loop(node.target, node.iter, scope)
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
                    self._bind_growth(node, scope)
                elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                    self._bind_target(node.optional_vars, None, self.ref(node.context_expr, scope), scope)
        return scope

    # -- what an expression is ---------------------------------------------------------------------

    def _framework(self, qual: str) -> bool:
        return any(qual == ns or qual.startswith(ns + ".") for ns in self.policy.framework_namespaces)

    def _is_compute_name(self, name: str) -> bool:
        ops = self.policy.compute_ops
        if name.startswith("__") and name.endswith("__"):
            core = name[2:-2]
            return core in _DUNDER_OPS or (core[:1] in ("r", "i") and core[1:] in _DUNDER_OPS)
        return name in ops or (name.endswith("_") and name[:-1] in ops)

    def _is_op(self, qual: str) -> bool:
        """A framework function that computes, referenced by its qualified name."""
        if not self._framework(qual):
            return False
        return qual.startswith(self.policy.op_namespaces) or self._is_compute_name(qual.rsplit(".", 1)[-1])

    def _rank(self, ref: _Ref | None) -> int:
        if ref is None:
            return 0
        if ref.kind in ("object", "tainted") or (ref.kind == "qual" and self._is_op(ref.name)):
            return 4
        if ref.kind == "container":
            return max((self._rank(item) for item in ref.items), default=1)
        if ref.kind in ("ext", "extfunc", "launcher", "triton"):
            return 3
        return 1 if ref.kind == "qual" else 2

    def _merge(self, old: _Ref | None, new: _Ref | None) -> _Ref | None:
        """A name bound twice keeps the more telling binding: a framework op beats a kernel beats a value."""
        return new if self._rank(new) > self._rank(old) else old

    def _tensor(self, node: ast.AST, scope: _Scope) -> bool:
        ref = self.ref(node, scope)
        return ref is not None and ref.kind == "tensor"

    def _item(self, ref: _Ref | None) -> _Ref | None:
        """An element of ref (subscript or iteration)."""
        if ref is None:
            return None
        if ref.kind in ("container", "tensor", "object", "tainted"):
            return ref
        if ref.kind == "triton":
            return _Ref("launcher", node=ref.node)
        return None

    def ref(self, node: ast.AST | None, scope: _Scope, depth: int = 0) -> _Ref | None:
        if node is None or depth > 60:
            return None
        deeper = depth + 1
        if isinstance(node, ast.Name):
            return scope.lookup(node.id)
        if isinstance(node, ast.Attribute):
            return self._attr(self.ref(node.value, scope, deeper), node.attr)
        if isinstance(node, ast.Subscript):
            return self._item(self.ref(node.value, scope, deeper))
        if isinstance(node, ast.Call):
            return self._call_ref(node, scope, deeper)
        if isinstance(node, ast.BinOp):
            sides = (self.ref(node.left, scope, deeper), self.ref(node.right, scope, deeper))
            tensor = isinstance(node.op, ast.MatMult) or any(
                s is not None and s.kind == "tensor" for s in sides
            )
            return _TENSOR if tensor else None
        if isinstance(node, ast.UnaryOp):
            operand = self.ref(node.operand, scope, deeper)
            return (
                _TENSOR
                if operand is not None and operand.kind == "tensor" and not isinstance(node.op, ast.Not)
                else None
            )
        if isinstance(node, ast.Compare):
            if all(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in node.ops):
                return None
            return _TENSOR if any(self._tensor(n, scope) for n in [node.left, *node.comparators]) else None
        if isinstance(node, (ast.IfExp, ast.BoolOp)):
            parts = [node.body, node.orelse] if isinstance(node, ast.IfExp) else node.values
            result = None
            for part in parts:
                result = self._merge(result, self.ref(part, scope, deeper))
            return result
        if isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict)):
            elements = node.values if isinstance(node, ast.Dict) else node.elts
            items = tuple(self.ref(e, scope, deeper) for e in elements)
            return _Ref("container", items=items) if any(i is not None for i in items) else None
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            element = self.ref(node.value if isinstance(node, ast.DictComp) else node.elt, scope, deeper)
            return _Ref("container", items=(element,)) if element is not None else None
        if isinstance(node, ast.Lambda):
            return _Ref("func", node=node)
        if isinstance(node, (ast.NamedExpr, ast.Starred, ast.Await)):
            return self.ref(node.value, scope, deeper)
        return None

    def _attr(self, ref: _Ref | None, attr: str) -> _Ref | None:
        if ref is None:
            return None
        kind = ref.kind
        if kind == "qual":
            return _Ref("qual", f"{ref.name}.{attr}")
        if kind == "ext":
            return _Ref("extfunc", attr, site=ref.site)
        if kind in ("self", "instance"):
            return self._member(ref.cls, attr, bound=True)
        if kind == "super":
            return self._member(ref.cls, attr, bound=True, after=ref.owner)
        if kind == "class":
            if attr == "apply" and self._is_autograd(ref.cls):
                forward = self._member(ref.cls, "forward", bound=False)
                if forward is not None and forward.kind == "method":
                    return _Ref("method", "apply", node=forward.node, owner=forward.owner, skip=1)
            return self._member(ref.cls, attr, bound=False)
        if kind == "object":
            if attr in _LAYER_TENSOR_ATTRIBUTES or attr.endswith(("_weight", "_bias")):
                return _TENSOR
            return _Ref("object", f"{ref.name}.{attr}")
        if kind == "tensor":
            return _TENSOR if attr in _TENSOR_ATTRIBUTES else None
        return ref if kind == "tainted" else None

    def _call_ref(self, node: ast.Call, scope: _Scope, depth: int) -> _Ref | None:
        func = self.ref(node.func, scope, depth)
        if func is None:
            if isinstance(node.func, ast.Attribute):
                receiver = self.ref(node.func.value, scope, depth)
                if receiver is not None and receiver.kind == "tensor":
                    return None if node.func.attr in _NON_TENSOR_METHODS else _TENSOR
            return self._taint(node, scope)
        kind = func.kind
        if kind == "qual":
            qual, args = func.name, node.args
            lookup = qual == "builtins.getattr" or qual.endswith((".__getattribute__", ".__getattr__"))
            if lookup and len(args) >= 2 and _const_str(args[1]) is not None:
                return self._attr(self.ref(args[0], scope, depth), _const_str(args[1]) or "")
            if qual == "builtins.super":
                return _Ref("super", cls=scope.self_cls, owner=scope.owner)
            if qual in _LOADERS:
                if id(node) not in self.sites:
                    self.sites[id(node)] = self._make_site(node, qual, [self.strings])
                return _Ref("ext", site=self.sites[id(node)])
            if args and qual in ("functools.partial", "builtins.list", "builtins.tuple", "builtins.iter"):
                return self.ref(args[0], scope, depth)
            if qual in _TENSOR_BUILTINS:
                return _TENSOR if any(self._tensor(a, scope) for a in args) else None
            if self._framework(qual):
                last = qual.rsplit(".", 1)[-1]
                if last in _CONTAINER_CLASSES:
                    return _Ref("container", qual, items=self._elements(node, scope))
                if last in _TENSOR_CLASSES:
                    return _TENSOR
                if last[:1].isupper() or qual in _OBJECT_FACTORIES:
                    return _Ref("object", qual)
                return (
                    _Ref("tensor", qual)
                    if qual.startswith("torch") and qual not in _NON_TENSOR_CALLS
                    else None
                )
            return self._taint(node, scope)
        if kind in ("func", "method") and isinstance(func.node, _FUNCTIONS):
            return self._returns(func.node, func.owner, func.cls)
        if kind == "class":
            return _Ref("instance", cls=func.cls)
        if kind in ("extfunc", "object", "tainted", "instance", "container"):
            return _TENSOR
        return None

    def _elements(self, node: ast.Call, scope: _Scope) -> tuple[_Ref | None, ...]:
        items: list[_Ref | None] = []
        for arg in node.args:
            ref = self.ref(arg, scope)
            items.extend(ref.items if ref is not None and ref.kind == "container" else [ref])
        return tuple(items)

    def _taint(self, node: ast.AST, scope: _Scope) -> _Ref | None:
        """An unknown call that is handed a framework op as a value (`Wrapper(torch.matmul)`) holds it."""
        callees = {id(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)}
        for sub in ast.walk(node):
            if isinstance(sub, (ast.Name, ast.Attribute)) and id(sub) not in callees:
                ref = self.ref(sub, scope)
                if ref is not None and ref.kind == "qual" and self._is_op(ref.name):
                    return _Ref("tainted", ref.name)
        return None

    def _returns(self, fn: ast.AST, owner, self_cls) -> _Ref | None:
        key = ("returns", id(fn), id(owner), id(self_cls))
        if key in self.memo:
            return self.memo[key]  # type: ignore[return-value]
        if key in self.busy:
            return None
        self.busy.add(key)
        scope = self._scope_for(fn, owner, self_cls, {})
        result = None
        if isinstance(fn, ast.Lambda):
            result = self.ref(fn.body, scope)
        else:
            for node in _walk_local(fn):
                if isinstance(node, ast.Return) and node.value is not None:
                    result = self._merge(result, self.ref(node.value, scope))
        self.busy.discard(key)
        self.memo[key] = result
        return result

    # -- classes -----------------------------------------------------------------------------------

    def _mro(self, cls: ast.ClassDef) -> list[ast.ClassDef]:
        order: list[ast.ClassDef] = []

        def visit(c: ast.ClassDef) -> None:
            if any(c is seen for seen in order):
                return
            order.append(c)
            for base in c.bases:
                ref = self.ref(base, self.module)
                if ref is not None and ref.kind == "class" and ref.cls is not None:
                    visit(ref.cls)

        visit(cls)
        return order

    def _framework_base(self, cls: ast.ClassDef) -> str | None:
        """The first framework base other than nn.Module/autograd.Function (nn.Linear, ...), if any."""
        for c in self._mro(cls):
            for base in c.bases:
                ref = self.ref(base, self.module)
                if (
                    ref is not None
                    and ref.kind == "qual"
                    and self._framework(ref.name)
                    and ref.name not in _MODULE_BASES
                ):
                    return ref.name
        return None

    def _is_autograd(self, cls: ast.ClassDef | None) -> bool:
        if cls is None:
            return False
        for c in self._mro(cls):
            for base in c.bases:
                ref = self.ref(base, self.module)
                if (
                    ref is not None
                    and ref.kind == "qual"
                    and ref.name.endswith(("autograd.Function", "function.Function"))
                ):
                    return True
        return False

    def _methods(self, cls: ast.ClassDef) -> dict[str, object]:
        key = ("methods", id(cls))
        if key not in self.memo:
            table: dict[str, object] = {}
            for st in cls.body:
                if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    table[st.name] = st
                elif isinstance(st, (ast.Assign, ast.AnnAssign)) and st.value is not None:
                    for target in st.targets if isinstance(st, ast.Assign) else [st.target]:
                        if isinstance(target, ast.Name):
                            table[target.id] = self.ref(st.value, self.module)
            self.memo[key] = table
        return self.memo[key]  # type: ignore[return-value]

    def _attributes(self, cls: ast.ClassDef) -> dict[str, _Ref | None]:
        """`self.X = ...` (and register_buffer/register_parameter) over every method of cls and its bases."""
        key = ("attributes", id(cls))
        if key in self.memo:
            return self.memo[key]  # type: ignore[return-value]
        table: dict[str, _Ref | None] = {}
        self.memo[key] = table
        for c in reversed(self._mro(cls)):
            for method in c.body:
                if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) or not _params(method):
                    continue
                scope = self._scope_for(method, c, cls, {})
                me = _params(method)[0]
                for node in ast.walk(method):
                    pairs: list[tuple[str, _Ref | None]] = []
                    if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                        for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                            if (
                                isinstance(target, ast.Attribute)
                                and isinstance(target.value, ast.Name)
                                and target.value.id == me
                            ):
                                pairs.append((target.attr, self.ref(node.value, scope)))
                    elif isinstance(node, ast.Call) and len(node.args) >= 2 and _const_str(node.args[0]):
                        func = node.func
                        if (
                            isinstance(func, ast.Attribute)
                            and isinstance(func.value, ast.Name)
                            and func.value.id == me
                        ):
                            if func.attr in ("register_buffer", "register_parameter"):
                                pairs.append((_const_str(node.args[0]) or "", _TENSOR))
                    for name, ref in pairs:
                        table[name] = self._merge(table.get(name), ref)
        return table

    def _member(
        self, cls: ast.ClassDef | None, attr: str, bound: bool, after: ast.ClassDef | None = None
    ) -> _Ref | None:
        if cls is None:
            return None
        order = self._mro(cls)
        if after is not None:
            position = next((i for i, c in enumerate(order) if c is after), 0)
            order = order[position + 1 :]
        for c in order:
            member = self._methods(c).get(attr)
            if isinstance(member, _FUNCTIONS):
                skip = 1 if bound and not _decorated(member, "staticmethod") else 0
                return _Ref("method", attr, node=member, cls=cls, owner=c, skip=skip)
            if member is not None:
                return member  # type: ignore[return-value]
        if after is None:
            attributes = self._attributes(cls)
            if attr in attributes:
                return attributes[attr]
        base = self._framework_base(after if after is not None else cls)
        if base is not None:
            return _TENSOR if attr in _LAYER_TENSOR_ATTRIBUTES else _Ref("object", f"{base}.{attr}")
        return None

    # -- kernels -----------------------------------------------------------------------------------

    def _is_jit(self, fn: ast.AST) -> bool:
        for decorator in getattr(fn, "decorator_list", []):
            ref = self.ref(decorator.func if isinstance(decorator, ast.Call) else decorator, self.module)
            if (
                ref is not None
                and ref.kind == "qual"
                and ref.name.startswith("triton")
                and ref.name.endswith(".jit")
            ):
                return True
        return False

    def _strings_of(self, owner: ast.AST) -> dict[str, list[ast.expr]]:
        strings: dict[str, list[ast.expr]] = {}
        for node in _walk_local(owner):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        strings[target.id] = [node.value]
            elif (
                isinstance(node, ast.AugAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(node.op, ast.Add)
            ):
                strings.setdefault(node.target.id, []).append(node.value)
        return strings

    def _collect_sites(self) -> None:
        """Every load_inline/load call, with the strings of its enclosing functions in reach. Sites
        already made while binding names are updated in place, so references to them stay valid."""

        def visit(node: ast.AST, stack: list[dict]) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    visit(child, [self._strings_of(child), *stack])
                    continue
                if isinstance(child, ast.Call):
                    ref = self.ref(child.func, self.module)
                    qual = ref.name if ref is not None and ref.kind == "qual" else ""
                    tail = (
                        child.func.attr
                        if isinstance(child.func, ast.Attribute)
                        else getattr(child.func, "id", "")
                    )
                    if qual in _LOADERS or (ref is None and tail == "load_inline"):
                        site = self._make_site(child, qual or "load_inline", stack)
                        vars(self.sites.setdefault(id(child), site)).update(vars(site))
                visit(child, stack)

        visit(self.tree, [self.strings])

    def _make_site(self, call: ast.Call, loader: str, stack: list[dict]) -> _Site:
        site = _Site(line=call.lineno)

        def argument(name: str, position: int) -> ast.expr | None:
            for keyword in call.keywords:
                if keyword.arg == name:
                    return keyword.value
            return call.args[position] if len(call.args) > position else None

        if loader.endswith(".load"):
            if self.policy.trust_file_sources:
                site.kind = "cuda" if ".cu" in (self._text(argument("sources", 1), stack) or "") else "cpp"
            else:
                site.problem = (
                    "`load` builds from files the gate cannot read; pass the sources to load_inline"
                )
            return site
        texts = {}
        for label, position in (("cpp_sources", 1), ("cuda_sources", 2)):
            node = argument(label, position)
            texts[label] = "" if node is None else self._text(node, stack)
        unread = [label for label, text in texts.items() if text is None]
        if unread:
            site.problem = (
                f"{' and '.join(unread)} cannot be read statically; build them from string literals"
            )
            return site
        site.texts = texts  # type: ignore[assignment]
        flags = [
            self._text(argument(name, 99), stack)
            for name in ("extra_cflags", "extra_cuda_cflags", "extra_ldflags")
        ]
        site.flags = " ".join(f for f in flags if f)
        paths = [
            m.group(1)
            for text in texts.values()
            for m in _INCLUDE.finditer(_strip_cpp(text or "", keep_strings=True))
        ]
        outside = [p for p in paths if p.startswith("/") or ".." in p]
        if (
            outside
            or argument("extra_include_paths", 99) is not None
            or _NATIVE_INCLUDE_FLAGS.search(site.flags)
        ):
            site.problem = (
                "sources include files the gate cannot read (absolute or parent paths, include flags)"
            )
        cuda = _strip_cpp(texts["cuda_sources"] or "")
        if cuda.strip():
            launches = "<<<" in cuda or "cudaLaunch" in cuda
            site.kind = "cuda" if "__global__" in cuda and launches else "cuda-host"
        else:
            site.kind = "cpp" if _strip_cpp(texts["cpp_sources"] or "").strip() else "empty"
        return site

    def _text(self, node: ast.AST | None, stack: list[dict], depth: int = 0) -> str | None:
        """The string an expression builds from literals, names bound to literals, +, f-strings,
        .format/.join/.strip/.replace and textwrap.dedent; None when it depends on run time."""
        if node is None or depth > 30:
            return None
        deeper = depth + 1
        if isinstance(node, ast.Constant):
            if node.value is None:
                return ""
            return str(node.value) if isinstance(node.value, (str, int, float, bool)) else None
        if isinstance(node, ast.JoinedStr):
            parts = []
            for value in node.values:
                if isinstance(value, ast.FormattedValue):
                    text = self._text(value.value, stack, deeper)
                    if text is None:  # a number or a name: fine unless a call computes it
                        if any(isinstance(n, ast.Call) for n in ast.walk(value.value)):
                            return None
                        text = "0"
                    parts.append(text)
                else:
                    parts.append(self._text(value, stack, deeper) or "")
            return "".join(parts)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
            left = self._text(node.left, stack, deeper)
            if isinstance(node.op, ast.Mod):  # "...%s..." % args: the template, then what fills it
                return self._filled(left, [node.right], stack, deeper)
            right = self._text(node.right, stack, deeper)
            return None if left is None or right is None else left + right
        if isinstance(node, ast.Name):
            for strings in stack:
                if node.id in strings:
                    pieces = [self._text(e, stack, deeper) for e in strings[node.id]]
                    return None if any(p is None for p in pieces) else "".join(pieces)  # type: ignore[arg-type]
            return None
        if isinstance(node, (ast.List, ast.Tuple)):
            pieces = [self._text(e, stack, deeper) for e in node.elts]
            return None if any(p is None for p in pieces) else "\n".join(pieces)  # type: ignore[arg-type]
        if isinstance(node, ast.Call):
            func = node.func
            ref = self.ref(func, self.module)
            if ref is not None and ref.kind == "qual" and ref.name in ("textwrap.dedent", "inspect.cleandoc"):
                return self._text(node.args[0], stack, deeper) if node.args else None
            if isinstance(func, ast.Attribute):
                base = self._text(func.value, stack, deeper)
                if base is None:
                    return None
                if func.attr == "format":
                    return self._filled(base, [*node.args, *(k.value for k in node.keywords)], stack, deeper)
                if func.attr in ("strip", "lstrip", "rstrip"):
                    return base
                if func.attr == "join" and node.args:
                    pieces = self._text(node.args[0], stack, deeper)
                    return None if pieces is None else base.join(pieces.split("\n"))
                constants = [_const_str(a) for a in node.args]
                if func.attr == "replace" and len(constants) == 2 and None not in constants:
                    return base.replace(constants[0] or "", constants[1] or "")
        return None

    def _filled(
        self, template: str | None, values: list[ast.expr], stack: list[dict], depth: int
    ) -> str | None:
        """A formatted template, read as the template followed by each value's text (what is pasted
        in is scanned too); None when a value is computed at run time."""
        if template is None:
            return None
        texts = []
        for value in values:
            if isinstance(value, (ast.Tuple, ast.Dict)):
                texts.append(
                    self._filled(
                        "", [v for v in getattr(value, "elts", None) or value.values if v], stack, depth
                    )
                )  # type: ignore[union-attr]
                continue
            text = self._text(value, stack, depth)
            if text is None and any(isinstance(n, ast.Call) for n in ast.walk(value)):
                return None
            texts.append(text or "")
        return None if None in texts else "\n".join([template, *texts])  # type: ignore[list-item]

    def _check_kernels(self, candidate: ast.ClassDef | None, launched: set[str] | None) -> None:
        accepted = set(self.policy.kernel_kinds.get(self.backend, ()))
        unknown = False
        for site in self.sites.values():
            unknown = unknown or site.kind == "unknown"
            if site.problem:
                self.add("kernel-source-unverifiable", _Line(site.line), site.problem)
            problems = [
                f"{label} line {line}: {message}"
                for label, text in site.texts.items()
                for line, message in self._native(text)
            ]
            problems += [
                f"build flags link `{m.group(0)}`, a vendor compute library"
                for m in self._libraries().finditer(site.flags)
            ]
            if problems:
                more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
                self.add("native-framework-compute", _Line(site.line), "; ".join(problems[:3]) + more)
        jit = [
            n
            for n in ast.walk(self.tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and self._is_jit(n)
        ]
        defined = [s.line for s in self.sites.values() if s.kind in accepted]
        defined += [n.lineno for n in jit] if "triton" in accepted else []
        if not defined:
            if not unknown:
                self.add("no-custom-kernel", candidate, self._missing_kernel_message(accepted))
            return
        if (
            launched is not None
            and candidate is not None
            and not launched & accepted
            and not (unknown and launched)
        ):
            forward = self._member(candidate, "forward", bound=True)
            where = forward.node if forward is not None and forward.node is not None else candidate
            lines = ", ".join(str(n) for n in sorted(defined))
            self.add(
                "kernel-not-called",
                where,
                f"the custom kernel built at line {lines} is never launched from forward or what it calls",
            )

    def _missing_kernel_message(self, accepted: set[str]) -> str:
        kinds = sorted({_SITE_KINDS.get(s.kind, s.kind) for s in self.sites.values()})
        if "triton" in accepted:
            need = "a @triton.jit kernel launched from forward as kernel[grid](...)"
        elif "cuda" in accepted:
            need = "load_inline(cuda_sources=...) with a __global__ kernel that the host code launches (<<<...>>>)"
        else:
            need = "load_inline(cpp_sources=...) with the C++ code forward calls"
        found = f" (the extensions here build {', '.join(kinds)})" if kinds else ""
        return f"no custom kernel for the {self.backend} back end; write {need}{found}"

    def _libraries(self) -> re.Pattern:
        return re.compile(
            r"\b\w*(?:" + "|".join(map(re.escape, self.policy.native_libraries)) + r")\w*", re.I
        )

    def _native(self, text: str) -> list[tuple[int, str]]:
        """ATen compute and vendor libraries in C++/CUDA source, read lexically."""
        policy, problems = self.policy, []
        code = _strip_cpp(text)
        libraries = self._libraries()
        seen: set[str] = set()

        def report(position: int, source: str, message: str) -> None:
            if message not in seen:
                seen.add(message)
                problems.append((source.count("\n", 0, position) + 1, message))

        for match in _NATIVE_ESCAPE.finditer(code):
            report(
                match.start(),
                code,
                f"calls `{' '.join(match.group(0).split())}`: Python or a loaded library does the work",
            )
        with_strings = _strip_cpp(text, keep_strings=True)
        for match in _INCLUDE.finditer(with_strings):
            if libraries.search(match.group(1)):
                report(match.start(), with_strings, f"includes <{match.group(1)}>, a vendor compute library")
        for match in libraries.finditer(code):
            report(match.start(), code, f"uses `{match.group(0)}` from a vendor compute library")
        for match in _NATIVE_NAME.finditer(code):  # torch::X, at::ns::X: calls, macros, function pointers
            parts = [p.strip() for p in match.group(2).split("::") if p.strip()]
            name, spaces = parts[-1], parts[:-1]
            denied = any(s in policy.native_denied_namespaces for s in spaces) or self._is_compute_name(
                _native_core(name)
            )
            if not denied and match.group(3):
                utility = bool(spaces) and spaces[0] in policy.native_allowed_namespaces
                plain = name in policy.native_allowed_calls or name.startswith(policy.native_allowed_prefixes)
                denied = not (utility or plain or name[:1].isupper())
            if denied:
                qualified = "::".join([match.group(1), *parts])
                report(match.start(), code, f"uses `{qualified}`, an ATen op; compute it in your own code")
        for match in _NATIVE_USING.finditer(code):
            target = "".join((match.group(1) or match.group(2) or match.group(3)).split())
            if target.split("::")[0] in ("torch", "at", "aten") and target not in _NATIVE_OPEN_NAMESPACES:
                report(
                    match.start(),
                    code,
                    f"`{' '.join(match.group(0).split())}` hides which calls are ATen ops; qualify them",
                )
        for match in _NATIVE_METHOD.finditer(code):
            name = match.group(1)
            if self._is_compute_name(_native_core(name)) and name not in ("all", "any"):
                report(
                    match.start(), code, f"calls the tensor op `.{name}(...)`; compute it in your own code"
                )
        return problems

    # -- whole-file rules --------------------------------------------------------------------------

    def _file_rules(self) -> None:
        policy, reference = self.policy, self.policy.reference_name
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self._forbidden_module(alias.name, node)
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                if node.level == 0:
                    self._forbidden_module(module, node)
                else:
                    self.add("disallowed-import", node, "relative imports reach files outside the candidate")
                for alias in node.names:
                    if alias.name == "*":
                        self.add("dynamic-code", node, f"`from {module} import *` hides which names it binds")
                    elif alias.name == reference:
                        self.add(
                            "reference-use",
                            node,
                            f"imports the reference `{reference}` from `{module or '.'}`",
                        )
                    elif node.level == 0:
                        self._forbidden_module(f"{module}.{alias.name}", node)
                        self._forbidden_name(f"{module}.{alias.name}", node)
            elif isinstance(node, ast.Name):
                if node.id == reference and not self._inside_class(node, reference):
                    self.add("reference-use", node, self._reference_message(node))
                elif isinstance(node.ctx, ast.Load):
                    ref = self.module.lookup(node.id)
                    if ref is not None and ref.kind == "qual":
                        self._forbidden_name(ref.name, node)
                elif node.id == policy.candidate_class and self._module_level(node):
                    self.add(
                        "forward-hijack",
                        node,
                        f"{policy.candidate_class} is rebound after its class definition",
                    )
            elif isinstance(node, ast.Attribute):
                self._attribute_rules(node)
            elif isinstance(node, ast.Call):
                self._call_rules(node)
            elif isinstance(node, ast.Subscript) and _const_str(node.slice) == reference:
                self.add("reference-use", node, f"looks up the reference `{reference}` by name")
        candidate = self._candidate()
        for cls in self._mro(candidate) if candidate is not None else []:  # ModelNew and its local bases
            if cls.decorator_list or cls.keywords:
                self.add(
                    "forward-hijack",
                    cls,
                    f"class decorators or a metaclass on {cls.name} can replace forward",
                )
            for st in cls.body:
                names = [st.name] if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
                if isinstance(st, ast.Assign):
                    names = [t.id for t in st.targets if isinstance(t, ast.Name)]
                for name in set(names) & _HIJACK_METHODS:
                    self.add(
                        "forward-hijack", st, f"{cls.name} defines `{name}`, so forward may not be what runs"
                    )

    def _inside_class(self, node: ast.AST, name: str) -> bool:
        """Within the body of a local class of that name (a copy of the reference naming itself in
        `super(Model, self)` is not a use of the reference; using the copy elsewhere is)."""
        parent = self.parents.get(id(node))
        while parent is not None:
            if isinstance(parent, ast.ClassDef) and parent.name == name:
                return True
            parent = self.parents.get(id(parent))
        return False

    def _module_level(self, node: ast.AST) -> bool:
        parent = self.parents.get(id(node))
        while parent is not None and not isinstance(parent, _SCOPES):
            parent = self.parents.get(id(parent))
        return parent is None

    def _reference_message(self, node: ast.AST) -> str:
        parent, name = self.parents.get(id(node)), self.policy.reference_name
        if isinstance(parent, ast.ClassDef) and any(node is b for b in parent.bases):
            return f"subclasses the reference `{name}`; write ModelNew from nn.Module"
        if isinstance(parent, ast.Call) and parent.func is node:
            return f"instantiates the reference `{name}`"
        return f"refers to the reference `{name}`"

    def _attribute_rules(self, node: ast.Attribute) -> None:
        policy = self.policy
        if node.attr == policy.reference_name:
            self.add("reference-use", node, f"reaches the reference `{node.attr}` as an attribute")
        if node.attr in policy.forbidden_attributes:
            self.add(
                policy.forbidden_attributes[node.attr], node, f"reads `.{node.attr}`, an interpreter internal"
            )
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            if node.attr in _HIJACK_ATTRIBUTES:
                self.add("forward-hijack", node, f"assigns `{_src(node)}`, replacing what the harness calls")
            else:
                base = self.ref(node.value, self.module)
                if base is not None and base.kind in ("ext", "extfunc", "triton"):
                    self.add("forward-hijack", node, f"assigns `{_src(node)}`, replacing a built kernel")
                elif base is not None and base.kind == "qual":
                    self.add(
                        "global-state",
                        node,
                        f"assigns `{base.name}.{node.attr}`, state shared with the grader",
                    )
        else:
            ref = self.ref(node, self.module)
            if ref is not None and ref.kind == "qual":
                self._forbidden_name(ref.name, node)

    def _call_rules(self, node: ast.Call) -> None:
        policy, reference = self.policy, self.policy.reference_name
        ref = self.ref(node.func, self.module)
        qual = ref.name if ref is not None and ref.kind == "qual" else ""
        if qual.startswith(policy.global_state_calls):
            self.add("global-state", node, f"calls `{qual}`, which changes state shared with the reference")
        tail = node.func.attr if isinstance(node.func, ast.Attribute) else qual.rsplit(".", 1)[-1]
        if tail in _HOOK_METHODS:
            self.add("forward-hijack", node, f"`{tail}` lets code other than forward produce the output")
        if qual in ("builtins.getattr", "builtins.setattr", "builtins.delattr") and len(node.args) >= 2:
            name = _const_str(node.args[1])
            verb = qual.split(".")[1]
            if name is None:
                if not policy.allow_computed_getattr:
                    self.add("dynamic-code", node, f"`{verb}` with a computed name; use a literal attribute")
            elif name in policy.forbidden_attributes:
                self.add(
                    policy.forbidden_attributes[name], node, f"{verb} of `{name}`, an interpreter internal"
                )
            elif verb != "getattr" and name in _HIJACK_ATTRIBUTES:
                self.add("forward-hijack", node, f"{verb} of `{name}` replaces what the harness calls")
            else:
                base = self.ref(node.args[0], self.module)
                if base is not None and verb != "getattr" and base.kind in ("ext", "extfunc", "triton"):
                    self.add("forward-hijack", node, f"{verb} on a built kernel replaces what forward calls")
                elif base is not None and base.kind == "qual":
                    if verb == "getattr":
                        self._forbidden_name(f"{base.name}.{name}", node)
                    else:
                        self.add(
                            "global-state", node, f"{verb} on `{base.name}`, state shared with the grader"
                        )
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            if _const_str(arg) == reference:
                self.add("reference-use", node, f"looks up the reference `{reference}` by name")

    def _forbidden_module(self, module: str, node: ast.AST) -> None:
        for prefix, rule in self.policy.forbidden_modules.items():
            if module == prefix or module.startswith(prefix + "."):
                self.add(rule, node, f"imports `{module}`, which the gate does not allow ({RULES[rule]})")
                return
        top = module.split(".")[0]
        if module and top not in self.policy.allowed_imports:
            self.add(
                "disallowed-import",
                node,
                f"imports `{top}`, which is not on the allow list ({', '.join(self.policy.allowed_imports[:3])}, ...)",
            )

    def _forbidden_name(self, qual: str, node: ast.AST) -> None:
        for prefix, rule in self.policy.forbidden_names.items():
            if qual == prefix or qual.startswith(prefix):
                self.add(
                    rule,
                    node,
                    f"uses `{qual.removeprefix('builtins.')}`, which the gate does not allow ({RULES[rule]})",
                )
                return

    # -- the compute path --------------------------------------------------------------------------

    def _compute_path(self, forward: _Ref, cls: ast.ClassDef) -> list[Violation]:
        """Scan forward and everything it reaches; repeat while call sites teach callees new
        parameter types (a helper's `x` is a tensor because forward passes one)."""
        fn = forward.node
        root = (id(fn), id(forward.owner), id(cls))
        self.keys[root] = (fn, forward.owner, cls)
        args = fn.args  # type: ignore[union-attr]
        inputs = [*(args.posonlyargs + args.args)[forward.skip :], *([args.vararg] if args.vararg else [])]
        scalar = ("int", "float", "bool", "str")  # `forward(self, A, s: float)`: s is a Python number
        self.params[root] = {
            a.arg: _TENSOR
            for a in inputs
            if not (isinstance(a.annotation, ast.Name) and a.annotation.id in scalar)
        }
        sink: list[Violation] = []
        for _ in range(8):
            sink = []
            self.kernel_calls, self.call_targets, self.scanned = {}, {}, set()
            self.queue, self.changed = [root], False
            while self.queue:
                key = self.queue.pop(0)
                if key in self.scanned:
                    continue
                self.scanned.add(key)
                node, owner, self_cls = self.keys[key]
                if self._is_jit(node):
                    continue
                scan = _Scan(self, self._scope_for(node, owner, self_cls, self.params[key]), sink)
                for decorator in getattr(node, "decorator_list", []):
                    if isinstance(decorator, ast.Call):
                        scan.visit(decorator)
                    else:
                        self._on_call(decorator, [], [], decorator, scan)
                for part in [node.body] if isinstance(node, ast.Lambda) else node.body:
                    scan.visit(part)
            if not self.changed:
                break
        return sink

    def _reach(
        self, fn: ast.AST, owner, self_cls, args: list, keywords: list, skip: int, at: ast.AST, scope: _Scope
    ) -> None:
        key = (id(fn), id(owner), id(self_cls))
        self.keys[key] = (fn, owner, self_cls)
        params = self.params.setdefault(key, {})
        names, before = _params(fn), dict(params)
        vararg = fn.args.vararg.arg if fn.args.vararg is not None else None  # type: ignore[attr-defined]
        for i, arg in enumerate(args):
            if isinstance(arg, ast.Starred):
                break
            index = i + skip
            name = names[index] if index < len(names) else vararg
            if name is not None:
                params[name] = self._merge(params.get(name), self.ref(arg, scope))
        for keyword in keywords:
            if keyword.arg in names:
                params[keyword.arg] = self._merge(params.get(keyword.arg), self.ref(keyword.value, scope))
        if key in self.scanned and params != before:
            self.changed = True
        if key not in self.scanned:
            self.queue.append(key)
        self.call_targets.setdefault(id(at), []).append(key)

    def _on_call(self, func: ast.AST, args: list, keywords: list, at: ast.AST, scan: _Scan) -> None:
        scope = scan.scope
        ref = self.ref(func, scope)
        if ref is None:
            if isinstance(func, ast.Attribute) and self._is_compute_name(func.attr):
                receiver = self.ref(func.value, scope)
                if receiver is None or receiver.kind in ("tensor", "container"):
                    scan.add(
                        "framework-compute",
                        at,
                        f"`{_src(at)}` calls the tensor op `.{func.attr}()`, which runs in PyTorch; compute it in your kernel",
                    )
            return
        self._on_callee(ref, args, keywords, at, scan, 0)

    def _on_callee(self, ref: _Ref, args: list, keywords: list, at: ast.AST, scan: _Scan, depth: int) -> None:
        scope, kind, text = scan.scope, ref.kind, _src(at)
        if kind == "qual":
            qual = ref.name
            tensors = any(self._tensor(a, scope) for a in args)
            if qual == "contextlib.suppress":
                scan.add("fallback", at, "`contextlib.suppress` in the compute path hides a failing kernel")
            elif self._framework(qual) and qual not in self.policy.allowed_calls:
                scan.add(
                    "framework-compute",
                    at,
                    f"`{text}` calls `{qual}`, framework compute; only allocation, views and queries are allowed in the compute path",
                )
            elif (qual in _TENSOR_BUILTINS and tensors) or (
                qual.startswith("operator.") and (qual.endswith(("matmul", "imatmul")) or tensors)
            ):
                scan.add(
                    "framework-compute", at, f"`{text}` applies `{qual}` to tensors, which runs PyTorch ops"
                )
        elif kind in ("func", "method") and isinstance(ref.node, _FUNCTIONS):
            self._reach(ref.node, ref.owner, ref.cls, args, keywords, ref.skip, at, scope)
        elif kind == "class":
            init = self._member(ref.cls, "__init__", bound=True)
            if init is not None and init.kind == "method":
                self._reach(init.node, init.owner, ref.cls, args, keywords, 1, at, scope)
        elif kind == "instance":
            method = self._member(ref.cls, "forward", bound=True) or self._member(
                ref.cls, "__call__", bound=True
            )
            if method is not None and depth < 8:
                self._on_callee(method, args, keywords, at, scan, depth + 1)
        elif kind == "container" and depth < 8:
            if ref.name and (not ref.items or None in ref.items):
                scan.add(
                    "framework-compute",
                    at,
                    f"`{text}` runs `{ref.name}` over modules the gate cannot identify",
                )
            for item in ref.items:
                if item is not None:
                    self._on_callee(item, args, keywords, at, scan, depth + 1)
        elif kind == "object":
            scan.add(
                "framework-compute",
                at,
                f"`{text}` runs `{ref.name}` (a framework module or compiled function), not your kernel",
            )
        elif kind == "tainted":
            scan.add(
                "framework-compute", at, f"`{text}` calls a value that holds the framework op `{ref.name}`"
            )
        elif kind == "tensor" and ref.name and ref.name not in self.policy.allowed_calls:
            scan.add(
                "framework-compute", at, f"`{text}` calls an object made by `{ref.name}`, framework code"
            )
        elif kind == "extfunc":
            self.kernel_calls[id(at)] = ref.site.kind if ref.site is not None else "unknown"
        elif kind == "launcher":
            self.kernel_calls[id(at)] = "triton"

    def _on_reference(self, node: ast.AST, scan: _Scan) -> None:
        ref = self.ref(node, scan.scope)
        if ref is None:
            return
        if (ref.kind == "qual" and self._is_op(ref.name)) or ref.kind == "tainted":
            scan.add(
                "framework-compute",
                node,
                f"`{_src(node)}` refers to the framework op `{ref.name}` in the compute path",
            )
        elif ref.kind in ("func", "method") and isinstance(ref.node, _FUNCTIONS):
            self._reach(ref.node, ref.owner, ref.cls, [], [], ref.skip, node, scan.scope)

    # -- every path through forward launches a kernel ----------------------------------------------

    def _check_paths(self, forward: ast.AST) -> None:
        paths = _Paths(self)
        for line, launched, skip in paths.exits(forward):
            if not launched:
                where = f"; the branch at line {skip} skips it" if skip else ""
                self.add(
                    "fallback",
                    _Line(line),
                    f"forward can return here without launching a custom kernel{where}",
                )


class _Line:
    """A bare line number where add() wants a node."""

    def __init__(self, line: int):
        self.lineno = line


class _Scan(ast.NodeVisitor):
    """One function of the compute path: calls, references and operators."""

    def __init__(self, gate: _Gate, scope: _Scope, sink: list[Violation]):
        self.gate, self.scope, self.sink = gate, scope, sink
        self.callees: set[int] = set()

    def add(self, rule: str, node: ast.AST, message: str) -> None:
        self.gate.add(rule, node, message, self.sink)

    def visit_Call(self, node: ast.Call) -> None:
        self.callees.add(id(node.func))
        self.gate._on_call(node.func, node.args, node.keywords, node, self)
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load) and id(node) not in self.callees:
            self.gate._on_reference(node, self)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.ctx, ast.Load) and id(node) not in self.callees:
            self.gate._on_reference(node, self)
        self.generic_visit(node)

    def _tensor(self, *nodes: ast.AST) -> bool:
        return any(self.gate._tensor(n, self.scope) for n in nodes)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult):
            self.add(
                "framework-compute",
                node,
                f"`{_src(node)}` uses `@`, which runs torch.matmul (cuBLAS); do the matmul in your kernel",
            )
        elif self._tensor(node.left, node.right):
            self.add(
                "framework-compute",
                node,
                f"`{_src(node)}` is tensor arithmetic, a PyTorch kernel; fuse it into yours",
            )
        self.generic_visit(node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        if isinstance(node.op, (ast.USub, ast.Invert)) and self._tensor(node.operand):
            self.add(
                "framework-compute",
                node,
                f"`{_src(node)}` is tensor arithmetic, a PyTorch kernel; fuse it into yours",
            )
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        identity = all(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in node.ops)
        if not identity and self._tensor(node.left, *node.comparators):
            self.add("framework-compute", node, f"`{_src(node)}` compares tensors elementwise in PyTorch")
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.op, ast.MatMult) or self._tensor(node.target, node.value):
            self.add(
                "framework-compute",
                node,
                f"`{_src(node)}` is tensor arithmetic, a PyTorch kernel; fuse it into yours",
            )
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        index = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if self._tensor(node.value) and self._tensor(*index):
            self.add(
                "framework-compute",
                node,
                f"`{_src(node)}` indexes a tensor with a tensor (a PyTorch gather/scatter)",
            )
        self.generic_visit(node)

    def visit_Try(self, node: ast.AST) -> None:
        if getattr(node, "handlers", None):
            self.add(
                "fallback",
                node,
                "try/except in the compute path can hide a failing kernel behind another path",
            )
        self.generic_visit(node)

    visit_TryStar = visit_Try


class _Paths:
    """Does every way through a function launch a custom kernel? Loops are assumed to run; raising is
    not a way out; a call launches when it calls a kernel or a function on whose every path one runs."""

    def __init__(self, gate: _Gate):
        self.gate = gate
        self.memo: dict[tuple, tuple[bool, int | None]] = {}
        self.may_memo: dict[tuple, bool] = {}

    def must(self, key: tuple) -> tuple[bool, int | None]:
        if key not in self.memo:
            self.memo[key] = (False, None)  # recursion: assume it does not launch
            bad = [e for e in self.exits(self.gate.keys[key][0]) if not e[1]]
            self.memo[key] = (not bad, bad[0][0] if bad else None)
        return self.memo[key]

    def may(self, key: tuple) -> bool:
        if key not in self.may_memo:
            self.may_memo[key] = False
            calls = [n for n in ast.walk(self.gate.keys[key][0]) if isinstance(n, ast.Call)]
            self.may_memo[key] = any(id(c) in self.gate.kernel_calls for c in calls) or any(
                self.may(k) for c in calls for k in self.gate.call_targets.get(id(c), ())
            )
        return self.may_memo[key]

    def exits(self, fn: ast.AST) -> list[tuple[int, bool, int | None]]:
        out: list[tuple[int, bool, int | None]] = []
        if isinstance(fn, ast.Lambda):
            launched, skip = self.expr(fn.body)
            return [(fn.lineno, launched, skip)]
        end = self.block(fn.body, (False, None), out)  # type: ignore[attr-defined]
        if end is not None:
            out.append((fn.body[-1].end_lineno or fn.lineno, end[0], end[1]))  # type: ignore[attr-defined]
        return out

    def block(self, body: list[ast.stmt], state, out) -> tuple[bool, int | None] | None:
        for st in body:
            if state is None:
                break
            state = self.stmt(st, state, out)
        return state

    @staticmethod
    def merge(a, b, line: int):
        if a is None or b is None:
            return b if a is None else a
        return (a[0] and b[0], a[1] or b[1] or (line if a[0] != b[0] else None))

    def stmt(self, st: ast.stmt, state, out):
        launched, skip = state

        def after(*nodes: ast.AST | None):
            found = [self.expr(n) for n in nodes if n is not None]
            return (launched or any(f[0] for f in found), skip or next((f[1] for f in found if f[1]), None))

        if isinstance(st, ast.Return):
            l_, s_ = after(st.value)
            out.append((st.lineno, l_, s_))
            return None
        if isinstance(st, ast.Raise):
            return None
        if isinstance(st, ast.If):
            start = after(st.test)
            return self.merge(self.block(st.body, start, out), self.block(st.orelse, start, out), st.lineno)
        if isinstance(st, (ast.For, ast.AsyncFor, ast.While)):
            start = after(getattr(st, "iter", None) or getattr(st, "test", None))
            looped = self.block(st.body, start, out)
            return self.block(st.orelse, looped if looped is not None else start, out)
        if isinstance(st, _TRY_NODES):
            body = self.block(st.orelse, self.block(st.body, state, out), out)
            for handler in st.handlers:
                body = self.merge(body, self.block(handler.body, state, out), st.lineno)
            return self.block(st.finalbody, body, out) if body is not None else None
        if isinstance(st, (ast.With, ast.AsyncWith)):
            return self.block(st.body, after(*[i.context_expr for i in st.items]), out)
        if isinstance(st, ast.Match):
            start, result = after(st.subject), None
            for case in st.cases:
                result = self.merge(result, self.block(case.body, start, out), st.lineno)
            irrefutable = any(
                isinstance(c.pattern, ast.MatchAs) and c.pattern.pattern is None and c.guard is None
                for c in st.cases
            )
            return result if irrefutable else self.merge(result, start, st.lineno)
        if isinstance(st, (*_SCOPES, ast.Import, ast.ImportFrom, ast.Pass, ast.Global, ast.Nonlocal)):
            return state
        return after(*[c for c in ast.iter_child_nodes(st) if not isinstance(c, ast.stmt)])

    def expr(self, node: ast.AST) -> tuple[bool, int | None]:
        if isinstance(node, ast.Lambda):
            return (False, None)
        if isinstance(node, ast.IfExp):
            test = self.expr(node.test)
            if test[0]:
                return test
            a, b = self.expr(node.body), self.expr(node.orelse)
            if a[0] and b[0]:
                return (True, None)
            return (False, a[1] or b[1] or (node.lineno if a[0] or b[0] else None))
        if isinstance(node, ast.BoolOp):
            first = self.expr(node.values[0])
            if first[0]:
                return first
            rest = [self.expr(v) for v in node.values[1:]]
            return (
                False,
                first[1]
                or next((r[1] for r in rest if r[1]), None)
                or (node.lineno if any(r[0] for r in rest) else None),
            )
        launched, skip = False, None
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.stmt):
                found = self.expr(child)
                launched, skip = launched or found[0], skip or found[1]
        if isinstance(node, ast.Call):
            if id(node) in self.gate.kernel_calls:
                return (True, skip)
            for key in self.gate.call_targets.get(id(node), ()):
                must, line = self.must(key)
                if must:
                    launched = True
                elif skip is None and line is not None and self.may(key):
                    skip = line
        return (launched, skip)


_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*[<\"]([^>\"]+)[>\"]", re.M)
_NATIVE_NAME = re.compile(r"\b(torch|at|aten)((?:\s*::\s*\w+)+)(\s*\()?")
_NATIVE_USING = re.compile(
    r"\busing\s+namespace\s+((?:\w+\s*::\s*)*\w+)|\bnamespace\s+\w+\s*=\s*((?:\w+\s*::\s*)*\w+)"
    r"|\busing\s+((?:torch|at|aten)\s*::\s*(?:\w+\s*::\s*)*[a-z_]\w*)\s*;"
)
_NATIVE_OPEN_NAMESPACES = frozenset({"torch::indexing", "at::indexing"})
_NATIVE_INCLUDE_FLAGS = re.compile(r"(?:^|\s)(?:-I|-isystem|-include|--include-path)")


def _native_core(name: str) -> str:
    """An ATen function's op: `_softmax_out` -> softmax, `addmm_cuda` -> addmm."""
    core = name.strip("_")
    for suffix in ("_out", "_cuda", "_cpu", "_forward", "_symint", "_impl"):
        core = core.removesuffix(suffix)
    return core


_NATIVE_ESCAPE = re.compile(
    r"\b(?:py|pybind11)\s*::\s*(?:module_?\s*::\s*import|eval|exec|eval_file)\b|\bPy(?:Import|Run|Eval|Object_Call)\w*"
    r"|\b(?:dlopen|dlsym|LoadLibrary\w*|popen|fork|system)\s*\("
)
_NATIVE_METHOD = re.compile(r"(?:\.|->)\s*([A-Za-z_]\w*)\s*(?:<[^<>;(){}]*>)?\s*\(")


def _strip_cpp(text: str, keep_strings: bool = False) -> str:
    """C/C++ source with comments (and, unless keep_strings, string and char literals) blanked out;
    newlines kept so line numbers still match."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
        elif text[i] in "\"'":
            quote, end = text[i], i + 1
            while end < n and text[end] not in (quote, "\n"):
                end += 2 if text[end] == "\\" else 1
            end = min(end + 1, n)
            if keep_strings:
                out.append(text[i:end])
                i = end
                continue
        else:
            out.append(text[i])
            i += 1
            continue
        out.append(re.sub(r"[^\n]", " ", text[i:end]))
        i = end
    return "".join(out)


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
