"""Selection: which of the loaded tasks a command works on.

Levels, problem-number specs like `1-10,15` (or whole ids like `L1_19`) and a name glob, and the
`--source/--level/--ids/--name/--size` options every task command shares.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from pathlib import Path

from kevin.errors import UsageError
from kevin.tasks.loaders import BUNDLED_SIZES, load_source
from kevin.tasks.records import IdSpec, Task

_TASK_ID_TOKEN = re.compile(r"^[A-Za-z]+\d*_\d+$")


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
