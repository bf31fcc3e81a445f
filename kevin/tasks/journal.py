"""What a long task command has already learned, kept on disk as it learns it.

`kevin tasks generate --device cuda --min-ms X` validates and measures each drawn task in turn: on
the GPU machine ~3 s a task at `--jobs 2`, so 100 large tasks outlast a 10-minute device call, and
the set was written only at the end (session 33: cut at 96 of 100 validations, nothing kept). A
`Journal` appends one JSON line per outcome (a task's validation, its measurement) the moment it
is known and flushes it; the same command run again into the same folder reads them back and does
only the rest, and the finished set is the one an uninterrupted run writes.

The first line is the header: everything that changes an outcome (seed, size, device, threshold,
...). A journal whose header differs from the command's is refused rather than mixed in. A last
line torn by a kill is ignored (that outcome is found again).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kevin.errors import UsageError


class Journal:
    def __init__(self, path: str | Path, header: dict[str, Any]) -> None:
        self.path = Path(path)
        self.header = json.loads(json.dumps(header))  # as it reads back (tuples as lists)
        self.entries: dict[tuple[str, str], dict[str, Any]] = {}
        if not self.path.is_file():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps({"header": self.header}, sort_keys=True) + "\n", encoding="utf-8")
            return
        lines = self.path.read_text(encoding="utf-8").splitlines()
        saved = json.loads(lines[0]).get("header") if lines else None
        if saved != self.header:
            raise UsageError(
                f"{self.path} is the journal of a run with other options ({_difference(saved, self.header)}); "
                "run with the same options to go on, or write to an empty folder"
            )
        for line in lines[1:]:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # the last line of a run killed mid-write
            self.entries[(row["kind"], row["key"])] = row["data"]

    def get(self, kind: str, key: str) -> dict[str, Any] | None:
        return self.entries.get((kind, key))

    def put(self, kind: str, key: str, data: dict[str, Any]) -> None:
        self.entries[(kind, key)] = data
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"kind": kind, "key": key, "data": data}, sort_keys=True) + "\n")

    def __len__(self) -> int:
        return len(self.entries)


def _difference(saved: dict[str, Any] | None, current: dict[str, Any]) -> str:
    if not isinstance(saved, dict):
        return "no header"
    keys = sorted(k for k in {*saved, *current} if saved.get(k) != current.get(k))
    return ", ".join(f"{k} {saved.get(k)!r} there, {current.get(k)!r} now" for k in keys)
