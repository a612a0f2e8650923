"""Error budgets for kernel outputs: unit roundoffs, accumulation bounds, suggested tolerances.

Parent-side and pure numpy (no torch, no triton): every function takes float64 arrays that
a child sent back (:mod:`workstation.protocol.wire`) and returns numbers or arrays. The model
is documented in ``docs/numerics.md``; in short, for one output element ``y`` of an
implementation that accumulates ``K`` terms in a format of unit roundoff ``u_acc`` and
rounds the result once to the output format (unit roundoff ``u_out``):

- worst case (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., 2002,
  Lemma 3.1 and sec. 3.1, inner products): ``|ŷ - y| <= γ_K · S + u_out·|y|`` with
  ``γ_K = K·u_acc / (1 - K·u_acc)`` (defined while ``K·u_acc < 1``);
- probabilistic (Higham and Mary, "A New Approach to Probabilistic Rounding Error
  Analysis", SIAM J. Sci. Comput. 41(5), 2019, sec. 2 and 3): with rounding errors modelled
  as independent, mean-zero and bounded by ``u``, ``|ŷ - y| <= γ̃_K(λ) · S + u_out·|y|``
  where ``γ̃_K(λ) = exp(λ·√K·u_acc + K·u_acc²/(1 - u_acc)) - 1 ≈ λ·√K·u_acc``, holding for
  one inner product with probability at least ``1 - 2K·exp(-λ²(1-u)²/2)``;

where ``S = |a|ᵀ|b|`` for an inner product (the op applied to absolute values, for a
multilinear op) and ``|y|`` otherwise. kws picks ``λ`` so that the bound holds at every
element of the output at once with probability ``1 - DELTA`` (union bound), uses the
smaller of the two bounds, and adds a floor ``τ`` (for ops that are not multilinear, the
roundings of up to ``TAU_OPS`` = 8 operations in the accumulator format at the output's
largest magnitude; plus half the smallest subnormal of the output format).

Unit roundoffs come from :data:`workstation.analysis.compare.FORMATS` (IEEE 754 binary formats,
``u = 2^-p``): fp16 2^-11, bf16 2^-8, fp32 2^-24, fp64 2^-53, tf32 2^-11 (inputs of TF32
MMA), fp8 e4m3 2^-4, e5m2 2^-3.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from workstation.analysis.compare import (
    FORMATS,
    TORCH_TESTING_DEFAULTS,
    ResolvedTolerance,
    is_float,
    unit_roundoff,
)

#: failure probability of the tensor-wide probabilistic bound (all outputs at once).
DELTA = 1e-3
#: a declared tolerance wider than this multiple of the budget at every element is loose.
LOOSE_FACTOR = 10.0
#: roundings in the accumulator's format the floor τ allows at the output's largest magnitude.
TAU_OPS = 8
#: FlashAttention's rule: candidate error <= FA_FACTOR * reference error + floor
#: (Dao-AILab/flash-attention, hopper/test_flash_attn.py: ``rtol = 2``,
#: ``fwd_atol = 2 * (out_ref + 0.3 - 0.3 - out_ref).abs().max()``).
FA_FACTOR = 2.0
HALF_DTYPES = ("float16", "bfloat16")
FP8_DTYPES = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")
#: the next lower precision kws computes a reference in, for a negative control.
LOWER_PRECISION: dict[str, tuple[str, ...]] = {
    "float64": ("float32",),
    "float32": ("float16", "bfloat16"),
    "float16": ("bfloat16",),
}


# ----------------------------------------------------------------------------- formats


def pow2_text(u: float) -> str:
    """``2**-24`` -> ``"2^-24"`` (any power of two; other numbers in %.3g)."""
    if u > 0:
        e = math.log2(u)
        if e == int(e):
            return f"2^{int(e)}"
    return f"{u:.3g}"


def num(x: float | None, digits: int = 3) -> str:
    """A number for a sentence: ``1.2e-05``, ``0.034``, ``7``, ``inf``; ``n/a`` for None (a
    figure that could not be computed)."""
    if x is None:
        return "n/a"
    if not math.isfinite(x):
        return "inf" if x > 0 else ("-inf" if x < 0 else "nan")
    return f"{x:.{digits}g}"


def ulp(x: np.ndarray, dtype: str) -> np.ndarray:
    """The spacing of ``dtype`` at each ``|x|``: ``2^(max(e, emin) - p + 1)`` for ``|x|`` in
    ``[2^e, 2^(e+1))`` (the smallest subnormal at 0). Shape of ``x``, float64."""
    f = FORMATS[dtype]
    a = np.abs(np.asarray(x, dtype=np.float64))
    with np.errstate(invalid="ignore", divide="ignore"):
        _, e2 = np.frexp(np.where(np.isfinite(a) & (a > 0), a, 1.0))
    e = np.maximum(e2 - 1, f.emin)
    e = np.where(a > 0, e, f.emin)
    return np.exp2((e - f.p + 1).astype(np.float64))


def round_to(x: np.ndarray, dtype: str) -> np.ndarray:
    """Round float64 values to the nearest value of ``dtype`` (ties to even, IEEE 754
    round-to-nearest), returned as float64. Values beyond the largest finite number round
    to ±inf (the ``fn`` fp8 formats have no inf: kws keeps inf, which compares unequal to
    any finite value, as their NaN would). NaN and inf pass through."""
    x = np.asarray(x, dtype=np.float64)
    if dtype == "float64":
        return x.copy()
    if dtype == "float32":
        with np.errstate(over="ignore"):
            return x.astype(np.float32).astype(np.float64)
    if dtype == "float16":
        with np.errstate(over="ignore"):
            return x.astype(np.float16).astype(np.float64)
    f = FORMATS[dtype]
    a = np.abs(x)
    q = ulp(a, dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        r = np.rint(a / q) * q
        top = f.max + ulp(np.array(f.max), dtype) / 2
        r = np.where(a >= top, np.inf, np.minimum(r, f.max))
        r = np.where(np.isfinite(a), r, a)
    return np.copysign(r, x)


def accumulator_dtype(case_dtype: str) -> str:
    """The accumulator a correct kernel uses for inputs of ``case_dtype``: float64 for
    float64, float32 for everything narrower (fp32 accumulation of fp16/bf16/fp8 products is
    what tensor-core MMA instructions and torch's CPU/GPU reductions do)."""
    return "float64" if case_dtype == "float64" else "float32"


# ----------------------------------------------------------------------------- bounds


def gamma(k: int, u: float) -> float:
    """γ_k = k·u / (1 - k·u) (Higham 2002, Lemma 3.1); ``inf`` where ``k·u >= 1``."""
    ku = k * u
    return ku / (1.0 - ku) if ku < 1.0 else math.inf


def gamma_tilde(k: int, u: float, lam: float) -> float:
    """Higham and Mary's probabilistic constant γ̃_k(λ) = exp(λ·√k·u + k·u²/(1-u)) - 1
    (≈ λ·√k·u to first order)."""
    return math.expm1(lam * math.sqrt(k) * u + k * u * u / (1.0 - u))


def hm_lambda(k: int, n_out: int, delta: float = DELTA, u: float = 0.0) -> float:
    """The λ for which Higham and Mary's bound holds at all ``n_out`` outputs with
    probability ``>= 1 - delta``: one inner product of length ``k`` fails with probability
    at most ``2k·exp(-λ²(1-u)²/2)``; a union bound over the outputs gives
    ``λ = sqrt(2·ln(2·k·n_out/δ)) / (1 - u)``."""
    k, n_out = max(int(k), 1), max(int(n_out), 1)
    return math.sqrt(2.0 * math.log(2.0 * k * n_out / delta)) / (1.0 - u)


@dataclass
class Budget:
    """The error budget of one output of one run (a case and a seed).

    Per element ``i`` of an implementation's result against the exact value ``y_i``:
    ``B_i = rho·S_i + u_out·|y_i| + tau`` with ``rho = min(γ̃_K(λ), γ_K)`` of the
    accumulator's unit roundoff. Two correct implementations differ by at most ``2·B_i``.

    Attributes:
        k: the reduction length K (terms accumulated per output element); ``k_source``
            says where it came from (``[contract] reduction``, shapes, perturbation).
        acc_dtype, u_acc: the accumulator format and its unit roundoff.
        out_dtype, u_out: the output format and its unit roundoff.
        n_out: elements of the output (for λ).
        lam: λ of the tensor-wide probabilistic bound.
        rho_prob, rho_worst: γ̃_K(λ) and γ_K; ``rho`` the smaller, used.
        expected: √K·u_acc, the expected relative accumulation error (λ = 1).
        magnitude: ``"|a|ᵀ|b|"`` (the op on absolute inputs) or ``"|y|"``.
        tau: the absolute floor (see module doc).
    """

    k: int
    k_source: str
    acc_dtype: str
    out_dtype: str
    n_out: int
    magnitude: str
    tau: float
    u_acc: float = 0.0
    u_out: float = 0.0
    lam: float = 0.0
    rho_prob: float = 0.0
    rho_worst: float = 0.0
    rho: float = 0.0
    expected: float = 0.0

    def __post_init__(self) -> None:
        self.u_acc = unit_roundoff(self.acc_dtype)
        self.u_out = unit_roundoff(self.out_dtype)
        self.lam = hm_lambda(self.k, self.n_out, DELTA, self.u_acc)
        self.rho_prob = gamma_tilde(self.k, self.u_acc, self.lam)
        self.rho_worst = gamma(self.k, self.u_acc)
        self.rho = min(self.rho_prob, self.rho_worst)
        self.expected = math.sqrt(self.k) * self.u_acc

    @property
    def bound_name(self) -> str:
        """Which bound ``rho`` is: ``"probabilistic"`` or ``"worst-case"``."""
        return "probabilistic" if self.rho_prob <= self.rho_worst else "worst-case"

    def per_element(self, mag: np.ndarray, y: np.ndarray) -> np.ndarray:
        """``B_i = rho·S_i + u_out·|y_i| + tau`` (float64, the shape of ``y``)."""
        return self.rho * np.abs(mag) + self.u_out * np.abs(y) + self.tau

    def as_dict(self) -> dict[str, Any]:
        return {
            "K": self.k, "K_source": self.k_source, "accumulator": self.acc_dtype,
            "u_acc": self.u_acc, "output_dtype": self.out_dtype, "u_out": self.u_out,
            "outputs": self.n_out, "lambda": self.lam, "gamma_tilde_K": self.rho_prob,
            "gamma_K": self.rho_worst, "rho": self.rho, "bound": self.bound_name,
            "expected_sqrtK_u": self.expected, "magnitude": self.magnitude, "tau": self.tau,
        }

    def formula_text(self) -> str:
        """One sentence: the model with this budget's numbers plugged in."""
        g = "inf" if not math.isfinite(self.rho_worst) else num(self.rho_worst)
        return (
            f"K = {self.k} ({self.k_source}), accumulator {self.acc_dtype} (u = {pow2_text(self.u_acc)} = "
            f"{num(self.u_acc)}), output {self.out_dtype} (u = {pow2_text(self.u_out)} = {num(self.u_out)}); "
            f"per element B = rho*S + u_out*|y| + tau with S = {self.magnitude}, "
            f"rho = min(gamma~_K(lambda) = {num(self.rho_prob)} [Higham-Mary, lambda = {self.lam:.2f} for "
            f"{self.n_out} outputs at probability {1 - DELTA:g}], gamma_K = {g} [Higham Lemma 3.1]) = "
            f"{num(self.rho)}, tau = {num(self.tau)}"
        )


def budget_floor(y_absmax: float, acc_dtype: str, out_dtype: str, ops: int = TAU_OPS) -> float:
    """τ = ops·u_acc·max|y| + 2^(emin_out - p_out): the roundings of up to ``ops``
    (:data:`TAU_OPS`) operations in the accumulator's format at the output's largest
    magnitude (an elementwise epilogue, a cancellation such as ``1 + tanh(u)`` in a GELU tail
    or ``x - mean`` in a norm, whose absolute error scales with the operands, not with the
    small result), plus half the smallest subnormal of the output format. For a multilinear
    op ``S = |a|ᵀ|b|`` already carries the operands' magnitudes and kws passes ``ops = 0``."""
    f = FORMATS[out_dtype]
    return ops * unit_roundoff(acc_dtype) * float(y_absmax) + 2.0 ** (f.emin - f.p)


# ----------------------------------------------------------------------------- errors


@dataclass
class ErrorStats:
    """Errors of ``got`` against an oracle, in the output's units.

    ``max_abs``/``max_rel`` over finite pairs (rel over oracle != 0), ``max_ulp`` in ULPs of
    ``dtype``; ``worst`` the element with the largest ``abs_err / budget`` (index, oracle,
    got, budget) when a budget is given; ``budget_ratio`` that ratio; ``beyond`` the number
    of elements whose error exceeds their budget; ``nonfinite`` elements where got is not
    finite but the oracle is.
    """

    max_abs: float
    max_rel: float
    max_ulp: float | None
    numel: int
    budget_ratio: float | None = None
    beyond: int = 0
    nonfinite: int = 0
    worst: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"max_abs_err": self.max_abs, "max_rel_err": self.max_rel,
                             "elements": self.numel}
        if self.max_ulp is not None:
            d["max_ulp"] = self.max_ulp
        if self.budget_ratio is not None:
            d["max_err_over_budget"] = self.budget_ratio
            d["elements_beyond_budget"] = self.beyond
        if self.nonfinite:
            d["nonfinite"] = self.nonfinite
        if self.worst is not None:
            d["worst"] = self.worst
        return d


def _index(flat: int, shape: tuple[int, ...]) -> list[int]:
    return [int(i) for i in np.unravel_index(flat, shape)] if shape else []


def error_stats(got: np.ndarray, oracle: np.ndarray, dtype: str,
                budget: np.ndarray | None = None) -> ErrorStats:
    """Errors of ``got`` (float64 values of a ``dtype`` tensor) against ``oracle`` (float64,
    same shape), optionally relative to a per-element ``budget`` (same shape)."""
    g = np.asarray(got, dtype=np.float64)
    o = np.asarray(oracle, dtype=np.float64)
    shape = o.shape
    g, o = g.ravel(), o.ravel()
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        d = np.abs(g - o)
        fin = np.isfinite(d)
        nonfinite = int((~np.isfinite(g) & np.isfinite(o)).sum())
        max_abs = float(d[fin].max()) if fin.any() else 0.0
        nz = fin & (o != 0)
        max_rel = float((d[nz] / np.abs(o[nz])).max()) if nz.any() else 0.0
        max_ulp = None
        if is_float(dtype) and o.size:
            from workstation.analysis.compare import ulp_distance

            u = ulp_distance(g, o, dtype)
            fu = u[np.isfinite(u)]
            max_ulp = float(fu.max()) if fu.size else None
    st = ErrorStats(max_abs, max_rel, max_ulp, int(o.size), nonfinite=nonfinite)
    if budget is not None and o.size:
        b = np.asarray(budget, dtype=np.float64).ravel()
        with np.errstate(invalid="ignore", divide="ignore"):
            r = np.where(np.isfinite(d), d / b, np.where(np.isfinite(o), np.inf, 0.0))
        r = np.nan_to_num(r, nan=np.inf, posinf=np.inf)
        i = int(np.argmax(r))
        st.budget_ratio = float(r[i])
        st.beyond = int((r > 1).sum())
        st.worst = {"index": _index(i, shape), "oracle": float(o[i]), "got": float(g[i]),
                    "abs_err": float(d[i]) if np.isfinite(d[i]) else str(d[i]), "budget": float(b[i])}
    return st


def allowed_error(tol: ResolvedTolerance, expected: np.ndarray) -> np.ndarray:
    """The error a tolerance allows at each element of ``expected`` (float64): torch.testing's
    ``atol + rtol·|expected|``, or for a ULP tolerance ``max(atol, ulp·spacing(expected))``."""
    e = np.abs(np.asarray(expected, dtype=np.float64))
    if tol.ulp is not None and is_float(tol.dtype):
        return np.maximum(tol.atol, tol.ulp * ulp(e, tol.dtype))
    return tol.atol + tol.rtol * e


def fa_floor(oracle: np.ndarray, dtype: str) -> float:
    """FlashAttention's floor: ``2 * max|fl(fl(o + 0.3) - 0.3) - o|`` with ``o`` the oracle
    rounded to the output dtype and fl() rounding to it (the error of any arithmetic at the
    output's scale)."""
    o = round_to(np.asarray(oracle, dtype=np.float64), dtype)
    t = round_to(round_to(o + 0.3, dtype) - 0.3, dtype)
    with np.errstate(invalid="ignore"):
        d = np.abs(t - o)
    d = d[np.isfinite(d)]
    return 2.0 * float(d.max()) if d.size else 0.0


def ratio_floor(oracle: np.ndarray, dtype: str, budget: np.ndarray | None = None) -> dict[str, float]:
    """The rounding floor of every ratio-to-baseline or ratio-to-reference rule
    (``err <= FA_FACTOR·err_base + floor``): without one, a base that happens to be exact or
    nearly so (9e-8 on an fp32 output) demands the impossible of any other evaluation
    order of the same arithmetic. ``floor = max(fa, one_budget)`` (absolute, the output's
    units):

    - ``fa``: FlashAttention's :func:`fa_floor`, the error of one rounding at the output's
      scale;
    - ``one_budget``: the largest per-element error budget ``max_i B_i`` (``B_i = rho·S_i +
      u_out·|y_i| + tau``, :class:`Budget`, ``rho = min(γ̃_K(λ), γ_K)`` with ``γ_K =
      K·u/(1 - K·u)`` of the accumulator's unit roundoff and the reduction length K: Higham
      2002, Lemma 3.1; Higham and Mary 2019) when ``budget`` (that per-element array) is
      given; else :func:`budget_floor` at ``max|oracle|`` (``TAU_OPS`` roundings in the
      accumulator's format, no reduction term). One correct implementation stays within
      ``B_i`` of the exact value, so the floor never fails one that is within its budget.

    Returns ``{"floor", "fa_floor", "budget_floor"}`` (floats; 0 where the oracle has no
    finite element)."""
    o = np.asarray(oracle, dtype=np.float64)
    fa = fa_floor(o, dtype)
    if budget is not None:
        b = np.asarray(budget, dtype=np.float64)
        b = b[np.isfinite(b)]
        one = float(b.max()) if b.size else 0.0
    else:
        fin = np.abs(o[np.isfinite(o)])
        one = budget_floor(float(fin.max()), accumulator_dtype(dtype), dtype) if fin.size else 0.0
    return {"floor": max(fa, one), "fa_floor": fa, "budget_floor": one}


# ----------------------------------------------------------------------------- tolerances


_NICE = (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)


def nice_up(x: float) -> float:
    """Round ``x`` up to two significant figures on the 1-1.2-1.5-2-2.5-3-4-5-6-8 ladder."""
    if not math.isfinite(x) or x <= 0:
        return 0.0 if x <= 0 else x
    e = math.floor(math.log10(x))
    m = x / 10.0**e
    for n in _NICE:
        if m <= n * (1 + 1e-12):
            return float(f"{n * 10.0**e:.3g}")
    return float(f"{10.0 ** (e + 1):.3g}")


def fit_tolerance(mag: np.ndarray, need: np.ndarray, bins: int = 512) -> tuple[float, float]:
    """The (atol, rtol) with ``atol + rtol·mag_i >= need_i`` at every element that allows the
    least error in total (minimises ``Σ (atol + rtol·mag_i) / need_i``).

    A two-variable linear program: the optimum is a line through an edge of the upper
    convex hull of the points ``(mag_i, need_i)``, or one of the axis-aligned lines (rtol = 0
    or atol = 0). The hull is taken over the largest-need point of each log-spaced magnitude
    bin; each candidate line's atol is then raised to cover every element exactly, so the
    result is always feasible (and optimal up to the binning).

    Args:
        mag: ``|expected|`` per element (float64, any shape).
        need: the error to allow per element, same shape, >= 0.

    Returns:
        (atol, rtol), both >= 0; (0, 0) when nothing needs to be allowed.
    """
    x = np.abs(np.asarray(mag, dtype=np.float64)).ravel()
    y = np.asarray(need, dtype=np.float64).ravel()
    ok = np.isfinite(x) & np.isfinite(y) & (y > 0)
    x, y = x[ok], y[ok]
    if not y.size:
        return 0.0, 0.0
    pts: list[tuple[float, float]] = []
    zero = x == 0
    if zero.any():
        pts.append((0.0, float(y[zero].max())))
    pos = ~zero
    if pos.any():
        xp, yp = x[pos], y[pos]
        lx = np.log2(xp)
        lo, hi = float(lx.min()), float(lx.max())
        nb = max(1, min(bins, int((hi - lo) * 16) + 1))
        idx = np.minimum(((lx - lo) / max(hi - lo, 1e-300) * nb).astype(int), nb - 1)
        order = np.lexsort((yp, idx))  # by bin, then need: the last of each bin has the largest need
        last = np.r_[idx[order][1:] != idx[order][:-1], True]
        for k in order[last]:
            pts.append((float(xp[k]), float(yp[k])))
    pts.sort()
    hull: list[tuple[float, float]] = []
    for p in pts:  # upper hull, monotone chain
        while len(hull) >= 2:
            (x1, y1), (x2, y2) = hull[-2], hull[-1]
            if (x2 - x1) * (p[1] - y1) - (y2 - y1) * (p[0] - x1) >= 0:
                hull.pop()
            else:
                break
        hull.append(p)
    slopes = [0.0]
    if x.min() > 0:
        slopes.append(float((y / x).max()))
    for (x1, y1), (x2, y2) in zip(hull, hull[1:], strict=False):
        if x2 > x1 and y2 >= y1:
            slopes.append((y2 - y1) / (x2 - x1))
    w = 1.0 / y
    w0, w1 = float(w.sum()), float((x * w).sum())
    best = None
    for s in slopes:
        a = max(float((y - s * x).max()), 0.0)
        cost = a * w0 + s * w1
        if best is None or cost < best[0]:
            best = (cost, a, s)
    assert best is not None
    # a relative 1e-9 margin absorbs the rounding of atol + rtol*mag in float64
    return best[1] * (1 + 1e-9), best[2] * (1 + 1e-9)


def torch_default(dtype: str) -> tuple[float, float]:
    """torch.testing's default (atol, rtol) for ``dtype`` ((0, 0) where it compares exactly)."""
    rtol, atol = TORCH_TESTING_DEFAULTS.get(dtype, (0.0, 0.0))
    return atol, rtol


# ----------------------------------------------------------------------------- reduction length


@dataclass
class Reduction:
    """The reduction length of a case and where it came from."""

    k: int
    source: str
    params: tuple[str, ...] = ()
    detail: dict[str, Any] = field(default_factory=dict)


def reduction_from_contract(case: dict[str, Any], params: Sequence[str]) -> Reduction | None:
    """K = the product of the case parameters named in ``[contract] reduction``."""
    if not params:
        return None
    k = 1
    for p in params:
        v = case.get(p)
        if not isinstance(v, int) or isinstance(v, bool):
            return None
        k *= v
    return Reduction(max(k, 1), f"[contract] reduction = {' * '.join(params)}", tuple(params))


def reduced_params(cases: Iterable[tuple[dict[str, Any], list[list[int]], list[list[int]]]]) -> tuple[str, ...]:
    """Case parameters that size a dimension shared by inputs and absent from the outputs.

    ``cases``: (case, input tensor shapes, output shapes) per declared case. A parameter
    counts when, in some case where its value differs from every other integer parameter's
    (so the dimension is unambiguous), that value is a dimension of an input and of no
    output. Returns the parameter names in case order.
    """
    found: list[str] = []
    for case, ins, outs in cases:
        ints = {k: v for k, v in case.items() if isinstance(v, int) and not isinstance(v, bool)}
        in_dims = [d for s in ins for d in s]
        out_dims = {d for s in outs for d in s}
        for p, v in ints.items():
            if p in found or v <= 1:
                continue
            if sum(1 for q, w in ints.items() if w == v) > 1:
                continue
            if v in in_dims and v not in out_dims:
                found.append(p)
    return tuple(found)


def reduction_from_shapes(ins: list[list[int]], outs: list[list[int]]) -> Reduction | None:
    """Without case parameters: the product of the input dimensions (each size counted
    once) that appear in no output, when some appear in two or more inputs or the output
    has fewer dimensions than the largest input (a sum over axes)."""
    out_dims = {d for s in outs for d in s}
    counts: dict[int, int] = {}
    for s in ins:
        for d in set(s):
            counts[d] = counts.get(d, 0) + 1
    gone = [d for d, c in counts.items() if d > 1 and d not in out_dims]
    if not gone:
        return None
    shared = [d for d in gone if counts[d] >= 2]
    fewer = max((len(s) for s in ins), default=0) > max((len(s) for s in outs), default=0)
    pick = shared or (gone if fewer else [])
    if not pick:
        return None
    return Reduction(int(np.prod(pick)), f"inferred from shapes: dimension(s) {pick} of the inputs vanish from the output")


def reduction_from_perturbation(changed: int, input_index: int, numel: int) -> Reduction:
    """K from a perturbation of one input element: the number of outputs that changed
    (the element's fan-out, equal to the fan-in of row-local reductions such as softmax,
    norms and scans)."""
    if changed <= 0:
        return Reduction(1, f"inferred by perturbation: no output of the float64 reference moved when one "
                         f"element of input {input_index} changed; taken as elementwise")
    return Reduction(int(changed), f"inferred by perturbation: one element of input {input_index} "
                     f"changed {changed} of {numel} outputs of the float64 reference")


# ----------------------------------------------------------------------------- error structure

#: how far above its error budget the candidate must be, in the median of every magnitude
#: bin, before its error is a candidate for "a different function" (far above rounding at
#: every magnitude, not at a few elements).
SYSTEMATIC_EXCESS = 8.0
#: the share of beyond-budget errors that must have one sign relative to the oracle's.
SYSTEMATIC_SIGN = 0.9
#: the share of the error's variance a smooth function of the output's value, or the
#: position along one axis, must explain (rounding errors: about 0).
SYSTEMATIC_EXPLAINED = 0.6


def _explained_by_value(o: np.ndarray, e: np.ndarray, groups: int = 32) -> float:
    """The share of ``e``'s variance explained by the output's value: one-way ANOVA R²
    (minus its chance level) with ``groups`` quantile groups of ``o`` as the groups. About 1
    when ``e`` is a smooth function of ``o`` (a dropped soft-cap); about 0 for rounding,
    whose error is a sawtooth with a period of one ulp, far finer than a group, so the
    spread inside each group is as large as the whole. 1 when ``e`` does not vary at all
    (a constant relative offset)."""
    n = e.size
    if n < 4 * groups:
        return 0.0
    total = float(np.sum((e - e.mean()) ** 2))
    if total <= 0.0:
        return 1.0
    s = e[np.argsort(o, kind="stable")]
    parts = np.array_split(s, groups)
    between = float(sum(p.size * (p.mean() - e.mean()) ** 2 for p in parts))
    chance = groups / n
    return float(max(0.0, (between / total - chance) / (1.0 - chance)))


def _explained_by_axis(e: np.ndarray) -> tuple[float, int | None]:
    """The largest share of ``e``'s variance its means along one axis explain (one-way
    ANOVA's R² with the position on that axis as the group; a dropped bias or a per-row
    scale gives about 1, rounding about groups/elements), and that axis."""
    best, axis = 0.0, None
    total = float(np.sum((e - e.mean()) ** 2))
    if e.ndim < 2 or total <= 0.0:
        return best, axis
    for ax in range(e.ndim):
        n = e.shape[ax]
        if n < 2 or e.size // n < 4:
            continue
        other = tuple(i for i in range(e.ndim) if i != ax)
        means = e.mean(axis=other, keepdims=True)
        r2 = float(np.sum(np.broadcast_to(means - e.mean(), e.shape) ** 2)) / total
        # rounding alone explains about n / size of the variance: subtract that chance level
        chance = n / e.size
        r2 = max(0.0, (r2 - chance) / (1.0 - chance)) if chance < 1.0 else 0.0
        if r2 > best:
            best, axis = r2, ax
    return best, axis


def error_structure(got: np.ndarray, oracle: np.ndarray, budget: np.ndarray, dtype: str = "float32",
                    bins: int = 4) -> dict[str, Any]:
    """Whether the error of ``got`` against ``oracle`` (float64, same shape) is *systematic*
    (a different function: a missing or different operation) or rounding (a less precise
    computation of the same function), judged against the per-element error budget
    ``budget`` (:meth:`Budget.per_element`: the rounding a correct implementation may show,
    unit roundoff times reduction length times magnitude).

    Systematic when both hold (docs/numerics.md, "Different function or less precise"):

    - *far above rounding at every magnitude*: in each of ``bins`` quantile bins of
      ``|oracle|`` the median ``|error| / budget`` is at least :data:`SYSTEMATIC_EXCESS`;
    - *structured*: at least :data:`SYSTEMATIC_EXPLAINED` of the relative error's variance
      is a function of the output's value (one-way ANOVA R² of the error in ulps of the
      output ``dtype``, signed away from zero, over 32 quantile groups of the oracle) or, the absolute error's, of the position along one axis (one-way ANOVA R² minus chance: a
      dropped bias, a wrong per-row scale). Rounding, even when consistently one way
      (truncation), varies element to element and explains about nothing.

    Evidence besides: the *sign agreement*, the share of beyond-budget errors with one sign
    relative to the oracle's value (a dropped soft-cap ``c·tanh(x/c)`` overshoots away from
    zero everywhere: 1.0; rounding to nearest about 0.5; at least :data:`SYSTEMATIC_SIGN`
    is reported as sign-consistent).

    Returns ``{"systematic", "elements", "bins": [{"abs_oracle_range", "median_err_over_budget"}],
    "min_bin_excess", "sign_agreement", "sign", "explained_by_value", "explained_by_axis",
    "axis", "ulp_err_vs_value": [[oracle, error in ulps of dtype] x 5 points]}``; ``systematic`` False
    (with ``"reason"``) when there are fewer than 32 finite elements.
    """
    g = np.asarray(got, dtype=np.float64)
    o = np.asarray(oracle, dtype=np.float64)
    b = np.broadcast_to(np.asarray(budget, dtype=np.float64), o.shape)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        err = g - o
        fin = np.isfinite(err) & np.isfinite(b) & (b > 0)
    out: dict[str, Any] = {"systematic": False, "elements": int(fin.sum())}
    if fin.sum() < 32:
        out["reason"] = "fewer than 32 finite elements"
        return out
    ef, of, bf = err[fin], o[fin], b[fin]
    ratio = np.abs(ef) / bf
    mag = np.abs(of)
    edges = np.quantile(mag, np.linspace(0.0, 1.0, bins + 1))
    rows: list[dict[str, Any]] = []
    medians: list[float] = []  # each row's median_err_over_budget
    for i in range(bins):
        lo, hi = edges[i], edges[i + 1]
        sel = (mag >= lo) & ((mag <= hi) if i == bins - 1 else (mag < hi))
        if sel.sum() >= 4:
            medians.append(float(np.median(ratio[sel])))
            rows.append({"abs_oracle_range": [float(lo), float(hi)], "median_err_over_budget": medians[-1]})
    min_excess = min(medians, default=0.0)
    beyond = ratio > 1.0
    s = np.sign(ef[beyond]) * np.where(of[beyond] != 0, np.sign(of[beyond]), 1.0)
    pos, neg = float(np.mean(s > 0)) if s.size else 0.0, float(np.mean(s < 0)) if s.size else 0.0
    agree = max(pos, neg)
    # the error in ulps of the output, signed relative to the value (away from zero > 0):
    # a one-way rounding (truncation) is then one constant spread, not two by sign
    rel = ef * np.where(of < 0, -1.0, 1.0) / ulp(of, dtype if is_float(dtype) else "float32")
    by_value = _explained_by_value(of, rel)
    by_axis, axis = _explained_by_axis(err) if fin.all() else (0.0, None)
    order = np.argsort(of, kind="stable")
    picks = order[np.linspace(0, order.size - 1, 5).astype(int)]
    out.update({
        "bins": rows, "min_bin_excess": min_excess, "sign_agreement": agree,
        "sign": "away from zero" if pos >= neg else "toward zero",
        "explained_by_value": by_value, "explained_by_axis": by_axis, "axis": axis,
        "ulp_err_vs_value": [[float(of[i]), float(rel[i])] for i in picks],
    })
    out["sign_consistent"] = bool(agree >= SYSTEMATIC_SIGN)
    out["systematic"] = bool(len(rows) == bins and min_excess >= SYSTEMATIC_EXCESS
                             and max(by_value, by_axis) >= SYSTEMATIC_EXPLAINED)
    return out
