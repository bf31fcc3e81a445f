"""The training-task generator: fresh fusion tasks, reproducible and held out from KernelBench (#18).

After the paper's App. A.2: each task is one expensive operator followed by 2-5 cheap ones, drawn
from kevin.tasks.operators (which also holds the shape rules that make every chain compose).

    kevin tasks generate --n N --seed S --out DIR [--size small|large] [--min-ms X --device D]

1. Draw. Task attempt `a` of seed `S` draws from `random.Random("kevin-generate:S:a")` alone, so a
   task is reproducible by itself; attempts run 0, 1, 2, ... until N tasks are kept. A draw is
   rejected when its operator sequence (`operators.sequence_key`, synonyms merged) occurs in
   KernelBench level 1 or 2, read from each problem's forward code and from its file name
   (kevin.tasks.dedupe; the manifest counts what each source rejected), or earlier in this set.
2. Validate (default on): every problem goes through `kevin tasks validate` (own process; import,
   run, nondeterministic, degenerate); failures are dropped and listed in the manifest.
3. Measure (with `--min-ms`): the eager reference is timed on `--device` (warm-up, then the median
   of repeats); below `min_ms` the batch doubles (kevin.tasks.scaling), until it passes, the estimated
   footprint would pass the memory budget, or `MAX_DOUBLINGS`; a task that cannot reach it is dropped.
4. Write: `NNNN_<Op>_<Op>....py` (KernelBench format: `Model`, `get_inputs`, `get_init_inputs`,
   a `batch_size` constant; loaded from a flat folder as level 0, ids `L0_N`), `manifest.json` (per
   task: id, file, seed, ops, sequence key, input and output shapes, batch size, reference_ms or
   null, validation status; the dedupe sources' sizes and rejections; dropped attempts and why) and
   `split.json` (train/holdout by whole operator sequence, `splits.split_generated`).

Deterministic: same seed, size and outcomes give byte-identical files (no timestamps, no paths, no
dict-order or hash-seed dependence). Measured times are the one part that varies run to run.
What it does not do: write kernels for the tasks, or check that an op chain is *interesting* beyond
"not degenerate" (validate's checks).
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from kevin.errors import UsageError
from kevin.tasks import operators, validate
from kevin.tasks.dedupe import Dedupe, kernelbench_sequences, load_kernelbench
from kevin.tasks.journal import Journal
from kevin.tasks.operators import BATCH, CATALOGUE, CHEAP, EXPENSIVE, SIZES, Step
from kevin.tasks.probe import GIB, ValidateSettings
from kevin.tasks.records import Task
from kevin.tasks.scaling import double_until_min_ms, measure_reference_ms
from kevin.tasks.splits import PAPER_HOLDOUT_FRACTION, split_generated

MANIFEST_FILE = "manifest.json"
SPLIT_FILE = "split.json"
GENERATOR_VERSION = 1
"""Bumped whenever the same seed would draw different tasks."""
CHEAP_COUNTS = (2, 3, 4, 5)
MAX_ATTEMPTS_PER_TASK = 50
"""Give up when a set needs more than this many attempts per task asked for."""


@dataclass(frozen=True)
class GeneratedTask:
    """One drawn task: its steps (expensive first) and where it came from."""

    seed: int
    attempt: int
    size: str
    steps: tuple[Step, ...]
    batch_size: int
    number: int = 0
    """Position in the written set (1-based), 0 until kept."""
    reference_ms: float | None = None
    status: str = ""

    @property
    def ops(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.steps)

    @property
    def key(self) -> str:
        return operators.sequence_key(self.ops)

    @property
    def task_id(self) -> str:
        return f"L0_{self.number}"

    @property
    def filename(self) -> str:
        return f"{self.number:04d}_{'_'.join(self.ops)}.py"

    def input_shapes(self) -> list[list[int]]:
        return [
            [self.batch_size if d == "batch_size" else d for d in shape] for _, shape in self.steps[0].inputs
        ]

    def output_shape(self) -> list[int]:
        return [self.batch_size, *self.steps[-1].features]

    def source(self) -> str:
        return render(self)

    def as_task(self) -> Task:
        name = "_".join(self.ops)
        return Task.from_source(
            self.source(), id=self.task_id, name=name, level=0, problem=self.number, origin="generated"
        )

    def manifest_entry(self) -> dict:
        return {
            "id": self.task_id,
            "file": self.filename,
            "seed": f"{self.seed}:{self.attempt}",
            "ops": list(self.ops),
            "steps": [s.describe for s in self.steps],
            "sequence": self.key,
            "input_shapes": self.input_shapes(),
            "output_shape": self.output_shape(),
            "batch_size": self.batch_size,
            "reference_ms": self.reference_ms,
            "validation": self.status or None,
        }


# ---------------------------------------------------------------------------------------------
# Drawing


def draw_task(seed: int, attempt: int, size: str = "small") -> GeneratedTask:
    """Attempt `attempt` of seed `seed`: an expensive op and 2-5 cheap ones whose shapes compose."""
    if size not in SIZES:
        raise UsageError(f"unknown size {size!r}; use one of: {', '.join(SIZES)}")
    rng = random.Random(f"kevin-generate:{seed}:{attempt}")
    first = EXPENSIVE[rng.randrange(len(EXPENSIVE))]
    steps = [first.draw(rng, (), size, "op0")]
    reductions = 0
    for position in range(1, rng.choice(CHEAP_COUNTS) + 1):
        features = steps[-1].features
        names = tuple(s.name for s in steps)
        choices = [op for op in CHEAP if operators.allowed_next(names, op, features, reductions)]
        if not choices:
            break
        # groups first, then an op of the group, so the 11 activations do not crowd out the rest
        groups = sorted({op.group for op in choices})
        group = groups[rng.randrange(len(groups))]
        members = [op for op in choices if op.group == group]
        op = members[rng.randrange(len(members))]
        steps.append(op.draw(rng, features, size, f"op{position}"))
        reductions += op.group == "reduction"
    return GeneratedTask(seed=seed, attempt=attempt, size=size, steps=tuple(steps), batch_size=BATCH[size])


def _shape_text(shape: Sequence[int | str]) -> str:
    return ", ".join(str(d) for d in shape)


def render(task: GeneratedTask) -> str:
    """The problem file in KernelBench format (inputs drawn on the CPU in fp32, as KernelBench does)."""
    expensive = task.steps[0]
    init = [line for step in task.steps for line in step.init] or ["pass"]
    forward = [step.forward for step in task.steps]
    arguments = ", ".join(name for name, _ in expensive.inputs)
    inputs = ", ".join(f"torch.randn({_shape_text(shape)})" for _, shape in expensive.inputs)
    chain = " -> ".join(step.describe for step in task.steps)
    init_text = "\n".join(f"        {line}" for line in init)
    forward_text = "\n".join(f"        {line}" for line in forward)
    return f'''"""Generated task (kevin tasks generate v{GENERATOR_VERSION}, seed {task.seed}:{task.attempt}, {task.size}):
{chain}."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = {task.batch_size}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
{init_text}

    def forward(self, {arguments}):
{forward_text}
        return x


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
'''


# ---------------------------------------------------------------------------------------------
# KernelBench dedupe


def draw_candidates(seed: int, size: str, dedupe: Dedupe, start: int = 0):
    """Attempts `start`, `start`+1, ... of 3+ ops whose sequence `dedupe` admits (and then takes)."""
    attempt = start
    while True:
        task = draw_task(seed, attempt, size)
        attempt += 1
        if len(task.steps) >= 3 and dedupe.admit(task.key):
            yield task


# ---------------------------------------------------------------------------------------------
# Reference time


def footprint_bytes(task: GeneratedTask) -> int:
    """Inputs + parameters + every intermediate, in fp32 bytes: an upper bound on what a forward holds."""
    elements = sum(_count(shape) for shape in task.input_shapes())
    elements += sum(task.batch_size * _count(step.features) for step in task.steps)
    return 4 * elements


def _count(shape: Sequence[int]) -> int:
    total = 1
    for d in shape:
        total *= d
    return total


def scale_to_min_ms(
    task: GeneratedTask,
    *,
    min_ms: float,
    device: str,
    budget_bytes: int,
    measure: Callable[..., float] | None = None,
) -> tuple[GeneratedTask, str]:
    """The task with its batch doubled until the reference takes > `min_ms`; reason empty when it made it."""
    scaled = double_until_min_ms(
        task,
        source=GeneratedTask.source,
        footprint_bytes=footprint_bytes,
        grow=lambda t: replace(t, batch_size=t.batch_size * 2),
        describe=lambda t: f"batch {t.batch_size}",
        min_ms=min_ms,
        device=device,
        budget_bytes=budget_bytes,
        measure=measure,
    )
    return replace(scaled.size, reference_ms=scaled.reference_ms), scaled.reason


# ---------------------------------------------------------------------------------------------
# The whole set


@dataclass(frozen=True)
class GenerateOptions:
    n: int
    seed: int = 0
    size: str = "small"
    validate: bool = True
    min_ms: float | None = None
    """Keep only tasks whose reference runs above this on `device` (None: do not measure)."""
    device: str = "cpu"
    budget_gib: float | None = None
    """Footprint limit of the scale-up (default: validate's per-device budget)."""
    kernelbench: str | None = None
    """KernelBench folder for the dedupe (default: kevin.tasks.kernelbench_dir())."""
    timeout_s: float = 60.0
    jobs: int = 2
    holdout_fraction: float = PAPER_HOLDOUT_FRACTION
    journal: str | None = None
    """File that keeps each validation and measurement as it is known (kevin.tasks.journal), so a
    cut run goes on where it stopped; `kevin tasks generate` keeps it in --out until the set is written."""

    def journal_header(self) -> dict:
        """What changes a task's outcome: a journal made with other values is not reused."""
        fields = ("seed", "size", "validate", "min_ms", "device", "budget_gib", "kernelbench", "timeout_s")
        return {"generator": GENERATOR_VERSION, **{name: getattr(self, name) for name in fields}}


def check_options(options: GenerateOptions) -> None:
    if options.n < 1:
        raise UsageError(f"--n must be at least 1, got {options.n}")
    if options.size not in SIZES:
        raise UsageError(f"unknown --size {options.size!r}; use one of: {', '.join(SIZES)}")
    if options.min_ms is not None and options.min_ms <= 0:
        raise UsageError(f"--min-ms must be positive, got {options.min_ms:g}")
    if options.device not in ("cpu", "cuda"):
        raise UsageError(f"unknown --device {options.device!r}; use cpu or cuda")
    if options.jobs < 1 or options.timeout_s <= 0:
        raise UsageError("--jobs must be at least 1 and --timeout-s positive")


def _note(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


JOURNAL_FILE = ".generate_journal.jsonl"
"""In --out while a set is being made (kevin.tasks.journal): rerun the same command to go on."""


def _journal_key(task: GeneratedTask) -> str:
    return f"{task.seed}:{task.attempt}"


def validate_candidates(
    tasks: Sequence[GeneratedTask], options: GenerateOptions, journal: Journal | None = None
) -> tuple[list[GeneratedTask], list[tuple[GeneratedTask, str]]]:
    """(kept with status ok, [(dropped, why)]) after `kevin tasks validate` on each problem; those
    `journal` already holds are not validated again, the others go into it as they finish."""
    settings = ValidateSettings(
        device=options.device if options.device == "cpu" else "cuda",
        timeout_s=options.timeout_s,
        budget_bytes=int((options.budget_gib or validate.DEFAULT_BUDGET_GIB[options.device]) * GIB),
        seed=0,
        threads=1,
    )
    known = sum(1 for t in tasks if journal and journal.get("validate", _journal_key(t)))
    if known:
        _note(f"  validate: {known} of {len(tasks)} from {journal.path.name} (an earlier run)")
    records = [(_journal_key(t), replace(t, number=i + 1).as_task()) for i, t in enumerate(tasks)]
    outcomes = validate.validate_journaled(
        records, settings, journal, jobs=options.jobs, label=lambda result: result.name
    )
    kept, dropped = [], []
    for task, outcome in zip(tasks, outcomes, strict=True):
        status, reason = outcome["status"], outcome["reason"]
        if status == "ok":
            kept.append(replace(task, status="ok"))
        else:
            dropped.append((replace(task, status=status), f"{status}: {reason}"))
    return kept, dropped


def _measured(task: GeneratedTask, options: GenerateOptions, budget: int, journal: Journal | None):
    """`scale_to_min_ms` of the task, or what `journal` says it gave."""
    saved = journal.get("measure", _journal_key(task)) if journal else None
    if saved:
        return replace(task, batch_size=saved["batch_size"], reference_ms=saved["reference_ms"]), saved["why"]
    scaled, why = scale_to_min_ms(task, min_ms=options.min_ms, device=options.device, budget_bytes=budget)
    if journal is not None:
        outcome = {"batch_size": scaled.batch_size, "reference_ms": scaled.reference_ms, "why": why}
        journal.put("measure", _journal_key(task), outcome)
    return scaled, why


def generate_set(options: GenerateOptions) -> dict:
    """Draw, validate and (optionally) measure until `options.n` tasks are kept.

    Returns {"tasks": kept GeneratedTasks numbered 1..n, "dropped": [(task, why)], "dedupe": size of
    the KernelBench sequence set, "dedupe_report": `Dedupe.report()`}.
    """
    check_options(options)
    journal = Journal(options.journal, options.journal_header()) if options.journal else None
    if journal is not None and len(journal):
        _note(f"kevin tasks generate: going on from {journal.path} ({len(journal)} outcomes kept)")
    dedupe = Dedupe(load_kernelbench(options.kernelbench))
    candidates = draw_candidates(options.seed, options.size, dedupe)
    budget = int((options.budget_gib or validate.DEFAULT_BUDGET_GIB[options.device]) * GIB)
    kept: list[GeneratedTask] = []
    dropped: list[tuple[GeneratedTask, str]] = []
    attempts = 0
    while len(kept) < options.n:
        batch = []
        while len(batch) < options.n - len(kept):
            batch.append(next(candidates))
        attempts = batch[-1].attempt + 1
        if attempts > MAX_ATTEMPTS_PER_TASK * options.n:
            raise UsageError(
                f"only {len(kept)} of {options.n} tasks survived {attempts} attempts; ask for fewer"
            )
        _note(f"kevin tasks generate: drew {len(batch)} task(s) (attempts up to {attempts - 1})")
        if options.validate:
            batch, failed = validate_candidates(batch, options, journal)
            dropped += failed
        for task in batch:
            if options.min_ms is not None:
                scaled, why = _measured(task, options, budget, journal)
                _note(
                    f"  measure {'_'.join(task.ops)}: batch {scaled.batch_size}, {scaled.reference_ms} ms {why}"
                )
                if why:
                    dropped.append((scaled, f"too fast: {why}"))
                    continue
                task = scaled
            kept.append(task)
    tasks = [replace(t, number=i + 1) for i, t in enumerate(kept[: options.n])]
    return {
        "tasks": tasks,
        "dropped": dropped,
        "dedupe": len(dedupe.kernelbench.keys),
        "dedupe_report": dedupe.report(),
    }


def manifest(result: dict, options: GenerateOptions) -> dict:
    return {
        "generator": f"kevin tasks generate v{GENERATOR_VERSION}",
        "seed": options.seed,
        "size": options.size,
        "level": 0,
        "kernelbench_dedupe_sequences": result["dedupe"],
        "kernelbench_dedupe": result["dedupe_report"],
        "validated": options.validate,
        "min_ms": options.min_ms,
        "device": options.device if options.min_ms is not None else None,
        "tasks": [t.manifest_entry() for t in result["tasks"]],
        "dropped": [
            {"seed": f"{t.seed}:{t.attempt}", "ops": list(t.ops), "why": why} for t, why in result["dropped"]
        ],
    }


def write_set(directory: str | Path, result: dict, options: GenerateOptions) -> Path:
    """The problem files, manifest.json and split.json in `directory` (created; must hold no problems)."""
    directory = Path(directory)
    if directory.is_file():
        raise UsageError(f"--out {directory} is a file; pass a folder")
    directory.mkdir(parents=True, exist_ok=True)
    if any(directory.glob("*.py")):
        raise UsageError(f"{directory} already holds problem files; write the set to an empty folder")
    tasks = result["tasks"]
    for task in tasks:
        (directory / task.filename).write_text(task.source(), encoding="utf-8")
    (directory / MANIFEST_FILE).write_text(
        json.dumps(manifest(result, options), indent=1) + "\n", encoding="utf-8"
    )
    split = split_generated(
        [t.as_task() for t in tasks],
        {t.task_id: t.key for t in tasks},
        holdout_fraction=options.holdout_fraction,
        seed=options.seed,
    )
    (directory / SPLIT_FILE).write_text(json.dumps(split.to_dict(), indent=2) + "\n", encoding="utf-8")
    return directory


def read_sequences(directory: str | Path) -> dict[str, str]:
    """Task id -> operator-sequence key of a written set (for `splits.split_by_name(..., "generated")`)."""
    path = Path(directory) / MANIFEST_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise UsageError(f"cannot read {path} ({exc}); generate the set with 'kevin tasks generate'") from exc
    return {entry["id"]: entry["sequence"] for entry in data["tasks"]}


# ---------------------------------------------------------------------------------------------
# Command line


def run_generate(args) -> int:
    """`kevin tasks generate`: 0 when the set is written, 2 on bad input."""
    options = GenerateOptions(
        n=args.n,
        seed=args.seed,
        size=args.size,
        validate=args.validate,
        min_ms=args.min_ms,
        device=args.device,
        budget_gib=args.budget_gib,
        kernelbench=args.kernelbench,
        jobs=args.jobs,
        timeout_s=args.timeout_s,
        journal=str(Path(args.out) / JOURNAL_FILE),
    )
    check_options(options)
    if options.kernelbench is not None and not Path(options.kernelbench).is_dir():
        raise UsageError(
            f"--kernelbench {options.kernelbench} is not a folder; pass the KernelBench data folder"
        )
    out = Path(args.out)
    if out.is_dir() and any(out.glob("*.py")):
        raise UsageError(f"{out} already holds problem files; write the set to an empty folder")
    if options.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UsageError("--device cuda but no CUDA GPU is visible; use --device cpu")
    result = generate_set(options)
    write_set(out, result, options)
    Path(options.journal).unlink(missing_ok=True)  # the set is whole: nothing left to go on from
    if result["dedupe"] == 0:
        print(
            "note: no KernelBench files found, so no sequence was checked against KernelBench "
            "(set KEVIN_KERNELBENCH_DIR or --kernelbench); the manifest records 0"
        )
    else:
        report = result["dedupe_report"]
        rejected = ", ".join(f"{n} {source}" for source, n in report["rejected"].items())
        print(
            f"checked against {result['dedupe']} KernelBench level 1-2 operator sequences "
            f"({report['forward_code_sequences']} read from {report['forwards_read']} forwards, "
            f"{report['file_name_sequences']} from file names); candidates rejected: {rejected}"
        )
    for task in result["tasks"]:
        timing = f"  {task.reference_ms} ms" if task.reference_ms is not None else ""
        print(f"  {task.task_id:7s} {' -> '.join(task.ops)}  out {task.output_shape()}{timing}")
    for task, why in result["dropped"]:
        print(f"  dropped {task.seed}:{task.attempt} {'_'.join(task.ops)}: {why}")
    print(f"kevin tasks generate: {len(result['tasks'])} task(s), {len(result['dropped'])} dropped, in {out}")
    return 0


def add_parser(subparsers) -> None:
    """Add `generate` to the `kevin tasks` subcommands."""
    parser = subparsers.add_parser(
        "generate",
        help="write a fresh set of fusion tasks (expensive op + 2-5 cheap ones), none from KernelBench",
        description="Generate KernelBench-format fusion tasks, validated, deduplicated against "
        "KernelBench L1/L2, optionally scaled until the eager reference takes > --min-ms.",
    )
    parser.add_argument("--n", type=int, required=True, help="tasks to keep")
    parser.add_argument("--seed", type=int, default=0, help="set seed (default 0)")
    parser.add_argument(
        "--out",
        required=True,
        help="folder to write (no problem files yet); a run cut short goes on when run again into it",
    )
    parser.add_argument("--size", choices=SIZES, default="small", help="small (CPU, default) or large (GPU)")
    parser.add_argument("--min-ms", type=float, default=None, help="keep tasks whose reference takes more")
    parser.add_argument(
        "--device", choices=("cpu", "cuda"), default="cpu", help="where to validate and measure"
    )
    parser.add_argument("--budget-gib", type=float, default=None, help="memory limit of the scale-up")
    parser.add_argument("--kernelbench", default=None, help="KernelBench folder for the dedupe")
    parser.add_argument("--jobs", type=int, default=2, help="validation processes at once (default 2)")
    parser.add_argument("--timeout-s", type=float, default=60.0, help="validation timeout per task")
    parser.add_argument(
        "--no-validate",
        dest="validate",
        action="store_false",
        help="skip `kevin tasks validate` of each task",
    )
    parser.set_defaults(run=run_generate)


__all__ = [
    "CATALOGUE",
    "GenerateOptions",
    "GeneratedTask",
    "add_parser",
    "draw_task",
    "generate_set",
    "kernelbench_sequences",
    "measure_reference_ms",
    "read_sequences",
    "render",
    "scale_to_min_ms",
    "validate_candidates",
    "write_set",
]
