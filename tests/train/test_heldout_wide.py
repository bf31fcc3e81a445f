"""bench/heldout_wide.py: a run's start and a checkpoint sampled again, wider, from the run's own weights and seed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from train_helpers import FakeEvaluator, RewritingPolicy, load_bench, tasks, tiny_config

from kevin.errors import UsageError
from kevin.rl.episodes import read_episodes
from kevin.train.launch import default_policy
from kevin.train.loop import train

wide = load_bench("heldout_wide_bench", "heldout_wide.py")

SHAPE = {"steps": 2, "eval_every": 2, "eval_at_start": True, "split": "seeded", "eval_trajectories": 2, "eval_turns": 1}


def factories():
    return {
        "tasks": tasks(10),
        "policy_factory": lambda r: RewritingPolicy(default_policy(r)),  # real sampling from the weights
        "evaluator_factory": lambda r: FakeEvaluator(),
    }


def samples(path: Path) -> dict[int, list[tuple[str, int, str]]]:
    by_step: dict[int, list[tuple[str, int, str]]] = {}
    for row in read_episodes(path):
        by_step.setdefault(row["step"], []).append((row["task"], row["trajectory"], row["completion"]))
    return by_step


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A run that learns fast (lr 0.05) and evaluates its held-out tasks at steps 0 and 2."""
    root = tmp_path_factory.mktemp("wide")
    config = tiny_config(loop=SHAPE, optim={"lr": 5e-2}, rollout={"tasks_per_step": 2})
    train(config, root / "run", out=lambda line: None, **factories())
    return root / "run"


def test_the_same_width_reproduces_the_runs_own_held_out_samples_at_both_steps(trained, tmp_path):
    """Step 0 from the start's weights and step 2 from its checkpoint, with the run's sampler and seed:
    the very completions the run wrote (so the weights and the random numbers are the run's)."""
    own = samples(trained / "heldout.jsonl")
    assert sorted(own) == [0, 2] and own[0] != own[2]  # the policy moved
    lines: list[str] = []
    path = wide.evaluate_wide(trained, tmp_path / "same", [0, 2], 2, say=lines.append, **factories())
    assert samples(path) == own
    assert any(line.startswith("heldout_wide: step 2:") for line in lines)


def test_more_samples_a_task_and_the_paired_comparison_reads_them(trained, tmp_path):
    path = wide.evaluate_wide(trained, tmp_path / "wider", [0, 2], 6, say=lambda line: None, **factories())
    got = samples(path)
    heldout = {task for task, _, _ in samples(trained / "heldout.jsonl")[0]}
    for step in (0, 2):
        assert sorted({trajectory for _, trajectory, _ in got[step]}) == list(range(6))
        assert {task for task, _, _ in got[step]} == heldout
    import heldout_paired

    assert heldout_paired.main([str(path), "--resamples", "200", "--json", str(tmp_path / "p.json")]) == 0
    (record,) = json.loads((tmp_path / "p.json").read_text())
    assert (record["base"], record["step"], record["pairs"]) == (0, 2, 6 * len(heldout))


def test_bad_input_is_a_usage_error(trained, tmp_path, capsys):
    with pytest.raises(UsageError, match="no checkpoint of step 7"):
        wide.evaluate_wide(trained, tmp_path / "a", [0, 7], 2, **factories())
    assert not (tmp_path / "a").exists()  # nothing started
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    with pytest.raises(UsageError, match="not empty"):
        wide.evaluate_wide(trained, tmp_path / "full", [0, 2], 2, **factories())
    with pytest.raises(UsageError, match="at least 1"):
        wide.evaluate_wide(trained, tmp_path / "b", [0], 0, **factories())
    assert wide.chosen_steps(trained, None) == [0, 2]
    assert wide.main([str(tmp_path), "--out", str(tmp_path / "c")]) == 2
    assert "config.json" in capsys.readouterr().err
    assert wide.main([str(trained), "--out", str(tmp_path / "d"), "--steps", "0,x"]) == 2
    assert "--steps" in capsys.readouterr().err
