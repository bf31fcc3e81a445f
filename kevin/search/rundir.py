"""A resumable run directory's two files: config.json (what was run) and episodes.jsonl (every turn).

`kevin bench` and `kevin optimize` both resume the same way: the run's identity (its settings, policy,
evaluator and tasks, as JSON) is written to config.json on the first launch, and a later launch on the
same directory must present the same identity or be refused; the episode rows written so far are read
back, a last line cut short by a crash dropped, and the run goes on from them. Which rows count as
finished is each command's own rule (bench: whole trajectories; optimize: whole turns).

Rows are appended with an fsync after each batch, so an interrupted run keeps every finished batch;
`write_rows(append=False)` replaces the file atomically (a rename), used to drop unfinished rows.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kevin.errors import UsageError

CONFIG_FILE = "config.json"


def check_same_run(path: Path, identity: Mapping[str, Any], *, what: str) -> None:
    """UsageError (one line) unless the config.json at `path` records exactly `identity`."""
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: unreadable ({exc}); give a new --out directory") from None
    if not isinstance(recorded, dict):
        raise UsageError(f"{path}: not a {what} run's config (not a JSON object); give a new --out directory")
    for key in sorted(set(recorded) | set(identity)):
        if recorded.get(key) != identity.get(key):
            raise UsageError(
                f"{path.parent} holds another {what} run: its {key!r} differs "
                f"({json.dumps(recorded.get(key))[:120]} vs now {json.dumps(identity.get(key))[:120]}); "
                "resume with the same settings or give a new --out directory"
            )


def write_config(path: Path, identity: Mapping[str, Any]) -> None:
    path.write_text(json.dumps(identity, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Rows of an episodes file (none when it is absent); a last line cut short by a crash is dropped,
    a bad line elsewhere is a UsageError naming it."""
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8").split("\n")
    rows = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):  # no newline after it: the write was interrupted
                continue
            raise UsageError(f"{path}:{number}: not valid JSON; repair or remove the line") from None
        rows.append(row)
    return rows


def write_rows(path: Path, rows: Sequence[Mapping[str, Any]], *, append: bool) -> None:
    """Append `rows` (flushed to disk before returning; a last line cut short by a crash goes first),
    or replace the file with them atomically."""
    text = "".join(json.dumps(row, sort_keys=True) + "\n" for row in rows)
    if append:
        with path.open("a+b") as handle:
            size = handle.seek(0, os.SEEK_END)
            if size:
                handle.seek(size - 1)
                if handle.read(1) != b"\n":  # a line cut short by a crash (read_rows skipped it)
                    handle.seek(0)
                    handle.truncate(handle.read().rfind(b"\n") + 1)
            handle.write(text.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        return
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)
