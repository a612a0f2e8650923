"""Legal values of a task's integer case parameters (``[params]``) and the edge values worth
trying: the parameter-space knowledge of the shape-varying checks.

Task format v1: ``[params]`` gives ``min``, ``max``, ``multiple_of`` and ``choices`` per
integer case parameter; an integer parameter it does not list may take any positive int;
non-integer case values are held fixed.

Every function here is total over what the task format admits: ``min = 0`` and a declared
0 (a padding count), 1, ranges up to ``max = 2**62``, ``choices`` of any one scalar type,
``multiple_of``, and a parameter that is an int in one case and a string in another (held
fixed). None raises; every value they return is legal under its spec
(tests/test_legal_props.py proves it with Hypothesis over generated ``[params]`` tables).
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


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def int_params(cases: list[dict[str, Any]]) -> list[str]:
    """The integer shape parameters of the declared cases, in first-seen order: those that
    are an int in every case (a bool, a string or a float is a fixed value, never varied;
    so is a parameter that is an int in one case and not in another)."""
    out: list[str] = []
    for c in cases:
        for k, v in c.items():
            if k != "dtype" and _is_int(v) and k not in out and all(_is_int(d.get(k)) for d in cases):
                out.append(k)
    return out


def smallest(spec: ParamSpec) -> int | None:
    """The smallest legal value of ``spec`` (its smallest int choice; else ``min``, else 1,
    snapped up), or None when it admits no integer."""
    if spec.choices is not None:
        return min((c for c in spec.choices if _is_int(c)), default=None)
    return snap(spec.min if spec.min is not None else 1, spec, "up")


def halve(value: int, spec: ParamSpec) -> int | None:
    """The largest legal value at or below ``value // 2``, or None when there is none
    (0 is a legal answer where ``min = 0``: test the result against None, not its truth)."""
    return snap(value // 2, spec, "down")


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


def _log_dist(v: int, declared: list[int]) -> float:
    """How far ``v`` is from the nearest declared value on a log2 scale (0 and 1 count as
    1: a declared 0, a padding count, is as near as 1)."""
    return min((abs(math.log2(max(v, 1)) - math.log2(max(d, 1))) for d in declared), default=0.0)


@dataclass(frozen=True)
class Value:
    """A derived value of one parameter and why it was chosen."""

    value: int
    why: str


def _pow2_near(declared: list[int]) -> list[int]:
    """Powers of two around the declared values and the usual block sizes, nearest first."""
    top = max(declared, default=1)
    ps = {1 << k for k in range(4, max(5, math.ceil(math.log2(max(top, 2))) + 2)) if (1 << k) <= 2 * top}
    for d in declared:
        if d > 1:
            ps.add(1 << math.floor(math.log2(d)))
            ps.add(1 << math.ceil(math.log2(d)))
    ps = {p for p in ps if p >= 16}

    def dist(p: int) -> tuple[float, int]:
        return (_log_dist(p, declared), -p)

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
        return [Value(c, "a value [params] allows") for c in sorted(ints, key=lambda c: min((abs(c - d) for d in declared), default=0))]
    ps = _pow2_near(declared)
    near: list[Value] = []
    for p in ps:
        for v, why, way in ((p + 1, f"just above {p}", "up"), (p - 1, f"just below {p}", "down")):
            s = snap(v, spec, way)
            if s is not None and s != p:
                near.append(Value(s, why if s == v else f"{why} (nearest legal value)"))
    least = smallest(spec)
    one = snap(1, spec, "up")
    small = [Value(v, "1" if v == 1 else "the smallest legal value")
             for v in dict.fromkeys(x for x in (least, one) if x is not None)]
    primes = []
    for q in SMALL_PRIMES:
        s = snap(q, spec, "nearest")
        if s is not None:
            primes.append(Value(s, "a small prime" if s == q else f"near the small prime {q}"))
    multiples = []
    for b in sorted(BLOCK_SIZES, key=lambda b: _log_dist(3 * b, declared)):
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
    iters = {"near": iter(near), "one": iter(small), "prime": iter(primes),
             "mult": iter(multiples), "pm": iter(plus_minus)}
    cycle = ("near", "one", "prime", "near", "mult", "pm")
    out: list[Value] = []
    seen = set(declared)
    live = set(iters)
    while live:
        for name in cycle:
            if name not in live:
                continue
            for val in iters[name]:
                if val.value not in seen and spec.allows(val.value):
                    seen.add(val.value)
                    out.append(val)
                    break
            else:
                live.discard(name)
    return out


def shrink_values(v: int, spec: ParamSpec) -> list[int]:
    """Smaller legal values to try for a failing ``v``, simplest first (the smallest legal
    value, 1, 2, 3, half, one step down), as property-based testing tools shrink integers."""
    step = spec.multiple_of or 1
    lo = spec.min if spec.min is not None else 1
    raw = [(lo, "up"), (1, "up"), (2, "nearest"), (3, "nearest"), (v // 2, "down"), (v - step, "down")]
    out: list[int] = []
    for x, way in raw:
        s = snap(max(x, lo), spec, way)
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
