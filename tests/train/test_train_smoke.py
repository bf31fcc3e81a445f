"""End to end with the real evaluator (cpp back end): `kevin train --preset smoke`, and a run whose
rewards come from compiling, checking and timing a real kernel. Builds C++ extensions, hence slow."""

from __future__ import annotations

import argparse
import json

import pytest
from train_helpers import tiny_config

from kevin.rl.episodes import read_episodes
from kevin.tasks import bundled_dir, load_bundled
from kevin.train.cli import register_commands
from kevin.train.loop import train

pytestmark = pytest.mark.slow


def kevin_train(*argv: str) -> int:
    top = argparse.ArgumentParser(prog="kevin")
    register_commands(top.add_subparsers())
    args = top.parse_args(["train", *argv])
    return args.run(args)


def test_smoke_preset_runs_end_to_end_and_resumes(tmp_path, capsys):
    run_dir = tmp_path / "smoke"
    cache = f"evaluator.cache_dir={tmp_path / 'cache'}"
    assert kevin_train("--preset", "smoke", "--run-dir", str(run_dir), "--set", cache) == 0
    out = capsys.readouterr().out
    assert "step 1/2 |" in out and "step 2/2 |" in out and "held-out correct" in out
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [1, 2]
    # a random tiny model writes no kernel: every turn is a format error, scored 0, no gradient
    assert rows[-1]["rollout/format_error_share"] == 1.0 and rows[-1]["learn/gradient_steps"] == 0
    assert rows[-1]["learn/logprob_diff_max"] < 1e-3  # the sampler and the learner agree
    assert len(read_episodes(run_dir)) == 2 * 2 * 2 * 2
    assert read_episodes(run_dir / "heldout.jsonl")
    for name in ("config.json", "curves.png", "tokenizer", "tensorboard", "checkpoints/step_000002"):
        assert (run_dir / name).exists(), name
    assert (
        kevin_train(
            "--preset",
            "smoke",
            "--run-dir",
            str(run_dir),
            "--resume",
            "--set",
            cache,
            "--set",
            "loop.steps=3",
        )
        == 0
    )
    assert "step 3/3 |" in capsys.readouterr().out
    assert [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()] == [
        1,
        2,
        3,
    ]


def test_rewards_from_a_real_kernel_reach_the_learner(tmp_path):
    task = next(t for t in load_bundled() if t.id == "B_01")
    honest = (bundled_dir().parent / "cpp" / "01_gelu_tanh.py").read_text()
    answers = [f"<think>One fused loop.</think>\n```python\n{honest}```\nFused the GELU chain.", "no code"]
    count = {"n": 0}

    class Alternating:
        def generate(self, prompts, sampling):
            outputs = [answers[(count["n"] + i) % 2] for i in range(len(prompts))]
            count["n"] += len(prompts)
            return outputs

    config = tiny_config(
        rollout={"tasks_per_step": 1, "trajectories": 4, "turns": 1},
        evaluator={"cache_dir": str(tmp_path / "cache"), "max_in_flight": 2},
        loop={"steps": 1},
    )
    result = train(
        config,
        tmp_path / "run",
        tasks=[task],
        policy_factory=lambda run: Alternating(),
        out=lambda line: None,
    )
    (metrics,) = result.history
    rows = read_episodes(tmp_path / "run")
    passed = [row for row in rows if row["verdict"]["stage"] == "ok"]
    assert len(passed) == 2, [row["verdict"]["error"] + row["verdict"]["log"] for row in rows]
    for row in passed:
        assert row["score"] == pytest.approx(0.3 + row["verdict"]["speedup"]), row["verdict"]
        assert row["candidate"] == honest.rstrip("\n")  # the kernel, re-verifiable with `kevin eval`
    assert metrics["evaluator/candidates"] == 2 and metrics["evaluator/evaluated"] == 1  # built once
    assert metrics["rollout/samples_nonzero"] == 4 and metrics["learn/gradient_steps"] == 2
    assert metrics["learn/grad_norm"] > 0
