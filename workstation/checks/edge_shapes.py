"""``edge-shapes``: mismatches at legal shapes the author did not try."""

from __future__ import annotations

from typing import Any

from workstation.checks.support.costmodel import (
    CPU_CALL_LIMIT_S,
    GPU_MAX_ELEMENTS,
    CostModel,
    cost_units,
    elements,
)
from workstation.checks.support.legal import (
    UNLISTED,
    Value,
    int_params,
    shrink_values,
    snap,
    value_plan,
)
from workstation.checks.support.shrink import shrink
from workstation.checks.support.trials import (
    Trial,
    TrialResult,
    case_key,
    evidence_of,
    failure_text,
    run_trials,
    same_failure,
)
from workstation.engine.check import Check, Finding, NotJudged, register
from workstation.engine.context import CheckContext, case_label
from workstation.task.model import ParamSpec

# CPU budget (Triton interpreter): measured candidate seconds for the derived cases (run in
# batches of BATCH, in priority order), measured seconds for shrinking, and the derived-case
# count. GPU: a count (the element cap is the cost model's).
CPU_DERIVED_BUDGET_S = 2.0
CPU_SHRINK_BUDGET_S = 0.8
CPU_MAX_CASES = 24
BATCH = 8
GPU_MAX_CASES = 48
MAX_SHRINK_ROUNDS = 6


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
            raise NotJudged("no legal derived case fits the CPU budget: the declared cases take "
                       f"{cost.a * 2:.2g} s or more per call under the Triton interpreter (a GPU runs them)")
        if all(r.status == "dropped" for r in results):
            raise NotJudged(f"every derived case was dropped ({len(results)}); first: "
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
        """Greedy shrinking (:func:`~workstation.checks.support.shrink.shrink`): per round,
        smaller legal values of every parameter (one at a time), moving to the smallest case
        that fails with the same class; on the CPU until the candidate's measured seconds
        reach ``budget_s``."""
        specs = {p: ctx.task.params.get(p, UNLISTED) for p in params}
        limit = cost.call_limit_s

        def candidates(best: TrialResult) -> list[Trial]:
            tries = []
            for p in params:
                for w in shrink_values(best.trial.case[p], specs[p]):
                    c = {**best.trial.case, p: w}
                    if case_key(c) not in known:
                        tries.append(Trial(c, best.trial.seed, f"shrinking {p}: {best.trial.case[p]} -> {w}"))
            return tries

        def run(tries: list[Trial]) -> list[TrialResult]:
            res = run_trials(ctx, tries, budget_timeout=None if ctx.on_gpu else limit)
            for r in res:
                known[case_key(r.trial.case)] = r
            return res

        def spent(r: TrialResult) -> float:
            if r.cand is not None and r.cand.step is not None:
                return r.cand.step.seconds
            return limit if r.status == "dropped" else 0.0

        got = shrink(start, candidates=candidates, run=run,
                     keeps_failure=lambda r: r.failed and r.klass == start.klass,
                     size=lambda r: (elements(r.trial.case, params), sum(r.trial.case[p] for p in params)),
                     cost=spent, budget=None if ctx.on_gpu else budget_s, max_rounds=MAX_SHRINK_ROUNDS)
        return got.best, [dict(r.trial.case) for r in got.path], got.spent

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
