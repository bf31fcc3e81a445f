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

Beam (`BenchConfig.beam` = K): each task is searched by kevin.search.beam instead, one task at a time,
turn by turn: after each turn the K slots whose latest kernel scored best are each continued by N/K
slots (beam.py states the algorithm); rows carry `parent`. The budget is the same N x T attempts per
task. Metrics group rows by slot, so the per-trajectory columns (correct avg@k, mean speedup) describe
slots, not lineages; best@N and pass@N (the best over every attempt of a task) do not depend on that.

Resume: run again on the same directory and the finished work is skipped: (task, trajectory) pairs
with all T turns in episodes.jsonl, or with a beam each task's turns 1..m with a row for every slot;
rows of unfinished work (and a line cut short by a crash) are dropped first. A directory whose
config.json names other settings, another policy or other tasks is refused (a mixed run would report
numbers of neither). `tasks_per_batch` may change between launches.

`plan_bench` does the refusals and finds what is left to run without writing anything; `run_bench` runs
it. A policy with `missing(keys)` (kevin.rl.replay.ReplayPolicy) is refused before anything is evaluated
when its records lack a key to run, and one with `for_trajectories(slots)` is bound to each batch's order.

Not here: stopping a trajectory early, several samples per prompt, fixed budgets (kevin.search.study).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kevin.errors import UsageError
from kevin.rl.env import EpisodeConfig, Evaluator, Policy, run_episodes
from kevin.rl.episodes import EPISODES_FILE, episode_rows
from kevin.rl.metrics import compute_metrics, outcome_from_row
from kevin.rl.replay import ReplayKey, describe_key
from kevin.search import beam, report
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
    beam: int | None = None
    """Slots kept after each turn (K, dividing N), each continued by N/K (kevin.search.beam); None:
    N independent trajectories."""

    def __post_init__(self) -> None:
        self.episode_config(self.trajectories)  # EpisodeConfig validates every field
        if self.beam is not None:
            beam.select_parents([0.0] * self.trajectories, self.beam)  # K must divide N

    def episode_config(self, trajectories: int) -> EpisodeConfig:
        return EpisodeConfig(
            trajectories=trajectories,
            turns=self.turns,
            backend=self.backend,
            temperature=self.temperature,
            top_p=self.top_p,
            max_completion_tokens=self.max_completion_tokens,
        )

    @property
    def shape(self) -> str:
        """`16 trajectories x 8 turns`, with `, beam 4` when there is one."""
        beam_text = f", beam {self.beam}" if self.beam is not None else ""
        return f"{self.trajectories} trajectories x {self.turns} turns{beam_text}"


def _identity(config: BenchConfig, tasks: Sequence[Task], describe: Mapping[str, Any]) -> dict[str, Any]:
    settings = asdict(config)
    if config.beam is None:  # run directories written before beams existed resume unchanged
        del settings["beam"]
    return {
        "bench": settings,
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


def _task_line(rows: Sequence[Mapping[str, Any]], trajectories: int) -> str:
    """One task's rows of this launch: trajectories with a passed turn, turn 1's passes, the best."""
    outcomes = [(int(row["trajectory"]), outcome_from_row(row)) for row in rows]
    correct = {slot for slot, o in outcomes if o.passed}
    first = sum(o.passed for _, o in outcomes if o.turn == 1)
    best = max((o.speedup for _, o in outcomes), default=0.0)
    return f"correct {len(correct)}/{trajectories}, turn 1 passed {first}/{trajectories}, best {best:.2f}x"


@dataclass(frozen=True)
class BenchPlan:
    """A run directory checked against the run asked for, and what is left to run in it."""

    run_dir: Path
    identity: dict[str, Any]
    rows: list[dict[str, Any]]
    """episodes.jsonl as read."""
    kept: list[dict[str, Any]]
    """The rows of finished work; the others are dropped before the run goes on."""
    pending: dict[str, list[int]]
    """Without a beam: each task's trajectories still to run."""
    finished_turns: dict[str, dict[int, dict[int, beam.Row]]]
    """With a beam: each task's finished turns (beam.finished_turns)."""
    keys: list[ReplayKey]
    """Every (task, trajectory, turn) the policy is still to be asked for."""
    done_text: str
    """How much was already done, for the header line."""


def plan_bench(
    tasks: Sequence[Task],
    config: BenchConfig,
    run_dir: str | Path,
    *,
    describe: Mapping[str, Any] | None = None,
) -> BenchPlan:
    """Refuse a bad task list or another run's directory (UsageError), then find what is left to run.
    Writes nothing."""
    if not tasks:
        raise UsageError("no tasks to bench")
    ids = [task.id for task in tasks]
    if len(set(ids)) != len(ids):
        raise UsageError("a task is listed twice; list each task once")
    run_dir = Path(run_dir)
    identity = _identity(config, tasks, describe or {})
    config_path = run_dir / CONFIG_FILE
    if config_path.exists():
        check_same_run(config_path, identity, what="bench")
    rows = read_rows(run_dir / EPISODES_FILE)
    count, turns = config.trajectories, config.turns
    if config.beam is None:
        done = finished_pairs(rows, turns) & {(task.id, j) for task in tasks for j in range(count)}
        kept = [row for row in rows if (str(row["task"]), int(row["trajectory"])) in done]
        pending = {task.id: [j for j in range(count) if (task.id, j) not in done] for task in tasks}
        keys = [(t, j, turn) for t, js in pending.items() for j in js for turn in range(1, turns + 1)]
        done_text = f"{len(done)} of {len(tasks) * count} trajectories already done"
        return BenchPlan(
            run_dir, identity, rows, kept, pending=pending, finished_turns={}, keys=keys, done_text=done_text
        )
    by_task: dict[str, list[dict[str, Any]]] = {task.id: [] for task in tasks}
    for row in rows:
        if str(row["task"]) in by_task:
            by_task[str(row["task"])].append(row)
    finished = {task_id: beam.finished_turns(task_rows, count) for task_id, task_rows in by_task.items()}
    kept = [row for f in finished.values() for turn in sorted(f) for row in f[turn].values()]
    keys = [
        (t, j, turn)
        for t, f in finished.items()
        for turn in range(len(f) + 1, turns + 1)
        for j in range(count)
    ]
    done_text = f"{sum(len(f) for f in finished.values())} of {len(tasks) * turns} task turns already done"
    return BenchPlan(
        run_dir, identity, rows, kept, pending={}, finished_turns=finished, keys=keys, done_text=done_text
    )


def unrecorded(policy: Policy, keys: Sequence[ReplayKey]) -> list[ReplayKey]:
    """The keys a replay policy (one with `missing`) has no record of; none for any other policy."""
    missing = getattr(policy, "missing", None)
    return missing(keys) if missing is not None and keys else []


@dataclass(frozen=True)
class BenchOutcome:
    run_dir: Path
    metrics: dict[str, Any]
    """metrics.json's content."""
    evaluated_pairs: int
    """(task, trajectory) pairs run in this launch (with a beam: slots of the tasks searched)."""


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
    if tasks_per_batch < 1:
        raise UsageError(f"tasks per batch must be at least 1, got {tasks_per_batch}")
    plan = plan_bench(tasks, config, run_dir, describe=describe)
    absent = unrecorded(policy, plan.keys)
    if absent:
        raise UsageError(
            f"the replay records lack {len(absent)} of the {len(plan.keys)} turns to run, first "
            f"{describe_key(absent[0])}; record them or select fewer tasks, trajectories or turns"
        )
    run_dir = plan.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    if not (run_dir / CONFIG_FILE).exists():
        write_config(run_dir / CONFIG_FILE, plan.identity)
    episodes = run_dir / EPISODES_FILE
    if len(plan.kept) != len(plan.rows):
        write_rows(episodes, plan.kept, append=False)

    out(
        f"kevin bench: {len(tasks)} tasks x {config.shape}, backend {config.backend}, "
        f"run directory {run_dir}; {plan.done_text}"
    )
    if config.beam is None:
        run = _run_trajectories(tasks, policy, evaluator, config, plan, tasks_per_batch, out)
    else:
        run = _run_beams(tasks, policy, evaluator, config, plan, out)
    metrics = write_reports(run_dir, tasks, config, out=out)
    return BenchOutcome(run_dir, metrics, run)


def _run_trajectories(
    tasks: Sequence[Task],
    policy: Policy,
    evaluator: Evaluator,
    config: BenchConfig,
    plan: BenchPlan,
    tasks_per_batch: int,
    out: Callable[[str], None],
) -> int:
    """The pending trajectories, a batch of tasks at a time; the number of pairs run."""
    pending = plan.pending
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
        rows = episode_rows(trajectories)
        write_rows(plan.run_dir / EPISODES_FILE, rows, append=True)
        seconds = time.monotonic() - started
        for task in batch:
            finished_tasks += 1
            line = _task_line([row for row in rows if row["task"] == task.id], len(indices))
            out(f"[{finished_tasks}/{len(tasks)}] {task.id} {task.name}: {line} ({seconds:.0f} s)")
    return sum(len(v) for v in pending.values())


def _run_beams(
    tasks: Sequence[Task],
    policy: Policy,
    evaluator: Evaluator,
    config: BenchConfig,
    plan: BenchPlan,
    out: Callable[[str], None],
) -> int:
    """Each unfinished task's beam search from its finished turns; the number of slots run."""
    episodes = plan.run_dir / EPISODES_FILE
    run = 0
    for number, task in enumerate(tasks, start=1):
        finished = plan.finished_turns[task.id]
        if len(finished) == config.turns:
            continue
        started = time.monotonic()
        rows = [row for turn in sorted(finished) for row in finished[turn].values()]

        def on_turn(_turn: int, turn_rows: list[dict[str, Any]], rows: list[dict[str, Any]] = rows) -> None:
            write_rows(episodes, turn_rows, append=True)
            rows.extend(turn_rows)

        beam.search(
            task,
            policy,
            evaluator,
            config.episode_config(config.trajectories),
            beam=config.beam or config.trajectories,
            finished=finished,
            on_turn=on_turn,
        )
        run += config.trajectories
        line = _task_line(rows, config.trajectories)
        out(f"[{number}/{len(tasks)}] {task.id} {task.name}: {line} ({time.monotonic() - started:.0f} s)")
    return run


def write_reports(
    run_dir: Path, tasks: Sequence[Task], config: BenchConfig, *, out: Callable[[str], None] = print
) -> dict[str, Any]:
    """metrics.json, metrics.md and curves.png from the run's episodes of the given tasks."""
    ids = {task.id for task in tasks}
    rows = [row for row in read_rows(run_dir / EPISODES_FILE) if str(row["task"]) in ids]
    metrics = report.bench_metrics(compute_metrics(rows))
    (run_dir / report.METRICS_JSON).write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    title = f"{run_dir.name}: {len(tasks)} tasks x {config.shape}, backend {config.backend}"
    markdown = report.markdown(metrics, title=title)
    (run_dir / report.METRICS_MD).write_text(markdown, encoding="utf-8")
    plot = report.plot_curves(metrics, run_dir / report.CURVES_PNG, title=title)
    out(report.table1_markdown(metrics))
    out(f"written: {run_dir / report.METRICS_JSON}, {report.METRICS_MD}" + (f", {plot.name}" if plot else ""))
    return metrics
