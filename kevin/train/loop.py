"""The training loop: the paper's multi-turn GRPO (DESIGN.md §3), one step at a time.

    setup (kevin.train.launch): run directory and config.json, tokenizer, model, learner, policy,
           evaluator, task split and sampler, monitors, loggers; on resume, the latest checkpoint
    [held-out evaluation at step 0]
    for each step:
        tasks      tasks_per_step tasks, evenly across levels                      (rank 0)
        episodes   N trajectories x T turns per task: prompts, sampling, parsing, evaluation with
                   identical candidates evaluated once, credit (kevin.rl.env/.reward)   (rank 0)
        record     every turn to episodes.jsonl (re-verifiable with `kevin eval`)       (rank 0)
        samples    one per trainable turn (kevin.train.packing), broadcast to every rank
        learn      clipped surrogate, N gradient steps (kevin.train.learner)       (all ranks)
        push       new weights to the sampling server (http policy)
        log        one line, metrics.jsonl / tensorboard / wandb, collapse rules (warn or stop)
        checkpoint every k steps; held-out evaluation every m steps (paper metrics, heldout.jsonl)
    end: checkpoint, held-out evaluation, curves.png

Reward hygiene: a turn whose evaluation failed on our side has no score and is neither trained on
nor counted in its group (kevin.rl.reward); a group whose rewards all agree gives advantage 0 and so
no gradient (a step where every group is like that still runs, logs and checkpoints, with no
optimiser step). Rewards come only from the evaluator's verdicts.

Time split (the step line's gen / eval / learn): `time/generate_s` is the wall time from asking the
policy for a turn to its last completion, summed over turns; candidates are evaluated as their
completions arrive (a policy with `generate_stream`: http per request, hf per batch), so evaluation
under generation is not counted twice, and `time/evaluate_s` is the rest of the rollout: the wait from
each turn's last completion to its last verdict, plus task sampling and prompt building;
`time/learn_s` is the learner's update.

Departures: a turn's next prompts wait for all of its verdicts (the hf policy on several ranks,
`CollectivePolicy`, streams too: each batch as every rank has finished it). Rollouts and learning do
not overlap (no asynchronous off-policy data beyond the second gradient step).
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from kevin.rl.env import EpisodeConfig, run_episodes
from kevin.rl.episodes import EPISODES_FILE, episode_rows, write_episodes
from kevin.tasks import Task
from kevin.train import checkpoint as checkpoints
from kevin.train.config import TrainConfig
from kevin.train.distributed import follow
from kevin.train.launch import (
    HELDOUT_FILE,
    RESUMED_FILE,
    EvaluatorFactory,
    PolicyFactory,
    Run,
    RunResult,
    close,
    say,
    setup,
)
from kevin.train.monitors import rollout_health
from kevin.train.packing import samples_from_trajectories
from kevin.train.rollout import TimedPolicy
from kevin.train.tracking import METRICS_FILE, flatten, read_jsonl, truncate_jsonl

WEIGHTS_DIR = "weights"
"""Weights exported for the sampling server, one folder per step (the newest two kept)."""


# ---------------------------------------------------------------------------------------------
# One step


def episode_config(config: TrainConfig, step: int) -> EpisodeConfig:
    rollout, reward = config.rollout, config.reward
    return EpisodeConfig(
        trajectories=rollout.trajectories,
        turns=rollout.turns,
        backend=rollout.backend,
        temperature=rollout.temperature,
        top_p=rollout.top_p,
        max_completion_tokens=rollout.completion_tokens_at(step),
        max_prompt_tokens=rollout.max_prompt_tokens,
        stop_after_correct=rollout.stop_after_correct,
        one_shot=rollout.one_shot,
        correct_bonus=reward.correct_bonus,
        gamma=reward.gamma,
        aggregation=reward.aggregation,
        advantage_group=reward.advantage_group,
        baseline=reward.baseline,
        advantage_scale=reward.advantage_scale,
        evaluation_timeout_s=config.evaluator.turn_timeout_s,
        evaluate_while_generating=rollout.evaluate_while_generating,
    )


def _episodes(run: Run, tasks: Sequence[Task], episodes: EpisodeConfig):
    """Rank 0 runs the episodes (the other ranks sample along in `follow`); (trajectories, seconds
    spent generating)."""
    timed = TimedPolicy(run.policy)
    count_tokens = run.codec.count_tokens if episodes.max_prompt_tokens is not None else None
    try:
        trajectories = run_episodes(tasks, timed, run.evaluator, episodes, count_tokens=count_tokens)
    finally:
        _release_followers(run)
    return trajectories, timed.seconds


def _release_followers(run: Run) -> None:
    """Let ranks > 0 out of `follow()` (they wait there while rank 0 runs episodes)."""
    if run.context.active:
        run.context.broadcast(("done",))


def _rollout(run: Run, step: int) -> tuple[list, dict[str, float]]:
    """Rank 0: episodes, records and samples of this step; other ranks: sample along."""
    if not run.context.is_main:
        follow(run.policy if run.config.rollout.policy == "hf" else None, run.context)
        return [], {}
    started = time.monotonic()
    tasks = run.sampler.sample(run.config.rollout.tasks_per_step)
    trajectories, generate_s = _episodes(run, tasks, episode_config(run.config, step))
    rollout_s = time.monotonic() - started
    dedup = run.evaluator.new_step()
    write_episodes(run.run_dir / EPISODES_FILE, trajectories, step=step)
    samples = samples_from_trajectories(
        trajectories, run.codec, mask_truncated=run.config.loss.mask_truncated
    )
    metrics = {
        f"rollout/{k}": v for k, v in rollout_health(trajectories, run.config.monitor.expected_opener).items()
    }
    metrics.update(
        {
            "rollout/samples": float(len(samples)),
            "rollout/samples_nonzero": float(sum(s.advantage != 0.0 for s in samples)),
            "evaluator/candidates": float(dedup["candidates"]),
            "evaluator/evaluated": float(dedup["evaluated"]),
            "time/generate_s": generate_s,
            "time/evaluate_s": rollout_s - generate_s,
        }
    )
    return samples, metrics


def train_step(run: Run, step: int) -> dict[str, float]:
    """One step on every rank; the metrics (complete on rank 0)."""
    started = time.monotonic()
    samples, metrics = _rollout(run, step)
    samples = run.context.broadcast(samples)
    learned = time.monotonic()
    if samples:
        with run.device_section() if run.device_section is not None else contextlib.nullcontext():
            result = run.learner.learn(
                samples,
                step=step,
                max_completion_tokens=run.config.rollout.completion_tokens_at(step),
                temperature=run.config.rollout.temperature,
            )
        result.pop("per_step")
        metrics.update({f"learn/{k}": v for k, v in result.items()})
    metrics["time/learn_s"] = time.monotonic() - learned
    _push_weights(run, step)
    metrics["time/step_s"] = time.monotonic() - started
    return flatten(metrics)


def _push_weights(run: Run, step: int) -> None:
    """Save the new weights and ask the sampling server to load them (http policy only)."""
    if run.config.rollout.policy != "http" or not run.config.rollout.http_reload_url:
        return
    directory = run.run_dir / WEIGHTS_DIR / f"step_{step:06d}"
    checkpoints.export_weights(run.model, run.tokenizer, directory, run.context)
    if run.context.is_main:
        run.policy.push_weights(str(directory), step)
        for old in sorted((run.run_dir / WEIGHTS_DIR).glob("step_*"))[:-2]:
            shutil.rmtree(old, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# Held-out evaluation, checkpoints, the step line


HELDOUT_SEED = 0x4E1D
"""Added to loop.seed for held-out sampling (`heldout_rng`)."""


@contextlib.contextmanager
def heldout_rng(run: Run) -> Iterator[None]:
    """Held-out sampling from the same seed at every evaluation, on a fork of torch's generators.

    Every held-out evaluation of a policy draws the same random numbers (common random numbers):
    two evaluations of one policy write the same completions, so a change between evaluations is the
    policy's, not the sampler's luck (8 tasks x a few samples are otherwise too noisy to show
    learning). The fork leaves the training stream as it was: a run's training samples do not
    depend on when or whether it evaluates (and a resumed launch that skips an evaluation stays
    exact). Ranks seed apart, as they sample different prompts. Applies to samplers drawing from
    torch's generators (the hf policy); an HTTP server samples with its own."""
    import torch

    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(run.config.loop.seed + HELDOUT_SEED + run.context.rank)
        yield


def evaluate_heldout(run: Run, step: int, file: str = HELDOUT_FILE) -> dict[str, float]:
    """The paper's metrics on the held-out tasks (rows appended to `file` in the run directory)."""
    with heldout_rng(run):
        return _evaluate_heldout(run, step, file)


def _evaluate_heldout(run: Run, step: int, file: str) -> dict[str, float]:
    from kevin.rl.metrics import compute_metrics

    if not run.context.is_main:
        follow(run.policy if run.config.rollout.policy == "hf" else None, run.context)
        return {}
    loop = run.config.loop
    tasks = run.heldout_tasks[: loop.eval_max_tasks] if loop.eval_max_tasks else run.heldout_tasks
    if not tasks:
        _release_followers(run)
        return {}
    started = time.monotonic()
    episodes = dataclasses.replace(
        episode_config(run.config, max(step, 1)), trajectories=loop.eval_trajectories, turns=loop.eval_turns
    )
    trajectories, _ = _episodes(run, tasks, episodes)
    run.evaluator.new_step()
    write_episodes(run.run_dir / file, trajectories, step=step)
    overall = compute_metrics(episode_rows(trajectories, step=step))["overall"]
    keys = ("correct", "speedup", "fast_1", "fast_1.5", "pass@1", "geomean")
    metrics = {f"heldout/{k}": overall[k] for k in keys if overall.get(k) is not None}
    metrics["time/heldout_s"] = time.monotonic() - started
    return metrics


def save(run: Run, step: int) -> None:
    state = {
        "learner": run.learner.state(),
        "sampler": run.sampler.state(),
        "monitor": run.monitor.state(),
    }
    checkpoints.save_checkpoint(
        run.run_dir,
        step,
        model=run.model,
        optimizer=run.learner.optimizer,
        state=state,
        context=run.context,
        keep=run.config.loop.keep_checkpoints,
    )


def step_line(step: int, total: int, metrics: dict[str, float]) -> str:
    """The one line a step prints."""

    def value(key: str, spec: str = ".3f", scale: float = 1.0) -> str:
        return "-" if key not in metrics else format(metrics[key] * scale, spec)

    parts = [
        f"step {step}/{total}",
        f"reward {value('rollout/reward_mean')} passed {value('rollout/passed_share', '.0%')} "
        f"format-err {value('rollout/format_error_share', '.0%')} trunc {value('rollout/truncated_share', '.0%')}",
        f"samples {value('rollout/samples_nonzero', '.0f')}/{value('rollout/samples', '.0f')}",
        f"loss {value('learn/loss', '.4g')} gnorm {value('learn/grad_norm', '.3g')} "
        f"clip {value('learn/clip_low_frac', '.1%')}/{value('learn/clip_high_frac', '.1%')} "
        f"lp-gap {value('learn/logprob_diff_max', '.2g')} "
        f"drift {value('learn/drift', '.2g')}/{value('learn/drift_max', '.2g')}",
        f"gen {value('time/generate_s', '.1f')}s eval {value('time/evaluate_s', '.1f')}s "
        f"learn {value('time/learn_s', '.1f')}s",
    ]
    if metrics.get("learn/nonfinite_skipped"):
        parts.append(f"UPDATES SKIPPED (non-finite gradient) {value('learn/nonfinite_skipped', '.0f')}")
    if "heldout/correct" in metrics:
        parts.append(f"held-out correct {value('heldout/correct')} speedup {value('heldout/speedup')}")
    return " | ".join(parts)


# ---------------------------------------------------------------------------------------------
# The loop


def _record(run: Run, step: int, metrics: dict[str, float]) -> str | None:
    """Log a step's metrics and apply the collapse rules; the stopping rule's text, if one fired."""
    stopped_by = None
    if run.context.is_main:
        for alarm in run.monitor.check({k.split("/", 1)[1]: v for k, v in metrics.items()}):
            say(run, f"  monitor {alarm.describe()}")
            stopped_by = stopped_by or (alarm.describe() if alarm.stop else None)
        run.loggers.log(step, metrics)
        run.history.append({"step": step, **metrics})
    return run.context.broadcast(stopped_by)


def _evaluate_resumed(run: Run) -> float:
    """The restored step evaluated again on this launch's machine (`loop.eval_at_resume`); its time.

    Its rows go to RESUMED_FILE, replacing an earlier launch's of this step or later, never to the
    run's held-out history: that step's own rows (perhaps from another machine) stay as they were."""
    if run.context.is_main:
        truncate_jsonl(run.run_dir / RESUMED_FILE, run.step - 1)
    metrics = evaluate_heldout(run, run.step, RESUMED_FILE)
    if metrics:
        say(
            run,
            f"step {run.step} held-out again on this machine: correct {metrics.get('heldout/correct', 0):.3f} "
            f"speedup {metrics.get('heldout/speedup', 0):.3f} ({metrics['time/heldout_s']:.0f} s; {RESUMED_FILE})",
        )
    return metrics.get("time/heldout_s", 0.0)


def _out_of_time(run: Run, started: float, needed_s: float) -> bool:
    """Rank 0's answer on every rank: would `needed_s` more seconds pass loop.time_limit_s?"""
    limit = run.config.loop.time_limit_s
    over = limit is not None and time.monotonic() - started + needed_s > limit
    return bool(run.context.broadcast(over))


RECENT_STEPS = 4
"""The time guard expects the next step to take as long as the longest of the last RECENT_STEPS:
the all-time longest is a launch's cold first step (2x a warm one on the H200, s11), which would end
a long run minutes early."""


def _timing_so_far(run: Run) -> tuple[float, list[float]]:
    """(last held-out evaluation's seconds, the last RECENT_STEPS steps' seconds) of the launches
    before this one, from the run's metrics (restored runs only: a new run has none), so that a
    resumed launch guards its first step as the earlier launch guarded its later ones."""
    path = run.run_dir / METRICS_FILE
    rows = [row for row in read_jsonl(path) if row.get("step", 0) <= run.step]
    heldout = [row["time/heldout_s"] for row in rows if "time/heldout_s" in row]
    steps = [row["time/step_s"] for row in rows if "time/step_s" in row]
    return (heldout[-1] if heldout else 0.0), steps[-RECENT_STEPS:]


def run_loop(run: Run) -> RunResult:
    """Steps from the one after the restored checkpoint to the end of this launch.

    With loop.time_limit_s, the launch ends early at the first step after which another step (as
    long as the longest of the last RECENT_STEPS) plus a held-out evaluation would pass the limit: that step is
    evaluated and, unless that evaluation's own time leaves room after all, checkpointed as a last step
    is, and `stopped_by` says so. A launch whose first step
    and evaluation would already pass it (timed by the held-out evaluation at its start, or by the
    earlier launches' metrics) takes no step."""
    loop = run.config.loop
    started = time.monotonic()
    last = loop.steps if loop.stop_after_steps is None else min(loop.steps, run.step + loop.stop_after_steps)
    heldout_s, recent_steps = _timing_so_far(run)
    longest_step_s = max(recent_steps, default=0.0)
    # heldout_s at step 0 means an earlier launch evaluated the start and stopped there: not again.
    if run.step == 0 and loop.eval_at_start and loop.eval_every and not heldout_s:
        metrics = evaluate_heldout(run, 0)
        if metrics:
            heldout_s = metrics.get("time/heldout_s", 0.0)
            _record(run, 0, metrics)
            say(
                run,
                f"step 0 held-out: correct {metrics.get('heldout/correct', 0):.3f} "
                f"speedup {metrics.get('heldout/speedup', 0):.3f} ({heldout_s:.0f} s)",
            )
            if checkpoints.latest_checkpoint(run.run_dir) is None:
                # The start's evaluation is minutes of a fresh run (the H200 learning run: 145 s
                # after its SFT): a launch lost before its first checkpoint resumes from here.
                save(run, 0)
    if run.step > 0 and loop.eval_at_resume and loop.eval_every:
        heldout_s = _evaluate_resumed(run) or heldout_s
    stopped_by = None
    saved_at = run.step
    if (
        run.step < last
        and heldout_s
        and _out_of_time(run, started, (longest_step_s or heldout_s) + heldout_s)
    ):
        # Without this the launch's first step is unguarded: on a slow evaluator it alone can outlast
        # the limit (the H200 learning run of session 9 lost its whole RL phase so).
        stopped_by = f"loop.time_limit_s={loop.time_limit_s:g}: no step and evaluation fit in this launch"
        say(run, f"kevin train: stopped before step {run.step + 1} ({stopped_by})")
        last = run.step
        if checkpoints.latest_checkpoint(run.run_dir) is None:
            save(run, run.step)  # a run stopped at step 0 must still be resumable
            saved_at = run.step
    for step in range(run.step + 1, last + 1):
        metrics = train_step(run, step)
        run.step = step
        recent_steps = [*recent_steps, metrics.get("time/step_s", 0.0)][-RECENT_STEPS:]
        longest_step_s = max(recent_steps)
        timed_out = step < last and _out_of_time(run, started, longest_step_s + heldout_s)
        if loop.eval_every and (step % loop.eval_every == 0 or step == loop.steps or timed_out):
            metrics.update(evaluate_heldout(run, step))
            heldout_s = metrics.get("time/heldout_s", heldout_s)
            # Asked again with this evaluation's own time: the start's (every reference timed, no
            # verdict to reuse) is far longer than a later one's (H200, s28: 248 s, then 55 s), and a
            # guard that forced this evaluation on the start's estimate may now find room for more.
            timed_out = step < last and _out_of_time(run, started, longest_step_s + heldout_s)
        say(run, step_line(step, loop.steps, metrics))
        stopped_by = _record(run, step, metrics)
        if timed_out and not stopped_by:
            stopped_by = f"loop.time_limit_s={loop.time_limit_s:g}: another step and evaluation would not fit"
        if step % loop.checkpoint_every == 0 or step == last or stopped_by:
            save(run, step)
            saved_at = step
        if stopped_by:
            say(
                run,
                f"kevin train: stopped at step {step} by {'the time limit' if timed_out else 'the collapse rule'} ({stopped_by})",
            )
            break
    if saved_at != run.step:
        save(run, run.step)
    return RunResult(run.run_dir, run.step, stopped_by, run.history)


def train(
    config: TrainConfig,
    run_dir: str | Path,
    *,
    resume: bool = False,
    tasks: Sequence[Task] | None = None,
    policy_factory: PolicyFactory | None = None,
    evaluator_factory: EvaluatorFactory | None = None,
    out: Callable[[str], None] = print,
) -> RunResult:
    """Set up, run this launch's steps, close. The whole of `kevin train`."""
    run = setup(
        config,
        run_dir,
        resume=resume,
        tasks=tasks,
        policy_factory=policy_factory,
        evaluator_factory=evaluator_factory,
        out=out,
    )
    try:
        return run_loop(run)
    finally:
        close(run)


def print_line(line: str) -> None:
    print(line, file=sys.stdout, flush=True)
