"""The constants a completion copies from its prompt, as tokens: found, weighed in the loss, scored.

Every kernel of the learning run's family writes its task's constants twice: in the plan
(`leaky(0.2)`) and in its elementwise function (`v * 0.2f`), both copied from the problem's source
(`F.leaky_relu(x, 0.2)`). Session 28's warm start wrote another of the op's allowed constants in a
third of its held-out kernels, though the loss on the held-out corpus had fallen to the training
loss: a constant is a few tokens of a ~550-token completion, so the mean loss hardly sees them.

- `constant_tokens`: per sample, the completion token indices of each constant it copies
  (`kevin.train.corpus.constant_spans`), through the tokenizer's offsets; none in `wrong` samples
  (their slip may change a constant on purpose).
- `collate`: rows as the warm start's batches (right-padded; labels the completion's tokens only).
- `token_weights` / `weighted_loss`: SFT's objective with those tokens weighed `constant_weight`
  times the rest (`SFTConfig.constant_weight`; 1 is the plain mean), normalised by the weights' sum.
- `validation_rows` / `validation_scores`: the held-out loss and how well the constants are copied
  (argmax share and mean probability, teacher-forced), what `kevin sft` logs as `val_constants`.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

import torch

from kevin.train.corpus import Sample, constant_spans

IGNORE = -100
Row = tuple[list[int], int]
"""A sample's token ids (prompt then completion) and its prompt's length."""


def constant_tokens(samples: Sequence[Sample], codec: Any) -> list[list[list[int]]]:
    """For each sample, the token indices *within its completion* of each constant it copies, in
    order (each a list: a constant may take several tokens). Empty for `wrong` samples, and for all
    when the tokenizer gives no offsets (a slow tokenizer)."""
    if not samples:
        return []
    completions = [sample.completion for sample in samples]
    try:
        offsets = codec.tokenizer(completions, add_special_tokens=False, return_offsets_mapping=True)
    except (NotImplementedError, ValueError, TypeError):  # a slow tokenizer: no offsets
        return [[] for _ in samples]
    found: list[list[list[int]]] = []
    for index, sample in enumerate(samples):
        marks: list[list[int]] = []
        wanted = constant_spans(sample.completion) if sample.label != "wrong" else []
        if wanted:
            spans = offsets["offset_mapping"][index]
            starts, ends = [a for a, _ in spans], [b for _, b in spans]
            for start, end in wanted:
                # Offsets run in order: the tokens that overlap [start, end) lie between these two.
                low, high = bisect.bisect_right(ends, start), bisect.bisect_left(starts, end)
                tokens = [j for j in range(low, high) if starts[j] < end and ends[j] > start]
                if tokens:
                    marks.append(tokens)
        found.append(marks)
    return found


def collate(rows: Sequence[tuple[list[int], int]], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded input ids, attention mask, and labels with prompt and padding masked."""
    width = max(len(ids) for ids, _ in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros_like(input_ids)
    labels = torch.full_like(input_ids, IGNORE)
    for row, (ids, prompt_length) in enumerate(rows):
        input_ids[row, : len(ids)] = torch.tensor(ids)
        attention_mask[row, : len(ids)] = 1
        labels[row, prompt_length : len(ids)] = torch.tensor(ids[prompt_length:])
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


def token_weights(
    rows: Sequence[Row], marks: Sequence[Sequence[Sequence[int]]], weight: float, width: int
) -> torch.Tensor:
    """(len(rows), width) float weights of each position as a *label* (collate's layout): 1 on the
    completion's tokens, `weight` on those of its constants (`marks`: completion indices, as
    `constant_tokens` gives), 0 on the prompt and the padding."""
    weights = torch.zeros(len(rows), width)
    for row, ((ids, prompt_length), constants) in enumerate(zip(rows, marks)):
        weights[row, prompt_length : len(ids)] = 1.0
        for tokens in constants:
            for j in tokens:
                weights[row, prompt_length + j] = weight
    return weights


def weighted_loss(
    logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(objective, plain mean): next-token cross-entropy at every label position, weighed by
    `weights` (same layout as `labels`) and divided by their sum, and the unweighted mean over the
    labelled positions (what the loss is without weights: the log stays comparable)."""
    shifted, targets = logits[:, :-1].float(), labels[:, 1:]
    losses = torch.nn.functional.cross_entropy(
        shifted.transpose(1, 2), targets, ignore_index=IGNORE, reduction="none"
    )
    kept = targets != IGNORE
    w = weights[:, 1:].to(losses.device) * kept
    objective = (losses * w).sum() / w.sum().clamp_min(1e-9)
    plain = losses[kept].mean() if bool(kept.any()) else losses.sum() * 0.0
    return objective, plain


def validation_rows(
    samples: Sequence[Sample], codec: Any, max_tokens: int
) -> tuple[list[Row], list[list[list[int]]]]:
    """`samples` as `kevin.train.sft.encode_samples` rows (those that fit `max_tokens`), and for
    each row the token positions (in the row) of every constant its completion copies."""
    rows: list[Row] = []
    marks: list[list[list[int]]] = []
    if not samples:
        return rows, marks
    prompts = codec.encode_prompts([sample.prompt for sample in samples])
    completions = codec.encode_completions([sample.completion for sample in samples], "stop")
    for prompt, completion, constants in zip(prompts, completions, constant_tokens(samples, codec)):
        if len(prompt) + len(completion) > max_tokens:
            continue
        rows.append((prompt + completion, len(prompt)))
        marks.append([[len(prompt) + j for j in tokens] for tokens in constants])
    return rows, marks


@torch.no_grad()
def validation_scores(
    model: Any,
    encoded: Sequence[Row],
    pad_id: int,
    batch_size: int,
    device,
    dtype,
    marks: Sequence[Sequence[Sequence[int]]] = (),
) -> dict[str, float]:
    """`loss`: mean loss per completion token over `encoded`. With `marks` (per row, the token
    positions of each constant the completion copies, `validation_rows`): `constants`, the share of
    constants whose every token is the model's most likely next token (teacher-forced), and
    `constant_p`, the mean probability the model gives each constant whole: about how often
    sampling (at temperature 1) would copy it right. The model is left in train mode."""
    from kevin.train.logprobs import autocast_context

    model.eval()
    total, tokens = 0.0, 0
    copied, probability, constants = 0, 0.0, 0
    for start in range(0, len(encoded), batch_size):
        batch = {k: v.to(device) for k, v in collate(encoded[start : start + batch_size], pad_id).items()}
        with autocast_context(device, dtype):
            logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        labels = batch["labels"][:, 1:]
        losses = torch.nn.functional.cross_entropy(
            logits[:, :-1].float().transpose(1, 2), labels, ignore_index=IGNORE, reduction="sum"
        )
        total += float(losses)
        tokens += int((labels != IGNORE).sum())
        for row, positions in enumerate(marks[start : start + batch_size]):
            if not positions:
                continue
            log_probs = torch.log_softmax(logits[row].float(), dim=-1)
            ids = batch["input_ids"][row]
            for constant in positions:
                at = torch.tensor(constant, device=ids.device)
                predicted = log_probs[at - 1]  # the logits before a token predict it
                copied += int(bool((predicted.argmax(dim=-1) == ids[at]).all()))
                probability += float(predicted.gather(1, ids[at].unsqueeze(1)).sum().exp())
                constants += 1
    model.train()
    scores = {"loss": total / max(1, tokens)}
    if constants:
        scores.update(constants=copied / constants, constant_p=probability / constants)
    return scores
