"""The replay policy: records by (task, trajectory, turn), episodes files as records, clear errors."""

from __future__ import annotations

import json
from concurrent.futures import Future

import pytest

from kevin.errors import UsageError
from kevin.evaluator.result import EvalResult
from kevin.rl.env import EpisodeConfig, Generation, Sampling, run_episodes
from kevin.rl.episodes import write_episodes
from kevin.rl.replay import MissingRecord, ReplayPolicy, read_records
from kevin.tasks import Task

PROBLEM = "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"


def answer(tag: str) -> str:
    return f"<think>try {tag}</think>\n```python\nclass ModelNew:\n    tag = {tag!r}\n```\nSummary {tag}."


def write_jsonl(path, rows) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


class PassEverything:
    """An evaluator whose verdict is always a pass at 1.0x."""

    def __init__(self) -> None:
        self.sources: list[str] = []

    def submit(self, task: Task, source: str) -> Future[EvalResult]:
        self.sources.append(source)
        future: Future[EvalResult] = Future()
        future.set_result(EvalResult(stage="ok", compiled=True, correct=True, speedup=1.0, task_id=task.id))
        return future


def test_records_answer_by_key_in_the_env_order():
    records = {
        (task, j, turn): answer(f"{task}{j}{turn}") for task in "AB" for j in (0, 1) for turn in (1, 2)
    }
    replay = ReplayPolicy(records)
    tasks = [Task.from_source(PROBLEM, id=task_id, name=task_id.lower()) for task_id in "AB"]
    evaluator = PassEverything()
    slots = [(task.id, j) for task in tasks for j in (0, 1)]
    trajectories = run_episodes(
        tasks,
        replay.for_trajectories(slots),
        evaluator,
        EpisodeConfig(trajectories=2, turns=2, backend="cpp"),
    )
    for trajectory in trajectories:
        for turn in trajectory.turns:
            assert turn.generation.text == answer(f"{trajectory.task.id}{trajectory.index}{turn.turn}")
    assert replay.asked == [(t, j, turn) for turn in (1, 2) for t in "AB" for j in (0, 1)]
    # the turn-2 prompt carries the replayed turn-1 kernel and summary of its own trajectory
    second = trajectories[3].turns[1].prompt.text
    assert "tag = 'B11'" in second and "Summary B11." in second and "B01" not in second


def test_generation_fields_survive_and_plain_strings_become_generations():
    replay = ReplayPolicy({("A", 0, 1): Generation("cut", finish_reason="length", completion_tokens=7)})
    (generation,) = replay.for_trajectories([("A", 0)]).generate(["prompt"], Sampling())
    assert generation == Generation("cut", finish_reason="length", completion_tokens=7)
    assert ReplayPolicy({("A", 0, 1): "text"}).completion(("A", 0, 1)) == Generation("text")


def test_missing_record_is_a_usage_error_naming_the_key():
    replay = ReplayPolicy({("A", 0, 1): "x"}, origin="rec.jsonl")
    run = replay.for_trajectories([("A", 0)])
    run.generate(["p"], Sampling())
    with pytest.raises(MissingRecord, match="task A trajectory 0 turn 2 in rec.jsonl"):
        run.generate(["p"], Sampling())
    assert issubclass(MissingRecord, UsageError)
    assert replay.missing([("A", 0, 1), ("A", 1, 1), ("B", 0, 3)]) == [("A", 1, 1), ("B", 0, 3)]


def test_a_run_that_starts_at_a_later_turn():
    replay = ReplayPolicy({("A", 0, 3): "third", ("A", 0, 4): "fourth", ("A", 0, 1): "first"})
    run = replay.for_trajectories([("A", 0)], first_turn=3)
    assert [run.generate(["p"], Sampling())[0].text for _ in range(2)] == ["third", "fourth"]
    assert replay.asked == [("A", 0, 3), ("A", 0, 4)]
    with pytest.raises(ValueError, match="first_turn must be at least 1"):
        replay.for_trajectories([("A", 0)], first_turn=0)


def test_a_batch_of_another_size_is_refused():
    run = ReplayPolicy({("A", 0, 1): "x", ("A", 1, 1): "y"}).for_trajectories([("A", 0), ("A", 1)])
    with pytest.raises(RuntimeError, match="1 prompts for 2 trajectories"):
        run.generate(["only one"], Sampling())


def test_read_records_from_a_plain_file_and_from_a_run_directory(tmp_path):
    plain = tmp_path / "records.jsonl"
    write_jsonl(
        plain,
        [
            {"task": "A", "trajectory": 0, "turn": 1, "completion": "one"},
            {"task": "A", "trajectory": 0, "turn": 2, "completion": "two", "finish_reason": "length"},
        ],
    )
    plain.write_text(plain.read_text() + "\n")  # blank lines are skipped
    records = read_records(plain)
    assert records == {("A", 0, 1): Generation("one"), ("A", 0, 2): Generation("two", "length")}

    # an episodes file written by the environment replays as it is
    task = Task.from_source(PROBLEM, id="A", name="a")
    first = run_episodes(
        [task],
        ReplayPolicy(records).for_trajectories([("A", 0)]),
        PassEverything(),
        EpisodeConfig(trajectories=1, turns=2, backend="cpp"),
    )
    run_dir = tmp_path / "run"
    write_episodes(run_dir / "episodes.jsonl", first)
    again = ReplayPolicy.from_file(run_dir)
    assert again.records == records and again.origin == str(run_dir)


def test_several_steps_need_a_step_and_duplicates_are_refused(tmp_path):
    path = tmp_path / "train.jsonl"
    rows = [{"task": "A", "trajectory": 0, "turn": 1, "completion": f"step {s}", "step": s} for s in (1, 2)]
    write_jsonl(path, rows)
    with pytest.raises(UsageError, match=r"holds steps \[1, 2\]; pick one"):
        read_records(path)
    assert read_records(path, step=2) == {("A", 0, 1): Generation("step 2")}
    with pytest.raises(UsageError, match="no records of step 3"):
        read_records(path, step=3)
    write_jsonl(path, [rows[0], rows[0]])
    with pytest.raises(UsageError, match=r"train.jsonl:2: a second record for task A trajectory 0 turn 1"):
        read_records(path)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", r"bad.jsonl:1: not valid JSON"),
        ("[1, 2]", r"bad.jsonl:1: expected a JSON object"),
        ('{"task": "A", "turn": 1}', r"bad.jsonl:1: the record lacks trajectory, completion"),
        ('{"task": "A", "trajectory": "x", "turn": 1, "completion": ""}', "must be integers"),
        ('{"task": "A", "trajectory": 0, "turn": 0, "completion": ""}', "turn >= 1"),
    ],
)
def test_bad_lines_name_the_line(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(UsageError, match=message):
        read_records(path)


def test_missing_file_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="replay records not found"):
        read_records(tmp_path / "nowhere.jsonl")
    with pytest.raises(UsageError, match="episodes.jsonl"):
        ReplayPolicy.from_file(tmp_path)  # a directory without episodes.jsonl
