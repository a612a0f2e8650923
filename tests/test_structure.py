"""The structure make_inputs always shows, kept through value transforms (issue 39):
detection (``checks/support/structure.shown``) and restoration
(``harness/values.keep_structure``) on arrays, no task code."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from workstation.checks.support.structure import shown
from workstation.harness.values import _diverse, _magnitude, _rescale, keep_structure
from workstation.protocol.steps import Diverse, Magnitude, Rescale

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("arr,dtype,expect", [
    (np.sort(RNG.standard_normal(16)).astype(np.float32), "float32", {"sorted"}),
    (np.sort(RNG.standard_normal((4, 8)))[:, ::-1].astype(np.float32), "float32", {"sorted_desc"}),
    (np.abs(RNG.standard_normal((8, 8))).astype(np.float32), "float32", {"nonnegative"}),
    (RNG.integers(0, 10, (5, 7)).astype(np.float32), "float32", {"integer", "nonnegative"}),
    ((lambda a: (a + a.T) / 2)(RNG.standard_normal((6, 6))), "float64", {"symmetric"}),
    ((lambda a: a / a.sum(-1, keepdims=True))(RNG.random((3, 10))).astype(np.float16), "float16",
     {"stochastic", "nonnegative"}),
    (RNG.standard_normal((8, 8)).astype(np.float32), "float32", set()),
    (np.ones(16, np.float32), "float32", set()),  # constant: no structure, degenerate
    (np.array([0.5, 1.0, 2.0]), "float64", set()),  # too short to tell sorted from chance
])
def test_what_an_input_shows(arr, dtype, expect):
    got = shown(arr, dtype)
    assert expect <= got and not ({"sorted", "sorted_desc", "symmetric", "stochastic", "integer"} - expect) & got


def test_keep_structure_puts_values_back_into_each_structure():
    v = torch.randn(3, 5, dtype=torch.float64)
    s = keep_structure(v, ["sorted"])
    assert bool((s.diff(dim=-1) >= 0).all())
    assert bool((keep_structure(v, ["sorted_desc"]).diff(dim=-1) <= 0).all())
    assert bool((keep_structure(v, ["nonnegative"]) >= 0).all())
    p = keep_structure(v, ["stochastic"])
    assert bool((p >= 0).all()) and torch.allclose(p.sum(-1), torch.ones(3, dtype=torch.float64))
    sq = keep_structure(torch.randn(4, 4, dtype=torch.float64), ["symmetric"])
    assert torch.equal(sq, sq.T)
    z = torch.tensor([-0.0, 1.0, -2.0], dtype=torch.float64)
    assert torch.signbit(keep_structure(z, ["nonnegative"])[0])  # a signed zero stays itself
    assert torch.equal(keep_structure(v, []), v)


def test_the_value_transforms_keep_a_sorted_boundary_vector_sorted():
    x = torch.randn(64)
    b = torch.sort(torch.randn(16)).values
    for t in (Diverse(dist="heavy", args=[1], seed=3, keep={"1": ["sorted"]}),
              Magnitude(mode="spikes", amax=100.0, args=[1], seed=3, keep={"1": ["sorted"]}),
              Rescale(factor=64.0, args=[1], seed=3, keep={"1": ["sorted"]})):
        fn = {Diverse: _diverse, Magnitude: _magnitude, Rescale: _rescale}[type(t)]
        _x, nb = fn(None, (x, b), t)
        assert bool((nb.diff() >= 0).all()), t
        assert not torch.equal(nb, b)  # still varied
    # without keep, a heavy-tailed draw does not keep the order
    _x, nb = _diverse(None, (x, b), Diverse(dist="heavy", args=[1], seed=3))
    assert not bool((nb.diff() >= 0).all())
