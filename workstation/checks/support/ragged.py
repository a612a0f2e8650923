"""Ragged variants of declared cases: legal sizes that no power-of-two block divides.

Used by the backend readings (``pallas-kernel`` reads the grid cover on one) and by
``case-coverage`` (the "non-multiple" of a ``[params]`` key). For an integer parameter
with ``multiple_of = m`` a ragged value is an odd multiple of m above m (a multiple of m,
so legal, but of no larger power of two: every block of 2m or more leaves a ragged last
tile); without ``multiple_of`` it is an odd value above 1.
"""

from __future__ import annotations

from typing import Any

from workstation.checks.support.legal import UNLISTED, int_params
from workstation.task.model import ParamSpec


def is_ragged(v: int, spec: ParamSpec) -> bool:
    """True when ``v`` is a ragged value of ``spec`` (module doc)."""
    m = spec.multiple_of or 1
    return v > m and v % m == 0 and (v // m) % 2 == 1


def ragged_value(near: int, spec: ParamSpec) -> int | None:
    """The smallest ragged legal value of ``spec`` at or above ``near`` (else the largest
    below it), or None when ``spec`` admits none."""
    m = spec.multiple_of or 1
    if spec.choices is not None:
        opts = [c for c in spec.choices if isinstance(c, int) and not isinstance(c, bool) and is_ragged(c, spec)]
        above = sorted(c for c in opts if c >= near)
        below = sorted(c for c in opts if c < near)
        return above[0] if above else (below[-1] if below else None)
    lo = max(spec.min or 1, near, m + 1)
    k = -(-lo // m)
    if k % 2 == 0:
        k += 1
    k = max(k, 3)
    for kk in (k, k + 2, k + 4):
        v = kk * m
        if spec.allows(v):
            return v
    hi = spec.max
    if hi is None:
        return None
    k = hi // m
    if k % 2 == 0:
        k -= 1
    # the largest odd multiple at or below max; every smaller one is further below min
    # (a descending search here ran ~max/2 steps when max was huge and min above it)
    return k * m if k >= 3 and spec.allows(k * m) else None


def ragged_case(case: dict[str, Any], params: dict[str, ParamSpec]) -> dict[str, Any] | None:
    """``case`` with every integer parameter moved to its nearest ragged legal value at or
    above its declared one (parameters already ragged stay), or None when no parameter
    moves."""
    out = dict(case)
    moved = False
    for p in int_params([case]):
        spec = params.get(p, UNLISTED)
        v = case[p]
        if is_ragged(v, spec):
            continue
        r = ragged_value(v + 1, spec)
        if r is not None and r != v:
            out[p] = r
            moved = True
    return out if moved else None


def shape_variants(case: dict[str, Any], params: dict[str, ParamSpec]) -> list[dict[str, Any]]:
    """Variants of ``case`` that tell the shape parameters apart: per integer parameter, the
    case with only that one moved to a ragged legal value (one axis ragged at a time); and one
    case whose parameters all differ (the k-th of the sorted parameters moved to the legal
    value nearest ``(k + 1)`` times its declared one), so that an index map or grid that uses
    one size where another belongs (swapped divisors) no longer coincides as on a square
    case. Illegal or unchanged variants are left out."""
    from workstation.checks.support.legal import snap

    out: list[dict[str, Any]] = []
    names = int_params([case])
    for p in names:
        spec = params.get(p, UNLISTED)
        r = ragged_value(case[p] + 1, spec) if not is_ragged(case[p], spec) else None
        if r is not None and r != case[p]:
            v = {**case, p: r}
            if v not in out:
                out.append(v)
    if len(names) > 1:
        v = dict(case)
        for k, p in enumerate(sorted(names)):
            spec = params.get(p, UNLISTED)
            got = snap(max(1, case[p]) * (k + 1), spec)
            if got is not None:
                v[p] = got
        vals = [v[p] for p in names]
        if len(set(vals)) == len(vals) and v != case and v not in out:
            out.append(v)
    return out
