"""Tasks: the problems every evaluation and training run starts from.

A `Task` is one KernelBench-convention problem: Python source defining `class Model(nn.Module)`,
`get_inputs()` and `get_init_inputs()`. (Loaders, selection and splits: being written.)
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
    """Unique and stable: `L{level}_{problem}` for KernelBench (`L1_19`), `bundled/{name}` for ours."""
    level: int
    problem: int
    name: str
    source: str
    hash: str
    origin: str
    """Where it came from: a file path, `hf:<dataset>` row, or `bundled`."""

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Task:
        return cls(**data)

    @classmethod
    def from_source(cls, source: str, *, id: str, name: str, level: int = 0, problem: int = 0,
                    origin: str = "inline") -> Task:
        return cls(id=id, level=level, problem=problem, name=name, source=source,
                   hash=content_hash(source), origin=origin)


def register_commands(subparsers) -> None:
    pass
