"""The paper's metrics on hand-computed examples, estimators against brute force, the CLI."""

from __future__ import annotations

import itertools
import json
import math
import random
import subprocess
import sys

import pytest

from kevin.cli import main
from kevin.evaluator.result import EvalResult
from kevin.rl.metrics import best_at_k, compute_metrics, default_ks, group_rows, pass_at_k, trajectory_result

FAIL = None


def row(task: str, trajectory: int, turn: int, speedup: float | None, step: int = 0, **extra) -> dict:
    """An episode row: speedup None is a wrong kernel, a number a passed one."""
    if speedup is None:
        verdict = EvalResult(stage="correctness", compiled=True, blame="candidate")
    else:
        verdict = EvalResult(stage="ok", compiled=True, correct=True, speedup=speedup)
    score = 0.0 if speedup is None else 0.3 + speedup
    values = {
        "step": step,
        "task": task,
        "trajectory": trajectory,
        "turn": turn,
        "verdict": verdict.to_dict(),
    }
    return {**values, "score": score, "finish_reason": "stop", **extra}


# Task A, 4 trajectories x 2 turns; task B, 4 trajectories, only trajectory 0 passes (at exactly 1.0x).
TURNS = {
    ("A", 0): [FAIL, 2.0],
    ("A", 1): [0.5, 1.2],
    ("A", 2): [FAIL, FAIL],
    ("A", 3): [1.6, FAIL],
    ("B", 0): [FAIL, 1.0],
    ("B", 1): [FAIL, FAIL],
    ("B", 2): [FAIL, FAIL],
    ("B", 3): [FAIL, FAIL],
}
ROWS = [row(task, j, turn + 1, s) for (task, j), speedups in TURNS.items() for turn, s in enumerate(speedups)]


def test_pass_at_k_by_hand_and_brute_force():
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)  # 1 - C(3,2)/C(4,2) = 1 - 3/6
    assert pass_at_k(4, 0, 4) == 0.0 and pass_at_k(4, 3, 2) == 1.0 and pass_at_k(5, 5, 1) == 1.0
    for n in range(1, 9):
        for c in range(n + 1):
            outcomes = [True] * c + [False] * (n - c)
            for k in range(1, n + 1):
                subsets = list(itertools.combinations(outcomes, k))
                brute = sum(any(s) for s in subsets) / len(subsets)
                assert pass_at_k(n, c, k) == pytest.approx(brute, abs=1e-12), (n, c, k)
    with pytest.raises(ValueError):
        pass_at_k(4, 1, 5)


def test_best_at_k_against_brute_force():
    rng = random.Random(0)
    for n in range(1, 9):
        values = [rng.choice([0.0, 0.0, rng.uniform(0.2, 3.0)]) for _ in range(n)]
        for k in range(1, n + 1):
            subsets = list(itertools.combinations(values, k))
            brute = sum(max(s) for s in subsets) / len(subsets)
            assert best_at_k(values, k) == pytest.approx(brute, abs=1e-12)
    # by hand: [0, 1.2, 1.6, 2.0], k=2: (1.2 * 1 + 1.6 * 2 + 2.0 * 3) / 6 = 10.4 / 6
    assert best_at_k([2.0, 1.2, 0.0, 1.6], 2) == pytest.approx(10.4 / 6)
    assert best_at_k([2.0, 1.2, 0.0, 1.6], 1) == pytest.approx(1.2)  # the mean


def test_trajectory_correct_if_any_turn_and_best_correct_speedup():
    (a0, a1, a2, a3) = group_rows(ROWS)[(0, "A")]
    assert trajectory_result(a0) == (True, 2.0)
    assert trajectory_result(a1) == (True, 1.2)
    assert trajectory_result(a2) == (False, 0.0)
    assert trajectory_result(a3) == (True, 1.6)  # a later failure does not undo an earlier pass
    assert trajectory_result(a0, upto_turn=1) == (False, 0.0)


def test_metrics_by_hand():
    metrics = compute_metrics(ROWS, ks=[1, 2, 4])
    overall = metrics["overall"]
    assert metrics["turns"] == 2 and metrics["steps"] == [0]
    assert overall["tasks"] == 2 and overall["trajectories"] == 8
    # A: correct 3/4, speedups [2, 1.2, 0, 1.6]; B: correct 1/4, speedups [1, 0, 0, 0]
    expected = {
        "correct": (0.75 + 0.25) / 2,
        "speedup": (4.8 / 4 + 1.0 / 4) / 2,  # failures count 0
        "fast_0": 0.5,
        "fast_1": (3 / 4 + 0) / 2,  # B's 1.0x is not faster than 1x
        "fast_1.5": (2 / 4 + 0) / 2,
        "fast_2": 0.0,  # 2.0x is not faster than 2x
        "pass@1": 0.5,
        "pass@2": (1.0 + 0.5) / 2,
        "pass@4": 1.0,
        "best@1": 0.725,
        "best@2": (10.4 / 6 + 0.5) / 2,
        "best@4": (2.0 + 1.0) / 2,
        "fast_1@2": (1.0 + 0.0) / 2,
        "fast_1.5@2": ((1 - 1 / 6) + 0.0) / 2,  # A: 2 successes of 4 -> 1 - C(2,2)/C(4,2)
        "geomean": (2.0 * 1.2 * 1.6 * 1.0) ** 0.25,  # over all correct trajectories
        "geomean_best": math.sqrt(2.0 * 1.0),  # over each task's best
    }
    for name, value in expected.items():
        assert overall[name] == pytest.approx(value), name
    assert metrics["upto_turn"][-1] == {"turn": 2, **overall}


def test_metrics_by_turn():
    metrics = compute_metrics(ROWS, ks=[1, 4])
    first = metrics["upto_turn"][0]
    # first turn only: A speedups [0, 0.5, 0, 1.6]; B nothing
    assert first["turn"] == 1
    assert first["correct"] == pytest.approx((0.5 + 0) / 2)
    assert first["speedup"] == pytest.approx((2.1 / 4 + 0) / 2)
    assert first["pass@4"] == pytest.approx(0.5)
    assert first["fast_1"] == pytest.approx(0.125)
    assert first["geomean"] == pytest.approx(math.sqrt(0.5 * 1.6))
    assert first["geomean_best"] == pytest.approx(1.6)
    at_turn = metrics["at_turn"]
    assert [t["samples"] for t in at_turn] == [8, 8]
    assert [t["passed"] for t in at_turn] == [2 / 8, 3 / 8]
    assert at_turn[0]["score"] == pytest.approx((0.8 + 1.9) / 8)
    assert at_turn[1]["format_errors"] == 0.0 and at_turn[1]["infrastructure"] == 0


def test_nothing_correct_and_infrastructure_rows():
    ours = EvalResult(stage="runtime", blame="infrastructure").to_dict()
    rows = [row("C", 0, 1, FAIL), {**row("C", 1, 1, FAIL), "verdict": ours, "score": None}]
    metrics = compute_metrics(rows, ks=[2])
    assert metrics["overall"]["correct"] == 0.0 and metrics["overall"]["geomean"] is None
    assert metrics["at_turn"][0]["infrastructure"] == 1
    assert metrics["at_turn"][0]["score"] == 0.0  # only the scored sample


def test_steps_are_separate_instances_and_k_is_checked():
    rows = [row("A", 0, 1, 1.5, step=0), row("A", 0, 1, FAIL, step=1)]
    metrics = compute_metrics(rows)
    assert metrics["steps"] == [0, 1] and metrics["overall"]["tasks"] == 2
    assert metrics["overall"]["correct"] == 0.5
    with pytest.raises(ValueError, match="k=2 exceeds the 1 trajectories"):
        compute_metrics(rows, ks=[2])
    assert default_ks(group_rows(ROWS)) == [1, 2, 4]
    assert default_ks(group_rows([row("A", j, 1, FAIL) for j in range(16)])) == [1, 2, 4, 8, 16]
    assert default_ks(group_rows([row("A", j, 1, FAIL) for j in range(6)])) == [1, 2, 4, 6]


def test_cli_prints_table_and_json(tmp_path, capsys):
    path = tmp_path / "episodes.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    assert main(["metrics", str(path), "--k", "1", "4"]) == 0
    table = capsys.readouterr().out
    assert "pass@4" in table and "best@4" in table and "fast_1.5" in table and "geomean" in table
    assert main(["metrics", str(tmp_path), "--json"]) == 0  # a run directory holding episodes.jsonl
    data = json.loads(capsys.readouterr().out)
    assert data["ks"] == [1, 2, 4] and data["overall"]["pass@1"] == pytest.approx(0.5)
    assert main(["metrics", str(path), "--step", "0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["overall"]["trajectories"] == 8


def test_cli_bad_input_is_one_line_exit_2(tmp_path, capsys):
    assert main(["metrics", str(tmp_path / "missing.jsonl")]) == 2
    assert "not found" in capsys.readouterr().err
    path = tmp_path / "episodes.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n")
    assert main(["metrics", str(path), "--k", "3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "k=3 exceeds" in err
    path.write_text('{"hello": 1}\n')
    assert main(["metrics", str(path)]) == 2
    assert "is this an episodes JSONL file" in capsys.readouterr().err
    assert main(["metrics", str(path), "--step", "3"]) == 2  # nothing left: no rows
    assert "no episode rows" in capsys.readouterr().err


def test_metrics_module_does_not_import_torch():
    code = "import sys, kevin.rl.metrics; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
