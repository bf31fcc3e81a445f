"""Shared pieces of the kevin.train tests: a tiny config, tasks, fake policies and evaluators.

Not a conftest (tests/conftest.py is the one conftest); imported by name, which works because pytest
puts this folder on sys.path for the test modules in it.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import sys
import threading
from concurrent.futures import Future
from pathlib import Path

from kevin.evaluator.result import EvalResult
from kevin.rl.env import Sampling
from kevin.tasks import Task
from kevin.train import config as train_config
from kevin.train import presets

PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x) * {factor}


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
"""


def tasks(count: int = 4, levels: tuple[int, ...] = (1, 2)) -> list[Task]:
    """`count` small tasks spread over `levels` (ids L<level>_<n>)."""
    made = []
    for n in range(count):
        level = levels[n % len(levels)]
        made.append(
            Task.from_source(
                PROBLEM.format(factor=n + 2),
                id=f"L{level}_{n + 1}",
                name=f"relu{n}",
                level=level,
                problem=n + 1,
            )
        )
    return made


def tiny_config(**sections) -> train_config.TrainConfig:
    """A config that trains a 1-layer model on a CPU in seconds; `sections` replace fields, e.g.
    tiny_config(loop={"steps": 3}, optim={"lr": 1e-2})."""
    base = presets.smoke()
    base = dataclasses.replace(
        base,
        preset="test",
        model=dataclasses.replace(
            base.model, tiny_layers=1, tiny_hidden_size=32, tiny_intermediate_size=64, tiny_vocab_size=2048
        ),
        rollout=dataclasses.replace(
            base.rollout, tasks_per_step=2, trajectories=2, turns=2, max_completion_tokens=12
        ),
        optim=dataclasses.replace(base.optim, lr=1e-2, grad_clip=1.0, micro_batch_tokens=4096),
        loop=dataclasses.replace(
            base.loop,
            steps=2,
            split="none",
            eval_every=0,
            eval_at_start=False,
            checkpoint_every=1,
            tensorboard=False,
            plot=False,
        ),
    )
    for name, values in sections.items():
        base = dataclasses.replace(base, **{name: dataclasses.replace(getattr(base, name), **values)})
    return base


@functools.cache
def tiny_tokenizer(vocab_size: int = 2048):
    from kevin.train.model import train_tiny_tokenizer

    return train_tiny_tokenizer(vocab_size)


def tiny_model(
    seed: int = 0, *, layers: int = 1, hidden: int = 32, lora_rank: int = 0, checkpointing: bool = False
):
    from kevin.train.model import build_model

    config = train_config.ModelConfig(
        tiny_layers=layers,
        tiny_hidden_size=hidden,
        tiny_intermediate_size=2 * hidden,
        tiny_vocab_size=2048,
        lora_rank=lora_rank,
        gradient_checkpointing=checkpointing,
        lora_target_modules=("q_proj", "v_proj"),
    )
    return build_model(config, tiny_tokenizer(), seed=seed)


def completion(tag: int) -> str:
    """A well-formed answer whose kernel carries `tag` (the fake evaluator reads it back)."""
    return (
        f"<think>try variant {tag}</think>\n```python\nclass ModelNew:\n    variant = {tag}\n```\n"
        f"Variant {tag}."
    )


def tag_of(source: str) -> int:
    return int(source.split("variant = ", 1)[1].split()[0])


def verdict(task: Task, source: str) -> EvalResult:
    """Even tags pass with speedup 1 + tag / 10; odd tags are wrong."""
    tag = tag_of(source)
    if tag % 2:
        return EvalResult(
            stage="correctness", compiled=True, blame="candidate", task_id=task.id, error="wrong"
        )
    return EvalResult(stage="ok", compiled=True, correct=True, speedup=1 + tag / 10, task_id=task.id)


class FakeEvaluator:
    """An `Evaluator` answering at once from `judge(task, source)`; counts its calls."""

    def __init__(self, judge=verdict) -> None:
        self.judge = judge
        self.calls = 0
        self._lock = threading.Lock()

    def submit(self, task: Task, source: str) -> Future:
        future: Future = Future()
        with self._lock:
            self.calls += 1
        try:
            future.set_result(self.judge(task, source))
        except Exception as exc:  # an evaluator failure, as a real one would raise it
            future.set_exception(exc)
        return future

    def close(self) -> None:
        pass


class CyclingPolicy:
    """A scripted policy writing completion(0), completion(1), ... in turn (text only: the learner
    tokenises it)."""

    def __init__(self, tags: tuple[int, ...] = (0, 1, 2, 3)) -> None:
        self.tags = tags
        self.count = 0

    def generate(self, prompts: list[str], sampling: Sampling) -> list[str]:
        outputs = []
        for _ in prompts:
            outputs.append(completion(self.tags[self.count % len(self.tags)]))
            self.count += 1
        return outputs


class RewritingPolicy:
    """A real sampler whose sampled tokens are kept but whose text is replaced by a well-formed
    answer tagged from those tokens, so a random model still earns varied rewards."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def generate(self, prompts: list[str], sampling: Sampling):
        outputs = self.inner.generate(prompts, sampling)
        return [dataclasses.replace(g, text=completion(sum(g.token_ids) % 5)) for g in outputs]


def load_bench(name: str, filename: str):
    """bench/`filename` loaded as module `name` (bench/ is not a package)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[2] / "bench" / filename)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
