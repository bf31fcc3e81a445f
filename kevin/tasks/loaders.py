"""Tasks: the problems every evaluation and training run starts from.

A `Task` is one KernelBench-convention problem: Python source defining `class Model(nn.Module)`,
`get_inputs()` and `get_init_inputs()`. This module finds problems, selects among them and splits
them into train and holdout sets; it never imports or runs a problem (that is `validate`'s job).

Where problems come from (`load_tasks(source)` dispatches on what `source` is):

- `None` or `bundled`: our own tasks in `kevin/bundled/tasks/NN_name.py` (ids `B_NN`, level 0).
  Each has a line exactly `SIZE = "small"`; `size="large"` rewrites it to `SIZE = "large"`.
- `kernelbench`: the KernelBench directory (`kernelbench_dir()`).
- a directory: KernelBench layout (`level1/19_ReLU.py` -> id `L1_19`, name `ReLU`), one `levelN`
  folder, or a flat folder of problem files (level 0).
- a `.py` file: one problem.
- a `.parquet` or `.jsonl` export of the KernelBench Hugging Face dataset (columns `code`, `level`,
  `problem_id`, `name`).

Selection: levels, problem-number specs like `1-10,15` (or whole ids like `L1_19`), and a name glob.
Splits: seeded (a hash of seed and id ranks the tasks, so a split does not depend on the order the
tasks were loaded in), per level as in the paper (90 train / 10 holdout of 100), or from a JSON file.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import json
import os
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kevin.errors import UsageError

KERNELBENCH_ENV = "KEVIN_KERNELBENCH_DIR"
"""Environment variable that points at the KernelBench problem folders (level1, level2, ...)."""

BUNDLED_SIZES = ("small", "large")
"""Input sizes a bundled task offers: `small` for CPU tests, `large` for timing on a GPU."""

PAPER_HOLDOUT_FRACTION = 0.1
"""The paper held out 10 of the 100 problems of each KernelBench level."""

_PROBLEM_FILE = re.compile(r"^(\d+)_(.+)$")
_LEVEL_DIR = re.compile(r"^level_?(\d+)$")
_SIZE_LINE = re.compile(r'^SIZE = "small"[ \t]*$', re.MULTILINE)
_TASK_ID_TOKEN = re.compile(r"^[A-Za-z]+\d*_\d+$")


def content_hash(source: str) -> str:
    """Stable identity of a problem's text: sha256 of its UTF-8 source, first 16 hex digits."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Task:
    id: str
    """Unique and stable: `L{level}_{problem}` for KernelBench (`L1_19`), `B_{NN}` for ours."""
    level: int
    problem: int
    name: str
    source: str
    hash: str
    origin: str
    """Where it came from: a file path, `hf:<file or dataset>` row, or `bundled`."""

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Task:
        return cls(**data)

    @classmethod
    def from_source(
        cls, source: str, *, id: str, name: str, level: int = 0, problem: int = 0, origin: str = "inline"
    ) -> Task:
        return cls(
            id=id,
            level=level,
            problem=problem,
            name=name,
            source=source,
            hash=content_hash(source),
            origin=origin,
        )


@dataclass(frozen=True)
class Split:
    """A train/holdout partition of tasks; ids never appear on both sides."""

    train: tuple[Task, ...]
    holdout: tuple[Task, ...]

    def to_dict(self) -> dict:
        """The split-file form: `{"train": [ids], "holdout": [ids]}`."""
        return {"train": [t.id for t in self.train], "holdout": [t.id for t in self.holdout]}


@dataclass(frozen=True)
class IdSpec:
    """A parsed `--ids` value: problem numbers and whole task ids; a task matches either."""

    problems: frozenset[int]
    task_ids: frozenset[str]

    def matches(self, task: Task) -> bool:
        return task.problem in self.problems or task.id in self.task_ids


# ---------------------------------------------------------------------------------------------
# Where problems live


def kernelbench_dir() -> Path:
    """The KernelBench data directory: `$KEVIN_KERNELBENCH_DIR`, else `../shared/kernelbench_data`."""
    override = os.environ.get(KERNELBENCH_ENV)
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[1].parent / "shared" / "kernelbench_data"


def bundled_dir() -> Path:
    """Where our own tasks ship inside the package."""
    return Path(__file__).resolve().parent / "bundled" / "tasks"


def task_sort_key(task: Task) -> tuple[int, int, str]:
    """Natural order: by level, then problem number, then id (so L1_2 comes before L1_10)."""
    return (task.level, task.problem, task.id)


def parse_problem_filename(stem: str) -> tuple[int, str] | None:
    """`19_ReLU` -> (19, "ReLU"); None when the name does not start with a problem number."""
    match = _PROBLEM_FILE.match(stem)
    if match is None:
        return None
    return int(match.group(1)), match.group(2)


def level_of_dir(path: Path) -> int | None:
    """`level1` (or `level_1`) -> 1; None for any other folder name."""
    match = _LEVEL_DIR.match(path.name)
    return int(match.group(1)) if match else None


# ---------------------------------------------------------------------------------------------
# Loaders


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read problem file {path}: {exc}; check the path and its encoding") from exc


def load_file(path: str | Path, *, level: int | None = None) -> Task:
    """One problem file. `NN_Name.py` gets id `L{level}_{NN}`; any other stem is its own id.

    The level defaults to the parent folder's (`level2/...` -> 2), else 0.
    """
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"problem file not found: {path}; pass an existing .py file")
    if level is None:
        level = level_of_dir(path.parent) or 0
    parsed = parse_problem_filename(path.stem)
    if parsed is None:
        task_id, problem, name = path.stem, 0, path.stem
    else:
        problem, name = parsed
        task_id = f"L{level}_{problem}"
    return Task.from_source(
        _read_text(path), id=task_id, name=name, level=level, problem=problem, origin=str(path.resolve())
    )


def _problem_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))


def load_directory(path: str | Path) -> list[Task]:
    """A folder of problems: KernelBench layout (`levelN/` subfolders), one `levelN` folder, or flat."""
    path = Path(path)
    if not path.is_dir():
        raise UsageError(f"problem directory not found: {path}; pass an existing folder")
    level_dirs = sorted(
        (d for d in path.iterdir() if d.is_dir() and level_of_dir(d) is not None),
        key=lambda d: level_of_dir(d) or 0,
    )
    if level_dirs:
        files = [(f, level_of_dir(d)) for d in level_dirs for f in _problem_files(d)]
    else:
        files = [(f, level_of_dir(path) or 0) for f in _problem_files(path)]
    tasks = [load_file(f, level=level) for f, level in files]
    return _sorted_unique(tasks, where=str(path))


def _task_from_row(row: dict, *, origin: str, row_number: int) -> Task:
    """One Hugging Face KernelBench row (`code`, `level`, `problem_id`, `name`) as a Task."""
    missing = [c for c in ("code", "level", "problem_id", "name") if c not in row]
    if missing:
        raise UsageError(
            f"{origin}: row {row_number} lacks column(s) {', '.join(missing)}; "
            "export the KernelBench dataset with code, level, problem_id, name"
        )
    level, problem = int(row["level"]), int(row["problem_id"])
    name = str(row["name"])
    parsed = parse_problem_filename(name.removesuffix(".py"))
    if parsed is not None and parsed[0] == problem:
        name = parsed[1]  # the dataset names rows `19_ReLU`; keep `ReLU`, as the folder loader does
    return Task.from_source(
        str(row["code"]), id=f"L{level}_{problem}", name=name, level=level, problem=problem, origin=origin
    )


def load_rows(rows: Iterable[dict], *, origin: str) -> list[Task]:
    """Tasks from dataset rows (dicts with `code`, `level`, `problem_id`, `name`)."""
    tasks = [_task_from_row(row, origin=origin, row_number=i) for i, row in enumerate(rows)]
    return _sorted_unique(tasks, where=origin)


def load_jsonl(path: str | Path) -> list[Task]:
    """A JSONL export of the KernelBench dataset: one JSON object per line."""
    path = Path(path)
    rows = []
    for line_number, line in enumerate(_read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise UsageError(
                f"{path}:{line_number}: not valid JSON ({exc.msg}); pass one JSON object per line"
            ) from exc
    return load_rows(rows, origin=f"hf:{path.resolve()}")


def load_parquet(path: str | Path) -> list[Task]:
    """A parquet export of the KernelBench dataset (needs pyarrow: `pip install kevin[hf]`)."""
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise UsageError("reading .parquet needs pyarrow: pip install 'kevin[hf]' (or pass .jsonl)") from exc
    path = Path(path)
    try:
        rows = pq.read_table(path).to_pylist()
    except (OSError, ValueError) as exc:  # pyarrow's errors for unreadable files derive from these
        raise UsageError(f"cannot read parquet file {path}: {exc}") from exc
    return load_rows(rows, origin=f"hf:{path.resolve()}")


def load_hub(dataset: str = "ScalingIntelligence/KernelBench") -> list[Task]:
    """Every split of the KernelBench dataset on the Hugging Face hub (needs `datasets` and network)."""
    try:
        import datasets
    except ImportError as exc:
        raise UsageError("loading from the hub needs `datasets`: pip install 'kevin[hf]'") from exc
    splits = datasets.load_dataset(dataset)
    rows = [row for split_name in sorted(splits) for row in splits[split_name]]
    return load_rows(rows, origin=f"hf:{dataset}")


def with_size(source: str, size: str) -> str:
    """A bundled task's source with its `SIZE = "small"` line set to `size`."""
    if size not in BUNDLED_SIZES:
        raise UsageError(f"unknown size {size!r}; use one of: {', '.join(BUNDLED_SIZES)}")
    count = len(_SIZE_LINE.findall(source))
    if count != 1:
        raise ValueError(f'a bundled task needs exactly one line `SIZE = "small"`, found {count}')
    return _SIZE_LINE.sub(f'SIZE = "{size}"', source)


def load_bundled(size: str = "small", *, directory: str | Path | None = None) -> list[Task]:
    """Our own tasks (`NN_name.py` -> id `B_NN`, level 0, origin `bundled`) at the given size."""
    folder = Path(directory) if directory is not None else bundled_dir()
    tasks = []
    for path in _problem_files(folder) if folder.is_dir() else []:
        parsed = parse_problem_filename(path.stem)
        if parsed is None:
            raise ValueError(f"bundled task file {path.name} must be named NN_name.py")
        number, name = parsed
        source = with_size(_read_text(path), size)
        tasks.append(
            Task.from_source(
                source,
                id=f"B_{path.stem.split('_', 1)[0]}",
                name=name,
                level=0,
                problem=number,
                origin="bundled",
            )
        )
    return _sorted_unique(tasks, where=str(folder))


def _sorted_unique(tasks: list[Task], *, where: str) -> list[Task]:
    seen: dict[str, Task] = {}
    for task in tasks:
        if task.id in seen:
            raise UsageError(
                f"duplicate task id {task.id} in {where} ({seen[task.id].origin} and "
                f"{task.origin}); give each problem its own number"
            )
        seen[task.id] = task
    return sorted(tasks, key=task_sort_key)


def load_source(source: str | Path | None = None, *, size: str = "small") -> list[Task]:
    """Every task in `source` (see the module docstring for what it may be), unselected."""
    if source is None or str(source) == "bundled":
        return load_bundled(size)
    path = Path(source)
    if str(source) == "kernelbench" and not path.exists():
        path = kernelbench_dir()
        if not path.is_dir():
            raise UsageError(f"KernelBench data not found at {path}; set {KERNELBENCH_ENV} to its folder")
        return load_directory(path)
    if path.is_dir():
        return load_directory(path)
    if not path.exists():
        raise UsageError(
            f"task source not found: {source}; pass a problem folder, a .py file, a "
            ".parquet/.jsonl export, 'kernelbench' or 'bundled'"
        )
    loaders = {".py": lambda p: [load_file(p)], ".parquet": load_parquet, ".jsonl": load_jsonl}
    loader = loaders.get(path.suffix.lower())
    if loader is None:
        raise UsageError(f"cannot load tasks from {path.name}: use a folder, .py, .parquet or .jsonl")
    return loader(path)


# ---------------------------------------------------------------------------------------------
# Selection


def parse_id_spec(spec: str) -> IdSpec:
    """`1-10,15,L2_3` -> problems {1..10, 15} and task id L2_3. Raises UsageError when malformed."""
    problems: set[int] = set()
    task_ids: set[str] = set()
    hint = "use problem numbers and ranges like '1-10,15' or task ids like 'L1_19'"
    for token in (t.strip() for t in spec.split(",")):
        if _TASK_ID_TOKEN.match(token):
            task_ids.add(token)
            continue
        low, dash, high = token.partition("-")
        if not (low.isdigit() and (not dash or high.isdigit())):
            raise UsageError(f"bad --ids {spec!r} at {token!r}: {hint}")
        first, last = int(low), int(high) if dash else int(low)
        if first > last:
            raise UsageError(f"bad --ids range {token!r}: the first number must not exceed the last")
        problems.update(range(first, last + 1))
    return IdSpec(frozenset(problems), frozenset(task_ids))


def _as_levels(level: int | Iterable[int] | None) -> frozenset[int] | None:
    if level is None:
        return None
    return frozenset([level]) if isinstance(level, int) else frozenset(level)


def select_tasks(
    tasks: Iterable[Task],
    *,
    level: int | Iterable[int] | None = None,
    ids: str | IdSpec | None = None,
    name: str | None = None,
) -> list[Task]:
    """The tasks matching every given filter: level(s), an id spec, a case-insensitive name glob."""
    levels = _as_levels(level)
    id_spec = parse_id_spec(ids) if isinstance(ids, str) else ids
    pattern = name.lower() if name else None
    return [
        t
        for t in tasks
        if (levels is None or t.level in levels)
        and (id_spec is None or id_spec.matches(t))
        and (pattern is None or fnmatch.fnmatchcase(t.name.lower(), pattern))
    ]


def load_tasks(
    source: str | Path | None = None,
    *,
    level: int | Iterable[int] | None = None,
    ids: str | None = None,
    name: str | None = None,
    size: str = "small",
) -> list[Task]:
    """Load `source` and keep the selected tasks; UsageError when nothing is there or nothing matches."""
    every = load_source(source, size=size)
    where = "bundled tasks" if source is None else str(source)
    if not every:
        raise UsageError(f"no tasks found in {where}; pass --source with a problem folder or file")
    chosen = select_tasks(every, level=level, ids=ids, name=name)
    if not chosen:
        raise UsageError(
            f"no task in {where} matches level={level} ids={ids} name={name}; "
            "run 'kevin tasks list' without filters to see what is there"
        )
    return chosen


# ---------------------------------------------------------------------------------------------
# Splits


def _seeded_rank(task: Task, seed: int) -> str:
    return hashlib.sha256(f"{seed}:{task.id}".encode()).hexdigest()


def _holdout_count(count: int, fraction: float) -> int:
    """Rounded share of `count`, half up, always leaving at least one task to train on."""
    if not 0.0 <= fraction < 1.0:
        raise UsageError(f"holdout fraction {fraction} must be in [0, 1)")
    return min(max(count - 1, 0), int(count * fraction + 0.5))


def split_seeded(
    tasks: Sequence[Task], *, holdout_fraction: float = PAPER_HOLDOUT_FRACTION, seed: int = 0
) -> Split:
    """A reproducible random split: the same tasks and seed always give the same split."""
    ranked = sorted(tasks, key=lambda t: _seeded_rank(t, seed))
    holdout_ids = {t.id for t in ranked[: _holdout_count(len(ranked), holdout_fraction)]}
    ordered = sorted(tasks, key=task_sort_key)
    return Split(
        train=tuple(t for t in ordered if t.id not in holdout_ids),
        holdout=tuple(t for t in ordered if t.id in holdout_ids),
    )


def split_paper(
    tasks: Sequence[Task], *, seed: int = 0, holdout_fraction: float = PAPER_HOLDOUT_FRACTION
) -> Split:
    """The paper's split: per level, 10% held out (90/10 of 100, 45/5 of 50), seeded."""
    train: list[Task] = []
    holdout: list[Task] = []
    for level in sorted({t.level for t in tasks}):
        part = split_seeded(
            [t for t in tasks if t.level == level], holdout_fraction=holdout_fraction, seed=seed
        )
        train.extend(part.train)
        holdout.extend(part.holdout)
    return Split(train=tuple(train), holdout=tuple(holdout))


def split_from_file(tasks: Sequence[Task], path: str | Path) -> Split:
    """The split a JSON file `{"train": [ids], "holdout": [ids]}` names; tasks it omits are left out."""
    path = Path(path)
    try:
        data = json.loads(_read_text(path))
    except json.JSONDecodeError as exc:
        raise UsageError(f"split file {path} is not valid JSON ({exc.msg})") from exc
    if not (isinstance(data, dict) and all(isinstance(data.get(k), list) for k in ("train", "holdout"))):
        raise UsageError(f'split file {path} must be {{"train": [ids], "holdout": [ids]}}')
    by_id = {t.id: t for t in tasks}
    unknown = [i for i in data["train"] + data["holdout"] if i not in by_id]
    if unknown:
        raise UsageError(
            f"split file {path} names unknown task ids {unknown[:5]}; check it against 'kevin tasks list'"
        )
    both = sorted(set(data["train"]) & set(data["holdout"]))
    if both:
        raise UsageError(f"split file {path} puts {both[:5]} in both train and holdout")
    return Split(
        train=tuple(by_id[i] for i in data["train"]), holdout=tuple(by_id[i] for i in data["holdout"])
    )


def save_split(split: Split, path: str | Path) -> None:
    """Write a split file that `split_from_file` reads back to the same split."""
    Path(path).write_text(json.dumps(split.to_dict(), indent=2) + "\n", encoding="utf-8")


# ---------------------------------------------------------------------------------------------
# Command line


def add_selection_arguments(parser) -> None:
    """The `--source/--level/--ids/--name/--size` options every task command shares."""
    parser.add_argument(
        "--source",
        default=None,
        help="problem folder, .py file, .parquet/.jsonl export, 'kernelbench' or "
        "'bundled' (default: bundled)",
    )
    parser.add_argument(
        "--level", type=int, action="append", default=None, metavar="N", help="keep this level (repeatable)"
    )
    parser.add_argument(
        "--ids",
        default=None,
        metavar="SPEC",
        help="problem numbers/ranges or task ids, e.g. '1-10,15' or 'L1_19'",
    )
    parser.add_argument(
        "--name",
        default=None,
        metavar="GLOB",
        help="keep names matching this case-insensitive glob, e.g. '*conv*'",
    )
    parser.add_argument(
        "--size", default="small", choices=BUNDLED_SIZES, help="input size of bundled tasks (default: small)"
    )


def tasks_from_args(args) -> list[Task]:
    """The tasks the shared selection options pick."""
    return load_tasks(args.source, level=args.level, ids=args.ids, name=args.name, size=args.size)


def format_task_table(tasks: Sequence[Task]) -> str:
    """One aligned row per task: id, level, name, hash."""
    rows = [("id", "level", "name", "hash")] + [(t.id, str(t.level), t.name, t.hash) for t in tasks]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return "\n".join(f"{r[0]:<{widths[0]}}  {r[1]:>{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}" for r in rows)


def _run_list(args) -> int:
    tasks = tasks_from_args(args)
    print(format_task_table(tasks))
    print(f"{len(tasks)} task(s)")
    return 0


def _run_show(args) -> int:
    everything = load_source(args.source, size=args.size)
    match = next((t for t in everything if t.id.lower() == args.task_id.lower()), None)
    if match is None:
        where = args.source or "bundled tasks"
        raise UsageError(f"no task {args.task_id!r} in {where}; run 'kevin tasks list' to see the ids")
    for field in ("id", "level", "problem", "name", "hash", "origin"):
        print(f"# {field}: {getattr(match, field)}")
    print(match.source if match.source.endswith("\n") else match.source + "\n", end="")
    return 0


def _run_help(parser):
    def run(args) -> int:
        parser.print_help(sys.stderr)
        return 2

    return run


def register_commands(subparsers) -> None:
    """Add `kevin tasks list|show|validate`."""
    from kevin import validate  # validate imports this module; importing here avoids the cycle

    tasks_parser = subparsers.add_parser(
        "tasks",
        help="list, show and validate problems",
        description="List, show and validate problems (tasks).",
    )
    tasks_parser.set_defaults(run=_run_help(tasks_parser))
    commands = tasks_parser.add_subparsers(dest="tasks_command", metavar="COMMAND")

    list_parser = commands.add_parser(
        "list",
        help="one row per task: id, level, name, hash",
        description="List tasks: id, level, name, content hash.",
    )
    add_selection_arguments(list_parser)
    list_parser.set_defaults(run=_run_list)

    show_parser = commands.add_parser(
        "show",
        help="print one task's metadata and source",
        description="Print one task's metadata and its source.",
    )
    show_parser.add_argument("task_id", metavar="ID", help="task id as 'kevin tasks list' prints it")
    show_parser.add_argument("--source", default=None, help="where to look (default: bundled)")
    show_parser.add_argument(
        "--size", default="small", choices=BUNDLED_SIZES, help="input size of bundled tasks (default: small)"
    )
    show_parser.set_defaults(run=_run_show)

    validate.add_parser(commands)
