"""Timing statistics on synthetic samples: medians, IQR, noise, the bootstrap ratio
interval, the claim rule, and the roofline table (no task code runs here)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from workstation.analysis import roofline
from workstation.analysis.timingstats import (
    MAX_STORED_SAMPLES,
    RatioCI,
    consistent_with,
    iqr,
    judge_claim,
    log_distance,
    median,
    ratio_ci,
    stdrel,
    summarize,
    thin,
)


def test_median_iqr_stdrel_match_numpy_definitions():
    xs = [5.0, 1.0, 3.0, 2.0, 4.0, 100.0]
    assert median(xs) == 3.5
    q1, q3 = iqr(xs)
    assert (q1, q3) == (float(np.percentile(xs, 25)), float(np.percentile(xs, 75)))
    assert stdrel(xs) == pytest.approx(np.std(xs, ddof=1) / np.mean(xs))
    assert math.isnan(median([]))
    assert stdrel([1.0]) == math.inf


def test_summarize_converts_ns_and_picks_the_primary_condition():
    cold = [2_000_000, 2_200_000, 1_800_000]  # ns
    warm = [1_000_000, 1_100_000, 900_000, 1_000_000]
    s = summarize(cold, warm, first_call_ns=50_000_000, primary="warm")
    assert s.samples_ms == (1.0, 1.1, 0.9, 1.0)
    assert s.median_ms == 1.0 and s.n == 4
    assert s.cold_ms == 2.0 and s.warm_ms == 1.0
    assert s.first_call_ms == 50.0
    ev = s.evidence()
    assert set(ev) >= {"samples_ms", "cold_ms", "warm_ms", "median_ms", "iqr_ms", "n"}
    assert ev["primary"] == "warm" and ev["other_samples_ms"] == [2.0, 2.2, 1.8]
    c = summarize(cold, warm, primary="cold")
    assert c.median_ms == 2.0 and c.n == 3


def test_thin_keeps_at_most_the_limit_in_order_with_both_ends():
    xs = [float(i) for i in range(2000)]
    t = thin(xs)
    assert len(t) == MAX_STORED_SAMPLES and t[0] == 0.0 and t[-1] == 1999.0 and t == sorted(t)
    assert thin([1.0, 2.0]) == [1.0, 2.0]


def test_ratio_ci_is_tight_for_low_noise():
    rng = np.random.default_rng(7)
    b = 2.0 * (1 + 0.01 * rng.standard_normal(40))
    c = 1.0 * (1 + 0.01 * rng.standard_normal(40))
    r = ratio_ci(b, c)
    assert r.lo <= r.ratio <= r.hi
    assert abs(r.ratio - 2.0) < 0.02  # containment of the true ratio: the coverage test below
    assert r.hi - r.lo < 0.05 * 2.0
    assert r.level == 0.95 and "paired" in r.method
    assert r.ratio == pytest.approx(np.median(b) / np.median(c))


def test_ratio_ci_coverage_is_near_the_nominal_level():
    hits = 0
    for s in range(40):
        rng = np.random.default_rng(100 + s)
        b = 3.0 * (1 + 0.05 * rng.standard_normal(30))
        c = 1.0 * (1 + 0.05 * rng.standard_normal(30))
        ci = ratio_ci(b, c, seed=s, n_resamples=2000)
        hits += ci.lo <= 3.0 <= ci.hi
    assert 33 <= hits <= 40  # 95% nominal: 38 expected; binomial 99% band


def test_pairing_by_round_cancels_a_drift_shared_by_both_sides():
    rng = np.random.default_rng(1)
    n = 40
    drift = 1 + 0.3 * np.sin(np.linspace(0, 6, n))  # machine load drifts over the run
    b = 2.0 * drift * (1 + 0.01 * rng.standard_normal(n))
    c = 1.0 * drift * (1 + 0.01 * rng.standard_normal(n))
    paired = ratio_ci(b, c)
    unpaired = ratio_ci(b, c[:-1])  # unequal lengths: independent resampling
    assert "paired" in paired.method and "paired" not in unpaired.method
    assert paired.hi - paired.lo < 0.25 * (unpaired.hi - unpaired.lo)
    assert paired.lo <= 2.0 <= paired.hi


def test_ratio_ci_degenerate_and_invalid_samples():
    x = np.full(20, 1.0)
    r = ratio_ci(3 * x, x)
    assert r.ratio == 3.0 and r.lo == 3.0 and r.hi == 3.0
    with pytest.raises(ValueError):
        ratio_ci([1.0], [1.0, 2.0])
    with pytest.raises(ValueError):
        ratio_ci([0.0, 0.0, 0.0], [1.0, 1.0, 1.0])


def test_ratio_ci_is_reproducible():
    rng = np.random.default_rng(3)
    b, c = rng.uniform(1, 2, 25), rng.uniform(1, 2, 25)
    assert ratio_ci(b, c) == ratio_ci(b, c)


def _ci(lo: float, hi: float) -> RatioCI:
    return RatioCI((lo + hi) / 2, lo, hi, 0.95, "test")


@pytest.mark.parametrize("claimed, severity, position", [
    (1.5, None, "inside"),
    (2.0, None, "inside"),
    (2.1, "warn", "above"),      # 5% above hi: within the 10% margin
    (3.0, "fail", "above"),      # 50% above
    (1.2, "info", "below"),      # conservative (lo / claim = 1.08)
    (0.5, "info", "below"),      # conservative (lo / claim = 2.6)
    (0.4, "warn", "below"),      # lo / claim = 3.25: far below
])
def test_judge_claim_rule(claimed, severity, position):
    v = judge_claim(claimed, _ci(1.3, 2.0))
    assert v.severity == severity and v.position == position


def test_judge_claim_above_primary_but_inside_the_other_condition_warns():
    v = judge_claim(3.0, _ci(1.3, 2.0), other=_ci(2.8, 3.2))
    assert v.severity == "warn" and v.other_holds
    v = judge_claim(3.0, _ci(1.3, 2.0), other=_ci(1.0, 1.5))
    assert v.severity == "fail" and not v.other_holds


def test_consistent_with_and_log_distance():
    ci = _ci(1.0, 2.0)
    assert consistent_with(2.15, ci) and not consistent_with(2.3, ci)
    assert consistent_with(0.95, ci) and not consistent_with(0.85, ci)
    assert log_distance(2.0, 1.0) == pytest.approx(math.log(2)) == pytest.approx(log_distance(1.0, 2.0))
    assert log_distance(0.0, 1.0) == math.inf


@pytest.mark.parametrize("name, model", [
    ("NVIDIA H200", "H200 SXM"),
    ("NVIDIA H100 80GB HBM3", "H100 SXM"),
    ("NVIDIA H100 PCIe", "H100 PCIe"),
    ("NVIDIA H100 NVL", "H100 NVL"),
    ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM"),
    ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe"),
    ("NVIDIA A100-SXM4-40GB", "A100 40GB"),
    ("NVIDIA L40S", "L40S"),
    ("NVIDIA L4", "L4"),
])
def test_gpu_peaks_by_device_name(name, model):
    p = roofline.gpu_peaks(name)
    assert p is not None and p.model == model


def test_gpu_peaks_values_and_unknown_models():
    assert roofline.gpu_peaks("NVIDIA H200").bandwidth == 4.8e12
    assert roofline.gpu_peaks("NVIDIA H100 80GB HBM3").bandwidth == 3.35e12
    assert roofline.gpu_peaks("NVIDIA A100-SXM4-80GB").bandwidth == 2.039e12
    assert roofline.gpu_peaks("NVIDIA GeForce GTX 1080") is None
    assert roofline.gpu_peaks("cpu") is None


def test_roofline_bound_and_flags():
    # 4096^3 fp16 GEMM on an H100 SXM: 2*4096^3 flops / 989.5 TFLOP/s = 0.139 ms
    n = 4096
    b = roofline.bound(device="cuda", device_name="NVIDIA H100 80GB HBM3", dtype="float16",
                       read_bytes=2 * n * n * 2, write_bytes=n * n * 2, flops=2 * n ** 3,
                       cache_bytes=50 * 2 ** 20, measured_bandwidth=None)
    assert b is not None
    assert b.t_flop_ms == pytest.approx(2 * n ** 3 / 989.5e12 * 1e3)
    assert b.t_mem_ms == pytest.approx(3 * n * n * 2 / 3.35e12 * 1e3)
    assert b.t_min_ms == b.t_flop_ms and b.memory_applies
    assert roofline.beats(0.05, b, memory="all")          # 0.05 ms < 0.139 ms: impossible
    assert not roofline.beats(0.2, b, memory="all")
    assert not roofline.beats(b.t_min_ms / 1.01, b, memory="all")  # inside the 5% margin
    # CPU: measured bandwidth, no compute peak, 1.5x margin
    c = roofline.bound(device="cpu", device_name="cpu", dtype="float32", read_bytes=100_000_000,
                       write_bytes=0, flops=None, cache_bytes=32 * 2 ** 20, measured_bandwidth=10e9)
    assert c.t_read_ms == pytest.approx(10.0) and c.t_flop_ms is None
    assert roofline.beats(5.0, c, memory="read") and not roofline.beats(8.0, c, memory="read")
    assert not roofline.beats(1.0, c, memory="none")
    assert roofline.bound(device="cpu", device_name="cpu", dtype="float32", read_bytes=1, write_bytes=1,
                          flops=None, cache_bytes=1, measured_bandwidth=None) is None


def test_memory_bound_for_claims_only_when_the_working_set_exceeds_the_cache():
    b = roofline.bound(device="cuda", device_name="NVIDIA H200", dtype="float32", read_bytes=1_000_000,
                       write_bytes=1_000_000, flops=0, cache_bytes=60 * 2 ** 20, measured_bandwidth=None)
    assert not b.memory_applies
    tiny = b.t_mem_ms / 10
    assert not roofline.beats(tiny, b, memory="all")     # a warm claim may beat DRAM bandwidth
    assert roofline.beats(b.t_read_ms / 10, b, memory="read")  # a cold measured time may not


def test_speedup_fail_needs_a_robust_measurement_injected_samples():
    """speedup-claim fails only when the claim is above the interval robustly: each half of
    the samples must put it above by the margin, and by 1.5x more on a noisy measurement
    (busy machine, wide interval). Injected samples: a steady 2x."""
    from workstation.analysis.timingstats import ratio_ci, robustness

    rng = np.random.default_rng(0)
    base = list(2.0 + 0.01 * rng.standard_normal(40))
    cand = list(1.0 + 0.005 * rng.standard_normal(40))
    ci = ratio_ci(base, cand)
    assert judge_claim(2.5, ci).severity == "fail"
    quiet = robustness(2.5, ci, base, cand, descheduled=0.0)
    assert quiet.robust and quiet.halves is not None and max(quiet.halves) < 2.5
    busy = robustness(2.5, ci, base, cand, descheduled=0.4)  # the same claim on a loaded machine
    assert not busy.robust and "descheduled" in busy.noisy[0] and "not" in busy.reasons[0]
    assert robustness(4.0, ci, base, cand, descheduled=0.4).robust  # far above: robust under load too
    # one half of the samples drifted (load in the second half): 2x, then ~2.6x
    drift = cand[:20] + [c / 1.3 for c in cand[20:]]
    assert not robustness(2.5, ratio_ci(base, drift), base, drift).robust
    few = robustness(3.0, _ci(1.9, 2.1), base[:3], cand[:3])
    assert not few.robust and "too few samples" in few.reasons[0]


def test_noise_names_a_wide_interval_and_a_busy_machine():
    from workstation.analysis.timingstats import RatioCI, noise

    assert noise(RatioCI(1.3, 1.24, 1.4, 0.95, "BCa")) == ()
    wide = noise(RatioCI(3.2, 1.15, 3.62, 0.95, "BCa"))
    assert len(wide) == 1 and "wide" in wide[0]
    both = noise(RatioCI(3.2, 1.15, 3.62, 0.95, "BCa"), descheduled=0.51)
    assert len(both) == 2 and "descheduled" in both[1]
