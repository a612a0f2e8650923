"""Closeness, ULP distance and tolerance resolution (parent-side numpy)."""

from __future__ import annotations

import numpy as np
import pytest

from workstation.analysis.compare import compare, ordinal, resolve_tolerance, ulp_distance
from workstation.task.model import Tolerance


def test_ordinal_matches_ieee_bit_patterns():
    bits16 = np.array([0, 1, 0x03FF, 0x0400, 0x3C00, 0x7BFF], dtype=np.uint16)
    assert np.array_equal(ordinal(bits16.view(np.float16).astype(np.float64), "float16"), bits16.astype(np.float64))
    bits32 = np.array([1, 0x7FFFFF, 0x800000, 0x3F800000, 0x7F7FFFFF], dtype=np.uint32)
    assert np.array_equal(ordinal(bits32.view(np.float32).astype(np.float64), "float32"), bits32.astype(np.float64))


def test_ulp_distance_signed_zero_and_across_zero():
    assert ulp_distance(np.array([-0.0]), np.array([0.0]), "float16")[0] == 0
    tiny = float(np.array([1], dtype=np.uint16).view(np.float16)[0])
    assert ulp_distance(np.array([-tiny]), np.array([tiny]), "float16")[0] == 2


def test_bf16_ulp_is_2_pow_minus_7_at_one():
    assert ulp_distance(np.array([1.0 + 2**-7]), np.array([1.0]), "bfloat16")[0] == 1


def test_defaults_follow_torch_testing():
    t = resolve_tolerance(Tolerance(), "float16")
    assert (t.rtol, t.atol) == (1e-3, 1e-5) and "torch.testing" in t.source
    t = resolve_tolerance(Tolerance(atol=1e-3), "float32")
    assert (t.rtol, t.atol) == (1.3e-6, 1e-3)


def test_compare_reports_worst_element_and_region():
    e = np.zeros((4, 8))
    g = e.copy()
    g[2, 6] = 0.5
    g[3, 7] = 0.1
    c = compare(e, g, resolve_tolerance(Tolerance(atol=1e-3, rtol=0.0), "float32"),
                expected_dtype="float32", got_dtype="float32")
    assert not c.ok and c.n_bad == 2
    assert c.worst["index"] == [2, 6] and c.worst["got"] == 0.5
    assert c.bad_region == {"dim0": [2, 3], "dim1": [6, 7]}
    assert c.max_abs == pytest.approx(0.5)


def test_nan_is_never_close_unless_contract_admits_nonfinite():
    e = np.array([1.0, np.nan])
    g = np.array([1.0, np.nan])
    tol = resolve_tolerance(Tolerance(), "float32")
    assert not compare(e, g, tol, expected_dtype="float32", got_dtype="float32").ok
    assert compare(e, g, tol, expected_dtype="float32", got_dtype="float32", nonfinite_ok=True).ok


def test_shape_and_dtype_mismatch():
    tol = resolve_tolerance(Tolerance(), "float32")
    c = compare(np.zeros(3), np.zeros(4), tol, expected_dtype="float32", got_dtype="float32")
    assert not c.ok and "shape mismatch" in c.reason
    c = compare(np.zeros(3), np.zeros(3), tol, expected_dtype="float32", got_dtype="float16")
    assert not c.ok and "dtype mismatch" in c.reason


def test_ulp_tolerance_with_atol_floor():
    tol = resolve_tolerance(Tolerance(ulp=2, atol=1e-8), "float32")
    one = np.float32(1.0)
    three_ulps = float(np.nextafter(np.nextafter(np.nextafter(one, 2), 2), 2))
    assert not compare(np.array([1.0]), np.array([three_ulps]), tol, expected_dtype="float32", got_dtype="float32").ok
    assert compare(np.array([0.0]), np.array([5e-9]), tol, expected_dtype="float32", got_dtype="float32").ok
