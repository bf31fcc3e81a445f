"""`kevin bench --study`: the fixed-budget study with a fake evaluator whose verdicts are written in the
candidates and a fake policy that reads its lineage from the prompt, so a beam does better than
independent trajectories. Budget accounting, the table against a hand computation, resume, short
replay records, and bad input (exit 2)."""

from __future__ import annotations

import json
import re
from concurrent.futures import Future

import pytest

from kevin.cli import main
from kevin.errors import UsageError
from kevin.evaluator.result import EvalResult
from kevin.rl.env import Generation
from kevin.rl.replay import ReplayPolicy
from kevin.search.bench import BenchConfig, run_bench
from kevin.search.study import Shape, configuration_result, default_shapes, parse_shapes, run_study
from kevin.tasks import Task

PROBLEM = "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
TASKS = [Task.from_source(PROBLEM, id=task_id, name=f"task_{task_id}") for task_id in "AB"]
BASE = BenchConfig(backend="cpp")
SHAPES = [Shape(2, 2), Shape(4, 1), Shape(2, 2, beam=1)]

# Turn 1 of each (task, slot): "ok S" passes at speedup S, "wrong" is a wrong output, None a completion
# without a code block (a format error, never sent to the evaluator).
FIRST = {"A": ["wrong", "ok 0.5", "ok 3.0", None], "B": [None, "wrong", "ok 0.6", "wrong"]}


def completion(verdict: str | None) -> str:
    if verdict is None:
        return "<think>stuck</think>\nNo code this time."
    return f"<think>plan</think>\n```python\nclass ModelNew:\n    pass\n# verdict: {verdict}\n```\nWrote {verdict}."


class Refiner:
    """A policy bound to its slots like a replay: turn 1 writes FIRST; later, the latest kernel its
    prompt shows decides: passed at S, slot 0 writes S + 1.0 and other slots copy S; failed (or none
    shown), it writes a wrong kernel. So only the lineage a beam keeps gets better."""

    def __init__(self, crash_at: tuple[int, int] | None = None) -> None:
        self.asked: list[tuple[str, int, int]] = []
        self.crash_at = crash_at  # (slots, turn): raise when asked a turn of a batch this wide

    def for_trajectories(self, slots, *, first_turn: int = 1):
        return _Bound(self, list(slots), first_turn)


class _Bound:
    def __init__(self, owner: Refiner, slots, first_turn: int) -> None:
        self.owner, self.slots, self.turn = owner, slots, first_turn - 1

    def generate(self, prompts, sampling):
        self.turn += 1
        if self.owner.crash_at == (len(self.slots), self.turn):
            raise RuntimeError("the policy server went away")
        answers = []
        for (task, slot), prompt in zip(self.slots, prompts, strict=True):
            self.owner.asked.append((task, slot, self.turn))
            shown = re.findall(r"# verdict: (.*)", prompt)
            if self.turn == 1:
                verdict = FIRST[task][slot]
            elif shown and shown[-1].startswith("ok "):
                speedup = float(shown[-1][3:])
                verdict = f"ok {speedup + 1.0 if slot == 0 else speedup}"
            else:
                verdict = "wrong"
            answers.append(Generation(completion(verdict), finish_reason="stop"))
        return answers


class Judge:
    """An evaluator that reads the verdict written in the candidate."""

    def __init__(self) -> None:
        self.submitted = 0

    def submit(self, task: Task, source: str) -> Future[EvalResult]:
        self.submitted += 1
        verdict = re.search(r"# verdict: (.*)", source).group(1)
        passed = verdict.startswith("ok ")
        future: Future[EvalResult] = Future()
        future.set_result(
            EvalResult(
                stage="ok" if passed else "correctness",
                compiled=True,
                correct=passed,
                speedup=float(verdict[3:]) if passed else None,
                blame="none" if passed else "candidate",
                task_id=task.id,
            )
        )
        return future


def study(run_dir, policy=None, evaluator=None, shapes=SHAPES, budget=4, tasks=TASKS):
    lines: list[str] = []
    outcome = run_study(
        tasks,
        policy or Refiner(),
        evaluator or Judge(),
        BASE,
        budget,
        shapes,
        run_dir,
        describe={"policy": {"kind": "fake"}},
        out=lines.append,
    )
    return outcome, lines


def rows_of(path) -> list[dict]:
    return [json.loads(line) for line in (path / "episodes.jsonl").read_text().splitlines()]


def test_shapes_split_the_budget_and_the_default_is_the_papers():
    assert [s.name for s in default_shapes(128)] == ["16x8", "32x4", "128x1", "16x8-beam4"]
    assert [(s.trajectories, s.turns, s.beam) for s in default_shapes(128)] == [
        (16, 8, None),
        (32, 4, None),
        (128, 1, None),
        (16, 8, 4),
    ]
    assert [s.name for s in default_shapes(8)] == ["1x8", "2x4", "8x1"]  # no N above 4 to beam
    assert parse_shapes("32x4, 8x16-beam2", 128) == [Shape(32, 4), Shape(8, 16, beam=2)]


def test_every_configuration_spends_the_budget_in_its_own_shape(tmp_path):
    outcome, _ = study(tmp_path / "s")
    for shape, result in zip(SHAPES, outcome.study["configurations"], strict=True):
        sub = tmp_path / "s" / shape.name
        rows = rows_of(sub)
        for task in "AB":  # exactly slots 0..N-1 at turns 1..T, once each: N x T = 4 kernels
            keys = sorted((r["trajectory"], r["turn"]) for r in rows if r["task"] == task)
            assert keys == [(j, t) for j in range(shape.trajectories) for t in range(1, shape.turns + 1)]
        assert result["kernels_written"] == {"A": 4, "B": 4} and result["budget_ok"]
        settings = json.loads((sub / "config.json").read_text())["bench"]
        assert (settings["trajectories"], settings["turns"], settings.get("beam")) == (
            shape.trajectories,
            shape.turns,
            shape.beam,
        )
    assert "beam" not in json.loads((tmp_path / "s" / "2x2" / "config.json").read_text())["bench"]
    beam_rows = rows_of(tmp_path / "s" / "2x2-beam1")
    assert [r["parent"] for r in beam_rows if r["task"] == "A" and r["turn"] == 2] == [1, 1]
    assert outcome.study["budget_ok"] and outcome.ran == ["2x2", "4x1", "2x2-beam1"]


def test_a_configuration_short_of_the_budget_is_reported():
    rows = [
        {"task": task, "trajectory": j, "turn": 1, "verdict": {"stage": "correctness"}, "candidate": "x"}
        for task in "AB"
        for j in range(4)
    ]
    assert configuration_result(Shape(4, 1), rows, TASKS)["budget_ok"]
    result = configuration_result(Shape(4, 1), rows[:-1], TASKS)  # B's slot 3 never written
    assert not result["budget_ok"] and result["kernels_written"] == {"A": 4, "B": 3}
    mis_split = configuration_result(Shape(2, 2), rows, TASKS)  # 4 kernels a task, in 4x1's shape
    assert not mis_split["budget_ok"] and mis_split["kernels_written"] == {"A": 4, "B": 4}


# Worked by hand (budget 4, tasks A and B). Fast_p counts "faster than p", so 1.5x is not fast_1.5.
#   2x2        A: slot 0 wrong, wrong; slot 1 0.5, 0.5 (copies) -> best 0.5. B: slot 0 format, wrong;
#              slot 1 wrong, wrong -> none. correct 1/2, best (0.5 + 0)/2 = 0.25, fast 0, 0,
#              geomean over A alone 0.5; evaluated A 4, B 3 (the format error) -> 3.5 per task
#   4x1        A: wrong, 0.5, 3.0, format -> 3.0. B: format, wrong, 0.6, wrong -> 0.6. correct 1,
#              best 1.8, fast_1 1/2, fast_1.5 1/2, geomean sqrt(3.0 * 0.6) = 1.3416; evaluated 3, 3
#   2x2-beam1  A: turn 1 as 2x2; slot 1 scored best (0.8 vs 0), both slots continue it: slot 0 writes
#              1.5, slot 1 0.5 -> best 1.5. B: both scored 0, the tie keeps slot 0 (a format error),
#              so both write wrong -> none. correct 1/2, best 0.75, fast_1 1/2, fast_1.5 0, geomean 1.5
# Curves (best speedup, mean over tasks, against kernels per task): at turn 1 best@k over k first
# attempts, then best@N after turn t at N x t kernels.
#   2x2, 2x2-beam1 turn 1: A [0, 0.5], B [0, 0]: best@1 (0.25 + 0)/2 = 0.125, best@2 (0.5 + 0)/2 = 0.25
#   4x1: A sorted [0, 0, 0.5, 3.0]: best@1 0.875, best@2 (0.5 * 2 + 3.0 * 3)/6 = 1.6667, best@4 3.0;
#        B [0, 0, 0, 0.6]: 0.15, 0.6 * 3/6 = 0.3, 0.6 -> 0.5125, 0.98333, 1.8
EXPECTED = {
    "2x2": {"correct": 0.5, "speedup_best": 0.25, "fast_1": 0.0, "fast_1.5": 0.0, "geomean": 0.5},
    "4x1": {"correct": 1.0, "speedup_best": 1.8, "fast_1": 0.5, "fast_1.5": 0.5, "geomean": 1.8**0.5},
    "2x2-beam1": {"correct": 0.5, "speedup_best": 0.75, "fast_1": 0.5, "fast_1.5": 0.0, "geomean": 1.5},
}
CURVES = {
    "2x2": [(1, 0.125), (2, 0.25), (4, 0.25)],
    "4x1": [(1, 0.5125), (2, (10 / 6 + 0.3) / 2), (4, 1.8)],
    "2x2-beam1": [(1, 0.125), (2, 0.25), (4, 0.75)],
}


def test_the_table_against_the_hand_computation(tmp_path, capsys):
    evaluator = Judge()
    outcome, lines = study(tmp_path / "s", evaluator=evaluator)
    saved = json.loads((tmp_path / "s" / "study.json").read_text())
    assert saved == outcome.study and saved["budget"] == 4 and saved["tasks"] == ["A", "B"]
    by_name = {r["configuration"]: r for r in saved["configurations"]}
    for name, columns in EXPECTED.items():
        assert {key: by_name[name][key] for key in columns} == pytest.approx(columns), name
        assert [p["kernels"] for p in by_name[name]["curve"]] == [k for k, _ in CURVES[name]]
        assert [p["speedup_best"] for p in by_name[name]["curve"]] == pytest.approx(
            [v for _, v in CURVES[name]]
        )
    assert [by_name[n]["kernels_evaluated"] for n in EXPECTED] == [{"A": 4, "B": 3}, {"A": 3, "B": 3}] + [
        {"A": 4, "B": 3}
    ]
    assert evaluator.submitted == 7 + 6 + 7

    markdown = (tmp_path / "s" / "study.md").read_text()
    assert "| configuration | kernels written / task | evaluated / task | correct % |" in markdown
    assert "| 2x2 | 4 | 3.5 | 50.0 | 0.250 | 0.0 | 0.0 | 0.500 | 0 |" in markdown
    assert "| 4x1 | 4 | 3.0 | 100.0 | 1.800 | 50.0 | 50.0 | 1.342 | 0 |" in markdown
    assert "| 2x2-beam1 | 4 | 3.5 | 50.0 | 0.750 | 50.0 | 0.0 | 1.500 | 0 |" in markdown
    assert "| kernels | 2x2 | 4x1 | 2x2-beam1 |" in markdown and "| 4 | 0.250 | 1.800 | 0.750 |" in markdown
    assert "Budget mismatch" not in markdown
    assert (tmp_path / "s" / "study.png").read_bytes()[:4] == b"\x89PNG"
    assert "| 4x1 | 4 | 3.0 | 100.0 | 1.800 | 50.0 | 50.0 | 1.342 | 0 |" in "\n".join(lines)
    for name in EXPECTED:  # each configuration is a whole bench run
        assert (tmp_path / "s" / name / "metrics.md").is_file()

    # two studies side by side: B's 4x1 writes 0.6x where A's wrote 3.0x
    first = dict(FIRST)
    FIRST["A"] = ["wrong", "ok 0.5", "ok 0.6", None]
    try:
        study(tmp_path / "t", shapes=SHAPES[1:2])
    finally:
        FIRST.update(first)
    assert main(["bench", "compare", str(tmp_path / "s"), str(tmp_path / "t")]) == 0
    text = capsys.readouterr().out
    # 4x1: best (0.6 + 0.6)/2 = 0.6 (-1.2), fast_1 0 (-50 points); 2x2 is only in A
    assert "| 4x1 | 100.0 | 100.0 | +0.0 | 1.800 | 0.600 | -1.200 | 50.0 | 0.0 | -50.0 |" in text
    assert "| 2x2 | 50.0 | - | - | 0.250 | - | - |" in text


def test_resume_runs_only_unfinished_configurations(tmp_path):
    # 2x2 and 4x1 finish (their batches hold both tasks: 4 and 8 slots); the beam, a task at a time,
    # crashes when asked for task A's turn 2
    with pytest.raises(RuntimeError, match="went away"):
        study(tmp_path / "s", policy=Refiner(crash_at=(2, 2)))
    assert len(rows_of(tmp_path / "s" / "2x2-beam1")) == 2

    policy, evaluator = Refiner(), Judge()
    outcome, lines = study(tmp_path / "s", policy=policy, evaluator=evaluator)
    assert outcome.ran == ["2x2-beam1"]
    assert "configuration 1/3 2x2: finished earlier, not run again" in lines
    assert "configuration 2/3 4x1: finished earlier, not run again" in lines
    # the beam keeps A's finished turn 1 (its parents ranked again from those rows)
    assert policy.asked == [("A", 0, 2), ("A", 1, 2), ("B", 0, 1), ("B", 1, 1), ("B", 0, 2), ("B", 1, 2)]
    assert evaluator.submitted == 5  # B's turn-1 format error is not evaluated
    assert outcome.study["configurations"] == study(tmp_path / "fresh")[0].study["configurations"]

    policy, evaluator = Refiner(), Judge()
    outcome, lines = study(tmp_path / "s", policy=policy, evaluator=evaluator)
    assert outcome.ran == [] and policy.asked == [] and evaluator.submitted == 0
    assert sum("finished earlier, not run again" in line for line in lines) == 3


def replay_records(shapes=SHAPES) -> dict:
    """Records for every key the shapes ask for, the verdicts of FIRST at turn 1 and "ok 1.0" later."""
    records = {}
    for shape in shapes:
        for task in "AB":
            for j in range(shape.trajectories):
                for turn in range(1, shape.turns + 1):
                    verdict = FIRST[task][j] if turn == 1 else "ok 1.0"
                    records[(task, j, turn)] = completion(verdict)
    return records


def test_short_replay_records_refuse_every_short_configuration_up_front(tmp_path):
    records = replay_records()
    del records[("A", 3, 1)], records[("B", 3, 1)], records[("B", 1, 2)]
    evaluator = Judge()
    with pytest.raises(UsageError) as caught:
        study(tmp_path / "s", policy=ReplayPolicy(records), evaluator=evaluator)
    message = str(caught.value)
    assert "lack turns of 3 of the 3 configurations" in message and "\n" not in message
    assert "2x2 lacks 1 of 8 (first task B trajectory 1 turn 2)" in message
    assert "4x1 lacks 2 of 8 (first task A trajectory 3 turn 1)" in message
    assert "2x2-beam1 lacks 1 of 8" in message
    assert evaluator.submitted == 0 and not (tmp_path / "s").exists()

    outcome, _ = study(tmp_path / "s", policy=ReplayPolicy(replay_records()))  # complete records run
    assert outcome.study["budget_ok"]


def test_plain_bench_with_a_beam_resumes_from_finished_turns(tmp_path):
    config = BenchConfig(trajectories=2, turns=2, beam=1, backend="cpp")
    with pytest.raises(RuntimeError, match="went away"):
        run_bench(TASKS, Refiner(crash_at=(2, 2)), Judge(), config, tmp_path / "b", out=lambda line: None)
    assert len(rows_of(tmp_path / "b")) == 2  # A's turn 1
    policy, lines = Refiner(), []
    outcome = run_bench(TASKS, policy, Judge(), config, tmp_path / "b", out=lines.append)
    assert policy.asked == [("A", 0, 2), ("A", 1, 2), ("B", 0, 1), ("B", 1, 1), ("B", 0, 2), ("B", 1, 2)]
    assert "1 of 4 task turns already done" in lines[0] and "beam 1" in lines[0]
    assert outcome.metrics["table1"]["overall"]["speedup_best"] == pytest.approx(0.75)  # as 2x2-beam1


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("kevin: error: ") and "\n" not in err, err
    return err


def no_code_records(tmp_path, keys):
    """Replay records for bundled task B_01 at these (trajectory, turn): answers without code."""
    path = tmp_path / "records.jsonl"
    with path.open("w") as handle:
        for trajectory, turn in keys:
            record = {"task": "B_01", "trajectory": trajectory, "turn": turn, "completion": "no code"}
            handle.write(json.dumps(record) + "\n")
    return path


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--study", "8", "--shapes", "2x2"],
            "shape 2x2 spends 2 x 2 = 4 kernels per task, not the budget 8",
        ),
        (["--study", "4", "--shapes", "2x2,4x1,2x2"], "shape 2x2 is listed twice"),
        (["--study", "4", "--shapes", "2by2"], "shape '2by2': write NxT or NxT-beamK"),
        (["--study", "4", "--shapes", "4x1-beam2"], "at least 2 turns"),
        (["--study", "4", "--shapes", "2x2-beam2"], "smaller than N"),
        (["--study", "0"], "budget must be at least 1 kernel per task"),
        (["--study", "4", "--trajectories", "2"], "--study runs every shape of --shapes"),
        (["--study", "4", "--beam", "2"], "drop --beam"),
        (["--shapes", "2x2"], "--shapes needs --study BUDGET"),
        (["--trajectories", "4", "--beam", "3"], "beam must divide the 4 trajectories, got 3"),
        (["--study", "2", "--shapes", "1x2,2x1"], "lack turns of 1 of the 2 configurations"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, argv, message):
    records = no_code_records(tmp_path, [(0, 1), (0, 2)])
    common = ["--replay", str(records), "--ids", "B_01", "--backend", "cpp", "--out", str(tmp_path / "run")]
    assert main(["bench", *common, *argv]) == 2
    assert message in one_line_error(capsys)
    assert not (tmp_path / "run").exists()


def test_cli_runs_and_resumes_a_study(tmp_path, capsys):
    """The whole command without a build: every replayed completion is a format error."""
    records = no_code_records(tmp_path, [(j, t) for j in (0, 1) for t in (1, 2)])
    argv = ["bench", "--replay", str(records), "--ids", "B_01", "--study", "2", "--shapes", "1x2,2x1"]
    argv += ["--backend", "cpp", "--jobs", "1", "--out", str(tmp_path / "study")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "| 1x2 | 2 | 0.0 | 0.0 | 0.000 | 0.0 | 0.0 | - | 0 |" in out
    assert "| 2x1 | 2 | 0.0 | 0.0 | 0.000 | 0.0 | 0.0 | - | 0 |" in out
    saved = json.loads((tmp_path / "study" / "study.json").read_text())
    assert saved["policy"]["kind"] == "replay" and saved["evaluator"]["backend"] == "cpp"
    assert main(argv) == 0
    assert capsys.readouterr().out.count("finished earlier, not run again") == 2
