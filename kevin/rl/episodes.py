"""Episode records: every turn of every trajectory as one JSON line, so a run can be read by a person.

One row per turn (STYLE.md §10: reward hacking is spotted by reading). Fields:

    step              which batch of episodes (the training step; 0 for a single evaluation run)
    task, task_hash   the task's id and the hash of its source
    trajectory        0-based index among the task's parallel trajectories
    turn              1-based turn number
    prompt_hash       hash of the prompt text (the prompt itself is rebuilt from the earlier rows)
    prompt_tokens     its length by the policy's tokenizer, when one was given
    attempts_dropped  earlier attempts left out of the prompt to fit the budget; over_budget if even that failed
    completion        the model's whole output, reasoning included
    finish_reason     `stop`, `length` (truncated at max tokens) or null
    completion_tokens the completion's length in tokens, when the policy reported it
    candidate         the parsed kernel source, null on a format error
    summary           the model's summary after the code block
    verdict           the EvalResult as a dict (stage, correct, speedup, feedback, flags, blame, ...)
    score             the kernel's score; null when the evaluation failed on our side
    return, advantage the turn's discounted return and advantage; null when not trainable
    trainable         false for turns excluded from training (evaluation failed on our side)

`kevin metrics PATH` reads these files (`kevin.rl.metrics`). Rows are appended, so one file can hold many
steps; readers key trajectories by (step, task, trajectory).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Any

from kevin.rl.env import Trajectory, Turn
from kevin.tasks import content_hash

EPISODES_FILE = "episodes.jsonl"
"""Name of the episodes file inside a run directory."""


def turn_row(trajectory: Trajectory, turn: Turn, *, step: int = 0) -> dict[str, Any]:
    """The JSON row of one turn."""
    return {
        "step": step,
        "task": trajectory.task.id,
        "task_hash": trajectory.task.hash,
        "trajectory": trajectory.index,
        "turn": turn.turn,
        "prompt_hash": content_hash(turn.prompt.text),
        "prompt_tokens": turn.prompt.tokens,
        "attempts_dropped": turn.prompt.attempts_dropped,
        "over_budget": turn.prompt.over_budget,
        "completion": turn.generation.text,
        "finish_reason": turn.generation.finish_reason,
        "completion_tokens": turn.generation.completion_tokens,
        "candidate": turn.parsed.candidate,
        "summary": turn.parsed.summary,
        "verdict": turn.result.to_dict(),
        "score": turn.score,
        "return": turn.discounted_return,
        "advantage": turn.advantage,
        "trainable": turn.trainable,
    }


def episode_rows(trajectories: Iterable[Trajectory], *, step: int = 0) -> list[dict[str, Any]]:
    """Rows of every turn, trajectory by trajectory, in turn order."""
    return [turn_row(t, turn, step=step) for t in trajectories for turn in t.turns]


def write_episodes(path: str | Path, trajectories: Sequence[Trajectory], *, step: int = 0) -> int:
    """Append the rows of `trajectories` to the JSONL file at `path`; return how many were written."""
    rows = episode_rows(trajectories, step=step)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, sort_keys=True) + "\n")
    return len(rows)


def stored(path: str | Path) -> Path:
    """`path`, or `path.gz` where only the gzipped copy exists (committed results keep large JSONL
    files gzipped, so that a device call's tree has room for a run's carry)."""
    path = Path(path)
    packed = path.with_name(path.name + ".gz")
    return packed if not path.exists() and packed.is_file() else path


def open_text(path: str | Path) -> IO[str]:
    """A text file for reading, gunzipped on the fly when its name ends in .gz."""
    path = Path(path)
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else path.open(encoding="utf-8")


def read_episodes(path: str | Path) -> list[dict[str, Any]]:
    """Rows of an episodes file (gzipped when its name ends in .gz), or of `episodes.jsonl` (or its
    .gz) in a run directory. Blank lines are skipped; a line that is not a JSON object raises
    ValueError naming the line."""
    path = Path(path)
    if path.is_dir():
        path = stored(path / EPISODES_FILE)
    rows = []
    with open_text(path) as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise ValueError(f"{path}:{number}: expected a JSON object per line")
            rows.append(row)
    return rows
