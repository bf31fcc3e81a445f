"""Splits: train/holdout partitions of a task set.

Seeded (a hash of seed and id ranks the tasks, so a split does not depend on the order the tasks
were loaded in), per level as in the paper (90 train / 10 holdout of 100), or from a JSON file.
A generated set (kevin.tasks.generate) splits by whole operator sequence (`split_generated`);
`split_by_name` picks any of these by the name a config or CLI gives, and leaves out the problems a
validation report flags as degenerate or nondeterministic (`read_excluded`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

from kevin.errors import UsageError
from kevin.tasks.loaders import read_problem_text
from kevin.tasks.records import Split, Task, task_sort_key

PAPER_HOLDOUT_FRACTION = 0.1
"""The paper held out 10 of the 100 problems of each KernelBench level."""


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
        data = json.loads(read_problem_text(path))
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
# Named splits, generated sets, and KernelBench hygiene

EXCLUDED_STATUSES = ("degenerate", "nondeterministic")
"""Validation statuses that keep a problem out of every split: a checker cannot trust its output."""

SPLIT_NAMES = ("none", "paper", "seeded", "generated")
"""Splits known by name; anything else is read as a split file."""


KERNELBENCH_EXCLUDED = "kernelbench"
"""The name `read_excluded` (and so `loop.exclude`, `kevin bench --exclude`, their default) reads as the
list kevin ships: the KernelBench problems of levels 1-3 that bench/kernelbench_hygiene.py found
degenerate or nondeterministic on the GPU (`kevin/tasks/kernelbench_excluded.json`, written from
its report by `bench/kernelbench_hygiene.py --package REPORT`). Ids outside KernelBench's (`L1_`..`L3_`)
never match it."""
EXCLUDED_FILE = Path(__file__).with_name("kernelbench_excluded.json")


def read_excluded(path: str | Path) -> dict[str, str]:
    """Task id -> status of the problems a validation report excludes.

    Reads the JSON of bench/kernelbench_hygiene.py (an `excluded` list of {id, status}) or of
    `kevin tasks validate --json` (`results` rows with task_id and status); `kernelbench`
    (KERNELBENCH_EXCLUDED) is the list kevin ships.
    """
    path = EXCLUDED_FILE if str(path) == KERNELBENCH_EXCLUDED else Path(path)
    try:
        data = json.loads(read_problem_text(path))
    except json.JSONDecodeError as exc:
        raise UsageError(f"validation report {path} is not valid JSON ({exc.msg})") from exc
    if isinstance(data, dict) and isinstance(data.get("excluded"), list):
        rows = [(row["id"], row["status"]) for row in data["excluded"]]
    elif isinstance(data, dict) and isinstance(data.get("results"), list):
        rows = [(row["task_id"], row["status"]) for row in data["results"]]
    else:
        raise UsageError(
            f"{path} is not a validation report; write one with 'kevin tasks validate --json --out FILE' "
            "or bench/kernelbench_hygiene.py"
        )
    return {task_id: status for task_id, status in rows if status in EXCLUDED_STATUSES}


def exclude_flagged(tasks: Sequence[Task], excluded: dict[str, str]) -> tuple[list[Task], list[Task]]:
    """(kept, dropped): the tasks whose id `excluded` (from `read_excluded`) names are dropped."""
    kept = [t for t in tasks if t.id not in excluded]
    dropped = [t for t in tasks if t.id in excluded]
    return kept, dropped


def split_generated(
    tasks: Sequence[Task],
    sequences: dict[str, str],
    *,
    holdout_fraction: float = PAPER_HOLDOUT_FRACTION,
    seed: int = 0,
) -> Split:
    """A split of a generated set that holds out whole operator sequences.

    `sequences` maps task id -> its operator-sequence key (kevin.tasks.generate's manifest); tasks
    sharing a sequence land on the same side, so a held-out sequence is never trained on. Sequences
    are ranked by a hash of seed and key, so the split does not depend on task numbering.
    """
    missing = [t.id for t in tasks if t.id not in sequences]
    if missing:
        raise UsageError(f"no operator sequence for task(s) {missing[:5]}; pass the generated set's manifest")
    keys = sorted(
        {sequences[t.id] for t in tasks}, key=lambda k: hashlib.sha256(f"{seed}:{k}".encode()).hexdigest()
    )
    held_keys = set(keys[: _holdout_count(len(keys), holdout_fraction)])
    ordered = sorted(tasks, key=task_sort_key)
    return Split(
        train=tuple(t for t in ordered if sequences[t.id] not in held_keys),
        holdout=tuple(t for t in ordered if sequences[t.id] in held_keys),
    )


def split_by_name(
    tasks: Sequence[Task],
    name: str,
    *,
    seed: int = 0,
    sequences: dict[str, str] | None = None,
    excluded: dict[str, str] | None = None,
) -> Split:
    """The split `name` picks: `none` (all train), `paper`, `seeded`, `generated` (needs `sequences`),
    or a split file; tasks `excluded` names (see `read_excluded`) are left out of both sides."""
    if name not in SPLIT_NAMES:
        split = split_from_file(tasks, name)
        drop = excluded or {}
        return Split(
            train=tuple(t for t in split.train if t.id not in drop),
            holdout=tuple(t for t in split.holdout if t.id not in drop),
        )
    if excluded:
        tasks, _ = exclude_flagged(tasks, excluded)
    if name == "none":
        return Split(train=tuple(sorted(tasks, key=task_sort_key)), holdout=())
    if name == "paper":
        return split_paper(tasks, seed=seed)
    if name == "seeded":
        return split_seeded(tasks, seed=seed)
    if sequences is None:  # name == "generated"
        raise UsageError("the generated split needs the set's manifest.json (operator sequences)")
    return split_generated(tasks, sequences, seed=seed)
