"""Per-token log-probabilities of completions under the learner model, and the sampler agreement check.

    log pi(t) = logits_t[token_t] / T - logsumexp(logits_t / T)

over the completion tokens of a left-padded micro-batch (kevin.train.packing), with T the sampling
temperature, so the learner scores the same distribution the sampler drew from (top-p truncation
aside). Logits are computed only for the last K + 1 positions (`logits_to_keep`), and the softmax is
taken in fp32 one row at a time, so a 150K vocabulary times a 16K completion never materialises in
fp32 all at once.

The agreement check compares the sampler's reported log-probs with the learner's recomputation of
the same tokens: max and mean absolute difference over all completion tokens. A large gap means the
two do not compute the same policy (different weights after a failed push, dtype or kernel
differences, a temperature mismatch), which makes the importance ratio wrong.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import torch

from kevin.train.packing import MicroBatch


def selective_log_softmax(
    logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """log softmax(logits / T) at `targets`: [B, K, V] and [B, K] -> [B, K] fp32, row by row."""
    rows = []
    for row_logits, row_targets in zip(logits, targets):
        scaled = row_logits.float() / temperature
        picked = scaled.gather(-1, row_targets[:, None]).squeeze(-1)
        rows.append(picked - torch.logsumexp(scaled, dim=-1))
    return torch.stack(rows)


def autocast_context(device: torch.device, dtype: torch.dtype | None):
    """bf16/fp16 autocast on CUDA when asked; nothing otherwise (CPU runs in fp32)."""
    if dtype is None or dtype == torch.float32 or device.type != "cuda":
        return contextlib.nullcontext()
    return torch.autocast(device_type="cuda", dtype=dtype)


def completion_logprobs(
    model: torch.nn.Module,
    batch: MicroBatch,
    *,
    temperature: float,
    device: torch.device,
    autocast_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """[B, K] log-probs of each row's completion tokens (right-aligned; see MicroBatch); positions
    outside a row's completion hold log-probs of prompt or pad tokens and must be masked."""
    width = batch.completion_width
    with autocast_context(device, autocast_dtype):
        output = model(
            input_ids=batch.input_ids.to(device),
            attention_mask=attention_mask_for(model, batch.attention_mask.to(device)),
            position_ids=batch.position_ids.to(device),
            logits_to_keep=width + 1,
            use_cache=False,
        )
    logits = output.logits[:, -(width + 1) : -1]
    return selective_log_softmax(logits, batch.targets.to(device), temperature)


def attention_mask_for(model: torch.nn.Module, padding: torch.Tensor) -> torch.Tensor:
    """The attention mask for a left-padded [B, T] `padding` mask (1 = token, 0 = pad).

    transformers turns a 2-D mask into causal-and-not-pad, where a pad position's query attends to
    nothing (a fully masked row). Attention kernels that do not guard such rows give NaN there, in
    the forward or the backward pass (s12 on the H200: a NaN gradient in every parameter, with a
    finite loss, because the pad positions' NaN log-probs are masked out of the loss but not out of
    its gradient). Here every pad query attends to itself as well, which no real token sees: the
    completions' log-probs are unchanged and every row of every attention has a key. Built for the
    sdpa and eager back ends (a 4-D mask is passed through as given: boolean for sdpa, additive for
    eager); others (flash attention's varlen path has no masked rows) and unpadded batches keep the
    2-D mask."""
    implementation = getattr(getattr(model, "config", None), "_attn_implementation", None)
    if implementation not in ("sdpa", "eager") or bool(padding.all()):
        return padding
    length = padding.shape[1]
    keys = padding.bool()[:, None, None, :]
    causal = torch.ones(length, length, dtype=torch.bool, device=padding.device).tril()
    allowed = (causal & keys) | torch.eye(length, dtype=torch.bool, device=padding.device)
    if implementation == "sdpa":
        return allowed
    return torch.zeros(allowed.shape, device=padding.device).masked_fill(~allowed, torch.finfo(torch.float32).min)


def logprob_agreement(
    sampler: Sequence[torch.Tensor | Sequence[float]], learner: Sequence[torch.Tensor]
) -> dict[str, float]:
    """Max and mean |sampler - learner| over every token of the pairs given (same lengths)."""
    differences = []
    for reported, recomputed in zip(sampler, learner):
        reported = torch.as_tensor(reported, dtype=torch.float32)
        recomputed = recomputed.detach().float().cpu()
        if reported.shape != recomputed.shape:
            raise ValueError(f"sampler gave {reported.numel()} log-probs for {recomputed.numel()} tokens")
        differences.append((reported - recomputed).abs())
    if not differences:
        return {}
    every = torch.cat(differences)
    return {"logprob_diff_max": float(every.max()), "logprob_diff_mean": float(every.mean())}
