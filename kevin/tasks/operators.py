"""The operator catalogue of the task generator (the paper's App. A.2 lists) and its shape rules.

A generated task is one expensive operator followed by 2-5 cheap ones. Every operator here knows
when it applies to the current tensor and what shape it leaves, so any chain drawn composes:

    expensive  Conv2d, Conv3d, ConvTranspose2d, ConvTranspose3d, Matmul (x @ B, both inputs),
               Gemm (nn.Linear), BMM (torch.bmm, both inputs)
    cheap      activations  ReLU GELU Swish Sigmoid Tanh LeakyReLU HardTanh HardSwish Mish Softplus ELU
               elementwise  Add Multiply Divide Subtract (a scalar constant), Clamp
               norms        BatchNorm LayerNorm (last dim) GroupNorm InstanceNorm
               pooling      MaxPool AvgPool (2d/3d, kernel 2), GlobalAvgPool (adaptive to 1)
               bias         BiasAdd (a learned parameter broadcast over the channel or last dim)
               reductions   Sum Mean Max LogSumExp (keepdim, over a non-batch dim), Softmax

A tensor is (batch, *features): the batch dim is never reduced, normalized over or pooled, so a
task scales by its batch alone (`batch_size` in the file) and the shape rules see only `features`.

Sizes: each dimension is drawn as an index into a table with one row per size (`small`: a CPU test
size; `large`: a GPU size), so the same seed gives the same operator sequence at both sizes.

Dedupe vocabulary: `canonical` maps our names and KernelBench's file-name words to one class each,
merging near-synonyms so a near-copy of a KernelBench sequence is caught too (Gemm = Matmul =
Linear; Add = BiasAdd; Multiply = Scaling = Scale; Swish = SiLU; pool ranks dropped).
This module is plain data and string building; nothing here imports torch or runs a problem.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

SIZES = ("small", "large")

DIMS: dict[str, dict[str, tuple[int, ...]]] = {
    "channels_in": {"small": (3, 4, 8), "large": (3, 16, 32)},
    "channels_out": {"small": (8, 16, 12), "large": (64, 128, 96)},
    "spatial2d": {"small": (8, 12, 16), "large": (64, 96, 128)},
    "spatial3d": {"small": (5, 6, 8), "large": (16, 24, 32)},
    "features": {"small": (32, 48, 64), "large": (2048, 4096, 3072)},
}
"""Dimension tables, one row per size; a draw picks an index, the size picks the row."""

BATCH = {"small": 2, "large": 8}
"""Starting batch per size; the reference-time scale-up doubles it."""


def dim(rng: random.Random, table: str, size: str) -> int:
    return DIMS[table][size][rng.randrange(len(DIMS[table][size]))]


@dataclass(frozen=True)
class Step:
    """One drawn operator: its name in the file name, its lines in the problem, its output."""

    name: str
    init: tuple[str, ...]
    """Lines of `__init__` (after super().__init__()), `self.` attributes."""
    forward: str
    """One line of `forward`, reading and assigning `x`."""
    features: tuple[int, ...]
    """The tensor's shape after this step, batch dim excluded."""
    inputs: tuple[tuple[str, tuple[int | str, ...]], ...] = ()
    """Only expensive steps: (name, shape) of each input; `batch_size` where the batch goes."""
    describe: str = ""


@dataclass(frozen=True)
class Operator:
    name: str
    """The word in file names and manifests (`Conv2d`, `ReLU`, `Sum`)."""
    group: str
    """`expensive`, `activation`, `elementwise`, `norm`, `pool`, `bias` or `reduction`."""
    applies: Callable[[tuple[int, ...]], bool]
    draw: Callable[[random.Random, tuple[int, ...], str, str], Step]
    """(rng, features, size, attribute name) -> Step."""
    after_norm: bool = True
    """False for ops that would make a chain degenerate right after a norm or softmax (a mean of a
    normalized tensor is ~0, a sum of a softmax is 1)."""
    aliases: tuple[str, ...] = field(default=())


# ---------------------------------------------------------------------------------------------
# Expensive operators: they make the inputs


def _conv(rank: int, transpose: bool):
    spatial_table = "spatial2d" if rank == 2 else "spatial3d"
    kind = f"ConvTranspose{rank}d" if transpose else f"Conv{rank}d"

    def draw(rng, features, size, attr):
        cin, cout = dim(rng, "channels_in", size), dim(rng, "channels_out", size)
        side = dim(rng, spatial_table, size)
        if transpose:
            kernel, stride, padding = rng.choice(((3, 1, 1), (3, 2, 1), (4, 2, 1)))
            out_side = (side - 1) * stride - 2 * padding + kernel
            args = f"{cin}, {cout}, kernel_size={kernel}, stride={stride}, padding={padding}"
        else:
            kernel = rng.choice((3, 3, 5)) if rank == 2 else 3
            out_side = side - kernel + 1
            args = f"{cin}, {cout}, kernel_size={kernel}"
        return Step(
            name=kind,
            init=(f"self.{attr} = nn.{kind}({args})",),
            forward=f"x = self.{attr}(x)",
            features=(cout,) + (out_side,) * rank,
            inputs=(("x", ("batch_size", cin) + (side,) * rank),),
            describe=f"{kind}({args})",
        )

    return Operator(kind, "expensive", lambda f: False, draw)


def _gemm(rng, features, size, attr):
    k, n = dim(rng, "features", size), dim(rng, "features", size)
    return Step(
        "Gemm",
        (f"self.{attr} = nn.Linear({k}, {n})",),
        f"x = self.{attr}(x)",
        (n,),
        (("x", ("batch_size", k)),),
        f"Linear({k}, {n})",
    )


def _matmul(rng, features, size, attr):
    k, n = dim(rng, "features", size), dim(rng, "features", size)
    return Step(
        "Matmul",
        (),
        "x = torch.matmul(x, b)",
        (n,),
        (("x", ("batch_size", k)), ("b", (k, n))),
        f"x @ b, b of shape ({k}, {n})",
    )


def _bmm(rng, features, size, attr):
    m, k, n = (dim(rng, "features", size) // 8 for _ in range(3))
    return Step(
        "BMM",
        (),
        "x = torch.bmm(x, b)",
        (m, n),
        (("x", ("batch_size", m, k)), ("b", ("batch_size", k, n))),
        f"bmm with ({m}, {k}) x ({k}, {n})",
    )


EXPENSIVE: tuple[Operator, ...] = (
    _conv(2, False),
    _conv(3, False),
    _conv(2, True),
    _conv(3, True),
    Operator("Matmul", "expensive", lambda f: False, _matmul),
    Operator("Gemm", "expensive", lambda f: False, _gemm),
    Operator("BMM", "expensive", lambda f: False, _bmm),
)


# ---------------------------------------------------------------------------------------------
# Cheap operators


def _same(name: str, line: str, describe: str = ""):
    """A draw for an op that keeps the shape and has a fixed line (`{x}` the tensor)."""

    def draw(rng, features, size, attr):
        return Step(name, (), "x = " + line.format(x="x"), features, describe=describe or name)

    return draw


def _with_constant(name: str, line: str, constants: tuple):
    """A draw for a shape-keeping op with one drawn constant (or a tuple of them) `{c}`."""

    def draw(rng, features, size, attr):
        constant = rng.choice(constants)
        text = (
            line.format(x="x", c=constant)
            if not isinstance(constant, tuple)
            else line.format(x="x", c=constant[0], d=constant[1])
        )
        return Step(name, (), "x = " + text, features, describe=f"{name}({constant})")

    return draw


def _any(features: tuple[int, ...]) -> bool:
    return True


ACTIVATIONS: tuple[Operator, ...] = (
    Operator("ReLU", "activation", _any, _same("ReLU", "torch.relu({x})")),
    Operator("GELU", "activation", _any, _same("GELU", "F.gelu({x})")),
    Operator("Swish", "activation", _any, _same("Swish", "F.silu({x})"), aliases=("silu",)),
    Operator("Sigmoid", "activation", _any, _same("Sigmoid", "torch.sigmoid({x})")),
    Operator("Tanh", "activation", _any, _same("Tanh", "torch.tanh({x})")),
    Operator(
        "LeakyReLU",
        "activation",
        _any,
        _with_constant("LeakyReLU", "F.leaky_relu({x}, {c})", (0.01, 0.1, 0.2)),
    ),
    Operator(
        "HardTanh",
        "activation",
        _any,
        _with_constant("HardTanh", "F.hardtanh({x}, {c}, {d})", ((-1.0, 1.0), (-0.5, 0.5), (-2.0, 2.0))),
    ),
    Operator("HardSwish", "activation", _any, _same("HardSwish", "F.hardswish({x})")),
    Operator("Mish", "activation", _any, _same("Mish", "F.mish({x})")),
    Operator("Softplus", "activation", _any, _same("Softplus", "F.softplus({x})")),
    Operator("ELU", "activation", _any, _with_constant("ELU", "F.elu({x}, alpha={c})", (1.0, 0.5))),
)

ELEMENTWISE: tuple[Operator, ...] = (
    Operator("Add", "elementwise", _any, _with_constant("Add", "{x} + {c}", (0.5, -0.3, 1.0, 2.0))),
    Operator("Multiply", "elementwise", _any, _with_constant("Multiply", "{x} * {c}", (0.5, 1.5, 2.0, 3.0))),
    Operator("Divide", "elementwise", _any, _with_constant("Divide", "{x} / {c}", (2.0, 3.0, 0.5))),
    Operator("Subtract", "elementwise", _any, _with_constant("Subtract", "{x} - {c}", (0.5, 0.2, 1.0))),
    Operator(
        "Clamp",
        "elementwise",
        _any,
        _with_constant(
            "Clamp", "torch.clamp({x}, min={c}, max={d})", ((-1.0, 1.0), (-0.5, 0.5), (-2.0, 2.0))
        ),
    ),
)


def _spatial(features: tuple[int, ...]) -> int:
    """Elements per channel (1 for a (batch, C) tensor)."""
    count = 1
    for d in features[1:]:
        count *= d
    return count


def _batch_norm(rng, features, size, attr):
    rank = {1: "1d", 2: "1d", 3: "2d", 4: "3d"}[len(features)]
    line = f"self.{attr} = nn.BatchNorm{rank}({features[0]})"
    return Step(
        "BatchNorm", (line,), f"x = self.{attr}(x)", features, describe=f"BatchNorm{rank}({features[0]})"
    )


def _layer_norm(rng, features, size, attr):
    line = f"self.{attr} = nn.LayerNorm({features[-1]})"
    return Step("LayerNorm", (line,), f"x = self.{attr}(x)", features, describe=f"LayerNorm({features[-1]})")


def _group_norm(rng, features, size, attr):
    channels = features[0]
    groups = rng.choice(
        [g for g in (2, 4, 8) if channels % g == 0 and channels // g * _spatial(features) > 1]
    )
    line = f"self.{attr} = nn.GroupNorm({groups}, {channels})"
    return Step(
        "GroupNorm", (line,), f"x = self.{attr}(x)", features, describe=f"GroupNorm({groups}, {channels})"
    )


def _instance_norm(rng, features, size, attr):
    rank = {3: "2d", 4: "3d"}[len(features)]
    line = f"self.{attr} = nn.InstanceNorm{rank}({features[0]})"
    return Step("InstanceNorm", (line,), f"x = self.{attr}(x)", features, describe=f"InstanceNorm{rank}")


def _has_groups(features: tuple[int, ...]) -> bool:
    return len(features) >= 2 and any(
        features[0] % g == 0 and features[0] // g * _spatial(features) > 1 for g in (2, 4, 8)
    )


NORMS: tuple[Operator, ...] = (
    Operator(
        "BatchNorm", "norm", lambda f: len(f) in (1, 3, 4) or (len(f) == 2 and f[1] > 1), _batch_norm, False
    ),
    Operator("LayerNorm", "norm", lambda f: f[-1] > 1, _layer_norm, False),
    Operator("GroupNorm", "norm", _has_groups, _group_norm, False),
    Operator("InstanceNorm", "norm", lambda f: len(f) in (3, 4) and _spatial(f) > 1, _instance_norm, False),
)


def _pool(kind: str):
    def draw(rng, features, size, attr):
        rank = len(features) - 1
        out = (features[0],) + tuple(d // 2 for d in features[1:])
        return Step(
            kind,
            (),
            f"x = F.{kind.lower().replace('pool', '_pool')}{rank}d(x, kernel_size=2)",
            out,
            describe=f"{kind}{rank}d(2)",
        )

    return draw


def _global_pool(rng, features, size, attr):
    rank = len(features) - 1
    out = (features[0],) + (1,) * rank
    return Step(
        "GlobalAvgPool", (), f"x = F.adaptive_avg_pool{rank}d(x, 1)", out, describe="AdaptiveAvgPool(1)"
    )


def _poolable(features: tuple[int, ...]) -> bool:
    return len(features) in (3, 4) and all(d >= 4 for d in features[1:])


POOLS: tuple[Operator, ...] = (
    Operator("MaxPool", "pool", _poolable, _pool("MaxPool")),
    Operator("AvgPool", "pool", _poolable, _pool("AvgPool")),
    Operator(
        "GlobalAvgPool",
        "pool",
        lambda f: len(f) in (3, 4) and _spatial(f) > 1,
        _global_pool,
        False,
        aliases=("adaptiveavgpool",),
    ),
)


def _bias(rng, features, size, attr):
    # channel-wise for (C, spatial...) tensors, over the last dim for (F,) and BMM's (M, N)
    shape = (features[0],) + (1,) * (len(features) - 1) if len(features) in (3, 4) else (features[-1],)
    line = f"self.{attr} = nn.Parameter(torch.randn{shape})"
    return Step("BiasAdd", (line,), f"x = x + self.{attr}", features, describe=f"BiasAdd{shape}")


BIAS = (Operator("BiasAdd", "bias", _any, _bias, aliases=("bias",)),)


def _reduction_dim(features: tuple[int, ...], rng: random.Random) -> int:
    """A non-batch dim of size > 1 to reduce over (1-based in the tensor)."""
    return rng.choice([i + 1 for i, d in enumerate(features) if d > 1])


def _reduce(name: str, call: str):
    def draw(rng, features, size, attr):
        axis = _reduction_dim(features, rng)
        out = tuple(1 if i + 1 == axis else d for i, d in enumerate(features))
        return Step(name, (), "x = " + call.format(axis=axis), out, describe=f"{name}(dim={axis})")

    return draw


def _softmax(rng, features, size, attr):
    axis = _reduction_dim(features, rng)
    return Step("Softmax", (), f"x = torch.softmax(x, dim={axis})", features, describe=f"Softmax(dim={axis})")


def _reducible(features: tuple[int, ...]) -> bool:
    return any(d > 1 for d in features)


REDUCTIONS: tuple[Operator, ...] = (
    Operator("Sum", "reduction", _reducible, _reduce("Sum", "torch.sum(x, dim={axis}, keepdim=True)"), False),
    Operator(
        "Mean", "reduction", _reducible, _reduce("Mean", "torch.mean(x, dim={axis}, keepdim=True)"), False
    ),
    Operator(
        "Max", "reduction", _reducible, _reduce("Max", "torch.amax(x, dim={axis}, keepdim=True)"), False
    ),
    Operator(
        "LogSumExp",
        "reduction",
        _reducible,
        _reduce("LogSumExp", "torch.logsumexp(x, dim={axis}, keepdim=True)"),
        False,
    ),
    Operator("Softmax", "reduction", _reducible, _softmax, False),
)

CHEAP: tuple[Operator, ...] = ACTIVATIONS + ELEMENTWISE + NORMS + POOLS + BIAS + REDUCTIONS
CATALOGUE: dict[str, Operator] = {op.name: op for op in EXPENSIVE + CHEAP}
MAX_REDUCTIONS = 2
"""At most this many reductions per chain: past that the tensor is too small to be worth a kernel."""


def allowed_next(
    chain: tuple[str, ...], candidate: Operator, features: tuple[int, ...], reductions: int
) -> bool:
    """Whether `candidate` may follow the ops `chain` (names so far) on a tensor of `features`."""
    if candidate.name in chain or not candidate.applies(features):
        return False  # an op twice (ReLU after ReLU, two bias adds) adds nothing a kernel must learn
    previous = CATALOGUE[chain[-1]]
    if (previous.group == "norm" or previous.name == "Softmax") and not candidate.after_norm:
        return False
    if candidate.group == "reduction" and reductions >= MAX_REDUCTIONS:
        return False
    return True


# ---------------------------------------------------------------------------------------------
# The dedupe vocabulary


_SYNONYMS = {
    "conv2d": "conv2d",
    "conv3d": "conv3d",
    "convtranspose2d": "convtranspose2d",
    "convtranspose3d": "convtranspose3d",
    "gemm": "gemm",
    "matmul": "gemm",
    "linear": "gemm",
    "bmm": "bmm",
    "add": "add",
    "biasadd": "add",
    "bias": "add",
    "multiply": "multiply",
    "mul": "multiply",
    "scaling": "multiply",
    "scale": "multiply",
    "divide": "divide",
    "div": "divide",
    "subtract": "subtract",
    "sub": "subtract",
    "swish": "swish",
    "silu": "swish",
    "maxpool": "maxpool",
    "maxpool2d": "maxpool",
    "maxpool3d": "maxpool",
    "avgpool": "avgpool",
    "avgpool2d": "avgpool",
    "avgpool3d": "avgpool",
    "globalavgpool": "globalavgpool",
    "adaptiveavgpool": "globalavgpool",
    "hardtanh": "hardtanh",
    "batchnorm": "batchnorm",
    "layernorm": "layernorm",
    "groupnorm": "groupnorm",
    "instancenorm": "instancenorm",
}


def canonical(word: str) -> str:
    """The dedupe class of an operator word, ours or KernelBench's (`Scaling` -> `multiply`)."""
    lowered = word.lower()
    return _SYNONYMS.get(lowered, lowered)


def sequence_key(names: tuple[str, ...] | list[str]) -> str:
    """The dedupe key of an operator sequence: canonical classes joined by `-`."""
    return "-".join(canonical(n) for n in names if n)
