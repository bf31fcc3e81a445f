"""The learner: N clipped policy-gradient steps on one batch of samples, with AdamW and a schedule.

One call of `Learner.learn(samples)` per training step:

1. Split the samples into `gradient_steps` mini-batches (`OptimConfig.minibatch_mode`), and each
   mini-batch across ranks by tokens. Samples with advantage 0 are not computed when the KL term is
   off (they carry no gradient) but still count in the normalisation (kevin.train.grpo).
2. Before any update, with the current weights and no gradient: the old log-probs of every sample
   this rank will train on (`LossConfig.old_logprobs == "learner"`, else the sampler's), the
   reference log-probs when kl_coef > 0 (the LoRA base with the adapter off, or a frozen copy), and
   the agreement between the sampler's log-probs and the learner's (max/mean absolute difference).
3. For each mini-batch: micro-batches packed by `micro_batch_tokens`, forward + loss + backward each
   (gradients accumulate; the loss weights already hold the whole step's normaliser), the global
   gradient norm clipped to `grad_clip`, the learning rate set by the schedule, one AdamW step.
   Step 1 is on-policy (ratio 1 exactly with learner old log-probs); steps 2.. are off-policy.

Learning rate: constant with linear warm-up, lr(k) = lr * min(1, (k + 1) / W) for optimiser step k
(0-based), W = ceil(warmup_fraction x total optimiser steps of the run); the schedule's state is k,
saved in the checkpoint. A resume from a slim checkpoint (bf16 weights, no optimiser state: what
crosses between device sessions) starts AdamW's moments from zero, and fresh moments make the first
updates about lr x sign(gradient) per weight, far larger than a warm run's: the rate then warms up
again over W steps from that step k0 (`restart_moments`, k0 saved in later checkpoints). A mini-batch with nothing to compute on any rank is skipped without an
optimiser step (and does not advance k); so is one whose gradient norm is not finite (counted in
`nonfinite_skipped`, shown on the step line), which would otherwise turn every weight into NaN.

Dropout is assumed off (transformers' Llama and Qwen configs have none; keep lora_dropout 0): the
no-gradient passes run in eval mode and the gradient passes in train mode (which gradient
checkpointing needs), and the ratio of the first step is 1 only if both compute the same function.

Distributed: every rank gets the same sample list; each computes its share. FSDP2 needs the same
number of forward passes on every rank, so micro-batch counts are equalised with empty (zero-weight)
micro-batches. FSDP averages gradients over ranks, so each rank's loss is scaled by the world size to
make the reduced gradient the gradient of the global sum; without FSDP gradients are summed by hand.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from kevin.train import grpo
from kevin.train.config import LossConfig, OptimConfig
from kevin.train.distributed import DistributedContext
from kevin.train.logprobs import completion_logprobs, logprob_agreement
from kevin.train.packing import (
    MicroBatch,
    Sample,
    collate,
    counted_tokens,
    pack_micro_batches,
    partition_for_ranks,
    right_align,
    split_minibatches,
    unalign,
)

log = logging.getLogger(__name__)

PLACEHOLDER_INDEX = -1
"""Index of the zero-weight placeholder rows that keep FSDP ranks in step."""


def lr_at(optimizer_step: int, *, peak_lr: float, warmup_steps: int, rewarm_from: int | None = None) -> float:
    """Constant with linear warm-up: peak * min(1, (k + 1) / W); after AdamW's moments were reset at
    optimiser step k0 (`rewarm_from`), times min(1, (k - k0 + 1) / W) as well."""
    if warmup_steps <= 0:
        return peak_lr
    factor = min(1.0, (optimizer_step + 1) / warmup_steps)
    if rewarm_from is not None:
        factor *= min(1.0, max(0, optimizer_step - rewarm_from + 1) / warmup_steps)
    return peak_lr * factor


def warmup_steps_for(total_optimizer_steps: int, fraction: float) -> int:
    return math.ceil(fraction * total_optimizer_steps)


@dataclass
class _Totals:
    """Sums over micro-batches of one gradient step (then over ranks)."""

    loss: float = 0.0
    tokens: float = 0.0
    clipped_low: float = 0.0
    clipped_high: float = 0.0
    ratio_sum: float = 0.0
    kl_sum: float = 0.0
    drift_sum: float = 0.0
    ratio_max: float = float("-inf")
    ratio_min: float = float("inf")

    def add(self, terms: grpo.LossTerms, loss: float) -> None:
        self.loss += loss
        self.tokens += terms.tokens
        self.clipped_low += terms.clipped_low
        self.clipped_high += terms.clipped_high
        self.ratio_sum += terms.ratio_sum
        self.kl_sum += terms.kl_sum
        self.drift_sum += terms.drift_sum
        if terms.tokens:
            self.ratio_max = max(self.ratio_max, terms.ratio_max)
            self.ratio_min = min(self.ratio_min, terms.ratio_min)


class Learner:
    def __init__(
        self,
        model: torch.nn.Module,
        *,
        loss: LossConfig,
        optim: OptimConfig,
        total_optimizer_steps: int,
        device: torch.device,
        pad_id: int,
        context: DistributedContext | None = None,
        autocast_dtype: torch.dtype | None = None,
        reference: torch.nn.Module | None = None,
        seed: int = 0,
    ) -> None:
        self.model = model
        self.loss_config = loss
        self.optim_config = optim
        self.device = device
        self.pad_id = pad_id
        self.context = context or DistributedContext()
        self.autocast_dtype = autocast_dtype
        self.reference = reference
        self.seed = seed
        self.parameters = [p for p in model.parameters() if p.requires_grad]
        if not self.parameters:
            raise ValueError("the model has no trainable parameters")
        self.optimizer = torch.optim.AdamW(
            self.parameters,
            lr=optim.lr,
            betas=(optim.adam_beta1, optim.adam_beta2),
            eps=optim.adam_eps,
            weight_decay=optim.weight_decay,
        )
        self.warmup_steps = warmup_steps_for(total_optimizer_steps, optim.warmup_fraction)
        self.optimizer_steps = 0
        self.rewarm_from: int | None = None
        """The optimiser step at which AdamW's moments last started from zero after the run's start
        (a slim resume), from which the rate warms up again; None when they never did."""

    # -- state ------------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        return {
            "optimizer_steps": self.optimizer_steps,
            "warmup_steps": self.warmup_steps,
            "rewarm_from": self.rewarm_from,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        self.optimizer_steps = int(state["optimizer_steps"])
        rewarm = state.get("rewarm_from")
        self.rewarm_from = None if rewarm is None else int(rewarm)

    def restart_moments(self) -> None:
        """AdamW's moments start from zero here (the optimiser state was not restored): warm the rate
        up again from this optimiser step."""
        self.rewarm_from = self.optimizer_steps

    def current_lr(self) -> float:
        return lr_at(
            self.optimizer_steps,
            peak_lr=self.optim_config.lr,
            warmup_steps=self.warmup_steps,
            rewarm_from=self.rewarm_from,
        )

    # -- one training step ------------------------------------------------------------------

    def learn(
        self, samples: Sequence[Sample], *, step: int, max_completion_tokens: int, temperature: float
    ) -> dict:
        """Run the gradient steps of one batch; return its metrics (identical on every rank)."""
        started = time.monotonic()
        kl_on = self.loss_config.kl_coef > 0
        minibatches = split_minibatches(
            samples,
            self.optim_config.gradient_steps,
            self.optim_config.minibatch_mode,
            seed=self.seed * 1_000_003 + step,
        )
        plans = []
        active_total = 0
        for minibatch in minibatches:
            active = [s for s in minibatch if kl_on or s.advantage != 0.0]
            active_total += len(active)
            plans.append((minibatch, partition_for_ranks(active, self.context.world_size)[self.context.rank]))
        if active_total == 0:  # the same on every rank: every sample has advantage 0, no gradient
            agreement = {}
            if any(s.sampler_logprobs is not None for s in samples):  # still check the sampler
                share = partition_for_ranks(samples, self.context.world_size)[self.context.rank]
                _, agreement = self._old_logprobs(share, temperature)
            return {
                "gradient_steps": 0.0,
                "samples": len(samples),
                "samples_trained": 0.0,
                **agreement,
                "learn_s": time.monotonic() - started,
                "per_step": [],
            }
        mine = {s.index: s for _, part in plans for s in part}
        old, agreement = self._old_logprobs(list(mine.values()), temperature)
        reference = self._reference_logprobs(list(mine.values()), temperature) if kl_on else {}
        per_step = []
        for minibatch, part in plans:
            per_step.append(
                self._gradient_step(minibatch, part, old, reference, max_completion_tokens, temperature)
            )
        metrics = _summarise(per_step)
        metrics.update(agreement)
        metrics.update(
            samples=len(samples),
            samples_trained=self.context.sum(len(mine)),
            optimizer_steps=self.optimizer_steps,
            learn_s=time.monotonic() - started,
        )
        metrics["per_step"] = per_step
        return metrics

    # -- pieces -----------------------------------------------------------------------------

    def _micro_batches(self, samples: Sequence[Sample]) -> list[MicroBatch | None]:
        """This rank's micro-batches, padded with None up to the most any rank has."""
        groups = pack_micro_batches(samples, self.optim_config.micro_batch_tokens) if samples else []
        batches: list[MicroBatch | None] = [collate(group, self.pad_id) for group in groups]
        most = int(self.context.max(len(batches)))
        return batches + [None] * (most - len(batches))

    def _placeholder(self) -> MicroBatch:
        placeholder = Sample((self.pad_id,), (self.pad_id,), 0.0, index=PLACEHOLDER_INDEX)
        return collate([placeholder], self.pad_id)

    def _forward(self, model: torch.nn.Module, batch: MicroBatch, temperature: float) -> torch.Tensor:
        return completion_logprobs(
            model, batch, temperature=temperature, device=self.device, autocast_dtype=self.autocast_dtype
        )

    @torch.no_grad()
    def _logprobs_no_grad(
        self, model: torch.nn.Module, samples: Sequence[Sample], temperature: float
    ) -> dict[int, torch.Tensor]:
        model.eval()
        result = {}
        for batch in self._micro_batches(samples):
            if batch is None:
                self._forward(model, self._placeholder(), temperature)
                continue
            values = self._forward(model, batch, temperature).float().cpu()
            for sample, row in zip(batch.samples, unalign(values, batch.samples)):
                result[sample.index] = row
        return result

    def _old_logprobs(
        self, samples: Sequence[Sample], temperature: float
    ) -> tuple[dict[int, torch.Tensor], dict[str, float]]:
        """Old log-probs by sample index, and the sampler/learner agreement over all ranks. The
        learner's are always computed: they are the old ones, or the check on the sampler's."""
        learner = self._logprobs_no_grad(self.model, samples, temperature)
        with_sampler = [s for s in samples if s.sampler_logprobs is not None]
        local = logprob_agreement(
            [s.sampler_logprobs for s in with_sampler], [learner[s.index] for s in with_sampler]
        )
        tokens = sum(len(s.completion_ids) for s in with_sampler)
        total = self.context.sum(tokens)
        agreement: dict[str, float] = {}
        if total:
            agreement["logprob_diff_max"] = self.context.max(local.get("logprob_diff_max", 0.0))
            agreement["logprob_diff_mean"] = (
                self.context.sum(local.get("logprob_diff_mean", 0.0) * tokens) / total
            )
        if self.loss_config.old_logprobs == "learner":
            return learner, agreement
        old = {s.index: torch.tensor(s.sampler_logprobs, dtype=torch.float32) for s in with_sampler}
        for sample in samples:
            old.setdefault(sample.index, learner[sample.index])
        return old, agreement

    def _reference_logprobs(self, samples: Sequence[Sample], temperature: float) -> dict[int, torch.Tensor]:
        if self.reference is not None:
            return self._logprobs_no_grad(self.reference, samples, temperature)
        if hasattr(self.model, "disable_adapter"):
            with self.model.disable_adapter():
                return self._logprobs_no_grad(self.model, samples, temperature)
        raise ValueError("kl_coef > 0 needs a reference model (a frozen copy) or a LoRA model")

    def _gradient_step(
        self,
        minibatch: Sequence[Sample],
        part: Sequence[Sample],
        old: dict[int, torch.Tensor],
        reference: dict[int, torch.Tensor],
        max_completion_tokens: int,
        temperature: float,
    ) -> dict[str, float]:
        """One optimiser step over `minibatch` (whose share on this rank is `part`)."""
        if self.context.sum(len(part)) == 0:
            return {"skipped": 1.0}
        config = self.loss_config
        lengths = torch.tensor([len(s.completion_ids) for s in minibatch], dtype=torch.float64)
        weights = grpo.sample_weights(
            lengths,
            config.normalization,
            max_completion_tokens=max_completion_tokens,
            samples=len(minibatch),
            total_tokens=counted_tokens(minibatch),
        )
        weight_of = {s.index: float(w) for s, w in zip(minibatch, weights)}
        scale = float(self.context.world_size) if self.context.fsdp else 1.0
        self.model.train()
        totals = _Totals()
        for batch in self._micro_batches(part):
            placeholder = batch is None
            batch = self._placeholder() if placeholder else batch
            logprobs = self._forward(self.model, batch, temperature)
            width = batch.completion_width
            if placeholder:
                old_rows = logprobs.detach()
                row_weights = torch.zeros(1)
            else:
                old_rows = right_align([old[s.index] for s in batch.samples], width).to(logprobs.device)
                row_weights = torch.tensor([weight_of[s.index] for s in batch.samples])
            ref_rows = None
            if config.kl_coef > 0:
                ref_rows = (
                    old_rows
                    if placeholder
                    else right_align([reference[s.index] for s in batch.samples], width).to(logprobs.device)
                )
            terms = grpo.policy_loss(
                logprobs,
                old_rows,
                batch.advantages.to(logprobs.device),
                batch.completion_mask.to(logprobs.device) * (0.0 if placeholder else 1.0),
                row_weights.to(logprobs.device),
                clip_low=config.clip_low,
                clip_high=config.clip_high,
                kl_coef=config.kl_coef,
                ref_logprobs=ref_rows,
            )
            (terms.loss * scale).backward()
            totals.add(terms, float(terms.loss.detach()))
        return self._apply_update(totals)

    def _apply_update(self, totals: _Totals) -> dict[str, float]:
        if self.context.world_size > 1 and not self.context.fsdp:
            self.context.sum_gradients(self.parameters)
        norm = torch.nn.utils.clip_grad_norm_(self.parameters, self.optim_config.grad_clip)
        norm = float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)
        lr = self.current_lr()
        # A non-finite gradient would make every weight NaN (clipping scales by a NaN norm) and the
        # next sampling step would fail on the GPU: drop the update, keep k, count it. The norm is
        # the global one, so every rank decides alike.
        nonfinite = not math.isfinite(norm)
        if nonfinite:
            log.warning(
                "gradient norm %s: update %d dropped; non-finite gradients in %s",
                norm,
                self.optimizer_steps,
                ", ".join(_nonfinite_gradients(self.model)[:6]) or "(another rank's shard)",
            )
        else:
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            self.optimizer.step()
            self.optimizer_steps += 1
        self.optimizer.zero_grad(set_to_none=True)
        sums = self.context.sum_many(
            [
                totals.loss,
                totals.tokens,
                totals.clipped_low,
                totals.clipped_high,
                totals.ratio_sum,
                totals.kl_sum,
                totals.drift_sum,
            ]
        )
        loss, tokens, low, high, ratio_sum, kl_sum, drift_sum = sums
        tokens = max(tokens, 1.0)
        return {
            "loss": loss,
            "tokens": tokens,
            "grad_norm": norm,
            "nonfinite_skipped": float(nonfinite),
            "lr": lr,
            "clip_low_frac": low / tokens,
            "clip_high_frac": high / tokens,
            "ratio_mean": ratio_sum / tokens,
            "ratio_max": _finite_or_one(self.context.max(totals.ratio_max)),
            "ratio_min": _finite_or_one(-self.context.max(-totals.ratio_min)),
            "kl": kl_sum / tokens,
            "drift": drift_sum / tokens,
        }


def _nonfinite_gradients(model: torch.nn.Module) -> list[str]:
    """Names of the parameters whose (local) gradient holds NaN or inf, for the warning."""
    names = []
    for name, parameter in model.named_parameters():
        grad = parameter.grad
        grad = grad.to_local() if hasattr(grad, "to_local") else grad
        if grad is not None and not bool(torch.isfinite(grad).all()):
            names.append(name)
    return names


def _finite_or_one(value: float) -> float:
    return value if math.isfinite(value) else 1.0


def _summarise(per_step: list[dict[str, float]]) -> dict[str, float]:
    """A step's metrics from its gradient steps: loss and fractions averaged, extremes kept."""
    done = [s for s in per_step if not s.get("skipped")]
    summary: dict[str, float] = {"gradient_steps": float(len(done))}
    if not done:
        return summary
    for key in ("loss", "clip_low_frac", "clip_high_frac", "ratio_mean", "kl"):
        summary[key] = sum(s[key] for s in done) / len(done)
    # NaN-aware: max() keeps whichever comes first when a NaN is compared, and hid one (s12).
    norms = [s["grad_norm"] for s in done]
    summary["grad_norm"] = math.nan if any(math.isnan(n) for n in norms) else max(norms)
    summary["nonfinite_skipped"] = sum(s.get("nonfinite_skipped", 0.0) for s in done)
    summary["ratio_max"] = max(s["ratio_max"] for s in done)
    summary["ratio_min"] = min(s["ratio_min"] for s in done)
    # The first step of a batch is on-policy (drift 0 with learner old log-probs; with the sampler's,
    # loss.old_logprobs=sampler, it holds the sampler/learner gap instead): keep the largest.
    summary["drift"] = max(s["drift"] for s in done)
    # The largest factor by which an update changed one sampled token's probability, as |log r|
    # (s20: log 1/0.0016 = 6.4 at step 10, when the mean drift was still 0.007).
    extremes = [summary["ratio_max"], summary["ratio_min"]]
    summary["drift_max"] = max(abs(math.log(r)) if r > 0 else math.inf for r in extremes)
    summary["tokens"] = sum(s["tokens"] for s in done)
    summary["lr"] = done[-1]["lr"]
    return summary
