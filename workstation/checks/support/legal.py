"""Legal values of a task's integer case parameters (``[params]``) and the edge values worth
trying: the parameter-space knowledge of the shape-varying checks.

Task format v1: ``[params]`` gives ``min``, ``max``, ``multiple_of`` and ``choices`` per
integer case parameter; an integer parameter it does not list may take any positive int;
non-integer case values are held fixed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from workstation.task.model import ParamSpec

#: small primes tried for every integer shape parameter (odd sizes no block divides).
SMALL_PRIMES = (3, 7, 13, 37, 97)
#: usual Triton/CUDA block sizes; sizes around them and their odd multiples are tried.
BLOCK_SIZES = (16, 32, 64, 128, 256)
#: the spec of an integer parameter ``[params]`` does not list: any positive int.
UNLISTED = ParamSpec(min=1)


def int_params(cases: list[dict[str, Any]]) -> list[str]:
    """The integer shape parameters of the declared cases, in first-seen order (a bool, a
    string or a float is a fixed value, never varied)."""
    out: list[str] = []
    for c in cases:
        for k, v in c.items():
            if k != "dtype" and isinstance(v, int) and not isinstance(v, bool) and k not in out:
                out.append(k)
    return out


def snap(value: int, spec: ParamSpec, direction: str = "nearest") -> int | None:
    """The legal value of ``spec`` nearest ``value`` in ``direction`` (``down``, ``up``,
    ``nearest``), or ``None`` when there is none that way. Without a ``min`` the smallest
    legal value is 1 (task format v1: an unlisted integer parameter is any positive int)."""
    if spec.choices is not None:
        ints = sorted(c for c in spec.choices if isinstance(c, int) and not isinstance(c, bool))
        below = [c for c in ints if c <= value]
        above = [c for c in ints if c >= value]
        if direction == "down":
            return below[-1] if below else None
        if direction == "up":
            return above[0] if above else None
        opts = ([below[-1]] if below else []) + ([above[0]] if above else [])
        return min(opts, key=lambda c: (abs(c - value), c)) if opts else None
    lo = spec.min if spec.min is not None else 1
    hi = spec.max
    m = spec.multiple_of or 1
    first = -(-lo // m) * m  # smallest multiple of m >= lo
    down = value // m * m
    up = -(-value // m) * m
    if direction == "down":
        v = down if down >= first else None
    elif direction == "up":
        v = max(up, first)
    else:
        v = down if (value - down) <= (up - value) and down >= first else max(up, first)
    if v is None or (hi is not None and v > hi):
        if direction == "nearest" and hi is not None:
            top = hi // m * m
            return top if top >= first else None
        return None
    return v


@dataclass(frozen=True)
class Value:
    """A derived value of one parameter and why it was chosen."""

    value: int
    why: str


def _pow2_near(declared: list[int]) -> list[int]:
    """Powers of two around the declared values and the usual block sizes, nearest first."""
    top = max(declared)
    ps = {1 << k for k in range(4, max(5, math.ceil(math.log2(max(top, 2))) + 2)) if (1 << k) <= 2 * top}
    for d in declared:
        if d > 1:
            ps.add(1 << math.floor(math.log2(d)))
            ps.add(1 << math.ceil(math.log2(d)))
    ps = {p for p in ps if p >= 16}

    def dist(p: int) -> tuple[float, int]:
        return (min(abs(math.log2(p) - math.log2(d)) for d in declared), -p)

    return sorted(ps, key=dist)


def value_plan(declared: list[int], spec: ParamSpec) -> list[Value]:
    """Legal edge values of one parameter, in the order they are worth trying.

    Categories, interleaved: just above / just below powers of two near the declared
    values (``P + 1``, ``P - 1``, snapped to legal values; these are also the sizes just
    past a block multiple of any power-of-two block), 1 (the smallest legal value), small
    primes, odd multiples of block sizes and the powers of two themselves (sizes a tiled
    kernel handles without a ragged tile: they tell a divisibility pattern apart), and
    declared values +-1. Declared values are left out (``correctness`` runs them).
    """
    if spec.choices is not None:
        ints = [c for c in spec.choices if isinstance(c, int) and not isinstance(c, bool) and c not in declared]
        return [Value(c, "a value [params] allows") for c in sorted(ints, key=lambda c: min(abs(c - d) for d in declared))]
    ps = _pow2_near(declared)
    near: list[Value] = []
    for p in ps:
        for v, why, way in ((p + 1, f"just above {p}", "up"), (p - 1, f"just below {p}", "down")):
            s = snap(v, spec, way)
            if s is not None and s != p:
                near.append(Value(s, why if s == v else f"{why} (nearest legal value)"))
    one = snap(1, spec, "up")
    smallest = [Value(one, "1" if one == 1 else "the smallest legal value")] if one is not None else []
    primes = []
    for q in SMALL_PRIMES:
        s = snap(q, spec, "nearest")
        if s is not None:
            primes.append(Value(s, "a small prime" if s == q else f"near the small prime {q}"))
    multiples = []
    for b in sorted(BLOCK_SIZES, key=lambda b: min(abs(math.log2(3 * b) - math.log2(d)) for d in declared)):
        for v, why in ((3 * b, f"3 x {b}, a block multiple"), (b, f"{b}, a block size")):
            s = snap(v, spec, "nearest")
            if s == v:
                multiples.append(Value(s, why))
    plus_minus = []
    for d in declared:
        if d & (d - 1):  # not a power of two (those have their neighbours above)
            for v, way in ((d + 1, "up"), (d - 1, "down")):
                s = snap(v, spec, way)
                if s is not None:
                    why = f"declared {d} {'+' if v > d else '-'} 1"
                    plus_minus.append(Value(s, why if s == v else f"{why} (nearest legal value)"))
    iters = {"near": iter(near), "one": iter(smallest), "prime": iter(primes),
             "mult": iter(multiples), "pm": iter(plus_minus)}
    cycle = ("near", "one", "prime", "near", "mult", "pm")
    out: list[Value] = []
    seen = set(declared)
    live = set(iters)
    while live:
        for name in cycle:
            if name not in live:
                continue
            for v in iters[name]:
                if v.value not in seen and spec.allows(v.value):
                    seen.add(v.value)
                    out.append(v)
                    break
            else:
                live.discard(name)
    return out


def shrink_values(v: int, spec: ParamSpec) -> list[int]:
    """Smaller legal values to try for a failing ``v``, simplest first (the smallest legal
    value, 2, 3, half, one step down), as property-based testing tools shrink integers."""
    step = spec.multiple_of or 1
    raw = [(1, "up"), (2, "nearest"), (3, "nearest"), (v // 2, "down"), (v - step, "down")]
    out: list[int] = []
    for x, way in raw:
        s = snap(max(x, 1), spec, way)
        if s is not None and s < v and s not in out and spec.allows(s):
            out.append(s)
    return out


def reduction_max(task: Any) -> tuple[str, int] | None:
    """The largest reduction length the task's contract admits: (the ``[contract]
    reduction`` parameters joined by ``" * "``, the product of their ``[params]`` maxima),
    or None when the contract names none or one has no maximum. Used to judge a
    half-precision accumulator against the reduction length (Higham, ch. 3: the error
    bound of a recursive sum grows with n times the unit roundoff)."""
    params = task.contract.reduction
    if not params:
        return None
    n = 1
    for p in params:
        spec = task.params.get(p)
        if spec is None or spec.max is None:
            return None
        n *= spec.max
    return " * ".join(params), n
