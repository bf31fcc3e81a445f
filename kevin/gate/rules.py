"""The static gate's rules over a candidate's Python source: `Gate`, which `check_source` runs.

`Gate` is the name resolver of kevin.gate.names plus the rules listed in kevin.gate, in order:
1. whole-file rules, anywhere in the candidate: imports (allow list, forbidden modules, relative and star
   imports), use of the reference `Model`, introspection, dynamic code, concurrency, global state, and
   ways to replace what the harness calls (forward or `__call__` assigned, hooks, metaclasses,
   `ModelNew` rebound, a built kernel replaced);
2. the compute path: `ModelNew.forward` and every function, method, lambda and local class it reaches,
   scanned by `_Scan` for framework compute (calls, tensor methods, operators on tensors, ops referenced
   as values) and try/except. A callee is scanned with the parameter types its call sites pass, and the
   whole scan repeats (at most 8 passes) while a call site teaches a callee something new;
3. kernels: one of the back end's kind must be built, its sources must be readable and free of ATen and
   vendor libraries (kevin.gate.native), and the compute path must launch it, on every way through
   forward (kevin.gate.paths).

What it does not do: import or run the candidate, or judge what a kernel computes (the evaluator's
dynamic checks do); the limits of the type guessing it relies on are listed in kevin.gate.

Why one module of ~600 lines: `Gate` and the `_Scan` visitor it drives apply one rule list to one
tree; each rule is a short method, and the order of the rules (whole-file, compute path, kernels)
is the module's order.
"""

from __future__ import annotations

import ast

from kevin.gate.names import (
    FUNCTIONS,
    SCOPES,
    TENSOR,
    TENSOR_BUILTINS,
    Ref,
    Resolver,
    Scope,
    positional_names,
)
from kevin.gate.native import const_str, native_problems
from kevin.gate.paths import Paths
from kevin.gate.policy import RULES, CheckPolicy, Violation, is_compute_name, words
from kevin.gate.triton import triton_violations

# What the harness calls instead of forward when these are replaced or defined (rule forward-hijack).
_HIJACK_ATTRIBUTES = words(
    "forward __call__ __class__ _call_impl _wrapped_call_impl __getattr__ __getattribute__ _forward_hooks "
    "_forward_pre_hooks"
)
_HIJACK_METHODS = words("__call__ __getattribute__ __getattr__ __new__ _call_impl _wrapped_call_impl")
_HOOK_METHODS = words(
    "register_forward_hook register_forward_pre_hook register_module_forward_hook register_module_forward_pre_hook"
)
# A build site's kind, as the no-custom-kernel message names it.
_SITE_KINDS = {
    "cuda": "a CUDA kernel",
    "cuda-host": "cuda_sources without a launched __global__ kernel",
    "cpp": "C++ only",
    "empty": "no code",
    "unknown": "sources the gate cannot read",
}


def _src(node: ast.AST, limit: int = 60) -> str:
    """An expression as source text on one line, cut to `limit` characters, for a message."""
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Gate(Resolver):
    """One analysis of one candidate. Whole-file rules first, then the compute path, then kernels."""

    def __init__(self, tree: ast.Module, policy: CheckPolicy, backend: str):
        super().__init__(tree, policy)
        self.backend = backend
        self.found: list[Violation] = []
        self.parents = {id(c): p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
        # Compute-path state, rebuilt by each pass of _compute_path.
        self.keys: dict[tuple, tuple] = {}
        self.params: dict[tuple, dict[str, Ref | None]] = {}
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
        self.bind()
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
        self.found.extend(triton_violations(self))
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
        if forward.kind not in ("func", "method") or not isinstance(forward.node, FUNCTIONS):
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

    # -- kernels -----------------------------------------------------------------------------------

    def _check_kernels(self, candidate: ast.ClassDef | None, launched: set[str] | None) -> None:
        accepted = set(self.policy.kernel_kinds.get(self.backend, ()))
        unknown = False
        for site in self.sites.values():
            unknown = unknown or site.kind == "unknown"
            if site.problem:
                self.add("kernel-source-unverifiable", _Line(site.line), site.problem)
            problems = native_problems(site.texts, site.flags, self.policy)
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
            elif isinstance(node, ast.Subscript) and const_str(node.slice) == reference:
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
        while parent is not None and not isinstance(parent, SCOPES):
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
        qual = self._qualified(node.func)
        if qual.startswith(policy.global_state_calls):
            self.add("global-state", node, f"calls `{qual}`, which changes state shared with the reference")
        tail = node.func.attr if isinstance(node.func, ast.Attribute) else qual.rsplit(".", 1)[-1]
        if tail in _HOOK_METHODS:
            self.add("forward-hijack", node, f"`{tail}` lets code other than forward produce the output")
        if qual in ("builtins.getattr", "builtins.setattr", "builtins.delattr") and len(node.args) >= 2:
            name = const_str(node.args[1])
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
            if const_str(arg) == reference:
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

    def _compute_path(self, forward: Ref, cls: ast.ClassDef) -> list[Violation]:
        """Scan forward and everything it reaches; repeat while call sites teach callees new
        parameter types (a helper's `x` is a tensor because forward passes one)."""
        fn = forward.node
        root = (id(fn), id(forward.owner), id(cls))
        self.keys[root] = (fn, forward.owner, cls)
        args = fn.args  # type: ignore[union-attr]
        inputs = [*(args.posonlyargs + args.args)[forward.skip :], *([args.vararg] if args.vararg else [])]
        scalar = ("int", "float", "bool", "str")  # `forward(self, A, s: float)`: s is a Python number
        self.params[root] = {
            a.arg: TENSOR
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
        self, fn: ast.AST, owner, self_cls, args: list, keywords: list, skip: int, at: ast.AST, scope: Scope
    ) -> None:
        key = (id(fn), id(owner), id(self_cls))
        self.keys[key] = (fn, owner, self_cls)
        params = self.params.setdefault(key, {})
        names, before = positional_names(fn), dict(params)
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
            if isinstance(func, ast.Attribute) and is_compute_name(func.attr, self.policy):
                receiver = self.ref(func.value, scope)
                if receiver is None or receiver.kind in ("tensor", "container"):
                    scan.add(
                        "framework-compute",
                        at,
                        f"`{_src(at)}` calls the tensor op `.{func.attr}()`, which runs in PyTorch; compute it in your kernel",
                    )
            return
        self._on_callee(ref, args, keywords, at, scan, 0)

    def _on_callee(self, ref: Ref, args: list, keywords: list, at: ast.AST, scan: _Scan, depth: int) -> None:
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
            elif (qual in TENSOR_BUILTINS and tensors) or (
                qual.startswith("operator.") and (qual.endswith(("matmul", "imatmul")) or tensors)
            ):
                scan.add(
                    "framework-compute", at, f"`{text}` applies `{qual}` to tensors, which runs PyTorch ops"
                )
        elif kind in ("func", "method") and isinstance(ref.node, FUNCTIONS):
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
        elif ref.kind in ("func", "method") and isinstance(ref.node, FUNCTIONS):
            self._reach(ref.node, ref.owner, ref.cls, [], [], ref.skip, node, scan.scope)

    # -- every path through forward launches a kernel ----------------------------------------------

    def _check_paths(self, forward: ast.AST) -> None:
        paths = Paths(self)
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

    def __init__(self, gate: Gate, scope: Scope, sink: list[Violation]):
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
