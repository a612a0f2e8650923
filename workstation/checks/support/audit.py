"""The invariant audit shared by ``content-follow``, ``observer-effect`` and ``after-return``.

One ``audit_series`` step of the candidate (:mod:`workstation.harness.audit`) on the *audit
case*, then the reference on every variant of the inputs the audit used; the three checks
judge the one result (:func:`run_audit`, memoised per engine run).

The audit case is the smallest declared case with its integer parameters halved, each
within its ``[params]`` legal range and not below :data:`MIN_EXTENT`, while its cost units
(:mod:`.costmodel`) exceed :data:`SHRINK_TO` of that case's: the audit makes many calls, and
what it looks for (caches, counters, observers, late writers) does not depend on the size.
The number of calls follows from the CPU seconds of the candidate's plain call on that case
(CPU, not wall time: a loaded machine plans the same), :data:`AUDIT_CPU_S` worth, between
:data:`MIN_CALLS` and :data:`MAX_CALLS`, :data:`MIXED_SHARE` of them mixed (variants x write
paths x contexts), the rest the long run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from workstation.analysis.compare import Comparison, compare
from workstation.checks.support.budgetrule import Item, Verdict, judge, oracle_runs
from workstation.checks.support.costmodel import cost_units
from workstation.checks.support.legal import halve, int_params
from workstation.engine.check import NotJudged
from workstation.engine.context import CallOutcome, CheckContext, case_label, step_timeout_s
from workstation.protocol.extras.audit import AuditCall, AuditExtra, Variant
from workstation.protocol.steps import AuditSeriesStep, CallStep, Splice, Transform, memo_key

#: the audit case is shrunk while its cost units exceed this share of the smallest declared case's.
SHRINK_TO = 1 / 8
#: no integer parameter of the audit case is halved below this (or its declared value).
MIN_EXTENT = 16
#: CPU seconds the audit's calls are planned to take.
AUDIT_CPU_S = 3.0
#: calls of the audit, at least and at most: at least more than the call series makes (24).
MIN_CALLS, MAX_CALLS = 32, 128
#: share of the calls that are mixed (the rest is the long run).
MIXED_SHARE = 0.6
#: the audit's seeds: fresh ones, so no result another check computed can serve it.
AUDIT_SEEDS = (1001, 1002, 1003)


def audit_case(ctx: CheckContext) -> dict[str, Any]:
    """The audit case (module doc): the smallest declared case (by cost units), its integer
    parameters halved in turn, largest first, within their ``[params]`` range, each at least
    :data:`MIN_EXTENT` (or its declared value where that is smaller), while the cost units
    fall and stay above :data:`SHRINK_TO` of that case's."""
    params = int_params(ctx.cases)
    base: dict[str, Any] = dict(min(ctx.cases, key=lambda c: cost_units(dict(c), params)))
    floor = cost_units(base, params) * SHRINK_TO
    case = dict(base)
    while cost_units(case, params) > floor:
        for p in sorted(params, key=lambda p: -int(case[p])):
            spec = ctx.task.params.get(p)
            smaller = halve(int(case[p]), spec) if spec is not None else None
            if smaller is None or smaller < min(MIN_EXTENT, int(base[p])) or smaller >= int(case[p]):
                continue
            trial = {**case, p: smaller}
            if cost_units(trial, params) < cost_units(case, params):
                case = trial
                break
        else:
            break
    return case


def plan(call_cpu_s: float) -> tuple[int, int]:
    """(mixed calls, long-run calls) for a candidate whose plain call on the audit case took
    ``call_cpu_s`` CPU seconds: :data:`AUDIT_CPU_S` worth of calls, in steps of 8 between
    :data:`MIN_CALLS` and :data:`MAX_CALLS` (CPU seconds, not wall: a loaded machine plans
    the same)."""
    total = int(AUDIT_CPU_S / max(call_cpu_s, 1e-4)) // 8 * 8
    total = max(MIN_CALLS, min(MAX_CALLS, total))
    mixed = max(20, int(total * MIXED_SHARE))
    return mixed, max(8, total - mixed)


@dataclass
class CallJudgement:
    """One audited call against the reference of its variant. ``budget``: the budget
    rule's verdict on a mismatch (:mod:`.budgetrule`); a call within kws's error budget of
    the float64 oracle is ``ok`` (its mismatch is the declared tolerance's)."""

    call: AuditCall
    comps: list[Comparison] = field(default_factory=list)
    budget: Verdict | None = None

    @property
    def matches(self) -> bool:
        """Every output within the declared tolerance of the reference."""
        return self.call.error is None and all(c.ok for c in self.comps)

    @property
    def within_budget(self) -> bool:
        """A mismatch the budget rule gave to the tolerance."""
        return self.budget is not None and self.budget.available and self.budget.within

    @property
    def ok(self) -> bool:
        return self.matches or (self.call.error is None and self.within_budget)


@dataclass
class AuditRun:
    """The audit's result and its comparisons (module doc).

    Attributes:
        spec: the step that ran; outcome: its outcome.
        extra: the step's payload.
        refs: the reference's outcome per variant (index as in ``extra.variants``).
        judged: per call, its comparisons with its variant's reference (calls whose
            variant's reference failed are left out).
        unjudged: why some calls could not be judged (a variant's reference failed).
    """

    spec: AuditSeriesStep
    outcome: CallOutcome
    extra: AuditExtra
    refs: list[CallOutcome]
    judged: list[CallJudgement]
    unjudged: list[str]

    def values(self, call: AuditCall, j: int) -> np.ndarray | None:
        """Output ``j`` of ``call`` (None when it could not be read)."""
        st = self.outcome.step
        key = call.arrays[j] if j < len(call.arrays) else None
        return st.arrays.get(key) if st is not None and key else None

    def describe(self, call: AuditCall) -> str:
        """``call 17 (the 18th; after the long run), one row of seed 1001's inputs edited,
        delivered by a numpy view (...), called from a frame named 'benchmark'``."""
        v = self.extra.variants[call.variant]
        when = {"first": "before the long run", "long": "in the long run", "second": "after the long run"}[call.phase]
        what = variant_text(v)
        ctx_text = CONTEXT_TEXT.get(call.context, call.context)
        if call.context == "frame":
            ctx_text = f"called from a frame named {call.frame!r}"
        return (f"call {call.index + 1} of {len(self.extra.calls)} ({when}) on {what}, delivered as {PATH_TEXT.get(call.path, call.path)}"
                f" ({call.path_note}), {ctx_text}")


PATH_TEXT = {
    "fresh": "new tensors", "clone": "the previous call's values in new tensors",
    "inplace": "copy_ into the previous call's tensors", "data": "a write through .data into the previous call's tensors",
    "numpy": "a write through a numpy view of the previous call's tensors",
    "storage": "a raw storage copy into the previous call's tensors",
    "recycled": "new tensors allocated right after the previous ones were freed",
}
CONTEXT_TEXT = {
    "plain": "called plainly", "dispatch": "called under a pass-through TorchDispatchMode",
    "function_mode": "called under a pass-through TorchFunctionMode", "profiler": "called under torch.profiler",
    "setprofile": "called with a Python profile hook set", "quick": "called right after the previous call returned",
    "pause": "called after a 20 ms pause", "loop": "the last of 6 back-to-back calls",
    "clock": "called with time.time/monotonic/perf_counter reading an hour later",
}


def variant_text(v: Variant) -> str:
    """``seed 1001's inputs`` / ``seed 1001's inputs with one row of input 0 replaced``."""
    if v.edit is None:
        return f"seed {v.seed}'s inputs"
    return f"seed {v.seed}'s inputs with {v.edit.what} of input {v.edit.input} replaced"


def _ref_step(case: dict[str, Any], v: Variant) -> CallStep:
    tr: list[Transform] = [Splice(input=v.edit.input, indices=v.edit.indices, values=v.edit.values)] if v.edit else []
    return CallStep(role="reference", case=dict(case), seed=v.seed, transforms=tr)


def _compare(ctx: CheckContext, case: dict[str, Any], ref: CallOutcome, run: AuditRun,
             call: AuditCall) -> list[Comparison]:
    out = []
    for j, e in enumerate(ref.outputs):
        got = run.values(call, j)
        if got is None:
            out.append(Comparison(ok=False, reason="the output could not be read or is missing", shape=(), dtype=e.dtype))
            continue
        got_dtype = call.dtypes[j] if j < len(call.dtypes) else e.dtype
        out.append(compare(e.values, got, ctx.tolerance(case, e.dtype), expected_dtype=e.dtype,
                           got_dtype=got_dtype, nonfinite_ok=ctx.task.contract.nonfinite_inputs))
    if len(call.fingerprints) != len(ref.outputs):
        out.append(Comparison(ok=False, reason=f"the reference returns {len(ref.outputs)} outputs, the candidate "
                                               f"{len(call.fingerprints)}", shape=(), dtype=""))
    return out


def run_audit(ctx: CheckContext) -> AuditRun:
    """The audit of the candidate and the reference's outputs on its variants (memoised).

    Raises:
        NotJudged: the candidate's plain call on the audit case fails (correctness and
            edge-shapes judge that), or the audit was stopped by kws's CPU budget or a limit
            that says nothing about the candidate.
    """
    return ctx.stash.once("invariant_audit", lambda: _run(ctx), cache_errors=True)


def _run(ctx: CheckContext) -> AuditRun:
    case = audit_case(ctx)
    label = case_label(case)
    plain = ctx.calls([CallStep(role="candidate", case=dict(case), seed=AUDIT_SEEDS[0])], memo=True)[0]
    base = dict(min(ctx.cases, key=lambda c: cost_units(dict(c), int_params(ctx.cases))))
    if not plain.ok and base != case:
        # a halved case [params] allows may break a constraint between parameters that only
        # make_inputs knows (ids drawn without replacement need L <= V): the smallest
        # declared case, which the task says is legal, is the audit case then
        first = f"case {label}: the candidate {plain.failure_text()[:160]}"
        case, label = base, case_label(base)
        plain = ctx.calls([CallStep(role="candidate", case=dict(case), seed=AUDIT_SEEDS[0])], memo=True)[0]
        if plain.ok:
            ctx.notes.append(f"the audit runs on the smallest declared case {label} ({first} on a plain call)")
    if not plain.ok:
        raise NotJudged(f"case {label} (the audit case): the candidate {plain.failure_text()[:200]} on a plain call; "
                        "the audit was not run")
    cpu = plain.step.cpu_s if plain.step is not None else 0.0
    mixed, long_run = plan(cpu)
    spec = AuditSeriesStep(case=case, seeds=list(AUDIT_SEEDS), calls=mixed, long_run=long_run)
    budget = max(step_timeout_s(), 6.0 * cpu * (mixed + long_run + 6))
    out = ctx.stash.once(("audit_series", memo_key(spec)),
                         lambda: ctx.run_steps([spec], step_timeout=budget, budget=True)[0])
    if out.step is None and (out.budget or out.unjudged):
        raise NotJudged(f"case {label}: the audit ({mixed} + {long_run} calls) was stopped by kws's budget of "
                        f"{budget:.0f} CPU s ({out.death or out.unjudged}); not examined")
    if out.step is None:
        raise NotJudged(f"case {label}: the audit job {out.death}")  # a death is charged through the ledger
    if not out.ok:
        raise NotJudged(f"case {label}: the audit could not start: {out.failure_text()[:300]}")
    extra = out.step.extra
    if not isinstance(extra, AuditExtra):
        raise TypeError(f"audit_series returned {type(extra).__name__}")
    refs = ctx.calls([_ref_step(case, v) for v in extra.variants], memo=True)
    run = AuditRun(spec, out, extra, refs, [], [])
    for k, v in enumerate(extra.variants):
        if not refs[k].ok:
            run.unjudged.append(f"the reference {refs[k].failure_text()[:200]} on {variant_text(v)}")
    for call in extra.calls:
        ref = refs[call.variant]
        if ref.ok:
            run.judged.append(CallJudgement(call, _compare(ctx, case, ref, run, call) if call.error is None else []))
    _budget_rule(ctx, run)
    return run


def _budget_rule(ctx: CheckContext, run: AuditRun) -> None:
    """The budget rule on every mismatching call (one oracle per variant, in one job)."""
    bad = [j for j in run.judged if j.call.error is None and not j.matches]
    if not bad:
        return
    variants = sorted({j.call.variant for j in bad})
    items = []
    for k in variants:
        step = _ref_step(run.spec.case, run.extra.variants[k])
        items.append(Item(dict(run.spec.case), step.seed, tuple(step.transforms), run.refs[k]))
    oracles = dict(zip(variants, oracle_runs(ctx, items), strict=True))
    for j in bad:
        got = [run.values(j.call, i) for i in range(len(j.comps))]
        j.budget = judge(oracles[j.call.variant], got, j.comps)
