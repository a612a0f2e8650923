"""Input transforms: what a step does to the task's inputs after ``make_inputs`` and before
the role is called (tag ``name``; applied in order): ``upcast``, ``cast``, ``layout``,
``magnitude``, ``signed_zeros``, ``tiny``, ``nonfinite``, ``perturb``, ``diverse``,
``rescale``, ``num_fresh``, ``num_tf32``, ``splice``. Each is a frozen
:class:`msgspec.Struct` that rejects unknown fields; its handler is registered in a harness
module with ``@transform(TheTransform)``. Part of the job (:mod:`workstation.protocol.steps`,
which re-exports every name here).

Torch-free: the parent imports it.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from workstation.protocol.layouts import KINDS

#: a layout kind of :data:`workstation.protocol.layouts.KINDS`.
LayoutKind = Literal[KINDS]  # type: ignore[valid-type]


# frozen, forbid_unknown_fields and tag_field are inherited; kw_only applies per class, so
# every class sets it (fields are passed by keyword: a misspelled one is a TypeError).


class _Transform(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True, tag_field="name"):
    """Base of the input transforms (see :mod:`workstation.harness.core`)."""


class Upcast(_Transform, tag="upcast", frozen=True, kw_only=True):
    """Cast every floating tensor input to ``dtype`` (torch dtype name; the float64 oracle)."""

    dtype: str = "float64"


class Cast(_Transform, tag="cast", frozen=True, kw_only=True):
    """Cast floating tensor inputs of dtype ``from_dtype`` (``None``: any floating dtype)
    to ``dtype`` (torch dtype names)."""

    dtype: str
    from_dtype: str | None = None


class Layout(_Transform, tag="layout", frozen=True, kw_only=True):
    """Rebuild the tensor inputs at ``args`` as views of layout ``kind`` (same values except
    ``expand``); ``materialize``: copy the result back to contiguous memory (the
    reference's side of ``expand``). See :mod:`workstation.harness.layouts`."""

    kind: LayoutKind
    args: list[int] = []
    materialize: bool = False


#: a structure the values of an input keep through a value transform
#: (:mod:`workstation.harness.values`, ``keep``): sorted along the last dimension (ascending or
#: descending), non-negative, symmetric in the last two dimensions, rows (last dimension) that
#: sum to one.
StructureKind = Literal["sorted", "sorted_desc", "nonnegative", "symmetric", "stochastic"]


class ValueTransform(_Transform, frozen=True, kw_only=True):
    """Base of the value transforms of :mod:`workstation.harness.values`: ``args`` are the
    inputs they may change (``None``: every floating tensor input), ``seed`` seeds their
    random draws (a CPU ``torch.Generator``), ``keep`` the structures an input's new values
    are put back into (the input's index as text -> structures: the task's own inputs show
    them on every seed, ``workstation.checks.support.structure``)."""

    args: list[int] | None = None
    seed: int = 0
    keep: dict[str, list[StructureKind]] = {}


class Magnitude(ValueTransform, tag="magnitude", frozen=True, kw_only=True):
    """Large magnitudes up to ``amax`` (rounded down to a value of the input's dtype):
    ``scale`` (max |x| becomes amax), ``spikes`` (one +amax and one -amax per row),
    ``shift`` (every value in [0.85, 0.95] amax)."""

    mode: Literal["scale", "spikes", "shift"]
    amax: float


class SignedZeros(ValueTransform, tag="signed_zeros", frozen=True, kw_only=True):
    """-0.0 at every third element, row 0 all -0.0, row 1 all +0.0."""


class Tiny(ValueTransform, tag="tiny", frozen=True, kw_only=True):
    """Values within 4x of the dtype's smallest normal, most of them subnormal."""


class Nonfinite(ValueTransform, tag="nonfinite", frozen=True, kw_only=True):
    """One nan, +inf and -inf per row at seeded positions."""


class Perturb(ValueTransform, tag="perturb", frozen=True, kw_only=True):
    """``x + rel * (|x| + rms(x)) * N(0, 1)`` (``rel``: relative size, dimensionless)."""

    rel: float = 1e-2


class Diverse(ValueTransform, tag="diverse", frozen=True, kw_only=True):
    """Replace the values by a unit-scale draw of ``dist`` times the input's rms
    (absolute values for a non-negative input)."""

    dist: Literal["normal", "uniform", "heavy", "mixed"]


class Rescale(ValueTransform, tag="rescale", frozen=True, kw_only=True):
    """Multiply the values by ``factor`` (dimensionless; ``input-distributions``)."""

    factor: float


class Sign(ValueTransform, tag="sign", frozen=True, kw_only=True):
    """Force the values' sign: ``nonpositive`` (-|x|), ``nonnegative`` (|x|), ``zero`` (0):
    inputs that make every lane of a data-dependent gate (``x > 0``) false or true
    (``pallas-kernel``)."""

    mode: Literal["nonpositive", "nonnegative", "zero"]


class NumFresh(_Transform, tag="num_fresh", frozen=True, kw_only=True):
    """A copy of every tensor input (same values and strides): a second, separately
    memoised run of the same call."""


class NumTf32(_Transform, tag="num_tf32", frozen=True, kw_only=True):
    """Round fp32 tensor inputs (except those at ``skip``) to TF32's 10 explicit mantissa
    bits: ``rna`` rounds to nearest, ties away from zero (``cvt.rna.tf32.f32``), ``trunc``
    drops the low 13 bits."""

    mode: Literal["rna", "trunc"] = "rna"
    skip: list[int] = []


class Splice(_Transform, tag="splice", frozen=True, kw_only=True):
    """Set elements of input ``input`` (a float tensor) to ``values``: ``indices`` are flat
    indices in the tensor's logical (row-major) order. The ``audit_series`` step reports the
    edits it made to the candidate's inputs this way, so the reference runs on exactly those
    inputs (:mod:`workstation.harness.audit`)."""

    input: int
    indices: list[int]
    values: list[float]


Transform = (Upcast | Cast | Layout | Magnitude | SignedZeros | Tiny | Nonfinite | Perturb | Diverse | Rescale | Sign
             | NumFresh | NumTf32 | Splice)


