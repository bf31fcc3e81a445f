"""Loaders: find problems on disk or in dataset exports and turn them into `Task` records.

Where problems come from (`load_source(source)` dispatches on what `source` is):

- `None` or `bundled`: our own tasks in `kevin/tasks/bundled/tasks/NN_name.py` (ids `B_NN`, level 0).
  Each has a line exactly `SIZE = "small"`; `size="large"` rewrites it to `SIZE = "large"`.
- `kernelbench`: the KernelBench directory (`kernelbench_dir()`).
- a directory: KernelBench layout (`level1/19_ReLU.py` -> id `L1_19`, name `ReLU`), one `levelN`
  folder, or a flat folder of problem files (level 0).
- a `.py` file: one problem.
- a `.parquet` or `.jsonl` export of the KernelBench Hugging Face dataset (columns `code`, `level`,
  `problem_id`, `name`).

This module never imports or runs a problem (that is `kevin.tasks.validate`'s job).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path

from kevin.errors import UsageError
from kevin.tasks.records import Task, task_sort_key

KERNELBENCH_ENV = "KEVIN_KERNELBENCH_DIR"
"""Environment variable that points at the KernelBench problem folders (level1, level2, ...)."""

BUNDLED_SIZES = ("small", "large")
"""Input sizes a bundled task offers: `small` for CPU tests, `large` for timing on a GPU."""

_PROBLEM_FILE = re.compile(r"^(\d+)_(.+)$")
_LEVEL_DIR = re.compile(r"^level_?(\d+)$")
_SIZE_LINE = re.compile(r'^SIZE = "small"[ \t]*$', re.MULTILINE)


def kernelbench_dir() -> Path:
    """The KernelBench data directory: `$KEVIN_KERNELBENCH_DIR`, else `../shared/kernelbench_data`."""
    override = os.environ.get(KERNELBENCH_ENV)
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[2].parent / "shared" / "kernelbench_data"


def bundled_dir() -> Path:
    """Where our own tasks ship inside the package."""
    return Path(__file__).resolve().parent / "bundled" / "tasks"


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


def read_problem_text(path: Path) -> str:
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
        read_problem_text(path), id=task_id, name=name, level=level, problem=problem, origin=str(path.resolve())
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
    for line_number, line in enumerate(read_problem_text(path).splitlines(), start=1):
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
        source = with_size(read_problem_text(path), size)
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


