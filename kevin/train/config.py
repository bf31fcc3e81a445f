"""Training configuration: typed, frozen dataclasses, presets as functions, dotted overrides.

    TrainConfig(model, rollout, reward, evaluator, loss, optim, loop, monitor, distributed)

Every value has one home here; the loop reads nothing from anywhere else. Each section validates
itself in `__post_init__` and raises `UsageError` with a message that names the field and the fix;
`TrainConfig` checks the rules that span sections. Presets are functions returning a whole config:

    smoke()   a CPU run in well under 5 minutes: a tiny model built here from a transformers config
              (random weights, a tokenizer trained here: no downloads), the cpp back end, the bundled
              tasks, 2 steps
    h200()    a small-model learning run on one H200 (cuda back end, bundled tasks at the large size)
    paper()   the paper's recipe (DESIGN.md §3) for a QwQ-32B-class model on 8 GPUs

`apply_overrides(config, ["loss.clip_high=0.3", ...])` parses each value into its field's type
(int, float, bool, str, tuples as comma lists, `none` for optional fields) and fails with one line
naming the key and what it accepts. `save_config`/`load_config` write and read the resolved config as
JSON (`config.json` in the run directory).
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kevin.errors import UsageError
from kevin.rl import reward

CONFIG_FILE = "config.json"
"""Name of the resolved config inside a run directory."""

PRESETS = ("smoke", "h200", "paper")

DTYPES = ("auto", "fp32", "bf16", "fp16")
POLICIES = ("hf", "http")
BACKENDS = ("cuda", "cpp")
NORMALIZATIONS = ("constant", "token", "sequence")
OLD_LOGPROBS = ("learner", "sampler")
MINIBATCH_MODES = ("split", "repeat")
EVALUATOR_KINDS = ("local", "ray")
SPLITS = ("paper", "seeded", "none")


def _check(rules: list[tuple[bool, str]]) -> None:
    for ok, message in rules:
        if not ok:
            raise UsageError(message)


def _one_of(section: str, name: str, value: str, allowed: tuple[str, ...]) -> tuple[bool, str]:
    return value in allowed, f"{section}.{name} must be one of {', '.join(allowed)}; got {value!r}"


@dataclass(frozen=True)
class ModelConfig:
    name_or_path: str = "tiny"
    """`tiny`: a small Llama-architecture model built here from the `tiny_*` fields, with random
    weights and a byte-level BPE tokenizer trained here on kevin's own texts (nothing is downloaded).
    Otherwise a local Hugging Face checkpoint directory (or a hub id where the hub is reachable)."""
    tiny_layers: int = 2
    """Decoder layers of the tiny model."""
    tiny_hidden_size: int = 64
    """Hidden width of the tiny model."""
    tiny_heads: int = 4
    """Attention heads of the tiny model (must divide tiny_hidden_size)."""
    tiny_kv_heads: int = 2
    """Key/value heads of the tiny model (grouped-query attention; must divide tiny_heads)."""
    tiny_intermediate_size: int = 128
    """MLP width of the tiny model."""
    tiny_vocab_size: int = 1024
    """Vocabulary of the tokenizer trained for the tiny model (bytes + merges + special tokens)."""
    tiny_max_positions: int = 32768
    """Longest sequence (prompt + completion) the tiny model accepts."""
    param_dtype: str = "fp32"
    """Dtype of the trained weights and optimiser state (`fp32` master weights; `bf16` halves memory
    but rounds away updates smaller than the weight's last bit, which lr 2e-6 mostly is)."""
    compute_dtype: str = "auto"
    """Dtype of forward and backward passes: `auto` is bf16 on CUDA (autocast, or FSDP2 mixed
    precision) and fp32 on the CPU."""
    device: str = "auto"
    """`auto` (cuda when available, else cpu), `cpu` or `cuda`; under torchrun each rank takes its
    LOCAL_RANK's GPU."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass: less memory, about a third more compute."""
    lora_rank: int = 0
    """0 trains every weight; > 0 trains LoRA adapters of this rank through peft instead."""
    lora_alpha: float = 32.0
    """LoRA scaling numerator (the update is scaled by alpha / rank)."""
    lora_dropout: float = 0.0
    """Dropout on the LoRA branch; keep 0 so sampler and learner log-probs agree."""
    lora_target_modules: tuple[str, ...] = (
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    )
    """Module names that get LoRA adapters (Llama/Qwen naming)."""
    attn_implementation: str = "sdpa"
    """transformers attention kernel: `sdpa`, `eager`, or `flash_attention_2` where installed."""

    def __post_init__(self) -> None:
        sizes = (self.tiny_layers, self.tiny_hidden_size, self.tiny_heads, self.tiny_kv_heads)
        _check(
            [
                (bool(self.name_or_path), "model.name_or_path is empty; use `tiny` or a checkpoint path"),
                (min(sizes) >= 1, "model.tiny_* sizes must be positive integers"),
                (
                    self.tiny_hidden_size % self.tiny_heads == 0,
                    "model.tiny_heads must divide model.tiny_hidden_size",
                ),
                (self.tiny_heads % self.tiny_kv_heads == 0, "model.tiny_kv_heads must divide model.tiny_heads"),
                (self.tiny_vocab_size >= 300, "model.tiny_vocab_size must be >= 300 (256 bytes + merges)"),
                (self.tiny_max_positions >= 256, "model.tiny_max_positions must be >= 256"),
                _one_of("model", "param_dtype", self.param_dtype, DTYPES[1:]),
                _one_of("model", "compute_dtype", self.compute_dtype, DTYPES),
                _one_of("model", "device", self.device, ("auto", "cpu", "cuda")),
                (self.lora_rank >= 0, "model.lora_rank must be >= 0 (0 = full fine-tuning)"),
                (0 <= self.lora_dropout < 1, "model.lora_dropout must be in [0, 1)"),
                (bool(self.lora_target_modules), "model.lora_target_modules is empty; name the modules"),
            ]
        )

    @property
    def is_tiny(self) -> bool:
        return self.name_or_path == "tiny"


@dataclass(frozen=True)
class RolloutConfig:
    tasks_per_step: int = 8
    """Tasks per training step (the paper: 8), drawn evenly across levels."""
    trajectories: int = 16
    """Parallel trajectories per task (the paper: 16)."""
    turns: int = 4
    """Refinement turns per trajectory (the paper: 4 in training)."""
    backend: str = "cuda"
    """Kernel back end for prompts and evaluation: `cuda` or `cpp` (CPU machines)."""
    temperature: float = 0.9
    """Sampling temperature (the paper: 0.9); log-probs are of the temperature-scaled distribution."""
    top_p: float = 1.0
    """Nucleus sampling mass; 1.0 keeps the distribution the loss assumes."""
    max_completion_tokens: int = 16384
    """Most tokens per completion (the paper: 16K, raised to 22K later)."""
    max_completion_tokens_late: int | None = None
    """Completion limit from step `late_step` on (the paper: 22528 from step 30); None keeps one limit."""
    late_step: int = 30
    """First step (1-based) that uses `max_completion_tokens_late`."""
    max_prompt_tokens: int | None = None
    """Prompt budget; the oldest attempts are dropped to fit (kevin.rl.prompts). None: no budget."""
    stop_after_correct: bool = False
    """Stop a trajectory after its first passed turn (the paper keeps refining: False)."""
    policy: str = "hf"
    """Sampler: `hf` (transformers generate on the learner's own weights) or `http` (an
    OpenAI-compatible server such as vLLM or SGLang, weights pushed after every step)."""
    generation_batch_size: int = 64
    """Prompts per transformers `generate` call (hf policy)."""
    stop_strings: tuple[str, ...] = ()
    """Extra strings that end a completion besides the end-of-sequence token."""
    http_url: str = "http://127.0.0.1:8000/v1"
    """Base URL of the OpenAI-compatible server; `/completions` is appended."""
    http_model: str = "policy"
    """Model name sent with each request (the served model, or the LoRA adapter's name)."""
    http_api_key_env: str = ""
    """Name of the environment variable holding the server's API key; empty for none."""
    http_reload_url: str = ""
    """Endpoint POSTed after each step with the path of the new weights; empty: no push."""
    http_timeout_s: float = 3600.0
    """Seconds to wait for one completion request."""
    http_concurrency: int = 64
    """Requests in flight at once (the server batches them)."""

    def __post_init__(self) -> None:
        _check(
            [
                (self.tasks_per_step >= 1, "rollout.tasks_per_step must be at least 1"),
                (self.trajectories >= 1, "rollout.trajectories must be at least 1"),
                (self.turns >= 1, "rollout.turns must be at least 1"),
                _one_of("rollout", "backend", self.backend, BACKENDS),
                (self.temperature > 0, "rollout.temperature must be > 0 (the loss needs a distribution)"),
                (0 < self.top_p <= 1, "rollout.top_p must be in (0, 1]"),
                (self.max_completion_tokens >= 1, "rollout.max_completion_tokens must be at least 1"),
                (
                    self.max_completion_tokens_late is None or self.max_completion_tokens_late >= 1,
                    "rollout.max_completion_tokens_late must be a positive count, or none",
                ),
                (self.late_step >= 1, "rollout.late_step must be at least 1"),
                (
                    self.max_prompt_tokens is None or self.max_prompt_tokens >= 1,
                    "rollout.max_prompt_tokens must be a positive count, or none for no budget",
                ),
                _one_of("rollout", "policy", self.policy, POLICIES),
                (self.generation_batch_size >= 1, "rollout.generation_batch_size must be at least 1"),
                (self.http_timeout_s > 0, "rollout.http_timeout_s must be positive seconds"),
                (self.http_concurrency >= 1, "rollout.http_concurrency must be at least 1"),
            ]
        )

    def completion_tokens_at(self, step: int) -> int:
        """The completion limit in force at 1-based `step`."""
        if self.max_completion_tokens_late is not None and step >= self.late_step:
            return self.max_completion_tokens_late
        return self.max_completion_tokens


@dataclass(frozen=True)
class RewardConfig:
    correct_bonus: float = reward.CORRECT_BONUS
    """Score of a passed kernel on top of its speedup (the paper: 0.3)."""
    gamma: float = 0.4
    """Discount of later turns' scores in a turn's return (the paper: 0.4)."""
    aggregation: str = "sum"
    """`sum` of discounted later scores (the paper) or their `max`."""
    advantage_group: str = "task"
    """Normalise over all turns of a task's trajectories (`task`, the paper) or per `turn` index."""
    baseline: str = "mean"
    """Group `mean` (the paper) or `leave_one_out` (the mean of the other samples)."""
    advantage_scale: str = "std"
    """Divide by the group's standard deviation (`std`, the paper) or not (`none`, Dr. GRPO)."""

    def __post_init__(self) -> None:
        _check(
            [
                (0 <= self.gamma <= 1, "reward.gamma must be in [0, 1]"),
                _one_of("reward", "aggregation", self.aggregation, reward.AGGREGATIONS),
                _one_of("reward", "advantage_group", self.advantage_group, reward.GROUP_BYS),
                _one_of("reward", "baseline", self.baseline, reward.BASELINES),
                _one_of("reward", "advantage_scale", self.advantage_scale, reward.SCALES),
            ]
        )


@dataclass(frozen=True)
class EvaluatorConfig:
    kind: str = "local"
    """`local` (EvaluationService: sandboxed workers on this node) or `ray` (RayEvaluationService)."""
    max_in_flight: int = 8
    """Candidates evaluated at once (local) or per actor (ray)."""
    timing_budget_ms: float = 2000.0
    """Measured time spent timing one candidate (the repetition count adapts to it)."""
    timing_warmup_ms: float = 100.0
    """Untimed warm-up time per candidate."""
    trials: int = 5
    """Correctness trials per candidate, each on fresh inputs."""
    precision: str = "fp32"
    """Precision under test: fp32, fp16 or bf16."""
    static_check: bool = True
    """Run the static gate before building."""
    device_indices: tuple[int, ...] = ()
    """GPUs the local service spreads candidates over; empty: device 0."""
    cache_dir: str = ""
    """Build and baseline cache root; empty: ~/.cache/kevin."""
    turn_timeout_s: float | None = None
    """Seconds to wait for a turn's verdicts before blaming our infrastructure; none: no limit."""
    ray_address: str = ""
    """Ray cluster address for kind `ray`; empty: start or join the local one."""

    def __post_init__(self) -> None:
        _check(
            [
                _one_of("evaluator", "kind", self.kind, EVALUATOR_KINDS),
                (self.max_in_flight >= 1, "evaluator.max_in_flight must be at least 1"),
                (self.timing_budget_ms > 0, "evaluator.timing_budget_ms must be positive"),
                (self.timing_warmup_ms >= 0, "evaluator.timing_warmup_ms must be >= 0"),
                (self.trials >= 1, "evaluator.trials must be at least 1"),
                _one_of("evaluator", "precision", self.precision, ("fp32", "fp16", "bf16")),
                (
                    self.turn_timeout_s is None or self.turn_timeout_s > 0,
                    "evaluator.turn_timeout_s must be positive seconds, or none",
                ),
            ]
        )


@dataclass(frozen=True)
class LossConfig:
    clip_low: float = 0.2
    """Lower clip of the importance ratio: 1 - clip_low (the paper: 0.2)."""
    clip_high: float = 0.28
    """Upper clip, clip-higher (DAPO): 1 + clip_high (the paper: 0.28)."""
    normalization: str = "constant"
    """`constant`: summed token losses / (max completion tokens x samples) (Dr. GRPO, DESIGN.md §3);
    `token`: / completion tokens in the batch (DAPO); `sequence`: each sample's mean over its tokens,
    then the mean over samples (the original GRPO)."""
    kl_coef: float = 0.0
    """Weight of the k3 KL estimate against the reference (initial) policy; the paper: 0 (no KL)."""
    old_logprobs: str = "learner"
    """Denominator of the importance ratio: `learner` recomputes log-probs with the weights that
    sampled (exact; the first gradient step is on-policy) or `sampler` uses the sampler's own."""
    mask_truncated: bool = False
    """Drop completions cut at the token limit from the loss (DAPO's overlong filtering)."""

    def __post_init__(self) -> None:
        _check(
            [
                (0 <= self.clip_low < 1, "loss.clip_low must be in [0, 1)"),
                (self.clip_high >= 0, "loss.clip_high must be >= 0"),
                _one_of("loss", "normalization", self.normalization, NORMALIZATIONS),
                (self.kl_coef >= 0, "loss.kl_coef must be >= 0"),
                _one_of("loss", "old_logprobs", self.old_logprobs, OLD_LOGPROBS),
            ]
        )


@dataclass(frozen=True)
class OptimConfig:
    lr: float = 2e-6
    """Peak learning rate of AdamW (the paper: 2e-6, constant)."""
    warmup_fraction: float = 0.03
    """Share of all optimiser steps spent warming up linearly from 0 (the paper: 3%)."""
    weight_decay: float = 0.0
    """AdamW decoupled weight decay."""
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_eps: float = 1e-8
    grad_clip: float = 0.05
    """Largest global gradient norm; larger gradients are scaled down (the paper: 0.05)."""
    gradient_steps: int = 2
    """Optimiser steps per batch of episodes (the paper: 2); every step after the first is off-policy."""
    minibatch_mode: str = "split"
    """`split`: each gradient step takes its own share of the batch's samples; `repeat`: every step
    goes over the whole batch again."""
    micro_batch_tokens: int = 32768
    """Token budget of one forward/backward pass (padded tokens: rows x longest row); gradients of
    the micro-batches of a step accumulate."""

    def __post_init__(self) -> None:
        _check(
            [
                (self.lr > 0, "optim.lr must be positive"),
                (0 <= self.warmup_fraction < 1, "optim.warmup_fraction must be in [0, 1)"),
                (self.weight_decay >= 0, "optim.weight_decay must be >= 0"),
                (0 <= self.adam_beta1 < 1 and 0 <= self.adam_beta2 < 1, "optim.adam_beta* must be in [0, 1)"),
                (self.adam_eps > 0, "optim.adam_eps must be positive"),
                (self.grad_clip > 0, "optim.grad_clip must be positive"),
                (self.gradient_steps >= 1, "optim.gradient_steps must be at least 1"),
                _one_of("optim", "minibatch_mode", self.minibatch_mode, MINIBATCH_MODES),
                (self.micro_batch_tokens >= 16, "optim.micro_batch_tokens must be at least 16"),
            ]
        )


@dataclass(frozen=True)
class LoopConfig:
    steps: int = 100
    """Training steps (batches of episodes) of the whole run."""
    stop_after_steps: int | None = None
    """Stop this launch after this many steps; `--resume` continues (a run across several launches)."""
    seed: int = 0
    """Seed of task sampling, model initialisation and generation."""
    tasks: str = "kernelbench"
    """Task source (kevin.tasks.load_tasks): `kernelbench`, `bundled`, a folder, a file."""
    levels: tuple[int, ...] = (1, 2)
    """Levels to train on (the paper: 1 and 2); empty: every level in the source."""
    task_size: str = "small"
    """Input size of bundled tasks: `small` (CPU) or `large` (GPU timing)."""
    split: str = "paper"
    """Held-out split: `paper` (10% of each level), `seeded` (10% overall), `none`, or a JSON file."""
    eval_every: int = 10
    """Held-out evaluation every this many steps and at the end; 0: never."""
    eval_at_start: bool = True
    """Also evaluate before the first step (the start of the before/after comparison)."""
    eval_trajectories: int = 4
    """Parallel trajectories per held-out task."""
    eval_turns: int = 4
    """Turns per held-out trajectory (the paper tests with 8)."""
    eval_max_tasks: int | None = None
    """Held-out tasks evaluated each time (the first ones); none: all."""
    checkpoint_every: int = 10
    """Checkpoint every this many steps and at the end of each launch."""
    keep_checkpoints: int = 2
    """Newest checkpoints kept on disk; older ones are deleted."""
    tensorboard: bool = True
    """Write tensorboard event files under the run directory (when tensorboard is installed)."""
    wandb_project: str = ""
    """Weights & Biases project; empty: off."""
    plot: bool = True
    """Write `curves.png` with the run's curves at the end of each launch."""

    def __post_init__(self) -> None:
        _check(
            [
                (self.steps >= 1, "loop.steps must be at least 1"),
                (
                    self.stop_after_steps is None or self.stop_after_steps >= 1,
                    "loop.stop_after_steps must be at least 1, or none to run to loop.steps",
                ),
                (bool(self.tasks), "loop.tasks is empty; use kernelbench, bundled or a path"),
                _one_of("loop", "task_size", self.task_size, ("small", "large")),
                (bool(self.split), "loop.split is empty; use paper, seeded, none or a split file"),
                (self.eval_every >= 0, "loop.eval_every must be >= 0 (0 = never)"),
                (self.eval_trajectories >= 1, "loop.eval_trajectories must be at least 1"),
                (self.eval_turns >= 1, "loop.eval_turns must be at least 1"),
                (
                    self.eval_max_tasks is None or self.eval_max_tasks >= 1,
                    "loop.eval_max_tasks must be at least 1, or none for all",
                ),
                (self.checkpoint_every >= 1, "loop.checkpoint_every must be at least 1"),
                (self.keep_checkpoints >= 1, "loop.keep_checkpoints must be at least 1"),
            ]
        )


@dataclass(frozen=True)
class MonitorConfig:
    expected_opener: str = ""
    """Text a healthy response starts with (QwQ: `Okay`); the share that does not is the paper's
    "not okay" ratio. Empty: not checked."""
    not_opener_warn: float = 0.5
    """Warn when the share of responses not opening with `expected_opener` exceeds this."""
    not_opener_stop: float | None = None
    """Stop when that share exceeds this for `patience_steps` steps in a row; none: never stop."""
    truncated_warn: float = 0.3
    """Warn when the share of completions cut at the token limit exceeds this."""
    truncated_stop: float | None = None
    """Stop when the truncated share exceeds this for `patience_steps` steps; none: never."""
    grad_norm_warn: float | None = None
    """Warn when the pre-clip gradient norm exceeds this; none: not checked."""
    grad_norm_stop: float | None = None
    """Stop when the gradient norm exceeds this for `patience_steps` steps; none: never."""
    patience_steps: int = 3
    """Consecutive steps over a stop threshold before the run stops."""

    def __post_init__(self) -> None:
        shares = [self.not_opener_warn, self.truncated_warn]
        shares += [v for v in (self.not_opener_stop, self.truncated_stop) if v is not None]
        _check(
            [
                (all(0 <= v <= 1 for v in shares), "monitor share thresholds must be in [0, 1]"),
                (self.patience_steps >= 1, "monitor.patience_steps must be at least 1"),
            ]
        )


@dataclass(frozen=True)
class DistributedConfig:
    fsdp: bool = True
    """Shard the learner with FSDP2 (fully_shard) when launched with more than one process."""
    timeout_s: float = 7200.0
    """Collective timeout: rank 0 runs the rollouts while the others wait at a collective."""

    def __post_init__(self) -> None:
        _check([(self.timeout_s > 0, "distributed.timeout_s must be positive seconds")])


@dataclass(frozen=True)
class TrainConfig:
    preset: str = "custom"
    """The preset this config started from (for the record)."""
    model: ModelConfig = field(default_factory=ModelConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    evaluator: EvaluatorConfig = field(default_factory=EvaluatorConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    loop: LoopConfig = field(default_factory=LoopConfig)
    monitor: MonitorConfig = field(default_factory=MonitorConfig)
    distributed: DistributedConfig = field(default_factory=DistributedConfig)

    def __post_init__(self) -> None:
        _check(
            [
                (
                    self.loop.eval_every == 0 or self.loop.eval_every <= self.loop.steps,
                    "loop.eval_every exceeds loop.steps; lower it, or 0 to turn held-out evaluation off",
                ),
                (
                    self.loop.stop_after_steps is None or self.loop.stop_after_steps <= self.loop.steps,
                    "loop.stop_after_steps exceeds loop.steps; lower it or raise loop.steps",
                ),
            ]
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# ---------------------------------------------------------------------------------------------
# Presets


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
    """A small policy learning on one H200 from real GPU rewards. Start it from a warm-started
    checkpoint (`--set model.name_or_path=DIR`): a randomly initialised model never writes a kernel."""
    return TrainConfig(
        preset="h200",
        model=ModelConfig(
            tiny_layers=6,
            tiny_hidden_size=384,
            tiny_heads=6,
            tiny_kv_heads=2,
            tiny_intermediate_size=1024,
            tiny_vocab_size=4096,
        ),
        rollout=RolloutConfig(
            tasks_per_step=4,
            trajectories=8,
            turns=2,
            backend="cuda",
            max_completion_tokens=1024,
            generation_batch_size=64,
        ),
        evaluator=EvaluatorConfig(max_in_flight=12, timing_budget_ms=200.0, timing_warmup_ms=20.0),
        optim=OptimConfig(lr=2e-5, grad_clip=1.0, micro_batch_tokens=65536),
        loop=LoopConfig(
            steps=60,
            tasks="bundled",
            levels=(),
            task_size="large",
            split="paper",
            eval_every=10,
            eval_trajectories=8,
            eval_turns=2,
            checkpoint_every=5,
        ),
    )


def paper() -> TrainConfig:
    """The paper's recipe (DESIGN.md §3): QwQ-32B, 8 tasks x 16 trajectories x 4 turns, gamma 0.4
    sum, clip 0.2/0.28, no KL, lr 2e-6 constant with 3% warm-up, grad clip 0.05, 2 gradient steps
    per batch, 16K completions raised to 22K at step 30; 8 GPUs under torchrun with FSDP2, sampling
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


# ---------------------------------------------------------------------------------------------
# Overrides and JSON


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise ValueError("expected true or false")


def _parse_value(text: str, annotation: Any) -> Any:
    """`text` as a value of type `annotation` (int, float, bool, str, tuples, `X | None`)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if text.strip().lower() in ("none", "null"):
            return None
        return _parse_value(text, members[0])
    if origin is tuple:
        (item, *_rest) = typing.get_args(annotation)
        parts = [p.strip() for p in text.split(",") if p.strip()]
        return tuple(_parse_value(p, item) for p in parts)
    if annotation is bool:
        return _parse_bool(text)
    if annotation is int:
        return int(text.replace("_", ""))
    if annotation is float:
        return float(text)
    if annotation is str:
        return text
    raise ValueError(f"fields of type {annotation} cannot be set from the command line")


def _describe(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        return f"{_describe(members[0])} or none"
    if origin is tuple:
        return f"a comma-separated list of {_describe(typing.get_args(annotation)[0])}"
    return getattr(annotation, "__name__", str(annotation))


def apply_override(config: TrainConfig, assignment: str) -> TrainConfig:
    """`config` with one `section.field=value` applied; UsageError (one line) when it does not fit."""
    key, equals, text = assignment.partition("=")
    key = key.strip()
    section_name, dot, field_name = key.partition(".")
    sections = {f.name: f for f in dataclasses.fields(config) if dataclasses.is_dataclass(f.default_factory())}
    if not equals or not dot:
        raise UsageError(f"--set {assignment!r}: write section.field=value, e.g. loss.clip_high=0.3")
    if section_name not in sections:
        raise UsageError(f"--set {key}: unknown section {section_name!r}; known: {', '.join(sections)}")
    section = getattr(config, section_name)
    hints = typing.get_type_hints(type(section))
    if field_name not in hints:
        known = ", ".join(f.name for f in dataclasses.fields(section))
        raise UsageError(f"--set {key}: {section_name} has no field {field_name!r}; known: {known}")
    try:
        value = _parse_value(text, hints[field_name])
    except ValueError as exc:
        raise UsageError(f"--set {key}={text}: expected {_describe(hints[field_name])} ({exc})") from None
    try:
        return dataclasses.replace(config, **{section_name: dataclasses.replace(section, **{field_name: value})})
    except UsageError as exc:
        raise UsageError(f"--set {key}={text}: {exc}") from None


def apply_overrides(config: TrainConfig, assignments: list[str] | tuple[str, ...]) -> TrainConfig:
    for assignment in assignments:
        config = apply_override(config, assignment)
    return config


def config_from_dict(data: dict[str, Any]) -> TrainConfig:
    """Rebuild a TrainConfig from `to_dict()` output (lists become tuples; unknown keys are errors)."""
    sections: dict[str, Any] = {}
    for f in dataclasses.fields(TrainConfig):
        if f.name not in data:
            continue
        if f.name == "preset":
            sections["preset"] = data["preset"]
            continue
        cls = type(f.default_factory())
        hints = typing.get_type_hints(cls)
        values = dict(data[f.name])
        unknown = set(values) - set(hints)
        if unknown:
            raise UsageError(f"config section {f.name} has unknown fields {sorted(unknown)}")
        for name, value in values.items():
            if isinstance(value, list):
                values[name] = tuple(value)
        sections[f.name] = cls(**values)
    return TrainConfig(**sections)


def save_config(config: TrainConfig, run_dir: str | Path) -> Path:
    path = Path(run_dir) / CONFIG_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config.to_dict(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


def load_config(run_dir: str | Path) -> TrainConfig:
    path = Path(run_dir) / CONFIG_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path} not found; is {run_dir} a training run directory?") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path} is not valid JSON ({exc.msg})") from None
    return config_from_dict(data)


LAUNCH_FIELDS = frozenset({"loop.stop_after_steps", "loop.steps"})
"""Fields a resumed run may change: how far this launch goes, and how far the run goes."""


def config_differences(saved: TrainConfig, current: TrainConfig) -> list[str]:
    """`section.field` keys whose values differ, launch fields excluded."""
    differences = []
    for section, values in saved.to_dict().items():
        if not isinstance(values, dict):
            continue
        for name, value in values.items():
            key = f"{section}.{name}"
            if key not in LAUNCH_FIELDS and current.to_dict()[section][name] != value:
                differences.append(key)
    return differences
