"""Closeness, ULP distance and error statistics, computed in the parent from child data.

Everything here is numpy on float64 copies of the outputs: a child process converts each
output tensor to float64 (exact for every float format up to fp32, and for fp64 itself),
so a candidate cannot influence how it is judged.

Rules and constants:

- Closeness is torch.testing's rule, ``|got - expected| <= atol + rtol * |expected|``,
  elementwise over the whole output, ``expected`` being the reference's result; equal
  infinities are close; NaN is close to NaN only at the same place and only where the
  contract admits non-finite inputs (task format v1).
- Default (rtol, atol) per dtype are ``torch.testing._comparison._DTYPE_PRECISIONS``
  (torch 2.x): float16 (1e-3, 1e-5), bfloat16 (1.6e-2, 1e-5), float32 (1.3e-6, 1e-5),
  float64 (1e-7, 1e-7); every other dtype, float8 included, compares exactly (0, 0).
- ULP distance counts representable values of the output dtype between got and expected
  (IEEE 754 binary formats; ±0 equal). It is computed from an "ordinal" of each value:
  ``|x| / 2**(emin - p + 1)`` below the smallest normal ``2**emin`` (subnormals are evenly
  spaced), and ``(e - emin + 1) * 2**(p-1) + (|x| / 2**(e - p + 1) - 2**(p-1))`` for a normal
  ``|x|`` in ``[2**e, 2**(e+1))`` with p the precision in bits; the ordinal is fractional for
  a value that is not representable (an fp64 oracle), which gives fractional ULPs.
- Unit roundoff u = 2**-p (IEEE 754 round-to-nearest; Higham, *Accuracy and Stability of
  Numerical Algorithms*, 2nd ed., sec. 2.1): fp16 2^-11, bf16 2^-8, fp32 2^-24, fp64 2^-53,
  fp8 e4m3 2^-4, e5m2 2^-3; tf32 inputs 2^-11.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class FloatFormat:
    """An IEEE-754-style binary format: precision ``p`` bits (with the implicit bit),
    smallest normal exponent ``emin``, largest finite value ``max``."""

    name: str
    p: int
    emin: int
    max: float

    @property
    def unit_roundoff(self) -> float:
        """u = 2**-p (round to nearest)."""
        return 2.0 ** -self.p

    @property
    def eps(self) -> float:
        """Machine epsilon 2**(1-p): the gap between 1 and the next value."""
        return 2.0 ** (1 - self.p)

    @property
    def tiny(self) -> float:
        """Smallest positive normal value, 2**emin."""
        return 2.0 ** self.emin


FORMATS: dict[str, FloatFormat] = {
    "float64": FloatFormat("float64", 53, -1022, float(np.finfo(np.float64).max)),
    "float32": FloatFormat("float32", 24, -126, float(np.finfo(np.float32).max)),
    "tf32": FloatFormat("tf32", 11, -126, float(np.finfo(np.float32).max)),
    "float16": FloatFormat("float16", 11, -14, 65504.0),
    "bfloat16": FloatFormat("bfloat16", 8, -126, 3.3895313892515355e38),
    "float8_e4m3fn": FloatFormat("float8_e4m3fn", 4, -6, 448.0),
    "float8_e4m3fnuz": FloatFormat("float8_e4m3fnuz", 4, -7, 240.0),
    "float8_e5m2": FloatFormat("float8_e5m2", 3, -14, 57344.0),
    "float8_e5m2fnuz": FloatFormat("float8_e5m2fnuz", 3, -15, 57344.0),
}

#: torch.testing's default (rtol, atol) per dtype (torch.testing._comparison._DTYPE_PRECISIONS).
TORCH_TESTING_DEFAULTS: dict[str, tuple[float, float]] = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
    "complex64": (1.3e-6, 1e-5),
    "complex128": (1e-7, 1e-7),
}


def is_float(dtype: str) -> bool:
    """True for the floating dtypes kws knows the format of."""
    return dtype in FORMATS


def unit_roundoff(dtype: str) -> float:
    """Unit roundoff u = 2**-p of a float dtype name (``"float16"`` -> 2**-11).

    Raises:
        KeyError: for a dtype that is not a known float format.
    """
    return FORMATS[dtype].unit_roundoff


def ordinal(x: np.ndarray, dtype: str) -> np.ndarray:
    """The signed ordinal of each value in the float format ``dtype`` (see module doc):
    consecutive representable values differ by exactly 1. ±inf map one past the largest
    finite value; NaN stays NaN. ``x``: any shape, float64."""
    fmt = FORMATS[dtype]
    x = np.asarray(x, dtype=np.float64)
    a = np.abs(x)
    half = 2.0 ** (fmt.p - 1)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        _, e2 = np.frexp(np.where(np.isfinite(a) & (a > 0), a, 1.0))
        e = (e2 - 1).astype(np.float64)  # a in [2**e, 2**(e+1))
        e = np.maximum(e, fmt.emin)
        normal = (e - fmt.emin) * half + a / np.exp2(e - fmt.p + 1)
        sub = a / 2.0 ** (fmt.emin - fmt.p + 1)
        o = np.where(a < fmt.tiny, sub, normal)
        top = (math.floor(math.log2(fmt.max)) - fmt.emin) * half + fmt.max / 2.0 ** (
            math.floor(math.log2(fmt.max)) - fmt.p + 1
        )
        o = np.where(np.isinf(a), top + 1, o)
        o = np.where(np.isnan(a), np.nan, o)
    return np.copysign(o, x)


def ulp_distance(got: np.ndarray, expected: np.ndarray, dtype: str) -> np.ndarray:
    """Elementwise ULP distance in ``dtype`` between two float64 arrays of one shape
    (±0 equal; NaN where either is NaN)."""
    return np.abs(ordinal(got, dtype) - ordinal(expected, dtype))


@dataclass(frozen=True)
class ResolvedTolerance:
    """The tolerance applied to one output: atol, rtol (absolute/relative, in the output's
    units), ulp (ULPs of ``dtype``, or None), and where each came from (``source``)."""

    atol: float
    rtol: float
    ulp: float | None
    dtype: str
    source: str

    def describe(self) -> str:
        if self.ulp is not None:
            return f"ulp={self.ulp:g} (atol floor {self.atol:g}) [{self.source}]"
        return f"atol={self.atol:g}, rtol={self.rtol:g} [{self.source}]"

    def as_dict(self) -> dict[str, Any]:
        return {"atol": self.atol, "rtol": self.rtol, "ulp": self.ulp, "dtype": self.dtype, "source": self.source}


def resolve_tolerance(declared: Any, out_dtype: str) -> ResolvedTolerance:
    """Fill a declared :class:`~workstation.task.format.Tolerance` (atol/rtol/ulp, any may be
    None) with torch.testing's defaults for ``out_dtype`` where a key is missing.
    With ``ulp`` given and no atol, the atol floor is 0."""
    d_rtol, d_atol = TORCH_TESTING_DEFAULTS.get(out_dtype, (0.0, 0.0))
    atol, rtol, ulp = declared.atol, declared.rtol, declared.ulp
    parts = []
    if ulp is not None:
        parts.append("ulp declared")
        atol = atol if atol is not None else 0.0
        rtol = 0.0
    else:
        if atol is None:
            atol = d_atol
            parts.append(f"atol: torch.testing default for {out_dtype}")
        if rtol is None:
            rtol = d_rtol
            parts.append(f"rtol: torch.testing default for {out_dtype}")
    source = "declared [tolerance]" if not parts else "; ".join(["declared [tolerance]", *parts])
    if declared.atol is None and declared.rtol is None and ulp is None:
        source = f"torch.testing defaults for {out_dtype}"
    return ResolvedTolerance(float(atol), float(rtol), ulp, out_dtype, source)


@dataclass
class Comparison:
    """The full-tensor comparison of one output.

    ``ok``: every element close. ``reason``: why not, in words (shape, dtype, values).
    Errors are in the output's units: ``max_abs`` = max |got - expected| over finite
    pairs, ``max_rel`` = max |got - expected| / |expected| over expected != 0,
    ``max_ulp`` in ULPs of the output dtype (float outputs only). ``worst`` is the element
    that exceeds its allowed error the most (its index, expected, got, allowed).
    """

    ok: bool
    reason: str
    shape: tuple[int, ...]
    dtype: str
    numel: int = 0
    n_bad: int = 0
    max_abs: float = 0.0
    max_rel: float = 0.0
    max_ulp: float | None = None
    nan_got: int = 0
    nan_expected: int = 0
    inf_got: int = 0
    worst: dict[str, Any] | None = None
    bad_sample: list[dict[str, Any]] = field(default_factory=list)
    bad_region: dict[str, Any] | None = None
    tolerance: ResolvedTolerance | None = None

    def evidence(self) -> dict[str, Any]:
        """JSON-ready evidence (non-finite numbers become strings at serialisation)."""
        ev: dict[str, Any] = {
            "shape": list(self.shape),
            "dtype": self.dtype,
            "elements": self.numel,
            "mismatched": self.n_bad,
            "max_abs_err": self.max_abs,
            "max_rel_err": self.max_rel,
        }
        if self.max_ulp is not None:
            ev["max_ulp"] = self.max_ulp
        if self.nan_got or self.nan_expected:
            ev["nan_in_got"], ev["nan_in_expected"] = self.nan_got, self.nan_expected
        if self.inf_got:
            ev["inf_in_got"] = self.inf_got
        if self.tolerance is not None:
            ev["tolerance"] = self.tolerance.as_dict()
        if self.worst is not None:
            ev["worst"] = self.worst
        if self.bad_sample:
            ev["mismatch_sample"] = self.bad_sample
        if self.bad_region is not None:
            ev["mismatch_region"] = self.bad_region
        if not self.ok:
            ev["reason"] = self.reason
        return ev


def _idx(flat: int, shape: tuple[int, ...]) -> list[int]:
    return [int(i) for i in np.unravel_index(flat, shape)] if shape else []


def compare(
    expected: np.ndarray,
    got: np.ndarray,
    tol: ResolvedTolerance,
    *,
    expected_dtype: str,
    got_dtype: str,
    nonfinite_ok: bool = False,
    sample: int = 8,
) -> Comparison:
    """Compare one output elementwise over the whole tensor.

    Args:
        expected: the reference's output as float64 (or int64/bool/complex128), any shape.
        got: the candidate's output, same encoding.
        tol: the tolerance to apply (see :func:`resolve_tolerance`).
        expected_dtype, got_dtype: the torch dtype names of the original tensors; a
            different dtype or shape is a mismatch, as in torch.testing.
        nonfinite_ok: the contract admits non-finite inputs (NaN == NaN at the same place).
        sample: how many mismatching elements to list.
    """
    shape = tuple(expected.shape)
    base = Comparison(ok=False, reason="", shape=tuple(got.shape), dtype=got_dtype, tolerance=tol)
    if tuple(got.shape) != shape:
        base.reason = f"shape mismatch: expected {list(shape)}, got {list(got.shape)}"
        return base
    if expected_dtype != got_dtype:
        base.reason = f"dtype mismatch: expected {expected_dtype}, got {got_dtype}"
        return base
    n = int(expected.size)
    base.numel = n
    if n == 0:
        base.ok, base.reason = True, "empty output"
        return base
    e = expected.astype(np.complex128 if np.iscomplexobj(expected) else np.float64).ravel()
    g = got.astype(e.dtype).ravel()
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        diff = np.abs(g - e)
        allowed = tol.atol + tol.rtol * np.abs(e)
        close, ulp = _close(e, g, diff, allowed, tol, got_dtype, nonfinite_ok)
        _error_maxima(base, e, g, diff, ulp, got_dtype)
        # excess over the allowed error; non-finite mismatches rank first
        excess = np.where(close, -np.inf, np.where(np.isfinite(diff), diff - allowed, np.inf))
    base.nan_got, base.nan_expected = int(np.isnan(g).sum()), int(np.isnan(e).sum())
    base.inf_got = int(np.isinf(g).sum())
    bad = ~close
    base.n_bad = int(bad.sum())
    worst_flat = int(np.argmax(excess)) if base.n_bad else int(np.argmax(np.where(np.isfinite(diff), diff, -1)))
    base.worst = {
        "index": _idx(worst_flat, shape),
        "expected": _num(e[worst_flat]),
        "got": _num(g[worst_flat]),
        "abs_err": _num(diff[worst_flat]),
        "allowed": _num(allowed[worst_flat]),
    }
    if base.n_bad == 0:
        base.ok, base.reason = True, "all elements within tolerance"
        return base
    bad_flat = np.flatnonzero(bad)
    base.bad_sample = [
        {"index": _idx(int(i), shape), "expected": _num(e[i]), "got": _num(g[i])} for i in bad_flat[:sample]
    ]
    if len(shape) >= 1:
        coords = np.unravel_index(bad_flat, shape)
        base.bad_region = {
            f"dim{d}": [int(c.min()), int(c.max())] for d, c in enumerate(coords)
        }
    what = []
    if base.nan_got and not nonfinite_ok:
        what.append(f"{base.nan_got} NaN in the candidate's output")
    what.append(f"{base.n_bad} of {n} elements ({100.0 * base.n_bad / n:.3g}%) outside {tol.describe()}")
    base.reason = "; ".join(what)
    return base


def _close(e: np.ndarray, g: np.ndarray, diff: np.ndarray, allowed: np.ndarray, tol: ResolvedTolerance,
           got_dtype: str, nonfinite_ok: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """Which elements of ``g`` are close to ``e`` (flat arrays; ``diff`` = ``|g - e|``,
    ``allowed`` = atol + rtol ``|e|``): torch.testing's rule, or with ``tol.ulp`` for a
    float dtype, within that many ULPs of ``got_dtype`` (or ``atol``); equal infinities are
    close, a NaN is not (unless ``nonfinite_ok`` and NaN on both sides). Returns the mask
    and the ULP distances when the rule used them (else None)."""
    e_nan, g_nan = np.isnan(e), np.isnan(g)
    both_inf_equal = np.isinf(e) & (g == e)
    close = diff <= allowed
    close |= both_inf_equal
    close &= ~(e_nan | g_nan)
    if nonfinite_ok:
        close |= e_nan & g_nan
    ulp = None
    if tol.ulp is not None and is_float(got_dtype):
        ulp = ulp_distance(g.real, e.real, got_dtype)
        close = ((ulp <= tol.ulp) | (diff <= tol.atol) | both_inf_equal) & ~(e_nan | g_nan)
        if nonfinite_ok:
            close |= e_nan & g_nan
    return close, ulp


def _error_maxima(base: Comparison, e: np.ndarray, g: np.ndarray, diff: np.ndarray, ulp: np.ndarray | None,
                  got_dtype: str) -> None:
    """Set ``base``'s largest finite absolute, relative (where ``e`` is not 0) and, for a
    float dtype, ULP error (``ulp``: the distances already computed, else computed here)."""
    finite = np.isfinite(diff)
    base.max_abs = float(diff[finite].max()) if finite.any() else 0.0
    nz = finite & (np.abs(e) > 0)
    rel = diff[nz] / np.abs(e[nz])
    base.max_rel = float(rel.max()) if rel.size else 0.0
    if is_float(got_dtype):
        u = ulp if ulp is not None else ulp_distance(g.real, e.real, got_dtype)
        fu = u[np.isfinite(u)]
        base.max_ulp = float(fu.max()) if fu.size else None


def _num(x: Any) -> Any:
    """A JSON-friendly Python number (complex -> [re, im])."""
    if isinstance(x, complex | np.complexfloating):
        return [float(x.real), float(x.imag)]
    if isinstance(x, np.bool_ | bool):
        return bool(x)
    if isinstance(x, np.integer):
        return int(x)
    return float(x)


def region_text(region: dict[str, Any] | None) -> str:
    """``{"dim0": [0, 3], "dim1": [1024, 1030]}`` -> ``"rows 0..3, cols 1024..1030"``."""
    if not region:
        return ""
    names = ["rows", "cols"] if len(region) == 2 else [f"dim{i}" for i in range(len(region))]
    if len(region) == 1:
        names = ["elements"]
    return ", ".join(f"{nm} {lo}..{hi}" for nm, (lo, hi) in zip(names, region.values(), strict=True))
