"""The fixed-budget study (`kevin bench --study B`): one kernel budget per task spent in several shapes.

The paper's question: with B kernels (completions) to spend on each task, is it better to sample many
parallel trajectories with few refinement turns, or fewer trajectories with more turns, or a beam
search? Each configuration is a shape that spends exactly B per task:

    NxT           N independent trajectories x T turns (N * T = B); the default for B = 128:
                  16x8, 32x4, 128x1
    NxT-beamK     N slots x T turns with a beam: after each turn the K slots whose latest kernel scored
                  best are each continued by N/K slots (kevin.search.beam); default 16x8-beam4

Every configuration is a `kevin bench` run (kevin.search.bench.run_bench) of the same policy over the
same tasks with the same evaluator and sampling settings, in its own sub-directory named after the
shape, so each resumes on its own and a finished one is not run again. Its columns, from
kevin.rl.metrics with k = N (the largest k: every kernel the configuration wrote counts):

    correct       share of tasks with at least one correct kernel in the budget      (pass@N)
    speedup_best  mean over tasks of the best correct kernel's speedup, 0 if none   (best@N)
    fast_1, fast_1.5  share of tasks whose best kernel is correct and > 1x / 1.5x   (fast_p@N)
    geomean       geometric mean of the tasks' best speedups, over tasks with a correct kernel
                  (geomean_best)

best@N and pass@N are the best over every attempt of a task, so they read the same whether rows are
grouped by trajectory or (with a beam) by slot. The curve "best speedup against kernels spent" reads
the same metrics: at turn 1, x = k kernels for each k of kevin.rl.metrics.default_ks (the expected best
of k first attempts, best@k), then x = N * t after turn t (best@N within the first t turns).

Budget accounting: the attempts (episode rows) of each task are counted for every configuration; they
must be B, one for each slot 0..N-1 at each turn 1..T of the shape. `budget_ok` is false and the table
says so when one is not (a bug in our code, or a hand-edited run directory).
`evaluated` counts the attempts that held a code block and went to the evaluator (format errors do
not), and infrastructure failures (our side) are shown, never hidden in the model's score.

Replay: records are keyed by (task, trajectory, turn), so a study needs, for each shape, records of
trajectories 0..N-1 at turns 1..T (configurations share the records of the keys they have in common).
A configuration whose records run out is refused before anything is evaluated, every short one named
in one line: the replay does not cycle, because a reused completion is a copy of a kernel already
judged, and counting it as spent budget would compare configurations that did not spend the same.
With a beam, slot j's record at turn t is replayed whichever parent the slot continued: good for
tests and demos, not a measurement of a policy's search.

Files in the study directory: study.json (the configurations' columns, kernel counts and curves, the
policy, evaluator and tasks), study.md (the table and the curve as a table), study.png (the columns by
configuration and the curves; when matplotlib is installed), and one run directory per configuration
(kevin.search.bench's files). `kevin bench compare STUDY_A STUDY_B` sets two studies side by side.

Not here: running configurations at the same time (they run one after the other, a beam's tasks one at
a time), a budget in tokens or in seconds instead of kernels, confidence intervals.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kevin.errors import UsageError
from kevin.rl.env import Evaluator, Policy
from kevin.rl.episodes import EPISODES_FILE
from kevin.rl.metrics import compute_metrics
from kevin.rl.replay import describe_key
from kevin.search import report
from kevin.search.bench import BenchConfig, BenchPlan, plan_bench, run_bench, unrecorded
from kevin.search.rundir import read_rows
from kevin.tasks import Task

STUDY_JSON = "study.json"
STUDY_MD = "study.md"
STUDY_PNG = "study.png"
BEAM_WIDTH = 4
"""K of the default beam configuration."""

# (key, heading, shown as a percentage)
COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("correct", "correct %", True),
    ("speedup_best", "best speedup (mean)", False),
    ("fast_1", "fast_1 %", True),
    ("fast_1.5", "fast_1.5 %", True),
    ("geomean", "geomean (best)", False),
)


@dataclass(frozen=True)
class Shape:
    """One configuration: N trajectories (slots) x T turns, optionally a beam keeping K."""

    trajectories: int
    turns: int
    beam: int | None = None

    @property
    def name(self) -> str:
        return f"{self.trajectories}x{self.turns}" + (f"-beam{self.beam}" if self.beam else "")

    @property
    def kernels(self) -> int:
        """Kernels written per task."""
        return self.trajectories * self.turns


SHAPE_FORMAT = "NxT or NxT-beamK (e.g. 16x8, 128x1, 16x8-beam4)"


def parse_shape(text: str) -> Shape:
    match = re.fullmatch(r"(\d+)x(\d+)(?:-beam(\d+))?", text.strip())
    if not match:
        raise UsageError(f"shape {text!r}: write {SHAPE_FORMAT}")
    trajectories, turns = int(match.group(1)), int(match.group(2))
    beam = int(match.group(3)) if match.group(3) else None
    if trajectories < 1 or turns < 1:
        raise UsageError(f"shape {text!r}: trajectories and turns must be at least 1")
    if beam is not None and not (1 <= beam < trajectories and trajectories % beam == 0 and turns >= 2):
        raise UsageError(
            f"shape {text!r}: a beam keeps K of the N slots after each turn, so K must divide N, be "
            "smaller than N, and there must be at least 2 turns (e.g. 16x8-beam4)"
        )
    return Shape(trajectories, turns, beam)


def default_shapes(budget: int) -> list[Shape]:
    """Nx8, Nx4 and Nx1 where they divide the budget, and the first with more than one turn and N a
    multiple of BEAM_WIDTH (above it) again with a beam of BEAM_WIDTH. For 128: 16x8, 32x4, 128x1,
    16x8-beam4."""
    shapes = [Shape(budget // turns, turns) for turns in (8, 4, 1) if budget % turns == 0]
    beamable = [
        s for s in shapes if s.turns > 1 and s.trajectories > BEAM_WIDTH and s.trajectories % BEAM_WIDTH == 0
    ]
    return shapes + [replace(beamable[0], beam=BEAM_WIDTH)] if beamable else shapes


def check_shapes(shapes: Sequence[Shape], budget: int) -> None:
    """UsageError (one line) unless every shape spends exactly `budget` kernels and none repeats."""
    if budget < 1:
        raise UsageError(f"the study's budget must be at least 1 kernel per task, got {budget}")
    if not shapes:
        raise UsageError("no shapes to study; give --shapes, e.g. 16x8,32x4,128x1")
    names = [shape.name for shape in shapes]
    for shape in shapes:
        if shape.kernels != budget:
            raise UsageError(
                f"shape {shape.name} spends {shape.trajectories} x {shape.turns} = {shape.kernels} kernels per "
                f"task, not the budget {budget}; pick N and T with N x T = {budget}"
            )
        if names.count(shape.name) > 1:
            raise UsageError(f"shape {shape.name} is listed twice; list each once")


def parse_shapes(text: str | None, budget: int) -> list[Shape]:
    """The comma-separated shapes of `--shapes` (default_shapes when None), checked against the budget."""
    shapes = default_shapes(budget) if text is None else [parse_shape(part) for part in text.split(",")]
    check_shapes(shapes, budget)
    return shapes


def bench_config(base: BenchConfig, shape: Shape) -> BenchConfig:
    """`base`'s sampling settings with the shape's trajectories, turns and beam."""
    return replace(base, trajectories=shape.trajectories, turns=shape.turns, beam=shape.beam)


def configuration_result(
    shape: Shape, rows: Sequence[Mapping[str, Any]], tasks: Sequence[Task]
) -> dict[str, Any]:
    """One configuration's columns, kernel counts and curve from its episode rows (module docstring)."""
    metrics = compute_metrics(rows)
    n = min(shape.trajectories, max(metrics["ks"]))  # fewer only when a task lacks slots (budget_ok false)
    overall = metrics["overall"]
    cells: dict[str, list[tuple[int, int]]] = {task.id: [] for task in tasks}
    evaluated = {task.id: 0 for task in tasks}
    for row in rows:
        cells[str(row["task"])].append((int(row["trajectory"]), int(row["turn"])))
        evaluated[str(row["task"])] += row.get("candidate") is not None
    wanted = {(j, turn) for j in range(shape.trajectories) for turn in range(1, shape.turns + 1)}
    upto = metrics["upto_turn"]
    curve = [
        {"kernels": k, "speedup_best": upto[0][f"best@{k}"], "correct": upto[0][f"pass@{k}"]}
        for k in metrics["ks"]
    ]
    curve += [
        {"kernels": n * r["turn"], "speedup_best": r[f"best@{n}"], "correct": r[f"pass@{n}"]}
        for r in upto[1:]
    ]
    return {
        "configuration": shape.name,
        "trajectories": shape.trajectories,
        "turns": shape.turns,
        "beam": shape.beam,
        "budget_ok": all(len(c) == len(wanted) and set(c) == wanted for c in cells.values()),
        "kernels_written": {task_id: len(c) for task_id, c in cells.items()},
        "kernels_evaluated": evaluated,
        "evaluated_per_task": sum(evaluated.values()) / len(tasks),
        "infrastructure": sum(r["infrastructure"] for r in metrics["at_turn"]),
        "correct": overall[f"pass@{n}"],
        "speedup_best": overall[f"best@{n}"],
        "fast_1": overall[f"fast_1@{n}"],
        "fast_1.5": overall[f"fast_1.5@{n}"],
        "geomean": overall["geomean_best"],
        "curve": curve,
    }


@dataclass(frozen=True)
class StudyOutcome:
    run_dir: Path
    study: dict[str, Any]
    """study.json's content."""
    ran: list[str]
    """Configurations that had work left in this launch; the others were finished before."""


def _refuse_short_records(policy: Policy, plans: Mapping[Shape, BenchPlan], budget: int) -> None:
    short = []
    for shape, plan in plans.items():
        absent = unrecorded(policy, plan.keys)
        if absent:
            short.append(
                f"{shape.name} lacks {len(absent)} of {len(plan.keys)} (first {describe_key(absent[0])})"
            )
    if short:
        raise UsageError(
            f"the replay records lack turns of {len(short)} of the {len(plans)} configurations, which would "
            f"spend fewer than {budget} kernels per task (records are not reused): {'; '.join(short)}; "
            "record them or leave those shapes out of --shapes"
        )


def run_study(
    tasks: Sequence[Task],
    policy: Policy,
    evaluator: Evaluator,
    base: BenchConfig,
    budget: int,
    shapes: Sequence[Shape],
    run_dir: str | Path,
    *,
    describe: Mapping[str, Any] | None = None,
    tasks_per_batch: int = 8,
    out: Callable[[str], None] = print,
) -> StudyOutcome:
    """Run every configuration that is not finished, then write study.json, .md and .png (module
    docstring). Every refusal (bad shapes, a sub-directory of another run, short replay records) comes
    before anything is evaluated. `base` holds the sampling settings; its trajectories and turns are
    replaced by each shape's."""
    check_shapes(shapes, budget)
    run_dir = Path(run_dir)
    configs = {shape: bench_config(base, shape) for shape in shapes}
    plans = {
        shape: plan_bench(tasks, configs[shape], run_dir / shape.name, describe=describe) for shape in shapes
    }
    _refuse_short_records(policy, plans, budget)
    run_dir.mkdir(parents=True, exist_ok=True)
    out(
        f"kevin bench study: {len(tasks)} tasks, {budget} kernels per task as "
        f"{', '.join(shape.name for shape in shapes)}; run directory {run_dir}"
    )
    ran = []
    for number, shape in enumerate(shapes, start=1):
        sub = run_dir / shape.name
        if not plans[shape].keys and (sub / report.METRICS_JSON).is_file():
            out(f"configuration {number}/{len(shapes)} {shape.name}: finished earlier, not run again")
            continue
        out(f"configuration {number}/{len(shapes)} {shape.name}: {sub}")
        run_bench(
            tasks,
            policy,
            evaluator,
            configs[shape],
            sub,
            describe=describe,
            tasks_per_batch=tasks_per_batch,
            out=out,
        )
        ran.append(shape.name)

    ids = {task.id for task in tasks}
    results = []
    for shape in shapes:
        rows = [row for row in read_rows(run_dir / shape.name / EPISODES_FILE) if str(row["task"]) in ids]
        results.append(configuration_result(shape, rows, tasks))
    study = {
        "budget": budget,
        "tasks": [task.id for task in tasks],
        "backend": base.backend,
        **{key: value for key, value in (describe or {}).items()},
        "budget_ok": all(r["budget_ok"] for r in results),
        "configurations": results,
    }
    (run_dir / STUDY_JSON).write_text(json.dumps(study, indent=2) + "\n", encoding="utf-8")
    title = f"kevin bench study {run_dir.name}: {budget} kernels per task, {len(tasks)} tasks, backend {base.backend}"
    text = markdown(study, title=title)
    (run_dir / STUDY_MD).write_text(text, encoding="utf-8")
    plot = plot_study(study, run_dir / STUDY_PNG, title=title)
    out(table_markdown(study))
    if not study["budget_ok"]:
        out(
            f"BUDGET MISMATCH: a configuration did not write {budget} kernels for every task (see {STUDY_MD})"
        )
    out(f"written: {run_dir / STUDY_JSON}, {STUDY_MD}" + (f", {plot.name}" if plot else ""))
    return StudyOutcome(run_dir, study, ran)


def _written_cell(result: Mapping[str, Any], budget: int) -> str:
    counts = sorted(set(result["kernels_written"].values()))
    text = str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    return text if result["budget_ok"] else f"{text} (not {budget}!)"


def table_markdown(study: Mapping[str, Any]) -> str:
    """The configurations' table."""
    headings = ["configuration", "kernels written / task", "evaluated / task"]
    headings += [heading for _, heading, _ in COLUMNS] + ["infrastructure failures"]
    rows = [
        [
            r["configuration"],
            _written_cell(r, study["budget"]),
            f"{r['evaluated_per_task']:.1f}",
            *(report.cell(r[key], percent) for key, _, percent in COLUMNS),
            str(r["infrastructure"]),
        ]
        for r in study["configurations"]
    ]
    return "\n".join(report.table(headings, rows))


def curve_markdown(study: Mapping[str, Any]) -> str:
    """Best speedup (mean over tasks) against kernels spent per task, one column per configuration."""
    configurations = study["configurations"]
    points = [{p["kernels"]: p["speedup_best"] for p in r["curve"]} for r in configurations]
    kernels = sorted({k for curve in points for k in curve})
    rows = [[str(k), *(report.cell(curve.get(k)) for curve in points)] for k in kernels]
    return "\n".join(report.table(["kernels", *(r["configuration"] for r in configurations)], rows))


def markdown(study: Mapping[str, Any], *, title: str) -> str:
    budget = study["budget"]
    lines = [
        f"# {title}",
        "",
        f"Every configuration spends {budget} kernels (completions) per task on the same tasks with the same "
        "policy and evaluator: NxT is N independent trajectories x T refinement turns, NxT-beamK keeps the "
        "K best of N slots after each turn and continues each by N/K. Over each task's whole budget: "
        "correct = share of tasks with a correct kernel (pass@N); best speedup = mean over tasks of the "
        "best correct kernel's speedup, 0 when none (best@N); fast_p = share of tasks whose best kernel "
        "is correct and faster than p x; geomean = geometric mean of the tasks' best speedups over the "
        "tasks with a correct kernel. Kernels written are counted from the episodes (they must equal the "
        "budget); evaluated = those with a code block, sent to the evaluator.",
        "",
        table_markdown(study),
        "",
        "## Best speedup against kernels spent per task",
        "",
        "At turn 1 the expected best of k first attempts (best@k); after turn t, N x t kernels.",
        "",
        curve_markdown(study),
        "",
        "Each configuration's own run (Table 1 by turn, every episode): "
        + ", ".join(f"`{r['configuration']}/`" for r in study["configurations"]),
        "",
    ]
    if not study["budget_ok"]:
        lines[2:2] = [
            f"**Budget mismatch**: a configuration did not write {budget} kernels for every task.",
            "",
        ]
    return "\n".join(lines)


def plot_study(study: Mapping[str, Any], path: Path, *, title: str) -> Path | None:
    """study.png: shares and speedups by configuration, best speedup and correct share against kernels
    spent. None when matplotlib is not installed (the `train` extra)."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    configurations = study["configurations"]
    names = [r["configuration"] for r in configurations]
    figure, axes = plt.subplots(1, 4, figsize=(20, 4.5))
    bars = [
        (axes[0], "over the whole budget (%)", [c for c in COLUMNS if c[2]], 100.0),
        (axes[1], "speedup over the whole budget", [c for c in COLUMNS if not c[2]], 1.0),
    ]
    for axis, name, columns, scale in bars:
        width = 0.8 / len(columns)
        for i, (key, heading, _) in enumerate(columns):
            values = [scale * (r[key] or 0.0) for r in configurations]
            axis.bar([x + i * width for x in range(len(names))], values, width, label=heading)
        axis.set_xticks([x + width * (len(columns) - 1) / 2 for x in range(len(names))], names)
        axis.set_title(name)
        axis.legend(fontsize=8)
    for axis, key, name in (
        (axes[2], "speedup_best", "best speedup"),
        (axes[3], "correct", "correct % (pass)"),
    ):
        scale = 100.0 if key == "correct" else 1.0
        for r in configurations:
            axis.plot(
                [p["kernels"] for p in r["curve"]],
                [scale * p[key] for p in r["curve"]],
                marker="o",
                label=r["configuration"],
            )
        axis.set_xscale("log", base=2)
        axis.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())  # 128, not 2^7
        axis.set_xlabel("kernels spent per task")
        axis.set_title(f"{name} against kernels spent")
        axis.legend(fontsize=8)
    return report.save_figure(figure, path, title=title)


def load_study(path: str | Path) -> dict[str, Any] | None:
    """A study directory's study.json (or the file itself); None when `path` holds none."""
    path = Path(path)
    if path.is_dir():
        path = path / STUDY_JSON
    if path.name != STUDY_JSON or not path.is_file():
        return None
    try:
        study = json.loads(path.read_text(encoding="utf-8"))
        study["configurations"][0]["configuration"]
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise UsageError(f"{path}: not a `kevin bench --study` file ({exc})") from None
    return study


def compare(a: Mapping[str, Any], b: Mapping[str, Any], *, name_a: str = "A", name_b: str = "B") -> str:
    """Two studies' columns side by side, B - A (percentage points for shares), by configuration."""
    by_name_a = {r["configuration"]: r for r in a["configurations"]}
    by_name_b = {r["configuration"]: r for r in b["configurations"]}
    lines = [
        "# kevin bench compare (fixed-budget studies)",
        "",
        f"A = {name_a}: {a['budget']} kernels per task, {len(a['tasks'])} tasks",
        f"B = {name_b}: {b['budget']} kernels per task, {len(b['tasks'])} tasks",
        "",
        "Over each task's whole budget; differences of shares in percentage points.",
        "",
        *report.side_by_side("configuration", by_name_a, by_name_b, COLUMNS),
        "",
    ]
    return "\n".join(lines)
