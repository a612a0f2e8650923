"""``edge-shapes``: mismatches at legal shapes the author did not try."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workstation.checks.support.costmodel import (
    GPU_MAX_ELEMENTS,
    CostModel,
    elements,
)
from workstation.checks.support.legal import (
    UNLISTED,
    Value,
    halve,
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
    oracle_judgement,
    run_trials,
    same_failure,
    tolerance_finding,
)
from workstation.engine.check import Check, Finding, NotJudged, register
from workstation.engine.context import CheckContext, case_label
from workstation.protocol.steps import PoisonMaskedLoads
from workstation.task.model import ParamSpec

# the plan's limits (case count, cost units) are the cost model's (support/costmodel.py):
# predicted from the parameters, never measured, so every machine runs the same cases
MAX_SHRINK_ROUNDS = 6


# -- the check -----------------------------------------------------------------------------------


@register
class EdgeShapes(Check):
    """Mismatch at legal shapes beyond the task's cases.

    Catches:
        mismatches at legal shapes the author did not try: a K loop bound
        `K // BLOCK_K` that drops the ragged tail tile, a mask on one dimension only, a grid
        rounded down, an unmasked last tile, a kernel that raises or crashes at sizes that are not
        multiples of its block (`tl.arange` needs a power of two).

    How:
        from `[params]` (`min`, `max`, `multiple_of`, `choices`) and the declared cases,
        kws derives legal cases by varying one integer shape parameter at a time (the contract's
        `reduction` parameters first) from the cheapest declared case of each dtype; non-integer
        case values (bools, strings, floats; a parameter that is an int in one case and not in
        another) and the dtype stay fixed. Every legal space the task format admits is handled:
        `min = 0` with a declared 0 (a padding count), ranges up to `max = 2**62`, `choices`,
        `multiple_of`. Values per parameter, interleaved in this order of priority:

        - just above and just below the powers of two near the declared values (`P + 1`, `P - 1`,
          snapped to the nearest legal value: with `multiple_of = 8`, `P + 8` and `P - 8`); these
          are also the sizes just past a block multiple of any power-of-two block;
        - the smallest legal value (0 where `min = 0`) and 1;
        - small primes (3, 7, 13, 37, 97);
        - odd block multiples and block sizes (48, 96, 192, 384, 768 and 16 ... 256): sizes a
          tiled kernel handles without a ragged tile, which tell a divisibility pattern apart;
        - declared values +- 1;
        - a larger size, `3 x` (else `2 x`, `4 x`) the largest declared value plus 1, with the other
          parameters halved until it fits the CPU budget; on a GPU also each parameter's
          `[params]` maximum (halved to fit 2^27 elements);
        - a few all-odd combinations (every parameter at its first odd value just above a power
          of two; every parameter at a distinct small prime, so swapped dimensions show).

        Every derived case runs once (the first seed) in the reference and the candidate, compared
        at the declared tolerance. A case where `make_inputs` or the reference raises is dropped
        (task format v1); so is, on the CPU, a call that runs past the per-call limit (over the
        budget, not charged to the candidate). A failing case is then **shrunk** as
        property-based testing tools shrink: each round tries, per parameter, the smallest legal
        value, 2, 3, half and one step down, and moves to the smallest case that still fails
        with the same class (mismatch, NaN, the exception type, crash, timeout). When the failing
        and passing values of a parameter are separated by divisibility, kws tries `b/2` and
        `3b/2` to find the smallest block that explains it. A mismatch where the candidate is within kws's error budget of the float64 oracle at every
        element (and no more than 32 roundings per term off it, what a correct implementation
        stays well within) is the declared tolerance's, not the candidate's: the budget rule
        (`workstation/checks/support/budgetrule.py`; [numerics.md](numerics.md)) reports it as `info`.
        A mismatch the rule cannot judge (no float64 oracle) is a failure as before.

    Findings:
        | finding | severity |
        |---|---|
        | the smallest failing case, shrunk: its comparison (worst element, expected vs got, mismatch region in the output's terms, e.g. "cols 1024..1029 of 1030 (the ragged last tile past 1024)"), the case it was shrunk from, the shrink path, and per parameter the values that failed and passed ("K fails exactly when K % 128 != 0 among the values tried"); one finding per failure class | `fail` |
        | derived cases that fail the way a declared case of the same dtype already fails (same class: `correctness` reports it) | `info` |
        | a mismatch against the declared tolerance with the candidate within kws's error budget of the float64 oracle (the budget rule: the tolerance is too tight at that case, tolerance-tight's subject), with the budget, the candidate's error over it and what two correct implementations may differ by | `info` |
        | the derived cases with their reasons and outcomes, the cases not run within the budget, the cost model | `info` |
        | every derived case dropped, or none fits the CPU budget | `skip`, not judged (with the reason) |

    Example:
        (`rowsum-edge`): `case M=1 K=1 float32, seed 0 (shrunk from M=8 K=1 float32):
        1 of 1 elements (100%) outside atol=0.0001, rtol=1e-05 [declared [tolerance]]; worst at
        [0]: expected 1.541, got 0; mismatches in the only element; K fails exactly when K % 128 !=
        0 among the values tried (fail: {1, 3, 7, 13, 64, 192, 255, 257, ...}; pass: {256, 384,
        512, 1024})`. The repro (`--case '{"K": 1, "M": 1, "dtype": "float32"}' --seeds 0`) runs
        exactly that case.

    Limits:
        on the CPU (Triton interpreter) a case must fit a cost model fitted on the
        declared cases' measured call times (cost units: the product of the parameters, each
        rounded up to 16; at most 0.6 s predicted, or 1.2x the fastest declared call for kernels
        that are slow at any size, e.g. autotuned ones); cases run in priority order, in small
        batches, until 2 s of measured candidate time is spent (at most 24 cases), and one call
        is limited to 2 s (or 2.5x the fastest declared call, where that is longer). So the
        larger size is modest on the CPU (e.g. `K = 2049` for `rowsum-edge`); on a GPU up to 48
        cases run, including the `[params]` maxima. Only the first seed; dtypes are not varied
        (`precision-regime` covers those). The per-parameter pattern is inferred only from
        calls that ran: a call skipped after an earlier hang, cut at kws's budget or timed out
        is left out of it.

    Not judged when:
        no legal derived case fits the plan, or every derived case was dropped (`make_inputs` or
        the reference raised, the CPU budget): `NotJudged` with the reason; the candidate's
        backend or a library it imports cannot run here; `make_inputs` or the reference is
        broken on a declared case (a task problem, naming the file).

    Forgeable:
        Measured in the job process: the outputs only (copied by the harness into the result files).
        Still forgeable from inside: nothing short of computing the right values: the harness's writer and the result path are watched, and a result file written by task code is refused.
    """

    id = "edge-shapes"
    order = 3
    title = "Legal shapes beyond the declared cases"

    def run(self, ctx: CheckContext) -> list[Finding]:
        seed = ctx.seeds[0]
        if ctx.case_filter:  # `--case`: the repro of one derived case
            res = run_trials(ctx, [Trial(dict(ctx.case_filter), seed, "the case given")], budget_rule=True)
            return self._report_single(ctx, res[0])
        task = ctx.task
        params = int_params(ctx.cases)
        # reduction lengths first: a dropped or double-counted tail tile in the reduction
        # loop is the most common edge-shape defect
        params.sort(key=lambda p: p not in task.contract.reduction)
        if not params:
            return [self.finding(ctx, "info", "no integer shape parameter in the declared cases: nothing to vary")]
        # the declared cases' own runs (shared with `correctness`) anchor the per-parameter
        # pass/fail pattern; their sizes set the plan's scale (the cost model: no timing)
        declared = run_trials(ctx, [Trial(dict(c), seed, "declared") for c in ctx.cases])
        cost = CostModel.plan(ctx.cases, params, ctx.on_gpu, _autotune_configs(ctx))
        trials, not_run = self._derive(ctx, params, cost)
        results = run_trials(ctx, trials, budget_rule=True)
        if not results:
            raise NotJudged("no legal derived case fits the plan: every case kws derives from [params] is a "
                       f"declared one or beyond {cost.case_cap} cost units (2x the largest declared case)")
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
        tol = [r for r in results if r.status == "tolerance"]
        if tol:
            findings.append(tolerance_finding(self, ctx, tol))
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
        for klass, rs in by_class.items():
            start = min(rs, key=lambda r: (elements(r.trial.case, params), sum(r.trial.case[p] for p in params),
                                           case_key(r.trial.case)))
            best, path = self._shrink(ctx, start, params, cost, known)
            findings.append(self._fail(ctx, klass, best, start, rs, results + declared, params, path))
        n_drop = sum(r.status == "dropped" for r in results)
        n_pass = sum(r.status in ("pass", "tolerance") for r in results)
        table = [{"case": r.trial.case, "why": r.trial.label, "status": r.status,
                  "candidate_s": round(r.cand.step.seconds, 4) if r.cand is not None and r.cand.step is not None else None,
                  **({"class": r.klass} if r.klass else {}),
                  **({"dropped_because": r.reason} if r.status == "dropped" else {})} for r in results]
        values = {p: sorted({r.trial.case[p] for r in results}) for p in params}
        summary = (f"checked {len(results)} derived shapes ({'; '.join(f'{p} in {_short(v)}' for p, v in values.items())}): "
                   f"{n_pass} pass, {len(failed) + len(inh)} fail, {n_drop} dropped")
        if tol:
            summary += f" ({len(tol)} of the passes outside the declared tolerance but within kws's error budget)"
        if n_drop:
            why = next(r.reason for r in results if r.status == "dropped")
            summary += f" (e.g. {why[:120]})"
        if not ctx.on_gpu:
            summary += f" (CPU: cases up to {cost.case_cap} cost units, 2x the largest declared case"
            summary += f"; {len(not_run)} more beyond the plan's budget)" if not_run else ")"
        findings.append(self.finding(ctx, "info", summary, {
            "seed": ctx.derivation_seed, "declared_seed": seed, "derivation": ctx.derivation.as_dict(),
            "derived": table, "params": {p: task.params.get(p, UNLISTED).describe() for p in params},
            "not_run": [{"case": t.case, "why": t.label} for t in not_run],
            "cost_model": cost.as_dict()}))
        return findings

    # -- derivation ----------------------------------------------------------------------------

    def _derive(self, ctx: CheckContext, params: list[str], cost: CostModel) -> tuple[list[Trial], list[Trial]]:
        """The derived trials in priority order within the plan's limits (case count; on the
        CPU the per-case cap and the total cost units), and the legal ones left out."""
        task, seed = ctx.task, ctx.derivation_seed
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
                spec = specs[p]
                top = snap(spec.max, spec, "down") if spec.max is not None else None
                if top is not None:
                    c = {**bases[0], p: top}
                    while elements(c, params) > GPU_MAX_ELEMENTS:
                        h = halve(c[p], specs[p])
                        if h is None or h >= c[p]:
                            break
                        c[p] = h
                    queue.insert(0, (c, f"{p}={c[p]} (the [params] maximum{'' if c[p] == top else ', halved to fit'})"))
        trials: list[Trial] = []
        left: list[Trial] = []
        seen = set(declared)
        spent = 0
        for case, why in queue:
            k = case_key(case)
            if k in seen or not all(specs[p].allows(case[p]) for p in params) or not cost.fits(case, params):
                continue
            seen.add(k)
            units = cost.units(case)
            # masked lanes of loads without other= read poison, as undefined lanes may on a GPU
            trial = Trial(case, seed, why, cand_monitors=[PoisonMaskedLoads()])
            if len(trials) >= cost.max_cases or (not ctx.on_gpu and spent + units > cost.budget):
                left.append(trial)
                continue
            spent += units
            trials.append(trial)
        return trials, left

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
                    times = f"{v / top:.1f}x" if top else "above"
                    why = f"{p}={v} (larger: {times} the largest declared {p}={top}"
                    why += f"; {', '.join(others)} reduced to fit)" if others else ")"
                    return c, why
                halves = {q: halve(c[q], specs[q]) for q in params if q != p}
                shrinkable = [q for q, h in halves.items() if h is not None and h < c[q]]
                if not shrinkable:
                    break
                q = max(shrinkable, key=lambda q: c[q])
                c[q] = halves[q]
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

    def _refine(self, ctx: CheckContext, params: list[str], results: list[TrialResult],
                declared: list[TrialResult], known: dict[str, TrialResult], cost: CostModel) -> list[TrialResult]:
        """Sharpen a divisibility pattern: while "fails exactly when p % b != 0" holds, try
        ``b / 2`` and ``3 b / 2`` from a declared case; if both pass, the rule is ``b / 2``."""
        extra: list[TrialResult] = []
        specs = {p: ctx.task.params.get(p, UNLISTED) for p in params}
        base = declared[0].trial.case
        classes = [r.klass for r in results if r.failed]
        klass = max(sorted(set(classes)), key=classes.count)  # sorted: ties never depend on str hashing
        for _ in range(4):
            rules = _patterns(results + declared + extra, params, ctx.cases, klass)["rules"]
            tries = []
            for p, b in rules.items():
                for v in (b // 2, 3 * b // 2):
                    c = {**base, p: v}
                    if b >= 4 and specs[p].allows(v) and case_key(c) not in known and cost.fits(c, params):
                        tries.append(Trial(c, ctx.derivation_seed, f"{p}={v} (is {b // 2} the block that divides?)",
                                           cand_monitors=[PoisonMaskedLoads()]))
            if not tries:
                break
            res = run_trials(ctx, tries, budget_rule=True)
            for r in res:
                known[case_key(r.trial.case)] = r
            extra += res
        return extra

    # -- shrinking --------------------------------------------------------------------------------

    def _shrink(self, ctx: CheckContext, start: TrialResult, params: list[str], cost: CostModel,
                known: dict[str, TrialResult]) -> tuple[TrialResult, list[dict[str, Any]]]:
        """Greedy shrinking (:func:`~workstation.checks.support.shrink.shrink`): per round,
        smaller legal values of every parameter (one at a time), moving to the smallest case
        that fails with the same class; on the CPU until :attr:`CostModel.shrink_trials`
        candidate calls are spent (a count: the same on every machine)."""
        specs = {p: ctx.task.params.get(p, UNLISTED) for p in params}

        def candidates(best: TrialResult) -> list[Trial]:
            tries = []
            for p in params:
                for w in shrink_values(best.trial.case[p], specs[p]):
                    c = {**best.trial.case, p: w}
                    if case_key(c) not in known:
                        tries.append(Trial(c, best.trial.seed, f"shrinking {p}: {best.trial.case[p]} -> {w}",
                                           cand_monitors=[PoisonMaskedLoads()]))
            return tries

        def run(tries: Sequence[Trial]) -> list[TrialResult]:
            res = run_trials(ctx, tries, budget_rule=True)
            for r in res:
                known[case_key(r.trial.case)] = r
            return res

        got = shrink(start, candidates=candidates, run=run,
                     keeps_failure=lambda r: r.failed and r.klass == start.klass,
                     size=lambda r: (elements(r.trial.case, params), sum(r.trial.case[p] for p in params)),
                     cost=lambda r: 1.0, budget=cost.shrink_trials, max_rounds=MAX_SHRINK_ROUNDS)
        return got.best, [dict(r.trial.case) for r in got.path]

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
        if klass == "mismatch":
            # a float64 oracle tells a candidate error from a reference that is off itself
            ev["oracle"] = verdict = oracle_judgement(ctx, best)
            if verdict.get("available") and verdict["candidate_within"] and not verdict["reference_within"]:
                return self.finding(
                    ctx, "warn", summary + f"; but the candidate is within tolerance of the float64 oracle "
                    f"(error {verdict['candidate_max_err']:.3g}) and the reference is not "
                    f"({verdict['reference_max_err']:.3g}): the reference is off at this shape",
                    ev, case=best.trial.case, seed=best.trial.seed)
        if best.budget is not None and best.budget.available:
            summary += f"; {best.budget.text()}"
        return self.finding(ctx, "fail", summary, ev, case=best.trial.case, seed=best.trial.seed)

    def _report_single(self, ctx: CheckContext, r: TrialResult) -> list[Finding]:
        if r.failed:
            return [self.finding(ctx, "fail", f"case {case_label(r.trial.case)}, seed {r.trial.seed}: {failure_text(r)}",
                                 {"smallest_failing": evidence_of(r)}, case=r.trial.case, seed=r.trial.seed)]
        if r.status == "dropped":
            return [self.finding(ctx, "info", f"case {case_label(r.trial.case)} dropped: {r.reason}",
                                 evidence_of(r), case=r.trial.case)]
        if r.status == "tolerance" and r.budget is not None:
            return [self.finding(ctx, "info", f"case {case_label(r.trial.case)}, seed {r.trial.seed}: {failure_text(r)}; "
                                 f"but {r.budget.text()}", evidence_of(r), case=r.trial.case, seed=r.trial.seed)]
        return [self.finding(ctx, "info", f"case {case_label(r.trial.case)}, seed {r.trial.seed}: within tolerance",
                             evidence_of(r), case=r.trial.case, seed=r.trial.seed)]


def _same_kind(case: dict[str, Any], declared: list[TrialResult], params: list[str]) -> list[TrialResult]:
    """The declared cases a derived case varies: the same dtype and fixed (non-integer)
    values. A derived failure of a class one of them already shows is not new."""
    fixed = {k: v for k, v in case.items() if k not in params}
    return [r for r in declared if {k: v for k, v in r.trial.case.items() if k not in params} == fixed]


def _autotune_configs(ctx: CheckContext) -> int:
    """The most configs an ``@triton.autotune`` kernel of the candidate tries (1 when none
    is autotuned or the count is not a literal): each derived shape re-tunes them all."""
    from workstation.checks.autotune import scan_autotune

    try:
        kernels = scan_autotune(ctx.task)
    except (OSError, SyntaxError, ValueError):
        return 1
    return max([k.n_configs or 1 for k in kernels] + [1])


def _short(vals: list[int]) -> str:
    return "{" + ", ".join(str(v) for v in vals) + "}"


def observed(r: TrialResult) -> bool:
    """Whether trial ``r`` observed a result of its case: no call of it was skipped after an
    earlier hang, cut at a budget of kws's own, or timed out (a call that was not made at all
    leaves the trial ``dropped``, which no pattern counts)."""
    return not any(o is not None and (o.budget or (o.step is None and o.death_status in ("skipped", "timeout")))
                   for o in (r.ref, r.cand))


def _patterns(results: list[TrialResult], params: list[str], declared: list[dict[str, Any]],
              klass: str | None = None) -> dict[str, Any]:
    """Per parameter, the values that failed (with ``klass``, or any failure) and passed
    when only that parameter moved away from a declared case, and a divisibility rule that
    separates them when one exists ("fails exactly when K % 128 != 0 among the values
    tried"); only trials that ran count (:func:`observed`)."""
    per: dict[str, dict[str, list[int]]] = {}
    rules: dict[str, int] = {}
    texts = []
    # only calls that ran say something: a call skipped after an earlier hang, cut at a budget
    # or timed out observed no result of the size it was given
    results = [r for r in results if observed(r)]
    for p in params:
        fails: set[int] = set()
        passes: set[int] = set()
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
