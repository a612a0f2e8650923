"""The invariant audit's raw storage write path (harness/audit.py ``_raw_copy``): new values
reach the previous call's tensors without a version bump, views of larger storages included."""

from __future__ import annotations

import pytest
import torch

from workstation.harness.audit import _clone, _raw_copy


def test_a_dense_tensor_gets_the_new_values_without_a_version_bump():
    dst = torch.zeros(4, 3)
    v0 = dst._version
    _raw_copy(dst, _clone(torch.arange(12.0).reshape(4, 3)))
    assert torch.equal(dst, torch.arange(12.0).reshape(4, 3)) and dst._version == v0


def test_a_view_of_a_larger_storage_gets_only_its_own_elements():
    """``torch.randperm(V)[:L]``: L ids over a storage of V (issue 39's red team: the audit
    could not start on such inputs: 'layouts differ')."""
    base = torch.arange(10)
    dst = base[:4]
    new = _clone(torch.tensor([9, 8, 7, 6]))
    v0 = dst._version
    _raw_copy(dst, new)
    assert dst.tolist() == [9, 8, 7, 6] and base[4:].tolist() == [4, 5, 6, 7, 8, 9] and dst._version == v0


def test_a_strided_view_at_an_offset_keeps_the_elements_between_its_own():
    base = torch.zeros(3, 8)
    dst = base[1:, ::2]  # offset 8, strides (8, 2)
    new = torch.empty_strided((2, 4), (8, 2)).copy_(torch.ones(2, 4))
    _raw_copy(dst, new)
    assert torch.equal(dst, torch.ones(2, 4))
    assert base[0].eq(0).all() and base[1:, 1::2].eq(0).all()


def test_different_layouts_are_refused():
    with pytest.raises(ValueError, match="layouts differ"):
        _raw_copy(torch.zeros(4, 3)[:, :2], torch.zeros(2, 4).t())
