"""The training loop with scripted policies and fake evaluators: fast, no compiler (kevin.train.loop)."""

from __future__ import annotations

import json
import shutil
import time

import pytest
import torch
from train_helpers import (
    CyclingPolicy,
    FakeEvaluator,
    RewritingPolicy,
    completion,
    tasks,
    tiny_config,
    verdict,
)

from kevin.errors import UsageError
from kevin.evaluator.result import EvalResult
from kevin.rl.env import EpisodeConfig, Generation, Sampling, ThreadPoolEvaluator, run_episodes
from kevin.rl.episodes import read_episodes
from kevin.train.config import MonitorConfig
from kevin.train.launch import default_policy
from kevin.train.loop import train
from kevin.train.monitors import CollapseMonitor
from kevin.train.rollout import DedupEvaluator, TaskSampler, TimedPolicy


def quiet(line: str) -> None:
    pass


def run(tmp_path, config, name="run", **kwargs):
    kwargs.setdefault("tasks", tasks())
    kwargs.setdefault("policy_factory", lambda r: CyclingPolicy())
    kwargs.setdefault("evaluator_factory", lambda r: FakeEvaluator())
    return train(config, tmp_path / name, out=kwargs.pop("out", quiet), **kwargs)


def test_a_run_learns_logs_records_and_checkpoints(tmp_path):
    lines = []
    config = tiny_config(
        loop={"steps": 2, "eval_every": 2, "eval_at_start": True, "split": "seeded", "plot": True}
    )
    result = run(tmp_path, config, tasks=tasks(6), out=lines.append)
    run_dir = tmp_path / "run"
    assert result.last_step == 2 and result.stopped_by is None
    step_lines = [line for line in lines if line.startswith("step ")]
    assert [line.split(" ")[1] for line in step_lines] == ["0", "1/2", "2/2"]  # one line per step
    assert "gen " in step_lines[-1] and "learn " in step_lines[-1] and "held-out correct" in step_lines[-1]
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [0, 1, 2]
    last = rows[-1]
    assert last["learn/gradient_steps"] == 2 and last["learn/grad_norm"] > 0
    for key in (
        "time/generate_s",
        "time/evaluate_s",
        "time/learn_s",
        "rollout/reward_turn_1",
        "heldout/correct",
    ):
        assert key in last, key
    episodes = read_episodes(run_dir)
    assert {row["step"] for row in episodes} == {1, 2} and len(episodes) == 2 * 2 * 2 * 2
    passed = [row for row in episodes if row["verdict"]["correct"]]
    assert passed and all(row["score"] == pytest.approx(0.3 + row["verdict"]["speedup"]) for row in passed)
    assert {row["step"] for row in read_episodes(run_dir / "heldout.jsonl")} == {0, 2}
    assert json.loads((run_dir / "config.json").read_text())["preset"] == "test"
    assert (run_dir / "checkpoints" / "latest").read_text().strip() == "step_000002"
    assert (run_dir / "curves.png").stat().st_size > 10_000


def test_infrastructure_failures_are_dropped_and_zero_spread_gives_no_gradient(tmp_path):
    def judge(task, source):
        if task.id == "L1_1":
            raise RuntimeError("worker died")  # our side: no score, no sample
        return EvalResult(stage="ok", correct=True, speedup=1.0, task_id=task.id)  # all equal: no spread

    initial = {}

    def policy(r):
        initial.update({k: v.detach().clone() for k, v in r.model.named_parameters()})
        return CyclingPolicy()

    # one turn per trajectory: with equal scores every return is equal too (no later turns to add)
    config = tiny_config(loop={"steps": 1}, rollout={"turns": 1})
    result = run(
        tmp_path,
        config,
        tasks=tasks(2),
        policy_factory=policy,
        evaluator_factory=lambda r: FakeEvaluator(judge),
    )
    (metrics,) = result.history
    episodes = read_episodes(tmp_path / "run")
    infra = [row for row in episodes if row["task"] == "L1_1"]
    assert infra and all(row["score"] is None and not row["trainable"] for row in infra)
    assert metrics["rollout/infrastructure"] == len(infra)
    assert metrics["rollout/samples"] == len(episodes) - len(infra)
    assert metrics["rollout/samples_nonzero"] == 0 and metrics["learn/gradient_steps"] == 0
    checkpoint = torch.load(tmp_path / "run" / "checkpoints" / "step_000001" / "model.pt")
    assert all(torch.equal(checkpoint[k], v) for k, v in initial.items())


def test_identical_candidates_are_evaluated_once_per_step():
    inner = FakeEvaluator()
    dedup = DedupEvaluator(inner)
    task_a, task_b = tasks(2)
    futures = [
        dedup.submit(task_a, completion(0)),
        dedup.submit(task_a, completion(0)),
        dedup.submit(task_b, completion(0)),
        dedup.submit(task_a, completion(2)),
    ]
    assert futures[0] is futures[1] and inner.calls == 3
    assert dedup.new_step() == {"candidates": 4, "evaluated": 3}
    dedup.submit(task_a, completion(0))
    assert inner.calls == 4  # a new step evaluates again


def test_verdicts_are_reused_across_steps_unless_our_infrastructure_failed():
    import dataclasses

    task_a, task_b = tasks(2)

    def judge(task, source):
        result = verdict(task, source)
        return dataclasses.replace(result, blame="infrastructure") if task.id == task_b.id else result

    inner = FakeEvaluator(judge)
    dedup = DedupEvaluator(inner, reuse=True)
    first = dedup.submit(task_a, completion(0))
    dedup.submit(task_b, completion(0))
    assert dedup.new_step() == {"candidates": 2, "evaluated": 2}
    assert dedup.submit(task_a, completion(0)) is first  # the earlier step's verdict
    dedup.submit(task_b, completion(0))  # our failure: evaluated again
    dedup.submit(task_a, completion(1))
    assert inner.calls == 4
    assert dedup.new_step() == {"candidates": 3, "evaluated": 2}


class SlowStreamingPolicy:
    """Streams `completion(tag)` for prompt i (tags given per prompt), one every `delay_s`, last
    prompt first."""

    def __init__(self, tags: tuple[int, ...], delay_s: float) -> None:
        self.tags = tags
        self.delay_s = delay_s

    def generate_stream(self, prompts, sampling):
        for index in reversed(range(len(prompts))):
            time.sleep(self.delay_s)
            yield index, completion(self.tags[index])

    def generate(self, prompts, sampling):
        raise AssertionError("the episode streams from a policy that can")


def test_streamed_rollouts_split_generation_from_the_evaluation_it_does_not_hide():
    # four completions 0.3 s apart, last prompt first: 3 at 0.3 s, 2 (3's twin) at 0.6 s, 1 at 0.9 s,
    # 0 (1's twin) at 1.2 s. Each evaluation takes 0.9 s from its submission, so the last verdict (1's)
    # comes at 1.8 s: generation 1.2 s, evaluation not hidden by it 0.6 s (0.9 s without streaming)
    def slow_verdict(task, source):
        time.sleep(0.9)
        return verdict(task, source)

    timed = TimedPolicy(SlowStreamingPolicy(tags=(0, 0, 2, 2), delay_s=0.3))
    config = EpisodeConfig(trajectories=2, turns=1, backend="cpp")
    with ThreadPoolEvaluator(slow_verdict, max_workers=4) as inner:
        dedup = DedupEvaluator(inner)
        started = time.monotonic()
        trajectories = run_episodes(tasks(2), timed, dedup, config)
        rollout_s = time.monotonic() - started
    assert timed.calls == 1 and 1.2 <= timed.seconds < 1.45
    assert 0.55 <= rollout_s - timed.seconds < 0.8
    # identical candidates of a task were evaluated once, streamed or not
    assert dedup.new_step() == {"candidates": 4, "evaluated": 2}
    assert [t.turns[0].result.speedup for t in trajectories] == pytest.approx([1.0, 1.0, 1.2, 1.2])


def test_timed_policy_times_a_policy_without_streaming_too():
    timed = TimedPolicy(CyclingPolicy())
    assert [g.text for g in timed.generate(["a", "b"], Sampling())] == [completion(0), completion(1)]
    streamed = list(timed.generate_stream(["a", "b"], Sampling()))
    assert streamed == [(0, Generation(completion(2))), (1, Generation(completion(3)))]
    assert timed.calls == 2 and timed.seconds > 0


def test_tasks_are_drawn_evenly_across_levels_and_resume_draws_the_same():
    pool = tasks(8, levels=(1, 2, 2, 2))  # 2 tasks at level 1, 6 at level 2
    sampler = TaskSampler(pool, seed=0)
    draws = [sampler.sample(2) for _ in range(6)]
    for draw in draws:
        assert sorted(t.level for t in draw) == [1, 2] and len({t.id for t in draw}) == 2
    level_two = [t.id for draw in draws for t in draw if t.level == 2]
    assert sorted(level_two) == sorted(t.id for t in pool if t.level == 2)  # one full pass first
    state = sampler.state()
    ahead = [sampler.sample(3) for _ in range(3)]
    restored = TaskSampler(pool, seed=99)
    restored.load_state(state)
    assert [restored.sample(3) for _ in range(3)] == ahead
    with pytest.raises(ValueError, match="only 8 tasks"):
        sampler.sample(9)


def test_collapse_rules_warn_then_stop_after_patience():
    monitor = CollapseMonitor(MonitorConfig(truncated_warn=0.2, truncated_stop=0.5, patience_steps=2))
    assert [a.stop for a in monitor.check({"truncated_share": 0.3})] == [False]
    assert [a.stop for a in monitor.check({"truncated_share": 0.6})] == [False]  # streak 1 of 2
    assert monitor.check({"truncated_share": 0.1}) == []  # streak broken
    monitor.check({"truncated_share": 0.6})
    (alarm,) = monitor.check({"truncated_share": 0.7})
    assert alarm.stop and "truncated_share" in alarm.describe()
    opener = CollapseMonitor(MonitorConfig(expected_opener="Okay", not_opener_warn=0.1))
    assert [a.metric for a in opener.check({"not_opener_share": 0.5})] == ["not_opener_share"]


def test_nan_grad_norms_and_dropped_updates_trip_the_rules():
    # s12: a NaN gradient norm compared false with every threshold, so no rule could see it.
    norms = CollapseMonitor(MonitorConfig(grad_norm_warn=10.0, grad_norm_stop=100.0, patience_steps=2))
    assert [a.stop for a in norms.check({"grad_norm": float("nan")})] == [False]
    assert [a.stop for a in norms.check({"grad_norm": float("inf")})] == [True]
    dropped = CollapseMonitor(MonitorConfig(patience_steps=3))
    assert dropped.check({"nonfinite_skipped": 0.0}) == []
    assert [a.stop for a in dropped.check({"nonfinite_skipped": 1.0})] == [False]  # warns at once
    dropped.check({"nonfinite_skipped": 2.0})
    (alarm,) = dropped.check({"nonfinite_skipped": 1.0})
    assert alarm.stop and "nonfinite_skipped" in alarm.describe()
    relaxed = CollapseMonitor(MonitorConfig(nonfinite_stop=False, patience_steps=1))
    assert [a.stop for a in relaxed.check({"nonfinite_skipped": 1.0})] == [False]


def test_drift_and_format_errors_warn_by_default_and_stop_when_asked():
    # s20's collapse: format errors 6-12% and ratios of 0.002..23 for steps before held-out fell.
    defaults = CollapseMonitor(MonitorConfig())
    assert defaults.check({"drift": 0.001, "drift_max": 1.4, "format_error_share": 0.05}) == []
    step_13 = {"drift": 0.0068, "drift_max": 13.5, "format_error_share": 0.125}
    assert sorted(a.metric for a in defaults.check(step_13)) == ["drift", "drift_max", "format_error_share"]
    assert [a.stop for a in defaults.check({"drift": float("nan")})] == [False]
    strict = CollapseMonitor(MonitorConfig(drift_stop=0.1, format_error_stop=0.3, patience_steps=2))
    assert [a.stop for a in strict.check({"drift": 0.5})] == [False]
    (alarm,) = strict.check({"drift": 0.5})
    assert alarm.stop and "drift" in alarm.describe()
    strict.check({"format_error_share": 0.4})
    (alarm,) = strict.check({"format_error_share": 0.4})
    assert alarm.stop and "format_error_share" in alarm.describe()
    off = CollapseMonitor(MonitorConfig(drift_warn=None, drift_max_warn=None))
    assert off.check({"drift": 5.0, "drift_max": float("inf")}) == []
    strict_max = CollapseMonitor(MonitorConfig(drift_max_stop=5.0, patience_steps=1))
    (alarm,) = strict_max.check({"drift_max": float("inf")})  # a ratio of 0: log is infinite
    assert alarm.stop and "drift_max" in alarm.describe()
    with pytest.raises(UsageError, match="share"):
        MonitorConfig(format_error_warn=1.5)
    with pytest.raises(UsageError, match="drift"):
        MonitorConfig(drift_stop=-1.0)


def test_a_collapsing_response_length_warns_against_the_first_step_and_the_reference_is_kept():
    monitor = CollapseMonitor(MonitorConfig(length_drop_stop=0.8, patience_steps=1))
    assert monitor.check({"completion_tokens": 600.0}) == []  # the reference
    assert monitor.check({"completion_tokens": 900.0}) == []  # growth: the truncated share's job
    assert monitor.check({"completion_tokens": 320.0}) == []  # 47% lost
    (alarm,) = monitor.check({"completion_tokens": 240.0})  # 60% lost
    assert not alarm.stop and "length_drop" in alarm.describe()
    resumed = CollapseMonitor(MonitorConfig(length_drop_stop=0.8, patience_steps=1))
    resumed.load_state(monitor.state())
    (alarm,) = resumed.check({"completion_tokens": 60.0})  # 90% of the first step's 600 lost
    assert alarm.stop
    assert CollapseMonitor(MonitorConfig(length_drop_warn=None)).check({"completion_tokens": 1.0}) == []


def test_a_collapse_rule_stops_the_run_with_a_checkpoint(tmp_path):
    config = tiny_config(loop={"steps": 5}, monitor={"truncated_stop": 0.5, "patience_steps": 1})
    policy = lambda r: RewritingPolicy(default_policy(r))  # noqa: E731  real sampling, cut at 12 tokens
    result = run(tmp_path, config, policy_factory=policy)
    assert result.last_step == 1 and "truncated_share" in result.stopped_by
    assert (tmp_path / "run" / "checkpoints" / "step_000001").is_dir()


def read_rows(path):
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [
        {k: v for k, v in row.items() if not k.startswith("time/") and k != "learn/learn_s"} for row in rows
    ]


def test_stop_and_resume_matches_an_uninterrupted_run_bit_for_bit(tmp_path):
    shape = {"steps": 3, "checkpoint_every": 1, "eval_every": 2, "split": "seeded"}
    one_task = {"tasks_per_step": 1}
    config = tiny_config(loop=shape, optim={"gradient_steps": 2}, rollout=one_task)
    common = {
        "tasks": tasks(6),
        "policy_factory": lambda r: RewritingPolicy(default_policy(r)),  # real sampling: RNG matters
        "evaluator_factory": lambda r: FakeEvaluator(verdict),
    }
    whole = run(tmp_path, config, "whole", **common)
    interrupted = tiny_config(
        loop={**shape, "stop_after_steps": 2}, optim={"gradient_steps": 2}, rollout=one_task
    )
    assert run(tmp_path, interrupted, "parts", **common).last_step == 2
    # as if the launch died after step 2 but before its checkpoint: resume from step 1, and the rows
    # step 2 already wrote must not appear twice
    (tmp_path / "parts" / "checkpoints" / "latest").write_text("step_000001\n")
    assert run(tmp_path, config, "parts", resume=True, **common).last_step == 3
    assert sum(h.get("learn/gradient_steps", 0) for h in whole.history) >= 4
    final = {name: tmp_path / name / "checkpoints" / "step_000003" for name in ("whole", "parts")}
    for part in ("model.pt", "optimizer.pt"):
        a = torch.load(final["whole"] / part, weights_only=False)
        b = torch.load(final["parts"] / part, weights_only=False)
        assert_same(a, b)
    assert read_episodes(tmp_path / "whole") == read_episodes(tmp_path / "parts")
    assert read_episodes(tmp_path / "whole" / "heldout.jsonl") == read_episodes(
        tmp_path / "parts" / "heldout.jsonl"
    )
    assert read_rows(tmp_path / "whole" / "metrics.jsonl") == read_rows(tmp_path / "parts" / "metrics.jsonl")


def test_the_start_evaluation_is_checkpointed_before_the_first_step(tmp_path):
    # A launch lost before its first checkpoint (a device machine given back between calls) must
    # not pay the start's held-out evaluation again: step 0 is saved as soon as it is evaluated.
    shape = {"steps": 1, "checkpoint_every": 100, "keep_checkpoints": 3, "eval_every": 1, "eval_at_start": True}
    config = tiny_config(loop={**shape, "split": "seeded"}, rollout={"tasks_per_step": 1})
    common = {"tasks": tasks(6), "evaluator_factory": lambda r: FakeEvaluator(verdict)}
    assert run(tmp_path, config, "run", **common).last_step == 1
    saved = sorted(p.name for p in (tmp_path / "run" / "checkpoints").glob("step_*"))
    assert saved == ["step_000000", "step_000001"]
    # without a start evaluation nothing is saved before step 1
    quiet = tiny_config(loop={**shape, "eval_at_start": False, "split": "seeded"}, rollout={"tasks_per_step": 1})
    assert run(tmp_path, quiet, "quiet", **common).last_step == 1
    assert sorted(p.name for p in (tmp_path / "quiet" / "checkpoints").glob("step_*")) == ["step_000001"]


def test_a_slim_checkpoint_resumes_with_bf16_weights_and_fresh_moments(tmp_path, caplog):
    # What crosses between device sessions (bench/learning_carry.py): bf16 weights, no optimizer.pt.
    from kevin.train.checkpoint import slim_checkpoint

    shape = {"steps": 3, "checkpoint_every": 1, "split": "seeded"}
    common = {
        "tasks": tasks(6),
        "policy_factory": lambda r: RewritingPolicy(default_policy(r)),
        "evaluator_factory": lambda r: FakeEvaluator(verdict),
    }
    # W = ceil(0.5 x 3 steps x 2 gradient steps) = 3: the first launch's optimiser steps 0-3 ramp
    # 1/3, 2/3, 1, 1; the resumed step's 4 and 5 ramp again, 1/3 and 2/3 of the peak.
    optim = {"warmup_fraction": 0.5, "gradient_steps": 2}
    first = tiny_config(loop={**shape, "stop_after_steps": 2}, rollout={"tasks_per_step": 1}, optim=optim)
    assert run(tmp_path, first, "run", **common).last_step == 2
    full = tmp_path / "run" / "checkpoints" / "step_000002"
    slim = slim_checkpoint(full, tmp_path / "slim" / "step_000002")
    assert not (slim / "optimizer.pt").exists()
    weights = torch.load(slim / "model.pt", weights_only=True)
    assert all(v.dtype == torch.bfloat16 for v in weights.values() if v.is_floating_point())
    shutil.rmtree(full)
    shutil.copytree(slim, full)
    caplog.set_level("WARNING")
    again = tiny_config(loop=shape, rollout={"tasks_per_step": 1}, optim=optim)
    resumed = run(tmp_path, again, "run", resume=True, **common)
    assert resumed.last_step == 3 and [row["step"] for row in resumed.history] == [3]
    assert "AdamW's moments start from zero" in caplog.text
    assert resumed.history[0]["learn/lr"] == pytest.approx(2 / 3 * again.optim.lr)  # not the peak
    state = torch.load(tmp_path / "run" / "checkpoints" / "step_000003" / "state.pt", weights_only=False)
    assert state["learner"]["rewarm_from"] == 4 and state["learner"]["optimizer_steps"] == 6
    final = torch.load(tmp_path / "run" / "checkpoints" / "step_000003" / "model.pt", weights_only=True)
    assert all(v.dtype == torch.float32 for v in final.values() if v.is_floating_point())  # fp32 master again


def assert_same(a, b, where="state"):
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            assert_same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def test_resume_refuses_a_changed_config_and_new_runs_refuse_an_old_directory(tmp_path):
    config = tiny_config(loop={"steps": 1})
    run(tmp_path, config)
    with pytest.raises(UsageError, match="already holds a run"):
        run(tmp_path, config)
    changed = tiny_config(loop={"steps": 1}, loss={"clip_high": 0.3})
    with pytest.raises(UsageError, match="loss.clip_high"):
        run(tmp_path, changed, resume=True)
    with pytest.raises(UsageError, match="no checkpoint|config.json"):
        run(tmp_path, config, "empty", resume=True)


def test_heldout_sampling_draws_the_same_numbers_every_time_and_leaves_training_alone(tmp_path):
    """Common random numbers: with lr 1e-30 the policy does not change, so every held-out evaluation writes
    the same completions; and a run's training samples are the same with or without evaluations."""
    shape = {"steps": 3, "eval_every": 1, "eval_at_start": True, "split": "seeded", "eval_trajectories": 2, "eval_turns": 1}
    common = {
        "tasks": tasks(10),
        "policy_factory": lambda r: RewritingPolicy(default_policy(r)),  # real sampling: RNG matters
        "evaluator_factory": lambda r: FakeEvaluator(verdict),
    }
    frozen = tiny_config(loop=shape, optim={"lr": 1e-30}, rollout={"tasks_per_step": 1})
    run(tmp_path, frozen, "frozen", **common)
    heldout = read_episodes(tmp_path / "frozen" / "heldout.jsonl")
    by_step: dict[int, list] = {}
    for row in heldout:
        by_step.setdefault(row["step"], []).append((row["task"], row["trajectory"], row["completion"]))
    assert sorted(by_step) == [0, 1, 2, 3]
    assert by_step[0] == by_step[1] == by_step[2] == by_step[3]
    # the two samples of a task still differ from each other (a fixed seed, not one fixed sample)
    assert len({completion for _, _, completion in by_step[0]}) > 1

    learning = tiny_config(loop=shape, rollout={"tasks_per_step": 1})
    quiet_run = tiny_config(loop={**shape, "eval_every": 0}, rollout={"tasks_per_step": 1})
    run(tmp_path, learning, "evaluated", **common)
    run(tmp_path, quiet_run, "not_evaluated", **common)
    assert read_episodes(tmp_path / "evaluated") == read_episodes(tmp_path / "not_evaluated")


def test_a_resumed_launch_evaluates_its_restored_step_again_apart_from_the_history(tmp_path):
    """loop.eval_at_resume: a run carried to another machine re-evaluates the step it restored, into
    heldout_resumed.jsonl, so its later steps pair with a base judged on the same device. The
    step's own rows in heldout.jsonl stay once; a later resume of the same step replaces the file's."""
    from kevin.train.launch import RESUMED_FILE

    shape = {"steps": 3, "checkpoint_every": 1, "eval_every": 2, "eval_at_start": True, "split": "seeded"}
    common = {
        "tasks": tasks(6),
        "policy_factory": lambda r: RewritingPolicy(default_policy(r)),
        "evaluator_factory": lambda r: FakeEvaluator(verdict),
    }
    first = tiny_config(loop={**shape, "stop_after_steps": 2}, rollout={"tasks_per_step": 1})
    assert run(tmp_path, first, "run", **common).last_step == 2
    assert not (tmp_path / "run" / RESUMED_FILE).exists()
    lines = []
    again = tiny_config(loop={**shape, "eval_at_resume": True}, rollout={"tasks_per_step": 1})
    (tmp_path / "run" / "checkpoints" / "latest").write_text("step_000002\n")
    assert train(again, tmp_path / "run", resume=True, out=lines.append, **common).last_step == 3
    assert any(line.startswith("step 2 held-out again on this machine") for line in lines)
    resumed = read_episodes(tmp_path / "run" / RESUMED_FILE)
    history = read_episodes(tmp_path / "run" / "heldout.jsonl")
    assert sorted({row["step"] for row in history}) == [0, 2, 3]
    own = [row for row in history if row["step"] == 2]
    # the same weights and the held-out sampler's own seed: the very samples step 2 drew before
    assert resumed and [r["candidate"] for r in resumed] == [r["candidate"] for r in own]
    # resumed from step 2 once more (the machine lost after step 3's checkpoint was not kept):
    # the file holds one evaluation of step 2, not two
    (tmp_path / "run" / "checkpoints" / "latest").write_text("step_000002\n")
    train(again, tmp_path / "run", resume=True, out=quiet, **common)
    assert len(read_episodes(tmp_path / "run" / RESUMED_FILE)) == len(resumed)
    # off (the default): a resume evaluates nothing it restored
    (tmp_path / "run" / RESUMED_FILE).unlink()
    (tmp_path / "run" / "checkpoints" / "latest").write_text("step_000002\n")
    train(tiny_config(loop=shape, rollout={"tasks_per_step": 1}), tmp_path / "run", resume=True, out=quiet, **common)
    assert not (tmp_path / "run" / RESUMED_FILE).exists()
