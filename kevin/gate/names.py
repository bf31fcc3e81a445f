"""Name resolution for the static gate: what a name or an expression in a candidate refers to.

`Resolver.bind()` binds the module's names (imports and aliases, functions, classes, assignments, also
inside `try`/`if` blocks and through `global`), reads the sources of every kernel build site, and from
then on `ref(expression, scope)` says what an expression is: an imported name (`torch.matmul`, dotted),
a local function, method, class or instance, `super()`, a built extension or one of its functions, a
triton kernel or its launcher, a framework object (an `nn` layer, a compiled function), a container of
any of these, a tensor, or a value that holds a framework op. Function scopes are built on demand with
what call sites pass as parameters; `self.X` is looked up through the class, its local bases and every
`self.X = ...` in their methods.

The type guessing is light, and deliberately so: a value is a tensor when a framework call, a tensor
method, arithmetic on a tensor or a kernel made it, or when it is a parameter, a buffer or a layer's
weight. A name bound twice keeps the more telling binding (a framework op beats a kernel beats a plain
value), so a branch cannot launder an op through a name.

What it does not do: judge anything (the rules are kevin.gate.rules's), read C++ (kevin.gate.native
does), or follow what it cannot see: objects built by code it does not model, `*args`, computed
`getattr`, values that travel through containers it did not build. Those come back as None (unknown).

Why one module of ~650 lines: it is one class, `Resolver`, whose methods recurse into each other
(binding a scope resolves expressions, resolving an expression builds scopes) over shared state;
split across files it would read worse, not better.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from kevin.gate.native import LOADERS, Site, SourceReader, const_str
from kevin.gate.policy import QUERY_CALLS, CheckPolicy, is_compute_name, words

# What the gate knows about torch's API shape (not policy: facts used to type values).
_NON_TENSOR_METHODS = words(
    "size dim ndimension numel nelement stride storage_offset item tolist data_ptr element_size "
    "is_contiguous is_floating_point is_complex get_device untyped_storage is_pinned type __len__"
)
_TENSOR_ATTRIBUTES = words("T mT H mH data real imag grad")
_LAYER_TENSOR_ATTRIBUTES = words("weight bias running_mean running_var in_proj_weight in_proj_bias")
_CONTAINER_CLASSES = words("Sequential ModuleList ModuleDict")
_TENSOR_CLASSES = words("Parameter Buffer ParameterList ParameterDict Tensor")
_OBJECT_FACTORIES = frozenset({"torch.compile", "torch.jit.script", "torch.jit.trace"})
TENSOR_BUILTINS = frozenset(
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
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


@dataclass(frozen=True)
class Ref:
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
    items: tuple[Ref | None, ...] = ()
    site: Site | None = None
    skip: int = 0
    """Leading parameters not filled by call arguments (self, ctx)."""


TENSOR = Ref("tensor")


class Scope:
    """The names bound in one function (or the module), falling back on the enclosing scope and then
    on builtins. `owner` is the class that defines the function, `self_cls` the class of its `self`."""

    def __init__(self, names: dict, parent: Scope | None = None, owner=None, self_cls=None):
        self.names, self.parent, self.owner, self.self_cls = names, parent, owner, self_cls

    def lookup(self, name: str) -> Ref | None:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.names:
                return scope.names[name]
            scope = scope.parent
        if hasattr(builtins, name) or name == "__builtins__":
            return Ref("qual", f"builtins.{name}")
        return None


def _walk_local(node: ast.AST) -> Iterator[ast.AST]:
    """Descendants in source order, not entering nested functions, lambdas or classes."""
    for child in ast.iter_child_nodes(node):
        yield child
        if not isinstance(child, SCOPES):
            yield from _walk_local(child)


def positional_names(fn: ast.AST) -> list[str]:
    """The names of a function's positional parameters, `self` included."""
    args = fn.args  # type: ignore[attr-defined]
    return [a.arg for a in args.posonlyargs + args.args]


def _decorated(fn: ast.AST, name: str) -> bool:
    return any(isinstance(d, ast.Name) and d.id == name for d in getattr(fn, "decorator_list", []))


class Resolver:
    """What the names and expressions of one candidate refer to. Answers are memoised; `bind()` first."""

    def __init__(self, tree: ast.Module, policy: CheckPolicy):
        self.tree, self.policy = tree, policy
        self.env: dict[str, Ref | None] = {}
        self.module = Scope(self.env)
        self.sites: dict[int, Site] = {}
        self.strings: dict[str, list[ast.expr]] = {}
        self.memo: dict[tuple, object] = {}
        self.busy: set[tuple] = set()
        self.reader = SourceReader(policy, self._qualified)

    def bind(self) -> None:
        """Bind the module's names and read every kernel build site."""
        self.strings = self._strings_of(self.tree)
        self._bind_block(self.tree.body, self.module)
        self._bind_globals()
        self._collect_sites()

    # -- binding names -----------------------------------------------------------------------------

    def _bind_block(self, body: list[ast.stmt], scope: Scope) -> None:
        """Module level (and blocks in it, such as `try: import triton`), in source order."""
        for st in body:
            if isinstance(st, (ast.Import, ast.ImportFrom)):
                self._bind_import(st, scope.names)
            elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                scope.names[st.name] = Ref("triton" if self._is_jit(st) else "func", node=st)
            elif isinstance(st, ast.ClassDef):
                scope.names[st.name] = Ref("class", cls=st)
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
                    names[alias.asname] = Ref("qual", alias.name)
                else:
                    top = alias.name.split(".")[0]
                    names[top] = Ref("qual", top)
            return
        module = "." * st.level + (st.module or "")
        for alias in st.names:
            if alias.name != "*":
                names[alias.asname or alias.name] = Ref(
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

    def _bind_assign(self, st: ast.AST, scope: Scope) -> None:
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
                scope.names[st.target.id] = TENSOR if tensor else old
            return
        for target in st.targets if isinstance(st, ast.Assign) else [st.target]:
            self._bind_target(target, value, ref, scope)

    def _bind_target(self, target: ast.AST, value: ast.AST | None, ref: Ref | None, scope: Scope) -> None:
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
                scope.names[target.value.id] = Ref("container", items=items)

    def _bind_loop(self, target: ast.AST, iterable: ast.AST, scope: Scope) -> None:
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

    def _bind_growth(self, call: ast.Call, scope: Scope) -> None:
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
        scope.names[func.value.id] = Ref("container", old.name if old else "", items=old_items + new)

    def _scope_for(self, fn: ast.AST, owner, self_cls, params: Mapping[str, Ref | None]) -> Scope:
        names: dict[str, Ref | None] = {}
        scope = Scope(names, self.module, owner, self_cls)
        args = fn.args  # type: ignore[attr-defined]
        every = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
        every += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
        names.update(dict.fromkeys(every))
        positional = positional_names(fn)
        if owner is not None and positional and not _decorated(fn, "staticmethod"):
            kind = "class" if _decorated(fn, "classmethod") else "self"
            names[positional[0]] = Ref(kind, cls=self_cls)
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
                    names[node.name] = Ref("triton" if self._is_jit(node) else "func", node=node)
                elif isinstance(node, ast.ClassDef):
                    names[node.name] = Ref("class", cls=node)
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

    def _is_op(self, qual: str) -> bool:
        """A framework function that computes, referenced by its qualified name."""
        if not self._framework(qual):
            return False
        return qual.startswith(self.policy.op_namespaces) or is_compute_name(
            qual.rsplit(".", 1)[-1], self.policy
        )

    def _rank(self, ref: Ref | None) -> int:
        if ref is None:
            return 0
        if ref.kind in ("object", "tainted") or (ref.kind == "qual" and self._is_op(ref.name)):
            return 4
        if ref.kind == "container":
            return max((self._rank(item) for item in ref.items), default=1)
        if ref.kind in ("ext", "extfunc", "launcher", "triton"):
            return 3
        return 1 if ref.kind == "qual" else 2

    def _merge(self, old: Ref | None, new: Ref | None) -> Ref | None:
        """A name bound twice keeps the more telling binding: a framework op beats a kernel beats a value."""
        return new if self._rank(new) > self._rank(old) else old

    def _tensor(self, node: ast.AST, scope: Scope) -> bool:
        ref = self.ref(node, scope)
        return ref is not None and ref.kind == "tensor"

    def _item(self, ref: Ref | None) -> Ref | None:
        """An element of ref (subscript or iteration)."""
        if ref is None:
            return None
        if ref.kind in ("container", "tensor", "object", "tainted"):
            return ref
        if ref.kind == "triton":
            return Ref("launcher", node=ref.node)
        return None

    def ref(self, node: ast.AST | None, scope: Scope, depth: int = 0) -> Ref | None:
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
            return TENSOR if tensor else None
        if isinstance(node, ast.UnaryOp):
            operand = self.ref(node.operand, scope, deeper)
            return (
                TENSOR
                if operand is not None and operand.kind == "tensor" and not isinstance(node.op, ast.Not)
                else None
            )
        if isinstance(node, ast.Compare):
            if all(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in node.ops):
                return None
            return TENSOR if any(self._tensor(n, scope) for n in [node.left, *node.comparators]) else None
        if isinstance(node, (ast.IfExp, ast.BoolOp)):
            parts = [node.body, node.orelse] if isinstance(node, ast.IfExp) else node.values
            result = None
            for part in parts:
                result = self._merge(result, self.ref(part, scope, deeper))
            return result
        if isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict)):
            elements = node.values if isinstance(node, ast.Dict) else node.elts
            items = tuple(self.ref(e, scope, deeper) for e in elements)
            return Ref("container", items=items) if any(i is not None for i in items) else None
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            element = self.ref(node.value if isinstance(node, ast.DictComp) else node.elt, scope, deeper)
            return Ref("container", items=(element,)) if element is not None else None
        if isinstance(node, ast.Lambda):
            return Ref("func", node=node)
        if isinstance(node, (ast.NamedExpr, ast.Starred, ast.Await)):
            return self.ref(node.value, scope, deeper)
        return None

    def _attr(self, ref: Ref | None, attr: str) -> Ref | None:
        if ref is None:
            return None
        kind = ref.kind
        if kind == "qual":
            return Ref("qual", f"{ref.name}.{attr}")
        if kind == "ext":
            return Ref("extfunc", attr, site=ref.site)
        if kind in ("self", "instance"):
            return self._member(ref.cls, attr, bound=True)
        if kind == "super":
            return self._member(ref.cls, attr, bound=True, after=ref.owner)
        if kind == "class":
            if attr == "apply" and self._is_autograd(ref.cls):
                forward = self._member(ref.cls, "forward", bound=False)
                if forward is not None and forward.kind == "method":
                    return Ref("method", "apply", node=forward.node, owner=forward.owner, skip=1)
            return self._member(ref.cls, attr, bound=False)
        if kind == "object":
            if attr in _LAYER_TENSOR_ATTRIBUTES or attr.endswith(("_weight", "_bias")):
                return TENSOR
            return Ref("object", f"{ref.name}.{attr}")
        if kind == "tensor":
            return TENSOR if attr in _TENSOR_ATTRIBUTES else None
        return ref if kind == "tainted" else None

    def _call_ref(self, node: ast.Call, scope: Scope, depth: int) -> Ref | None:
        func = self.ref(node.func, scope, depth)
        if func is None:
            if isinstance(node.func, ast.Attribute):
                receiver = self.ref(node.func.value, scope, depth)
                if receiver is not None and receiver.kind == "tensor":
                    return None if node.func.attr in _NON_TENSOR_METHODS else TENSOR
            return self._taint(node, scope)
        kind = func.kind
        if kind == "qual":
            qual, args = func.name, node.args
            lookup = qual == "builtins.getattr" or qual.endswith((".__getattribute__", ".__getattr__"))
            if lookup and len(args) >= 2 and const_str(args[1]) is not None:
                return self._attr(self.ref(args[0], scope, depth), const_str(args[1]) or "")
            if qual == "builtins.super":
                return Ref("super", cls=scope.self_cls, owner=scope.owner)
            if qual in LOADERS:
                if id(node) not in self.sites:
                    self.sites[id(node)] = self.reader.site(node, qual, [self.strings])
                return Ref("ext", site=self.sites[id(node)])
            if args and qual in ("functools.partial", "builtins.list", "builtins.tuple", "builtins.iter"):
                return self.ref(args[0], scope, depth)
            if qual in TENSOR_BUILTINS:
                return TENSOR if any(self._tensor(a, scope) for a in args) else None
            if self._framework(qual):
                last = qual.rsplit(".", 1)[-1]
                if last in _CONTAINER_CLASSES:
                    return Ref("container", qual, items=self._elements(node, scope))
                if last in _TENSOR_CLASSES:
                    return TENSOR
                if last[:1].isupper() or qual in _OBJECT_FACTORIES:
                    return Ref("object", qual)
                return Ref("tensor", qual) if qual.startswith("torch") and qual not in QUERY_CALLS else None
            return self._taint(node, scope)
        if kind in ("func", "method") and isinstance(func.node, FUNCTIONS):
            return self._returns(func.node, func.owner, func.cls)
        if kind == "class":
            return Ref("instance", cls=func.cls)
        if kind in ("extfunc", "object", "tainted", "instance", "container"):
            return TENSOR
        return None

    def _elements(self, node: ast.Call, scope: Scope) -> tuple[Ref | None, ...]:
        items: list[Ref | None] = []
        for arg in node.args:
            ref = self.ref(arg, scope)
            items.extend(ref.items if ref is not None and ref.kind == "container" else [ref])
        return tuple(items)

    def _taint(self, node: ast.AST, scope: Scope) -> Ref | None:
        """An unknown call that is handed a framework op as a value (`Wrapper(torch.matmul)`) holds it."""
        callees = {id(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)}
        for sub in ast.walk(node):
            if isinstance(sub, (ast.Name, ast.Attribute)) and id(sub) not in callees:
                ref = self.ref(sub, scope)
                if ref is not None and ref.kind == "qual" and self._is_op(ref.name):
                    return Ref("tainted", ref.name)
        return None

    def _returns(self, fn: ast.AST, owner, self_cls) -> Ref | None:
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

    def _attributes(self, cls: ast.ClassDef) -> dict[str, Ref | None]:
        """`self.X = ...` (and register_buffer/register_parameter) over every method of cls and its bases."""
        key = ("attributes", id(cls))
        if key in self.memo:
            return self.memo[key]  # type: ignore[return-value]
        table: dict[str, Ref | None] = {}
        self.memo[key] = table
        for c in reversed(self._mro(cls)):
            for method in c.body:
                if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) or not positional_names(
                    method
                ):
                    continue
                scope = self._scope_for(method, c, cls, {})
                me = positional_names(method)[0]
                for node in ast.walk(method):
                    pairs: list[tuple[str, Ref | None]] = []
                    if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                        for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                            if (
                                isinstance(target, ast.Attribute)
                                and isinstance(target.value, ast.Name)
                                and target.value.id == me
                            ):
                                pairs.append((target.attr, self.ref(node.value, scope)))
                    elif isinstance(node, ast.Call) and len(node.args) >= 2 and const_str(node.args[0]):
                        func = node.func
                        if (
                            isinstance(func, ast.Attribute)
                            and isinstance(func.value, ast.Name)
                            and func.value.id == me
                        ):
                            if func.attr in ("register_buffer", "register_parameter"):
                                pairs.append((const_str(node.args[0]) or "", TENSOR))
                    for name, ref in pairs:
                        table[name] = self._merge(table.get(name), ref)
        return table

    def _member(
        self, cls: ast.ClassDef | None, attr: str, bound: bool, after: ast.ClassDef | None = None
    ) -> Ref | None:
        if cls is None:
            return None
        order = self._mro(cls)
        if after is not None:
            position = next((i for i, c in enumerate(order) if c is after), 0)
            order = order[position + 1 :]
        for c in order:
            member = self._methods(c).get(attr)
            if isinstance(member, FUNCTIONS):
                skip = 1 if bound and not _decorated(member, "staticmethod") else 0
                return Ref("method", attr, node=member, cls=cls, owner=c, skip=skip)
            if member is not None:
                return member  # type: ignore[return-value]
        if after is None:
            attributes = self._attributes(cls)
            if attr in attributes:
                return attributes[attr]
        base = self._framework_base(after if after is not None else cls)
        if base is not None:
            return TENSOR if attr in _LAYER_TENSOR_ATTRIBUTES else Ref("object", f"{base}.{attr}")
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
                    if qual in LOADERS or (ref is None and tail == "load_inline"):
                        site = self.reader.site(child, qual or "load_inline", stack)
                        vars(self.sites.setdefault(id(child), site)).update(vars(site))
                visit(child, stack)

        visit(self.tree, [self.strings])

    def _qualified(self, node: ast.AST) -> str:
        """The imported name an expression refers to at module level ("" when it is not one)."""
        ref = self.ref(node, self.module)
        return ref.name if ref is not None and ref.kind == "qual" else ""
