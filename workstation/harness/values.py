"""Child-side value transforms: special values (``special-values``), perturbations and
diverse replacement values (``degenerate-inputs``).

Every transform (a :class:`~workstation.protocol.steps.Magnitude`, ``SignedZeros``, ...)
takes ``args``, the indices of the inputs it may change (the parent lists the
floating-point tensors the callables read; kws never rewrites ``out_args``; ``None``: every
floating tensor input), and ``seed`` for its random draws (a CPU ``torch.Generator``; values are drawn in
float64 on the CPU and cast once to the input's dtype, then moved to its device). Shapes,
dtypes and devices never change; the result is a new contiguous tensor.

Special values (the dtype's range from ``torch.finfo``):

- ``magnitude``: ``mode = "scale"``: ``x * amax / max|x|``, so the largest magnitude is
  ``amax``; ``"spikes"``: ``x`` with one element set to ``+amax`` and one to ``-amax`` in
  every row (last dimension), at seeded positions; ``"shift"``: every element in
  ``[0.85, 0.95] * amax`` (``0.9 amax + 0.05 amax x / max|x|``): large values of one sign,
  where a sum or a mean cancels catastrophically. ``amax`` is first rounded down to a value
  the dtype represents, so the result never exceeds it.
- ``signed_zeros``: every third element becomes ``-0.0``, the first row (last dimension)
  all ``-0.0`` and the second all ``+0.0``.
- ``tiny``: ``x * 4 tiny / max|x|`` with ``tiny`` the smallest normal: most values are
  subnormal (IEEE 754 gradual underflow), the rest within 4x of the underflow threshold.
- ``nonfinite``: ``nan``, ``+inf`` and ``-inf`` at seeded positions, one of each in every
  row (only used where the contract admits non-finite inputs).

Perturbations and replacements (``scale`` of a tensor: its root mean square, 1 for an
all-zero tensor):

- ``perturb``: ``x + rel * (|x| + scale) * n``, ``n ~ N(0, 1)``, on the inputs in ``args``.
- ``diverse``: replace the values by a fresh draw of ``dist`` times ``scale``: ``normal``
  (N(0, 1)), ``uniform`` (U(-sqrt 3, sqrt 3), unit variance), ``heavy`` (Student-t with 2
  degrees of freedom, clipped to +-20), ``mixed`` (magnitudes log-uniform in [1e-2, 1e2]
  with random signs). A tensor whose values were all >= 0 (and not all 0) gets the
  absolute values: non-negative inputs (scales, variances, probabilities) usually are so
  by the spec. Values are clamped to half the dtype's largest finite value.
- ``rescale``: ``x * factor`` (``input-distributions``: the same values at another
  magnitude), clamped to the dtype's largest finite value.
- ``sign``: ``-|x|``, ``|x|`` or ``0`` (``pallas-kernel``: every lane of a gate such as
  ``x > 0`` false, or true).

Every transform then puts an input's new values back into the structures ``keep`` names for
it (:func:`keep_structure`: sorted, non-negative, symmetric, rows summing to one), the ones
the task's own inputs show on every seed (``workstation.checks.support.structure``): a
bucketize kernel's sorted boundaries stay sorted, a probability vector stays one.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from workstation.harness import transform
from workstation.protocol.steps import (
    Diverse,
    Magnitude,
    Nonfinite,
    Perturb,
    Rescale,
    Sign,
    SignedZeros,
    Tiny,
    ValueTransform,
)


def _float_args(inputs: tuple, spec: ValueTransform) -> list[int]:
    idx = range(len(inputs)) if spec.args is None else spec.args
    return [i for i in idx if i < len(inputs) and isinstance(inputs[i], torch.Tensor)
            and inputs[i].dtype.is_floating_point and inputs[i].numel() > 0]


def _gen(spec: ValueTransform, i: int) -> torch.Generator:
    return torch.Generator().manual_seed(spec.seed * 1009 + 17 * i + 1)


def _representable_at_most(amax: float, dtype: torch.dtype) -> float:
    """The largest value of ``dtype`` that is <= ``amax`` (amax itself when representable)."""
    fmax = float(torch.finfo(dtype).max)
    a = min(float(amax), fmax)
    r = float(torch.tensor(a, dtype=torch.float64).to(dtype).to(torch.float64))
    if r > a:
        r = float(torch.nextafter(torch.tensor(r, dtype=dtype), torch.tensor(0.0, dtype=dtype)).to(torch.float64))
    return r


def _rows(x: torch.Tensor) -> torch.Tensor:
    """``x`` as a 2-D (rows, last dim) float64 CPU copy."""
    c = x.detach().to("cpu", torch.float64).contiguous()
    return c.reshape(-1, c.shape[-1]) if c.ndim >= 1 else c.reshape(1, 1)


def _back(v: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return v.reshape(like.shape).to(like.dtype).to(like.device)


def _scale(c: torch.Tensor) -> float:
    s = float(c.square().mean().sqrt()) if c.numel() else 0.0
    return s if s > 0 and math.isfinite(s) else 1.0


def keep_structure(v: torch.Tensor, kinds: list[str] | tuple[str, ...]) -> torch.Tensor:
    """``v`` (float64, the input's shape) put back into the structures ``kinds``
    (:data:`~workstation.protocol.steps.StructureKind`), in this order: ``nonnegative``
    (negative values mirrored; -0.0 stays), ``symmetric`` (the mean of the last two dimensions
    and their transpose), ``stochastic`` (absolute values, each row divided by its sum; an
    all-zero row uniform), ``sorted`` / ``sorted_desc`` (along the last dimension; NaN last)."""
    if not kinds or v.ndim == 0:
        return v
    if "nonnegative" in kinds or "stochastic" in kinds:
        v = torch.where(v < 0, -v, v)
    if "symmetric" in kinds and v.ndim >= 2 and v.shape[-1] == v.shape[-2]:
        v = (v + v.transpose(-1, -2)) / 2
    if "stochastic" in kinds and v.shape[-1] > 0:
        s = v.sum(-1, keepdim=True)
        v = torch.where(s > 0, v / torch.where(s > 0, s, torch.ones_like(s)), torch.full_like(v, 1.0 / v.shape[-1]))
    if "sorted" in kinds or "sorted_desc" in kinds:
        v = v.sort(dim=-1, descending="sorted_desc" in kinds).values
    return v


def _kept(spec: ValueTransform, i: int) -> list[str]:
    return list(spec.keep.get(str(i), ()))


def _each(inputs: tuple, spec: ValueTransform, fn: Any) -> tuple:
    """``inputs`` with each floating tensor of ``spec.args`` replaced by
    ``fn(i, rows, x)``: ``rows`` is the input as a 2-D float64 CPU copy (:func:`_rows`), the
    result is put back into the input's structures (``spec.keep``, :func:`keep_structure`)
    and cast back to the input's shape, dtype and device."""
    out = list(inputs)
    for i in _float_args(inputs, spec):
        x = inputs[i]
        v = fn(i, _rows(x), x).reshape(x.shape)
        out[i] = _back(keep_structure(v, _kept(spec, i)), x)
    return tuple(out)


@transform(Magnitude)
def _magnitude(ctx: Any, inputs: tuple, spec: Magnitude) -> tuple:
    """Large magnitudes up to ``spec.amax`` (module doc)."""

    def one(i: int, c: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        a = _representable_at_most(spec.amax, x.dtype)
        m = float(c.abs().max())
        unit = c / m if m > 0 else torch.ones_like(c)
        if spec.mode == "scale":
            v = unit * a
        elif spec.mode == "shift":
            v = 0.9 * a + 0.05 * a * unit
        elif spec.mode == "spikes":
            v = c.clone()
            g = _gen(spec, i)
            n = v.shape[1]
            pos = torch.randint(0, n, (v.shape[0],), generator=g)
            v[torch.arange(v.shape[0]), pos] = a
            if n > 1:
                neg = (pos + 1 + torch.randint(0, n - 1, (v.shape[0],), generator=g)) % n
                v[torch.arange(v.shape[0]), neg] = -a
        else:
            raise ValueError(f"unknown magnitude mode {spec.mode!r}")
        return v.clamp(-a, a)

    return _each(inputs, spec, one)


@transform(SignedZeros)
def _signed_zeros(ctx: Any, inputs: tuple, spec: SignedZeros) -> tuple:
    """-0.0 at every third element, row 0 all -0.0, row 1 all +0.0 (module doc)."""

    def one(i: int, v: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        v.view(-1)[::3] = -0.0
        v[0] = -0.0
        if v.shape[0] > 1:
            v[1] = 0.0
        return v

    return _each(inputs, spec, one)


@transform(Tiny)
def _tiny(ctx: Any, inputs: tuple, spec: Tiny) -> tuple:
    """Values within 4x of the smallest normal, mostly subnormal (module doc)."""

    def one(i: int, c: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        m = float(c.abs().max())
        t = 4.0 * float(torch.finfo(x.dtype).tiny)
        return c / m * t if m > 0 else torch.full_like(c, t)

    return _each(inputs, spec, one)


@transform(Nonfinite)
def _nonfinite(ctx: Any, inputs: tuple, spec: Nonfinite) -> tuple:
    """One nan, +inf and -inf per row at seeded positions (module doc)."""

    def one(i: int, v: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        g = _gen(spec, i)
        rows = torch.arange(v.shape[0])
        for val in (float("nan"), float("inf"), float("-inf")):
            v[rows, torch.randint(0, v.shape[1], (v.shape[0],), generator=g)] = val
        return v

    return _each(inputs, spec, one)


@transform(Perturb)
def _perturb(ctx: Any, inputs: tuple, spec: Perturb) -> tuple:
    """``x + rel * (|x| + scale) * N(0, 1)`` on the inputs in ``args`` (module doc)."""

    def one(i: int, c: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        n = torch.randn(c.shape, generator=_gen(spec, i), dtype=torch.float64)
        return c + spec.rel * (c.abs() + _scale(c)) * n

    return _each(inputs, spec, one)


def draw(dist: str, shape: tuple[int, ...], g: torch.Generator) -> torch.Tensor:
    """Unit-scale float64 samples of ``dist`` (``normal``, ``uniform``, ``heavy``, ``mixed``)."""
    if dist == "normal":
        return torch.randn(shape, generator=g, dtype=torch.float64)
    if dist == "uniform":
        return (torch.rand(shape, generator=g, dtype=torch.float64) * 2 - 1) * math.sqrt(3.0)
    if dist == "heavy":
        z = torch.randn(shape, generator=g, dtype=torch.float64)
        chi2 = torch.randn((2, *shape), generator=g, dtype=torch.float64).square().sum(0)
        return (z / (chi2 / 2).sqrt().clamp_min(1e-12)).clamp(-20.0, 20.0)
    if dist == "mixed":
        mag = torch.pow(10.0, torch.rand(shape, generator=g, dtype=torch.float64) * 4 - 2)
        sign = torch.where(torch.rand(shape, generator=g, dtype=torch.float64) < 0.5, -1.0, 1.0)
        return mag * sign
    raise ValueError(f"unknown distribution {dist!r}")


@transform(Diverse)
def _diverse(ctx: Any, inputs: tuple, spec: Diverse) -> tuple:
    """Replace the values of the inputs in ``args`` by a draw of ``spec.dist`` (module doc)."""
    dist = spec.dist
    out = list(inputs)
    for i in _float_args(inputs, spec):
        x = inputs[i]
        c = x.detach().to("cpu", torch.float64)
        v = draw(dist, tuple(c.shape), _gen(spec, i)) * _scale(c)
        if bool((c >= 0).all()) and bool((c > 0).any()):
            v = v.abs()
        lim = float(torch.finfo(x.dtype).max) / 2
        out[i] = keep_structure(v.clamp(-lim, lim), _kept(spec, i)).to(x.dtype).to(x.device)
    return tuple(out)


@transform(Rescale)
def _rescale(ctx: Any, inputs: tuple, spec: Rescale) -> tuple:
    """``x * spec.factor`` on the inputs in ``args`` (module doc)."""

    def one(i: int, c: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        lim = float(torch.finfo(x.dtype).max)
        return (c * spec.factor).clamp(-lim, lim)

    return _each(inputs, spec, one)


@transform(Sign)
def _sign(ctx: Any, inputs: tuple, spec: Sign) -> tuple:
    """-|x|, |x| or 0 on the inputs in ``args`` (module doc)."""

    def one(i: int, c: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        if spec.mode == "nonpositive":
            return -c.abs()
        if spec.mode == "nonnegative":
            return c.abs()
        return torch.zeros_like(c)

    return _each(inputs, spec, one)
