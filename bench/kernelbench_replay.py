"""Replay records of real KernelBench L1/L2 candidates, for `kevin bench` and `kevin optimize` (issue #17).

Issue #17 asks for `kevin bench` and `kevin optimize` run on the H200 over recorded completions for
KernelBench level 1-2 tasks, wrong and slow candidates among them. The candidates are the real ones
of bench/candidates/throughput/ (manifest.json: per candidate its problem, kind correct / slow / wrong
/ compile_error, expected verdict; the hang kind is left out: each would hold a GPU for its whole
call deadline) plus the honest kernels of bench/candidates/kernelbench_l1/ (`NN_Name.py`: correct, for
level1/NN_Name.py). This script writes them as the completions of a policy that refines:

    records.jsonl   kevin.rl.replay records (task, trajectory, turn, completion; plus `candidate`, the
                    manifest id, and `kind`, for reading the verdicts against what was replayed), N
                    trajectories x T turns per task, task-major, then trajectory, then turn
    tasks.json      the tasks (id, problem file, candidates by kind), the shape, the seed, the `--ids`
                    spec and the exact GPU commands for these records

Layout of one task's trajectory j (kinds ranked compile_error < wrong < slow < correct):
    turn 1      a candidate that is not correct: the task's compile_error, wrong and slow candidates
                in a shuffled order, trajectory j taking the (j mod count)-th, so N >= count covers all
    turns 2..T-1  a kind ranked no lower than the turn before (drawn uniformly among the kinds the task
                has at or above that rank), then a candidate of that kind uniformly
    turn T      a correct candidate, the shuffled correct ones taken in turn as for turn 1
so a trajectory never gets worse from one turn to the next and always ends correct (T >= 2). Every
draw comes from one random.Random per task, seeded with (seed, task id): the same arguments give the
same file, byte for byte. A completion is model-style text: a short <think> block (the task, what the
previous turn's verdict would have said, the plan), the candidate's source unchanged in one
```python block (kevin.rl.candidate.parse_completion gives it back without its final newline), and a
one-line summary. The script checks that every candidate's source comes back through that parser.

    python bench/kernelbench_replay.py                    # default tasks, 4 x 3, seed 0, into --out
    python bench/kernelbench_replay.py --tasks L1_88,L2_76 --trajectories 8 --turns 4 --seed 1
    python bench/kernelbench_replay.py --tasks all        # every manifest task with both sides

Options: --out DIR (default bench/results/kernelbench_replay), --kernelbench DIR (default
$KEVIN_KERNELBENCH_DIR, else ../shared/kernelbench_data: kevin's own `--source kernelbench`), --manifest
FILE, --extra DIR (the kernelbench_l1 folder; --extra '' for none). Bad input (an unknown task, a task
without a correct or without a not-correct candidate, fewer than 2 turns, a missing problem file or
manifest) exits 2 with one line on stderr.

On the GPU machine (the device command runs in a copy of the working tree; carry .kb, the git-ignored
KernelBench copy; tasks.json holds these commands for the records actually written):

    export PYTHONPATH=. KEVIN_KERNELBENCH_DIR=$PWD/.kb
    python3 bench/kernelbench_replay.py
    python3 -m kevin bench --replay bench/results/kernelbench_replay/records.jsonl \
        --source kernelbench --ids L1_40,L1_88,L1_95,L2_63,L2_76,L2_99 --trajectories 4 --turns 3 \
        --backend cuda --jobs 8 --out bench/results/kernelbench_replay/bench
    python3 -m kevin optimize $KEVIN_KERNELBENCH_DIR/level1/88_MinGPTNewGelu.py \
        --replay bench/results/kernelbench_replay/records.jsonl --trajectories 4 --turns 3 \
        --backend cuda --jobs 8 --out bench/results/kernelbench_replay/optimize_L1_88

(`python3 -m kevin` is the `kevin` command.) A device command is cut at 600 s: run the same command
again and the bench (or the search) goes on where it stopped. On a CPU, `--backend cuda` stops before
anything runs (no GPU); with `--backend cpp` both commands run end to end, every candidate rejected by
the cpp gate (they are CUDA): a check of the plumbing, not of the kernels. `kevin optimize` names its task by the file's folder and stem (level1/88_... gives
L1_88), the ids these records use.

Not here: hang candidates, level 3, completions that are format errors (the policy's side is not
what these records measure), any check of what the evaluator will say.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from throughput_report import CANDIDATES, load_manifest  # noqa: E402  (bench/ is on the path from here on)

from kevin.errors import UsageError  # noqa: E402
from kevin.rl.candidate import parse_completion  # noqa: E402
from kevin.tasks.loaders import kernelbench_dir, load_file, parse_problem_filename  # noqa: E402

OUT = REPO / "bench" / "results" / "kernelbench_replay"
EXTRA = REPO / "bench" / "candidates" / "kernelbench_l1"
RECORDS_FILE = "records.jsonl"
TASKS_FILE = "tasks.json"
DEFAULT_TASKS = ("L1_40", "L1_88", "L1_95", "L2_63", "L2_76", "L2_99")
"""Three of each level, each with a compile error, a wrong and (but L2_76) a slow candidate."""
RANK = {"compile_error": 0, "wrong": 1, "slow": 2, "correct": 3}
"""How good a kind is; a trajectory's kinds never go down."""
PREVIOUS = {
    "compile_error": "The last version did not compile",
    "wrong": "The last version built but its output did not match the reference",
    "slow": "The last version was correct but slower than it should be",
    "correct": "The last version passed; another layout may be faster",
}
"""What the feedback on the previous turn told the model, in its own words."""
_LABEL = re.compile(r"^L\d+_\d+ \(.*?\): ")


@dataclass(frozen=True)
class Candidate:
    id: str
    """The manifest id (kernelbench_l1/<stem> for the extra folder's files)."""
    task: str
    problem: str
    """The problem file relative to the KernelBench directory."""
    kind: str
    path: Path
    note: str


def load_candidates(manifest: Path, extra: Path | None) -> dict[str, list[Candidate]]:
    """The non-hang candidates by task id: the manifest's, in its order, then the extra folder's."""
    try:
        rows = load_manifest(manifest)
        found = [
            Candidate(
                row["id"], row["problem_id"], row["problem"], row["kind"], Path(row["path"]), row["note"]
            )
            for row in rows
        ]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"cannot read the candidate manifest {manifest}: {exc!r}") from None
    if extra is not None:
        if not extra.is_dir():
            raise UsageError(f"--extra {extra}: no such folder (give '' for none)")
        for path in sorted(extra.glob("*.py")):
            parsed = parse_problem_filename(path.stem)
            if parsed is not None:
                problem = f"level1/{path.name}"
                found.append(
                    Candidate(f"{extra.name}/{path.stem}", f"L1_{parsed[0]}", problem, "correct", path, "")
                )
    by_task: dict[str, list[Candidate]] = {}
    for candidate in found:
        if candidate.kind not in RANK:
            raise UsageError(f"{manifest}: candidate {candidate.id} has unknown kind {candidate.kind!r}")
        by_task.setdefault(candidate.task, []).append(candidate)
    return by_task


def choose_tasks(spec: str, by_task: dict[str, list[Candidate]]) -> list[str]:
    """The task ids of --tasks ('all': every task with a correct and a not-correct candidate)."""
    usable = [task for task, found in by_task.items() if _has_both_sides(found)]
    if spec == "all":
        return usable
    chosen = [token.strip() for token in spec.split(",") if token.strip()]
    if not chosen:
        raise UsageError("--tasks is empty; give task ids like L1_88,L2_76 or 'all'")
    for task in chosen:
        if task not in by_task:
            raise UsageError(f"--tasks {task}: no candidates for it; choose among {', '.join(usable)}")
        if task not in usable:
            raise UsageError(
                f"--tasks {task}: it needs a correct and a not-correct candidate; choose another"
            )
    if len(set(chosen)) != len(chosen):
        raise UsageError(f"--tasks {spec}: a task is listed twice")
    return chosen


def _has_both_sides(found: list[Candidate]) -> bool:
    kinds = {candidate.kind for candidate in found}
    return "correct" in kinds and bool(kinds - {"correct"})


def problem_paths(tasks: list[str], by_task: dict[str, list[Candidate]], kb: Path) -> dict[str, Path]:
    """Each task's problem file under `kb`, checked to load as that task id (as `kevin optimize` will)."""
    if not (kb / "level1").is_dir():
        raise UsageError(
            f"KernelBench data not found at {kb}; pass --kernelbench DIR or set KEVIN_KERNELBENCH_DIR"
        )
    paths = {}
    for task in tasks:
        problems = {candidate.problem for candidate in by_task[task]}
        if len(problems) != 1:
            raise UsageError(f"task {task}: its candidates name several problems {sorted(problems)}")
        path = kb / problems.pop()
        if not path.is_file():
            raise UsageError(f"task {task}: problem file {path} not found")
        loaded = load_file(path).id
        if loaded != task:
            raise UsageError(f"task {task}: {path} loads as {loaded}, not {task}")
        paths[task] = path
    return paths


def plan_trajectories(
    found: list[Candidate], trajectories: int, turns: int, rng: random.Random
) -> list[list[Candidate]]:
    """Each trajectory's candidate per turn (module docstring): turn 1 not correct, turn T correct,
    kinds never lower than the turn before."""
    starts = sorted((c for c in found if c.kind != "correct"), key=lambda c: c.id)
    ends = sorted((c for c in found if c.kind == "correct"), key=lambda c: c.id)
    rng.shuffle(starts)
    rng.shuffle(ends)
    by_kind: dict[str, list[Candidate]] = {}
    for candidate in sorted(found, key=lambda c: c.id):
        by_kind.setdefault(candidate.kind, []).append(candidate)
    kinds = sorted(by_kind, key=RANK.__getitem__)
    plans = []
    for j in range(trajectories):
        plan = [starts[j % len(starts)]]
        for _ in range(turns - 2):
            kind = rng.choice([k for k in kinds if RANK[k] >= RANK[plan[-1].kind]])
            plan.append(rng.choice(by_kind[kind]))
        plans.append([*plan, ends[j % len(ends)]])
    return plans


def approach(source: str) -> str:
    """What the candidate does, from its docstring's last paragraph, in one line without its label."""
    try:
        doc = ast.get_docstring(ast.parse(source)) or ""
    except SyntaxError:
        doc = ""
    last = " ".join(doc.strip().split("\n\n")[-1].split())
    return _LABEL.sub("", last).rstrip(".") or "a custom CUDA kernel"


def completion_text(task: str, problem: str, source: str, previous: Candidate | None) -> str:
    """One turn's model-style text: <think>, the source in one ```python block, a summary line."""
    name = Path(problem).stem
    plan = approach(source)
    if previous is None:
        reaction = "First attempt: move the whole forward into a CUDA kernel built with load_inline."
    else:
        note = f" ({previous.note})" if previous.note else ""
        reaction = f"{PREVIOUS[previous.kind]}{note}. Rewrite it."
    think = f"<think>\n{task} is {name}. {reaction}\nPlan: {plan}.\n</think>"
    body = source.rstrip("\n")
    summary = f"ModelNew computes the forward in a load_inline CUDA extension: {plan}."
    return f"{think}\n\n```python\n{body}\n```\n\n{summary}\n"


def build_records(
    tasks: list[str], by_task: dict[str, list[Candidate]], trajectories: int, turns: int, seed: int
) -> list[dict[str, Any]]:
    """Every record, task-major, then trajectory, then turn; UsageError for a source that cannot be
    carried in a completion (one that parse_completion would not give back unchanged)."""
    sources = {c.id: c.path.read_text(encoding="utf-8") for task in tasks for c in by_task[task]}
    for candidate_id, source in sources.items():
        text = completion_text("L0_0", "problem.py", source, None)
        if parse_completion(text).candidate != source.rstrip("\n"):
            raise UsageError(f"candidate {candidate_id}: its source does not survive a ```python block")
    records = []
    for task in tasks:
        problem = by_task[task][0].problem
        plans = plan_trajectories(by_task[task], trajectories, turns, random.Random(f"{seed}/{task}"))
        for j, plan in enumerate(plans):
            for turn, candidate in enumerate(plan, start=1):
                previous = plan[turn - 2] if turn > 1 else None
                records.append(
                    {
                        "task": task,
                        "trajectory": j,
                        "turn": turn,
                        "completion": completion_text(task, problem, sources[candidate.id], previous),
                        "candidate": candidate.id,
                        "kind": candidate.kind,
                    }
                )
    return records


def gpu_commands(
    tasks: list[str], problems: dict[str, str], out: Path, trajectories: int, turns: int
) -> dict[str, Any]:
    """The device commands for these records (relative to the repository root when `out` is in it)."""
    where = out.relative_to(REPO) if out.is_relative_to(REPO) else out
    records = where / RECORDS_FILE
    shape = f"--trajectories {trajectories} --turns {turns} --backend cuda --jobs 8"
    bench = (
        f"python3 -m kevin bench --replay {records} --source kernelbench --ids {','.join(tasks)} "
        f"{shape} --out {where / 'bench'}"
    )
    optimize = {
        task: f"python3 -m kevin optimize $KEVIN_KERNELBENCH_DIR/{problems[task]} --replay {records} "
        f"{shape} --out {where / f'optimize_{task}'}"
        for task in tasks
    }
    return {
        "setup": "export PYTHONPATH=. KEVIN_KERNELBENCH_DIR=$PWD/.kb",
        "bench": bench,
        "optimize": optimize,
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Write replay records of real KernelBench L1/L2 candidates.")
    parser.add_argument(
        "--tasks", default=",".join(DEFAULT_TASKS), help="task ids, comma-separated, or 'all'"
    )
    parser.add_argument("--trajectories", type=int, default=4, help="trajectories per task (default 4)")
    parser.add_argument("--turns", type=int, default=3, help="turns per trajectory, at least 2 (default 3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(OUT), help="folder for records.jsonl and tasks.json")
    parser.add_argument("--kernelbench", default=None, help="KernelBench folder (default: kevin's)")
    parser.add_argument("--manifest", default=str(CANDIDATES / "manifest.json"))
    parser.add_argument("--extra", default=str(EXTRA), help="folder of NN_Name.py correct level-1 candidates")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.trajectories < 1 or args.turns < 2:
            raise UsageError(
                f"--trajectories must be >= 1 and --turns >= 2 (got {args.trajectories} and {args.turns}): "
                "turn 1 is not correct and the last turn is"
            )
        by_task = load_candidates(Path(args.manifest), Path(args.extra) if args.extra else None)
        tasks = choose_tasks(args.tasks, by_task)
        kb = Path(args.kernelbench) if args.kernelbench else kernelbench_dir()
        problem_paths(tasks, by_task, kb)
        records = build_records(tasks, by_task, args.trajectories, args.turns, args.seed)
        out = Path(args.out).resolve()
        if out.exists() and not out.is_dir():
            raise UsageError(f"--out {out} is a file; give a folder")
    except UsageError as exc:
        print(f"kernelbench_replay: {exc}", file=sys.stderr)
        return 2
    problems = {task: by_task[task][0].problem for task in tasks}
    commands = gpu_commands(tasks, problems, out, args.trajectories, args.turns)
    out.mkdir(parents=True, exist_ok=True)
    (out / RECORDS_FILE).write_text("".join(json.dumps(row) + "\n" for row in records), encoding="utf-8")
    summary = {
        "records": RECORDS_FILE,
        "trajectories": args.trajectories,
        "turns": args.turns,
        "seed": args.seed,
        "ids": ",".join(tasks),
        "tasks": [
            {
                "id": task,
                "problem": problems[task],
                "candidates": {kind: [c.id for c in by_task[task] if c.kind == kind] for kind in RANK},
            }
            for task in tasks
        ],
        "commands": commands,
    }
    (out / TASKS_FILE).write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    print(
        f"{len(records)} records: {len(tasks)} tasks x {args.trajectories} trajectories x {args.turns} turns in {out}"
    )
    print(commands["setup"])
    print(commands["bench"])
    print(commands["optimize"][tasks[0]])
    return 0


if __name__ == "__main__":
    sys.exit(main())
