"""Statistics of kws timing samples, computed in the parent (numpy and scipy).

The child (:mod:`workstation.harness.timing`) sends raw samples in nanoseconds; this
module turns them into what reports show: per side the median, the interquartile range
(numpy percentiles, linear interpolation), the sample count, the relative noise
(sample stdev / mean, nvbench's ``stdrel``), cold and warm medians; and for a pair of
sides the speedup ratio ``median(baseline) / median(candidate)`` with a bootstrap
confidence interval (``scipy.stats.bootstrap``, BCa, 0.95 by default; paired by round
when both sides have one sample per round, since the rounds interleave the sides and a
drift shared by both then cancels in the ratio).

The claim rule (:func:`judge_claim`) is documented in ``docs/timing.md``.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

CI_LEVEL = 0.95
N_RESAMPLES = 4000
#: a claim outside the interval by more than this (relative) fails; within it, warns.
CLAIM_MARGIN = 0.10
#: at most this many samples per side are stored in evidence (evenly thinned).
MAX_STORED_SAMPLES = 500


@dataclass(frozen=True)
class SideStats:
    """Summary of one side's samples (milliseconds).

    ``median_ms`` / ``iqr_ms`` / ``n`` / ``stdrel`` describe ``samples_ms``, the samples
    of the *primary* condition (``primary``: ``"cold"`` on CUDA, as ``do_bench`` and
    nvbench report; ``"warm"`` on the CPU, as ``torch.utils.benchmark`` reports);
    ``cold_ms`` / ``warm_ms`` are the medians of the cold and the warm samples.
    """

    samples_ms: tuple[float, ...]
    other_samples_ms: tuple[float, ...]
    primary: str
    median_ms: float
    iqr_ms: tuple[float, float]
    n: int
    stdrel: float
    cold_ms: float
    warm_ms: float
    first_call_ms: float | None

    def evidence(self) -> dict[str, Any]:
        """The timing panel's per-side shape (plus ``primary``, ``other_samples_ms``: the
        samples of the other condition, ``stdrel``, ``first_call_ms``)."""
        return {
            "samples_ms": thin(list(self.samples_ms)),
            "cold_ms": self.cold_ms,
            "warm_ms": self.warm_ms,
            "median_ms": self.median_ms,
            "iqr_ms": [self.iqr_ms[0], self.iqr_ms[1]],
            "n": self.n,
            "primary": self.primary,
            "other_samples_ms": thin(list(self.other_samples_ms)),
            "stdrel": self.stdrel,
            "first_call_ms": self.first_call_ms,
        }


def thin(xs: list[float], limit: int = MAX_STORED_SAMPLES) -> list[float]:
    """At most ``limit`` values of ``xs``, evenly spaced, in order."""
    if len(xs) <= limit:
        return [float(x) for x in xs]
    idx = np.linspace(0, len(xs) - 1, limit).round().astype(int)
    return [float(xs[i]) for i in idx]


def median(xs: Any) -> float:
    """``numpy.median`` as a float (nan for no samples)."""
    a = np.asarray(xs, dtype=np.float64)
    return float(np.median(a)) if a.size else math.nan


def iqr(xs: Any) -> tuple[float, float]:
    """(25th, 75th) percentiles (numpy, linear interpolation); (nan, nan) for no samples."""
    a = np.asarray(xs, dtype=np.float64)
    if not a.size:
        return (math.nan, math.nan)
    q1, q3 = np.percentile(a, [25, 75])
    return (float(q1), float(q3))


def stdrel(xs: Any) -> float:
    """Relative noise: sample standard deviation (ddof=1) / mean (nvbench ``stdrel``)."""
    a = np.asarray(xs, dtype=np.float64)
    if a.size < 2 or a.mean() <= 0:
        return math.inf
    return float(a.std(ddof=1) / a.mean())


def summarize(cold_ns: list[int], warm_ns: list[int], first_call_ns: int | None = None, *,
              primary: str = "cold") -> SideStats:
    """:class:`SideStats` from a side's raw samples in nanoseconds; ``primary`` picks the
    condition (``"cold"`` / ``"warm"``) that ``samples_ms``, median, IQR and n describe."""
    cold = np.asarray(cold_ns, dtype=np.float64) / 1e6
    warm = np.asarray(warm_ns, dtype=np.float64) / 1e6
    main, other = (cold, warm) if primary == "cold" else (warm, cold)
    return SideStats(
        samples_ms=tuple(float(x) for x in main),
        other_samples_ms=tuple(float(x) for x in other),
        primary=primary,
        median_ms=median(main),
        iqr_ms=iqr(main),
        n=int(main.size),
        stdrel=stdrel(main),
        cold_ms=median(cold),
        warm_ms=median(warm),
        first_call_ms=None if first_call_ns is None else first_call_ns / 1e6,
    )


@dataclass(frozen=True)
class RatioCI:
    """``ratio`` = median(baseline) / median(candidate) (> 1: the candidate is faster),
    with its bootstrap interval ``[lo, hi]`` at ``level``; ``method`` names the bootstrap
    (``BCa``, or ``percentile`` where BCa is degenerate) and whether it was paired."""

    ratio: float
    lo: float
    hi: float
    level: float
    method: str

    def as_list(self) -> list[float]:
        return [self.lo, self.hi]


def _ratio_of_medians(b: np.ndarray, c: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.median(b, axis=axis) / np.median(c, axis=axis)


def ratio_ci(baseline_ms: Any, candidate_ms: Any, *, level: float = CI_LEVEL,
             n_resamples: int = N_RESAMPLES, seed: int = 0) -> RatioCI:
    """The speedup ratio median(baseline) / median(candidate) and its bootstrap interval.

    ``scipy.stats.bootstrap`` with the BCa method; ``paired=True`` when both sides have the
    same number of samples (one per interleaved round), so that resampling keeps the
    rounds together; the percentile method where BCa is degenerate (e.g. many equal
    samples). The seed is fixed: the same samples give the same interval.

    Raises:
        ValueError: a side has fewer than 2 samples or a non-positive median.
    """
    b = np.asarray(baseline_ms, dtype=np.float64)
    c = np.asarray(candidate_ms, dtype=np.float64)
    if b.size < 2 or c.size < 2:
        raise ValueError(f"need at least 2 samples per side, got {b.size} and {c.size}")
    if np.median(c) <= 0 or np.median(b) <= 0:
        raise ValueError("non-positive median time")
    ratio = float(_ratio_of_medians(b, c))
    paired = b.size == c.size
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from scipy import stats  # deferred: scipy.stats costs ~0.5 s to import

            res = stats.bootstrap((b, c), _ratio_of_medians, paired=paired, vectorized=True,
                                  n_resamples=n_resamples, confidence_level=level, method=method,
                                  rng=np.random.default_rng(seed))
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if math.isfinite(lo) and math.isfinite(hi):
            return RatioCI(ratio, min(lo, ratio), max(hi, ratio), level,
                           f"{method}{', paired by round' if paired else ''}")
    return RatioCI(ratio, ratio, ratio, level, "degenerate (all resamples equal)")


@dataclass(frozen=True)
class ClaimVerdict:
    """How a claimed ratio sits against the measured intervals.

    ``position``: ``"inside"`` (the primary interval), ``"above"`` (the claim overstates
    the speedup) or ``"below"`` (understates it); ``distance``: relative distance outside
    the primary interval (``claimed / hi - 1`` above, ``lo / claimed - 1`` below; 0
    inside); ``other_holds``: the claim lies inside the other cache condition's interval
    (widened by the margin); ``severity``: ``None`` (consistent), ``"info"``, ``"warn"``
    or ``"fail"``; ``reason``: the rule that applied, in words.
    """

    position: str
    distance: float
    other_holds: bool
    severity: str | None
    reason: str
    margin: float


#: an understated claim within this factor of the measured interval is "conservative".
CONSERVATIVE_FACTOR = 3.0


def judge_claim(claimed: float, primary: RatioCI, other: RatioCI | None = None, *,
                margin: float = CLAIM_MARGIN) -> ClaimVerdict:
    """Judge a claimed speedup against the measured ratio interval of the primary cache
    condition (cold on CUDA, warm on the CPU) and, for leniency only, the other one.

    Rule (``docs/timing.md``):

    - inside the primary interval ``[lo, hi]``: consistent (``None``);
    - above ``hi``: ``warn`` when the claim holds in the other condition's interval
      (widened by ``margin``): the speedup exists only with a cold (or warm) cache;
      ``warn`` when it is above by at most ``margin`` (relative; machine and run
      differences); else ``fail``: the claim overstates the speedup beyond noise and
      margin;
    - below ``lo``: ``info`` (a conservative claim) when ``lo / claimed <= 3``, else
      ``warn`` (the claim was probably made for another case or device).
    """
    holds = other is not None and consistent_with(claimed, other, margin)
    if claimed > primary.hi:
        d = claimed / primary.hi - 1.0
        if holds:
            return ClaimVerdict("above", d, True, "warn", "holds only in the other cache condition", margin)
        if d <= margin:
            return ClaimVerdict("above", d, False, "warn", f"above the interval by at most {margin:.0%}", margin)
        return ClaimVerdict("above", d, False, "fail", f"above the interval by more than {margin:.0%}", margin)
    if claimed < primary.lo:
        d = primary.lo / claimed - 1.0
        if d + 1.0 <= CONSERVATIVE_FACTOR:
            return ClaimVerdict("below", d, holds, "info", f"conservative: below the interval by at most {CONSERVATIVE_FACTOR:g}x", margin)
        return ClaimVerdict("below", d, holds, "warn", f"below the interval by more than {CONSERVATIVE_FACTOR:g}x", margin)
    return ClaimVerdict("inside", 0.0, holds, None, "inside the interval", margin)


def consistent_with(value: float, ci: RatioCI, margin: float = CLAIM_MARGIN) -> bool:
    """True when ``value`` lies inside ``[lo / (1 + margin), hi * (1 + margin)]``."""
    return ci.lo / (1 + margin) <= value <= ci.hi * (1 + margin)


def log_distance(a: float, b: float) -> float:
    """|ln(a / b)|: how far apart two positive times are, symmetric in a and b."""
    if a <= 0 or b <= 0 or not (math.isfinite(a) and math.isfinite(b)):
        return math.inf
    return abs(math.log(a / b))


#: a measured interval wider than this (``hi / lo - 1``) marks a noisy measurement.
ROBUST_MAX_WIDTH = 0.5
#: a measurement with more than this fraction of descheduled samples ran on a busy machine.
ROBUST_MAX_DESCHEDULED = 0.25
#: on a noisy measurement (wide interval or busy machine) the claim must exceed every
#: half-sample ratio by this factor more than on a quiet one.
NOISY_GAP = 1.5


@dataclass(frozen=True)
class Robustness:
    """Whether a claim found above the measured interval is above it *robustly*: each half
    of the samples (in the order they were taken) alone measures a ratio below the claim by
    more than the margin, and by :data:`NOISY_GAP` times more when the measurement is noisy
    (its interval wider than :data:`ROBUST_MAX_WIDTH`, or more than
    :data:`ROBUST_MAX_DESCHEDULED` of the samples descheduled). ``reasons`` says why not."""

    robust: bool
    reasons: tuple[str, ...]
    halves: tuple[float, float] | None
    noisy: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"robust": self.robust, "reasons": list(self.reasons), "noise": list(self.noisy),
                "half_ratios": list(self.halves) if self.halves else None,
                "max_width": ROBUST_MAX_WIDTH, "max_descheduled": ROBUST_MAX_DESCHEDULED, "noisy_gap": NOISY_GAP}


def half_ratios(baseline: list[float], candidate: list[float]) -> tuple[float, float] | None:
    """median(baseline) / median(candidate) over the first and the second half of the
    samples (each side split at its middle), or None with fewer than 4 samples a side."""
    if len(baseline) < 4 or len(candidate) < 4:
        return None
    hb, hc = len(baseline) // 2, len(candidate) // 2
    out = []
    for b, c in ((baseline[:hb], candidate[:hc]), (baseline[hb:], candidate[hc:])):
        mc = float(np.median(c))
        out.append(float(np.median(b)) / mc if mc > 0 else math.inf)
    return out[0], out[1]


def noise(primary: RatioCI, descheduled: float = 0.0) -> tuple[str, ...]:
    """Why a ratio measurement is too noisy to decide a claim on this machine (empty when it
    is not): its 95% interval wider than :data:`ROBUST_MAX_WIDTH` (``hi / lo - 1``), or more
    than :data:`ROBUST_MAX_DESCHEDULED` of a side's samples descheduled (``descheduled``: the
    largest such fraction of a side; wall time well above CPU time: a busy machine)."""
    out = []
    width = primary.hi / primary.lo - 1.0 if primary.lo > 0 else math.inf
    if width > ROBUST_MAX_WIDTH:
        out.append(f"the 95% interval is {width:.0%} wide (more than {ROBUST_MAX_WIDTH:.0%})")
    if descheduled > ROBUST_MAX_DESCHEDULED:
        out.append(f"{descheduled:.0%} of the samples were descheduled (a busy machine)")
    return tuple(out)


def robustness(claimed: float, primary: RatioCI, baseline: list[float], candidate: list[float],
               descheduled: float = 0.0, margin: float = CLAIM_MARGIN) -> Robustness:
    """:class:`Robustness` of a claim above ``primary`` (``baseline``/``candidate``: the
    primary condition's samples in ms, in the order taken; ``descheduled``: the largest
    fraction of descheduled samples of a side)."""
    noisy = noise(primary, descheduled)
    need = (1 + margin) * (NOISY_GAP if noisy else 1.0)
    halves = half_ratios(baseline, candidate)
    reasons = []
    if halves is None:
        reasons.append("too few samples to split in halves")
    elif max(halves) * need >= claimed:
        reasons.append(f"a half of the samples measures {max(halves):.3g}x: the claim is not {need:.2g}x above it"
                       + (f" (the gap a noisy measurement needs: {'; '.join(noisy)})" if noisy else ""))
    return Robustness(not reasons, tuple(reasons), halves, noisy)
