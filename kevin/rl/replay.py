"""Replay: a policy that answers with completions recorded earlier, for tests, demos and re-scoring.

Each completion is keyed by (task id, trajectory index, turn): the same text comes back for the
same place in an episode, so an old run's completions can be judged again by a newer evaluator,
and a test or a demo runs the whole pipeline without a model.

Records: a JSONL file, one object per line, with

    task          the task id (str)
    trajectory    0-based index among the task's parallel trajectories (int)
    turn          1-based turn number (int)
    completion    the text the policy wrote (str)
    finish_reason, completion_tokens, step     optional

These are the field names of an episodes file (kevin.rl.episodes), so a run's `episodes.jsonl`, or the
run directory itself, replays as it is. A file with rows from several steps (a training run) needs
`step=` to pick one; a (task, trajectory, turn) given twice is an error, never "take the last".

Prompts are plain text and do not say which trajectory they belong to, so `ReplayPolicy` is bound to
the environment's order for each `run_episodes` call: `for_trajectories(slots)` gives the policy of
one call, `slots` being the (task id, trajectory index) of its prompts in the order run_episodes lays
them out (task-major, trajectories in index order), and its n-th `generate` call being turn n (turn
`first_turn` + n - 1 for a continue_episodes call that starts later). That
needs every trajectory asked every turn (`EpisodeConfig.stop_after_correct` off); a batch of another
size raises. A record missing for a key asked for raises `MissingRecord`, a UsageError (exit 2 from
the CLI); `missing(keys)` lists them up front so a run can refuse before it starts.

This module does not check that a record's task hash matches the task it is replayed against.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kevin.errors import UsageError
from kevin.rl.env import Generation, Sampling
from kevin.rl.episodes import EPISODES_FILE

ReplayKey = tuple[str, int, int]
"""(task id, 0-based trajectory, 1-based turn)."""

REQUIRED_FIELDS = ("task", "trajectory", "turn", "completion")


class MissingRecord(UsageError):
    """A (task, trajectory, turn) was asked for that the records do not hold."""


def describe_key(key: ReplayKey) -> str:
    task, trajectory, turn = key
    return f"task {task} trajectory {trajectory} turn {turn}"


def _parse_row(row: Any, where: str) -> tuple[int, ReplayKey, Generation]:
    if not isinstance(row, dict):
        raise UsageError(f"{where}: expected a JSON object per line")
    absent = [name for name in REQUIRED_FIELDS if name not in row]
    if absent:
        raise UsageError(
            f"{where}: the record lacks {', '.join(absent)} (needs {', '.join(REQUIRED_FIELDS)})"
        )
    try:
        key = (str(row["task"]), int(row["trajectory"]), int(row["turn"]))
        step = int(row.get("step") or 0)
        tokens = row.get("completion_tokens")
        generation = Generation(
            text=str(row["completion"]),
            finish_reason=row.get("finish_reason"),
            completion_tokens=int(tokens) if tokens is not None else None,
        )
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{where}: trajectory, turn and step must be integers ({exc})") from None
    if key[1] < 0 or key[2] < 1:
        raise UsageError(f"{where}: trajectory must be >= 0 and turn >= 1, got {key[1]} and {key[2]}")
    return step, key, generation


def read_records(path: str | Path, *, step: int | None = None) -> dict[ReplayKey, Generation]:
    """The completions of a records file (or of a run directory's episodes.jsonl), by key. UsageError,
    naming the line, for a missing file, a bad line, a duplicate key or a file of several steps
    without `step`."""
    path = Path(path)
    if path.is_dir():
        path = path / EPISODES_FILE
    if not path.is_file():
        raise UsageError(
            f"replay records not found: {path} (give a JSONL of task, trajectory, turn, completion, "
            f"or a run directory holding {EPISODES_FILE})"
        )
    by_step: dict[int, dict[ReplayKey, Generation]] = {}
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UsageError(f"{where}: not valid JSON ({exc.msg})") from None
            row_step, key, generation = _parse_row(row, where)
            if step is not None and row_step != step:
                continue
            records = by_step.setdefault(row_step, {})
            if key in records:
                raise UsageError(f"{where}: a second record for {describe_key(key)} (step {row_step})")
            records[key] = generation
    if step is not None and step not in by_step:
        raise UsageError(f"{path}: no records of step {step}")
    if len(by_step) > 1:
        raise UsageError(f"{path} holds steps {sorted(by_step)}; pick one (--replay-step)")
    return next(iter(by_step.values()), {})


class ReplayPolicy:
    """Recorded completions by (task, trajectory, turn); `for_trajectories` gives the `Policy` of one
    run_episodes call (see the module docstring)."""

    def __init__(self, records: Mapping[ReplayKey, str | Generation], *, origin: str = "") -> None:
        self.records = {
            key: value if isinstance(value, Generation) else Generation(str(value))
            for key, value in records.items()
        }
        self.origin = origin
        """Where the records came from, for the run's description."""
        self.asked: list[ReplayKey] = []
        """Every key answered, in order (for tests)."""

    @classmethod
    def from_file(cls, path: str | Path, *, step: int | None = None) -> ReplayPolicy:
        return cls(read_records(path, step=step), origin=str(path))

    def completion(self, key: ReplayKey) -> Generation:
        if key not in self.records:
            raise MissingRecord(
                f"no recorded completion for {describe_key(key)} in {self.origin or 'the records'}"
            )
        self.asked.append(key)
        return self.records[key]

    def missing(self, keys: Iterable[ReplayKey]) -> list[ReplayKey]:
        """The keys among `keys` that have no record, in the order given."""
        return [key for key in keys if key not in self.records]

    def for_trajectories(self, slots: Sequence[tuple[str, int]], *, first_turn: int = 1) -> _ReplayRun:
        """The policy of one run_episodes call whose prompts are `slots` (task id, trajectory) each turn,
        its first `generate` call answering turn `first_turn`."""
        if first_turn < 1:
            raise ValueError(f"first_turn must be at least 1, got {first_turn}")
        return _ReplayRun(self, list(slots), first_turn)


class _ReplayRun:
    """One run_episodes call's replay: the n-th `generate` call answers turn first_turn + n - 1 of
    every slot."""

    def __init__(self, replay: ReplayPolicy, slots: list[tuple[str, int]], first_turn: int = 1) -> None:
        self.replay = replay
        self.slots = slots
        self.turn = first_turn - 1

    def generate(self, prompts: list[str], sampling: Sampling) -> list[Generation]:
        self.turn += 1
        if len(prompts) != len(self.slots):
            raise RuntimeError(
                f"replay turn {self.turn}: {len(prompts)} prompts for {len(self.slots)} trajectories; "
                "replay needs every trajectory asked every turn (stop_after_correct off)"
            )
        return [self.replay.completion((task, trajectory, self.turn)) for task, trajectory in self.slots]
