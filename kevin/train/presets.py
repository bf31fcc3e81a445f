"""Named configs: `smoke()`, `h200()`, `paper()` (functions, so every call is a fresh value).

smoke()   a CPU run in well under 5 minutes: a tiny model built here from a transformers config
          (random weights, a tokenizer trained here: no downloads), the cpp back end, the bundled
          tasks, 2 steps; every part of the loop runs, no kernel is expected
h200()    a small-model learning run on one H200 (cuda back end; bench/learning_run.py points it at
          the generated family); it needs a warm-started checkpoint (`kevin sft`): a random model
          never writes a kernel
paper()   the paper's recipe (DESIGN.md §3) for a QwQ-32B-class model on 8 GPUs with a vLLM sampler
"""

from __future__ import annotations

from kevin.errors import UsageError
from kevin.train.config import (
    EvaluatorConfig,
    LoopConfig,
    LossConfig,
    ModelConfig,
    MonitorConfig,
    OptimConfig,
    RolloutConfig,
    TrainConfig,
)

PRESETS = ("smoke", "h200", "paper")


def smoke() -> TrainConfig:
    """CPU, 2 steps, well under 5 minutes on 2 cores: every part of the loop runs once or twice."""
    return TrainConfig(
        preset="smoke",
        model=ModelConfig(),
        rollout=RolloutConfig(
            tasks_per_step=2,
            trajectories=2,
            turns=2,
            backend="cpp",
            max_completion_tokens=48,
            generation_batch_size=8,
        ),
        evaluator=EvaluatorConfig(max_in_flight=2, timing_budget_ms=100.0, timing_warmup_ms=10.0, trials=2),
        optim=OptimConfig(lr=1e-4, micro_batch_tokens=8192),
        loop=LoopConfig(
            steps=2,
            tasks="bundled",
            levels=(),
            split="paper",
            eval_every=2,
            eval_at_start=False,
            eval_trajectories=2,
            eval_turns=1,
            eval_max_tasks=1,
            checkpoint_every=1,
        ),
    )


def h200() -> TrainConfig:
    """A small policy learning on one H200 from real GPU rewards (issue #16; bench/learning_run.py
    runs it on the generated family with `loop.tasks=DIR loop.split=DIR/split.json`). Start it from
    the warm start of `kevin sft --preset h200` (`--set model.name_or_path=DIR`): a randomly
    initialised model never writes a kernel. The `tiny_*` fields are that warm start's model (8
    layers, width 512, about 26M parameters). Sized for minutes, not hours: 2 tasks x 8
    trajectories x 1 turn per step and 8 held-out tasks x 2 every 4 steps (GPU evaluation is the
    bottleneck: 16 candidates took 40-120 s on the H200 in session 9), a 100 ms timing budget and 3
    correctness trials per candidate, a learning rate for a small model (3e-5; not the paper's
    2e-6), the time limit set by the caller (loop.time_limit_s)."""
    return TrainConfig(
        preset="h200",
        model=ModelConfig(
            tiny_layers=8,
            tiny_hidden_size=512,
            tiny_heads=8,
            tiny_kv_heads=4,
            tiny_intermediate_size=1536,
            tiny_vocab_size=4096,
        ),
        rollout=RolloutConfig(
            tasks_per_step=2,
            trajectories=8,
            turns=1,
            backend="cuda",
            max_completion_tokens=1024,
            generation_batch_size=64,
            evaluate_while_generating=False,  # the sampler shares the GPU that times the kernels
            # The warm start learns the answer's form from its corpus: the paper's one-shot example
            # would be ~550 of its ~990-token prompts, 40% of every warm-start sequence.
            one_shot=False,
        ),
        evaluator=EvaluatorConfig(
            max_in_flight=12,
            timing_budget_ms=100.0,
            timing_warmup_ms=20.0,
            trials=3,
            turn_timeout_s=150.0,
            # A 26M model warm-started on a corpus writes many of its kernels again and again.
            reuse_verdicts=True,
        ),
        # 3e-5: at 1e-4 the s20 run's updates drove sampled tokens' ratios to 1e-6..23 and the
        # policy forgot how to write code by step 14; at 1e-5 (s21) it stayed stable and flat; at
        # 3e-5 (s22, s23) stable (drift <= 4.8e-4). Replayed from s23's batches (bench/rl_drift.py,
        # bench/results/rl_drift_s23), 3e-5 stays under the drift warning and 6e-5 does not.
        optim=OptimConfig(lr=3e-5, grad_clip=1.0, micro_batch_tokens=65536),
        loop=LoopConfig(
            steps=60,
            tasks="bundled",
            levels=(),
            task_size="large",
            split="paper",
            eval_every=4,
            eval_trajectories=2,
            eval_turns=1,
            checkpoint_every=100,
            keep_checkpoints=1,
        ),
    )


def paper() -> TrainConfig:
    """The paper's recipe (DESIGN.md §3): QwQ-32B, 8 tasks x 16 trajectories x 4 turns, gamma 0.4
    sum, clip 0.2/0.28, no KL, lr 2e-6 constant with 3% warm-up, grad clip 0.05, 2 gradient steps
    per batch, 16K completions raised to 22K at step 30 (prompts kept within the 10K tokens that
    QwQ-32B's 32K context leaves, our choice: the oldest attempts are dropped first); 8 GPUs under torchrun with FSDP2, sampling
    on a vLLM server (`rollout.http_url`)."""
    return TrainConfig(
        preset="paper",
        model=ModelConfig(name_or_path="Qwen/QwQ-32B", compute_dtype="bf16", gradient_checkpointing=True),
        rollout=RolloutConfig(
            tasks_per_step=8,
            trajectories=16,
            turns=4,
            backend="cuda",
            temperature=0.9,
            max_completion_tokens=16384,
            max_completion_tokens_late=22528,
            late_step=30,
            max_prompt_tokens=10240,
            policy="http",
        ),
        evaluator=EvaluatorConfig(max_in_flight=32, device_indices=tuple(range(8))),
        loss=LossConfig(clip_low=0.2, clip_high=0.28, kl_coef=0.0),
        optim=OptimConfig(lr=2e-6, warmup_fraction=0.03, grad_clip=0.05, gradient_steps=2),
        loop=LoopConfig(
            steps=100,
            tasks="kernelbench",
            levels=(1, 2),
            split="paper",
            eval_every=10,
            eval_trajectories=16,
            eval_turns=8,
        ),
        monitor=MonitorConfig(expected_opener="Okay", not_opener_stop=0.5, truncated_stop=0.5),
    )


PRESET_FUNCTIONS = {"smoke": smoke, "h200": h200, "paper": paper}


def preset(name: str) -> TrainConfig:
    if name not in PRESET_FUNCTIONS:
        raise UsageError(f"unknown preset {name!r}; use one of {', '.join(PRESETS)}")
    return PRESET_FUNCTIONS[name]()
