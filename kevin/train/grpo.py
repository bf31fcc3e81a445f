"""The policy-gradient loss: pure functions over tensors, no model, no I/O.

Notation. Sample i is one turn (its prompt and its completion o_i); its completion tokens are
t = 1..|o_i|, with mask m_it = 1 on tokens that count. A_i is the sample's advantage
(kevin.rl.reward: discounted return, normalised within its group). log pi(t) is the learner's
log-probability of token t now, log pi_old(t) the one under the weights that sampled it (recomputed by
the learner before the first gradient step, or reported by the sampler: `LossConfig.old_logprobs`).

    ratio       r_it  = exp(log pi(t) - log pi_old(t))
    surrogate   s_it  = min(r_it A_i, clip(r_it, 1 - eps_low, 1 + eps_high) A_i)     (clip-higher)
    KL (k3)     k_it  = exp(q_it) - q_it - 1,  q_it = log pi_ref(t) - log pi(t)      (>= 0, unbiased)
    token loss  l_it  = -s_it + beta k_it
    loss        L     = sum_i w_i sum_t m_it l_it

with the sample weight w_i set by the length normalisation (`sample_weights`):

    constant  w_i = 1 / (G L_max)            Dr. GRPO (DESIGN.md §3): G samples in the gradient step,
                                             L_max the completion-token limit; no length bias
    token     w_i = 1 / sum_j |o_j|           DAPO's token mean over the gradient step
    sequence  w_i = 1 / (G |o_i|)             the original GRPO: mean over tokens, then over samples

G and the token total are counted over the whole gradient step (every micro-batch and every rank),
so accumulating micro-batch gradients gives exactly the gradient of L. eps_low = 0.2 and
eps_high = 0.28 in the paper; beta = 0 there (no KL).

Departures and decisions the paper does not state:

- With pi_old recomputed by the learner, the first gradient step of a batch has r = 1 exactly (its
  gradient is the plain policy gradient); later steps use the same stored pi_old, so they are
  off-policy and the clip acts there.
- No dual clip for negative advantages: with A < 0 a large ratio is not bounded (as in PPO and
  DAPO); the clip only stops the gradient where the objective is already better than the trust region.
- Samples with A = 0 carry no policy gradient; the loop does not send them to the learner when
  beta = 0, but still counts them in G, so the loss equals the loss over all trainable samples.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

NORMALIZATIONS = ("constant", "token", "sequence")


def importance_ratio(logprobs: torch.Tensor, old_logprobs: torch.Tensor) -> torch.Tensor:
    """r = exp(log pi - log pi_old), elementwise."""
    return torch.exp(logprobs - old_logprobs)


def clipped_surrogate(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    *,
    clip_low: float,
    clip_high: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-token surrogate s = min(r A, clip(r, 1 - clip_low, 1 + clip_high) A), with the masks of
    tokens whose gradient the clip stops: (s, clipped_low, clipped_high).

    Shapes: logprobs and old_logprobs [B, T], advantages [B] (one per sample) or [B, T]."""
    if advantages.dim() == 1:
        advantages = advantages[:, None]
    ratio = importance_ratio(logprobs, old_logprobs)
    clipped = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    surrogate = torch.minimum(ratio * advantages, clipped * advantages)
    clipped_low = (advantages < 0) & (ratio < 1.0 - clip_low)
    clipped_high = (advantages > 0) & (ratio > 1.0 + clip_high)
    return surrogate, clipped_low, clipped_high


def k3_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(pi || pi_ref): exp(q) - q - 1 with q = log pi_ref - log pi."""
    q = ref_logprobs - logprobs
    return torch.exp(q) - q - 1.0


def policy_drift(logprobs: torch.Tensor, old_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(pi_old || pi) on tokens sampled from pi_old: r - 1 - log r with
    r = pi / pi_old. Non-negative; 0 where nothing moved. Its mean over an off-policy step's tokens
    is how far the step's earlier updates moved the policy (s20: a run whose updates drove sampled
    tokens' ratios to 0.002 and 23 collapsed into unparseable code within 8 steps)."""
    return k3_kl(old_logprobs, logprobs)


def sample_weights(
    completion_tokens: torch.Tensor,
    normalization: str,
    *,
    max_completion_tokens: int,
    samples: int | None = None,
    total_tokens: int | None = None,
) -> torch.Tensor:
    """w_i of the module docstring for the samples of one gradient step.

    completion_tokens: [B] counted tokens of each sample (mask sums). `samples` (G) and
    `total_tokens` default to this batch's own counts; pass the whole gradient step's counts when
    this is one micro-batch or one rank's share."""
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"normalization must be one of {NORMALIZATIONS}, got {normalization!r}")
    lengths = completion_tokens.to(torch.float64)
    count = samples if samples is not None else lengths.numel()
    if count < 1:
        raise ValueError("a gradient step needs at least one sample")
    if normalization == "constant":
        if max_completion_tokens < 1:
            raise ValueError("max_completion_tokens must be at least 1")
        return torch.full_like(lengths, 1.0 / (count * max_completion_tokens))
    if normalization == "token":
        total = total_tokens if total_tokens is not None else float(lengths.sum())
        if total <= 0:
            raise ValueError("token normalization needs at least one counted token")
        return torch.full_like(lengths, 1.0 / total)
    return torch.where(lengths > 0, 1.0 / (count * lengths.clamp(min=1.0)), torch.zeros_like(lengths))


@dataclass
class LossTerms:
    """One micro-batch's loss and the sums its statistics need (summable across micro-batches)."""

    loss: torch.Tensor
    """Scalar; its gradient is this micro-batch's share of the gradient step's gradient."""
    tokens: float
    clipped_low: float
    clipped_high: float
    ratio_sum: float
    ratio_max: float
    ratio_min: float
    kl_sum: float
    drift_sum: float = 0.0
    """Sum over counted tokens of k3(old || current): how far the updates before this micro-batch moved
    the policy on its tokens (0 on an on-policy step; `policy_drift`)."""


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    weights: torch.Tensor,
    *,
    clip_low: float,
    clip_high: float,
    kl_coef: float = 0.0,
    ref_logprobs: torch.Tensor | None = None,
) -> LossTerms:
    """L = sum_i w_i sum_t m_it (-s_it + beta k_it) over one micro-batch.

    Shapes: logprobs, old_logprobs, mask (and ref_logprobs) [B, T]; advantages and weights [B].
    Masked-out positions may hold anything finite: they are zeroed before summing."""
    if kl_coef > 0 and ref_logprobs is None:
        raise ValueError("kl_coef > 0 needs ref_logprobs (the reference policy's log-probs)")
    mask = mask.to(logprobs.dtype)
    advantages = advantages.to(logprobs.dtype)
    surrogate, clipped_low, clipped_high = clipped_surrogate(
        logprobs, old_logprobs.to(logprobs.dtype), advantages, clip_low=clip_low, clip_high=clip_high
    )
    token_loss = -surrogate
    kl = torch.zeros_like(logprobs)
    if ref_logprobs is not None:
        kl = k3_kl(logprobs, ref_logprobs.to(logprobs.dtype))
        if kl_coef > 0:
            token_loss = token_loss + kl_coef * kl
    token_loss = torch.where(mask > 0, token_loss, torch.zeros_like(token_loss))
    loss = (token_loss * mask * weights.to(logprobs.dtype)[:, None]).sum()
    with torch.no_grad():
        counted = mask > 0
        old = old_logprobs.to(logprobs.dtype)
        ratio = importance_ratio(logprobs, old)[counted]
        return LossTerms(
            loss=loss,
            tokens=float(counted.sum()),
            clipped_low=float((clipped_low & counted).sum()),
            clipped_high=float((clipped_high & counted).sum()),
            ratio_sum=float(ratio.sum()),
            ratio_max=float(ratio.max()) if ratio.numel() else 1.0,
            ratio_min=float(ratio.min()) if ratio.numel() else 1.0,
            kl_sum=float(kl[counted].sum()),
            drift_sum=float(policy_drift(logprobs[counted], old[counted]).sum()),
        )
