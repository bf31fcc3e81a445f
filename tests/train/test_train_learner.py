"""The learner on a tiny model: log-probs, off-policy steps, accumulation, schedule (kevin.train.learner)."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from train_helpers import tiny_model, tiny_tokenizer

from kevin.train.config import LossConfig, OptimConfig
from kevin.train.learner import Learner, lr_at, warmup_steps_for
from kevin.train.logprobs import completion_logprobs, logprob_agreement
from kevin.train.model import TextCodec
from kevin.train.packing import Sample, collate, unalign


def samples(advantages=(1.0, -1.0, 0.5, -0.5), seed=0) -> list[Sample]:
    generator = torch.Generator().manual_seed(seed)
    made = []
    for index, advantage in enumerate(advantages):
        prompt = torch.randint(3, 500, (5 + index,), generator=generator).tolist()
        completion = torch.randint(3, 500, (4 + 2 * index,), generator=generator).tolist()
        made.append(Sample(tuple(prompt), tuple(completion), advantage, index=index))
    return made


def learner(model, *, loss=None, **optim) -> Learner:
    settings = {"lr": 1e-2, "grad_clip": 1e9, "gradient_steps": 1, "micro_batch_tokens": 4096, **optim}
    return Learner(
        model,
        loss=loss or LossConfig(),
        optim=OptimConfig(**settings),
        total_optimizer_steps=100,
        device=torch.device("cpu"),
        pad_id=TextCodec(tiny_tokenizer()).pad_id,
    )


def parameters(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def test_log_probs_do_not_depend_on_the_other_rows_of_the_micro_batch():
    model = tiny_model()
    batch = samples()
    together = completion_logprobs(model, collate(batch, 0), temperature=0.9, device=torch.device("cpu"))
    for sample, row in zip(batch, unalign(together, batch)):
        alone = completion_logprobs(model, collate([sample], 0), temperature=0.9, device=torch.device("cpu"))
        assert torch.allclose(row, alone[0], atol=1e-5)
    # and they are log-probabilities of the temperature-scaled distribution
    assert (together <= 0).all()


def test_first_step_is_on_policy_and_the_second_off_policy_with_clipping():
    model = tiny_model()
    result = learner(model, gradient_steps=2, minibatch_mode="repeat", lr=5e-2).learn(
        samples(), step=1, max_completion_tokens=16, temperature=1.0
    )
    first, second = result["per_step"]
    assert first["ratio_min"] == first["ratio_max"] == 1.0
    assert first["clip_low_frac"] == first["clip_high_frac"] == 0.0
    assert second["ratio_max"] > 1.0 and second["ratio_min"] < 1.0
    assert second["clip_low_frac"] + second["clip_high_frac"] > 0.0
    assert result["gradient_steps"] == 2 and result["samples_trained"] == 4


def test_split_mode_trains_each_sample_once_and_the_second_share_is_off_policy():
    model = tiny_model()
    result = learner(model, gradient_steps=2, minibatch_mode="split", lr=5e-2).learn(
        samples(advantages=(1.0, -1.0, 0.7, -0.7, 0.3, -0.3)),
        step=1,
        max_completion_tokens=16,
        temperature=1.0,
    )
    first, second = result["per_step"]
    assert first["ratio_min"] == first["ratio_max"] == 1.0
    assert second["ratio_max"] != 1.0 or second["ratio_min"] != 1.0


def test_drift_measures_how_far_earlier_updates_moved_the_policy_and_grows_with_the_step():
    # s20: lr 1e-4 updates drove sampled tokens' ratios to 0.002 and 23 and the policy collapsed;
    # the step line and the monitor read this number. On-policy (the first step) it is 0.
    drifts = []
    for lr in (1e-4, 1e-3, 1e-2):
        result = learner(tiny_model(), gradient_steps=2, minibatch_mode="split", lr=lr).learn(
            samples(advantages=(1.0, -1.0, 0.7, -0.7, 0.3, -0.3)),
            step=1,
            max_completion_tokens=16,
            temperature=1.0,
        )
        first, second = result["per_step"]
        assert first["drift"] == pytest.approx(0.0, abs=1e-12)
        assert second["drift"] > 0.0 and result["drift"] == second["drift"]
        widest = max(math.log(second["ratio_max"]), -math.log(second["ratio_min"]))
        assert result["drift_max"] == pytest.approx(widest) and widest > 0.0
        drifts.append(result["drift"])
    assert drifts[0] < drifts[1] < drifts[2]
    assert drifts[2] > 100 * drifts[0]  # about quadratic in the step for small steps


def test_gradient_accumulation_matches_one_big_micro_batch():
    batch = samples()
    small, large = tiny_model(), tiny_model()
    # adam_eps = 1 makes the first update about lr x gradient, so the weights compare the gradients
    for model, budget in ((small, 16), (large, 10_000)):
        learner(model, micro_batch_tokens=budget, lr=1.0, adam_eps=1.0).learn(
            batch, step=1, max_completion_tokens=16, temperature=1.0
        )
    for (name, a), b in zip(small.named_parameters(), large.parameters()):
        assert torch.allclose(a, b, atol=1e-6), name


def test_gradient_checkpointing_gives_the_same_update():
    batch = samples()
    plain, recomputed = tiny_model(layers=2), tiny_model(layers=2, checkpointing=True)
    assert [
        any(getattr(m, "gradient_checkpointing", False) for m in model.modules())
        for model in (plain, recomputed)
    ] == [
        False,
        True,
    ]
    for model in (plain, recomputed):
        learner(model, lr=1.0, adam_eps=1.0).learn(batch, step=1, max_completion_tokens=16, temperature=1.0)
    for (name, a), b in zip(plain.named_parameters(), recomputed.parameters()):
        assert torch.allclose(a, b, atol=1e-6), name


def test_zero_advantage_samples_are_skipped_but_counted_in_the_normaliser():
    with_zero = learner(tiny_model()).learn(
        samples((1.0, 0.0)), step=1, max_completion_tokens=16, temperature=1.0
    )
    alone = learner(tiny_model()).learn(samples((1.0,)), step=1, max_completion_tokens=16, temperature=1.0)
    assert with_zero["samples_trained"] == 1
    assert with_zero["loss"] == pytest.approx(alone["loss"] / 2)  # G = 2 against G = 1


def test_no_gradient_when_every_advantage_is_zero():
    model = tiny_model()
    before = parameters(model)
    result = learner(model).learn(samples((0.0, 0.0)), step=1, max_completion_tokens=16, temperature=1.0)
    assert result["gradient_steps"] == 0
    assert all(torch.equal(before[k], v) for k, v in model.named_parameters())


def test_sampler_log_probs_as_old_and_the_agreement_check():
    model = tiny_model()
    batch = samples((1.0, -1.0))
    exact = completion_logprobs(model, collate(batch, 0), temperature=1.0, device=torch.device("cpu"))
    rows = unalign(exact, batch)
    shifted = [
        Sample(s.prompt_ids, s.completion_ids, s.advantage, tuple((row + 0.3).tolist()), index=s.index)
        for s, row in zip(batch, rows)
    ]
    result = learner(copy.deepcopy(model), loss=LossConfig(old_logprobs="sampler")).learn(
        shifted, step=1, max_completion_tokens=16, temperature=1.0
    )
    assert result["logprob_diff_max"] == pytest.approx(0.3, abs=1e-4)
    assert result["logprob_diff_mean"] == pytest.approx(0.3, abs=1e-4)
    # the first step's ratio is exp(learner - sampler) = exp(-0.3) everywhere
    assert result["per_step"][0]["ratio_mean"] == pytest.approx(
        torch.exp(torch.tensor(-0.3)).item(), abs=1e-4
    )
    agree = logprob_agreement([r.tolist() for r in rows], rows)
    assert agree["logprob_diff_max"] < 1e-6


def test_kl_against_the_lora_base():
    model = tiny_model(lora_rank=4)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora" in n for n in trainable)
    result = learner(model, loss=LossConfig(kl_coef=0.1), gradient_steps=2, minibatch_mode="repeat").learn(
        samples(), step=1, max_completion_tokens=16, temperature=1.0
    )
    first, second = result["per_step"]
    assert first["kl"] == pytest.approx(0.0, abs=1e-7)  # LoRA starts as the identity
    assert second["kl"] > 0.0


def test_constant_learning_rate_with_warm_up():
    assert warmup_steps_for(200, 0.03) == 6
    assert [lr_at(k, peak_lr=2e-6, warmup_steps=4) for k in (0, 1, 3, 50)] == pytest.approx(
        [5e-7, 1e-6, 2e-6, 2e-6]
    )
    assert lr_at(0, peak_lr=1.0, warmup_steps=0) == 1.0
    # Moments reset at optimiser step 10 (a slim resume): the rate warms up again from there.
    assert [lr_at(k, peak_lr=1.0, warmup_steps=4, rewarm_from=10) for k in (10, 11, 13, 40)] == pytest.approx(
        [0.25, 0.5, 1.0, 1.0]
    )
    assert lr_at(1, peak_lr=1.0, warmup_steps=4, rewarm_from=0) == pytest.approx(0.5 * 0.5)  # both ramps
    assert lr_at(10, peak_lr=1.0, warmup_steps=0, rewarm_from=10) == 1.0
    model = tiny_model()
    trained = Learner(
        model,
        loss=LossConfig(),
        optim=OptimConfig(lr=1e-3, warmup_fraction=0.5, gradient_steps=2),
        total_optimizer_steps=4,
        device=torch.device("cpu"),
        pad_id=0,
    )
    result = trained.learn(samples(), step=1, max_completion_tokens=16, temperature=1.0)
    assert [s["lr"] for s in result["per_step"]] == pytest.approx([5e-4, 1e-3])
    assert trained.state()["optimizer_steps"] == 2


def test_grad_norm_is_reported_before_clipping():
    result = learner(tiny_model(), grad_clip=1e-6).learn(
        samples(), step=1, max_completion_tokens=16, temperature=1.0
    )
    assert result["grad_norm"] > 1e-6


def test_an_update_with_a_non_finite_gradient_is_dropped_and_reported():
    # s12 on the H200: a NaN gradient in the second gradient step turned every weight into NaN (the
    # step line showed the first step's finite norm) and the next sampling step failed on the GPU.
    model = tiny_model()
    calls = []

    def poison_second_backward(grad):
        calls.append(1)
        return grad * float("nan") if len(calls) == 2 else grad

    next(model.parameters()).register_hook(poison_second_backward)
    trained = learner(model, gradient_steps=2, minibatch_mode="repeat")
    before = parameters(model)
    result = trained.learn(samples(), step=1, max_completion_tokens=16, temperature=1.0)
    after = parameters(model)
    assert len(calls) == 2
    assert all(torch.isfinite(v).all() for v in after.values())
    assert any(not torch.equal(before[k], after[k]) for k in before)  # the first update happened
    assert trained.state()["optimizer_steps"] == 1
    assert result["nonfinite_skipped"] == 1.0 and result["grad_norm"] != result["grad_norm"]  # NaN
    first, second = result["per_step"]
    assert first["nonfinite_skipped"] == 0.0 and second["nonfinite_skipped"] == 1.0
    # the optimiser state holds no NaN either: the next update is finite
    again = trained.learn(samples(seed=1), step=2, max_completion_tokens=16, temperature=1.0)
    assert again["nonfinite_skipped"] == 0.0
    assert all(torch.isfinite(v).all() for v in model.parameters())


def unguarded_sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """Attention as a kernel that does not guard fully masked rows computes it: softmax over a row of
    -inf is NaN (as on the H200 in s12, where left-padded training batches gave NaN gradients)."""
    if enable_gqa and key.shape[1] != query.shape[1]:
        key = key.repeat_interleave(query.shape[1] // key.shape[1], dim=1)
        value = value.repeat_interleave(query.shape[1] // value.shape[1], dim=1)
    scores = query @ key.transpose(-1, -2) * (scale if scale is not None else query.shape[-1] ** -0.5)
    if is_causal:
        length = scores.shape[-1]
        causal = torch.ones(scores.shape[-2], length, dtype=torch.bool).tril(diagonal=length - scores.shape[-2])
        scores = scores.masked_fill(~causal, float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else scores + attn_mask
    return torch.softmax(scores, dim=-1) @ value


@pytest.mark.parametrize("implementation", ["sdpa", "eager"])
def test_left_padding_gives_finite_gradients_and_the_same_log_probs_under_an_unguarded_kernel(
    monkeypatch, implementation
):
    model = tiny_model(layers=2)
    model.config._attn_implementation = implementation
    batch = collate(samples(), 0)  # rows of different lengths: left padding
    assert not bool(batch.attention_mask.all())
    reference = completion_logprobs(model, batch, temperature=0.9, device=torch.device("cpu")).detach()
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", unguarded_sdpa)
    logprobs = completion_logprobs(model, batch, temperature=0.9, device=torch.device("cpu"))
    counted = torch.zeros_like(logprobs, dtype=torch.bool)
    for row, sample in enumerate(samples()):
        counted[row, logprobs.shape[1] - len(sample.completion_ids) :] = True
    assert torch.allclose(logprobs[counted], reference[counted], atol=1e-5)
    assert torch.isfinite(logprobs).all()  # pad and prompt positions too: nothing to poison the backward
    torch.where(counted, logprobs, torch.zeros_like(logprobs)).sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
