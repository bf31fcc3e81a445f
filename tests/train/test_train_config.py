"""Config: presets, dotted overrides, JSON, and the `kevin train` handler (kevin.train.config,
.presets, .overrides, .cli)."""

from __future__ import annotations

import argparse
import dataclasses
import json

import pytest

from kevin.errors import UsageError
from kevin.train import config as cfg
from kevin.train import overrides, presets
from kevin.train.cli import register_commands


def test_every_preset_validates_and_paper_is_the_recipe():
    for name in presets.PRESETS:
        assert presets.preset(name).preset == name
    paper = presets.paper()
    rollout, reward, loss, optim = paper.rollout, paper.reward, paper.loss, paper.optim
    assert (rollout.tasks_per_step, rollout.trajectories, rollout.turns) == (8, 16, 4)
    assert (reward.gamma, reward.aggregation, reward.baseline) == (0.4, "sum", "mean")
    assert (loss.clip_low, loss.clip_high, loss.kl_coef, loss.normalization) == (0.2, 0.28, 0.0, "constant")
    assert (optim.lr, optim.warmup_fraction, optim.grad_clip, optim.gradient_steps) == (2e-6, 0.03, 0.05, 2)
    assert [rollout.completion_tokens_at(s) for s in (1, 29, 30, 100)] == [16384, 16384, 22528, 22528]
    assert paper.rollout.temperature == 0.9 and paper.loop.levels == (1, 2)
    smoke = presets.smoke()
    assert smoke.model.is_tiny and smoke.rollout.backend == "cpp" and smoke.loop.steps == 2
    # s20: the h200 run at 1e-4 collapsed (ratios 1e-6..23 on the off-policy step); s22 and s23 ran
    # stable at 3e-5, and s23's batches replayed at 6e-5 cross the drift warning
    # (bench/results/rl_drift_s23). A faster rate must not come back unnoticed.
    assert presets.h200().optim.lr == 3e-5
    with pytest.raises(UsageError, match="unknown preset"):
        presets.preset("huge")


def test_overrides_are_parsed_into_the_field_types():
    config = overrides.apply_overrides(
        presets.smoke(),
        [
            "loss.clip_high=0.3",
            "rollout.turns=3",
            "loop.tensorboard=false",
            "loop.levels=1,2",
            "rollout.max_prompt_tokens=none",
            "rollout.max_prompt_tokens=4_096",
            "model.name_or_path=/models/x",
            "rollout.stop_strings=</answer>",
        ],
    )
    assert config.loss.clip_high == 0.3 and config.rollout.turns == 3 and config.loop.tensorboard is False
    assert config.loop.levels == (1, 2) and config.rollout.max_prompt_tokens == 4096
    assert config.model.name_or_path == "/models/x" and config.rollout.stop_strings == ("</answer>",)
    assert presets.smoke().loss.clip_high == 0.28  # presets are fresh values, never mutated


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ("clip_high=0.3", "section.field=value"),
        ("losses.clip_high=0.3", "unknown section 'losses'"),
        ("loss.clip_hi=0.3", "no field 'clip_hi'"),
        ("rollout.turns=three", "expected int"),
        ("loop.plot=maybe", "expected bool"),
        ("loss.clip_low=1.5", "loss.clip_low must be in"),
        ("rollout.policy=vllm", "rollout.policy must be one of hf, http"),
    ],
)
def test_bad_overrides_fail_in_one_line(assignment, message):
    with pytest.raises(UsageError, match=message) as error:
        overrides.apply_override(presets.smoke(), assignment)
    assert "\n" not in str(error.value)


def test_cross_section_rules():
    with pytest.raises(UsageError, match="stop_after_steps exceeds"):
        overrides.apply_overrides(presets.smoke(), ["loop.stop_after_steps=5"])
    with pytest.raises(UsageError, match="tiny_heads must divide"):
        cfg.ModelConfig(tiny_hidden_size=30, tiny_heads=4)


def test_the_resolved_config_round_trips_through_json(tmp_path):
    config = overrides.apply_overrides(presets.paper(), ["loop.levels=2", "rollout.stop_strings=a,b"])
    path = overrides.save_config(config, tmp_path)
    assert json.loads(path.read_text())["loss"]["clip_high"] == 0.28
    assert overrides.load_config(tmp_path) == config
    later = dataclasses.replace(config, loop=dataclasses.replace(config.loop, steps=200, stop_after_steps=5))
    assert overrides.config_differences(config, later) == []
    moved = overrides.apply_override(later, "evaluator.cache_dir=/elsewhere/kevin-cache")  # a new machine
    assert overrides.config_differences(config, moved) == []
    other = overrides.apply_override(config, "reward.gamma=0.8")
    assert overrides.config_differences(config, other) == ["reward.gamma"]
    with pytest.raises(UsageError, match="not found"):
        overrides.load_config(tmp_path / "nothing")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="kevin")
    register_commands(top.add_subparsers())
    return top


def test_the_train_command_prints_the_resolved_config(capsys):
    args = parser().parse_args(
        ["train", "--preset", "paper", "--set", "loss.clip_high=0.3", "--print-config"]
    )
    assert args.run(args) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["loss"]["clip_high"] == 0.3 and printed["preset"] == "paper"


def test_the_train_command_rejects_bad_input():
    args = parser().parse_args(["train", "--preset", "smoke", "--set", "loss.clip_high=x"])
    with pytest.raises(UsageError, match="loss.clip_high"):
        args.run(args)
    args = parser().parse_args(["train", "--preset", "smoke", "--resume"])
    with pytest.raises(UsageError, match="--resume needs --run-dir"):
        args.run(args)


def test_kevin_train_exit_codes(capsys):
    from kevin import cli

    assert "kevin.train.cli" in cli.COMMAND_MODULES
    assert cli.main(["train", "--preset", "smoke", "--print-config"]) == 0
    assert cli.main(["train", "--preset", "smoke", "--set", "loop.steps=0"]) == 2
    assert "loop.steps must be at least 1" in capsys.readouterr().err


def test_the_split_leaves_out_what_a_validation_report_flags(tmp_path):
    """Issue #18: degenerate and nondeterministic problems are trained and held out on neither side."""
    from kevin.tasks import load_bundled
    from kevin.train.launch import load_split

    tasks = load_bundled(size="small")
    report = tmp_path / "hygiene.json"
    report.write_text(json.dumps({"excluded": [{"id": tasks[0].id, "status": "degenerate"}]}))
    config = cfg.TrainConfig()
    config = dataclasses.replace(
        config, loop=dataclasses.replace(config.loop, split="seeded", exclude=str(report))
    )
    train, held_out = load_split(config, tasks)
    kept = {t.id for t in train} | {t.id for t in held_out}
    assert kept == {t.id for t in tasks} - {tasks[0].id} and held_out
    config = dataclasses.replace(config, loop=dataclasses.replace(config.loop, exclude=""))
    train, held_out = load_split(config, tasks)
    assert len(train) + len(held_out) == len(tasks)


def test_the_local_evaluator_keeps_a_spare_worker_for_every_candidate_of_a_step(monkeypatch, tmp_path):
    """Session 23 (H200): 12 in flight, 16 candidates a step and 12 spares; the 4 candidates past the
    first 12 took spares started at that step's first takes, still booting, and waited 15-27 s."""
    from kevin.evaluator.service import EvaluationService
    from kevin.train.config import EvaluatorConfig
    from kevin.train.rollout import build_evaluator

    monkeypatch.setattr(EvaluationService, "prepare", lambda self: None)  # no toolchain build here
    spares = []
    for config, step_candidates in (
        (EvaluatorConfig(max_in_flight=12), 16),
        (EvaluatorConfig(max_in_flight=12), 4),
        (EvaluatorConfig(max_in_flight=12, spare_workers=3), 16),
    ):
        service = build_evaluator(
            dataclasses.replace(config, cache_dir=str(tmp_path)), "cpp", step_candidates
        )
        spares.append(service.spares.max_idle)
        service.close()
    assert spares == [16, 12, 3]
    with pytest.raises(UsageError, match="spare_workers must be >= 0"):
        EvaluatorConfig(spare_workers=-1)
