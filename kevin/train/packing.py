"""From episodes to tensors: one sample per turn, mini-batches per gradient step, micro-batches by tokens.

Per-turn splitting (the paper): every turn of every trajectory is its own sample, made of that turn's
own prompt (task, instructions and the earlier attempts' kernels, summaries and feedback, never their
reasoning) and that turn's completion. The loss mask covers the completion's tokens only.

Tokens: when the sampler returned a `SampledGeneration`, its own prompt and completion token ids are
used as they are; otherwise the prompt and completion texts are tokenised by the caller's `Tokenize`
(the end-of-sequence token appended when the completion ended by itself).

Which turns become samples: only trainable ones (a score: infrastructure failures have none), with an
advantage, and a non-empty completion; with `mask_truncated`, completions cut at the token limit are
left out too. Samples with advantage 0 are kept here: they count in the length normalisation; the
learner skips their forward pass when they cannot contribute a gradient.

Micro-batches are padded, not concatenated: rows are left-padded to the longest row, so every
completion ends in the last column and the learner computes logits for the last K + 1 positions only
(K = the longest completion), which saves the output projection over long multi-turn prompts. A
micro-batch holds as many rows as fit `budget_tokens` >= rows x longest row; rows are sorted by length
first so little is padding. A row longer than the budget gets a micro-batch of its own.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from kevin.rl.env import Trajectory
from kevin.train.sampled import SampledGeneration


@dataclass(frozen=True)
class Sample:
    """One turn as the learner sees it."""

    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    advantage: float
    sampler_logprobs: tuple[float, ...] | None = None
    truncated: bool = False
    task: str = ""
    turn: int = 0
    index: int = 0
    """Position in the step's list of samples: identifies the sample across ranks and steps."""

    @property
    def length(self) -> int:
        return len(self.prompt_ids) + len(self.completion_ids)


class Tokenize(Protocol):
    """Text to token ids, as the policy's sampler would have produced them."""

    def encode_prompt(self, text: str) -> list[int]: ...

    def encode_completion(self, text: str, finish_reason: str | None) -> list[int]: ...


def samples_from_trajectories(
    trajectories: Sequence[Trajectory], tokenize: Tokenize | None, *, mask_truncated: bool = False
) -> list[Sample]:
    """The learner's samples of one step, in trajectory and turn order (see the module docstring)."""
    samples: list[Sample] = []
    for trajectory in trajectories:
        for turn in trajectory.turns:
            if not turn.trainable or turn.advantage is None:
                continue
            generation = turn.generation
            if mask_truncated and generation.truncated:
                continue
            logprobs = None
            if isinstance(generation, SampledGeneration) and generation.token_ids:
                prompt_ids = tuple(generation.prompt_token_ids)
                completion_ids = tuple(generation.token_ids)
                logprobs = generation.logprobs
            else:
                if tokenize is None:
                    raise ValueError("completions without token ids need a Tokenize to become samples")
                prompt_ids = tuple(tokenize.encode_prompt(turn.prompt.text))
                completion_ids = tuple(tokenize.encode_completion(generation.text, generation.finish_reason))
            if not completion_ids or not prompt_ids:
                continue
            samples.append(
                Sample(
                    prompt_ids=prompt_ids,
                    completion_ids=completion_ids,
                    advantage=float(turn.advantage),
                    sampler_logprobs=tuple(logprobs) if logprobs is not None else None,
                    truncated=generation.truncated,
                    task=trajectory.task.id,
                    turn=turn.turn,
                    index=len(samples),
                )
            )
    return samples


def split_minibatches(samples: Sequence[Sample], steps: int, mode: str, *, seed: int) -> list[list[Sample]]:
    """The samples of each of `steps` gradient steps: `split` shuffles (seeded) and deals them into
    `steps` nearly equal shares; `repeat` gives every step all of them."""
    if mode == "repeat":
        return [list(samples) for _ in range(steps)]
    if mode != "split":
        raise ValueError(f"mode must be split or repeat, got {mode!r}")
    order = list(samples)
    random.Random(seed).shuffle(order)
    shares = [order[i::steps] for i in range(steps)]
    return [sorted(share, key=lambda s: s.index) for share in shares if share]


def partition_for_ranks(samples: Sequence[Sample], world_size: int) -> list[list[Sample]]:
    """Deal samples to ranks, longest first to the rank with the fewest tokens so far."""
    loads = [0] * world_size
    parts: list[list[Sample]] = [[] for _ in range(world_size)]
    for sample in sorted(samples, key=lambda s: (-s.length, s.index)):
        rank = min(range(world_size), key=lambda r: (loads[r], r))
        parts[rank].append(sample)
        loads[rank] += sample.length
    return [sorted(part, key=lambda s: s.index) for part in parts]


def pack_micro_batches(samples: Sequence[Sample], budget_tokens: int) -> list[list[Sample]]:
    """Group samples into micro-batches with rows x longest row <= budget_tokens (longest first)."""
    if budget_tokens < 1:
        raise ValueError("budget_tokens must be at least 1")
    batches: list[list[Sample]] = []
    current: list[Sample] = []
    for sample in sorted(samples, key=lambda s: (-s.length, s.index)):
        longest = current[0].length if current else sample.length
        if current and (len(current) + 1) * longest > budget_tokens:
            batches.append(current)
            current = []
        current.append(sample)
    if current:
        batches.append(current)
    return batches


@dataclass
class MicroBatch:
    """Left-padded rows; the last `completion_width` columns hold every completion (right-aligned)."""

    input_ids: torch.Tensor
    """[B, T] token ids, pad id on the left."""
    attention_mask: torch.Tensor
    """[B, T] 1 on real tokens."""
    position_ids: torch.Tensor
    """[B, T] 0-based positions counted from each row's first real token."""
    targets: torch.Tensor
    """[B, K] the tokens whose log-probs are scored: input_ids[:, T-K:]."""
    completion_mask: torch.Tensor
    """[B, K] 1 where the target is a completion token of the row."""
    advantages: torch.Tensor
    """[B] one advantage per row."""
    samples: list[Sample]

    @property
    def completion_width(self) -> int:
        return self.targets.shape[1]


def collate(samples: Sequence[Sample], pad_id: int) -> MicroBatch:
    """One micro-batch of `samples` (see MicroBatch)."""
    if not samples:
        raise ValueError("cannot collate an empty micro-batch")
    width = max(s.length for s in samples)
    completion_width = max(len(s.completion_ids) for s in samples)
    rows = len(samples)
    input_ids = torch.full((rows, width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((rows, width), dtype=torch.long)
    completion_mask = torch.zeros((rows, completion_width), dtype=torch.float32)
    for row, sample in enumerate(samples):
        tokens = list(sample.prompt_ids) + list(sample.completion_ids)
        input_ids[row, width - len(tokens) :] = torch.tensor(tokens, dtype=torch.long)
        attention_mask[row, width - len(tokens) :] = 1
        completion_mask[row, completion_width - len(sample.completion_ids) :] = 1.0
    position_ids = (attention_mask.cumsum(dim=1) - 1).clamp(min=0)
    return MicroBatch(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids,
        targets=input_ids[:, width - completion_width :].clone(),
        completion_mask=completion_mask,
        advantages=torch.tensor([s.advantage for s in samples], dtype=torch.float32),
        samples=list(samples),
    )


def right_align(values: Sequence[Sequence[float] | torch.Tensor], width: int) -> torch.Tensor:
    """[B, width] with row b's values in its last len(values[b]) columns, zeros before."""
    out = torch.zeros((len(values), width), dtype=torch.float32)
    for row, value in enumerate(values):
        tensor = torch.as_tensor(value, dtype=torch.float32)
        if tensor.numel():
            out[row, width - tensor.numel() :] = tensor
    return out


def unalign(matrix: torch.Tensor, samples: Sequence[Sample]) -> list[torch.Tensor]:
    """Inverse of right_align: each row's completion values, as a 1-D tensor."""
    width = matrix.shape[1]
    return [matrix[row, width - len(s.completion_ids) :].detach().clone() for row, s in enumerate(samples)]


def counted_tokens(samples: Sequence[Sample]) -> int:
    return sum(len(s.completion_ids) for s in samples)


def micro_batches(samples: Sequence[Sample], budget_tokens: int, pad_id: int) -> list[MicroBatch]:
    return [collate(group, pad_id) for group in pack_micro_batches(samples, budget_tokens)]
