"""A problem's operator sequence, read from its `Model` code with `ast` (the #18 dedupe by code).

A KernelBench file name says what its author meant (`37_Matmul_Swish_Sum_GroupNorm.py` adds a bias
where the name says Sum; `28_BMM_...` holds an nn.Linear); the forward says what runs. `read_forward`
parses the source, never imports or runs it, and names the operators `Model.forward` applies in the
order its data flows, in the generator's vocabulary (kevin.tasks.operators), so that
`operators.sequence_key(reading.ops)` compares with a generated task's key.

1. `__init__`: each `self.NAME = nn.Module(...)` binds NAME to that module's operator
   (`nn.Sequential(...)` to its members' operators in order); other attributes are values.
2. `forward`, statement by statement (assignments, augmented assignments, `return`): its parameters
   are the data; a name assigned from an expression that reads data is data. Each expression is walked
   operands first, and every call or operator that reads data yields its operator, so
   `torch.tensor(c)`, `self.weight.T` or `x.shape` yield nothing and `x * self.scale` yields Multiply.
3. Names (calls `torch.relu`/`F.relu`/`x.relu()`, modules `nn.ReLU`, operators `+ - * / @`) map onto
   the vocabulary: `linear`, `matmul`, `mm`, `@` -> Gemm; `silu` -> Swish; `batch_norm`,
   `BatchNorm2d` -> BatchNorm; `max_pool2d`, `MaxPool3d` -> MaxPool; `adaptive_avg_pool2d` and a mean
   over dims (2, 3) or (2, 3, 4) -> GlobalAvgPool; `+` -> Add (a bias, a constant or a residual alike,
   as `operators.canonical` merges them); `clamp`, `clip` -> Clamp; `amax`, `max` -> Max; and so on
   (`_VOCABULARY`). Written-out activations are recognised: `a * sigmoid(a)` -> Swish,
   `a * tanh(softplus(a))` -> Mish, `a * clamp((a + 3) / 6, 0, 1)` and `a * hardsigmoid(a)` ->
   HardSwish. An operator outside the vocabulary keeps its own name (`min`, `dropout`, `cumsum`):
   it can never equal a generated operator, and it stays in the sequence so that a chain with it is
   not taken for one without it. Shape-only calls (`view`, `reshape`, `squeeze`, `permute`, `clone`,
   `detach`, indexing, ...) and `nn.Identity`/`nn.Flatten` yield nothing.

Not handled (the reading says why and gives no sequence): branches (`if`, conditional expressions,
`and`/`or`), loops and comprehensions, `with`/`try`, assignments into a tensor (`x[i] = ...`),
calls to helper functions or other methods of the Model, calling an attribute that `__init__` does not
bind to an nn module (nn.ModuleList, plain functions stored on self), a file without `Model.forward`
or that does not parse. Arguments of an operator (which dim, which slope) are not compared.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

_VOCABULARY = {
    "conv2d": "Conv2d",
    "conv3d": "Conv3d",
    "convtranspose2d": "ConvTranspose2d",
    "convtranspose3d": "ConvTranspose3d",
    "linear": "Gemm",
    "matmul": "Gemm",
    "mm": "Gemm",
    "addmm": "Gemm",
    "bmm": "BMM",
    "baddbmm": "BMM",
    "relu": "ReLU",
    "gelu": "GELU",
    "silu": "Swish",
    "sigmoid": "Sigmoid",
    "tanh": "Tanh",
    "leakyrelu": "LeakyReLU",
    "hardtanh": "HardTanh",
    "hardswish": "HardSwish",
    "mish": "Mish",
    "softplus": "Softplus",
    "elu": "ELU",
    "add": "Add",
    "sub": "Subtract",
    "subtract": "Subtract",
    "mul": "Multiply",
    "multiply": "Multiply",
    "div": "Divide",
    "divide": "Divide",
    "truedivide": "Divide",
    "clamp": "Clamp",
    "clip": "Clamp",
    "clampmin": "Clamp",
    "clampmax": "Clamp",
    "batchnorm": "BatchNorm",
    "batchnorm1d": "BatchNorm",
    "batchnorm2d": "BatchNorm",
    "batchnorm3d": "BatchNorm",
    "layernorm": "LayerNorm",
    "groupnorm": "GroupNorm",
    "instancenorm": "InstanceNorm",
    "instancenorm1d": "InstanceNorm",
    "instancenorm2d": "InstanceNorm",
    "instancenorm3d": "InstanceNorm",
    "maxpool1d": "MaxPool",
    "maxpool2d": "MaxPool",
    "maxpool3d": "MaxPool",
    "avgpool1d": "AvgPool",
    "avgpool2d": "AvgPool",
    "avgpool3d": "AvgPool",
    "adaptiveavgpool1d": "GlobalAvgPool",
    "adaptiveavgpool2d": "GlobalAvgPool",
    "adaptiveavgpool3d": "GlobalAvgPool",
    "sum": "Sum",
    "mean": "Mean",
    "max": "Max",
    "amax": "Max",
    "logsumexp": "LogSumExp",
    "softmax": "Softmax",
}
"""Normalized name (lower case, no underscores) -> generator operator; anything else keeps its name."""

_SHAPE_ONLY = frozenset(
    "view reshape view_as reshape_as squeeze unsqueeze flatten unflatten permute transpose t contiguous "
    "clone detach expand expand_as repeat float double half to type cpu cuda identity".split()
)
"""Calls that move or retype data without computing on it: they yield no operator."""

_CONSTRUCTORS = frozenset(
    "tensor as_tensor ones zeros full empty rand randn randint arange linspace eye ones_like zeros_like "
    "full_like empty_like rand_like randn_like randint_like".split()
)
"""torch functions that make a tensor whose values do not come from the data."""

_NOT_DATA = frozenset(
    ("shape", "dtype", "device", "ndim", "size", "dim", "numel", "is_cuda", "requires_grad")
)
"""Attributes and methods that read a tensor's metadata, not its values."""

_METADATA_BUILTINS = frozenset(("len", "isinstance", "print", "type", "id"))
"""Builtins that may take the data without computing on it."""

_BINARY = {ast.Add: "Add", ast.Sub: "Subtract", ast.Mult: "Multiply", ast.Div: "Divide", ast.MatMult: "Gemm"}

_UNHANDLED_STATEMENTS = {
    ast.If: "a branch (if)",
    ast.For: "a loop (for)",
    ast.While: "a loop (while)",
    ast.With: "a with block",
    ast.Try: "a try block",
    ast.FunctionDef: "a nested function",
    ast.Match: "a branch (match)",
}


@dataclass(frozen=True)
class ForwardReading:
    """What `read_forward` made of one problem."""

    ops: tuple[str, ...]
    """Operators in data-flow order (generator names where the vocabulary has one); empty if unread."""
    unhandled: str = ""
    """Why the forward could not be read (empty when it was)."""


class Unhandled(Exception):
    """A construct the straight-line reading does not follow (its message says which)."""


def _normalized(name: str) -> str:
    return name.lower().replace("_", "")


def operator_name(name: str) -> str:
    """`leaky_relu`, `LeakyReLU` -> `LeakyReLU`; `relu_` (in place) -> `ReLU`; unknown names lowered."""
    key = _normalized(name.rstrip("_"))
    return _VOCABULARY.get(key, key)


def _dotted(node: ast.expr) -> list[str] | None:
    """`torch.nn.functional.relu` -> ["torch", "nn", "functional", "relu"]; None for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


def _import_aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> dotted module of every top-level import (`F` -> `torch.nn.functional`)."""
    aliases = {"torch": "torch", "nn": "torch.nn", "F": "torch.nn.functional"}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                aliases[alias.asname or top] = alias.name if alias.asname else top
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def _same(a: ast.expr, b: ast.expr) -> bool:
    return ast.dump(a) == ast.dump(b)


class _Reader:
    """One forward's walk: `data` names, the `ops` found so far, the modules `__init__` bound."""

    def __init__(self, tree: ast.Module, model: ast.ClassDef):
        self.aliases = _import_aliases(tree)
        self.methods = {n.name for n in model.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self.modules: dict[str, tuple[str, ...] | None] = {}
        self.ops: list[str] = []
        self.data: set[str] = set()
        init = next((n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        for node in ast.walk(init) if init else ():
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                if isinstance(target, ast.Attribute) and _dotted(target) == ["self", target.attr]:
                    self.modules[target.attr] = self._module_ops(node.value)

    def _torch_path(self, node: ast.expr) -> list[str] | None:
        """The full dotted path of a torch name (`F.relu` -> torch.nn.functional.relu), else None."""
        parts = _dotted(node)
        if parts is None or parts[0] not in self.aliases:
            return None
        path = self.aliases[parts[0]].split(".") + parts[1:]
        return path if path[0] == "torch" else None

    def _module_ops(self, value: ast.expr) -> tuple[str, ...] | None:
        """The operators an nn module constructor stands for; None when it is not one we know."""
        if not isinstance(value, ast.Call):
            return None
        path = self._torch_path(value.func)
        if path is None or len(path) < 3 or path[1] != "nn" or not path[-1][:1].isupper():
            return None
        name = path[-1]
        if name == "Sequential":
            members = [self._module_ops(arg) for arg in value.args]
            return None if any(m is None for m in members) else tuple(op for m in members for op in m)
        if name in ("ModuleList", "ModuleDict", "Parameter", "ParameterList"):
            return None
        if name in ("Identity", "Flatten", "Unflatten"):
            return ()
        return (operator_name(name),)

    # -- expressions: each returns whether its value is data ------------------------------------

    def expression(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.data
        if isinstance(node, ast.Constant):
            return False
        if isinstance(node, ast.Attribute):
            if _dotted(node) == ["self", node.attr]:
                return False  # a parameter, buffer or number of the model
            is_data = self.expression(node.value)
            return is_data and node.attr not in _NOT_DATA
        if isinstance(node, ast.Subscript):
            is_data = self.expression(node.value)
            self.expression(node.slice)
            return is_data
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any([self.expression(e) for e in node.elts])
        if isinstance(node, ast.Starred):
            return self.expression(node.value)
        if isinstance(node, ast.Slice):
            return any([self.expression(e) for e in (node.lower, node.upper, node.step) if e is not None])
        if isinstance(node, ast.BinOp):
            return self.binary(
                node.left, node.right, _BINARY.get(type(node.op), type(node.op).__name__.lower())
            )
        if isinstance(node, ast.UnaryOp):
            is_data = self.expression(node.operand)
            if is_data and not isinstance(node.op, ast.UAdd):
                self.ops.append(type(node.op).__name__.lower())
            return is_data
        if isinstance(node, ast.Compare):
            is_data = any([self.expression(e) for e in (node.left, *node.comparators)])
            if is_data:
                self.ops.extend(type(op).__name__.lower() for op in node.ops)
            return is_data
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.IfExp):
            raise Unhandled("a conditional expression")
        if isinstance(node, ast.BoolOp):
            raise Unhandled("a branch (and/or)")
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            raise Unhandled("a comprehension (a loop)")
        raise Unhandled(f"a {type(node).__name__} expression")

    def _call_of(self, node: ast.expr, names: tuple[str, ...]) -> ast.Call | None:
        """`node` when it calls torch's or a tensor's function named one of `names` (normalized)."""
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            return None
        return node if _normalized(node.func.attr) in names else None

    def _operand(self, call: ast.Call) -> ast.expr | None:
        """What a unary call applies to: `a` of `torch.sigmoid(a)` and of `a.sigmoid()`."""
        if self._torch_path(call.func) is not None:
            return call.args[0] if call.args else None
        return call.func.value if isinstance(call.func, ast.Attribute) else None

    def _written_activation(self, left: ast.expr, right: ast.expr) -> tuple[str, ast.expr] | None:
        """(operator, operand) when `left * right` writes out Swish, Mish or HardSwish."""
        for a, b in ((left, right), (right, left)):
            call = self._call_of(b, ("sigmoid", "tanh", "clamp", "hardsigmoid"))
            if call is None:
                continue
            inner = self._operand(call)
            name = _normalized(call.func.attr)
            if name == "sigmoid" and inner is not None and _same(inner, a):
                return "Swish", a
            if name == "hardsigmoid" and inner is not None and _same(inner, a):
                return "HardSwish", a
            softplus = self._call_of(inner, ("softplus",)) if inner is not None else None
            if name == "tanh" and softplus is not None and _same(self._operand(softplus), a):
                return "Mish", a
            if name == "clamp" and inner is not None and _same(inner, _hardsigmoid_argument(a)):
                return "HardSwish", a
        return None

    def binary(self, left: ast.expr, right: ast.expr, name: str) -> bool:
        if name == "Multiply":
            written = self._written_activation(left, right)
            if written is not None:
                is_data = self.expression(written[1])
                if is_data:
                    self.ops.append(written[0])
                return is_data
        is_data = any([self.expression(left), self.expression(right)])
        if is_data:
            self.ops.append(name)
        return is_data

    def call(self, node: ast.Call) -> bool:
        func = node.func
        arguments = [*node.args, *(k.value for k in node.keywords)]
        if isinstance(func, ast.Attribute) and _dotted(func) == ["self", func.attr]:
            if func.attr not in self.modules or self.modules[func.attr] is None:
                what = "another method of Model" if func.attr in self.methods else "not an nn module it knows"
                raise Unhandled(f"calls self.{func.attr} ({what})")
            is_data = any([self.expression(a) for a in arguments])
            if is_data:
                self.ops.extend(self.modules[func.attr])
            return is_data
        path = self._torch_path(func)
        if path is not None:
            return self.torch_call(path, node, arguments)
        if isinstance(func, ast.Attribute):  # a method: x.relu(), x.mean(dim=1), x.view(b, -1)
            receiver_is_data = self.expression(func.value)
            is_data = any([self.expression(a) for a in arguments]) or receiver_is_data
            return self.emit(func.attr, node, is_data, receiver_is_data)
        if isinstance(func, ast.Call):  # nn.ReLU()(x)
            ops = self._module_ops(func)
            if ops is None:
                raise Unhandled(f"calls the result of {ast.unparse(func)}")
            is_data = any([self.expression(a) for a in arguments])
            if is_data:
                self.ops.extend(ops)
            return is_data
        is_data = any([self.expression(a) for a in arguments])
        if is_data and not (isinstance(func, ast.Name) and func.id in _METADATA_BUILTINS):
            raise Unhandled(f"calls {ast.unparse(func)} on the data (a helper the reading does not follow)")
        return False

    def torch_call(self, path: list[str], node: ast.Call, arguments: list[ast.expr]) -> bool:
        name = path[-1]
        if name[:1].isupper() and "nn" in path:  # a module built inline and not called: no data yet
            any([self.expression(a) for a in arguments])
            return False
        if name in _CONSTRUCTORS:
            any([self.expression(a) for a in arguments])
            return False
        if _normalized(name) in ("mul", "multiply") and len(node.args) == 2 and not node.keywords:
            return self.binary(node.args[0], node.args[1], "Multiply")
        is_data = any([self.expression(a) for a in arguments])
        return self.emit(name, node, is_data, is_data)

    def emit(self, name: str, node: ast.Call, is_data: bool, receiver_is_data: bool) -> bool:
        """Record the operator a call named `name` applies when it reads data; whether it gives data."""
        if name in _NOT_DATA:
            return False
        if name in _SHAPE_ONLY:
            return receiver_is_data
        if not is_data:
            return False
        op = operator_name(name)
        if op == "Mean" and _spatial_dims(node):
            op = "GlobalAvgPool"
        self.ops.append(op)
        return True

    # -- statements ---------------------------------------------------------------------------------

    def assign(self, targets: list[ast.expr], is_data: bool) -> None:
        for target in targets:
            if isinstance(target, ast.Name):
                (self.data.add if is_data else self.data.discard)(target.id)
            elif isinstance(target, (ast.Tuple, ast.List)):
                self.assign(list(target.elts), is_data)
            elif isinstance(target, ast.Starred):
                self.assign([target.value], is_data)
            else:
                raise Unhandled(f"assigns into {ast.unparse(target)} (an in-place write)")

    def statements(self, body: list[ast.stmt]) -> None:
        for statement in body:
            if isinstance(statement, ast.Return):
                if statement.value is not None:
                    self.expression(statement.value)
                return
            if isinstance(statement, ast.Assign):
                self.assign(statement.targets, self.expression(statement.value))
            elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
                self.assign([statement.target], self.expression(statement.value))
            elif isinstance(statement, ast.AugAssign):
                name = _BINARY.get(type(statement.op), type(statement.op).__name__.lower())
                target = (
                    ast.Name(statement.target.id, ast.Load())
                    if isinstance(statement.target, ast.Name)
                    else None
                )
                if target is None:
                    raise Unhandled(f"assigns into {ast.unparse(statement.target)} (an in-place write)")
                self.assign([statement.target], self.binary(target, statement.value, name))
            elif isinstance(statement, ast.Expr):
                if not isinstance(statement.value, ast.Constant):  # docstrings
                    self.expression(statement.value)
            elif isinstance(statement, (ast.Pass, ast.Assert, ast.Import, ast.ImportFrom)):
                continue
            else:
                why = next(
                    (w for kind, w in _UNHANDLED_STATEMENTS.items() if isinstance(statement, kind)), None
                )
                raise Unhandled(why or f"a {type(statement).__name__} statement")


def _hardsigmoid_argument(operand: ast.expr) -> ast.expr:
    """`(operand + 3) / 6`, the argument of a written-out HardSwish's clamp."""
    shifted = ast.BinOp(operand, ast.Add(), ast.Constant(3))
    return ast.BinOp(shifted, ast.Div(), ast.Constant(6))


def _spatial_dims(node: ast.Call) -> bool:
    """A mean over dims (2, 3) or (2, 3, 4): the same as a global average pool."""
    dims = next((k.value for k in node.keywords if k.arg == "dim"), None)
    if dims is None and len(node.args) >= 2 and isinstance(node.func, ast.Attribute):
        dims = node.args[1] if _dotted(node.func) and _dotted(node.func)[0] in ("torch",) else node.args[0]
    if not isinstance(dims, (ast.Tuple, ast.List)):
        return False
    values = [e.value if isinstance(e, ast.Constant) else None for e in dims.elts]
    return values in ([2, 3], [2, 3, 4])


def read_forward(source: str) -> ForwardReading:
    """The operators `Model.forward` applies, in data-flow order (module docstring), or why not."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return ForwardReading((), f"does not parse ({exc.msg}, line {exc.lineno})")
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    forward = None
    if model is not None:
        forward = next(
            (n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None
        )
    if forward is None:
        return ForwardReading((), "no Model.forward")
    reader = _Reader(tree, model)
    arguments = forward.args
    reader.data = {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)} - {"self"}
    reader.data |= {a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None}
    try:
        reader.statements(forward.body)
    except Unhandled as exc:
        return ForwardReading((), str(exc))
    return ForwardReading(tuple(reader.ops))
