"""The timing evidence of a check run as something to display: :class:`TimingView` (the
sides' samples and statistics, the measured speedup with its interval against the claim),
and a text histogram (:func:`histogram`, :func:`histogram_blocks`).

Which checks carry this evidence is the engine's to say: their findings hold
``evidence["timing"]`` and the run's ``start`` event names them
(:attr:`workstation.review.session.ReviewSession.timing_evidence_checks`). Pure Python.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workstation.review.evidence import case_text

__all__ = ["TimingSide", "TimingView", "histogram", "histogram_blocks", "timing_views"]


@dataclass(frozen=True)
class TimingSide:
    """One side of a timing comparison (candidate, baseline, torch_compile), times in ms."""

    name: str
    samples_ms: tuple[float, ...]
    cold_ms: float | None
    warm_ms: float | None
    median_ms: float | None
    iqr_ms: tuple[float, float] | None
    n: int


@dataclass(frozen=True)
class TimingView:
    """A finding's timing evidence (``evidence["timing"]``) ready to display.

    ``ratio`` is the measured speedup of candidate over baseline (baseline time /
    candidate time), ``ratio_ci`` its confidence interval at ``ci_level``; ``claimed`` the
    task's claimed speedup (0: none). ``representative`` False means the timing says
    nothing about production (e.g. measured under the Triton interpreter): ``reason``.
    """

    device: str
    protocol: str
    representative: bool
    reason: str
    sides: tuple[TimingSide, ...]
    ratio: float | None
    ratio_ci: tuple[float, float] | None
    ci_level: float | None
    claimed: float
    case: Mapping[str, Any] | None
    severity: str = ""
    summary: str = ""

    @classmethod
    def from_finding(cls, f: Mapping[str, Any]) -> TimingView | None:
        """The view of a finding whose evidence holds ``timing``; None otherwise."""
        t = (f.get("evidence") or {}).get("timing")
        if not isinstance(t, Mapping):
            return None
        sides = []
        for name, s in (t.get("sides") or {}).items():
            if not isinstance(s, Mapping):
                continue
            iqr = s.get("iqr_ms")
            sides.append(TimingSide(
                name=str(name),
                samples_ms=tuple(float(x) for x in s.get("samples_ms") or [] if _is_num(x)),
                cold_ms=_opt_float(s.get("cold_ms")),
                warm_ms=_opt_float(s.get("warm_ms")),
                median_ms=_opt_float(s.get("median_ms")),
                iqr_ms=(float(iqr[0]), float(iqr[1])) if isinstance(iqr, list | tuple) and len(iqr) == 2
                and all(_is_num(x) for x in iqr) else None,
                n=int(s.get("n") or len(s.get("samples_ms") or [])),
            ))
        ci = t.get("ratio_ci")
        return cls(
            device=str(t.get("device") or ""),
            protocol=str(t.get("protocol") or ""),
            representative=bool(t.get("representative", True)),
            reason=str(t.get("reason") or ""),
            sides=tuple(sides),
            ratio=_opt_float(t.get("ratio")),
            ratio_ci=(float(ci[0]), float(ci[1])) if isinstance(ci, list | tuple) and len(ci) == 2
            and all(_is_num(x) for x in ci) else None,
            ci_level=_opt_float(t.get("ci_level")),
            claimed=_opt_float(t.get("claimed")) or 0.0,
            case=t.get("case") if isinstance(t.get("case"), Mapping) else None,
            severity=str(f.get("severity") or ""),
            summary=str(f.get("summary") or ""),
        )

    def range_ms(self) -> tuple[float, float] | None:
        """The common axis of every side's samples (min, max), for comparable histograms."""
        xs = [x for s in self.sides for x in s.samples_ms]
        return (min(xs), max(xs)) if xs else None

    def case_line(self) -> str:
        """The case the timing was measured on, as one line (``""`` when not known)."""
        return case_text(self.case) if self.case else ""

    def speedup_line(self) -> str:
        """``speedup 1.21x (95% CI 1.15-1.28) vs claimed 1.30x: the claim is above the
        interval``: where the claim falls relative to the measured interval."""
        if self.ratio is None:
            return "speedup: not measured"
        s = f"speedup {self.ratio:.3g}×"
        if self.ratio_ci is not None:
            lvl = f"{100 * self.ci_level:.0f}% " if self.ci_level else ""
            s += f" ({lvl}CI {self.ratio_ci[0]:.3g}–{self.ratio_ci[1]:.3g})"
        if self.claimed:
            s += f" vs claimed {self.claimed:.3g}×"
            if self.ratio_ci is not None:
                lo, hi = self.ratio_ci
                if self.claimed > hi:
                    s += ": claim above the interval"
                elif self.claimed < lo:
                    s += ": measured faster than claimed"
                else:
                    s += ": claim within the interval"
        else:
            s += " (no claim)"
        return s


def _is_num(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _opt_float(x: Any) -> float | None:
    return float(x) if _is_num(x) else None


def timing_views(findings: Iterable[Mapping[str, Any]]) -> list[TimingView]:
    """Every finding with timing evidence as a :class:`TimingView`, in order."""
    return [v for f in findings if (v := TimingView.from_finding(f)) is not None]


def histogram(samples: Sequence[float], lo: float, hi: float, bins: int, *, log: bool = False) -> list[int]:
    """Counts of ``samples`` in ``bins`` equal-width bins over ``[lo, hi]`` (the last bin
    closed); with ``log`` the bins are equal in log10 (for sides that differ by orders of
    magnitude; needs ``lo > 0``). With ``hi == lo`` every sample falls in the middle bin."""
    counts = [0] * bins
    if bins <= 0:
        return counts
    if log and lo > 0:
        lo, hi = math.log10(lo), math.log10(hi)
        samples = [math.log10(x) for x in samples if x > 0]
    width = (hi - lo) / bins
    for x in samples:
        if width <= 0:
            i = bins // 2
        else:
            i = int((x - lo) / width)
            i = min(max(i, 0), bins - 1)
        counts[i] += 1
    return counts


_BLOCKS = " ▁▂▃▄▅▆▇█"


def histogram_blocks(counts: Sequence[int], peak: int | None = None) -> str:
    """One text row of Unicode block characters, height proportional to each count
    (relative to ``peak``, default the largest count); an empty bin is a space, a
    non-empty bin at least ``▁``."""
    top = peak if peak is not None else max(counts, default=0)
    if top <= 0:
        return " " * len(counts)
    out = []
    for c in counts:
        if c <= 0:
            out.append(" ")
        else:
            out.append(_BLOCKS[max(1, min(8, round(8 * c / top)))])
    return "".join(out)
