"""`run_optimize`: kevin's multi-turn search on one user module, its winner re-verified and written as
a drop-in `ModelNew`.

The module is a KernelBench-format file (`class Model`, `get_inputs()`, `get_init_inputs()`), read
with kevin.tasks.load_file and checked without running it (`load_module`): a missing piece or a
syntax error is a UsageError that says what to add.

The run:

1. Search: N trajectories x T refinement turns, optionally with a beam of K (the algorithm is in
   kevin.search.beam's docstring). Each turn's rows are appended to episodes.jsonl as soon as the
   turn ends, and one progress line per turn is printed.
2. Winner: the passed attempt with the highest speedup (ties: earlier turn, then lower trajectory).
   It is evaluated again by `verify` (the CLI's: the same evaluator settings with a fresh secret
   seed, so new inputs and weights) on the module, then on the module re-parameterised at each
   shape set the user names (`reshape_source`). It must pass every check; a check that failed on
   our side (blame `infrastructure`) is run once more before it counts. When the kernel fails one,
   the next-best distinct passed kernel is tried, up to VERIFY_TRIES kernels; the first that passes
   them all is the winner.
3. Files in the out directory: `<stem>_kevin.py` (the winner's source, unchanged, under a comment
   header: the search's verdict, each re-verification's, the command), report.md and report.png
   (kevin.search.attempts), episodes.jsonl (the rows `kevin bench` writes, plus `parent`),
   config.json (what was run), result.json (the winner, every re-verification verdict, or why there
   is no winner). Without a winner the drop-in is removed if an earlier launch wrote one, and the
   report is still written.

Resume: run again on the same directory and the finished turns (a row for every trajectory) are
kept; rows of an unfinished turn are dropped and the search goes on from the next turn, its beam
ranked again from the kept rows. A directory whose config.json records other search settings,
another policy, evaluator or module is refused (UsageError). Re-verification runs on every launch,
each time with a fresh seed.

Shapes: `--verify-shapes NAME=VALUE,...` re-parameterises the module by its module-level constants
(kevin.search.shapes); a module that writes its sizes into get_inputs as literals offers none, and
only the fresh-seed check applies to it.

Not here: naming a module class and example-input shapes by flag instead of get_inputs (issue #17's
other form), re-verifying at another precision, stopping early once a kernel is fast enough.
"""

from __future__ import annotations

import ast
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kevin.errors import UsageError
from kevin.evaluator.result import EvalResult
from kevin.rl.env import EpisodeConfig, Evaluator, Policy
from kevin.rl.episodes import EPISODES_FILE
from kevin.rl.replay import describe_key
from kevin.search import attempts, beam, breakdown
from kevin.search.rundir import CONFIG_FILE, check_same_run, read_rows, write_config, write_rows
from kevin.search.shapes import reshape_source, shapes_label
from kevin.tasks import Task, load_file

RESULT_FILE = "result.json"
VERIFY_TRIES = 3
"""Distinct passed kernels tried, fastest first, until one passes every re-verification."""
REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")


@dataclass(frozen=True)
class OptimizeConfig:
    """What one optimize run searches. Defaults: the paper's test setup (16 trajectories x 8 turns)."""

    trajectories: int = 16
    """Parallel trajectories (N)."""
    turns: int = 8
    """Refinement turns (T)."""
    beam: int | None = None
    """Trajectories kept after each turn (K, dividing N), each continued by N/K; None: no beam."""
    backend: str = "cpp"
    """Prompt back end, the evaluator's too: `cpp` on a CPU, `cuda` or `triton` on a GPU."""
    temperature: float = 0.9
    top_p: float = 1.0
    max_completion_tokens: int = 16384
    evaluate_while_generating: bool = True
    """Evaluate each kernel as soon as it is written (kevin.rl.env); off when the policy samples on
    the GPU the evaluator times kernels on (the CLI's --hf on a GPU)."""

    def __post_init__(self) -> None:
        self.episode_config()  # EpisodeConfig validates the fields it shares
        if self.beam is not None and not (
            1 <= self.beam <= self.trajectories and self.trajectories % self.beam == 0
        ):
            raise ValueError(
                f"beam {self.beam} must divide the {self.trajectories} trajectories (each kept trajectory "
                "is continued by trajectories / beam); pick a divisor"
            )

    @property
    def kept(self) -> int:
        """K: the beam, or every trajectory."""
        return self.beam if self.beam is not None else self.trajectories

    def episode_config(self) -> EpisodeConfig:
        return EpisodeConfig(
            trajectories=self.trajectories,
            turns=self.turns,
            backend=self.backend,
            temperature=self.temperature,
            top_p=self.top_p,
            max_completion_tokens=self.max_completion_tokens,
            evaluate_while_generating=self.evaluate_while_generating,
        )


def _defined_names(statements: Sequence[ast.stmt]) -> set[str]:
    """Names bound at module level, looking into top-level if/try/with blocks."""
    names: set[str] = set()
    for node in statements:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            for block in ("body", "orelse", "finalbody"):
                names |= _defined_names(getattr(node, block, []))
            for handler in getattr(node, "handlers", []):
                names |= _defined_names(handler.body)
    return names


def _parse(source: str, where: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        raise UsageError(f"{where}:{exc.lineno}: not valid Python ({exc.msg}); fix the module") from None


def load_module(path: str | Path) -> Task:
    """The user's module as a Task (kevin.tasks.load_file), checked for Model, get_inputs and
    get_init_inputs without running it."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(
            f"module not found: {path}; give the path of a .py file defining Model and get_inputs"
        )
    task = load_file(path)
    missing = [
        name for name in REQUIRED_NAMES if name not in _defined_names(_parse(task.source, str(path)).body)
    ]
    if missing:
        raise UsageError(
            f"{path} defines no {', '.join(missing)}: kevin optimize needs a KernelBench-format module "
            "(class Model(nn.Module), get_inputs() returning example inputs, get_init_inputs() returning "
            "Model's constructor arguments); add them"
        )
    return task


@dataclass(frozen=True)
class OptimizeOutcome:
    out_dir: Path
    winner: dict[str, Any] | None
    """The winning row (kevin.rl.episodes fields); None when nothing passed every check."""
    reason: str
    """One line: why there is no winner, or what won."""
    dropin: Path | None
    verification: list[dict[str, Any]]
    """Per kernel tried: trajectory, turn, speedup in the search, and each check's label and verdict."""
    evaluated_turns: int
    """Turns run in this launch; the rest were already done."""


def _verify(
    rows: Sequence[Mapping[str, Any]],
    checks: Sequence[tuple[str, Task]],
    verify: Callable[[Task, str], EvalResult],
    out: Callable[[str], None],
) -> tuple[Mapping[str, Any] | None, list[dict[str, Any]]]:
    """(the first of the fastest distinct passed kernels that passes every check, or None; the record)."""
    record: list[dict[str, Any]] = []
    seen: set[str] = set()
    for row in attempts.ranked_passed(rows):
        source = str(row["candidate"])
        if source in seen:
            continue
        if len(seen) == VERIFY_TRIES:
            break
        seen.add(source)
        kernel = {
            "trajectory": row["trajectory"],
            "turn": row["turn"],
            "speedup": attempts.speedup(row),
            "checks": [],
        }
        record.append(kernel)
        for label, task in checks:
            result = verify(task, source)
            if result.blame == "infrastructure":  # our side failed, not the kernel: once more
                result = verify(task, source)
            kernel["checks"].append({"label": label, "verdict": result.to_dict()})
            shown = (
                f"passed, {result.speedup:.2f}x"
                if result.passed
                else f"FAILED ({attempts.outcome({'verdict': result.to_dict()})})"
            )
            out(f"re-verify trajectory {row['trajectory']} turn {row['turn']}, {label}: {shown}")
            if not result.passed:
                break
        else:
            return row, record
    return None, record


def _header(winner: Mapping[str, Any], kernel: Mapping[str, Any], task: Task, command: str) -> str:
    lines = [
        f"# Written by kevin optimize: a drop-in ModelNew for Model in {Path(task.origin).name} (task {task.id}).",
        f"# Search verdict: passed, {attempts.speedup(winner):.3f}x over PyTorch eager "
        f"(trajectory {winner['trajectory']}, turn {winner['turn']}).",
    ]
    for check in kernel["checks"]:
        result = EvalResult.from_dict(check["verdict"])
        lines.append(f"# Re-verified, {check['label']}: passed, {result.speedup:.3f}x.")
    lines += [f"# Command: {command}", "# Same constructor arguments and forward inputs as Model.", ""]
    return "\n".join(lines) + "\n"


def run_optimize(
    task: Task,
    policy: Policy,
    evaluator: Evaluator,
    verify: Callable[[Task, str], EvalResult],
    config: OptimizeConfig,
    out_dir: str | Path,
    *,
    stem: str,
    shapes: Sequence[Mapping[str, Any]] = (),
    describe: Mapping[str, Any] | None = None,
    command: str = "",
    out: Callable[[str], None] = print,
    profile_reference: Callable[[Task], breakdown.Kernels | str] | None = None,
) -> OptimizeOutcome:
    """Search what is not done yet, re-verify the winner, write every file (module docstring).

    `verify(task, source)` evaluates one kernel again with a fresh seed; `describe` holds JSON-able
    descriptions of the policy and evaluator (keys `policy`, `evaluator`) for config.json, and a
    resume must describe them the same way; `stem` names the drop-in (`<stem>_kevin.py`);
    `profile_reference(task)` gives the baseline's kernels for the report's "Where the time went"
    (kevin.search.breakdown; None: the section is left out)."""
    checks = [("fresh seed", task)]
    for values in shapes:  # refused here, before any work, when a name is not a constant
        label = shapes_label(values)
        source = reshape_source(task.source, values, where=task.origin)
        checks.append(
            (label, Task.from_source(source, id=f"{task.id}@{label}", name=task.name, origin=task.origin))
        )
    out_dir = Path(out_dir)
    identity = {
        "optimize": asdict(config),
        **dict(describe or {}),
        "module": {"id": task.id, "name": task.name, "hash": task.hash},
    }
    finished = _open_run_dir(out_dir, identity, task, policy, config)
    episodes = out_dir / EPISODES_FILE
    beam_text = f", beam {config.beam}" if config.beam is not None else ""
    out(
        f"kevin optimize: {task.origin} ({task.id}), {config.trajectories} trajectories x "
        f"{config.turns} turns{beam_text}, backend {config.backend}, out {out_dir}; "
        f"{len(finished)} of {config.turns} turns already done"
    )

    all_rows = [row for turn in sorted(finished) for row in finished[turn].values()]
    started = time.monotonic()

    def on_turn(number: int, turn_rows: list[dict[str, Any]]) -> None:
        nonlocal started
        write_rows(episodes, turn_rows, append=True)
        all_rows.extend(turn_rows)
        summary = attempts.turn_summaries(all_rows)[-1]
        seconds = time.monotonic() - started
        out(attempts.progress_line(summary, config.turns, seconds, _beam_keeps(turn_rows, config)))
        started = time.monotonic()

    beam.search(
        task, policy, evaluator, config.episode_config(), beam=config.kept, finished=finished, on_turn=on_turn
    )

    winner, verification = _verify(all_rows, checks, verify, out)
    dropin = out_dir / f"{stem}_kevin.py"
    if winner is not None:
        header = _header(winner, verification[-1], task, command)
        dropin.write_text(header + str(winner["candidate"]), encoding="utf-8")
        reason = (
            f"trajectory {winner['trajectory']} turn {winner['turn']}: {attempts.speedup(winner):.3f}x "
            f"in the search, re-verified ({len(checks)} checks)"
        )
    else:
        dropin.unlink(missing_ok=True)  # an earlier launch's winner would claim what this one did not
        reason = _no_winner_reason(all_rows, verification)
    out(("winner: " if winner is not None else "no winner: ") + reason)

    profiled = winner is not None and profile_reference is not None
    if profiled:
        out("profiling the baseline for the report")
    time_split = breakdown.for_winner(winner, task, profile_reference) if profiled else None
    written = _write_report(
        out_dir, task, config, all_rows, winner, reason, verification, dropin, command, time_split=time_split
    )
    out(f"written in {out_dir}: {', '.join(written)}")
    return OptimizeOutcome(
        out_dir,
        dict(winner) if winner is not None else None,
        reason,
        dropin if winner is not None else None,
        verification,
        config.turns - len(finished),
    )


def _open_run_dir(
    out_dir: Path, identity: Mapping[str, Any], task: Task, policy: Policy, config: OptimizeConfig
) -> dict[int, dict[int, beam.Row]]:
    """The finished turns' rows (by turn, by trajectory), rows of an unfinished turn dropped from
    episodes.jsonl; config.json written on the first launch. Refuses (UsageError, nothing written)
    another run's directory and replay records that lack a turn to run."""
    config_path = out_dir / CONFIG_FILE
    if config_path.exists():
        check_same_run(config_path, identity, what="kevin optimize")
    episodes = out_dir / EPISODES_FILE
    rows = read_rows(episodes)
    finished = beam.finished_turns(rows, config.trajectories)
    missing = getattr(policy, "missing", None)
    if missing is not None:
        keys = [
            (task.id, j, t)
            for t in range(len(finished) + 1, config.turns + 1)
            for j in range(config.trajectories)
        ]
        absent = missing(keys)
        if absent:
            raise UsageError(
                f"the replay records lack {len(absent)} of the {len(keys)} turns to run, first "
                f"{describe_key(absent[0])}; record them or ask for fewer trajectories or turns"
            )
    out_dir.mkdir(parents=True, exist_ok=True)
    if not config_path.exists():
        write_config(config_path, identity)
    kept = [row for turn in sorted(finished) for row in finished[turn].values()]
    if len(kept) != len(rows):
        write_rows(episodes, kept, append=False)
    return finished


def _beam_keeps(turn_rows: Sequence[Mapping[str, Any]], config: OptimizeConfig) -> list[int]:
    """The trajectories the beam keeps after this turn, for the record; none without a beam or
    after the last turn."""
    if config.beam is None or int(turn_rows[0]["turn"]) == config.turns:
        return []
    ordered = sorted(turn_rows, key=lambda r: int(r["trajectory"]))
    return sorted(set(beam.select_parents([r.get("score") for r in ordered], config.kept)))


def _write_report(
    out_dir: Path,
    task: Task,
    config: OptimizeConfig,
    rows: Sequence[Mapping[str, Any]],
    winner: Mapping[str, Any] | None,
    reason: str,
    verification: list[dict[str, Any]],
    dropin: Path,
    command: str,
    time_split: tuple[breakdown.Kernels | str | None, breakdown.Kernels | None] | None = None,
) -> list[str]:
    """report.md, report.png and result.json; the names of every file the run leaves."""
    by_turn: dict[int, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_turn.setdefault(int(row["turn"]), []).append(row)
    beam_text = f", beam {config.beam}" if config.beam is not None else ""
    about = [
        f"{config.trajectories} trajectories x {config.turns} turns{beam_text}, backend {config.backend}; "
        f"{len(rows)} attempts."
    ]
    about += ["", f"Command: `{command}`"] if command else []
    report_path, png = attempts.write_report(
        out_dir,
        rows,
        title=f"kevin optimize: {Path(task.origin).name} ({task.id})",
        about=about,
        result=[
            f"Winner: {reason}. Written to `{dropin.name}` (ModelNew)." if winner else f"No winner: {reason}."
        ],
        verification=verification,
        kept={turn: _beam_keeps(turn_rows, config) for turn, turn_rows in by_turn.items()}
        if config.beam
        else {},
        appendix=breakdown.markdown(*time_split, on_gpu=config.backend in ("cuda", "triton")) if time_split else (),
    )
    summary = None
    if winner is not None:
        summary = {
            "trajectory": winner["trajectory"],
            "turn": winner["turn"],
            "speedup": attempts.speedup(winner),
            "file": dropin.name,
        }
    result = {"winner": summary, "reason": reason, "verification": verification, "command": command}
    if time_split:
        result["where_the_time_went"] = breakdown.record(*time_split)
    (out_dir / RESULT_FILE).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    written = [dropin.name] if winner is not None else []
    return written + [report_path.name, *([png.name] if png else []), EPISODES_FILE, CONFIG_FILE, RESULT_FILE]


def _no_winner_reason(rows: Sequence[Mapping[str, Any]], verification: Sequence[Mapping[str, Any]]) -> str:
    if not verification:
        failures = attempts.failures_by_stage(rows)
        counts = ", ".join(f"{kind} {count}" for kind, count, _ in failures) or "none"
        commonest = f"; the commonest, {failures[0][0]}: {failures[0][2][0][0]}" if failures else ""
        return f"no attempt passed ({len(rows)} attempts; failures: {counts}{commonest})"
    first = verification[0]
    failed = first["checks"][-1]
    return (
        f"none of the {len(verification)} fastest passed kernels passed re-verification (the fastest, trajectory "
        f"{first['trajectory']} turn {first['turn']}, failed {failed['label']}: "
        f"{attempts.outcome({'verdict': failed['verdict']})}, {attempts.short_error({'verdict': failed['verdict']}) or 'no message'})"
    )
