"""One launch of a training run: everything built before the first step, and torn down after.

`setup(config, run_dir)` starts the process group (under torchrun), writes `config.json` (or checks
it against the saved one on `--resume`), loads the tokenizer (saved into the run directory on the
first launch and read back from there after), builds the model (moved to its device, sharded with
FSDP2 when there are several processes), the learner, the policy (transformers or HTTP; wrapped for
collective sampling under FSDP), the evaluator (rank 0 only, behind the per-step dedupe), the task
split and sampler, the collapse monitor and the loggers, and on resume restores the latest checkpoint
and drops log rows written after it. It returns a `Run`, which `kevin.train.loop` steps through.
`close(run)` closes the loggers and the evaluator, draws `curves.png` and leaves the process group.

Tests replace the policy and the evaluator through `policy_factory` / `evaluator_factory` and the
tasks through `tasks`; everything else is what `kevin train` runs.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from kevin.errors import UsageError
from kevin.rl.env import Evaluator, Policy
from kevin.rl.episodes import EPISODES_FILE
from kevin.tasks import Task
from kevin.train import checkpoint as checkpoints
from kevin.train.config import TrainConfig
from kevin.train.distributed import (
    CollectivePolicy,
    DistributedContext,
    init_distributed,
    shard_model,
    shutdown,
)
from kevin.train.learner import Learner
from kevin.train.model import (
    TextCodec,
    build_model,
    count_parameters,
    load_tokenizer,
    resolve_compute_dtype,
    resolve_device,
)
from kevin.train.monitors import CollapseMonitor
from kevin.train.overrides import CONFIG_FILE, config_differences, load_config, save_config
from kevin.train.rollout import (
    DedupEvaluator,
    DeviceSection,
    TaskSampler,
    build_evaluator,
    trainer_device_section,
)
from kevin.train.tracking import METRICS_FILE, Loggers, open_loggers, truncate_jsonl

HELDOUT_FILE = "heldout.jsonl"
"""Held-out evaluation episodes, appended at every evaluation (rows keyed by step)."""
RESUMED_FILE = "heldout_resumed.jsonl"
"""The held-out evaluation a resumed launch makes of the step it restored (`loop.eval_at_resume`)."""


@dataclass
class Run:
    """Everything one launch holds; built by `setup`, read by the step functions."""

    config: TrainConfig
    run_dir: Path
    context: DistributedContext
    device: torch.device
    compute_dtype: torch.dtype
    tokenizer: Any
    codec: TextCodec
    model: torch.nn.Module
    learner: Learner
    train_tasks: list[Task]
    heldout_tasks: list[Task]
    sampler: TaskSampler
    monitor: CollapseMonitor
    policy: Policy | None = None
    evaluator: DedupEvaluator | None = None
    loggers: Loggers | None = None
    step: int = 0
    out: Callable[[str], None] = print
    history: list[dict[str, float]] = field(default_factory=list)
    device_section: DeviceSection | None = None
    """Entered around this process's device work when the local evaluator times on the same GPU
    (kevin.train.rollout.trainer_device_section)."""


@dataclass
class RunResult:
    run_dir: Path
    last_step: int
    stopped_by: str | None
    """What ended the launch early, if anything did: a collapse rule or loop.time_limit_s."""
    history: list[dict[str, float]]


PolicyFactory = Callable[[Run], Policy]
EvaluatorFactory = Callable[[Run], Evaluator]


# ---------------------------------------------------------------------------------------------
# Setup


def load_split(config: TrainConfig, tasks: Sequence[Task] | None) -> tuple[list[Task], list[Task]]:
    """(train, held-out) tasks: the given ones, or those the config's task source and split name."""
    from kevin.tasks import load_tasks, read_excluded, split_by_name

    loop = config.loop
    if tasks is None:
        tasks = load_tasks(loop.tasks, level=list(loop.levels) or None, size=loop.task_size)
    excluded = read_excluded(loop.exclude) if loop.exclude else None
    split = split_by_name(list(tasks), loop.split, seed=loop.seed, excluded=excluded)
    return list(split.train), list(split.holdout)


def check_run_dir(config: TrainConfig, run_dir: Path, *, resume: bool) -> None:
    """A first launch needs a fresh directory; a resumed one the same config (launch fields aside)."""
    saved_path = run_dir / CONFIG_FILE
    if resume:
        differences = config_differences(load_config(run_dir), config)
        if differences:
            raise UsageError(
                f"--resume with a config that differs from {saved_path} in {', '.join(differences)}; "
                "resume with the same --preset and --set values (only loop.steps, "
                "loop.stop_after_steps and evaluator.cache_dir may change)"
            )
    elif saved_path.exists():
        raise UsageError(
            f"{run_dir} already holds a run; pass --resume to continue it or pick a new --run-dir"
        )


def _model_and_learner(config: TrainConfig, context: DistributedContext, tokenizer: Any):
    device = resolve_device(config.model, context.local_rank)
    compute_dtype = resolve_compute_dtype(config.model, device)
    model = build_model(config.model, tokenizer, seed=config.loop.seed)
    reference = None
    if config.loss.kl_coef > 0 and config.model.lora_rank == 0:
        reference = copy.deepcopy(model).requires_grad_(False).eval()
    model.to(device)
    if reference is not None:
        reference.to(device)
    if context.active and config.distributed.fsdp:
        shard_model(model, context, compute_dtype)
        if reference is not None:
            shard_model(reference, context, compute_dtype)
    learner = Learner(
        model,
        loss=config.loss,
        optim=config.optim,
        total_optimizer_steps=config.loop.steps * config.optim.gradient_steps,
        device=device,
        pad_id=TextCodec(tokenizer).pad_id,
        context=context,
        autocast_dtype=None if context.fsdp else compute_dtype,
        reference=reference,
        seed=config.loop.seed,
    )
    return device, compute_dtype, model, learner


def default_policy(run: Run) -> Policy:
    """The sampler the config names: transformers on the learner's weights, or an HTTP server."""
    rollout = run.config.rollout
    if rollout.policy == "http":
        from kevin.train.policy_http import HTTPPolicy

        return HTTPPolicy(
            rollout.http_url,
            rollout.http_model,
            codec=run.codec,
            api_key_env=rollout.http_api_key_env,
            timeout_s=rollout.http_timeout_s,
            concurrency=rollout.http_concurrency,
            reload_url=rollout.http_reload_url,
            stop=rollout.stop_strings,
        )
    from kevin.train.policy_hf import HFPolicy

    return HFPolicy(
        run.model,
        run.codec,
        device=run.device,
        batch_size=rollout.generation_batch_size,
        stop_strings=rollout.stop_strings,
        autocast_dtype=None if run.context.fsdp else run.compute_dtype,
        synced_gpus=run.context.fsdp,
        device_section=run.device_section,
    )


def default_evaluator(run: Run) -> Evaluator:
    rollout = run.config.rollout
    return build_evaluator(
        run.config.evaluator, rollout.backend, rollout.tasks_per_step * rollout.trajectories
    )


def setup(
    config: TrainConfig,
    run_dir: str | Path,
    *,
    resume: bool = False,
    tasks: Sequence[Task] | None = None,
    policy_factory: PolicyFactory | None = None,
    evaluator_factory: EvaluatorFactory | None = None,
    out: Callable[[str], None] = print,
) -> Run:
    """Build a launch; on resume, restore the latest checkpoint."""
    context = init_distributed(fsdp=config.distributed.fsdp, timeout_s=config.distributed.timeout_s)
    run_dir = Path(run_dir)
    check_run_dir(config, run_dir, resume=resume)
    context.barrier()  # every rank has looked before rank 0 writes
    if context.is_main:
        save_config(config, run_dir)
        load_tokenizer(config.model, run_dir)  # built and saved into the run directory on first launch
    context.barrier()
    tokenizer = load_tokenizer(config.model, run_dir)  # every rank reads the saved one
    random.seed(config.loop.seed)
    torch.manual_seed(config.loop.seed + context.rank)
    device, compute_dtype, model, learner = _model_and_learner(config, context, tokenizer)
    train_tasks, heldout_tasks = load_split(config, tasks)
    if config.rollout.tasks_per_step > len(train_tasks):
        raise UsageError(
            f"rollout.tasks_per_step={config.rollout.tasks_per_step} but the split leaves "
            f"{len(train_tasks)} training tasks; lower it or add tasks"
        )
    run = Run(
        config,
        run_dir,
        context,
        device,
        compute_dtype,
        tokenizer,
        TextCodec(tokenizer),
        model,
        learner,
        train_tasks,
        heldout_tasks,
        TaskSampler(train_tasks, seed=config.loop.seed),
        CollapseMonitor(config.monitor),
        out=out,
        device_section=trainer_device_section(config.evaluator, config.rollout.backend, device),
    )
    run.policy = (policy_factory or default_policy)(run)
    if context.active and config.rollout.policy == "hf":
        run.policy = CollectivePolicy(run.policy, context)
    if context.is_main:
        run.evaluator = DedupEvaluator(
            (evaluator_factory or default_evaluator)(run), reuse=config.evaluator.reuse_verdicts
        )
    if resume:
        _restore(run)
    if context.is_main:
        run.loggers = open_loggers(
            run_dir,
            tensorboard=config.loop.tensorboard,
            wandb_project=config.loop.wandb_project,
            config=config.to_dict(),
            resume=resume,
        )
    trainable, total = count_parameters(model)
    say(
        run,
        f"kevin train: {config.preset} preset, {total / 1e6:.1f}M parameters ({trainable / 1e6:.1f}M "
        f"trained), {len(train_tasks)} training / {len(heldout_tasks)} held-out tasks, "
        f"{context.world_size} process(es) on {device}, run directory {run_dir}",
    )
    if run.device_section is not None:
        say(run, f"kevin train: generation and updates on {device} take the evaluator's device lock (shared)")
    return run


def _restore(run: Run) -> None:
    path = checkpoints.latest_checkpoint(run.run_dir)
    if path is None:
        raise UsageError(f"--resume: no checkpoint in {run.run_dir / checkpoints.CHECKPOINTS_DIR}")
    state = checkpoints.load_checkpoint(
        path, model=run.model, optimizer=run.learner.optimizer, context=run.context
    )
    run.step = int(state["step"])
    run.learner.load_state(state["learner"])
    if not state["optimizer_restored"]:
        run.learner.restart_moments()
        say(run, f"kevin train: {path.name} has no optimiser state: the learning rate warms up again over "
            f"{run.learner.warmup_steps} optimiser steps")  # fmt: skip
    run.sampler.load_state(state["sampler"])
    run.monitor.load_state(state["monitor"])
    if run.context.is_main:
        for name in (EPISODES_FILE, HELDOUT_FILE, METRICS_FILE, RESUMED_FILE):
            truncate_jsonl(run.run_dir / name, run.step)


def say(run: Run, line: str) -> None:
    if run.context.is_main:
        run.out(line)


def close(run: Run) -> None:
    if run.context.is_main:
        if run.loggers is not None:
            run.loggers.close()
        if run.config.loop.plot:
            from kevin.train.plot import plot_run

            path = plot_run(run.run_dir, title=f"kevin train ({run.config.preset})")
            if path is not None:
                say(run, f"kevin train: curves in {path}")
        if run.evaluator is not None:
            run.evaluator.close()
    shutdown(run.context)
