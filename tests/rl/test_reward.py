"""Credit assignment on numbers worked by hand (kevin.rl.reward)."""

from __future__ import annotations

import math

import pytest

from kevin.evaluator.result import EvalResult
from kevin.rl.reward import credit, discounted_returns, group_advantages, kernel_score, score_result


def test_kernel_score_is_bonus_plus_speedup_only_when_passed():
    assert kernel_score(True, 1.0) == pytest.approx(1.3)
    assert kernel_score(True, 2.5) == pytest.approx(2.8)
    assert kernel_score(False, 2.5) == 0.0
    assert kernel_score(False, None) == 0.0
    assert kernel_score(True, 2.0, correct_bonus=0.0) == 2.0


def test_kernel_score_rejects_contract_violations():
    with pytest.raises(ValueError, match="speedup=None"):
        kernel_score(True, None)
    with pytest.raises(ValueError, match="finite"):
        kernel_score(True, float("nan"))


def test_score_result_uses_passed_and_skips_infrastructure():
    ok = EvalResult(stage="ok", compiled=True, correct=True, speedup=2.0)
    flagged = EvalResult(stage="ok", compiled=True, correct=True, speedup=9.0, flags=["library_kernels"])
    warned = EvalResult(stage="ok", compiled=True, correct=True, speedup=2.0, flags=["some_warning"])
    wrong = EvalResult(stage="correctness", compiled=True, blame="candidate")
    ours = EvalResult(stage="runtime", blame="infrastructure")
    assert score_result(ok) == pytest.approx(2.3)
    assert score_result(flagged) == 0.0  # correct, but a blocking flag: no reward
    assert score_result(warned) == pytest.approx(2.3)  # non-blocking flags are warnings
    assert score_result(wrong) == 0.0
    assert score_result(ours) is None  # not the model's fault: no score at all


def test_returns_by_hand_sum():
    # R_2 = 2.3; R_1 = 1.3 + 0.4 * 2.3 = 2.22; R_0 = 0 + 0.4 * 1.3 + 0.16 * 2.3 = 0.888
    assert discounted_returns([0.0, 1.3, 2.3], gamma=0.4) == pytest.approx([0.888, 2.22, 2.3])


def test_returns_by_hand_max():
    # R_1 = max(1.3, 0.4 * 2.3 = 0.92) = 1.3; R_0 = max(0, 0.4 * 1.3, 0.16 * 2.3) = 0.52
    assert discounted_returns([0.0, 1.3, 2.3], gamma=0.4, aggregation="max") == pytest.approx(
        [0.52, 1.3, 2.3]
    )
    # gamma 0.8: R_1 = max(0.5, 0.8 * 2.0) = 1.6; R_0 = max(0, 0.8 * 0.5, 0.64 * 2.0) = 1.28
    assert discounted_returns([0.0, 0.5, 2.0], gamma=0.8, aggregation="max") == pytest.approx(
        [1.28, 1.6, 2.0]
    )


def test_returns_edge_cases():
    assert discounted_returns([]) == []
    assert discounted_returns([1.5]) == [1.5]
    assert discounted_returns([1.0, 2.0], gamma=0.0) == [1.0, 2.0]
    assert discounted_returns([1.0, 2.0], gamma=1.0) == [3.0, 2.0]


def test_returns_excluded_turn_counts_zero_for_earlier_turns():
    # turn 1 failed on our side: no return of its own; turn 0 sees 0 + 0.4 * 0 + 0.16 * 2.0
    assert discounted_returns([1.0, None, 2.0], gamma=0.4) == pytest.approx([1.32, None, 2.0])


def test_returns_reject_nan_and_bad_settings():
    with pytest.raises(ValueError, match="score of turn 1 is nan"):
        discounted_returns([0.0, float("nan")])
    with pytest.raises(ValueError, match="finite"):
        discounted_returns([math.inf])
    with pytest.raises(ValueError, match="aggregation"):
        discounted_returns([1.0], aggregation="mean")
    with pytest.raises(ValueError, match="gamma"):
        discounted_returns([1.0], gamma=1.5)


def test_group_advantages_mean_std_by_hand():
    # group "a": mean 2, population std 1 -> -1, +1. group "b": mean 1, deviations -1 -1 2 0,
    # variance 6/4 = 1.5, std 1.2247 -> -0.8165 -0.8165 1.633 0
    advantages = group_advantages([1.0, 0.0, 3.0, 0.0, 3.0, 1.0], ["a", "b", "a", "b", "b", "b"])
    assert advantages == pytest.approx([-1.0, -0.816497, 1.0, -0.816497, 1.632993, 0.0], abs=1e-6)


def test_group_advantages_leave_one_out_by_hand():
    # [1, 3]: 1 - 3 = -2, 3 - 1 = 2; divided by the population std 1
    assert group_advantages([1.0, 3.0], [0, 0], baseline="leave_one_out") == pytest.approx([-2.0, 2.0])
    # [0, 0, 3, 1] unscaled: 0 - 4/3, 0 - 4/3, 3 - 1/3, 1 - 1
    assert group_advantages([0.0, 0.0, 3.0, 1.0], [0] * 4, baseline="leave_one_out", scale="none") == (
        pytest.approx([-4 / 3, -4 / 3, 8 / 3, 0.0])
    )


def test_group_advantages_unscaled_mean():
    assert group_advantages([1.0, 3.0, 5.0], [0, 0, 0], scale="none") == pytest.approx([-2.0, 0.0, 2.0])


def test_zero_spread_and_single_sample_groups_give_zero():
    assert group_advantages([2.3, 2.3, 2.3], ["g"] * 3) == [0.0, 0.0, 0.0]
    assert group_advantages([0.0, 0.0], ["g"] * 2, baseline="leave_one_out") == [0.0, 0.0]
    assert group_advantages([5.0], ["g"]) == [0.0]
    assert group_advantages([5.0], ["g"], baseline="leave_one_out") == [0.0]


def test_group_advantages_leave_excluded_samples_out():
    # the None sample is ignored: the group is [1, 3]
    assert group_advantages([1.0, None, 3.0], [0, 0, 0]) == pytest.approx([-1.0, None, 1.0])


def test_group_advantages_reject_nan_and_mismatch():
    with pytest.raises(ValueError, match="reward of sample 1 is nan"):
        group_advantages([1.0, float("nan")], [0, 0])
    with pytest.raises(ValueError, match="one id per reward"):
        group_advantages([1.0, 2.0], [0])
    with pytest.raises(ValueError, match="baseline"):
        group_advantages([1.0], [0], baseline="median")


def test_credit_over_a_shuffled_batch_by_hand():
    # task t, trajectory 0: scores [0, 0, 2.3] -> returns [0.368, 0.92, 2.3]
    # task t, trajectory 1: scores [1.3, 1.8, 0] -> returns [2.02, 1.8, 0]
    # group = all 6 samples of the task: mean 1.234667, population std 0.860795
    samples = [
        (1, 2, 1.8),
        (0, 1, 0.0),
        (0, 3, 2.3),
        (1, 1, 1.3),
        (0, 2, 0.0),
        (1, 3, 0.0),
    ]
    returns, advantages = credit(
        [s for _, _, s in samples], ["t"] * 6, [j for j, _, _ in samples], [turn for _, turn, _ in samples]
    )
    assert returns == pytest.approx([1.8, 0.368, 2.3, 2.02, 0.92, 0.0])
    assert advantages == pytest.approx(
        [0.656757, -1.006821, 1.237615, 0.912334, -0.365553, -1.434332], abs=1e-6
    )


def test_credit_groups_by_turn_and_keeps_tasks_apart():
    # two tasks with the same trajectory ids; per-turn groups: turn 1 {1.3, 0.3} and turn 2 {1, 0}
    returns, advantages = credit(
        [0.3, 1.0, 1.3, 0.0, 5.0],
        ["a", "a", "b", "b", "c"],
        [0, 0, 0, 0, 0],
        [1, 2, 1, 2, 1],
        gamma=0.0,
        group_by="turn",
    )
    assert returns == pytest.approx([0.3, 1.0, 1.3, 0.0, 5.0])
    # "a" and "b" are different tasks, so every (task, turn) group has one sample -> 0
    assert advantages == [0.0, 0.0, 0.0, 0.0, 0.0]
    returns, advantages = credit(
        [0.3, 1.0, 1.3, 0.0], ["a"] * 4, [0, 0, 1, 1], [1, 2, 1, 2], gamma=0.0, group_by="turn"
    )
    assert advantages == pytest.approx([-1.0, 1.0, 1.0, -1.0])


def test_credit_rejects_duplicate_turns():
    with pytest.raises(ValueError, match="same turn twice"):
        credit([1.0, 2.0], ["a", "a"], [0, 0], [1, 1])
