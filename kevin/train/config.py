"""Training configuration: typed, frozen dataclasses, one per part of the run, one docstring per field.

    TrainConfig(model, rollout, reward, evaluator, loss, optim, loop, monitor, distributed)

Every value has one home here; the loop reads nothing from anywhere else. Each section validates
itself in `__post_init__` and raises `UsageError` with a message that names the field and the fix;
`TrainConfig` checks the rules that span sections. Defaults are the paper's where it names one
(DESIGN.md §3). Named configs are in `kevin.train.presets` (smoke, h200, paper); dotted overrides
and the JSON form in `kevin.train.overrides`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from kevin.errors import UsageError
from kevin.rl import reward

DTYPES = ("auto", "fp32", "bf16", "fp16")
POLICIES = ("hf", "http")
BACKENDS = ("cuda", "triton", "cpp")
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
    tiny_vocab_size: int = 2048
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
                (
                    self.tiny_heads % self.tiny_kv_heads == 0,
                    "model.tiny_kv_heads must divide model.tiny_heads",
                ),
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
    """Kernel back end for prompts and evaluation: `cuda`, `triton` (@triton.jit kernels) or `cpp` (CPU machines)."""
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
    one_shot: bool = True
    """Turn-1 prompts carry the one-shot example (the paper's prompt). The warm start's corpus
    (kevin.train.corpus) must be built the same way: bench/learning_run.py reads it from here."""
    evaluate_while_generating: bool = True
    """Evaluate each candidate as soon as its completion is written (http: per request, hf: per
    generation batch). Turn it off when the policy samples on a GPU the evaluator times kernels on."""
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
    reuse_verdicts: bool = False
    """Give a (task, candidate) evaluated in an earlier step of this launch that step's verdict
    instead of evaluating it again (a verdict our infrastructure failed is never reused). Identical
    candidates within a step are always evaluated once. For small policies that repeat themselves;
    the cache is not checkpointed, so a resumed run evaluates anew."""
    spare_workers: int | None = None
    """Workers booted ahead of their jobs (local kind; kevin.evaluator.spares); none: the larger of
    `max_in_flight` and a step's candidates. A spare handed out while still booting makes its job
    wait: in session 23's H200 run (12 in flight, 16 candidates a step, 12 spares) 5-7 candidates
    of each early step waited 15-27 s, most of a step's evaluation, for spares started at that
    step's first takes."""
    share_device: bool = True
    """When the trainer computes on a GPU that the local evaluator also times on, its generation
    batches and gradient steps take the shared side of that device's lock (kevin.evaluator.devlock),
    so no timing overlaps them: the device lock's exclusive timing otherwise knows nothing of the
    trainer's kernels. In session 22's H200 learning run, without it, timed cycles of 0.2-0.5 ms
    came out at ~8 ms (a baseline of 7.7 ms for a 0.2 ms reference: rewards of 50-80x; brackets of
    8 ms: honest kernels timed at 0, `impossible_speedup`). Costs evaluation some of its overlap
    with generation."""

    def __post_init__(self) -> None:
        _check(
            [
                _one_of("evaluator", "kind", self.kind, EVALUATOR_KINDS),
                (self.max_in_flight >= 1, "evaluator.max_in_flight must be at least 1"),
                (
                    self.spare_workers is None or self.spare_workers >= 0,
                    "evaluator.spare_workers must be >= 0, or none",
                ),
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
    time_limit_s: float | None = None
    """Wall-clock budget of this launch's loop: it ends (held-out evaluation and checkpoint included)
    at the first step after which another step plus an evaluation would pass it; none: no limit."""
    seed: int = 0
    """Seed of task sampling, model initialisation and generation."""
    tasks: str = "kernelbench"
    """Task source (kevin.tasks.load_tasks): `kernelbench`, `bundled`, a folder, a file."""
    levels: tuple[int, ...] = (1, 2)
    """Levels to train on (the paper: 1 and 2); empty: every level in the source."""
    task_size: str = "small"
    """Input size of bundled tasks: `small` (CPU) or `large` (GPU timing)."""
    split: str = "paper"
    """Held-out split: `paper` (10% of each level), `seeded` (10% overall), `none`, or a JSON file
    (a generated set's split.json holds out whole operator sequences: `kevin tasks generate`)."""
    exclude: str = "kernelbench"
    """A validation report whose flagged tasks (degenerate, nondeterministic) are trained and held
    out on neither side: bench/kernelbench_hygiene.py's JSON or `kevin tasks validate --json`;
    `kernelbench` (the default) is the list kevin ships for KernelBench levels 1-3 (19 problems,
    kevin.tasks.splits.KERNELBENCH_EXCLUDED); empty: none."""
    eval_every: int = 10
    """Held-out evaluation every this many steps and after the last step; 0: never."""
    eval_at_start: bool = True
    """Also evaluate before the first step (the start of the before/after comparison)."""
    eval_at_resume: bool = False
    """A resumed launch first evaluates the held-out tasks at the step it restored, into
    heldout_resumed.jsonl: a run carried to another machine (an H100 after an H200) then has a
    base its later steps pair with on the same device (bench/heldout_paired.py --rescored)."""
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
                (
                    self.time_limit_s is None or self.time_limit_s > 0,
                    "loop.time_limit_s must be positive seconds, or none for no limit",
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
    drift_warn: float | None = 0.005
    """Warn when the learner's drift (k3 KL(old || new) per token on the off-policy gradient steps,
    kevin.train.grpo.policy_drift) exceeds this; none: not checked. s20's collapsing run (lr 1e-4,
    replayed by bench/rl_drift.py) reached 0.001 at step 4 and 0.007 at step 10."""
    drift_stop: float | None = None
    """Stop when the drift exceeds this for `patience_steps` steps in a row; none: never."""
    drift_max_warn: float | None = 3.0
    """Warn when one update changed a sampled token's probability by more than e^this (|log r| on
    the off-policy step; 3.0: 20x); none: not checked. s20: 6.4 at step 10, 13.5 at step 13."""
    drift_max_stop: float | None = None
    """Stop when that exceeds this for `patience_steps` steps in a row; none: never."""
    format_error_warn: float = 0.1
    """Warn when the share of responses with no parseable answer exceeds this."""
    format_error_stop: float | None = None
    """Stop when that share exceeds this for `patience_steps` steps in a row; none: never."""
    length_drop_warn: float | None = 0.5
    """Warn when a step's mean completion length is below (1 - this) x the first step's (0.5: half);
    none: not checked."""
    length_drop_stop: float | None = None
    """Stop when that share lost exceeds this for `patience_steps` steps in a row; none: never."""
    nonfinite_stop: bool = True
    """Stop when updates were dropped for a non-finite gradient in `patience_steps` steps in a row."""
    patience_steps: int = 3
    """Consecutive steps over a stop threshold before the run stops."""

    def __post_init__(self) -> None:
        shares = [self.not_opener_warn, self.truncated_warn, self.format_error_warn]
        optional = (
            self.not_opener_stop,
            self.truncated_stop,
            self.format_error_stop,
            self.length_drop_warn,
            self.length_drop_stop,
        )
        shares += [v for v in optional if v is not None]
        _check(
            [
                (all(0 <= v <= 1 for v in shares), "monitor share thresholds must be in [0, 1]"),
                (self.patience_steps >= 1, "monitor.patience_steps must be at least 1"),
                (
                    all(
                        v is None or v >= 0
                        for v in (self.drift_warn, self.drift_stop, self.drift_max_warn, self.drift_max_stop)
                    ),
                    "monitor.drift_* thresholds must be >= 0",
                ),
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
                    self.loop.stop_after_steps is None or self.loop.stop_after_steps <= self.loop.steps,
                    "loop.stop_after_steps exceeds loop.steps; lower it or raise loop.steps",
                ),
            ]
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
