"""Supervised warm start: a small model made here learns the corpus before RL (issue #16).

No pretrained weights reach the GPU machine, and a random model never writes a kernel, so the policy
of the learning run starts from weights made here:

1. tokenizer: the tiny byte-level BPE (kevin.train.model) trained on kevin's own texts plus the
   corpus's prompts and completions (kevin.train.corpus), so a kernel costs few tokens;
2. model: the tiny Llama of `ModelConfig` (its `tiny_*` fields; the h200 preset's is about 27M
   parameters), random weights from the seed;
3. training: next-token cross-entropy on the completion tokens only (prompt and padding masked),
   mean over the batch's completion tokens (with `constant_weight` other than 1, the tokens that
   copy the prompt's constants weigh that much: kevin.train.copying; the log's `loss` stays the
   plain mean); AdamW (betas 0.9/0.95), linear warm-up then cosine decay to `min_lr_fraction` of
   the peak, global gradient-norm clip; bf16 autocast on CUDA, fp32 weights.
   Each batch is `batch_size` samples from a seeded shuffle (every sample once per epoch), padded on
   the right to the batch's longest row; samples longer than `max_tokens` are dropped (counted);
4. output: a Hugging Face checkpoint folder (weights, config, generation config, tokenizer) that
   `kevin train --set model.name_or_path=DIR` loads with `from_pretrained`, so the RL run uses this
   very tokenizer; `sft_log.jsonl` (one row per step: loss, learning rate, tokens, seconds) and
   `sft.json` (the config and the result).

Prompts and completions become tokens through `TextCodec`, exactly as the sampler and the learner of
the RL run do (prompt and completion encoded apart; the completion ends with end-of-sequence).
`time_limit_s` stops training early at a step boundary (the checkpoint is still written).

`kevin sft --family DIR --out CKPT` runs it on a family written by `kevin family`, with the training
tasks' corpus only (held-out tasks are never trained on). What this does not do: resume, several
GPUs, or packing several samples into one row (rows are about the same length here).

Why one module of ~520 lines: the warm start's data, schedule, loop and command read as one
procedure, top to bottom (the constants' tokens and the held-out scores: kevin.train.copying).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from kevin.errors import UsageError
from kevin.train.config import ModelConfig
from kevin.train.copying import (
    collate,
    constant_tokens,
    token_weights,
    validation_rows,
    validation_scores,
    weighted_loss,
)
from kevin.train.corpus import CONSTANT_DRAWS, LENGTH_CAP, Sample

SFT_LOG = "sft_log.jsonl"
SFT_RECORD = "sft.json"


@dataclass(frozen=True)
class SFTConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    """The model to build (`tiny_*` fields; `name_or_path` `tiny`) or continue from (a checkpoint)."""
    steps: int = 600
    """Optimiser steps (each one batch)."""
    batch_size: int = 16
    """Samples per step."""
    lr: float = 1e-3
    """Peak learning rate."""
    warmup_fraction: float = 0.05
    """Share of the steps spent warming up linearly from 0."""
    min_lr_fraction: float = 0.1
    """The cosine decay ends at this share of the peak learning rate."""
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    """Largest global gradient norm."""
    max_tokens: int = 2560
    """Longest prompt + completion trained on; longer samples are dropped."""
    time_limit_s: float | None = None
    """Stop at the first step boundary after this many seconds of training; none: run every step."""
    log_every: int = 25
    """Print a loss line every this many steps (every step goes to sft_log.jsonl)."""
    val_every: int = 200
    """Loss on the validation samples (the held-out tasks' corpus) every this many steps, at the
    first step and at the last: the warm start's generalisation, seen before any GPU evaluation
    (0: never)."""
    val_samples: int = 64
    """Most validation samples scored (spread evenly over those given)."""
    constant_weight: float = 1.0
    """Weight of the tokens that copy a prompt's constants in the loss, the rest 1
    (kevin.train.copying; 1: the plain mean over completion tokens). On the CPU (s31,
    bench/results/sft_constants_cpu) 8 copied more constants but wrote other ops more often."""
    seed: int = 0

    def __post_init__(self) -> None:
        rules = [
            (self.steps >= 1, "sft steps must be at least 1"),
            (self.batch_size >= 1, "sft batch_size must be at least 1"),
            (self.lr > 0, "sft lr must be positive"),
            (0 <= self.warmup_fraction < 1, "sft warmup_fraction must be in [0, 1)"),
            (0 <= self.min_lr_fraction <= 1, "sft min_lr_fraction must be in [0, 1]"),
            (self.grad_clip > 0, "sft grad_clip must be positive"),
            (self.max_tokens >= 16, "sft max_tokens must be at least 16"),
            (
                self.time_limit_s is None or self.time_limit_s > 0,
                "sft time_limit_s must be positive, or none",
            ),
            (self.log_every >= 1, "sft log_every must be at least 1"),
            (self.val_every >= 0, "sft val_every must be 0 (never) or positive"),
            (self.val_samples >= 1, "sft val_samples must be at least 1"),
            (self.constant_weight > 0, "sft constant_weight must be positive (1: no extra weight)"),
        ]
        for ok, message in rules:
            if not ok:
                raise UsageError(message)


def sft_preset(name: str) -> SFTConfig:
    """The warm start matching a train preset's model: `h200` (about 27M parameters, 1600 steps in
    about 3 minutes on an H200: after 700 steps on 40 tasks 16% of its held-out kernels were
    correct, session 9) or `smoke` (the CPU smoke model, seconds)."""
    from kevin.train.presets import preset

    model = preset(name).model
    if name == "h200":
        return SFTConfig(model=model, steps=1600, batch_size=16, lr=1e-3, time_limit_s=180.0)
    return SFTConfig(model=model, steps=20, batch_size=4, lr=3e-3, max_tokens=4096, log_every=5)


@dataclass
class SFTResult:
    out_dir: Path
    steps: int
    losses: list[float]
    seconds: float
    parameters: int
    samples: int
    dropped: int
    """Samples longer than max_tokens, not trained on."""
    stopped_by_time: bool = False
    val_losses: list[tuple[int, float]] = field(default_factory=list)
    """(step, mean loss per completion token on the validation samples)."""
    val_constants: list[tuple[int, float, float]] = field(default_factory=list)
    """(step, share of the validation samples' constants copied, their mean probability):
    `validation_scores`."""


# ---------------------------------------------------------------------------------------------
# Data


def token_ids(samples: Sequence[Sample], codec: Any) -> tuple[dict[str, list[int]], list[list[int]]]:
    """(ids of each distinct prompt, ids of each sample's completion with the end token). Each
    distinct prompt is encoded once (the learning run's 35k samples hold ~1.7k prompts) and the
    completions in one batch: one call per sample took 78 s of the H200 run's 120 s of preparation."""
    distinct = sorted({sample.prompt for sample in samples})
    prompts = dict(zip(distinct, codec.encode_prompts(distinct)))
    return prompts, codec.encode_completions([sample.completion for sample in samples], "stop")


def encode_samples(
    samples: Sequence[Sample],
    codec: Any,
    max_tokens: int,
    ids: tuple[dict[str, list[int]], list[list[int]]] | None = None,
) -> tuple[list[tuple[list[int], int]], int]:
    """(token ids, prompt length) per sample that fits `max_tokens`, and how many did not; `ids`:
    what `token_ids` gave for these samples, when the caller has it already."""
    prompts, completions = ids or token_ids(samples, codec)
    encoded, dropped = [], 0
    for sample, completion in zip(samples, completions):
        prompt = prompts[sample.prompt]
        if len(prompt) + len(completion) > max_tokens:
            dropped += 1
            continue
        encoded.append((prompt + completion, len(prompt)))
    return encoded, dropped


def batches(count: int, batch_size: int, seed: int):
    """Endless index batches: a fresh seeded shuffle each epoch, every index once per epoch."""
    rng = random.Random(seed)
    while True:
        order = list(range(count))
        rng.shuffle(order)
        for start in range(0, count, batch_size):
            yield order[start : start + batch_size]


def lr_factor(step: int, config: SFTConfig, elapsed_s: float = 0.0) -> float:
    """Multiplier of the peak rate at 0-based `step`: linear warm-up, then cosine to min_lr_fraction.
    With a time limit the decay runs by whichever is further along, the steps or the `elapsed_s` of
    training: a warm start stopped by its limit has decayed, not been cut off near its peak rate
    (a run's steps are planned before the machine's pace is known)."""
    warmup = max(1, int(config.steps * config.warmup_fraction))
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, config.steps - warmup)
    if config.time_limit_s is not None:
        progress = max(progress, elapsed_s / config.time_limit_s)
    progress = min(1.0, progress)
    return config.min_lr_fraction + (1 - config.min_lr_fraction) * 0.5 * (1 + math.cos(math.pi * progress))


# ---------------------------------------------------------------------------------------------
# Training


def spread(items: Sequence, count: int) -> list:
    """At most `count` of `items`, evenly spaced, in order."""
    if len(items) <= count:
        return list(items)
    return [items[i * len(items) // count] for i in range(count)]


def build_tokenizer(config: SFTConfig, samples: Sequence[Sample]) -> Any:
    """The tiny BPE trained with the corpus's texts, or the checkpoint's own tokenizer."""
    from kevin.train.corpus import tokenizer_texts
    from kevin.train.model import load_tokenizer, train_tiny_tokenizer

    if not config.model.is_tiny:
        return load_tokenizer(config.model)
    return train_tiny_tokenizer(config.model.tiny_vocab_size, tokenizer_texts(samples))


@dataclass
class Prepared:
    """The tokenizer and the encoded samples: the CPU half of `train_sft`, which a caller may run
    while something else uses the GPU."""

    tokenizer: Any
    codec: Any
    encoded: list[tuple[list[int], int]]
    dropped: int
    prompt_tokens: list[int] = field(default_factory=list)
    """Length of each distinct prompt, for corpus_stats."""
    completion_tokens: list[int] = field(default_factory=list)
    """Length of each sample's completion (no end token), dropped ones included, for corpus_stats."""
    marks: list[list[list[int]]] = field(default_factory=list)
    """Per encoded row, the completion token indices of each constant it copies
    (`kevin.train.copying.constant_tokens`); empty unless `prepare` was asked for them."""


def prepare(config: SFTConfig, samples: Sequence[Sample], *, marks: bool | None = None) -> Prepared:
    """Train the tokenizer and encode `samples` with it; `marks`: also find each row's constant
    tokens (default: when config.constant_weight is not 1, which needs them)."""
    from kevin.train.model import TextCodec

    if not samples:
        raise UsageError("the corpus is empty: no samples to train on")
    tokenizer = build_tokenizer(config, samples)
    codec = TextCodec(tokenizer)
    ids = token_ids(samples, codec)
    encoded, dropped = encode_samples(samples, codec, config.max_tokens, ids)
    if not encoded:
        raise UsageError(f"every sample is longer than max_tokens={config.max_tokens}; raise it")
    prompts, completions = ids
    kept_marks = []
    if marks is None:
        marks = config.constant_weight != 1.0
    if marks:  # the kept rows' only, as encode_samples keeps them
        found = constant_tokens(samples, codec)
        kept_marks = [
            constants
            for sample, completion, constants in zip(samples, completions, found)
            if len(prompts[sample.prompt]) + len(completion) <= config.max_tokens
        ]
    return Prepared(
        tokenizer,
        codec,
        encoded,
        dropped,
        prompt_tokens=[len(prompt) for prompt in prompts.values()],
        completion_tokens=[len(completion) - 1 for completion in completions],
        marks=kept_marks,
    )


def train_sft(
    config: SFTConfig,
    samples: Sequence[Sample],
    out_dir: str | Path,
    *,
    prepared: Prepared | None = None,
    validation: Sequence[Sample] = (),
    out: Callable[[str], None] = print,
) -> SFTResult:
    """Train on `samples` (tokenized by `prepare`, or as `prepared` says) and write the checkpoint
    folder `out_dir` (see the module docstring). `validation` (the held-out tasks' corpus) is scored,
    never trained on, every config.val_every steps."""
    from kevin.train.logprobs import autocast_context
    from kevin.train.model import build_model, count_parameters, resolve_compute_dtype, resolve_device

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    prepared = prepared or prepare(config, samples)
    tokenizer, codec, encoded, dropped, marks = (
        prepared.tokenizer,
        prepared.codec,
        prepared.encoded,
        prepared.dropped,
        prepared.marks,
    )
    weighted = config.constant_weight != 1.0
    if weighted and len(marks) != len(encoded):
        raise ValueError("constant_weight needs the rows' constant tokens: prepare() with the same config")
    device = resolve_device(config.model)
    dtype = resolve_compute_dtype(config.model, device)
    torch.manual_seed(config.seed)
    model = build_model(config.model, tokenizer, seed=config.seed).to(device)
    model.train()
    _, parameters = count_parameters(model)
    optimizer = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad],
        lr=config.lr,
        betas=(0.9, 0.95),
        weight_decay=config.weight_decay,
    )
    out(
        f"kevin sft: {parameters / 1e6:.1f}M parameters, {len(encoded)} samples ({dropped} too long), "
        f"vocabulary {len(tokenizer)}, {config.steps} steps of {config.batch_size} on {device}"
    )
    held, held_marks = validation_rows(spread(validation, config.val_samples), codec, config.max_tokens)
    val_losses: list[tuple[int, float]] = []
    val_constants: list[tuple[int, float, float]] = []
    losses: list[float] = []
    stopped_by_time = False
    draw = batches(len(encoded), config.batch_size, config.seed)
    trained_from = time.monotonic()
    with (out_dir / SFT_LOG).open("w", encoding="utf-8") as log:
        for step in range(config.steps):
            for group in optimizer.param_groups:
                group["lr"] = config.lr * lr_factor(step, config, time.monotonic() - trained_from)
            picked = next(draw)
            rows = [encoded[i] for i in picked]
            batch = {k: v.to(device) for k, v in collate(rows, codec.pad_id).items()}
            if weighted:
                weights = token_weights(
                    rows, [marks[i] for i in picked], config.constant_weight, batch["labels"].shape[1]
                )
                with autocast_context(device, dtype):
                    logits = model(
                        input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
                    ).logits
                objective, loss = weighted_loss(logits, batch["labels"], weights)
            else:
                with autocast_context(device, dtype):
                    objective = loss = model(**batch).loss
            optimizer.zero_grad(set_to_none=True)
            objective.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            optimizer.step()
            value = float(loss.detach())
            losses.append(value)
            seconds = time.monotonic() - trained_from
            row = {
                "step": step + 1,
                "loss": value,
                "grad_norm": float(grad_norm),
                "lr": optimizer.param_groups[0]["lr"],
                "tokens": int(batch["attention_mask"].sum()),
                "seconds": round(seconds, 3),
            }
            if weighted:
                row["objective"] = float(objective.detach())
            out_of_time = config.time_limit_s is not None and seconds > config.time_limit_s
            last = out_of_time or step + 1 == config.steps
            if held and config.val_every and (step == 0 or (step + 1) % config.val_every == 0 or last):
                scores = validation_scores(
                    model, held, codec.pad_id, config.batch_size, device, dtype, held_marks
                )
                row["val_loss"] = scores["loss"]
                val_losses.append((step + 1, row["val_loss"]))
                if "constants" in scores:
                    row["val_constants"], row["val_constant_p"] = scores["constants"], scores["constant_p"]
                    val_constants.append((step + 1, scores["constants"], scores["constant_p"]))
            log.write(json.dumps(row) + "\n")
            if (step + 1) % config.log_every == 0 or step == 0 or last:
                shown = f" held-out {row['val_loss']:.4f}" if "val_loss" in row else ""
                if "val_constants" in row:
                    shown += f" constants {row['val_constants']:.2f} (p {row['val_constant_p']:.2f})"
                out(f"sft step {step + 1}/{config.steps} loss {value:.4f}{shown} lr {row['lr']:.2e} {seconds:.0f}s")
            if out_of_time:
                stopped_by_time = step + 1 < config.steps
                if stopped_by_time:
                    out(f"sft: stopped at step {step + 1} by the time limit ({config.time_limit_s:.0f} s)")
                break
    model.eval()
    model.save_pretrained(str(out_dir))
    tokenizer.save_pretrained(str(out_dir))
    result = SFTResult(
        out_dir,
        len(losses),
        losses,
        time.monotonic() - started,
        parameters,
        len(encoded),
        dropped,
        stopped_by_time,
        val_losses,
        val_constants,
    )
    record = {
        "config": dataclasses.asdict(config),
        "result": {
            k: v for k, v in dataclasses.asdict(result).items() if k not in ("losses", "out_dir", "val_losses", "val_constants")
        },
        "first_loss": losses[0],
        "last_loss": losses[-1],
        "validation_samples": len(held),
        "val_losses": val_losses,
        "val_constants": val_constants,
    }
    (out_dir / SFT_RECORD).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    out(
        f"kevin sft: {len(losses)} steps in {result.seconds:.0f}s, loss {losses[0]:.3f} -> {losses[-1]:.3f}; checkpoint in {out_dir}"
    )
    return result


# ---------------------------------------------------------------------------------------------
# `kevin sft`


def _run(args: argparse.Namespace) -> int:
    from kevin.train.corpus import build_corpus
    from kevin.train.family import load_family

    check_corpus_arguments(args)
    out_dir = Path(args.out)
    if (out_dir / "config.json").exists():
        raise UsageError(f"{out_dir} already holds a model; pick a new --out")
    specs, train_tasks, heldout_tasks = load_family(args.family)
    config = sft_preset(args.preset)
    changes = {
        k: v
        for k, v in {"steps": args.steps, "batch_size": args.batch_size, "lr": args.lr}.items()
        if v is not None
    }
    if args.time_limit_s is not None:
        changes["time_limit_s"] = args.time_limit_s if args.time_limit_s > 0 else None
    if args.constant_weight is not None:
        changes["constant_weight"] = args.constant_weight
    config = dataclasses.replace(config, seed=args.seed, **changes)
    from kevin.train.presets import preset

    one_shot = preset(args.preset).rollout.one_shot  # the prompts `kevin train --preset` will write
    samples = build_corpus(
        specs,
        train_tasks,
        args.backend,
        constant_draws=args.constant_draws,
        length_cap=args.length_cap,
        seed=args.seed,
        one_shot=one_shot,
    )
    validation = build_corpus(specs, heldout_tasks, args.backend, one_shot=one_shot)
    train_sft(config, samples, out_dir, validation=validation)
    return 0


def register_commands(subparsers) -> None:
    parser = subparsers.add_parser(
        "sft",
        help="warm-start a small model on the generated kernel corpus (before kevin train)",
        description="Train the tokenizer and a small model from scratch on the corpus of a task family "
        "(training tasks only) and write a checkpoint for `kevin train --set model.name_or_path=DIR`.",
    )
    parser.add_argument("--family", required=True, help="a folder written by `kevin family`")
    parser.add_argument("--out", required=True, help="checkpoint folder to write")
    parser.add_argument(
        "--preset", choices=("h200", "smoke"), default="smoke", help="model size and schedule (default smoke)"
    )
    parser.add_argument(
        "--backend", choices=("cuda", "cpp"), default="cuda", help="kernel back end of the corpus"
    )
    parser.add_argument("--steps", type=int, help="optimiser steps (default: the preset's)")
    parser.add_argument("--batch-size", type=int, help="samples per step (default: the preset's)")
    parser.add_argument("--lr", type=float, help="peak learning rate (default: the preset's)")
    parser.add_argument("--time-limit-s", type=float, help="stop training after this many seconds (0: none)")
    add_corpus_arguments(parser)
    parser.add_argument("--seed", type=int, default=0)
    parser.set_defaults(run=_run)


def add_corpus_arguments(parser: argparse.ArgumentParser) -> None:
    """The corpus's weights and its constants' weight in the loss, for `kevin sft` and the learning
    run (bench/learning_run.py) alike."""
    parser.add_argument(
        "--constant-draws",
        type=int,
        default=CONSTANT_DRAWS,
        help=f"copies of each training task in the corpus, with other draws of its constants "
        f"(kevin.train.corpus; default {CONSTANT_DRAWS}; 1: each task as written)",
    )
    parser.add_argument(
        "--length-cap",
        type=int,
        default=LENGTH_CAP,
        help=f"copies of a rare chain length's tasks, at most (kevin.train.corpus.length_repeats; default "
        f"{LENGTH_CAP}; 1: every task the same weight)",
    )
    parser.add_argument(
        "--constant-weight",
        type=float,
        help="weight in the loss of the tokens that copy the prompt's constants, the rest 1 "
        "(kevin.train.copying; default: the preset's; 1: the plain mean)",
    )


def check_corpus_arguments(args: argparse.Namespace) -> None:
    """UsageError for a weight `add_corpus_arguments` cannot take."""
    if args.constant_draws < 1:
        raise UsageError(f"--constant-draws {args.constant_draws}: use 1 or more (1: each task as written)")
    if args.length_cap < 1:
        raise UsageError(f"--length-cap {args.length_cap}: use 1 or more (1: every task the same weight)")
    if args.constant_weight is not None and not args.constant_weight > 0:
        raise UsageError(
            f"--constant-weight {args.constant_weight}: use a positive weight (1: no extra weight)"
        )
