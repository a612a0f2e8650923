"""The error-budget math of :mod:`workstation.analysis.numerics`, against hand-computed values.

Every expected number below is worked out in the comment next to it (IEEE 754 binary
formats, Higham's γ_k, Higham and Mary's γ̃_k(λ)), not recomputed with the code under test.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from workstation.analysis.compare import ResolvedTolerance
from workstation.analysis.numerics import (
    Budget,
    allowed_error,
    budget_floor,
    error_stats,
    fa_floor,
    fit_tolerance,
    gamma,
    gamma_tilde,
    hm_lambda,
    nice_up,
    ratio_floor,
    reduced_params,
    reduction_from_contract,
    reduction_from_perturbation,
    reduction_from_shapes,
    round_to,
    ulp,
    unit_roundoff,
)


def test_unit_roundoffs_are_two_to_minus_p():
    # u = 2^-p with p the precision in bits including the implicit bit (IEEE 754)
    assert unit_roundoff("float16") == 2.0**-11 == 0.00048828125
    assert unit_roundoff("bfloat16") == 2.0**-8 == 0.00390625
    assert unit_roundoff("float32") == 2.0**-24
    assert unit_roundoff("float64") == 2.0**-53
    assert unit_roundoff("tf32") == 2.0**-11
    assert unit_roundoff("float8_e4m3fn") == 2.0**-4
    assert unit_roundoff("float8_e5m2") == 2.0**-3


def test_gamma_worst_case():
    # γ_1000 in fp32: 1000 * 2^-24 = 5.9604644775390625e-05; / (1 - 5.96046e-05) = 5.960820e-05
    assert gamma(1000, 2.0**-24) == pytest.approx(5.9608197700840e-05, rel=1e-12)
    # γ_1 = u / (1 - u)
    assert gamma(1, 2.0**-11) == pytest.approx(2.0**-11 / (1 - 2.0**-11), rel=1e-15)
    # K*u >= 1 (4096 fp16 additions): the worst-case bound does not exist
    assert gamma(2048, 2.0**-11) == math.inf
    assert gamma(4096, 2.0**-11) == math.inf


def test_gamma_tilde_higham_mary():
    # λ = 1, K = 100, u = 2^-11: λ√K u = 10 * 2^-11 = 4.8828125e-3;
    # K u²/(1-u) = 100 * 2^-22 / (1 - 2^-11) = 2.3853500e-05; exp(4.9066660e-3) - 1 = 4.9187234e-3
    assert gamma_tilde(100, 2.0**-11, 1.0) == pytest.approx(4.9187234e-3, rel=1e-7)
    # first order: λ√K·u
    assert gamma_tilde(10_000, 2.0**-24, 3.0) == pytest.approx(3.0 * 100 * 2.0**-24, rel=1e-4)


def test_lambda_union_bound():
    # one inner product of length 1, one output, δ = 1e-3: λ = sqrt(2 ln 2000) = sqrt(15.20180) = 3.898949
    assert hm_lambda(1, 1) == pytest.approx(3.8989492, rel=1e-7)
    # K = 1024, 1024 outputs: sqrt(2 ln(2 * 2^20 / 1e-3)) = sqrt(2 * 21.46413) = 6.551922 (u = 0)
    assert hm_lambda(1024, 1024) == pytest.approx(6.5519215, rel=1e-6)


def test_budget_fp16_out_fp32_accumulator():
    b = Budget(k=1024, k_source="test", acc_dtype="float32", out_dtype="float16", n_out=1024,
               magnitude="|a|ᵀ|b|", tau=0.0)
    # λ = 6.5519232 (u = 2^-24 in the denominator); γ̃ ≈ 6.5519232 * 32 * 2^-24 = 1.24969e-05
    assert b.lam == pytest.approx(6.5519232, rel=1e-6)
    assert b.rho_prob == pytest.approx(1.24969e-05, rel=1e-4)
    # γ_1024 = 1024 * 2^-24 / (1 - 1024 * 2^-24) = 6.103516e-05 / 0.99993896 = 6.103888e-05
    assert b.rho_worst == pytest.approx(6.103888e-05, rel=1e-6)
    assert b.rho == b.rho_prob and b.bound_name == "probabilistic"
    # S = 10, y = 2: rho*10 + 2^-11 * 2 = 1.24969e-04 + 9.765625e-04 = 1.1015315e-03
    B = b.per_element(np.array([10.0]), np.array([2.0]))
    assert float(B[0]) == pytest.approx(1.1015315e-03, rel=1e-5)
    assert "gamma_K" in b.formula_text() and "Higham" in b.formula_text()


def test_budget_short_reduction_uses_worst_case():
    # K = 1: γ_1 = u/(1-u) = 5.96e-8 is smaller than λ*u (λ > 1)
    b = Budget(1, "elementwise", "float32", "float32", 100, "|y|", 0.0)
    assert b.bound_name == "worst-case"
    assert b.rho == pytest.approx(2.0**-24 / (1 - 2.0**-24))


def test_budget_floor():
    # 8 * 2^-24 * 4 + 2^(-14 - 11) (half the smallest fp16 subnormal 2^-24) = 1.9073486e-06 + 2.9802322e-08
    assert budget_floor(4.0, "float32", "float16") == pytest.approx(1.9371510e-06, rel=1e-7)


@pytest.mark.parametrize("x, dtype, want", [
    (1.0 + 2.0**-8, "bfloat16", 1.0),                  # exactly halfway: ties to even (1.0)
    (1.0 + 3 * 2.0**-9, "bfloat16", 1.0 + 2.0**-7),     # 0.75 ulp above 1: up
    (1.0 + 3 * 2.0**-8, "bfloat16", 1.0 + 2.0**-6),     # halfway between 1+2^-7 (odd) and 1+2^-6 (even)
    (3.4e38, "bfloat16", math.inf),                     # above max + half ulp (3.3895e38 + 2^119)
    (2.0**-10, "float8_e4m3fn", 0.0),                    # half the smallest subnormal 2^-9: ties to 0
    (1.5 * 2.0**-10, "float8_e4m3fn", 2.0**-9),
    (449.0, "float8_e4m3fn", 448.0),
    (0.1, "float16", 0.0999755859375),                  # 1638 * 2^-14
    (-2.5, "tf32", -2.5),
])
def test_round_to(x, dtype, want):
    assert float(round_to(np.array([x]), dtype)[0]) == want


def test_ulp_spacing():
    assert float(ulp(np.array([1.0]), "float16")[0]) == 2.0**-10
    assert float(ulp(np.array([0.0]), "float16")[0]) == 2.0**-24      # smallest subnormal
    assert float(ulp(np.array([65504.0]), "float16")[0]) == 32.0
    assert float(ulp(np.array([3.0]), "float32")[0]) == 2.0**-22


def test_fa_floor_hand_computed():
    # o = 0.1 in fp16: fl(0.1) = 0.0999755859375; fl(0.0999755859375 + 0.3) = 0.39990234375 (1638 * 2^-12);
    # fl(0.39990234375 - 0.3) = 0.09991455078125 (1637 * 2^-14); difference 2^-14 = 6.103515625e-05; x2
    assert fa_floor(np.array([0.1]), "float16") == 2 * 6.103515625e-05


def _fp32_reduction(n: int = 256, k: int = 4096) -> tuple[np.ndarray, np.ndarray, Budget]:
    """An fp32 output of a K-long reduction (row sums of N(0, 1) data), its magnitude S and budget."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, k)) / math.sqrt(k)  # outputs of order 1
    y = x.sum(axis=1)
    mag = np.abs(x).sum(axis=1)
    bud = Budget(k, "test", "float32", "float32", n, "|a|", budget_floor(np.abs(y).max(), "float32", "float32", 0))
    return y, mag, bud


def test_ratio_floor_is_one_budget_of_the_reduction():
    """Issue 28: a correct fp32 fusion 1.0e-6 from the float64 oracle beside a baseline's 9e-8
    broke "2x + FlashAttention's floor"; the rounding floor (one budget: gamma_K of the
    reduction length times the magnitude) admits it, and a defect far beyond the budget
    still fails."""
    y, mag, bud = _fp32_reduction()
    B = bud.per_element(mag, y)
    fl = ratio_floor(y, "float32", B)
    assert fl["fa_floor"] == fa_floor(y, "float32")
    assert fl["budget_floor"] == pytest.approx(float(B.max()))
    assert fl["floor"] == max(fl["fa_floor"], fl["budget_floor"])
    assert fl["floor"] >= bud.rho * float(mag.max())
    fused, base = 1.0e-6, 9e-8
    assert fused > 2 * base + fl["fa_floor"]  # the old rule failed it
    assert fused <= 2 * base + fl["floor"]  # the rounding floor admits it
    # the same sums accumulated in fp16 (a less precise kernel) still fail the rule
    x = np.random.default_rng(0).standard_normal((256, 4096)) / math.sqrt(4096)
    half = np.array([np.cumsum(r.astype(np.float16), dtype=np.float16)[-1] for r in x], dtype=np.float64)
    assert np.abs(half - y).max() > 2 * base + fl["floor"]


def test_ratio_floor_a_real_fp32_reordering_passes():
    """A real reordering (pairwise vs sequential fp32 sums) against the float64 oracle stays
    within 2x the other order's error plus the floor, both ways."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 8192)).astype(np.float32)
    oracle = x.astype(np.float64).sum(axis=1)
    seq = np.array([np.cumsum(r, dtype=np.float32)[-1] for r in x], dtype=np.float64)
    pair = x.sum(axis=1, dtype=np.float32).astype(np.float64)
    mag = np.abs(x.astype(np.float64)).sum(axis=1)
    bud = Budget(8192, "test", "float32", "float32", 64, "|a|", budget_floor(np.abs(oracle).max(), "float32", "float32", 0))
    floor = ratio_floor(oracle, "float32", bud.per_element(mag, oracle))["floor"]
    e_seq, e_pair = np.abs(seq - oracle).max(), np.abs(pair - oracle).max()
    assert e_seq <= 2 * e_pair + floor and e_pair <= 2 * e_seq + floor


def test_ratio_floor_without_budget_and_degenerate_oracles():
    """Without a per-element budget the floor is tau at max|y| (TAU_OPS roundings of the
    accumulator); an all-zero or non-finite oracle gives a zero floor, never an error."""
    y = np.array([0.5, -3.0, 2.0])
    fl = ratio_floor(y, "float32")
    assert fl["budget_floor"] == budget_floor(3.0, "float32", "float32")
    assert fl["floor"] == max(fl["fa_floor"], fl["budget_floor"])
    assert ratio_floor(np.array([np.inf, np.nan]), "float32")["floor"] == 0.0
    assert ratio_floor(np.zeros(0), "float16", np.zeros(0))["floor"] == 0.0


def test_error_stats_against_budget():
    oracle = np.array([[1.0, 2.0], [0.0, -4.0]])
    got = np.array([[1.0, 2.5], [0.001, np.nan]])
    budget = np.array([[0.1, 0.1], [0.1, 0.1]])
    st = error_stats(got, oracle, "float32", budget)
    assert st.max_abs == 0.5 and st.max_rel == 0.25
    assert st.nonfinite == 1 and st.budget_ratio == math.inf and st.worst["index"] == [1, 1]
    assert st.beyond == 2  # the 0.5 error (5x) and the NaN


def test_allowed_error_rules():
    t = ResolvedTolerance(1e-3, 2e-3, None, "float16", "declared")
    assert allowed_error(t, np.array([-2.0]))[0] == pytest.approx(5e-3)
    # ULP tolerance: 2 ULP of fp16 at 1.0 = 2 * 2^-10, floor atol 0
    u = ResolvedTolerance(0.0, 0.0, 2.0, "float16", "declared")
    assert allowed_error(u, np.array([1.0]))[0] == 2 * 2.0**-10


def test_fit_tolerance_recovers_lines():
    y = np.linspace(-5, 5, 1001)
    a, r = fit_tolerance(y, 0.1 + 0.01 * np.abs(y))
    assert a == pytest.approx(0.1, rel=1e-8) and r == pytest.approx(0.01, rel=1e-8)
    assert fit_tolerance(y, 0.02 * np.abs(y)) == pytest.approx((0.0, 0.02))
    assert fit_tolerance(y, np.full_like(y, 0.3)) == pytest.approx((0.3, 0.0))
    assert fit_tolerance(y, np.zeros_like(y)) == (0.0, 0.0)


def test_fit_tolerance_is_always_feasible():
    rng = np.random.default_rng(0)
    m = np.abs(rng.normal(size=50_000)) * 10
    need = 1e-3 + 2e-3 * m + rng.uniform(0, 1e-4, size=m.size)
    a, r = fit_tolerance(m, need)
    assert np.all(a + r * m >= need)
    assert a == pytest.approx(1.1e-3, rel=1e-3) and r == pytest.approx(2e-3, rel=1e-3)


@pytest.mark.parametrize("x, want", [(1.06e-3, 1.2e-3), (6.44e-8, 8e-8), (1e-3, 1e-3), (0.0021, 0.0025),
                                     (9.9e-5, 1e-4), (0.0, 0.0)])
def test_nice_up(x, want):
    assert nice_up(x) == want


def test_reduction_sources():
    assert reduction_from_contract({"M": 8, "K": 512, "dtype": "float16"}, ["K"]).k == 512
    assert reduction_from_contract({"B": 2, "S": 64}, ["B", "S"]).k == 128
    # matmul (M, K) @ (K, N): K vanishes; M = 64 = K in the first case is ambiguous, the second decides
    cases = [({"M": 64, "N": 64, "K": 64}, [[64, 64], [64, 64]], [[64, 64]]),
             ({"M": 100, "N": 72, "K": 120}, [[100, 120], [120, 72]], [[100, 72]])]
    assert reduced_params(cases) == ("K",)
    # softmax: nothing vanishes
    assert reduced_params([({"M": 4, "N": 2048}, [[4, 2048]], [[4, 2048]])]) == ()
    # a row sum (M, K) -> (M,) without case parameters
    assert reduction_from_shapes([[37, 256]], [[37]]).k == 256
    assert reduction_from_shapes([[37, 256]], [[37, 256]]) is None
    assert reduction_from_perturbation(1024, 0, 65536).k == 1024
    assert reduction_from_perturbation(0, 0, 65536).k == 1


def test_parent_side_modules_do_not_import_torch():
    import subprocess
    import sys

    code = ("import sys; import workstation.analysis.numerics, workstation.checks.support.numaudit, "
            "workstation.checks.tolerance_loose, workstation.checks.tolerance_tight, "
            "workstation.checks.precision_regime, workstation.checks.reference_suspect; "
            "assert 'torch' not in sys.modules and 'triton' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[1])


# ----------------------------------------------------------------------------- error structure


def _budget(o, mag, k, acc="float32", out="float32", ops=8):
    from workstation.analysis.numerics import Budget, budget_floor

    b = Budget(k=k, k_source="test", acc_dtype=acc, out_dtype=out, n_out=o.size, magnitude="|y|",
               tau=budget_floor(float(np.abs(o).max()), acc, out, ops))
    return b.per_element(mag, o)


def test_error_structure_dropped_softcap_is_a_different_function():
    """A wrapper that drops a logit soft-cap returns x where the reference returns
    30·tanh(x/30): far above fp32 rounding at every magnitude, a function of the value,
    every error away from zero."""
    from workstation.analysis.numerics import error_structure

    x = np.random.default_rng(0).standard_normal((64, 128)) * 10
    oracle = 30 * np.tanh(x / 30)
    got = x.astype(np.float32).astype(np.float64)
    s = error_structure(got, oracle, _budget(oracle, oracle, 1))
    assert s["systematic"]
    assert s["min_bin_excess"] >= 8 and s["explained_by_value"] >= 0.6
    assert s["sign_consistent"] and s["sign"] == "away from zero"


def test_error_structure_dropped_bias_is_systematic_along_its_axis():
    from workstation.analysis.numerics import error_structure

    rng = np.random.default_rng(1)
    a, b, bias = rng.standard_normal((64, 256)), rng.standard_normal((256, 32)), rng.standard_normal(32)
    oracle = a @ b + bias
    got = (a @ b).astype(np.float32).astype(np.float64)
    s = error_structure(got, oracle, _budget(oracle, np.abs(a) @ np.abs(b) + np.abs(bias), 256, ops=0))
    assert s["systematic"] and s["axis"] == 1 and s["explained_by_axis"] > 0.9


def test_error_structure_fp16_accumulation_is_less_precise():
    """fp16 accumulation of a K = 256 inner product: far above the fp32 budget, but rounding
    (random sign, no structure): less precise, not a different function."""
    from workstation.analysis.numerics import error_structure

    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((64, 256)), rng.standard_normal((256, 32))
    oracle = a @ b
    acc = np.zeros((64, 32), np.float16)
    for k in range(256):
        acc = (acc + (a[:, k:k + 1] * b[k:k + 1, :]).astype(np.float16)).astype(np.float16)
    s = error_structure(acc.astype(np.float64), oracle, _budget(oracle, np.abs(a) @ np.abs(b), 256, ops=0))
    assert s["min_bin_excess"] > 1  # beyond the fp32 budget...
    assert not s["systematic"]  # ...but rounding
    assert s["sign_agreement"] < 0.7


def test_error_structure_one_way_truncation_is_less_precise():
    """Truncating fp32 values to bf16 errs one way (sign agreement 1.0) and far above the
    fp32 budget, yet it is rounding: its error in ulps is a sawtooth, not a function of the value."""
    from workstation.analysis.numerics import error_structure

    y = np.random.default_rng(3).standard_normal((64, 128))
    t = (y.astype(np.float32).view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32).astype(np.float64)
    s = error_structure(t, y, _budget(y, y, 1))
    assert s["sign_consistent"] and s["min_bin_excess"] > 8
    assert not s["systematic"] and s["explained_by_value"] < 0.3


def test_error_structure_correct_result_and_tiny_outputs():
    from workstation.analysis.numerics import error_structure

    y = np.random.default_rng(4).standard_normal((64, 128))
    assert not error_structure(y.astype(np.float32).astype(np.float64), y, _budget(y, y, 1))["systematic"]
    small = error_structure(np.zeros(8), np.ones(8), np.full(8, 1e-7))
    assert not small["systematic"] and "fewer than 32" in small["reason"]
