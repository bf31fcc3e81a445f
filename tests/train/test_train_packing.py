"""Per-turn samples, mini-batches, rank partitions and micro-batches (kevin.train.packing)."""

from __future__ import annotations

import pytest
import torch

from kevin.evaluator.result import EvalResult
from kevin.rl.candidate import parse_completion
from kevin.rl.env import Generation, Trajectory, Turn
from kevin.rl.prompts import Prompt
from kevin.tasks import Task
from kevin.train.packing import (
    Sample,
    collate,
    pack_micro_batches,
    partition_for_ranks,
    right_align,
    samples_from_trajectories,
    split_minibatches,
    unalign,
)
from kevin.train.sampled import SampledGeneration

EOS = 99


class CharTokens:
    """Tokenize: one token per character (its code point mod 90), EOS appended on `stop`."""

    def encode_prompt(self, text: str) -> list[int]:
        return [ord(c) % 90 for c in text]

    def encode_completion(self, text: str, finish_reason: str | None) -> list[int]:
        ids = [ord(c) % 90 for c in text]
        return ids + [EOS] if finish_reason == "stop" else ids


def turn(number: int, generation, *, score, advantage) -> Turn:
    result = EvalResult(
        stage="ok" if score else "runtime", blame="infrastructure" if score is None else "none"
    )
    prompt = Prompt(text=f"prompt {number}", turn=number, attempts_shown=number - 1, attempts_dropped=0)
    return Turn(
        number, prompt, generation, parse_completion(generation.text), result, score, advantage, advantage
    )


def test_each_trainable_turn_is_its_own_sample_with_its_own_prompt():
    task = Task.from_source("x", id="L1_1", name="x", level=1, problem=1)
    sampled = SampledGeneration(
        text="abc",
        finish_reason="stop",
        prompt_token_ids=(1, 2, 3),
        token_ids=(4, 5, EOS),
        logprobs=(-0.1, -0.2, -0.3),
    )
    trajectory = Trajectory(
        task,
        0,
        [
            turn(1, sampled, score=0.0, advantage=-1.0),
            turn(2, Generation("xy", finish_reason="stop"), score=1.3, advantage=1.0),
            turn(3, Generation("zz", finish_reason="length"), score=None, advantage=None),  # infrastructure
            turn(4, Generation("", finish_reason="stop"), score=0.0, advantage=0.0),  # empty: EOS only
            turn(5, Generation("long", finish_reason="length"), score=0.0, advantage=0.5),
        ],
    )
    samples = samples_from_trajectories([trajectory], CharTokens())
    assert [s.turn for s in samples] == [1, 2, 4, 5]
    first, second, empty, cut = samples
    # the sampler's own tokens and log-probs, untouched
    assert first.prompt_ids == (1, 2, 3) and first.completion_ids == (4, 5, EOS)
    assert first.sampler_logprobs == (-0.1, -0.2, -0.3) and first.advantage == -1.0
    # text re-tokenised with the turn's own prompt; EOS only when the model stopped by itself
    assert second.prompt_ids == tuple(ord(c) % 90 for c in "prompt 2")
    assert second.completion_ids == (ord("x") % 90, ord("y") % 90, EOS) and second.sampler_logprobs is None
    assert empty.completion_ids == (EOS,)
    assert cut.completion_ids[-1] != EOS and cut.truncated
    assert [s.index for s in samples] == [0, 1, 2, 3] and {s.task for s in samples} == {"L1_1"}
    masked = samples_from_trajectories([trajectory], CharTokens(), mask_truncated=True)
    assert [s.turn for s in masked] == [1, 2, 4]


def sample(index: int, prompt: int, completion: int, advantage: float = 1.0) -> Sample:
    return Sample(tuple(range(1, prompt + 1)), tuple(range(10, 10 + completion)), advantage, index=index)


def test_micro_batches_respect_the_token_budget_longest_first():
    samples = [sample(i, p, c) for i, (p, c) in enumerate([(2, 1), (5, 5), (3, 2), (1, 2), (2, 3)])]
    # lengths 3, 10, 5, 3, 5; budget 10: [10] | [5, 5] | [3, 3] (rows x longest <= 10)
    groups = pack_micro_batches(samples, 10)
    assert [[s.length for s in g] for g in groups] == [[10], [5, 5], [3, 3]]
    assert sorted(s.index for g in groups for s in g) == [0, 1, 2, 3, 4]
    # a row longer than the budget still gets a micro-batch of its own
    assert [[s.length for s in g] for g in pack_micro_batches(samples, 4)] == [[10], [5], [5], [3], [3]]
    with pytest.raises(ValueError):
        pack_micro_batches(samples, 0)


def test_collate_left_pads_and_right_aligns_completions():
    a = Sample((1, 2, 3), (7, 8), 0.5, index=0)
    b = Sample((4,), (9, 10, 11), -1.0, index=1)
    batch = collate([a, b], pad_id=0)
    assert batch.input_ids.tolist() == [[1, 2, 3, 7, 8], [0, 4, 9, 10, 11]]
    assert batch.attention_mask.tolist() == [[1, 1, 1, 1, 1], [0, 1, 1, 1, 1]]
    assert batch.position_ids.tolist() == [[0, 1, 2, 3, 4], [0, 0, 1, 2, 3]]
    # the last K = 3 columns are scored; row a's first scored column is its prompt's last token
    assert batch.targets.tolist() == [[3, 7, 8], [9, 10, 11]]
    assert batch.completion_mask.tolist() == [[0, 1, 1], [1, 1, 1]]
    assert batch.advantages.tolist() == [0.5, -1.0]
    values = right_align([torch.tensor([0.1, 0.2]), torch.tensor([0.3, 0.4, 0.5])], 3)
    assert torch.allclose(values, torch.tensor([[0.0, 0.1, 0.2], [0.3, 0.4, 0.5]]))
    back = unalign(values, [a, b])
    assert back[0].tolist() == pytest.approx([0.1, 0.2]) and back[1].tolist() == pytest.approx(
        [0.3, 0.4, 0.5]
    )


def test_split_minibatches_deals_every_sample_once_and_repeat_gives_all():
    samples = [sample(i, 2, 2) for i in range(7)]
    parts = split_minibatches(samples, 2, "split", seed=3)
    assert len(parts) == 2 and sorted(len(p) for p in parts) == [3, 4]
    assert sorted(s.index for p in parts for s in p) == list(range(7))
    assert parts == split_minibatches(samples, 2, "split", seed=3)
    assert split_minibatches(samples, 2, "repeat", seed=3) == [samples, samples]
    assert split_minibatches(samples[:1], 2, "split", seed=0) == [samples[:1]]


def test_partition_for_ranks_balances_tokens():
    samples = [sample(i, length, 1) for i, length in enumerate([9, 1, 1, 1, 5, 4])]
    parts = partition_for_ranks(samples, 2)
    loads = [sum(s.length for s in part) for part in parts]
    assert sorted(s.index for part in parts for s in part) == list(range(6))
    assert max(loads) - min(loads) <= 2
    assert partition_for_ranks(samples, 1) == [samples]
