"""Which operator sequences a generated task may not have: KernelBench's, read two ways (#18).

    forward_code  each KernelBench L1/L2 problem's `Model.forward` read with ast (kevin.tasks.kbcode):
                  what the problem computes, whatever its name says
    file_name     the words of each file name (`12_Gemm_Multiply_LeakyReLU.py`), synonyms merged
                  (kevin.tasks.operators.canonical): what its author called it

A sequence either source holds is rejected, and so is one already drawn for the same set. The file
names stay a source because they catch what the code reading does not: a forward it cannot follow
(a loop, a branch), and a name that files an op under ours when the code reads as another
(`..._Hardtanh_Mean_Tanh` whose "Mean" is a mean over (2, 3), read as GlobalAvgPool). `Dedupe`
counts the candidates each source turned away; `kevin tasks generate` writes the counts into
its manifest. Nothing here imports or runs a problem.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kevin.tasks import operators
from kevin.tasks.kbcode import read_forward
from kevin.tasks.loaders import kernelbench_dir, read_problem_text

SOURCES = ("forward_code", "file_name")
REPEAT = "earlier_in_set"


def _problem_files(root: Path, levels: Sequence[int]) -> list[Path]:
    return [path for level in levels for path in sorted((root / f"level{level}").glob("*.py"))]


def kernelbench_sequences(directory: str | Path | None = None, levels: Sequence[int] = (1, 2)) -> set[str]:
    """Sequence keys of the KernelBench problems of `levels`, read from file names; empty when absent."""
    root = Path(directory) if directory is not None else kernelbench_dir()
    keys: set[str] = set()
    for path in _problem_files(root, levels):
        match = re.match(r"^\d+_(.+)$", path.stem)
        if match:
            keys.add(operators.sequence_key([w for w in match.group(1).split("_") if w]))
    return keys


@dataclass(frozen=True)
class KernelBenchSequences:
    """KernelBench's operator sequences, by source."""

    forward_code: frozenset[str] = frozenset()
    file_name: frozenset[str] = frozenset()
    forwards_read: int = 0
    unread: tuple[tuple[str, str], ...] = ()
    """(level/file, why) of each forward the code reading could not follow."""

    @property
    def keys(self) -> frozenset[str]:
        return self.forward_code | self.file_name

    def sources(self, key: str) -> tuple[str, ...]:
        """The sources that hold `key`, in `SOURCES` order."""
        return tuple(s for s in SOURCES if key in getattr(self, s))


def load_kernelbench(
    directory: str | Path | None = None, levels: Sequence[int] = (1, 2)
) -> KernelBenchSequences:
    """Both sources for `levels` of the KernelBench folder (default: kernelbench_dir()); empty when absent."""
    root = Path(directory) if directory is not None else kernelbench_dir()
    by_code: set[str] = set()
    unread: list[tuple[str, str]] = []
    files = _problem_files(root, levels)
    for path in files:
        reading = read_forward(read_problem_text(path))
        if reading.unhandled:
            unread.append((f"{path.parent.name}/{path.name}", reading.unhandled))
        else:
            by_code.add(operators.sequence_key(reading.ops))
    return KernelBenchSequences(
        forward_code=frozenset(by_code),
        file_name=frozenset(kernelbench_sequences(root, levels)),
        forwards_read=len(files) - len(unread),
        unread=tuple(unread),
    )


@dataclass
class Dedupe:
    """The sequences a new task may not have, and how many candidates each source turned away."""

    kernelbench: KernelBenchSequences
    taken: set[str] = field(default_factory=set)
    rejected: Counter = field(default_factory=Counter)

    def admit(self, key: str) -> bool:
        """True (and `key` taken from now on) when no source holds it; else count who rejected it."""
        sources = self.kernelbench.sources(key)
        if not sources and key not in self.taken:
            self.taken.add(key)
            return True
        for source in sources:
            self.rejected[source] += 1
        if len(sources) == 1:
            self.rejected[f"{sources[0]}_only"] += 1
        if not sources:
            self.rejected[REPEAT] += 1
        return False

    def report(self) -> dict:
        """The manifest's record: each source's size and rejections (`X_only`: X alone held it)."""
        sequences = self.kernelbench
        names = [*SOURCES, *(f"{s}_only" for s in SOURCES), REPEAT]
        return {
            "forward_code_sequences": len(sequences.forward_code),
            "file_name_sequences": len(sequences.file_name),
            "forwards_read": sequences.forwards_read,
            "forwards_unread": [{"file": f, "why": why} for f, why in sequences.unread],
            "rejected": {name: self.rejected.get(name, 0) for name in names},
        }
