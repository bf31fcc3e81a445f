"""The gate's policy and report types: which names are compute, the rule ids, `CheckPolicy`, `paper()`.

`CheckPolicy` says what the gate allows (framework calls, imports, compute method names); `paper()` is
the paper's policy and the default. `Violation` and `CheckReport` are what `kevin.gate.check_source`
returns. The rules themselves live in kevin.gate.rules; this module imports nothing of the gate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

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
        "triton-kernel-body": "a @triton.jit body uses something besides triton.language, arithmetic, its arguments and constant globals",
        "triton-value-tuning": "a Triton autotune key, heuristic, pruner or hook can read the inputs' values or runs code the gate cannot check",
        "gate-error": "the gate itself failed (kevin's fault): the candidate is rejected until it can be checked",
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

    @property
    def blame(self) -> str:
        """Who a rejection is on, as EvalResult.blame says it: `infrastructure` when the gate itself
        failed (`gate-error`), else `candidate`; `none` when accepted."""
        if self.ok:
            return "none"
        return "infrastructure" if "gate-error" in self.rules else "candidate"

    def to_dict(self) -> dict[str, object]:
        return {"ok": self.ok, "backend": self.backend, "violations": [v.to_dict() for v in self.violations]}

    def summary(self) -> str:
        """The report as text for a person or the model's next prompt."""
        if self.ok:
            return f"static check passed (backend {self.backend})"
        lines = [f"static check rejected the candidate (backend {self.backend}):"]
        lines += [f"  line {v.line}: [{v.rule}] {v.message}" for v in self.violations]
        return "\n".join(lines)
