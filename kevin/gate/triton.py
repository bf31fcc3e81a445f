"""The gate's rules for Triton kernels: what a `@triton.jit` body may use, and what autotuning may read.

`triton_violations(resolver)` runs over every candidate (whatever its back end: the rules only fire
where Triton is used) after the names are bound (kevin.gate.names). Three checks:

- `triton-kernel-body`: a `@triton.jit` body may use its own arguments and locals, `triton` and
  `triton.language` (any alias, `libdevice` included), other `@triton.jit` functions, `math`, a few
  builtins (`range`, `min`, `max`, `float`, ...) and module globals bound to a literal or to
  `tl.constexpr(...)`. Anything else (a `torch.` call, a global tensor, a plain Python function, a
  `global` statement) is rejected: under `TRITON_INTERPRET=1` the body would run as Python, and a
  global tensor is data the clock never sees being made.
- `triton-value-tuning`: `@triton.autotune` and `@triton.heuristics` run Python on the launch's
  arguments, the tensors included, so a heuristic that reads the inputs' values would make the
  kernel (and its timing) depend on the secret inputs. Allowed: `key=` as a literal list naming the
  kernel's integer arguments; heuristics, `perf_model` and `early_config_prune` as lambdas or local
  functions that read an argument `args["n"]` only when `n` is not a pointer the kernel loads or
  stores through, or else only its shape (`.shape`, `.stride()`, `.numel()`, `.dtype`, ...); no
  framework calls, no calls of other local functions; `reset_to_zero`/`restore_value` as literal
  lists of names. Rejected: `pre_hook`, `post_hook` and `do_bench` (on `autotune` or on a
  `triton.Config`): custom code around every launch that the gate cannot check.
- `global-state`: writing a `TRITON_*` variable (or a computed key) into `os.environ`, or
  `os.putenv`: `TRITON_INTERPRET`, the cache and the compiler paths change what a launch runs.

Which arguments are pointers: those that reach the address of a `tl.load`/`tl.store`/`tl.atomic_*`,
`tl.make_block_ptr`/`make_tensor_descriptor` as a term of the `+`/`-` chain (also through locals
such as `a_ptrs = a_ptr + offs`, and through arguments of other `@triton.jit` functions), and those
the kernel never uses at all (unknown, so treated as tensors).

What it does not do: check what a kernel computes (the evaluator does), follow values a heuristic
reads from an argument the kernel uses only in arithmetic (a tensor passed and never loaded is not
a pointer by this reading), or check `.item()` reads of inputs in forward (that is the compute
path's business, and is allowed today).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from kevin.gate.names import FUNCTIONS, Resolver
from kevin.gate.native import const_str
from kevin.gate.policy import Violation, words

_BUILTINS = words("range min max float int bool abs len tuple isinstance zip enumerate print")
"""Builtins a @triton.jit body may name (Triton's code generator handles these itself)."""
_MEMORY_OPS = words(
    "load store atomic_add atomic_max atomic_min atomic_and atomic_or atomic_xor atomic_xchg atomic_cas"
)
_BLOCK_POINTERS = words("make_block_ptr make_tensor_descriptor")
_SHAPE_ATTRIBUTES = words("shape dtype ndim device is_cuda")
_SHAPE_METHODS = words("stride size numel dim element_size data_ptr is_contiguous")
_AUTOTUNE_POSITIONS = (
    "configs key prune_configs_by reset_to_zero restore_value pre_hook post_hook warmup rep "
    "use_cuda_graph do_bench"
).split()
_HOOKS = words("pre_hook post_hook do_bench")
_SAFE_TRITON_CALLS = frozenset({"triton.cdiv", "triton.next_power_of_2"})


def _walk(nodes: list[ast.stmt] | ast.AST) -> Iterator[ast.AST]:
    for node in nodes if isinstance(nodes, list) else [nodes]:
        yield from ast.walk(node)


def _parameters(fn: ast.AST) -> list[str]:
    args = fn.args  # type: ignore[attr-defined]
    every = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    return every + [a.arg for a in (args.vararg, args.kwarg) if a is not None]


def _constexpr_parameters(fn: ast.AST, resolver: Resolver) -> set[str]:
    args = fn.args  # type: ignore[attr-defined]
    return {
        a.arg
        for a in args.posonlyargs + args.args + args.kwonlyargs
        if a.annotation is not None and resolver._qualified(a.annotation).endswith("constexpr")
    }


class _Triton:
    """One candidate's Triton rules over the names `resolver` bound."""

    def __init__(self, resolver: Resolver):
        self.resolver = resolver
        self.found: list[Violation] = []
        self.jit = [
            n for n in ast.walk(resolver.tree) if isinstance(n, ast.FunctionDef) and resolver._is_jit(n)
        ]
        self.pointer_memo: dict[int, set[str]] = {}
        self.constants = self._module_constants()

    def add(self, rule: str, node: ast.AST, message: str) -> None:
        self.found.append(Violation(rule, getattr(node, "lineno", 0), message))

    def qual(self, node: ast.AST) -> str:
        return self.resolver._qualified(node)

    def run(self) -> list[Violation]:
        for fn in self.jit:
            self._kernel_body(fn)
            for decorator in fn.decorator_list:
                if isinstance(decorator, ast.Call):
                    name = self.qual(decorator.func)
                    if name.startswith("triton") and name.endswith(".autotune"):
                        self._autotune(decorator, fn)
                    elif name.startswith("triton") and name.endswith(".heuristics"):
                        self._heuristics(decorator, fn)
        for node in ast.walk(self.resolver.tree):
            if isinstance(node, ast.Call):
                self._config_hooks(node)
                self._environment_call(node)
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)):
                self._environment_store(node)
        return self.found

    # -- what a @triton.jit body may use ------------------------------------------------------------

    def _module_constants(self) -> set[str]:
        """Module-level names bound only to literals or to `tl.constexpr(...)` (annotated or called)."""
        constant: dict[str, bool] = {}
        for st in self.resolver.tree.body:
            targets, value, annotation = [], None, None
            if isinstance(st, ast.Assign):
                targets, value = st.targets, st.value
            elif isinstance(st, ast.AnnAssign):
                targets, value, annotation = [st.target], st.value, st.annotation
            for target in targets:
                if isinstance(target, ast.Name):
                    ok = self._literal(value) or (
                        annotation is not None and self.qual(annotation).endswith("constexpr")
                    )
                    constant[target.id] = constant.get(target.id, True) and ok
        return {name for name, ok in constant.items() if ok}

    def _literal(self, node: ast.AST | None) -> bool:
        if isinstance(node, ast.Constant):
            return True
        if isinstance(node, ast.UnaryOp):
            return self._literal(node.operand)
        if isinstance(node, ast.BinOp):
            return self._literal(node.left) and self._literal(node.right)
        if isinstance(node, ast.Tuple):
            return all(self._literal(e) for e in node.elts)
        if isinstance(node, ast.Call) and self.qual(node.func).endswith("constexpr"):
            return all(self._literal(a) for a in node.args)
        return False

    def _kernel_body(self, fn: ast.FunctionDef) -> None:
        local = set(_parameters(fn))
        for node in _walk(fn.body):
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                local.add(node.id)
            elif isinstance(node, ast.arg):
                local.add(node.arg)
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                self.add(
                    "triton-kernel-body",
                    node,
                    f"`global`/`nonlocal` in @triton.jit `{fn.name}`; pass values as arguments",
                )
        for node in _walk(fn.body):
            if not isinstance(node, ast.Name) or not isinstance(node.ctx, ast.Load) or node.id in local:
                continue
            problem = self._global_problem(node.id)
            if problem:
                self.add("triton-kernel-body", node, f"@triton.jit `{fn.name}` {problem}")

    def _global_problem(self, name: str) -> str:
        """Why a global name may not appear in a jit body ("" when it may)."""
        ref = self.resolver.module.lookup(name)
        if ref is not None and ref.kind == "triton":
            return ""
        if ref is not None and ref.kind == "qual":
            qual = ref.name
            if qual == "triton" or qual.startswith("triton.") or qual == "math" or qual.startswith("math."):
                return ""
            if qual.startswith("builtins.") and qual[9:] in _BUILTINS:
                return ""
            return f"uses `{name}` (`{qual}`); inside a kernel use only triton.language (tl.*), arithmetic and its arguments"
        if name in self.constants:
            return ""
        if ref is not None and ref.kind in ("func", "method", "class"):
            return f"calls the Python function `{name}`; make it @triton.jit or inline it"
        return (
            f"reads the global `{name}`; pass it as an argument or bind it as `{name} = tl.constexpr(...)`"
        )

    # -- which arguments are pointers ---------------------------------------------------------------

    def pointers(self, fn: ast.FunctionDef) -> set[str]:
        """The kernel's arguments that may be tensors: used as a base address, or never used."""
        if id(fn) in self.pointer_memo:
            return self.pointer_memo[id(fn)]
        self.pointer_memo[id(fn)] = set()  # recursion: nothing more known yet
        params = _parameters(fn)
        assigned: dict[str, list[ast.AST]] = {}
        for node in _walk(fn.body):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        assigned.setdefault(target.id, []).append(node.value)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name):
                if node.value is not None:
                    assigned.setdefault(node.target.id, []).append(node.value)
        found: set[str] = set()

        def bases(expr: ast.AST, seen: set[str]) -> None:
            if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub)):
                bases(expr.left, seen)
                bases(expr.right, seen)
            elif isinstance(expr, ast.Subscript):
                bases(expr.value, seen)
            elif isinstance(expr, ast.Name) and expr.id not in seen:
                if expr.id in params:
                    found.add(expr.id)
                for value in assigned.get(expr.id, []):
                    bases(value, seen | {expr.id})
            elif isinstance(expr, ast.IfExp):
                bases(expr.body, seen)
                bases(expr.orelse, seen)

        used: set[str] = set()
        for node in _walk(fn.body):
            if isinstance(node, ast.Name):
                used.add(node.id)
            if not isinstance(node, ast.Call):
                continue
            tail = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            callee = self.resolver.module.lookup(tail) if isinstance(node.func, ast.Name) else None
            if tail in _MEMORY_OPS or tail in _BLOCK_POINTERS:
                address = node.args[0] if node.args else None
                for keyword in node.keywords:
                    if keyword.arg in ("pointer", "base", "ptr"):
                        address = keyword.value
                if address is not None:
                    bases(address, set())
            elif callee is not None and callee.kind == "triton" and isinstance(callee.node, ast.FunctionDef):
                inner = self.pointers(callee.node)
                names = _parameters(callee.node)
                pairs = list(zip(names, node.args)) + [(k.arg, k.value) for k in node.keywords if k.arg]
                for name, arg in pairs:
                    if name in inner:
                        bases(arg, set())
        found |= {p for p in params if p not in used} - _constexpr_parameters(fn, self.resolver)
        self.pointer_memo[id(fn)] = found
        return found

    # -- autotune and heuristics --------------------------------------------------------------------

    def _autotune(self, call: ast.Call, fn: ast.FunctionDef) -> None:
        given = dict(zip(_AUTOTUNE_POSITIONS, call.args))
        given.update({k.arg: k.value for k in call.keywords if k.arg})
        if any(k.arg is None for k in call.keywords):
            self.add(
                "triton-value-tuning",
                call,
                "`**` arguments to triton.autotune hide what it runs; write them out",
            )
        pointers, params = self.pointers(fn), set(_parameters(fn))
        key = given.get("key")
        names = self._names(key)
        if key is not None and names is None:
            self.add(
                "triton-value-tuning",
                call,
                "triton.autotune key= must be a literal list of the kernel's argument names",
            )
        for name in names or []:
            if name not in params or name in pointers:
                self.add(
                    "triton-value-tuning",
                    call,
                    f"triton.autotune key names `{name}`, not an integer argument of `{fn.name}`; key on sizes only",
                )
        for field in ("reset_to_zero", "restore_value"):
            value = given.get(field)
            if value is not None and not _none(value) and self._names(value) is None:
                self.add(
                    "triton-value-tuning",
                    call,
                    f"triton.autotune {field}= must be a literal list of argument names",
                )
        for field in _HOOKS:
            if field in given and not _none(given[field]):
                self.add(
                    "triton-value-tuning",
                    call,
                    f"triton.autotune {field}= runs code the gate cannot check; drop it (zero buffers with reset_to_zero=[...])",
                )
        prune = given.get("prune_configs_by")
        if prune is None or _none(prune):
            return
        if not isinstance(prune, ast.Dict) or any(const_str(k) is None for k in prune.keys if k is not None):
            self.add(
                "triton-value-tuning",
                call,
                "triton.autotune prune_configs_by= must be a dict literal with constant keys",
            )
            return
        for k, value in zip(prune.keys, prune.values, strict=True):
            role = const_str(k) if k is not None else None
            if role in ("perf_model", "early_config_prune"):
                self._hook(value, role, fn)

    def _heuristics(self, call: ast.Call, fn: ast.FunctionDef) -> None:
        table = (
            call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "values"), None)
        )
        if not isinstance(table, ast.Dict) or any(k is None for k in table.keys):
            self.add(
                "triton-value-tuning", call, "triton.heuristics needs a dict literal {name: lambda args: ...}"
            )
            return
        for value in table.values:
            self._hook(value, "heuristic", fn)

    def _names(self, node: ast.AST | None) -> list[str] | None:
        if not isinstance(node, (ast.List, ast.Tuple)):
            return None
        names = [const_str(e) for e in node.elts]
        return None if any(n is None for n in names) else names  # type: ignore[return-value]

    def _hook(self, value: ast.AST, role: str, kernel: ast.FunctionDef) -> None:
        """A heuristic, perf_model or early_config_prune: it may read argument shapes, not values."""
        fn: ast.AST | None = value if isinstance(value, ast.Lambda) else None
        if isinstance(value, ast.Name):
            ref = self.resolver.module.lookup(value.id)
            if ref is not None and ref.kind == "func" and isinstance(ref.node, FUNCTIONS):
                fn = ref.node
        if fn is None:
            self.add(
                "triton-value-tuning",
                value,
                f"a Triton {role} must be a lambda or a function defined in this file",
            )
            return
        args = fn.args  # type: ignore[attr-defined]
        positional = [a.arg for a in args.posonlyargs + args.args]
        kwarg = [args.kwarg.arg] if args.kwarg is not None else []
        if role == "heuristic":
            containers, direct = set(positional + kwarg), set()
        elif role == "early_config_prune":
            containers, direct = set(positional[1:2] + kwarg), set()
        else:  # perf_model(**named_args, **kwargs, **config kwargs)
            containers, direct = set(kwarg), set(_parameters(fn)) - set(kwarg)
        pointers = self.pointers(kernel)
        parents = {id(c): p for p in ast.walk(fn) for c in ast.iter_child_nodes(p)}
        body = [fn.body] if isinstance(fn, ast.Lambda) else fn.body  # type: ignore[attr-defined]
        handled: set[int] = set()
        for node in _walk(body):
            if (
                isinstance(node, ast.Subscript)
                and isinstance(node.value, ast.Name)
                and node.value.id in containers
            ):
                handled.add(id(node.value))
                name = const_str(node.slice)
                if name is None:
                    self.add(
                        "triton-value-tuning",
                        node,
                        f'a Triton {role} reads an argument by a computed name; write args["name"]',
                    )
                elif name in pointers:
                    self._shape_only(node, parents, name, role)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and id(node) not in handled:
                if node.id in containers:
                    self.add(
                        "triton-value-tuning",
                        node,
                        f'a Triton {role} may use its argument dict only as args["name"]',
                    )
                elif node.id in direct and node.id in pointers:
                    self._shape_only(node, parents, node.id, role)
            elif isinstance(node, ast.Call):
                self._hook_call(node, role)

    def _shape_only(self, node: ast.AST, parents: dict[int, ast.AST], name: str, role: str) -> None:
        parent = parents.get(id(node))
        if isinstance(parent, ast.Attribute) and parent.value is node:
            if parent.attr in _SHAPE_ATTRIBUTES:
                return
            call = parents.get(id(parent))
            if parent.attr in _SHAPE_METHODS and isinstance(call, ast.Call) and call.func is parent:
                return
        self.add(
            "triton-value-tuning",
            node,
            f"a Triton {role} reads the tensor argument `{name}` beyond its shape; use only .shape, .stride(), .numel(), .dtype",
        )

    def _hook_call(self, node: ast.Call, role: str) -> None:
        ref = self.resolver.ref(node.func, self.resolver.module)
        if ref is None:
            return  # a method of a value (configs' .kwargs.get, a shape's .index): judged by its receiver
        if ref.kind == "qual":
            qual = ref.name
            if qual.startswith("builtins.") or qual.startswith("math.") or qual in _SAFE_TRITON_CALLS:
                return
            if self.resolver._framework(qual) or qual.startswith("triton"):
                self.add(
                    "triton-value-tuning",
                    node,
                    f"a Triton {role} calls `{qual}`; heuristics may only do arithmetic on sizes",
                )
            return
        if ref.kind in ("func", "method", "class", "triton"):
            self.add(
                "triton-value-tuning",
                node,
                f"a Triton {role} calls a function of this file, which the gate does not follow there; inline it",
            )

    def _config_hooks(self, node: ast.Call) -> None:
        qual = self.qual(node.func)
        if qual.startswith("triton") and qual.endswith(".Config"):
            for keyword in node.keywords:
                if keyword.arg == "pre_hook" and not _none(keyword.value):
                    self.add(
                        "triton-value-tuning",
                        node,
                        "triton.Config(pre_hook=...) runs code around every launch; drop it",
                    )

    # -- the environment Triton reads ---------------------------------------------------------------

    def _environment_store(self, node: ast.Subscript) -> None:
        if self.qual(node.value) == "os.environ":
            self._environment_key(node.slice, node)

    def _environment_call(self, node: ast.Call) -> None:
        qual = self.qual(node.func)
        if qual in (
            "os.putenv",
            "os.unsetenv",
            "os.environ.__setitem__",
            "os.environ.setdefault",
            "os.environ.pop",
        ):
            self._environment_key(node.args[0] if node.args else None, node)
        elif qual == "os.environ.update":
            table = node.args[0] if node.args else None
            if node.keywords or not isinstance(table, ast.Dict):
                for keyword in node.keywords:
                    self._environment_key(ast.Constant(keyword.arg) if keyword.arg else None, node)
                if table is not None and not isinstance(table, ast.Dict):
                    self._environment_key(None, node)
            else:
                for key in table.keys:
                    self._environment_key(key, node)

    def _environment_key(self, key: ast.AST | None, node: ast.AST) -> None:
        name = const_str(key) if key is not None else None
        if name is None or name.upper().startswith("TRITON"):
            what = f"`{name}`" if name else "a computed variable"
            self.add(
                "global-state",
                node,
                f"sets {what} in the environment, which changes what Triton compiles and runs",
            )


def _none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def triton_violations(resolver: Resolver) -> list[Violation]:
    """Every Triton rule's violations in the candidate `resolver` has bound."""
    return _Triton(resolver).run()
