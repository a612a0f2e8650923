"""``edge-shapes``: mismatches at legal shapes the author did not try."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from workstation.checks.support.trials import (
    Trial,
    TrialResult,
    case_key,
    evidence_of,
    failure_text,
    run_trials,
    same_failure,
)
from workstation.engine.check import Check, Finding, Skip, register
from workstation.engine.context import CheckContext, case_label
from workstation.task.model import ParamSpec

#: small primes tried for every integer shape parameter (odd sizes no block divides).
SMALL_PRIMES = (3, 7, 13, 37, 97)
#: usual Triton/CUDA block sizes; sizes around them and their odd multiples are tried.
BLOCK_SIZES = (16, 32, 64, 128, 256)

# CPU budget (Triton interpreter): measured candidate seconds for the derived cases (run in
# batches of BATCH, in priority order), the predicted seconds of one case (cost model),
# measured seconds for shrinking, the wall-clock limit of one call (a call past it is
# dropped, not charged), and the derived-case count. GPU: a count and an element cap.
CPU_DERIVED_BUDGET_S = 2.0
CPU_CASE_CAP_S = 0.6
CPU_SHRINK_BUDGET_S = 0.8
CPU_MAX_CASES = 24
CPU_CALL_LIMIT_S = 2.0
BATCH = 8
GPU_MAX_CASES = 48
GPU_MAX_ELEMENTS = 1 << 27
MAX_SHRINK_ROUNDS = 6
UNLISTED = ParamSpec(min=1)


# -- legal values ------------------------------------------------------------------------------


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


# -- cost model ----------------------------------------------------------------------------------


def elements(case: dict[str, Any], params: list[str]) -> int:
    """The product of a case's integer shape parameters (the size of the problem)."""
    n = 1
    for p in params:
        n *= max(1, int(case[p]))
    return n


def cost_units(case: dict[str, Any], params: list[str]) -> int:
    """The cost proxy of a case: the product of its integer parameters, each rounded up to
    a multiple of 16 (tiled kernels pay for whole tiles: a 1 x 8 problem is not 8 times
    cheaper than a 16 x 16 one)."""
    n = 1
    for p in params:
        n *= -(-max(1, int(case[p])) // 16) * 16
    return n


@dataclass
class CostModel:
    """Predicted candidate seconds of a case: ``a + b * elements``, fitted on the declared
    cases' measured call times (conservatively: ``b`` is the largest per-element cost seen,
    times 1.5 for block padding, rounded up to a power of two so that the plan is stable
    under timing noise). On a GPU the model only caps elements."""

    a: float
    b: float
    on_gpu: bool
    cap_s: float = 0.0

    @classmethod
    def fit(cls, points: list[tuple[int, float]], on_gpu: bool) -> CostModel:
        pts = [(n, t) for n, t in points if n > 0 and t > 0]
        if not pts:
            return cls(0.02, 2e-6, on_gpu, CPU_CASE_CAP_S)
        tmin = min(t for _, t in pts)
        a = 0.5 * tmin  # per-call overhead (launch, autotuning) is size-independent
        b = max(max((t - a) / n for n, t in pts), 1e-9) * 1.5
        # rounded up to a power of two so that timing noise rarely changes the plan; a
        # kernel whose smallest declared call is already slow (autotuning) may take as
        # long per derived case
        return cls(a, 2.0 ** math.ceil(math.log2(b)), on_gpu, max(CPU_CASE_CAP_S, 1.2 * tmin))

    def seconds(self, n: int) -> float:
        """Predicted seconds for ``n`` cost units (:func:`cost_units`)."""
        return self.a + self.b * n

    @property
    def call_limit_s(self) -> float:
        """Wall-clock limit of one derived call on the CPU: :data:`CPU_CALL_LIMIT_S`, or
        2.5x the fastest declared call where that is slower (``a`` is half of it)."""
        return max(CPU_CALL_LIMIT_S, 5.0 * self.a)

    def fits(self, case: dict[str, Any], params: list[str]) -> bool:
        """Whether one case is within the per-case cap (CPU: predicted seconds; GPU: elements)."""
        if self.on_gpu:
            return elements(case, params) <= GPU_MAX_ELEMENTS
        return self.seconds(cost_units(case, params)) <= (self.cap_s or CPU_CASE_CAP_S)


# -- the check -----------------------------------------------------------------------------------


@register
class EdgeShapes(Check):
    """Mismatch at legal shapes beyond the task's cases.

    Kernels written against a few "nice" sizes (multiples of the block size) often drop or
    double-count the ragged last tile: a loop bound ``K // BLOCK_K``, a mask on one
    dimension only, an unmasked tail, a grid rounded down. The Triton tutorials mask every
    load for that reason; KernelBench-style harnesses that only test round sizes let such
    kernels through.

    How: from ``[params]`` (min / max / multiple_of / choices) and the declared cases,
    kws derives legal cases by varying one integer shape parameter at a time (the
    contract's ``reduction`` parameters first) from a declared case (the cheapest one per
    dtype): sizes just above and below the powers of
    two near the declared values (``P +- 1``: past any power-of-two block multiple), 1,
    small primes, odd block multiples and powers of two (they tell a divisibility pattern
    apart), declared values +-1 and a larger size (2-4x the largest declared value),
    plus a few all-odd combinations. Non-integer case values stay fixed. A case where
    ``make_inputs`` or the reference raises is dropped (task format v1). Each derived case
    runs once (the first seed) against the reference at the declared tolerance. A failing
    case is shrunk like a property-based test case: smaller legal values are tried per
    parameter while the failure keeps its class (mismatch, NaN, the exception type), and
    the smallest one is reported with its comparison evidence, where the mismatches lie
    (e.g. the ragged last tile), and, per parameter, which values failed and passed.

    Limits: on the CPU (Triton interpreter) each case must fit a cost model fitted on the
    declared cases' measured call times (0.6 s predicted, or 1.2x the fastest declared
    call where that is slower, e.g. an autotuned kernel), the cases run in priority order
    until 2 s of measured candidate time is spent (at most 24), and one call that runs
    past 2 s is dropped as over budget, not charged; so the larger size may be small. On
    a GPU up to 48 cases, reaching the ``[params]`` maxima within 2**27 elements. Only the
    first seed; dtypes are not varied (``precision-regime`` looks at those). A derived
    case that fails the way a declared case of its dtype already fails (same class) is an
    ``info`` (``correctness`` reports the declared case).
    """

    id = "edge-shapes"
    order = 3
    title = "Legal shapes beyond the declared cases"

    def run(self, ctx: CheckContext) -> list[Finding]:
        seed = ctx.seeds[0]
        if ctx.case_filter:  # `--case`: the repro of one derived case
            res = run_trials(ctx, [Trial(dict(ctx.case_filter), seed, "the case given")])
            return self._report_single(ctx, res[0])
        task = ctx.task
        params = int_params(ctx.cases)
        # reduction lengths first: a dropped or double-counted tail tile in the reduction
        # loop is the most common edge-shape defect
        params.sort(key=lambda p: p not in task.contract.reduction)
        if not params:
            return [self.finding(ctx, "info", "no integer shape parameter in the declared cases: nothing to vary")]
        # the declared cases' own runs (shared with `correctness`) calibrate the cost model
        # and anchor the per-parameter pass/fail pattern
        declared = run_trials(ctx, [Trial(dict(c), seed, "declared") for c in ctx.cases])
        cost = CostModel.fit([(cost_units(r.trial.case, params),
                               r.cand.step.seconds if r.cand is not None and r.cand.step is not None else 0.0)
                              for r in declared], ctx.on_gpu)
        trials = self._derive(ctx, params, cost)
        results, not_run = self._run_budgeted(ctx, trials, CPU_DERIVED_BUDGET_S, cost.call_limit_s)
        if not results:
            raise Skip("no legal derived case fits the CPU budget: the declared cases take "
                       f"{cost.a * 2:.2g} s or more per call under the Triton interpreter (a GPU runs them)")
        if all(r.status == "dropped" for r in results):
            raise Skip(f"every derived case was dropped ({len(results)}); first: "
                       f"{case_label(results[0].trial.case)}: {results[0].reason}")
        known: dict[str, TrialResult] = {case_key(r.trial.case): r for r in results}
        findings: list[Finding] = []

        def inherited(r: TrialResult) -> bool:
            return any(same_failure(r, d) for d in _same_kind(r.trial.case, declared, params))

        if any(r.failed and not inherited(r) for r in results):
            results += self._refine(ctx, params, [r for r in results if not inherited(r)], declared, known, cost)
        failed = [r for r in results if r.failed and not inherited(r)]
        inh = [r for r in results if r.failed and inherited(r)]
        if inh:
            findings.append(self.finding(
                ctx, "info",
                f"{len(inh)} derived case(s) fail the way a declared case of their dtype already fails "
                f"({', '.join(sorted({r.klass for r in inh}))}; correctness reports it): "
                + ", ".join(case_label(r.trial.case) for r in inh[:6]) + (" ..." if len(inh) > 6 else ""),
                {"cases": [{"case": r.trial.case, "class": r.klass} for r in inh]}))
        by_class: dict[str, list[TrialResult]] = {}
        for r in failed:
            by_class.setdefault(r.klass, []).append(r)
        shrink_left = CPU_SHRINK_BUDGET_S
        for klass, rs in by_class.items():
            start = min(rs, key=lambda r: (elements(r.trial.case, params), sum(r.trial.case[p] for p in params)))
            best, path, spent = self._shrink(ctx, start, params, cost, known, shrink_left)
            shrink_left -= spent
            findings.append(self._fail(ctx, klass, best, start, rs, results + declared, params, path))
        n_drop = sum(r.status == "dropped" for r in results)
        n_pass = sum(r.status == "pass" for r in results)
        table = [{"case": r.trial.case, "why": r.trial.label, "status": r.status,
                  "candidate_s": round(r.cand.step.seconds, 4) if r.cand is not None and r.cand.step is not None else None,
                  **({"class": r.klass} if r.klass else {}),
                  **({"dropped_because": r.reason} if r.status == "dropped" else {})} for r in results]
        values = {p: sorted({r.trial.case[p] for r in results}) for p in params}
        summary = (f"checked {len(results)} derived shapes ({'; '.join(f'{p} in {_short(v)}' for p, v in values.items())}): "
                   f"{n_pass} pass, {len(failed) + len(inh)} fail, {n_drop} dropped")
        if n_drop:
            why = next(r.reason for r in results if r.status == "dropped")
            summary += f" (e.g. {why[:120]})"
        if not ctx.on_gpu:
            summary += " (CPU: sizes bounded by the interpreter's cost"
            summary += f"; {len(not_run)} more not run within the time budget)" if not_run else ")"
        findings.append(self.finding(ctx, "info", summary, {
            "seed": seed, "derived": table, "params": {p: task.params.get(p, UNLISTED).describe() for p in params},
            "not_run": [{"case": t.case, "why": t.label} for t in not_run],
            "cost_model": {"a_s": cost.a, "b_s_per_unit": cost.b, "unit": "product of parameters rounded up to 16",
                           "on_gpu": cost.on_gpu}}))
        return findings

    # -- derivation ----------------------------------------------------------------------------

    def _derive(self, ctx: CheckContext, params: list[str], cost: CostModel) -> list[Trial]:
        task, seed = ctx.task, ctx.seeds[0]
        declared = {case_key(c) for c in ctx.cases}
        bases: list[dict[str, Any]] = []
        for dt in dict.fromkeys(c.get("dtype") for c in ctx.cases):
            same = [c for c in ctx.cases if c.get("dtype") == dt]
            bases.append(min(same, key=lambda c: elements(c, params)))
        specs = {p: task.params.get(p, UNLISTED) for p in params}
        dvals = {p: sorted({c[p] for c in ctx.cases if p in c}) for p in params}
        plans = {p: value_plan(dvals[p], specs[p]) for p in params}
        queue: list[tuple[dict[str, Any], str]] = []
        larger = [b for b in (self._larger(p, bases, dvals[p], specs, params, cost) for p in params) if b is not None]
        depth = max((len(v) for v in plans.values()), default=0)
        combos = self._odd_combos(bases[0], params, plans)
        # order: the first edge value of every parameter, the larger sizes, all-odd
        # combinations, then the rest round-robin (cheap, high-value cases first, so that a
        # time budget cut on the CPU drops the least informative ones)
        for i in range(max(depth, 2)):
            for p in params:
                if i < len(plans[p]):
                    v = plans[p][i]
                    base = bases[(i + params.index(p)) % len(bases)]
                    queue.append(({**base, p: v.value}, f"{p}={v.value} ({v.why})"))
            if i == 0:
                queue.extend(larger)
            if i == 1:
                queue.extend(combos)
        if ctx.on_gpu:
            for p in params:
                top = snap(specs[p].max, specs[p], "down") if specs[p].max is not None else None
                if top is not None:
                    c = {**bases[0], p: top}
                    while elements(c, params) > GPU_MAX_ELEMENTS and c[p] > 1:
                        c[p] = snap(c[p] // 2, specs[p], "down") or 1
                    queue.insert(0, (c, f"{p}={c[p]} (the [params] maximum{'' if c[p] == top else ', halved to fit'})"))
        trials: list[Trial] = []
        seen = set(declared)
        limit = GPU_MAX_CASES if ctx.on_gpu else CPU_MAX_CASES
        for case, why in queue:
            k = case_key(case)
            if k in seen or not all(specs[p].allows(case[p]) for p in params) or not cost.fits(case, params):
                continue
            seen.add(k)
            trials.append(Trial(case, seed, why))
            if len(trials) >= limit:
                break
        return trials

    def _larger(self, p: str, bases: list[dict[str, Any]], declared: list[int], specs: dict[str, ParamSpec],
                params: list[str], cost: CostModel) -> tuple[dict[str, Any], str] | None:
        """A case with ``p`` at 2-4x its largest declared value (ragged: ``k * max + 1``),
        from the cheapest base; on the CPU the other parameters are halved until the
        predicted time fits."""
        top = max(declared)
        base = min(bases, key=lambda c: elements(c, params))
        for k in (3, 2, 4):
            v = snap(k * top + 1, specs[p], "up") or snap(k * top + 1, specs[p], "down")
            if v is None or v <= top:
                continue
            c = {**base, p: v}
            for _ in range(12):
                if cost.fits(c, params):
                    others = [f"{q}={c[q]}" for q in params if q != p and c[q] != base[q]]
                    why = f"{p}={v} (larger: {v / top:.1f}x the largest declared {p}={top}"
                    why += f"; {', '.join(others)} reduced to fit)" if others else ")"
                    return c, why
                shrinkable = [q for q in params if q != p and (snap(c[q] // 2, specs[q], "down") or c[q]) < c[q]]
                if not shrinkable:
                    break
                q = max(shrinkable, key=lambda q: c[q])
                c[q] = snap(c[q] // 2, specs[q], "down") or c[q]
        return None

    def _odd_combos(self, base: dict[str, Any], params: list[str],
                    plans: dict[str, list[Value]]) -> list[tuple[dict[str, Any], str]]:
        """All parameters at once at odd values: each one's first odd value just above a
        power of two, and distinct small primes (distinct so transposed dims show)."""
        if len(params) < 2:
            return []
        out = []
        above = {p: next((v.value for v in plans[p] if v.value % 2 and "above" in v.why), None) for p in params}
        if all(v is not None for v in above.values()):
            out.append(({**base, **above}, "all odd: " + ", ".join(f"{p}={v}" for p, v in above.items())))
        primes = {p: next((v.value for v in plans[p] if v.value % 2 and "prime" in v.why and v.value > 3 + 4 * i), None)
                  for i, p in enumerate(params)}
        if all(v is not None for v in primes.values()) and len(set(primes.values())) == len(params):
            out.append(({**base, **primes}, "all odd primes: " + ", ".join(f"{p}={v}" for p, v in primes.items())))
        return out

    def _run_budgeted(self, ctx: CheckContext, trials: list[Trial], budget_s: float,
                      limit: float) -> tuple[list[TrialResult], list[Trial]]:
        """Run trials in batches, in order, until the candidate's measured seconds reach
        ``budget_s`` (CPU only; on a GPU all run at once). Each call is limited to
        ``limit`` seconds (:attr:`CostModel.call_limit_s`): one that runs longer is
        dropped, not charged."""
        if ctx.on_gpu:
            return run_trials(ctx, trials), []
        out: list[TrialResult] = []
        spent, i, size = 0.0, 0, (1 if limit > CPU_CALL_LIMIT_S else 2)
        while i < len(trials):
            if spent >= budget_s:
                return out, trials[i:]
            res = run_trials(ctx, trials[i:i + size], budget_timeout=limit)
            for r in res:
                ok = r.cand is not None and r.cand.step is not None
                spent += r.cand.step.seconds if ok else (limit if r.status == "dropped" else 0.0)
            out += res
            i += size
            size = min(2 * size, BATCH)  # small first batches: the first calls tell the real cost
        return out, []

    def _refine(self, ctx: CheckContext, params: list[str], results: list[TrialResult],
                declared: list[TrialResult], known: dict[str, TrialResult], cost: CostModel) -> list[TrialResult]:
        """Sharpen a divisibility pattern: while "fails exactly when p % b != 0" holds, try
        ``b / 2`` and ``3 b / 2`` from a declared case; if both pass, the rule is ``b / 2``."""
        extra: list[TrialResult] = []
        specs = {p: ctx.task.params.get(p, UNLISTED) for p in params}
        base = declared[0].trial.case
        classes = [r.klass for r in results if r.failed]
        klass = max(set(classes), key=classes.count)
        for _ in range(4):
            rules = _patterns(results + declared + extra, params, ctx.cases, klass)["rules"]
            tries = []
            for p, b in rules.items():
                for v in (b // 2, 3 * b // 2):
                    c = {**base, p: v}
                    if b >= 4 and specs[p].allows(v) and case_key(c) not in known:
                        tries.append(Trial(c, base_seed(ctx), f"{p}={v} (is {b // 2} the block that divides?)"))
            if not tries:
                break
            res = run_trials(ctx, tries, budget_timeout=None if ctx.on_gpu else cost.call_limit_s)
            for r in res:
                known[case_key(r.trial.case)] = r
            extra += res
        return extra

    # -- shrinking --------------------------------------------------------------------------------

    def _shrink(self, ctx: CheckContext, start: TrialResult, params: list[str], cost: CostModel,
                known: dict[str, TrialResult], budget_s: float) -> tuple[TrialResult, list[dict[str, Any]], float]:
        """Greedy shrinking: per round, try smaller legal values of every parameter (one at a
        time) and move to the smallest case that fails with the same class; on the CPU until
        the candidate's measured seconds reach ``budget_s``."""
        best = start
        path: list[dict[str, Any]] = [dict(start.trial.case)]
        spent, limit = 0.0, cost.call_limit_s
        specs = {p: ctx.task.params.get(p, UNLISTED) for p in params}
        for _ in range(MAX_SHRINK_ROUNDS):
            tries = []
            for p in params:
                for w in shrink_values(best.trial.case[p], specs[p]):
                    c = {**best.trial.case, p: w}
                    if case_key(c) not in known:
                        tries.append(Trial(c, best.trial.seed, f"shrinking {p}: {best.trial.case[p]} -> {w}"))
            if not tries or (not ctx.on_gpu and spent >= budget_s):
                break
            res = run_trials(ctx, tries, budget_timeout=None if ctx.on_gpu else cost.call_limit_s)
            for r in res:
                known[case_key(r.trial.case)] = r
                ok = r.cand is not None and r.cand.step is not None
                spent += r.cand.step.seconds if ok else (limit if r.status == "dropped" else 0.0)
            same = [r for r in res if r.failed and r.klass == start.klass]
            if not same:
                break
            best = min(same, key=lambda r: (elements(r.trial.case, params), sum(r.trial.case[p] for p in params)))
            path.append(dict(best.trial.case))
        return best, path, spent

    # -- findings ---------------------------------------------------------------------------------

    def _fail(self, ctx: CheckContext, klass: str, best: TrialResult, start: TrialResult, rs: list[TrialResult],
              results: list[TrialResult], params: list[str], path: list[dict[str, Any]]) -> Finding:
        pattern = _patterns(results, params, ctx.cases, klass)
        shrunk = best is not start
        head = f"case {case_label(best.trial.case)}, seed {best.trial.seed}"
        if shrunk:
            head += f" (shrunk from {case_label(start.trial.case)})"
        summary = f"{head}: {failure_text(best)}"
        if pattern["text"]:
            summary += f"; {pattern['text']}"
        others = [r.trial.case for r in rs if r is not start]
        if others:
            summary += f" ({len(rs)} derived cases fail this way)"
        ev = {"case": best.trial.case, "seed": best.trial.seed, "class": klass,
              "smallest_failing": evidence_of(best),
              "first_found": evidence_of(start) if shrunk else None,
              "shrink_path": path, "failing_cases": [r.trial.case for r in rs],
              "per_parameter": pattern["per_param"]}
        return self.finding(ctx, "fail", summary, ev, case=best.trial.case, seed=best.trial.seed)

    def _report_single(self, ctx: CheckContext, r: TrialResult) -> list[Finding]:
        if r.failed:
            return [self.finding(ctx, "fail", f"case {case_label(r.trial.case)}, seed {r.trial.seed}: {failure_text(r)}",
                                 {"smallest_failing": evidence_of(r)}, case=r.trial.case, seed=r.trial.seed)]
        if r.status == "dropped":
            return [self.finding(ctx, "info", f"case {case_label(r.trial.case)} dropped: {r.reason}",
                                 evidence_of(r), case=r.trial.case)]
        return [self.finding(ctx, "info", f"case {case_label(r.trial.case)}, seed {r.trial.seed}: within tolerance",
                             evidence_of(r), case=r.trial.case, seed=r.trial.seed)]


def _same_kind(case: dict[str, Any], declared: list[TrialResult], params: list[str]) -> list[TrialResult]:
    """The declared cases a derived case varies: the same dtype and fixed (non-integer)
    values. A derived failure of a class one of them already shows is not new."""
    fixed = {k: v for k, v in case.items() if k not in params}
    return [r for r in declared if {k: v for k, v in r.trial.case.items() if k not in params} == fixed]


def base_seed(ctx: CheckContext) -> int:
    """The seed derived cases run with (the first of ``--seeds``)."""
    return ctx.seeds[0]


def _short(vals: list[int]) -> str:
    return "{" + ", ".join(str(v) for v in vals) + "}"


def _patterns(results: list[TrialResult], params: list[str], declared: list[dict[str, Any]],
              klass: str | None = None) -> dict[str, Any]:
    """Per parameter, the values that failed (with ``klass``, or any failure) and passed
    when only that parameter moved away from a declared case, and a divisibility rule that
    separates them when one exists ("fails exactly when K % 128 != 0 among the values
    tried")."""
    per: dict[str, dict[str, list[int]]] = {}
    rules: dict[str, int] = {}
    texts = []
    for p in params:
        fails, passes = set(), set()
        for r in results:
            if r.status != "pass" and not (r.failed and (klass is None or r.klass == klass)):
                continue
            for d in declared:
                if all(r.trial.case.get(k) == d.get(k) for k in d if k != p):
                    (fails if r.failed else passes).add(r.trial.case[p])
                    break
        passes -= fails
        per[p] = {"fail": sorted(fails), "pass": sorted(passes)}
        if not fails or not passes:
            if fails:
                texts.append(f"{p} in {_short(sorted(fails))} fail")
            continue
        rule = None
        for k in range(12, 0, -1):
            b = 1 << k
            if all(v % b == 0 for v in passes) and all(v % b for v in fails):
                rule = b
                break
        if rule:
            rules[p] = rule
            texts.append(f"{p} fails exactly when {p} % {rule} != 0 among the values tried "
                         f"(fail: {_short(sorted(fails))}; pass: {_short(sorted(passes))})")
        else:
            texts.append(f"{p} in {_short(sorted(fails))} fail, {_short(sorted(passes))} pass")
    return {"per_param": per, "rules": rules, "text": "; ".join(texts)}
