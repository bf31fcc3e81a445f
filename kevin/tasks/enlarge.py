"""Enlarged-shape variants of the KernelBench problems whose eager reference runs below --min-ms (#18).

    kevin tasks enlarge --levels 1 2 --out DIR [--device cuda --min-ms 0.1] [--budget-gib G]
                        [--kernelbench DIR] [--ids SPEC] [--no-validate] [--jobs J] [--timeout-s S]

The GPU run (H200), not done yet:

    python -m kevin tasks enlarge --levels 1 2 --device cuda --min-ms 0.1 --jobs 2 \\
        --out bench/results/h200/kernelbench_large

Per problem, in id order:
1. The size to grow: the leading dimension of the first tensor `get_inputs` builds with one
   (`torch.rand(batch_size, ...)`; a 0-d `torch.rand(())` does not count), when it is a module-level integer constant (kevin.tasks.sizes)
   that `get_inputs` reads and `get_init_inputs` does not: the model (weights, configuration) stays
   the same and only more data goes through it, so the shapes still compose. A problem without one is
   `not_enlargeable` and listed with its constants; it is never skipped silently.
2. Double that constant (kevin.tasks.scaling, the generator's loop) from its own value until the eager
   reference takes more than `min_ms` on `device`. Before each run, the problem's footprint on the
   `meta` device (inputs + parameters + output, `probe.estimate_footprint_bytes`; intermediates are
   not counted) is checked against the memory cap (`--budget-gib`, by default validate's budget of
   the device): the cap stops the doubling (`capped`). Already above `min_ms` at its own size:
   `fast_enough`. Measuring raised (the problem does not run there, or out of memory): `error`.
   Still below after MAX_DOUBLINGS: `not_reached`.
3. Each variant that passed `min_ms` goes through `kevin tasks validate`'s function (own process);
   one that fails (a nondeterministic or degenerate problem) is `invalid` and not written. The rest
   are `enlarged`: written to `DIR/levelN/<original_stem>_large.py` (loaded as ids `LN_<number>`,
   names `<name>_large`; the level folders keep levels 1 and 2 from sharing ids).
4. `DIR/manifest.json`: per problem the original file, status, the constant, constants before and
   after, every (value, ms) measured, the original's and the variant's time, reason; the counts.

Determinism: a written file is the original with one constant's value replaced and every other
byte kept (`sizes.assign_constants`), so the same constant values give byte-identical files. How
many doublings a problem needs comes from measured times, which vary by run and machine.
What it does not do: grow channels, features or kernel sizes (they change the model), enlarge
level 3, or enlarge generated tasks (`kevin tasks generate --min-ms` grows their batch itself).
"""

from __future__ import annotations

import ast
import json
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from kevin.errors import UsageError
from kevin.tasks import sizes, validate
from kevin.tasks.journal import Journal
from kevin.tasks.loaders import kernelbench_dir
from kevin.tasks.probe import GIB, ValidateSettings
from kevin.tasks.records import Task
from kevin.tasks.scaling import double_until_min_ms, measure_reference_ms
from kevin.tasks.selection import load_tasks

ENLARGER_VERSION = 1
MANIFEST_FILE = "manifest.json"
JOURNAL_FILE = ".enlarge_journal.jsonl"
"""In --out while the variants are made (kevin.tasks.journal): the same command run again goes on."""
SUFFIX = "_large"
STATUSES = ("enlarged", "fast_enough", "not_enlargeable", "capped", "error", "not_reached", "invalid")
"""Every status a problem can get, in the order the counts list them."""
_INPUT_BUILDERS = frozenset(("rand", "randn", "ones", "zeros", "empty", "full"))
_STATUS_OF_STOP = {"budget": "capped", "error": "error", "doublings": "not_reached"}


@dataclass(frozen=True)
class EnlargeOptions:
    levels: tuple[int, ...] = (1, 2)
    min_ms: float = 0.1
    """Grow a problem until its eager reference takes more than this on `device`."""
    device: str = "cpu"
    budget_gib: float | None = None
    """Memory cap of the doubling (default: validate's budget of the device)."""
    kernelbench: str | None = None
    """KernelBench folder (default: kevin.tasks.kernelbench_dir())."""
    ids: str | None = None
    """Only these problems (`1-10,15` or `L1_19`), as `kevin tasks list --ids` takes them."""
    validate: bool = True
    jobs: int = 2
    timeout_s: float = 60.0
    journal: str | None = None
    """File that keeps each problem's outcome and validation as it is known (kevin.tasks.journal)."""

    @property
    def budget_bytes(self) -> int:
        return int((self.budget_gib or validate.DEFAULT_BUDGET_GIB[self.device]) * GIB)

    def journal_header(self) -> dict:
        """What changes an outcome: a journal made with other values is not reused."""
        fields = ("levels", "min_ms", "device", "budget_gib", "kernelbench", "validate", "timeout_s")
        return {"enlarger": ENLARGER_VERSION, **{name: getattr(self, name) for name in fields}}


@dataclass(frozen=True)
class Enlargement:
    """One problem's outcome, as its manifest entry shows it."""

    task_id: str
    file: str
    """`levelN/<original file name>`."""
    status: str
    reason: str = ""
    constant: str | None = None
    constants_before: dict[str, int] = field(default_factory=dict)
    constants_after: dict[str, int] = field(default_factory=dict)
    measured: tuple[tuple[int, float], ...] = ()
    """(value of the constant, reference ms) of every size measured, in order."""
    written: str | None = None
    """`levelN/<stem>_large.py` when written."""
    source: str = field(default="", repr=False)
    """The enlarged problem (empty unless it passed min_ms)."""

    def manifest_entry(self) -> dict:
        return {
            "id": self.task_id,
            "file": self.file,
            "status": self.status,
            "constant": self.constant,
            "constants_before": self.constants_before,
            "constants_after": self.constants_after,
            "original_ms": self.measured[0][1] if self.measured else None,
            "reference_ms": self.measured[-1][1] if self.measured else None,
            "measured": [list(m) for m in self.measured],
            "written": self.written,
            "reason": self.reason,
        }

    @classmethod
    def from_journal(cls, data: dict) -> Enlargement:
        return cls(**{**data, "measured": tuple(tuple(m) for m in data["measured"])})


def leading_size_constant(source: str) -> tuple[str, int] | str:
    """(name, value) of the constant to double (module docstring, step 1), or why there is none."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return f"does not parse ({exc.msg}, line {exc.lineno})"
    constants = sizes.int_constants(tree)
    init_reads = sizes.function_reads(tree, "get_init_inputs")
    get_inputs = next(
        (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_inputs"), None
    )
    calls = sorted(
        (n for n in ast.walk(get_inputs) if isinstance(n, ast.Call)) if get_inputs else (),
        key=lambda n: (n.lineno, n.col_offset),
    )
    shapes = [
        c.args[0].elts if isinstance(c.args[0], (ast.Tuple, ast.List)) else c.args
        for c in calls
        if isinstance(c.func, ast.Attribute) and c.func.attr in _INPUT_BUILDERS and c.args
    ]
    first = next((shape[0] for shape in shapes if shape), None)  # `torch.rand(())` is a scalar: next
    name = first.id if isinstance(first, ast.Name) else None
    if name in constants and name not in init_reads:
        return name, constants[name]
    held = ", ".join(f"{n}={v}" for n, v in constants.items()) or "none"
    leading = (
        f"its leading dimension is {ast.unparse(first)}" if first is not None else "get_inputs builds none"
    )
    why = "is also read by get_init_inputs" if name in constants else "is not a module-level integer constant"
    return (
        f"the first input tensor's leading dimension {why} ({leading}; "
        f"integer constants: {held}; read by get_init_inputs: {', '.join(sorted(init_reads)) or 'none'})"
    )


def problem_footprint_bytes(source: str, budget_bytes: int) -> int | None:
    """Inputs + parameters + output of `source`, sized on `meta`; None when that cannot be done."""
    from kevin.tasks.probe import estimate_footprint_bytes, import_problem

    with tempfile.TemporaryDirectory(prefix="kevin-enlarge-") as tmp:
        try:
            module = import_problem(source, Path(tmp) / "problem.py")
        except Exception:  # the measurement that follows says what is wrong with it
            return None
        footprint, _ = estimate_footprint_bytes(module, budget_bytes)
    return footprint


def _relative_file(task: Task) -> str:
    return f"level{task.level}/{Path(task.origin).name}"


def enlarge_problem(
    task: Task,
    options: EnlargeOptions,
    *,
    measure: Callable[..., float] | None = None,
    footprint_bytes: Callable[[str, int], int | None] = problem_footprint_bytes,
) -> Enlargement:
    """Steps 1-2 of the module docstring for one problem (no validation, nothing written)."""
    file = _relative_file(task)
    found = leading_size_constant(task.source)
    if isinstance(found, str):
        return Enlargement(
            task.id, file, "not_enlargeable", found, constants_before=sizes.int_constants(task.source)
        )
    name, value = found
    measured: list[tuple[int, float]] = []

    def render(size: int) -> str:
        return task.source if size == value else sizes.assign_constants(task.source, {name: size}, where=file)

    def timed(source: str, *, device: str) -> float:
        elapsed_ms = (measure or measure_reference_ms)(source, device=device)
        measured.append((sizes.int_constants(source)[name], round(elapsed_ms, 4)))
        return elapsed_ms

    scaled = double_until_min_ms(
        value,
        source=render,
        footprint_bytes=lambda size: footprint_bytes(render(size), options.budget_bytes),
        grow=lambda size: size * 2,
        describe=lambda size: f"{name}={size}",
        min_ms=options.min_ms,
        device=options.device,
        budget_bytes=options.budget_bytes,
        measure=timed,
    )
    outcome = Enlargement(
        task.id,
        file,
        _STATUS_OF_STOP.get(scaled.stopped_by, "enlarged"),
        scaled.reason,
        name,
        {name: value},
        {name: scaled.size},
        tuple(measured),
    )
    if scaled.stopped_by == "min_ms" and scaled.doublings == 0:
        return replace(outcome, status="fast_enough", reason=f"already above {options.min_ms} ms")
    return replace(outcome, source=render(scaled.size)) if outcome.status == "enlarged" else outcome


def _note(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def validate_enlarged(
    outcomes: Sequence[Enlargement], options: EnlargeOptions, journal: Journal | None = None
) -> list[Enlargement]:
    """Each `enlarged` outcome through `kevin tasks validate` (own process); failures become `invalid`.
    Those `journal` holds are not validated again; the others go into it as they finish."""
    chosen = [o for o in outcomes if o.status == "enlarged"]
    settings = ValidateSettings(
        device=options.device,
        timeout_s=options.timeout_s,
        budget_bytes=options.budget_bytes,
        seed=0,
        threads=1,
    )
    records = [
        (o.task_id, Task.from_source(o.source, id=o.task_id, name=o.file, level=0, problem=0)) for o in chosen
    ]
    verdicts = validate.validate_journaled(records, settings, journal, jobs=options.jobs)
    results = {key: verdict for (key, _), verdict in zip(records, verdicts, strict=True)}
    checked = []
    for outcome in outcomes:
        result = results.get(outcome.task_id)
        if result is not None and result["status"] != "ok":
            outcome = replace(outcome, status="invalid", reason=f"{result['status']}: {result['reason']}")
        checked.append(outcome)
    return checked


def enlarge_set(
    tasks: Sequence[Task],
    options: EnlargeOptions,
    *,
    measure: Callable[..., float] | None = None,
    footprint_bytes: Callable[[str, int], int | None] = problem_footprint_bytes,
) -> list[Enlargement]:
    """Every problem of `tasks` through steps 1-3 (validation when `options.validate`); with
    `options.journal`, each outcome is kept as it is known and a rerun repeats none of them."""
    journal = Journal(options.journal, options.journal_header()) if options.journal else None
    if journal is not None and len(journal):
        _note(f"kevin tasks enlarge: going on from {journal.path} ({len(journal)} outcomes kept)")
    outcomes = []
    for task in tasks:
        saved = journal.get("enlarge", task.id) if journal else None
        if saved:
            outcomes.append(Enlargement.from_journal(saved))
            continue
        outcome = enlarge_problem(task, options, measure=measure, footprint_bytes=footprint_bytes)
        if journal is not None:
            journal.put("enlarge", task.id, asdict(outcome))
        after = ", ".join(f"{n}={v}" for n, v in outcome.constants_after.items())
        timing = f"{outcome.measured[-1][1]} ms" if outcome.measured else ""
        _note(f"  {task.id} {outcome.status} {after} {timing} {outcome.reason}".rstrip())
        outcomes.append(outcome)
    return validate_enlarged(outcomes, options, journal) if options.validate else outcomes


def manifest(outcomes: Sequence[Enlargement], options: EnlargeOptions) -> dict:
    counts = Counter(o.status for o in outcomes)
    data = {
        "enlarger": f"kevin tasks enlarge v{ENLARGER_VERSION}",
        "levels": list(options.levels),
        "device": options.device,
        "min_ms": options.min_ms,
        "budget_gib": options.budget_bytes / GIB,
        "validated": options.validate,
        "counts": {status: counts.get(status, 0) for status in STATUSES},
        "problems": [o.manifest_entry() for o in outcomes],
    }
    if options.device == "cuda":
        import torch

        data["device_name"] = torch.cuda.get_device_name()
    return data


def write_enlarged(
    directory: str | Path, outcomes: Sequence[Enlargement], options: EnlargeOptions
) -> list[Enlargement]:
    """The `enlarged` variants under `directory/levelN/` and manifest.json; the outcomes with `written`."""
    directory = Path(directory)
    written = []
    for outcome in outcomes:
        if outcome.status == "enlarged":
            relative = f"{Path(outcome.file).parent}/{Path(outcome.file).stem}{SUFFIX}.py"
            (directory / relative).parent.mkdir(parents=True, exist_ok=True)
            (directory / relative).write_text(outcome.source, encoding="utf-8")
            outcome = replace(outcome, written=relative)
        written.append(outcome)
    (directory / MANIFEST_FILE).write_text(
        json.dumps(manifest(written, options), indent=1) + "\n", encoding="utf-8"
    )
    return written


# ---------------------------------------------------------------------------------------------
# Command line


def check_options(options: EnlargeOptions, out: Path) -> None:
    if options.min_ms <= 0:
        raise UsageError(f"--min-ms must be positive, got {options.min_ms:g}")
    if options.jobs < 1 or options.timeout_s <= 0:
        raise UsageError("--jobs must be at least 1 and --timeout-s positive")
    if options.budget_gib is not None and options.budget_gib <= 0:
        raise UsageError(f"--budget-gib must be positive, got {options.budget_gib:g}")
    root = Path(options.kernelbench) if options.kernelbench else kernelbench_dir()
    missing = [level for level in options.levels if not (root / f"level{level}").is_dir()]
    if missing:
        raise UsageError(
            f"no level{missing[0]} folder in {root}; pass --kernelbench with the KernelBench data folder "
            "(or set KEVIN_KERNELBENCH_DIR)"
        )
    if out.is_file():
        raise UsageError(f"--out {out} is a file; pass a folder")
    if out.is_dir() and any(out.rglob("*.py")):
        raise UsageError(f"{out} already holds problem files; write the variants to an empty folder")
    if options.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UsageError("--device cuda but no CUDA GPU is visible; use --device cpu")


def run_enlarge(args) -> int:
    """`kevin tasks enlarge`: 0 when the manifest is written, 2 on bad input."""
    options = EnlargeOptions(
        levels=tuple(args.levels),
        min_ms=args.min_ms,
        device=args.device,
        budget_gib=args.budget_gib,
        kernelbench=args.kernelbench,
        ids=args.ids,
        validate=args.validate,
        jobs=args.jobs,
        timeout_s=args.timeout_s,
        journal=str(Path(args.out) / JOURNAL_FILE),
    )
    out = Path(args.out)
    check_options(options, out)
    root = options.kernelbench or str(kernelbench_dir())
    tasks = load_tasks(root, level=options.levels, ids=options.ids)
    _note(f"kevin tasks enlarge: {len(tasks)} problem(s) of level(s) {options.levels} to {options.min_ms} ms")
    out.mkdir(parents=True, exist_ok=True)
    outcomes = write_enlarged(out, enlarge_set(tasks, options), options)
    Path(options.journal).unlink(missing_ok=True)  # the manifest is whole: nothing left to go on from
    for o in outcomes:
        if o.status != "enlarged":
            print(f"  {o.task_id:7s} {o.status}: {o.reason}")
        else:
            before, after = o.constants_before[o.constant], o.constants_after[o.constant]
            print(
                f"  {o.task_id:7s} enlarged {o.constant} {before} -> {after}: {o.measured[-1][1]} ms, {o.written}"
            )
    counts = Counter(o.status for o in outcomes)
    summary = ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts[s])
    print(f"kevin tasks enlarge: {summary} ({len(outcomes)} problems), manifest in {out / MANIFEST_FILE}")
    return 0


def add_parser(subparsers) -> None:
    """Add `enlarge` to the `kevin tasks` subcommands."""
    parser = subparsers.add_parser(
        "enlarge",
        help="write larger-shape variants of the KernelBench problems that run below --min-ms",
        description="Double the leading size constant of each KernelBench problem whose eager reference "
        "runs below --min-ms on --device until it passes (memory allowing); write <stem>_large.py "
        "files and a manifest.",
    )
    parser.add_argument(
        "--levels", type=int, nargs="+", default=[1, 2], help="KernelBench levels (default 1 2)"
    )
    parser.add_argument(
        "--out",
        required=True,
        help="folder to write (no problem files yet); a run cut short goes on when run again into it",
    )
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where to measure")
    parser.add_argument("--min-ms", type=float, default=0.1, help="grow until the reference takes more (0.1)")
    parser.add_argument("--budget-gib", type=float, default=None, help="memory cap of the doubling")
    parser.add_argument("--kernelbench", default=None, help="KernelBench data folder")
    parser.add_argument(
        "--ids", default=None, metavar="SPEC", help="only these problems, e.g. '1-10' or 'L2_3'"
    )
    parser.add_argument("--jobs", type=int, default=2, help="validation processes at once (default 2)")
    parser.add_argument("--timeout-s", type=float, default=60.0, help="validation timeout per problem")
    parser.add_argument(
        "--no-validate",
        dest="validate",
        action="store_false",
        help="skip `kevin tasks validate` of each variant",
    )
    parser.set_defaults(run=run_enlarge)
