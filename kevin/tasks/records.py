"""Task records: the problem every evaluation and training run starts from, and the split of a set.

A `Task` is one KernelBench-convention problem: Python source defining `class Model(nn.Module)`,
`get_inputs()` and `get_init_inputs()`, with a stable id and a content hash. `Split` is a
train/holdout partition; `IdSpec` a parsed `--ids` value. Plain data: nothing here reads files.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass


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


def task_sort_key(task: Task) -> tuple[int, int, str]:
    """Natural order: by level, then problem number, then id (so L1_2 comes before L1_10)."""
    return (task.level, task.problem, task.id)
