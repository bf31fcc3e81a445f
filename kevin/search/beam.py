"""Multi-turn search on one task, turn by turn: N trajectories x T refinement turns, with a beam.

The algorithm (`search`, with `select_parents` for the beam):

    turn 1      N fresh trajectories (slots 0..N-1) each write a first attempt (the one-shot prompt).
    after turn t < T, with beam K (K divides N; K = N when no beam is asked for):
                rank the N slots by the score of the kernel each wrote at turn t (kevin.rl.reward:
                0.3 + speedup for a passed kernel, 0 for anything else; a verdict that failed on our
                side counts 0), ties to the lower slot, and keep the top K. The kept slots, taken in
                slot order, each hand their whole history to N/K consecutive slots: the i-th kept
                slot is the parent of slots i*N/K .. (i+1)*N/K - 1.
    turn t+1    every slot writes one more attempt from its parent's history (the prompt shows every
                earlier attempt of the lineage, its summary and its feedback; kevin.rl.prompts).
                Children of one parent read the same prompt and differ by sampling only.

With K = N every slot is its own parent: N independent trajectories, the episodes `kevin bench` runs.
The ranking reads the latest kernel only, not a lineage's best: a lineage whose last attempt failed
gives its place to one that is improving now. Dropping a lineage loses no kernel: the caller picks
its winner among every attempt of every turn.

Each turn runs through kevin.rl.env.continue_episodes (prompts, completions as they come, verdicts
from the evaluator), and its rows (kevin.rl.episodes rows, plus `parent`: the slot at turn t-1 whose
history the attempt continued, null at turn 1) go to `on_turn` as soon as the turn ends. Rows carry
no credit (`return` and `advantage` are null): credit is for training, and it needs the later turns.

Resume: `search` starts after the finished turns it is given (`finished_turns`: turns 1..m with a row
for every slot). `lineages` rebuilds each slot's history from them, and the parents of turn m+1 are
ranked again from those rows, as they were the first time. A rebuilt turn holds what later prompts
read (kernel, summary, verdict); its prompt text is not stored in the rows, only its hash.

A policy with `for_trajectories(slots, first_turn=)` (kevin.rl.replay.ReplayPolicy) is bound to each
turn: slot j's completion at turn t is the record (task, j, t). Not here: stopping a slot after a
correct kernel, merging slots that wrote the same kernel, ranking by anything but the score.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kevin.errors import UsageError
from kevin.evaluator.result import EvalResult
from kevin.rl.candidate import parse_completion
from kevin.rl.env import EpisodeConfig, Evaluator, Generation, Policy, Trajectory, Turn, continue_episodes
from kevin.rl.episodes import turn_row
from kevin.rl.prompts import Prompt
from kevin.tasks import Task

Row = dict[str, Any]


def select_parents(scores: Sequence[float | None], beam: int) -> list[int]:
    """The parent slot of each of the next turn's len(scores) slots (module docstring): the top `beam`
    slots by score (None counts 0; ties to the lower slot), in slot order, each repeated N/beam times."""
    count = len(scores)
    if not 1 <= beam <= count or count % beam:
        raise ValueError(f"beam must divide the {count} trajectories, got {beam}")
    ranked = sorted(range(count), key=lambda slot: (-(scores[slot] or 0.0), slot))
    kept = sorted(ranked[:beam])
    branch = count // beam
    return [kept[slot // branch] for slot in range(count)]


def finished_turns(rows: Sequence[Mapping[str, Any]], trajectories: int) -> dict[int, dict[int, Row]]:
    """The rows of turns 1..m, by turn and slot, where m is the last turn such that every turn up to it
    has exactly one row for each of the `trajectories` slots; later rows are left out."""
    by_turn: dict[int, dict[int, Row]] = {}
    counts: dict[int, int] = {}
    for row in rows:
        turn, slot = int(row["turn"]), int(row["trajectory"])
        by_turn.setdefault(turn, {})[slot] = dict(row)
        counts[turn] = counts.get(turn, 0) + 1
    finished: dict[int, dict[int, Row]] = {}
    for turn in range(1, len(by_turn) + 1):
        slots = by_turn.get(turn, {})
        if counts.get(turn) != trajectories or set(slots) != set(range(trajectories)):
            break
        finished[turn] = slots
    return finished


def _turn_from_row(row: Mapping[str, Any]) -> Turn:
    number = int(row["turn"])
    dropped = int(row.get("attempts_dropped") or 0)
    tokens = row.get("completion_tokens")
    return Turn(
        turn=number,
        prompt=Prompt(
            text="",  # not stored; later prompts read the kernel, summary and verdict below
            turn=number,
            attempts_shown=number - 1 - dropped,
            attempts_dropped=dropped,
            tokens=row.get("prompt_tokens"),
            over_budget=bool(row.get("over_budget")),
        ),
        generation=Generation(
            str(row["completion"]), row.get("finish_reason"), int(tokens) if tokens is not None else None
        ),
        parsed=parse_completion(str(row["completion"])),
        result=EvalResult.from_dict(row["verdict"]),
        score=row.get("score"),
    )


def lineages(task: Task, finished: Mapping[int, Mapping[int, Row]]) -> list[Trajectory]:
    """Every slot's history after the last finished turn, rebuilt by following the `parent` fields."""
    histories: list[list[Turn]] = []
    for turn in range(1, len(finished) + 1):
        slots = finished[turn]
        previous = histories
        histories = []
        for slot in range(len(slots)):
            row = slots[slot]
            parent = row.get("parent")
            if turn == 1:
                earlier: list[Turn] = []
            elif isinstance(parent, int) and 0 <= parent < len(previous):
                earlier = previous[parent]
            else:
                raise UsageError(
                    f"turn {turn} trajectory {slot} names no valid parent ({parent!r}): the episodes were "
                    "not written by kevin optimize; give a new --out directory"
                )
            histories.append([*earlier, _turn_from_row(row)])
    return [Trajectory(task, slot, turns) for slot, turns in enumerate(histories)]


def search(
    task: Task,
    policy: Policy,
    evaluator: Evaluator,
    config: EpisodeConfig,
    *,
    beam: int,
    finished: Mapping[int, Mapping[int, Row]],
    on_turn: Callable[[int, list[Row]], None],
) -> None:
    """Run turns len(finished)+1 .. config.turns of `config.trajectories` slots (module docstring),
    handing each turn's rows to `on_turn(turn, rows)` when it ends."""
    count = config.trajectories
    current = lineages(task, finished)
    bind = getattr(policy, "for_trajectories", None)
    slots = [(task.id, slot) for slot in range(count)]
    for number in range(len(finished) + 1, config.turns + 1):
        if current:
            parents: list[int | None] = list(select_parents([t.turns[-1].score for t in current], beam))
            trajectories = [Trajectory(task, slot, list(current[p].turns)) for slot, p in enumerate(parents)]
        else:
            parents = [None] * count
            trajectories = [Trajectory(task, slot) for slot in range(count)]
        turn_policy = bind(slots, first_turn=number) if bind is not None else policy
        continue_episodes(trajectories, turn_policy, evaluator, config, turns=1)
        on_turn(
            number,
            [{**turn_row(t, t.turns[-1]), "parent": parent} for t, parent in zip(trajectories, parents)],
        )
        current = trajectories
