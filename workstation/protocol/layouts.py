"""The layout kinds of the ``noncontiguous`` check and which tensors each one changes.

Torch-free, so the parent (the check) and the child (:mod:`workstation.harness.layouts`)
share one rule; see :mod:`workstation.harness.layouts` for what each kind builds.
"""

from __future__ import annotations

#: layout kinds, in the order the ``noncontiguous`` check tries them.
KINDS = ("padded-rows", "column-slice", "row-step", "col-step", "transposed", "misaligned", "expand")

#: one line per kind, for findings and docs (N = size of the last dim, S0 = of dim 0).
DESCRIPTIONS = {
    "padded-rows": "buf[..., :N] of a buffer with rows padded to a multiple of 64 plus 64 (stride(-1) == 1, row stride > N)",
    "column-slice": "buf[..., N:2N] of a (..., 3N) buffer, like qkv[:, k:2k] (row stride 3N, storage offset N)",
    "row-step": "buf[::2] of a buffer with 2*S0 rows (stride(0) doubled)",
    "col-step": "buf[..., ::2] of a buffer with 2N columns (stride(-1) == 2)",
    "transposed": "x.transpose(-1, -2).contiguous().transpose(-1, -2): the same values column-major (stride(-2) == 1)",
    "misaligned": "a contiguous view one element into its buffer (data_ptr % 16 != 0)",
    "expand": "x.narrow(0, 0, 1).expand_as(x): a stride-0 broadcast view (every slice along dim 0 equals the first)",
}

#: kinds whose views leave padding (NaN-filled) around the data a kernel should read.
PADDED = ("padded-rows", "column-slice", "row-step", "col-step", "misaligned")


def applies(kind: str, shape: tuple[int, ...] | list[int]) -> bool:
    """Whether ``kind`` changes the layout of a tensor of ``shape``: a 1-D tensor has no
    rows to pad or transpose; a dim 0 of size 1 cannot step or broadcast; an empty or
    0-d tensor has no layout to change."""
    shape = tuple(shape)
    d = len(shape)
    if d == 0 or 0 in shape:
        return False
    if kind in ("padded-rows", "col-step"):
        return d >= 2
    if kind == "transposed":
        return d >= 2 and shape[-1] > 1 and shape[-2] > 1
    if kind in ("row-step", "expand"):
        return shape[0] > 1
    if kind in ("column-slice", "misaligned"):
        return True
    raise ValueError(f"unknown layout kind {kind!r}; known: {', '.join(KINDS)}")
