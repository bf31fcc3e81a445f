"""The loss against numbers worked by hand (kevin.train.grpo)."""

from __future__ import annotations

import math

import pytest
import torch

from kevin.train import grpo

LN = math.log


def one_token_each(ratios, advantages):
    """B samples of one token each, with the given ratios (old log-prob 0)."""
    logprobs = torch.tensor([[LN(r)] for r in ratios], dtype=torch.float64, requires_grad=True)
    old = torch.zeros_like(logprobs)
    return logprobs, old, torch.tensor(advantages, dtype=torch.float64)


def test_clip_low_and_high_cases_by_hand():
    # r = 1.5, A = +1: min(1.5, 1.28) = 1.28, clipped high, no gradient
    # r = 1.5, A = -1: min(-1.5, -1.28) = -1.5, not clipped (no dual clip), d(-s)/dlogp = -A r = 1.5
    # r = 0.5, A = +1: min(0.5, 0.8) = 0.5, not clipped, gradient -A r = -0.5
    # r = 0.5, A = -1: min(-0.5, -0.8) = -0.8, clipped low, no gradient
    logprobs, old, advantages = one_token_each([1.5, 1.5, 0.5, 0.5], [1.0, -1.0, 1.0, -1.0])
    surrogate, low, high = grpo.clipped_surrogate(logprobs, old, advantages, clip_low=0.2, clip_high=0.28)
    assert surrogate.squeeze(1).tolist() == pytest.approx([1.28, -1.5, 0.5, -0.8])
    assert high.squeeze(1).tolist() == [True, False, False, False]
    assert low.squeeze(1).tolist() == [False, False, False, True]
    terms = grpo.policy_loss(
        logprobs,
        old,
        advantages,
        torch.ones_like(logprobs),
        torch.ones(4, dtype=torch.float64),
        clip_low=0.2,
        clip_high=0.28,
    )
    assert terms.loss.item() == pytest.approx(-(1.28 - 1.5 + 0.5 - 0.8))
    terms.loss.backward()
    assert logprobs.grad.squeeze(1).tolist() == pytest.approx([0.0, 1.5, -0.5, 0.0])
    assert (terms.tokens, terms.clipped_low, terms.clipped_high) == (4, 1, 1)
    assert terms.ratio_max == pytest.approx(1.5) and terms.ratio_min == pytest.approx(0.5)


def test_inside_the_trust_region_the_surrogate_is_ratio_times_advantage():
    logprobs, old, advantages = one_token_each([1.1, 0.9], [2.0, -3.0])
    terms = grpo.policy_loss(
        logprobs,
        old,
        advantages,
        torch.ones_like(logprobs),
        torch.ones(2, dtype=torch.float64),
        clip_low=0.2,
        clip_high=0.28,
    )
    assert terms.loss.item() == pytest.approx(-(1.1 * 2.0 + 0.9 * -3.0))
    assert terms.clipped_low == terms.clipped_high == 0


def test_clip_higher_is_asymmetric():
    # r = 1.25 is inside 1 + 0.28 but outside 1 + 0.2: clip-higher lets it through
    logprobs, old, advantages = one_token_each([1.25], [1.0])
    assert grpo.clipped_surrogate(logprobs, old, advantages, clip_low=0.2, clip_high=0.28)[
        0
    ].item() == pytest.approx(1.25)
    assert grpo.clipped_surrogate(logprobs, old, advantages, clip_low=0.2, clip_high=0.2)[
        0
    ].item() == pytest.approx(1.2)


def test_masked_tokens_do_not_count():
    logprobs = torch.tensor([[0.0, 50.0], [0.0, 0.0]], dtype=torch.float64, requires_grad=True)
    old = torch.zeros_like(logprobs)
    mask = torch.tensor([[1.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    terms = grpo.policy_loss(
        logprobs,
        old,
        torch.tensor([1.0, 1.0], dtype=torch.float64),
        mask,
        torch.ones(2, dtype=torch.float64),
        clip_low=0.2,
        clip_high=0.28,
    )
    assert terms.loss.item() == pytest.approx(-3.0)  # three counted tokens at ratio 1, A = 1
    terms.loss.backward()
    assert logprobs.grad[0, 1].item() == 0.0
    assert terms.tokens == 3 and terms.ratio_max == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("normalization", "expected_loss", "weights"),
    [
        # lengths 2 and 4, A = +1 and -1, ratio 1: loss = -sum_i w_i |o_i| A_i
        ("constant", -(2 - 4) / 16, [1 / 16, 1 / 16]),  # w = 1 / (G L_max) = 1 / (2 * 8)
        ("token", -(2 - 4) / 6, [1 / 6, 1 / 6]),  # w = 1 / (2 + 4)
        ("sequence", 0.0, [1 / 4, 1 / 8]),  # w_i = 1 / (G |o_i|): each sample's mean, then the mean
    ],
)
def test_length_normalisations(normalization, expected_loss, weights):
    lengths = torch.tensor([2, 4])
    w = grpo.sample_weights(lengths, normalization, max_completion_tokens=8)
    assert w.tolist() == pytest.approx(weights)
    logprobs = torch.zeros((2, 4), dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]], dtype=torch.float64)
    terms = grpo.policy_loss(
        logprobs,
        torch.zeros_like(logprobs),
        torch.tensor([1.0, -1.0], dtype=torch.float64),
        mask,
        w,
        clip_low=0.2,
        clip_high=0.28,
    )
    assert terms.loss.item() == pytest.approx(expected_loss)


def test_dr_grpo_has_no_length_bias_but_sequence_mean_does():
    # one long wrong answer: under the sequence mean each of its tokens weighs less than a short one's
    lengths = torch.tensor([1, 10])
    constant = grpo.sample_weights(lengths, "constant", max_completion_tokens=16)
    sequence = grpo.sample_weights(lengths, "sequence", max_completion_tokens=16)
    assert constant[0] == constant[1]
    assert sequence[0] == pytest.approx(10 * sequence[1])


def test_micro_batches_with_global_counts_sum_to_the_whole_batch():
    torch.manual_seed(0)
    logprobs = torch.randn(4, 3, dtype=torch.float64)
    old = logprobs + 0.1 * torch.randn_like(logprobs)
    advantages = torch.tensor([1.0, -0.5, 0.3, -0.8], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1], [0, 1, 1], [0, 0, 1], [1, 1, 1]], dtype=torch.float64)
    lengths = mask.sum(1)
    for normalization in grpo.NORMALIZATIONS:
        w = grpo.sample_weights(lengths, normalization, max_completion_tokens=3)
        whole = grpo.policy_loss(logprobs, old, advantages, mask, w, clip_low=0.2, clip_high=0.28).loss
        halves = sum(
            grpo.policy_loss(
                logprobs[rows],
                old[rows],
                advantages[rows],
                mask[rows],
                grpo.sample_weights(
                    lengths[rows],
                    normalization,
                    max_completion_tokens=3,
                    samples=4,
                    total_tokens=int(lengths.sum()),
                ),
                clip_low=0.2,
                clip_high=0.28,
            ).loss
            for rows in (slice(0, 2), slice(2, 4))
        )
        assert halves.item() == pytest.approx(whole.item()), normalization


def test_k3_kl_by_hand_and_in_the_loss():
    logprobs = torch.tensor([[LN(0.5)]], dtype=torch.float64)
    reference = torch.tensor([[LN(0.25)]], dtype=torch.float64)
    # q = ln(0.25 / 0.5) = -ln 2: exp(q) - q - 1 = 0.5 + ln 2 - 1
    expected = 0.5 + LN(2) - 1
    assert grpo.k3_kl(logprobs, reference).item() == pytest.approx(expected)
    assert grpo.k3_kl(logprobs, logprobs).item() == 0.0
    terms = grpo.policy_loss(
        logprobs,
        logprobs,
        torch.tensor([0.0], dtype=torch.float64),
        torch.ones_like(logprobs),
        torch.tensor([0.5], dtype=torch.float64),
        clip_low=0.2,
        clip_high=0.28,
        kl_coef=0.1,
        ref_logprobs=reference,
    )
    assert terms.loss.item() == pytest.approx(0.5 * 0.1 * expected)
    assert terms.kl_sum == pytest.approx(expected)


def test_policy_drift_is_k3_of_the_old_policy_against_the_new():
    old = torch.tensor([[LN(0.5), LN(0.2)]], dtype=torch.float64)
    new = torch.tensor([[LN(0.25), LN(0.2)]], dtype=torch.float64)
    # r = 0.25 / 0.5 on the first token: r - 1 - ln r = -0.5 + ln 2; nothing moved on the second
    drift = grpo.policy_drift(new, old)
    assert drift[0, 0].item() == pytest.approx(-0.5 + LN(2))
    assert drift[0, 1].item() == 0.0
    terms = grpo.policy_loss(
        new,
        old,
        torch.tensor([1.0], dtype=torch.float64),
        torch.tensor([[1.0, 0.0]], dtype=torch.float64),  # the second token is masked out
        torch.tensor([1.0], dtype=torch.float64),
        clip_low=0.2,
        clip_high=0.28,
    )
    assert terms.drift_sum == pytest.approx(-0.5 + LN(2))
    on_policy = grpo.policy_loss(
        old, old, torch.tensor([1.0]), torch.ones_like(old), torch.tensor([1.0]), clip_low=0.2, clip_high=0.28
    )
    assert on_policy.drift_sum == 0.0


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="ref_logprobs"):
        grpo.policy_loss(
            torch.zeros(1, 1),
            torch.zeros(1, 1),
            torch.zeros(1),
            torch.ones(1, 1),
            torch.ones(1),
            clip_low=0.2,
            clip_high=0.28,
            kl_coef=0.1,
        )
    with pytest.raises(ValueError, match="normalization"):
        grpo.sample_weights(torch.tensor([1]), "mean", max_completion_tokens=8)
    with pytest.raises(ValueError, match="counted token"):
        grpo.sample_weights(torch.tensor([0, 0]), "token", max_completion_tokens=8)
