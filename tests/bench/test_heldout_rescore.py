"""bench/heldout_rescore.py: a run's held-out kernels judged again by one evaluator, each distinct one once."""

from __future__ import annotations

import dataclasses
import json
from concurrent.futures import Future

import pytest
from bench_scripts import load_script

from kevin.evaluator.result import EvalResult
from kevin.train import presets
from kevin.train.family import generate_family, write_family
from kevin.train.overrides import save_config

rescore = load_script("heldout_rescore", "heldout_rescore.py")


def row(step, task, trajectory, candidate, speedup=None):
    verdict = {
        "stage": "ok",
        "correct": speedup is not None,
        "speedup": speedup,
        "blame": "none",
        "flags": [],
    }
    return {
        "step": step,
        "task": task,
        "trajectory": trajectory,
        "turn": 1,
        "candidate": candidate,
        "verdict": verdict,
    }


class Judge:
    """Speedup 2.0 for kernel "fast", 1.0 for anything else; counts what it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def submit(self, task, source):
        self.asked.append((task.id, source))
        done: Future = Future()
        done.set_result(
            EvalResult(stage="ok", correct=True, speedup=2.0 if source == "fast" else 1.0, task_id=task.id)
        )
        return done


def test_each_distinct_kernel_is_judged_once_and_rows_keep_what_they_had():
    tasks = {"L0_1": type("T", (), {"id": "L0_1"})(), "L0_2": type("T", (), {"id": "L0_2"})()}
    rows = [
        row(0, "L0_1", 0, "fast", 0.1),  # the old evaluator timed it badly
        row(0, "L0_1", 1, "fast", 0.1),  # the same kernel from another sample: judged once
        row(0, "L0_2", 0, None),  # a format error: no kernel, its verdict stays
        row(8, "L0_1", 0, "slow", 1.0),  # a step not asked for
        row(16, "L0_2", 0, "slow", None),
    ]
    judge = Judge()
    lines: list[str] = []
    out = rescore.rescore(rows, [0, 16], tasks, judge.submit, say=lines.append)
    assert sorted(judge.asked) == [("L0_1", "fast"), ("L0_2", "slow")]
    assert [(r["step"], r["rescored"]) for r in out] == [(0, True), (0, True), (0, False), (16, True)]
    assert [r["verdict"]["speedup"] for r in out if r["rescored"]] == [2.0, 2.0, 1.0]
    assert out[0]["verdict_before"] == {
        "stage": "ok",
        "correct": True,
        "speedup": 0.1,
        "blame": "none",
        "flags": [],
    }
    assert out[2]["verdict"] == rows[2]["verdict"]
    assert lines[-1].startswith("heldout_rescore: 2/2 kernels judged")
    text = rescore.summary(out)
    assert "step 0: 3 rows, passed 0.667 -> 0.667, mean speedup 0.067 -> 1.333" in text
    assert "step 16: 1 rows, passed 0.000 -> 1.000, mean speedup 0.000 -> 1.000" in text


def test_steps_default_to_the_first_and_the_last():
    rows = [row(s, "L0_1", 0, "k", 1.0) for s in (0, 8, 16)]
    assert rescore.chosen_steps(rows, None) == [0, 16]
    assert rescore.chosen_steps(rows, "16, 8") == [8, 16]
    with pytest.raises(rescore.UsageError, match=r"no held-out rows at step\(s\) \[4\]"):
        rescore.chosen_steps(rows, "0,4")
    with pytest.raises(rescore.UsageError, match="separated by commas"):
        rescore.chosen_steps(rows, "last")


def test_a_run_directory_end_to_end_with_its_own_tasks(tmp_path, capsys):
    family = tmp_path / "family"
    write_family(family, generate_family(0), size="small")
    heldout_ids = json.loads((family / "split.json").read_text())["holdout"]
    config = presets.smoke()
    config = dataclasses.replace(
        config, loop=dataclasses.replace(config.loop, tasks=str(family), split=str(family / "split.json"))
    )
    run = tmp_path / "rl"
    save_config(config, run)
    first, second = heldout_ids[:2]
    rows = [row(0, first, 0, "fast", 0.5), row(0, second, 0, "slow", 1.0), row(4, first, 0, "fast", 2.0)]
    (run / "heldout.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    judge = Judge()
    assert rescore.main([str(run)], evaluator_factory=lambda c: judge) == 0
    written = [json.loads(line) for line in (run / "heldout_rescored.jsonl").read_text().splitlines()]
    assert [(r["step"], r["task"], r["verdict"]["speedup"]) for r in written] == [
        (0, first, 2.0),
        (0, second, 1.0),
        (4, first, 2.0),
    ]
    assert len(judge.asked) == 2  # (first, fast) once for both steps
    assert "then: python bench/heldout_paired.py" in capsys.readouterr().out


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert rescore.main([str(tmp_path)]) == 2
    assert "no " in capsys.readouterr().err
