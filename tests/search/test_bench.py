"""`kevin bench` with a fake evaluator whose verdicts are fixed: every metric against a hand computation,
resume, `kevin bench compare`, and bad input (exit code 2)."""

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
from kevin.tasks import Task

PROBLEM = "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
TASKS = [Task.from_source(PROBLEM, id=task_id, name=f"task_{task_id}") for task_id in "AB"]
CONFIG = BenchConfig(trajectories=2, turns=2, backend="cpp")

# What each (task, trajectory) writes at turns 1 and 2: "ok S" passes at speedup S, "wrong" is a wrong
# output, None a completion without a code block (a format error, never sent to the evaluator).
PLAN = {
    ("A", 0): ["wrong", "ok 2.0"],
    ("A", 1): ["ok 0.5", "ok 1.2"],
    ("B", 0): [None, "ok 1.6"],
    ("B", 1): ["wrong", "wrong"],  # its turn 2 is recorded as cut at max tokens (finish_reason length)
}


def completion(verdict: str | None) -> str:
    if verdict is None:
        return "<think>no idea</think>\nI could not write it."
    return f"<think>plan</think>\n```python\nclass ModelNew:\n    pass\n# verdict: {verdict}\n```\nTried {verdict}."


def records(plan=PLAN) -> dict:
    out = {}
    for (task, j), verdicts in plan.items():
        for turn, verdict in enumerate(verdicts, start=1):
            reason = "length" if (task, j, turn) == ("B", 1, 2) else "stop"
            out[(task, j, turn)] = Generation(completion(verdict), finish_reason=reason)
    return out


class FixedVerdicts:
    """An evaluator that reads the verdict written in the candidate."""

    def __init__(self) -> None:
        self.submitted: list[tuple[str, str]] = []

    def submit(self, task: Task, source: str) -> Future[EvalResult]:
        verdict = re.search(r"# verdict: (.*)", source).group(1)
        self.submitted.append((task.id, verdict))
        if verdict.startswith("ok "):
            result = EvalResult(
                stage="ok", compiled=True, correct=True, speedup=float(verdict[3:]), task_id=task.id
            )
        else:
            result = EvalResult(stage="correctness", compiled=True, blame="candidate", task_id=task.id)
        future: Future[EvalResult] = Future()
        future.set_result(result)
        return future


def bench(run_dir, policy=None, evaluator=None, config=CONFIG, tasks=TASKS, **kwargs):
    lines: list[str] = []
    outcome = run_bench(
        tasks,
        policy or ReplayPolicy(records()),
        evaluator or FixedVerdicts(),
        config,
        run_dir,
        describe={"policy": {"kind": "replay"}},
        out=lines.append,
        **kwargs,
    )
    return outcome, lines


# Worked by hand, k = n = 2. A trajectory's speedup is its best passed turn's, 0 if none passed.
#   all turns:  A0 2.0, A1 max(0.5, 1.2) = 1.2, B0 1.6, B1 not correct (0)
#     task A: correct 2/2 = 1, mean speedup (2.0 + 1.2)/2 = 1.6, best@2 = max = 2.0,
#             fast_1 2/2 = 1, fast_1.5 1/2 (only 2.0 > 1.5), pass@2 = 1
#     task B: correct 1/2, mean speedup (1.6 + 0)/2 = 0.8, best@2 = 1.6, fast_1 1/2, fast_1.5 1/2,
#             pass@2 = 1 - C(1,2)/C(2,2) = 1 (fewer failures than k)
#     over tasks: correct 0.75, pass@2 1.0, best@2 1.8, mean 1.2, fast_1 0.75, fast_1.5 0.5,
#     geomean over the correct trajectories (2.0 * 1.2 * 1.6) ** (1/3) = 3.84 ** (1/3) = 1.5659
#   first turn only: A0 wrong, A1 0.5, B0 format error, B1 wrong
#     task A: correct 1/2, mean 0.25, best@2 0.5, pass@2 1, fast_1 0; task B: all 0
#     over tasks: correct 0.25, pass@2 0.5, best@2 0.25, mean 0.125, fast 0, 0, geomean 0.5
#   turn 1 alone: 4 samples, 1 passed (25%), scores 0, 0.3 + 0.5, 0, 0 -> mean 0.2, 1 format error
#   turn 2 alone: 4 samples, 3 passed (75%), scores 2.3, 1.5, 1.9, 0 -> mean 5.7/4 = 1.425,
#     no format error, 1 truncated (25%)
OVERALL = {
    "correct": 0.75,
    "correct_best": 1.0,
    "speedup_best": 1.8,
    "speedup_avg": 1.2,
    "fast_1": 0.75,
    "fast_1.5": 0.5,
    "geomean": 3.84 ** (1 / 3),
}
TURN_1 = {
    "correct": 0.25,
    "correct_best": 0.5,
    "speedup_best": 0.25,
    "speedup_avg": 0.125,
    "fast_1": 0.0,
    "fast_1.5": 0.0,
    "geomean": 0.5,
}


def test_every_metric_against_the_hand_computation(tmp_path):
    outcome, lines = bench(tmp_path / "run")
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics == outcome.metrics
    assert (metrics["k"], metrics["tasks"], metrics["trajectories"], metrics["turns"]) == (2, 2, 4, 2)
    assert metrics["table1"]["overall"] == pytest.approx(OVERALL)
    turn_1, turn_2 = metrics["table1"]["upto_turn"]
    assert turn_1 == pytest.approx({"turn": 1, **TURN_1})
    assert turn_2 == pytest.approx({"turn": 2, **OVERALL})
    at_1, at_2 = metrics["metrics"]["at_turn"]
    assert at_1 == pytest.approx(
        {
            "turn": 1,
            "samples": 4,
            "passed": 0.25,
            "score": 0.2,
            "format_errors": 0.25,
            "truncated": 0.0,
            "infrastructure": 0,
        }
    )
    assert at_2 == pytest.approx(
        {
            "turn": 2,
            "samples": 4,
            "passed": 0.75,
            "score": 1.425,
            "format_errors": 0.0,
            "truncated": 0.25,
            "infrastructure": 0,
        }
    )

    markdown = (tmp_path / "run" / "metrics.md").read_text()
    assert "| 75.0 | 100.0 | 1.800 | 1.200 | 75.0 | 50.0 | 1.566 |" in markdown  # Table 1, all turns
    assert "| 1 | 25.0 | 50.0 | 0.250 | 0.125 | 0.0 | 0.0 | 0.500 |" in markdown  # within the first turn
    assert "| 2 | 4 | 75.0 | 1.425 | 0.0 | 25.0 | 0 |" in markdown  # turn 2 alone
    assert "correct % (best@2)" in markdown
    assert (tmp_path / "run" / "curves.png").read_bytes()[:4] == b"\x89PNG"

    # every turn recorded, re-verifiable: the task hash, the candidate and the verdict
    rows = [json.loads(line) for line in (tmp_path / "run" / "episodes.jsonl").read_text().splitlines()]
    assert sorted((r["task"], r["trajectory"], r["turn"]) for r in rows) == sorted(records())
    assert {r["task_hash"] for r in rows} == {TASKS[0].hash}
    assert all(r["candidate"] is None or "# verdict:" in r["candidate"] for r in rows)
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["bench"]["trajectories"] == 2 and config["policy"] == {"kind": "replay"}
    assert [t["id"] for t in config["tasks"]] == ["A", "B"]
    # progress: a header, one line per task, Table 1
    assert lines[0].startswith("kevin bench: 2 tasks x 2 trajectories x 2 turns")
    assert "[1/2] A task_A: correct 2/2, turn 1 passed 1/2, best 2.00x" in lines[1]
    assert "[2/2] B task_B: correct 1/2, turn 1 passed 0/2, best 1.60x" in lines[2]
    assert outcome.evaluated_pairs == 4


def test_resume_after_a_crash_runs_only_what_is_missing(tmp_path):
    class CrashOnB:
        def __init__(self) -> None:
            self.replay = ReplayPolicy(records())

        def for_trajectories(self, slots):
            if any(task == "B" for task, _ in slots):
                raise RuntimeError("the policy server went away")
            return self.replay.for_trajectories(slots)

    with pytest.raises(RuntimeError, match="went away"):
        bench(tmp_path / "run", policy=CrashOnB(), tasks_per_batch=1)
    assert {json.loads(line)["task"] for line in (tmp_path / "run" / "episodes.jsonl").open()} == {"A"}

    replay, evaluator = ReplayPolicy(records()), FixedVerdicts()
    outcome, lines = bench(tmp_path / "run", policy=replay, evaluator=evaluator)
    assert {key[0] for key in replay.asked} == {"B"} and len(replay.asked) == 4
    assert evaluator.submitted == [
        ("B", "wrong"),
        ("B", "ok 1.6"),
        ("B", "wrong"),
    ]  # the format error is not sent
    assert outcome.evaluated_pairs == 2 and "2 of 4 trajectories already done" in lines[0]
    assert outcome.metrics["table1"]["overall"] == pytest.approx(OVERALL)


def test_resume_drops_an_unfinished_pair_and_a_cut_line(tmp_path):
    bench(tmp_path / "run")
    episodes = tmp_path / "run" / "episodes.jsonl"
    rows = [json.loads(line) for line in episodes.read_text().splitlines()]
    kept = [r for r in rows if (r["task"], r["trajectory"], r["turn"]) != ("B", 1, 2)]
    episodes.write_text("".join(json.dumps(r) + "\n" for r in kept) + '{"task": "B", "traj')

    replay = ReplayPolicy(records())
    outcome, _ = bench(tmp_path / "run", policy=replay)
    assert replay.asked == [("B", 1, 1), ("B", 1, 2)]
    rows = [json.loads(line) for line in episodes.read_text().splitlines()]
    assert len(rows) == 8 and len({(r["task"], r["trajectory"], r["turn"]) for r in rows}) == 8
    assert outcome.metrics["table1"]["overall"] == pytest.approx(OVERALL)

    replay = ReplayPolicy(records())
    outcome, lines = bench(tmp_path / "run", policy=replay)  # all done: nothing asked, reports rewritten
    assert replay.asked == [] and outcome.evaluated_pairs == 0 and "4 of 4" in lines[0]


def test_resume_refuses_other_settings_and_missing_records_refuse_up_front(tmp_path):
    bench(tmp_path / "run")
    with pytest.raises(UsageError, match="its 'bench' differs"):
        bench(tmp_path / "run", config=BenchConfig(trajectories=2, turns=3, backend="cpp"))
    with pytest.raises(UsageError, match="its 'tasks' differs"):
        bench(tmp_path / "run", tasks=TASKS[:1])

    partial = records()
    del partial[("B", 0, 2)]
    evaluator = FixedVerdicts()
    with pytest.raises(UsageError, match="lack 1 of the 8 turns to run, first task B trajectory 0 turn 2"):
        bench(tmp_path / "fresh", policy=ReplayPolicy(partial), evaluator=evaluator)
    assert evaluator.submitted == [] and not (tmp_path / "fresh" / "config.json").exists()


# Run B differs from run A in one place: trajectory B1 passes at 1.0x on turn 2.
#   task B: correct 2/2, mean (1.6 + 1.0)/2 = 1.3, best@2 1.6, fast_1 1/2 (1.0 is not > 1), fast_1.5 1/2
#   overall: correct (1 + 1)/2 = 1.0 (+25.0 points), mean (1.6 + 1.3)/2 = 1.45 (+0.250),
#   best@2 1.8 (+0.000), geomean (2.0 * 1.2 * 1.6 * 1.0) ** (1/4) = 1.3998 (1.3998 - 1.5659 = -0.166)
#   first turn only: unchanged (B1 turn 1 is still wrong)
def test_compare_two_runs(tmp_path, capsys):
    bench(tmp_path / "a")
    better = dict(PLAN)
    better[("B", 1)] = ["wrong", "ok 1.0"]
    bench(tmp_path / "b", policy=ReplayPolicy(records(better)))
    out_file = tmp_path / "compare.md"
    assert main(["bench", "compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out_file)]) == 0
    text = capsys.readouterr().out
    assert text == out_file.read_text()
    assert "| correct % (avg@2) | 75.0 | 100.0 | +25.0 |" in text
    assert "| correct % (best@2) | 100.0 | 100.0 | +0.0 |" in text
    assert "| speedup best@2 | 1.800 | 1.800 | +0.000 |" in text
    assert "| mean speedup (avg@2) | 1.200 | 1.450 | +0.250 |" in text
    assert "| fast_1 % | 75.0 | 75.0 | +0.0 |" in text
    assert "| geomean (correct) | 1.566 | 1.400 | -0.166 |" in text
    # by turn: correct A, B, B - A; best@2 A, B, B - A; mean speedup A, B, B - A
    assert "| 1 | 25.0 | 25.0 | +0.0 | 0.250 | 0.250 | +0.000 | 0.125 | 0.125 | +0.000 |" in text
    assert "| 2 | 75.0 | 100.0 | +25.0 | 1.800 | 1.800 | +0.000 | 1.200 | 1.450 | +0.250 |" in text


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("kevin: error: ") and "\n" not in err, err
    return err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "give exactly one policy"),
        (["--replay", "{missing}", "--base-url", "http://x"], "give exactly one policy"),
        (["--replay", "{missing}"], "replay records not found"),
        (["--base-url", "http://localhost:1/v1"], "--base-url needs --model"),
        (["--base-url", "http://x/v1", "--model", "m", "--api-key-env", "KEVIN_TEST_UNSET_KEY"], "not set"),
        (["--replay", "{records}", "--turns", "0"], "turns must be at least 1"),
        (
            ["--replay", "{records}", "--turns", "2"],
            "lack 1 of the 2 turns to run, first task B_01 trajectory 0 turn 2",
        ),
        (["--replay", "{records}", "--split", "paper"], "holdout part of split 'paper' is empty"),
        (["--replay", "{records}", "--exclude", "{report}"], "every selected task is excluded"),
        (["--replay", "{records}", "--exclude", "{records}"], "is not a validation report"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.delenv("KEVIN_TEST_UNSET_KEY", raising=False)
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps({"task": "B_01", "trajectory": 0, "turn": 1, "completion": "x"}) + "\n")
    report = tmp_path / "hygiene.json"
    report.write_text(json.dumps({"excluded": [{"id": "B_01", "status": "degenerate"}]}))
    argv = [a.format(missing=tmp_path / "missing.jsonl", records=path, report=report) for a in argv]
    common = [
        "--ids",
        "B_01",
        "--trajectories",
        "1",
        "--turns",
        "1",
        "--backend",
        "cpp",
        "--out",
        str(tmp_path / "run"),
    ]
    assert main(["bench", *common, *argv]) == 2
    assert message in one_line_error(capsys)
    assert not (tmp_path / "run" / "episodes.jsonl").exists()


def test_compare_of_a_missing_run_exits_2(tmp_path, capsys):
    assert main(["bench", "compare", str(tmp_path / "nothing"), str(tmp_path)]) == 2
    assert "not found; give a `kevin bench` run directory" in one_line_error(capsys)


def test_cli_runs_and_resumes_a_replay(tmp_path, capsys):
    """The whole command without a build: every replayed completion is a format error, so the
    evaluator is never called, and a second launch finds everything done."""
    path = tmp_path / "records.jsonl"
    rows = [
        {"task": "B_01", "trajectory": j, "turn": t, "completion": "no code"} for j in (0, 1) for t in (1, 2)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    argv = ["bench", "--replay", str(path), "--ids", "B_01", "--trajectories", "2", "--turns", "2"]
    argv += ["--backend", "cpp", "--jobs", "1", "--out", str(tmp_path / "run")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert (
        "[1/1] B_01 gelu_tanh: correct 0/2" in out and "| 0.0 | 0.0 | 0.000 | 0.000 | 0.0 | 0.0 | - |" in out
    )
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["policy"]["kind"] == "replay" and config["evaluator"]["backend"] == "cpp"
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["metrics"]["at_turn"][1]["format_errors"] == 1.0
    assert main(argv) == 0
    assert "2 of 2 trajectories already done" in capsys.readouterr().out
    assert len((tmp_path / "run" / "episodes.jsonl").read_text().splitlines()) == 4
