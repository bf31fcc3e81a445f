"""The comparator's rules on outputs near atol's size (threat 6: tolerance exploitation on outputs near
zero). Each case is an output the learning run's family makes at its GPU shape."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from kevin.evaluator.compare import compare

ATOL = RTOL = 1e-4


def _softmax_chain(cols: int, slope: float, *, slipped: bool) -> torch.Tensor:
    """softmax(sigmoid(leaky(x))) over `cols` columns; `slipped` puts the slope on the positive side, as
    the family's `wrong_slip` kernel of softmax_leaky_sigmoid does."""
    x = torch.randn(64, cols, generator=torch.Generator().manual_seed(0))
    v = torch.where(x > 0, x * slope, x) if slipped else F.leaky_relu(x, slope)
    return torch.softmax(torch.sigmoid(v), dim=-1)


def test_a_wrong_softmax_whose_outputs_are_near_atol_is_rejected():
    # s40 on the H100: this kernel reached `ok` at 1.70x. Every element is within atol (outputs
    # ~2.4e-4 against atol 1e-4) while 8.5% of the output's norm is wrong.
    for slope in (0.1, 0.2):
        wrong, expected = (_softmax_chain(4096, slope, slipped=s) for s in (True, False))
        report = compare([wrong], [expected], ATOL, RTOL)
        assert not report["ok"] and report["mismatched"] == 0
        assert "relative L2 error" in report["reason"] and "RMS error" in report["reason"]


def test_float_order_noise_on_the_same_softmax_passes():
    expected = _softmax_chain(8192, 0.2, slipped=False)
    x = torch.randn(64, 8192, generator=torch.Generator().manual_seed(0)).double()
    # Another order and precision: float64 throughout, rounded once at the end.
    again = torch.softmax(torch.sigmoid(F.leaky_relu(x, 0.2)), dim=-1).float()
    chunked = torch.cat([row / row.sum() for row in torch.exp(torch.sigmoid(F.leaky_relu(x.float(), 0.2)))])
    for output in (again, chunked.reshape(64, 8192)):
        report = compare([output], [expected], ATOL, RTOL)
        assert report["ok"], report.get("reason")


def test_rounding_noise_where_outputs_cancel_stays_under_the_noise_floor():
    # (a + b) - b against a: the reference's rounding is an ulp of b's size, a large share of a tiny
    # output (relative L2 above 10 x rtol) but far under the floor.
    gen = torch.Generator().manual_seed(1)
    a = 1e-4 * torch.randn(1 << 16, generator=gen)
    b = 10.0 * torch.randn(1 << 16, generator=gen)
    expected = (a + b) - b
    report = compare([a], [expected], ATOL, RTOL)
    assert report["relative_l2_error"] > 10 * RTOL
    assert report["ok"], report.get("reason")


def test_an_all_zero_output_still_fails_on_tiny_outputs():
    expected = 1e-6 * torch.rand(4096, generator=torch.Generator().manual_seed(2))
    report = compare([torch.zeros(4096)], [expected], ATOL, RTOL)
    assert not report["ok"] and "(limit 0.1)" in report["reason"]


def test_a_small_error_on_large_outputs_is_the_elementwise_rules_business():
    # Outputs of size ~100: rtol dominates; 1e-3 relative error is caught elementwise, as before.
    expected = 100 + torch.rand(4096, generator=torch.Generator().manual_seed(3))
    report = compare([expected * (1 + 1e-3)], [expected], ATOL, RTOL)
    assert not report["ok"] and report["mismatched"] == 4096
