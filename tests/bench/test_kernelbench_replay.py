"""bench/kernelbench_replay.py on the CPU: records of real KernelBench candidates for `kevin bench` and
`kevin optimize` on the GPU.

The candidates are CUDA-only (load_inline with cuda_sources), so the cpp back end cannot judge them:
instead each record is checked to give back its candidate's exact source through kevin's own
completion parser, the layout (trajectories x turns, kinds never worse from one turn to the next) is
checked against manifest.json read here, and the GPU commands the builder writes are parsed by kevin's
own CLI and planned by kevin's own bench and optimize code, which must find a record for every turn.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from bench_scripts import load_script

from kevin.cli import build_parser
from kevin.rl.candidate import parse_completion
from kevin.rl.env import Sampling
from kevin.rl.replay import ReplayPolicy
from kevin.search.bench import BenchConfig, plan_bench
from kevin.search.commands import build_policy, select_bench_tasks
from kevin.search.optimize import load_module

REPO = Path(__file__).resolve().parents[2]
THROUGHPUT = REPO / "bench" / "candidates" / "throughput"
EXTRA = REPO / "bench" / "candidates" / "kernelbench_l1"
TASKS = ("L1_88", "L1_95", "L2_76")
TRAJECTORIES, TURNS = 4, 3
RANK = {"compile_error": 0, "wrong": 1, "slow": 2, "correct": 3}

builder = load_script("kernelbench_replay", "kernelbench_replay.py")


def manifest_by_id() -> dict[str, dict]:
    """manifest.json's non-hang rows and the extra folder's files, as this test reads them."""
    rows = {
        row["id"]: row
        for row in json.loads((THROUGHPUT / "manifest.json").read_text())
        if row["kind"] != "hang"
    }
    for row in rows.values():
        row["path"] = THROUGHPUT / row["candidate"]
    for path in EXTRA.glob("*.py"):
        number = path.stem.split("_", 1)[0]
        rows[f"kernelbench_l1/{path.stem}"] = {
            "problem_id": f"L1_{number}",
            "problem": f"level1/{path.name}",
            "kind": "correct",
            "path": path,
        }
    return rows


def build(out: Path, kernelbench: Path, *extra: str) -> int:
    return builder.main(
        ["--tasks", ",".join(TASKS), "--trajectories", str(TRAJECTORIES), "--turns", str(TURNS)]
        + ["--kernelbench", str(kernelbench), "--out", str(out), *extra]
    )


@pytest.fixture
def built(kernelbench, tmp_path):
    assert build(tmp_path, kernelbench, "--seed", "7") == 0
    records = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    return tmp_path, records, json.loads((tmp_path / "tasks.json").read_text())


def test_every_completion_parses_to_its_candidate_source(built):
    _, records, _ = built
    manifest = manifest_by_id()
    assert records
    for row in records:
        where = f"{row['task']} trajectory {row['trajectory']} turn {row['turn']}"
        entry = manifest[row["candidate"]]
        assert entry["problem_id"] == row["task"], where
        assert entry["kind"] == row["kind"], where
        parsed = parse_completion(row["completion"])
        assert parsed.ok, f"{where}: {parsed.error}"
        assert parsed.candidate == Path(entry["path"]).read_text().rstrip("\n"), where
        assert parsed.language == "python"
        assert row["completion"].startswith("<think>\n") and row["task"] in parsed.reasoning
        assert parsed.summary and "\n" not in parsed.summary, where


def test_layout_is_trajectories_by_turns_and_never_gets_worse(built):
    _, records, summary = built
    manifest = manifest_by_id()
    keys = [(row["task"], row["trajectory"], row["turn"]) for row in records]
    assert keys == [(t, j, turn) for t in TASKS for j in range(TRAJECTORIES) for turn in range(1, TURNS + 1)]
    assert summary["ids"] == ",".join(TASKS)
    assert (summary["trajectories"], summary["turns"]) == (TRAJECTORIES, TURNS)
    for task in TASKS:
        rows = [row for row in records if row["task"] == task]
        starts = set()
        for j in range(TRAJECTORIES):
            kinds = [row["kind"] for row in rows if row["trajectory"] == j]
            assert kinds[0] != "correct" and kinds[-1] == "correct", (task, j, kinds)
            ranks = [RANK[kind] for kind in kinds]
            assert ranks == sorted(ranks), (task, j, kinds)
            starts.add(rows[j * TURNS]["candidate"])
        not_correct = {i for i, e in manifest.items() if e["problem_id"] == task and e["kind"] != "correct"}
        assert starts == not_correct if len(not_correct) <= TRAJECTORIES else starts <= not_correct
    # the extra folder's honest GELU joins L1_88's correct candidates
    listed = next(t for t in summary["tasks"] if t["id"] == "L1_88")
    assert "kernelbench_l1/88_MinGPTNewGelu" in listed["candidates"]["correct"]


def test_same_seed_same_bytes_another_seed_another_layout(built, kernelbench, tmp_path):
    out, _, _ = built
    again, other = tmp_path / "again", tmp_path / "other"
    assert build(again, kernelbench, "--seed", "7") == 0
    assert build(other, kernelbench, "--seed", "8") == 0
    first = (out / "records.jsonl").read_bytes()
    assert (again / "records.jsonl").read_bytes() == first
    assert (other / "records.jsonl").read_bytes() != first


def test_gpu_commands_parse_and_every_turn_has_a_record(built, kernelbench, monkeypatch):
    """The written commands through kevin's own parser, task selection, replay policy and planners."""
    out, records, summary = built
    monkeypatch.setenv("KEVIN_KERNELBENCH_DIR", str(kernelbench))
    commands = summary["commands"]
    assert commands["setup"].startswith("export PYTHONPATH=. KEVIN_KERNELBENCH_DIR=")

    argv = shlex.split(commands["bench"])
    assert argv[:3] == ["python3", "-m", "kevin"]
    args = build_parser().parse_args(argv[3:])
    assert args.command == "bench" and args.backend == "cuda"
    assert (args.trajectories, args.turns, args.jobs) == (TRAJECTORIES, TURNS, 8)
    assert Path(args.replay) == out / "records.jsonl" and Path(args.out) == out / "bench"
    tasks = select_bench_tasks(args)
    assert [task.id for task in tasks] == list(TASKS)
    policy, description = build_policy(args)
    assert isinstance(policy, ReplayPolicy) and description["kind"] == "replay"
    plan = plan_bench(
        tasks, BenchConfig(trajectories=TRAJECTORIES, turns=TURNS, backend="cuda"), out / "bench"
    )
    assert len(plan.keys) == len(records) and policy.missing(plan.keys) == []
    wider = BenchConfig(trajectories=TRAJECTORIES + 1, turns=TURNS, backend="cuda")
    assert policy.missing(plan_bench(tasks, wider, out / "wider").keys)  # the check is not vacuous

    # bound to the bench's slot order, the policy answers each turn with that trajectory's record
    slots = [(task.id, j) for task in tasks for j in range(TRAJECTORIES)]
    bound = policy.for_trajectories(slots)
    by_key = {(r["task"], r["trajectory"], r["turn"]): r["completion"] for r in records}
    for turn in range(1, TURNS + 1):
        answers = bound.generate(["prompt"] * len(slots), Sampling())
        assert [a.text for a in answers] == [by_key[(t, j, turn)] for t, j in slots]

    assert sorted(commands["optimize"]) == sorted(TASKS)
    for task, command in commands["optimize"].items():
        argv = shlex.split(command.replace("$KEVIN_KERNELBENCH_DIR", str(kernelbench)))
        args = build_parser().parse_args(argv[3:])
        assert args.command == "optimize" and args.backend == "cuda"
        assert Path(args.out) == out / f"optimize_{task}"
        assert load_module(args.module).id == task  # the id the records use
        keys = [(task, j, turn) for turn in range(1, args.turns + 1) for j in range(args.trajectories)]
        assert ReplayPolicy.from_file(args.replay).missing(keys) == []


def test_every_replayed_candidate_passes_the_cuda_static_gate(built):
    from kevin import gate

    _, records, _ = built
    manifest = manifest_by_id()
    for candidate in sorted({row["candidate"] for row in records}):
        report = gate.check_source(Path(manifest[candidate]["path"]).read_text(), "cuda")
        assert report.ok, (candidate, [v.message for v in report.violations])


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--tasks", "L1_999"], "no candidates for it"),
        (["--tasks", "L1_19"], "needs a correct and a not-correct candidate"),
        (["--tasks", "L1_88,L1_88"], "listed twice"),
        (["--turns", "1"], "--turns >= 2"),
        (["--trajectories", "0"], "--trajectories must be >= 1"),
        (["--manifest", "/nonexistent/manifest.json"], "cannot read the candidate manifest"),
        (["--extra", "/nonexistent"], "no such folder"),
        (["--kernelbench", "/nonexistent"], "KernelBench data not found"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, capsys, extra, message):
    code = builder.main(["--out", str(tmp_path / "out"), *extra])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("kernelbench_replay: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()
