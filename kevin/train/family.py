"""A generated family of small kernel tasks for the learning run (issue #16), with a held-out split.

Every task is a KernelBench-convention problem (`class Model(nn.Module)`, `get_inputs()`,
`get_init_inputs()`) over float32 tensors of shape (rows, cols), of one of four kinds:

    act        a chain of 1-3 elementwise ops on x               y = op3(op2(op1(x)))
    residual   a residual add, then 0-2 elementwise ops          y = ops(x + r)
    rowreduce  0-2 elementwise ops, then sum/max/mean of a row   y = reduce(ops(x), dim=-1)
    softmax    0-2 elementwise ops, then softmax over a row      y = softmax(ops(x), dim=-1)

The elementwise ops (`OPS`): relu, gelu (tanh form), sigmoid, silu, tanh, scale (x * c), bias
(x + c) and leaky (leaky_relu with slope c); each has its PyTorch form (the reference runs one eager
kernel per op, so fusing them is where a custom kernel gains) and its C form (kevin.train.corpus
writes kernels from it).

The split holds out *unseen combinations*. A task's signature is its kind, its op names in order and
its reduction (constants and shapes aside). Held-out signatures never occur in training, and the
single-op tasks of every op, the plain reductions and the plain softmax are always training tasks, so
each held-out task combines pieces that training shows only apart. Shapes are drawn per task.

Sizes: like the bundled tasks, every file has one line `SIZE = "small"` and a `SIZES` table;
`write_family(..., size="large")` writes the GPU size (32-64M elements: about 0.05-0.3 ms per
eager op on an H200, so timing is not launch overhead) and `size="small"` a CPU size (a few thousand
elements) for tests. The folder holds the problem files `NN_<kind>_<ops>.py` (read by
`kevin.tasks.load_tasks`, ids `L0_NN`), `split.json` (for `loop.split`) and `family.json` (the specs,
which kevin.train.corpus reads). `kevin family --out DIR` writes one.

Row-reduction inputs are offset (uniform [0, 1) plus noise) so a row sum stays far from zero, where a
relative tolerance means nothing (as the bundled row sum does). This module writes problems; it does
not run them (tests/train validates every one on the CPU at the small size).
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kevin.errors import UsageError

KINDS = ("act", "residual", "rowreduce", "softmax")
REDUCTIONS = ("sum", "max", "mean")
SPLIT_FILE = "split.json"
SPEC_FILE = "family.json"

TRAIN_COUNTS = {"act": 16, "residual": 8, "rowreduce": 9, "softmax": 7}
"""Training tasks per kind by default (40)."""
HELDOUT_COUNTS = {"act": 3, "residual": 1, "rowreduce": 2, "softmax": 2}
"""Held-out tasks per kind by default (8)."""


def capacity(kind: str, heldout: int | None = None) -> int:
    """How many training signatures `kind` has once `heldout` (default: HELDOUT_COUNTS) are held out."""
    base, combos = _signature_pool(kind)
    return len(base) + len(combos) - (HELDOUT_COUNTS[kind] if heldout is None else heldout)


def train_counts(total: int, heldout: dict[str, int] | None = None) -> dict[str, int]:
    """Training tasks per kind for `total` tasks, in TRAIN_COUNTS's proportions (largest remainders
    first), no kind past its capacity once `heldout` (default HELDOUT_COUNTS) are held out (what a
    full kind cannot take goes to the others). More training tasks show the same pieces in more
    combinations: the warm start then copies a held-out task's op chain more often instead of
    recalling a training task's (120 tasks: the 26M model's held-out kernels were 12% correct on
    the H200, session 10)."""
    if total < len(KINDS):
        raise UsageError(f"--train-tasks {total}: need at least {len(KINDS)}, one task of each kind")
    held = HELDOUT_COUNTS if heldout is None else heldout
    room = {kind: capacity(kind, held.get(kind, 0)) for kind in KINDS}
    if total > sum(room.values()):
        raise UsageError(f"--train-tasks {total}: the family has {sum(room.values())} training signatures; ask for fewer")
    return _proportional(total, TRAIN_COUNTS, room)


def heldout_counts(total: int) -> dict[str, int]:
    """Held-out tasks per kind for `total`, in HELDOUT_COUNTS's proportions (8: the default; 16: 6
    act, 2 residual, 4 rowreduce, 4 softmax). More held-out tasks at fewer samples each measure the
    same evaluation budget on more unseen combinations: 4 samples of one task mostly agree, so 8
    tasks x 4 samples is nearer 8 draws than 32."""
    if total < len(KINDS):
        raise UsageError(f"--heldout-tasks {total}: use {len(KINDS)} or more")
    room = {kind: len(_signature_pool(kind)[1]) // 4 for kind in KINDS}  # held-out takes at most a quarter
    if total > sum(room.values()):
        raise UsageError(f"--heldout-tasks {total}: at most {sum(room.values())}; ask for fewer")
    return _proportional(total, HELDOUT_COUNTS, room)


def _proportional(total: int, weights: dict[str, int], room: dict[str, int]) -> dict[str, int]:
    """`total` split over KINDS in proportion to `weights` (largest remainders first), no kind past
    its `room`: what a full kind cannot take goes to the others. The caller checks `total` fits."""
    counts = dict.fromkeys(KINDS, 0)
    left = total
    while left:
        open_kinds = [kind for kind in KINDS if counts[kind] < room[kind]]
        weight = sum(weights[kind] for kind in open_kinds)
        exact = {kind: left * weights[kind] / weight for kind in open_kinds}
        share = {kind: min(room[kind] - counts[kind], int(exact[kind])) for kind in open_kinds}
        by_remainder = sorted(open_kinds, key=lambda kind: share[kind] - exact[kind])
        for kind in by_remainder[: max(0, left - sum(share.values()))]:
            if share[kind] < room[kind] - counts[kind]:
                share[kind] += 1
        for kind in open_kinds:
            counts[kind] += share[kind]
        left = total - sum(counts.values())
    return counts


SHAPES = {
    "act": [(4096, 8192), (8192, 4096), (16384, 2048), (2048, 16384)],
    "residual": [(4096, 8192), (8192, 4096), (16384, 2048)],
    "rowreduce": [(8192, 8192), (16384, 4096), (4096, 16384)],
    "softmax": [(8192, 4096), (4096, 8192), (16384, 2048)],
}
"""Large (GPU) shapes per kind: 32M elements (64M for row reductions, which only read)."""
SMALL_SHAPES = [(32, 256), (64, 128), (16, 512)]
"""Small (CPU) shapes: 8192 elements."""


@dataclass(frozen=True)
class Op:
    name: str
    torch_form: str
    """The reference's line, `{x}` the tensor and `{c}` the constant."""
    c_form: str
    """The kernel's expression of the float `v` (`{c}` the constant as a C float literal)."""
    constants: tuple[float, ...] = ()
    """Constants a task may use; empty for an op without one."""


OPS: dict[str, Op] = {
    op.name: op
    for op in (
        Op("relu", "torch.relu({x})", "fmaxf(v, 0.0f)"),
        Op(
            "gelu",
            'F.gelu({x}, approximate="tanh")',
            "0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)))",
        ),
        Op("sigmoid", "torch.sigmoid({x})", "1.0f / (1.0f + expf(-v))"),
        Op("silu", "F.silu({x})", "v / (1.0f + expf(-v))"),
        Op("tanh", "torch.tanh({x})", "tanhf(v)"),
        Op("scale", "{x} * {c}", "v * {c}", (0.5, 1.5, 2.0, 0.25, 3.0)),
        Op("bias", "{x} + {c}", "v + {c}", (0.1, -0.2, 0.5, 1.0, -0.5)),
        Op("leaky", "F.leaky_relu({x}, {c})", "v > 0.0f ? v : v * {c}", (0.01, 0.1, 0.2)),
    )
}


CONSTANT_POOLS = ("narrow", "wide")
"""Where tasks' constants are drawn from. `narrow`: each op's few `Op.constants` (3-5). `wide`: ~30-60
values per op (`WIDE_CONSTANTS`), so that a model which recalls an op's usual constant instead of
copying the prompt's is almost always wrong: with 3-5 values a guess is right a third to a fifth of
the time, and the CPU warm start's share of constants copied (0.32 at 800 steps, session 31) was
hardly above that."""
WIDE_CONSTANTS: dict[str, tuple[float, ...]] = {
    "scale": tuple(round(0.05 * k, 2) for k in range(1, 61) if k != 20),  # 0.05 .. 3.0, never 1.0
    "bias": tuple(round(sign * 0.05 * k, 2) for k in range(1, 31) for sign in (1, -1)),  # +-0.05 .. +-1.5
    "leaky": tuple(round(0.01 * k, 2) for k in range(1, 31)),  # 0.01 .. 0.3
}


CONSTANT_FORMS = ("literal", "init")
"""How a task hands its constants to the code. `literal`: written into the forward (`x * 1.5`), so a
kernel must copy each one from the prompt into its own source. `init`: the Model's constructor
arguments (`get_init_inputs()` returns them, `forward` reads `self.c0`), so a kernel takes them as
arguments and its source is the same for every draw, as KernelBench's level-2 problems pass their
scale factors. The learning run's 26M warm start never learned to copy a literal from a ~450-token
prompt (s28: 16 of 48 held-out kernels wrote another constant; s31-s38's probes: at or near the
guessing floor), which capped its correctness far under the corpus's; `init` takes copying out of
what the run measures (README, the learning run)."""


def checked_form(form: str) -> str:
    """`form` if it is one of CONSTANT_FORMS, else a UsageError."""
    if form not in CONSTANT_FORMS:
        raise UsageError(f"constant form {form!r}: use one of {', '.join(CONSTANT_FORMS)}")
    return form


def checked_pool(pool: str) -> str:
    """`pool` if it is one of CONSTANT_POOLS, else a UsageError."""
    if pool not in CONSTANT_POOLS:
        raise UsageError(f"constant pool {pool!r}: use one of {', '.join(CONSTANT_POOLS)}")
    return pool


def constant_choices(name: str, pool: str = "narrow") -> tuple[float, ...]:
    """The constants op `name` may take in `pool` (CONSTANT_POOLS); empty for an op without one."""
    if checked_pool(pool) == "wide" and OPS[name].constants:
        return WIDE_CONSTANTS[name]
    return OPS[name].constants


def c_float(value: float) -> str:
    """A C float literal: 1.5 -> `1.5f`, -0.2 -> `-0.2f`."""
    return f"{value!r}f"


@dataclass(frozen=True)
class TaskSpec:
    """One task of the family: what it computes and at which sizes."""

    number: int
    """Problem number: the file is `NN_<name>.py`, the task id `L0_NN`."""
    kind: str
    ops: tuple[tuple[str, float | None], ...]
    """Elementwise ops in order, each (name, constant or None)."""
    reduce: str
    """`sum`, `max` or `mean` for rowreduce; empty otherwise."""
    shape: tuple[int, int]
    """(rows, cols) at the large size."""
    small_shape: tuple[int, int]
    heldout: bool
    constant_form: str = "literal"
    """CONSTANT_FORMS: literals in the forward, or the Model's constructor arguments."""

    @property
    def constant_slots(self) -> list[int | None]:
        """Per op, its constant's place among the Model's constructor arguments with the `init` form
        (0, 1, ... in order; None for an op without one); all None with the `literal` form."""
        slots: list[int | None] = []
        taken = 0
        for _, constant in self.ops:
            if self.constant_form == "init" and constant is not None:
                slots.append(taken)
                taken += 1
            else:
                slots.append(None)
        return slots

    @property
    def constant_names(self) -> list[str | None]:
        """Per op, its constant's name in the code with the `init` form (`c0`, `c1`, ...), else None."""
        return [None if slot is None else f"c{slot}" for slot in self.constant_slots]

    @property
    def init_names(self) -> list[str]:
        """The Model's constructor arguments with the `init` form, in order (none with `literal`)."""
        return [name for name in self.constant_names if name is not None]

    @property
    def init_values(self) -> list[float]:
        """Their values, in the same order."""
        return [c for (_, c), slot in zip(self.ops, self.constant_slots) if slot is not None]

    @property
    def signature(self) -> tuple[str, tuple[str, ...], str]:
        """What the split holds out: the kind, the op names in order, the reduction."""
        return (self.kind, tuple(name for name, _ in self.ops), self.reduce)

    @property
    def name(self) -> str:
        parts = [self.kind, *(name for name, _ in self.ops)]
        return "_".join(parts + ([self.reduce] if self.reduce else []))

    @property
    def task_id(self) -> str:
        """The id `kevin.tasks.load_tasks` gives the file in a flat folder."""
        return f"L0_{self.number}"

    @property
    def filename(self) -> str:
        return f"{self.number:02d}_{self.name}.py"

    @property
    def inputs(self) -> tuple[str, ...]:
        return ("x", "r") if self.kind == "residual" else ("x",)

    def describe(self) -> str:
        """`gelu -> scale(1.5) -> relu` and the like: the task in words."""
        steps = ["x + r"] if self.kind == "residual" else []
        steps += [name if c is None else f"{name}({c!r})" for name, c in self.ops]
        if self.kind == "rowreduce":
            steps.append(f"row {self.reduce}")
        elif self.kind == "softmax":
            steps.append("row softmax")
        return " -> ".join(steps) or "identity"

    def source(self) -> str:
        """The problem file at the small size (`with_size` rewrites its SIZE line)."""
        return _problem_source(self)

    def to_dict(self) -> dict:
        data = {
            "number": self.number,
            "kind": self.kind,
            "ops": [[name, c] for name, c in self.ops],
            "reduce": self.reduce,
            "shape": list(self.shape),
            "small_shape": list(self.small_shape),
            "heldout": self.heldout,
        }
        if self.constant_form != "literal":  # literal families' records stay as they were written
            data["constant_form"] = self.constant_form
        return data

    @classmethod
    def from_dict(cls, data: dict) -> TaskSpec:
        return cls(
            number=int(data["number"]),
            kind=str(data["kind"]),
            ops=tuple((str(name), None if c is None else float(c)) for name, c in data["ops"]),
            reduce=str(data["reduce"]),
            shape=(int(data["shape"][0]), int(data["shape"][1])),
            small_shape=(int(data["small_shape"][0]), int(data["small_shape"][1])),
            heldout=bool(data["heldout"]),
            constant_form=checked_form(str(data.get("constant_form", "literal"))),
        )


# ---------------------------------------------------------------------------------------------
# The problem file


def _forward_lines(spec: TaskSpec) -> list[str]:
    lines = ["x = x + r"] if spec.kind == "residual" else []
    for (name, constant), init_name in zip(spec.ops, spec.constant_names):
        op = OPS[name]
        value = repr(constant) if init_name is None else f"self.{init_name}"
        lines.append("x = " + op.torch_form.format(x="x", c=value))
    if spec.kind == "rowreduce":
        reducer = {
            "sum": "torch.sum(x, dim=-1)",
            "max": "torch.amax(x, dim=-1)",
            "mean": "torch.mean(x, dim=-1)",
        }
        lines.append("return " + reducer[spec.reduce])
    elif spec.kind == "softmax":
        lines.append("return torch.softmax(x, dim=-1)")
    else:
        lines.append("return x")
    return lines


def _problem_source(spec: TaskSpec) -> str:
    if spec.kind == "rowreduce":
        draw = "torch.rand(ROWS, COLS) + 0.5 * torch.randn(ROWS, COLS)"
    else:
        draw = "torch.randn(ROWS, COLS)"
    inputs = ", ".join([draw] * len(spec.inputs))
    body = "\n".join(f"        {line}" for line in _forward_lines(spec))
    small, large = spec.small_shape, spec.shape
    names = spec.init_names
    init = "".join(f"\n        self.{name} = {name}" for name in names)
    init_inputs = ", ".join(repr(value) for value in spec.init_values)
    # No task number in the text: with one, every training prompt carried a key that alone named its
    # op chain (the 26M warm start could look the chain up instead of reading the forward), and
    # held-out numbers are keys it never saw (s16: 12 of 32 held-out kernels wrote another chain).
    return f'''"""Family task: {spec.describe()}."""

import torch
import torch.nn as nn
import torch.nn.functional as F

SIZE = "small"
SIZES = {{"small": ({small[0]}, {small[1]}), "large": ({large[0]}, {large[1]})}}
ROWS, COLS = SIZES[SIZE]


class Model(nn.Module):
    def __init__({", ".join(["self", *names])}):
        super().__init__(){init}

    def forward(self, {", ".join(spec.inputs)}):
{body}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return [{init_inputs}]
'''


# ---------------------------------------------------------------------------------------------
# Generating a family


def _chains(max_length: int, min_length: int = 0) -> list[tuple[str, ...]]:
    """Op-name chains of distinct ops, shortest first, in a fixed order."""
    names = sorted(OPS)
    chains: list[tuple[str, ...]] = []
    for length in range(min_length, max_length + 1):
        chains += list(itertools.permutations(names, length))
    return chains


def _signature_pool(kind: str) -> tuple[list[tuple], list[tuple]]:
    """(base signatures: always training; combinations: either side) of one kind."""
    if kind == "act":
        base = [("act", chain, "") for chain in _chains(1, 1)]
        combos = [("act", chain, "") for chain in _chains(3, 2)]
    elif kind == "residual":
        base = [("residual", (), "")]
        combos = [("residual", chain, "") for chain in _chains(2, 1)]
    elif kind == "rowreduce":
        base = [("rowreduce", (), reduce) for reduce in REDUCTIONS]
        combos = [("rowreduce", chain, reduce) for chain in _chains(2, 1) for reduce in REDUCTIONS]
    else:
        base = [("softmax", (), "")]
        combos = [("softmax", chain, "") for chain in _chains(2, 1)]
    return base, combos


def _pick(rng: random.Random, pool: list[tuple], count: int) -> list[tuple]:
    """`count` signatures from `pool`, chain lengths taking turns (shortest first), seeded."""
    by_length: dict[int, list[tuple]] = {}
    for signature in pool:
        by_length.setdefault(len(signature[1]), []).append(signature)
    queues = [by_length[length] for length in sorted(by_length)]
    for queue in queues:
        rng.shuffle(queue)
    picked: list[tuple] = []
    while len(picked) < count and any(queues):
        for queue in queues:
            if queue and len(picked) < count:
                picked.append(queue.pop())
    return picked


def _signatures(kind: str, rng: random.Random, train: int, heldout: int) -> tuple[list[tuple], list[tuple]]:
    base, combos = _signature_pool(kind)
    held = _pick(rng, combos, heldout)
    rest = [s for s in combos if s not in held]
    extra = max(0, train - len(base))
    if len(rest) < extra:
        raise UsageError(
            f"the {kind} family has only {len(base) + len(rest)} training signatures; ask for fewer"
        )
    training = base[:train] + _pick(rng, rest, extra)
    return training, held


def _constant(rng: random.Random, name: str, pool: str) -> float | None:
    choices = constant_choices(name, pool)
    return rng.choice(choices) if choices else None


def generate_family(
    seed: int = 0,
    *,
    train_counts: dict[str, int] | None = None,
    heldout_counts: dict[str, int] | None = None,
    constant_pool: str = "narrow",
    constant_form: str = "literal",
) -> list[TaskSpec]:
    """The family for `seed`: training tasks first, then held-out ones, numbered from 1. The same
    seed, counts and `constant_pool` (CONSTANT_POOLS) always give the same specs; the narrow pool's
    are those of every family written before the wide one existed. `constant_form` (CONSTANT_FORMS)
    changes how the files and kernels carry the constants, never which tasks are drawn."""
    checked_pool(constant_pool)  # before anything is drawn
    checked_form(constant_form)
    train_counts = dict(TRAIN_COUNTS if train_counts is None else train_counts)
    heldout_counts = dict(HELDOUT_COUNTS if heldout_counts is None else heldout_counts)
    unknown = sorted((set(train_counts) | set(heldout_counts)) - set(KINDS))
    if unknown:
        raise UsageError(f"unknown task kind(s) {unknown}; use {', '.join(KINDS)}")
    rng = random.Random(seed)
    chosen: list[tuple[tuple, bool]] = []
    for kind in KINDS:
        training, held = _signatures(kind, rng, train_counts.get(kind, 0), heldout_counts.get(kind, 0))
        chosen += [(s, False) for s in training] + [(s, True) for s in held]
    chosen.sort(key=lambda item: item[1])  # training tasks first, each side in kind order
    specs = []
    for number, ((kind, chain, reduce), heldout) in enumerate(chosen, start=1):
        specs.append(
            TaskSpec(
                number=number,
                kind=kind,
                ops=tuple((name, _constant(rng, name, constant_pool)) for name in chain),
                reduce=reduce,
                shape=rng.choice(SHAPES[kind]),
                small_shape=rng.choice(SMALL_SHAPES),
                heldout=heldout,
                constant_form=constant_form,
            )
        )
    return specs


def is_combination(spec: TaskSpec) -> bool:
    """Whether `spec` combines pieces (a chain of ops, ops before a reduction or softmax, a residual
    with ops), as every held-out task does; single ops, plain reductions, the plain softmax and the
    plain residual are the pieces themselves."""
    base, _ = _signature_pool(spec.kind)
    return spec.signature not in base


def rl_only_ids(specs: Sequence[TaskSpec], count: int, seed: int = 0) -> list[str]:
    """`count` training tasks, all combinations, kept out of the warm-start corpus for the RL phase
    alone (the learning run's --rl-tasks), drawn with a seeded generator, in task order. RL on tasks
    the warm start memorised rewards the choice of variant only; on combinations it has never seen,
    a kernel is right only when the policy reads the prompt's ops and constants, which is what the
    held-out tasks ask."""
    pool = [spec for spec in specs if not spec.heldout and is_combination(spec)]
    if count > len(pool):
        raise UsageError(
            f"--rl-tasks {count}: the family has {len(pool)} training combinations; ask for fewer "
            "or for more training tasks"
        )
    chosen = set(random.Random(seed ^ 0x5EED).sample([spec.task_id for spec in pool], count))
    return [spec.task_id for spec in specs if spec.task_id in chosen]


def write_family(
    directory: str | Path, specs: Sequence[TaskSpec], *, size: str = "large", constant_pool: str = "narrow"
) -> Path:
    """The problem files at `size`, `split.json` and `family.json` in `directory` (created; files of
    another family there are an error). `constant_pool`: the pool `specs` were drawn from, recorded
    for the corpus's other draws (`read_constant_pool`)."""
    from kevin.tasks import with_size

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    stale = [p.name for p in directory.glob("*.py") if p.name not in {s.filename for s in specs}]
    if stale:
        raise UsageError(
            f"{directory} holds other problem files ({stale[:3]}); write the family to an empty folder"
        )
    for spec in specs:
        (directory / spec.filename).write_text(with_size(spec.source(), size), encoding="utf-8")
    split = {
        "train": [s.task_id for s in specs if not s.heldout],
        "holdout": [s.task_id for s in specs if s.heldout],
    }
    (directory / SPLIT_FILE).write_text(json.dumps(split, indent=2) + "\n", encoding="utf-8")
    record = {"size": size, "constant_pool": constant_pool, "tasks": [s.to_dict() for s in specs]}
    (directory / SPEC_FILE).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return directory


def read_family(directory: str | Path) -> list[TaskSpec]:
    """The specs `write_family` recorded in `directory`."""
    path = Path(directory) / SPEC_FILE
    if not path.is_file():
        raise UsageError(
            f"no {SPEC_FILE} in {directory}; write the family first with `kevin family --out DIR`"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path} is not valid JSON ({exc.msg}); write the family again") from exc
    return [TaskSpec.from_dict(item) for item in data["tasks"]]


def read_constant_pool(directory: str | Path) -> str:
    """The constant pool a written family was drawn from (`narrow` for one written before pools)."""
    data = json.loads((Path(directory) / SPEC_FILE).read_text(encoding="utf-8"))
    return checked_pool(data.get("constant_pool", "narrow"))


def load_family(directory: str | Path):
    """(specs, train tasks, held-out tasks) of a written family, loaded through kevin.tasks."""
    from kevin.tasks import load_tasks, split_from_file

    specs = read_family(directory)
    split = split_from_file(load_tasks(str(directory)), Path(directory) / SPLIT_FILE)
    return specs, list(split.train), list(split.holdout)


# ---------------------------------------------------------------------------------------------
# `kevin family`


def _run(args: argparse.Namespace) -> int:
    counts = train_counts(args.train_tasks)
    specs = generate_family(
        args.seed, train_counts=counts, constant_pool=args.constant_pool, constant_form=args.constant_form
    )
    directory = write_family(args.out, specs, size=args.size, constant_pool=args.constant_pool)
    held = [s for s in specs if s.heldout]
    print(
        f"kevin family: {len(specs) - len(held)} training and {len(held)} held-out tasks ({args.size}) in {directory}"
    )
    for spec in specs:
        print(
            f"  {spec.task_id:6s} {'held-out' if spec.heldout else 'train':8s} {spec.describe()}  {spec.shape}"
        )
    return 0


def register_commands(subparsers) -> None:
    parser = subparsers.add_parser(
        "family",
        help="write the generated task family of the learning run (elementwise, reductions, softmax)",
        description="Write a generated family of small kernel tasks with a held-out split of unseen op "
        "combinations: problem files, split.json (for loop.split) and family.json (for kevin sft).",
    )
    parser.add_argument("--out", required=True, help="folder to write (empty or absent)")
    parser.add_argument("--seed", type=int, default=0, help="family seed (default 0)")
    parser.add_argument(
        "--train-tasks",
        type=int,
        default=sum(TRAIN_COUNTS.values()),
        help=f"training tasks (default {sum(TRAIN_COUNTS.values())}; held-out tasks stay 8)",
    )
    parser.add_argument(
        "--size",
        choices=("small", "large"),
        default="large",
        help="input size: large (GPU, default) or small (CPU)",
    )
    parser.add_argument(
        "--constant-pool",
        choices=CONSTANT_POOLS,
        default="narrow",
        help="constants per op: narrow (3-5, default) or wide (30-60: copying the prompt's is the only way)",
    )
    parser.add_argument(
        "--constant-form",
        choices=CONSTANT_FORMS,
        default="literal",
        help="literal: constants written in the forward (default); init: the Model's constructor arguments",
    )
    parser.set_defaults(run=_run)
