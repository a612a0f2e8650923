"""``size-range``: the error per element must not jump with size beyond the error model."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

from workstation.analysis.numerics import error_stats, num
from workstation.checks.support.budgetrule import EXCESS, excess
from workstation.checks.support.costmodel import RANGE_PROGRAM_UNITS, RangeModel, elements
from workstation.checks.support.legal import UNLISTED, halve, int_params, smallest, snap
from workstation.checks.support.numaudit import Run, audit, fa_rule
from workstation.checks.support.trials import (
    Trial,
    TrialResult,
    apply_budget_rule,
    case_key,
    classify,
    failure_text,
    tolerance_finding,
)
from workstation.engine.check import Check, Finding, NotJudged, Skip, register
from workstation.engine.context import CallOutcome, CheckContext, case_label, step_timeout_s
from workstation.protocol.extras import extra_as
from workstation.protocol.extras.triton import TritonBoundsExtra
from workstation.protocol.steps import CallStep, TritonBoundsStep
from workstation.task.model import ParamSpec

#: a case is beyond the error model when the candidate's error exceeds this many budgets at
#: some element and breaks FlashAttention's rule there (2x the reference's error + a floor).
BREAK = 2.0
#: a case more roundings per term off than this many times the declared cases' largest is a
#: jump (besides being over :data:`~.budgetrule.EXCESS`).
JUMP = 4.0
#: rungs of one target's ladder (each halves one parameter) offered to the dry run.
MAX_RUNGS = 10
#: extra cases spent sharpening where a break starts (bisection of one parameter).
BISECT_STEPS = 3


# -- the plan (pure: no task code) ------------------------------------------------------------


@dataclass
class Target:
    """One size the plan wants: ``ladder``, the case and smaller and smaller legal versions
    of it (each within the element cap), largest first; ``why`` in words; ``kind``
    ``largest`` (always run) or ``drawn`` (a log-uniform draw, dropped first)."""

    why: str
    kind: str
    ladder: list[dict[str, Any]] = field(default_factory=list)
    #: run only when its case holds more elements than every case chosen before it.
    optional: bool = False


def legal_range(p: str, spec: ParamSpec, declared: list[int], model: RangeModel) -> tuple[int, int]:
    """The legal range ``[lo, hi]`` of parameter ``p`` a draw spans: ``[params]`` min (at
    least 1) and max; an unbounded parameter up to the element cap (no case holds more)."""
    lo = max(smallest(spec) or 1, 1)
    if spec.choices is not None:
        ints = [c for c in spec.choices if isinstance(c, int) and not isinstance(c, bool) and c >= 1]
        return (min(ints), max(ints)) if ints else (lo, lo)
    hi = snap(spec.max, spec, "down") if spec.max is not None else None
    if hi is None:
        hi = max([model.max_elements, *declared])
    return lo, max(lo, hi)


def _shrink_order(case: dict[str, Any], params: list[str], keep: tuple[str, ...], specs: dict[str, ParamSpec]) -> list[str]:
    """The parameters to halve next, in order: those not in ``keep`` first, largest (in log
    scale above their smallest legal value) first; then ``keep``."""
    def key(p: str) -> tuple[int, float, int]:
        lo = max(smallest(specs[p]) or 1, 1)
        return (p in keep, -math.log2(max(int(case[p]), 1) / lo), params.index(p))

    return sorted(params, key=key)


def halve_once(case: dict[str, Any], params: list[str], keep: tuple[str, ...], specs: dict[str, ParamSpec],
               floors: dict[str, int] | None = None) -> dict[str, Any] | None:
    """``case`` with one parameter halved (:func:`_shrink_order`'s first that can be), or
    None. A parameter not in ``keep`` is not halved below its ``floors`` value while a
    ``keep`` parameter can still be halved."""
    order = _shrink_order(case, params, keep, specs)
    for strict in (True, False):
        for p in order:
            h = halve(int(case[p]), specs[p])
            if h is None or not 1 <= h < int(case[p]):
                continue
            if strict and floors and p not in keep and h < floors.get(p, 1):
                continue
            return {**case, p: h}
    return None


def ladder(case: dict[str, Any], params: list[str], keep: tuple[str, ...], specs: dict[str, ParamSpec],
           model: RangeModel, floors: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """``case`` halved until it holds at most the element cap, then up to :data:`MAX_RUNGS`
    smaller rungs (each halving one parameter, ``keep`` last, the others not below their
    ``floors`` before ``keep`` moves), stopping where even one program per element would fit
    the unit cap."""
    c: dict[str, Any] | None = dict(case)
    while c is not None and not model.fits(c):
        c = halve_once(c, params, keep, specs, floors)
    out: list[dict[str, Any]] = []
    floor = model.max_units // (1 + RANGE_PROGRAM_UNITS)
    while c is not None and len(out) < MAX_RUNGS:
        out.append(c)
        if model.elements(c) <= floor:
            break
        c = halve_once(c, params, keep, specs, floors)
    return out


def plan(cases: list[dict[str, Any]], params: list[str], specs: dict[str, ParamSpec], reduction: tuple[str, ...],
         model: RangeModel, seed: int) -> list[Target]:
    """The targets of ``size-range`` (check docstring, How), deterministic in ``seed``."""
    rng = random.Random(f"size-range:{seed}")
    dtypes = list(dict.fromkeys(c.get("dtype") for c in cases))
    bases = {dt: min((c for c in cases if c.get("dtype") == dt), key=lambda c: elements(c, params)) for dt in dtypes}
    declared = {p: sorted({int(c[p]) for c in cases}) for p in params}
    rng_of = {p: legal_range(p, specs[p], declared[p], model) for p in params}
    red = tuple(p for p in reduction if p in params)
    # while one parameter is pushed to its largest, the others stay at least this large (a
    # degenerate 1 on the others is edge-shapes' subject, not a large size)
    floors = {p: max(rng_of[p][0], min(min(declared[p]), 16)) for p in params}
    targets: list[Target] = []

    def top(base: dict[str, Any]) -> dict[str, Any]:
        return {**base, **{p: rng_of[p][1] for p in params}}

    def label(dt: Any) -> str:
        return f" ({dt})" if len(dtypes) > 1 else ""

    for i, dt in enumerate(dtypes):
        base = bases[dt]
        if red:
            targets.append(Target(f"{' * '.join(red)} (the reduction) at the largest the budget allows{label(dt)}",
                                  "largest", ladder(top(base), params, red, specs, model, floors)))
        elif i == 0:
            # no reduction known: each parameter in turn at the largest the budget allows
            for p in params:
                targets.append(Target(f"{p} at the largest the budget allows{label(dt)}", "largest",
                                      ladder(top(base), params, (p,), specs, model, floors)))
        if i == 0 or not red:
            targets.append(Target(f"every parameter as large as the budget allows at once{label(dt)}", "largest",
                                  ladder(top(base), params, (), specs, model), optional=True))
    for k in range(model.draws):
        dt = dtypes[k % len(dtypes)]
        case = draw(rng, dict(bases[dt]), params, specs, rng_of, model.max_elements)
        parts = [f"{p}={case[p]}" for p in params]
        targets.append(Target(f"drawn log-uniformly ({', '.join(parts)}){label(dt)}", "drawn",
                              ladder(case, params, (), specs, model)))
    return [t for t in targets if t.ladder]


def draw(rng: random.Random, base: dict[str, Any], params: list[str], specs: dict[str, ParamSpec],
         rng_of: dict[str, tuple[int, int]], cap: int) -> dict[str, Any]:
    """One case drawn log-uniformly per dimension within the element cap: the parameters in
    a random order, each log-uniform over its legal range cut to what the cap leaves once
    the parameters still to draw are at their smallest (so the sizes spread over the whole
    budget instead of piling up at the cap); a ``choices`` parameter uniformly."""
    case = dict(base)
    order = list(params)
    rng.shuffle(order)
    for i, p in enumerate(order):
        spec = specs[p]
        lo, hi = rng_of[p]
        rest = math.prod(rng_of[q][0] for q in order[i + 1:])
        used = math.prod(int(case[q]) for q in order[:i])
        room = max(lo, cap // max(1, rest * used))
        if spec.choices is not None:
            ints = sorted(c for c in spec.choices if isinstance(c, int) and not isinstance(c, bool) and c >= 1)
            fit = [c for c in ints if c <= room] or ints[:1]
            case[p] = rng.choice(fit) if fit else int(case[p])
            continue
        top = max(lo, min(hi, room))
        x = math.exp(rng.uniform(math.log(lo), math.log(top + 1)))
        case[p] = snap(min(top, max(lo, int(x))), spec, "down") or lo
    return case


def choose(targets: list[Target], programs: dict[str, int | None], model: RangeModel,
           params: list[str]) -> tuple[list[tuple[Target, dict[str, Any], int]], list[Target]]:
    """Per target its first rung within the unit cap (``programs``: per case key the Triton
    programs its dry run launched; None where the dry run raised: elements only), largest
    targets first, then the draws while the budget lasts; equal cases once. Returns the
    chosen (target, case, units) and the targets left out."""
    chosen: list[tuple[Target, dict[str, Any], int]] = []
    left: list[Target] = []
    seen: set[str] = set()
    spent = 0
    for t in sorted(targets, key=lambda t: t.kind != "largest"):
        pick = None
        cap = model.max_units if t.kind == "largest" else model.max_draw_units
        for c in t.ladder:
            units = model.units(c, programs.get(case_key(c)) or 0)
            if units > cap:
                continue
            if model.budget is not None and t.kind != "largest" and spent + units > model.budget:
                continue
            pick = (c, units)
            break
        if pick is not None and t.optional and any(model.elements(c) >= model.elements(pick[0]) for _, c, _ in chosen):
            continue  # a case already chosen is as large: this one adds no size
        if pick is None or case_key(pick[0]) in seen:
            if pick is None:
                left.append(t)
            continue
        seen.add(case_key(pick[0]))
        spent += pick[1]
        chosen.append((t, pick[0], pick[1]))
    return chosen, left


# -- judging ------------------------------------------------------------------------------------


@dataclass
class Point:
    """One case run: the trial's classification at the declared tolerance, the numerics
    run (oracle, budget), and the model's verdict per floating output."""

    case: dict[str, Any]
    why: str
    result: TrialResult
    run: Run | None
    units: int = 0
    anchor: bool = False
    ratio: float | None = None          # the candidate's largest error over budget
    ref_ratio: float | None = None      # the reference's
    excess: float | None = None         # the candidate's largest error in roundings per term
    ref_excess: float | None = None     # the reference's
    beyond: bool = False                # beyond the model: ratio > BREAK and FlashAttention's rule broken
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def elements(self) -> int:
        return math.prod(max(1, int(v)) for k, v in self.case.items()
                         if k != "dtype" and isinstance(v, int) and not isinstance(v, bool))


def model_verdict(pt: Point) -> None:
    """Fill ``pt``'s ratios and ``beyond`` from its numerics run and the candidate's outputs:
    beyond the model when an output's error exceeds :data:`BREAK` budgets and breaks
    FlashAttention's rule, or is more than :data:`~.budgetrule.EXCESS` roundings per term
    off the oracle (:func:`~.budgetrule.rounding_units`)."""
    r, cand = pt.run, pt.result.cand
    if r is None or cand is None or not cand.ok:
        return
    worst: dict[str, Any] | None = None
    for o in r.outs:
        if o.oracle is None or o.B is None or o.j >= len(cand.outputs):
            continue
        g = cand.outputs[o.j].values
        if g.shape != o.oracle.shape:
            continue
        st = error_stats(g, o.oracle, o.dtype, o.B)
        if st.nonfinite:
            continue  # NaN or inf where the oracle is finite: the trial's own failure class says so
        fa = fa_rule(o, g)
        ratio = float(st.budget_ratio) if st.budget_ratio is not None else 0.0
        x, xw = excess(o, g)
        rx, _ = excess(o, o.ref)
        by_budget = bool(fa is not None and not fa["ok"] and ratio > BREAK)
        by_rounding = x > EXCESS
        if pt.ratio is None or ratio > pt.ratio:
            pt.ratio = ratio
        if pt.excess is None or x > pt.excess:
            pt.excess = x
        pt.ref_excess = max(pt.ref_excess or 0.0, rx)
        if o.ref_err is not None and o.ref_err.budget_ratio is not None:
            pt.ref_ratio = max(pt.ref_ratio or 0.0, float(o.ref_err.budget_ratio))
        if worst is None or (by_budget or by_rounding, x) > (worst["beyond"], worst["excess"]):
            worst = {"output": o.j, "candidate": st.as_dict(), "budget": o.bud.as_dict() if o.bud else None,
                     "fa_rule": {k: fa[k] for k in ("candidate_err", "reference_err", "floor", "limit", "ok")}
                     if fa is not None else None, "excess": x, "excess_at": xw,
                     "beyond": by_budget or by_rounding, "by_budget": by_budget, "by_rounding": by_rounding}
        pt.beyond |= by_budget or by_rounding
    pt.detail = worst or {}


def threshold(points: list[Point], params: list[str]) -> tuple[str, int, int] | None:
    """A parameter (or ``elements``) whose values separate the within-model points from the
    beyond ones: (name, largest within, smallest beyond), reduction-like names first as
    ``params`` orders them; None when none does."""
    inside = [p for p in points if p.ratio is not None and not p.beyond]
    out = [p for p in points if p.beyond]
    if not inside or not out:
        return None
    for name in [*params, "elements"]:
        def val(pt: Point, name: str = name) -> int:
            return pt.elements if name == "elements" else int(pt.case[name])
        a, b = max(val(p) for p in inside), min(val(p) for p in out)
        if a < b:
            return name, a, b
    return None


@register
class SizeRange(Check):
    """Accuracy across the whole legal size range: the error per element must not jump with
    size beyond the error model.

    Catches:
        a kernel that is as accurate as a correct one at the declared sizes and far less
        accurate at larger legal ones: fp32 accumulation that becomes fp16 above 65,536
        elements, a cheap exp above some row length, fp16 matmul operands above some K, a
        sum of squares kept in fp16 on long rows; and a kernel that raises, crashes or
        returns NaN at a legal size far above the declared cases (a block size that no longer
        fits, a single-block kernel past its limit).

    How:
        sizes across the legal range of `[params]`: per integer parameter its `[params]` range
        (an unbounded one up to the element cap), and cases drawn from it **log-uniformly per
        dimension** (seeded by the run's derivation seed: the same cases on every machine and
        every run of one task version; each parameter, in a random order, within what the cap
        leaves the others), plus the **largest cases the budget allows**: the reduction
        (`[contract] reduction`, or the parameters the numerics audit infers from the shapes)
        at its `[params]` maximum with the other parameters halved (not below 16) until the
        case fits; without a known reduction each parameter in turn; and every parameter as
        large as fits at once, where that adds elements. On the CPU a case must fit the
        interpreter's cost model (`workstation/checks/support/costmodel.py`, `RangeModel`): at
        most 2^20 elements and 2^21 interpreter units (a drawn case a quarter of that), where a
        unit is an element and each Triton program costs 1024; the programs of each size are
        counted by a dry run of the candidate's wrapper with every launch recorded and skipped
        (no kernel runs), so a row-per-program kernel gets fewer rows: a count, never a
        measured time. A case over the caps is halved, one parameter at a time, until it fits.
        Each case runs once (the first seed): the reference, its float64 oracle and the
        candidate; each output's error per element against the oracle is judged in units of
        kws's error budget ([numerics.md](numerics.md): `B = rho*S + u_out*|y| + tau` with the
        case's own reduction length K), by FlashAttention's rule (at most 2x the reference's
        error plus a floor), and in **roundings per term** (`u_acc*S + u_out*|y| + tau`: the
        error of one rounding per term's magnitude, which a correct evaluation in any order,
        a sequential sum included, stays within a few of, while the budget's bound grows with
        `lambda*sqrt(K)`). The declared cases (first seed) are the small-size anchors. A case
        is **beyond the error model** when the candidate's error exceeds 2 budgets and breaks
        FlashAttention's rule, or is more than 32 roundings per term off (and 4x the declared
        cases' own); the candidate **breaks with size** when a case is beyond the model while
        every declared case of its dtype is within it. kws then names the parameter (or the
        element count) whose values separate the sizes within the model from those beyond it,
        and bisects it (3 cases) to say where the break starts. A mismatch against the
        declared tolerance within the budget is the tolerance's (the budget rule,
        `workstation/checks/support/budgetrule.py`).

    Findings:
        | finding | severity |
        |---|---|
        | the candidate breaks with size: the smallest case beyond the model, its error over budget (or in roundings per term) and the reference's there, the worst element (oracle, got), the declared cases' largest, the parameter and value where it breaks ("beyond the model exactly when N >= 2865 among the sizes tried (within up to N=1890)"), the budget's model, what the declared tolerance says of it | `fail` |
        | the candidate raises, crashes or returns NaN/inf at a legal size (the case, the error; not when a declared case of the dtype already fails the same way) | `fail` |
        | a mismatch against the declared tolerance where no float64 oracle exists (the declared tolerance is then the only judge) | `fail` |
        | a mismatch against the declared tolerance with the candidate within kws's error budget of the oracle (the tolerance's, tolerance-tight's subject) | `info` |
        | beyond the model at every size, the declared ones included (precision-regime judges those) | `info` |
        | the cases run (why, elements, units, each one's error over budget and in roundings per term, the reference's), the cases left out, the cost model | `info` |

    Example:
        (`long-row-poly-exp` in sample_queue_hacks: a softmax whose exp is a cubic polynomial
        above N = 2048, declared cases N <= 200): `case M=6 N=2865 float32, seed 0 (bisecting N
        between 544 and 15093): 1 of 17190 elements (0.00582%) outside atol=1e-06, rtol=1e-05
        [declared [tolerance]]; the candidate's error is 6.11x kws's error budget (max |err|
        1.22e-06; worst at [0, 1472]: oracle 0.00851298, got 0.00851176; FlashAttention's rule
        allows 2.9e-07); at the declared sizes (up to 1024 elements) it is at most 0.0205x the
        budget: its error grows beyond the model with size; beyond the model exactly when N >=
        2865 among the sizes tried (within up to N=1890)`.

    Source:
        Higham, *Accuracy and Stability of Numerical Algorithms* (2002), ch. 3: the error of a
        sum grows with its length, so a precision shortcut that is invisible on short rows
        shows on long ones; the red-team corpus of issue 39 (precision that drops above a size
        threshold well inside the legal range, which no check ran on the CPU).

    Limits:
        on the CPU the largest case is about 2^20 elements (more when the declared cases are
        larger): a switch above what the budget allows (a matmul's M and N both at 4096) is not
        reached; on a GPU cases reach 2^22 elements (the float64 arrays of a job's cases must
        fit the result byte budget). One seed; the draws are few (3 on the CPU, 4 on a GPU). The model is fp32 accumulation: a kernel
        whose declared accuracy contract (`[contract] compute_dtype`) is narrower is beyond it
        at every size and reported as `info`. The interpreter computes Triton's arithmetic in
        numpy (true fp32 dots, numpy's reduction order).

    Not judged when:
        no integer shape parameter (`skip`); every case was dropped (`make_inputs` or the
        reference raised); a case the plan chose ran past kws's CPU budget for one call
        (not judged for that case, the others reported); no float64 oracle (the reference
        computes at a fixed precision): the error model is not applied (not judged), the
        declared tolerance still is.

    Forgeable:
        Measured in the job process: the outputs only (copied by the harness into the result files).
        Still forgeable from inside: a candidate that recognises kws's sizes (it cannot tell them from a caller's: they are legal sizes drawn per task version); one that is exact at every size kws runs and wrong between them.
    """

    id = "size-range"
    order = 62
    title = "Accuracy across the whole legal size range"

    def run(self, ctx: CheckContext) -> list[Finding]:
        params = int_params(ctx.cases)
        if not params:
            raise Skip("no integer shape parameter in the declared cases: there is no size to vary")
        na = audit(ctx)
        runs = na.declared()
        seed = ctx.seeds[0]
        specs = {p: ctx.task.params.get(p, UNLISTED) for p in params}
        reduction = tuple(ctx.task.contract.reduction) or (runs[0].red.params if runs else ())
        # the declared cases anchor the small sizes; the repro of one case (`--case`) has none
        anchors = [] if ctx.case_filter else self._anchors(ctx, na, seed)
        if ctx.case_filter:
            chosen: list[tuple[Target, dict[str, Any], int]] = [
                (Target("the case given", "largest", [dict(ctx.case_filter)]), dict(ctx.case_filter), 0)]
            left: list[Target] = []
            model = self._model(ctx, params, {})
        else:
            model, chosen, left = self._plan(ctx, params, specs, reduction, seed)
        points = self._run_cases(ctx, chosen, seed)
        if not points:
            raise NotJudged("no case of the plan could run")
        live = [p for p in points if p.result.status != "dropped"]
        lost = [p for p in points if p.result.status == "dropped" and p.result.unjudged]
        for p in lost:
            ctx.could_not_judge(f"case {case_label(p.case)}: {p.result.reason[:200]}")
        if not live:
            first = points[0].result
            raise NotJudged(f"every case was dropped ({len(points)}); first: {case_label(first.trial.case)}: "
                            f"{first.reason[:200]}")
        if not any(pt.run is not None and any(o.oracle is not None for o in pt.run.outs) for pt in live + anchors):
            why = next((pt.run.note for pt in live if pt.run is not None and pt.run.note), "no float64 oracle")
            ctx.could_not_judge(f"the error model was not applied: {why}; the cases were judged at the declared "
                                "tolerance only")
        findings: list[Finding] = []
        findings += self._failures(ctx, live, anchors, params, model, seed, points)
        tol = [p.result for p in live if p.result.status == "tolerance"]
        if tol:
            findings.append(tolerance_finding(self, ctx, tol))
        findings.append(self._summary(ctx, points, anchors, left, model, seed))
        return findings

    # -- plan ----------------------------------------------------------------------------------

    def _model(self, ctx: CheckContext, params: list[str], declared_programs: dict[str, int | None]) -> RangeModel:
        interpreted = bool(ctx.runner.device.interpreter) and ctx.task.backend == "triton" and not ctx.on_gpu
        m = RangeModel(tuple(params), ctx.on_gpu, interpreted)
        de = max((m.elements(c) for c in ctx.cases), default=1)
        du = max((m.units(c, declared_programs.get(case_key(c)) or 0) for c in ctx.cases), default=1)
        return RangeModel(tuple(params), ctx.on_gpu, interpreted, de, du)

    def _plan(self, ctx: CheckContext, params: list[str], specs: dict[str, ParamSpec], reduction: tuple[str, ...],
              seed: int) -> tuple[RangeModel, list[tuple[Target, dict[str, Any], int]], list[Target]]:
        model = self._model(ctx, params, {})
        targets = plan(ctx.cases, params, specs, reduction, model, ctx.derivation_seed)
        programs: dict[str, int | None] = {}
        if model.interpreted:
            dry = list({case_key(c): c for c in [*ctx.cases, *(c for t in targets for c in t.ladder)]}.values())
            programs = self._dry_run(ctx, dry, seed)
            model = self._model(ctx, params, programs)
        chosen, left = choose(targets, programs, model, params)
        return model, chosen, left

    @staticmethod
    def _dry_run(ctx: CheckContext, cases: list[dict[str, Any]], seed: int) -> dict[str, int | None]:
        """Per case the Triton programs (and launches) the candidate's wrapper launches, every
        launch recorded and skipped (``triton_bounds`` without TTIR); None where it raised."""
        out = ctx.run_steps([TritonBoundsStep(cases=cases, seed=int(seed), lower=False)],
                            step_timeout=step_timeout_s(), budget=True)[0]
        if not out.ok or out.step is None:
            raise NotJudged(f"the dry run that counts the candidate's programs per size did not complete: "
                            f"{out.failure_text()[:200]}")
        data = extra_as(out.step.extra, TritonBoundsExtra)
        got: dict[str, int | None] = {}
        for c, r in zip(cases, data.cases, strict=True):
            if r.error is not None:
                got[case_key(c)] = None
                continue
            got[case_key(c)] = sum(max(1, math.prod(max(1, g) for g in call.grid)) for call in r.launches)
        return got

    # -- running -------------------------------------------------------------------------------

    @staticmethod
    def _anchors(ctx: CheckContext, na: Any, seed: int) -> list[Point]:
        """The declared cases (first seed) with the candidate's outcome and the model verdict."""
        runs = [r for r in na.declared() if r.seed == seed]
        cands = ctx.candidate([(r.case, r.seed) for r in runs])
        out = []
        for r, c in zip(runs, cands, strict=True):
            res = classify(ctx, Trial(dict(r.case), seed, "declared"), r.ref, c)
            pt = Point(dict(r.case), "declared", res, r, anchor=True)
            model_verdict(pt)
            out.append(pt)
        return out

    def _run_cases(self, ctx: CheckContext, chosen: list[tuple[Target, dict[str, Any], int]], seed: int) -> list[Point]:
        if not chosen:
            return []
        na = audit(ctx)
        cases = [c for _, c, _ in chosen]
        ref_steps: list[Any] = [CallStep(role="reference", case=dict(c), seed=int(seed)) for c in cases]
        ref_steps += [na.probe_step(c, seed) for c in cases]
        cand_steps: list[Any] = [CallStep(role="candidate", case=dict(c), seed=int(seed)) for c in cases]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=2) as pool:
            fr = pool.submit(ctx.calls, ref_steps, memo=True)
            fc = pool.submit(ctx.run_steps, cand_steps, step_timeout=step_timeout_s(), budget=True)
            refs, cands = fr.result(), fc.result()
        n = len(cases)
        points = []
        for (t, c, units), ref, probe, cand in zip(chosen, refs[:n], refs[n:], cands, strict=True):
            points.append(self._point(ctx, na, t.why, c, units, seed, ref, probe, cand))
        apply_budget_rule(ctx, [p.result for p in points])
        return points

    @staticmethod
    def _point(ctx: CheckContext, na: Any, why: str, case: dict[str, Any], units: int, seed: int, ref: CallOutcome,
               probe: CallOutcome, cand: CallOutcome) -> Point:
        trial = Trial(dict(case), seed, why)
        if cand.step is None and cand.budget:
            res = TrialResult(trial, ref, cand, "dropped", unjudged=True,
                              reason=f"the candidate's call ran past kws's budget of {step_timeout_s():g} CPU s "
                                     "for one case (not charged to it)")
        else:
            res = classify(ctx, trial, ref, cand)
        run = na.build_run(case, seed, "size-range", ref, probe) if ref.ok else None
        pt = Point(dict(case), why, res, run, units)
        if res.status not in ("dropped", "error"):
            model_verdict(pt)
        return pt

    def _bisect(self, ctx: CheckContext, points: list[Point], name: str, lo: int, hi: int, start: Point,
                params: list[str], seed: int) -> list[Point]:
        """Up to :data:`BISECT_STEPS` cases between the largest within-model value ``lo`` and
        the smallest beyond-model value ``hi`` of parameter ``name`` (the other parameters of
        ``start``, the smallest case beyond the model), or of the element count (``start``
        halved, largest parameter first, to the middle)."""
        specs = {p: ctx.task.params.get(p, UNLISTED) for p in params}
        extra: list[Point] = []
        known = {case_key(p.case) for p in points}
        for _ in range(BISECT_STEPS):
            if hi <= lo + 1:
                break
            mid = int(math.sqrt(max(lo, 1) * hi))
            if name == "elements":
                c: dict[str, Any] | None = dict(start.case)
                while c is not None and elements(c, params) > mid:
                    c = halve_once(c, params, (), specs)
                if c is None or not lo < elements(c, params) < hi:
                    break
                case = c
            else:
                v = snap(mid, specs[name], "nearest")
                if v is None or not lo < v < hi:
                    break
                case = {**start.case, name: v}
            if case_key(case) in known:
                break
            why = f"bisecting {'the element count' if name == 'elements' else name} between {lo} and {hi}"
            got = self._run_cases(ctx, [(Target(why, "drawn", [case]), case, 0)], seed)
            if not got or got[0].ratio is None:
                break
            extra += got
            known.add(case_key(case))
            at = elements(case, params) if name == "elements" else int(case[name])
            if got[0].beyond:
                hi = at
            else:
                lo = at
        return extra

    # -- findings ------------------------------------------------------------------------------

    def _failures(self, ctx: CheckContext, live: list[Point], anchors: list[Point], params: list[str],
                  model: RangeModel, seed: int, points: list[Point]) -> list[Finding]:
        """The fail findings (and the info of a candidate beyond the model at every size);
        the bisection's cases are added to ``live`` and ``points``."""
        findings: list[Finding] = []

        def same_kind(pt: Point) -> list[Point]:
            fixed = {k: v for k, v in pt.case.items() if k not in params}
            return [a for a in anchors if {k: v for k, v in a.case.items() if k not in params} == fixed]

        # raised, crashed, NaN/inf, or a mismatch no oracle can excuse
        by_class: dict[str, list[Point]] = {}
        for pt in live:
            r = pt.result
            if not r.failed:
                continue
            if r.status == "mismatch" and (r.budget is None or r.budget.available):
                continue  # judged by the model below
            if any(a.result.failed and a.result.klass == r.klass for a in same_kind(pt)):
                continue  # correctness reports the declared case
            by_class.setdefault(r.klass, []).append(pt)
        for klass, pts in by_class.items():
            pt = min(pts, key=lambda p: (p.elements, case_key(p.case)))
            s = f"case {case_label(pt.case)}, seed {seed} ({pt.why}): {failure_text(pt.result)}"
            if len(pts) > 1:
                s += f"; {len(pts)} of the sizes tried fail this way"
            findings.append(self.finding(ctx, "fail", s, {"case": pt.case, "class": klass, "why": pt.why,
                                                          "cases": [p.case for p in pts]}, case=pt.case, seed=seed))
        # the model: beyond it at some size while within it at the declared sizes
        dtypes = list(dict.fromkeys(pt.case.get("dtype") for pt in live))
        for dt in dtypes:
            mine = [pt for pt in live if pt.case.get("dtype") == dt and pt.ratio is not None]
            beyond = [pt for pt in mine if pt.beyond]
            if not beyond:
                continue
            base = [a for a in anchors if a.case.get("dtype") == dt and a.ratio is not None]
            if ctx.case_filter:
                findings.append(self._break(ctx, dt, mine, [], beyond, params, seed))
                continue
            if not base or any(a.beyond for a in base):
                worst = max(beyond, key=lambda p: p.ratio or 0.0)
                findings.append(self.finding(
                    ctx, "info",
                    f"{dt}: the candidate is beyond kws's error model at every size tried, the declared cases included "
                    f"(case {case_label(worst.case)}: {num(worst.ratio or 0.0)}x the budget, "
                    f"{num(worst.excess or 0.0)} roundings per term); not a change with size (precision-regime and "
                    "fusion-accuracy judge the declared cases)" if base else
                    f"{dt}: beyond kws's error model at case {case_label(worst.case)} ({num(worst.ratio or 0.0)}x), "
                    "but no declared case of this dtype has a float64 oracle to compare with",
                    {"cases": [p.case for p in beyond]}, case=worst.case, seed=seed))
                continue
            # a rounding excess counts as a jump only well above the declared cases' own
            floor = max(EXCESS, JUMP * max((a.excess or 0.0) for a in base))
            for pt in beyond:
                if not pt.detail.get("by_budget") and (pt.excess or 0.0) < floor:
                    pt.beyond = False  # within a few times the declared cases' own excess: no jump
            beyond = [pt for pt in beyond if pt.beyond]
            if not beyond:
                continue
            if ctx.case_filter is None:
                th = threshold(mine + base, params)
                if th is not None:
                    start = min(beyond, key=lambda p: (int(p.case[th[0]]) if th[0] != "elements" else p.elements,
                                                       p.elements))
                    more = self._bisect(ctx, mine + base, th[0], th[1], th[2], start, params, seed)
                    live += more
                    points += more
                    mine += [p for p in more if p.ratio is not None]
                    beyond = [pt for pt in mine if pt.beyond]
            findings.append(self._break(ctx, dt, mine, base, beyond, params, seed))
        return findings

    def _break(self, ctx: CheckContext, dt: Any, mine: list[Point], base: list[Point], beyond: list[Point],
               params: list[str], seed: int) -> Finding:
        first = min(beyond, key=lambda p: (p.elements, case_key(p.case)))
        d = first.detail
        cand = d.get("candidate", {})
        b = d.get("budget") or {}
        if d.get("by_budget"):
            w = cand.get("worst") or {}
            fa = d.get("fa_rule") or {}
            err = (f"the candidate's error is {num(first.ratio or 0.0)}x kws's error budget (max |err| "
                   f"{num(cand.get('max_abs_err', 0.0))}")
            if w:
                err += f"; worst at {w.get('index')}: oracle {num(w.get('oracle', 0.0), 6)}, got {num(w.get('got', 0.0), 6)}"
            if fa:
                err += f"; FlashAttention's rule allows {num(fa.get('limit', 0.0))}"
            err += ")"
        else:
            w = d.get("excess_at") or {}
            err = (f"the candidate's error is {num(first.excess or 0.0)} roundings per term (u_acc*S + u_out*|y| + "
                   f"tau, where a correct implementation stays within a few; {num(first.ratio or 0.0)}x kws's "
                   "error budget")
            if w:
                err += f"; worst at {w.get('index')}: oracle {num(w.get('oracle', 0.0), 6)}, got {num(w.get('got', 0.0), 6)}"
            err += ")"
        r = first.result
        bad = next((c for c in r.comps if not c.ok), None)
        head = f"case {case_label(first.case)}, seed {seed} ({first.why})"
        s = f"{head}: {bad.reason}; {err}" if bad is not None else f"{head}: {err}; the declared tolerance accepts it"
        if base:
            what = (f"{num(max((a.ratio or 0.0) for a in base))}x the budget" if d.get("by_budget") else
                    f"{num(max((a.excess or 0.0) for a in base))} roundings per term")
            s += (f"; at the declared sizes (up to {max(a.elements for a in base)} elements) it is at most {what}: "
                  "its error grows beyond the model with size")
        else:
            s += "; beyond kws's error model at this case (the declared cases were not run: a repro of one case)"
        th = threshold(mine + base, params)
        if th is not None:
            name, lo, hi = th
            s += (f"; beyond the model exactly when {name} >= {hi} among the sizes tried (within up to {name}={lo})"
                  if name != "elements" else
                  f"; beyond the model exactly when the case holds >= {hi} elements among the sizes tried "
                  f"(within up to {lo})")
        ref = first.ref_ratio if d.get("by_budget") else first.ref_excess
        if ref is not None:
            s += f"; the reference here: {num(ref)}{'x' if d.get('by_budget') else ' roundings per term'}"
        if b:
            s += f"; model: K = {b.get('K')} ({b.get('K_source')}), {b.get('accumulator')} accumulation"
        ev = {"case": first.case, "seed": seed, "why": first.why, "dtype": dt,
              "error_over_budget": first.ratio, "reference_over_budget": first.ref_ratio,
              "roundings_per_term": first.excess, "reference_roundings_per_term": first.ref_excess,
              "detail": first.detail, "threshold": list(th) if th else None,
              "declared": [{"case": a.case, "over_budget": a.ratio, "roundings_per_term": a.excess} for a in base],
              "declared_tolerance": bad.evidence() if bad is not None else "accepts it",
              "sizes": [{"case": p.case, "elements": p.elements, "over_budget": p.ratio,
                         "roundings_per_term": p.excess, "beyond": p.beyond, "declared": p.anchor}
                        for p in sorted(mine + base, key=lambda p: p.elements)]}
        return self.finding(ctx, "fail", s, ev, case=first.case, seed=seed)

    def _summary(self, ctx: CheckContext, points: list[Point], anchors: list[Point], left: list[Target],
                 model: RangeModel, seed: int) -> Finding:
        rows = [{"case": p.case, "why": p.why, "elements": p.elements, "units": p.units, "status": p.result.status,
                 "over_budget": p.ratio, "reference_over_budget": p.ref_ratio, "roundings_per_term": p.excess,
                 "reference_roundings_per_term": p.ref_excess, "beyond_model": p.beyond}
                for p in points]
        judged = [p for p in points if p.ratio is not None]
        big = max(points, key=lambda p: p.elements)
        worst = max(judged, key=lambda p: p.ratio or 0.0) if judged else None
        known = [a for a in anchors if a.ratio is not None]
        s = (f"ran {len(points)} sizes across [params] up to {case_label(big.case)} ({big.elements} elements)"
             + (f"; the candidate's error at most {num(worst.ratio or 0.0)}x kws's error budget, "
                f"{num(worst.excess or 0.0)} roundings per term (at {case_label(worst.case)})" if worst else "")
             + (f"; on the declared cases at most {num(max(a.ratio or 0.0 for a in known))}x, "
                f"{num(max(a.excess or 0.0 for a in known))}" if known else "")
             + (f"; {len(left)} planned size(s) beyond the CPU budget" if left else ""))
        return self.finding(ctx, "info", s, {
            "seed": seed, "derivation": ctx.derivation.as_dict(), "cases": rows,
            "declared": [{"case": a.case, "over_budget": a.ratio, "roundings_per_term": a.excess,
                          "beyond_model": a.beyond} for a in anchors],
            "not_run": [{"why": t.why, "smallest": t.ladder[-1] if t.ladder else None} for t in left],
            "cost_model": model.as_dict(), "break_factor": BREAK})
