"""The gate layer (the static check): reject, before anything is built, candidates that do not do the work themselves.

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
`kevin.gate.rules.Gate`, which applies the rules to the Python source with the name resolution of
`kevin.gate.names`, the C++/CUDA reading of `kevin.gate.native` and the path analysis of
`kevin.gate.paths`.

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
- `triton-kernel-body`: a `@triton.jit` body uses something besides `triton`/`triton.language`, other jit
  functions, `math`, a few builtins, its arguments and module globals bound to literals or `tl.constexpr`
  (a `torch.` call, a global tensor, a plain Python function).
- `triton-value-tuning`: `@triton.autotune`/`@triton.heuristics` that can read the inputs' values: a
  `key=` that is not a literal list of integer arguments, heuristics or `perf_model`/`early_config_prune`
  that read a pointer argument beyond its shape or call framework code, `pre_hook`/`post_hook`/`do_bench`
  (also on `triton.Config`). Writing `TRITON_*` into `os.environ` is `global-state`.
- `missing-model-new`: no `class ModelNew` with a `forward`. `syntax`: the source does not parse.
- `gate-error`: the gate itself failed to load or raised (kevin's fault; `CheckReport.blame` says
  `infrastructure`). The gate fails closed: such a candidate is rejected, never passed unchecked.

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

Layer rules: kevin.gate imports kevin.errors and the standard library only; it never imports torch,
the tasks, the evaluator or anything above them (import-linter holds this, see pyproject.toml).
Modules: `policy` (policy, rule ids, report types), `names` (name resolution), `native` (the C++/CUDA
reader), `paths` (does every way through forward launch a kernel), `triton` (the Triton rules), `rules` (`Gate`), `check` (entry
points and the `kevin check` command).
"""

from kevin.gate.check import check_file, check_source, register_commands
from kevin.gate.policy import (
    BACKENDS,
    DEFAULT_POLICY,
    RULES,
    CheckPolicy,
    CheckReport,
    Violation,
    is_compute_name,
    paper,
    words,
)

__all__ = [
    "BACKENDS",
    "DEFAULT_POLICY",
    "RULES",
    "CheckPolicy",
    "CheckReport",
    "Violation",
    "check_file",
    "check_source",
    "is_compute_name",
    "paper",
    "register_commands",
    "words",
]
