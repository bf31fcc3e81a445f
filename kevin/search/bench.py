"""`run_bench`: a policy over a task set, N trajectories x T turns, into a resumable run directory.

Every task gets N parallel trajectories of T turns (kevin.rl.env.run_episodes: each turn's prompt
carries the earlier turns' kernels, summaries and verdicts), judged by the evaluator it is given.
Tasks go through `tasks_per_batch` at a time (one run_episodes call each: the policy sees every prompt
of a batch's turn at once), and each batch's turns are appended to the run directory as soon as the
batch ends. The run directory:

    config.json     what was run: the bench settings, the policy, the evaluator, each task's id and hash
    episodes.jsonl  every turn of every trajectory (kevin.rl.episodes rows, step 0): completion,
                    candidate, verdict, score; re-verifiable with `kevin eval`, replayable as records
    metrics.json    kevin.rl.metrics over the run, and the Table 1 columns (kevin.search.report)
    metrics.md      the same as markdown tables, overall and by turn
    curves.png      Table 1 columns against the number of turns (when matplotlib is installed)

Resume: run again on the same directory and the (task, trajectory) pairs with all T turns in
episodes.jsonl are skipped; rows of unfinished pairs (and a line cut short by a crash) are dropped
first. A directory whose config.json names other settings, another policy or other tasks is refused
(a mixed run would report numbers of neither). `tasks_per_batch` may change between launches.

A policy with `for_trajectories(slots)` and `missing(keys)` (kevin.rl.replay.ReplayPolicy) is bound
to each batch's order, and a run whose records lack a key is refused before anything is evaluated.

Not here: stopping a trajectory early, several samples per prompt, test-time search, fixed budgets.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kevin.errors import UsageError
from kevin.rl.env import EpisodeConfig, Evaluator, Policy, Trajectory, run_episodes
from kevin.rl.episodes import EPISODES_FILE, episode_rows
from kevin.rl.metrics import compute_metrics
from kevin.rl.replay import describe_key
from kevin.search import report
from kevin.search.rundir import CONFIG_FILE, check_same_run, read_rows, write_config, write_rows
from kevin.tasks import Task


@dataclass(frozen=True)
class BenchConfig:
    """What one bench run measures. Defaults: the paper's test setup (16 trajectories x 8 turns)."""

    trajectories: int = 16
    """Parallel trajectories per task (N)."""
    turns: int = 8
    """Refinement turns per trajectory (T)."""
    backend: str = "cpp"
    """Prompt back end, the evaluator's too: `cpp` on a CPU, `cuda` on a GPU."""
    temperature: float = 0.9
    top_p: float = 1.0
    max_completion_tokens: int = 16384

    def __post_init__(self) -> None:
        self.episode_config(self.trajectories)  # EpisodeConfig validates every field

    def episode_config(self, trajectories: int) -> EpisodeConfig:
        return EpisodeConfig(
            trajectories=trajectories,
            turns=self.turns,
            backend=self.backend,
            temperature=self.temperature,
            top_p=self.top_p,
            max_completion_tokens=self.max_completion_tokens,
        )


def _identity(config: BenchConfig, tasks: Sequence[Task], describe: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "bench": asdict(config),
        **{key: value for key, value in describe.items()},
        "tasks": [{"id": task.id, "hash": task.hash, "name": task.name} for task in tasks],
    }


def finished_pairs(rows: Sequence[Mapping[str, Any]], turns: int) -> set[tuple[str, int]]:
    """(task, trajectory) pairs that have every turn 1..turns."""
    seen: dict[tuple[str, int], set[int]] = {}
    for row in rows:
        seen.setdefault((str(row["task"]), int(row["trajectory"])), set()).add(int(row["turn"]))
    wanted = set(range(1, turns + 1))
    return {pair for pair, numbers in seen.items() if numbers >= wanted}


def _batches(tasks: Sequence[Task], pending: Mapping[str, list[int]], size: int) -> list[list[Task]]:
    """Tasks with the same trajectories to run go together (one run_episodes call), `size` at most."""
    groups: dict[tuple[int, ...], list[Task]] = {}
    for task in tasks:
        if pending[task.id]:
            groups.setdefault(tuple(pending[task.id]), []).append(task)
    return [group[i : i + size] for group in groups.values() for i in range(0, len(group), size)]


def _task_line(trajectories: Sequence[Trajectory]) -> str:
    passed = [t for t in trajectories if t.passed]
    best = max(
        (turn.result.speedup or 0.0 for t in passed for turn in t.turns if turn.result.passed), default=0.0
    )
    first = sum(t.turns[0].result.passed for t in trajectories if t.turns)
    return (
        f"correct {len(passed)}/{len(trajectories)}, turn 1 passed {first}/{len(trajectories)}, "
        f"best {best:.2f}x"
    )


@dataclass(frozen=True)
class BenchOutcome:
    run_dir: Path
    metrics: dict[str, Any]
    """metrics.json's content."""
    evaluated_pairs: int
    """(task, trajectory) pairs run in this launch; the rest were already done."""


def run_bench(
    tasks: Sequence[Task],
    policy: Policy,
    evaluator: Evaluator,
    config: BenchConfig,
    run_dir: str | Path,
    *,
    describe: Mapping[str, Any] | None = None,
    tasks_per_batch: int = 8,
    out: Callable[[str], None] = print,
) -> BenchOutcome:
    """Run what is not done yet, then write the metrics, tables and curves (module docstring).

    `describe` holds JSON-able descriptions of the policy and evaluator (keys `policy`, `evaluator`)
    for config.json; a resume must describe them the same way."""
    if not tasks:
        raise UsageError("no tasks to bench")
    if tasks_per_batch < 1:
        raise UsageError(f"tasks per batch must be at least 1, got {tasks_per_batch}")
    ids = [task.id for task in tasks]
    if len(set(ids)) != len(ids):
        raise UsageError("a task is listed twice; list each task once")
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    identity = _identity(config, tasks, describe or {})
    config_path = run_dir / CONFIG_FILE
    if config_path.exists():
        check_same_run(config_path, identity, what="bench")

    episodes = run_dir / EPISODES_FILE
    rows = read_rows(episodes)
    done = finished_pairs(rows, config.turns) & {
        (task.id, j) for task in tasks for j in range(config.trajectories)
    }
    kept = [row for row in rows if (str(row["task"]), int(row["trajectory"])) in done]
    pending = {task.id: [j for j in range(config.trajectories) if (task.id, j) not in done] for task in tasks}
    to_run = sum(len(v) for v in pending.values())

    missing = getattr(policy, "missing", None)
    if missing is not None:
        keys = [(t, j, turn) for t, js in pending.items() for j in js for turn in range(1, config.turns + 1)]
        absent = missing(keys)
        if absent:
            raise UsageError(
                f"the replay records lack {len(absent)} of the {len(keys)} turns to run, first "
                f"{describe_key(absent[0])}; record them or select fewer tasks, trajectories or turns"
            )
    if not config_path.exists():
        write_config(config_path, identity)
    if len(kept) != len(rows):
        write_rows(episodes, kept, append=False)

    out(
        f"kevin bench: {len(tasks)} tasks x {config.trajectories} trajectories x {config.turns} turns, "
        f"backend {config.backend}, run directory {run_dir}; "
        f"{len(done)} of {len(tasks) * config.trajectories} trajectories already done"
    )
    finished_tasks = sum(not v for v in pending.values())
    bind = getattr(policy, "for_trajectories", None)
    for batch in _batches(tasks, pending, tasks_per_batch):
        started = time.monotonic()
        indices = pending[batch[0].id]
        slots = [(task.id, j) for task in batch for j in indices]
        batch_policy = bind(slots) if bind is not None else policy
        trajectories = run_episodes(batch, batch_policy, evaluator, config.episode_config(len(indices)))
        for trajectory in trajectories:  # run_episodes numbers them 0..n-1; these are the pending ones
            trajectory.index = indices[trajectory.index]
        write_rows(episodes, episode_rows(trajectories), append=True)
        seconds = time.monotonic() - started
        for task in batch:
            finished_tasks += 1
            mine = [t for t in trajectories if t.task.id == task.id]
            out(
                f"[{finished_tasks}/{len(tasks)}] {task.id} {task.name}: {_task_line(mine)} ({seconds:.0f} s)"
            )

    metrics = write_reports(run_dir, tasks, config, out=out)
    return BenchOutcome(run_dir, metrics, to_run)


def write_reports(
    run_dir: Path, tasks: Sequence[Task], config: BenchConfig, *, out: Callable[[str], None] = print
) -> dict[str, Any]:
    """metrics.json, metrics.md and curves.png from the run's episodes of the given tasks."""
    ids = {task.id for task in tasks}
    rows = [row for row in read_rows(run_dir / EPISODES_FILE) if str(row["task"]) in ids]
    metrics = report.bench_metrics(compute_metrics(rows))
    (run_dir / report.METRICS_JSON).write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    title = (
        f"{run_dir.name}: {len(tasks)} tasks x {config.trajectories} trajectories x {config.turns} turns, "
        f"backend {config.backend}"
    )
    markdown = report.markdown(metrics, title=title)
    (run_dir / report.METRICS_MD).write_text(markdown, encoding="utf-8")
    plot = report.plot_curves(metrics, run_dir / report.CURVES_PNG, title=title)
    out(report.table1_markdown(metrics))
    out(f"written: {run_dir / report.METRICS_JSON}, {report.METRICS_MD}" + (f", {plot.name}" if plot else ""))
    return metrics
