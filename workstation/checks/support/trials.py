"""Shared machinery of the checks that rerun reference and candidate on varied inputs
(``edge-shapes``, ``noncontiguous``, ``special-values``, ``degenerate-inputs``).

A :class:`Trial` is one case and seed plus the harness transforms each role gets; the
reference and the candidate run in separate children (two jobs started together, each
memoised by step so equal steps are shared with other checks), and the parent classifies
the pair (:func:`run_trials`): ``dropped`` (the reference or ``make_inputs`` raised, or the
reference went non-finite where that drops a case: task format v1, "if it or the reference
raises on a case that kws derived, kws drops that case"), ``pass``, ``mismatch`` (finite
errors beyond the tolerance), ``nonfinite`` (NaN/inf in the candidate where the reference
is finite) or ``error`` (the candidate raised, crashed or timed out on a legal input).
With the budget rule (``run_trials(..., budget_rule=True)``, :mod:`.budgetrule`) a mismatch
where the candidate is within kws's error budget of the float64 oracle is ``tolerance``:
the declared tolerance's question, not a failure of the candidate.

This module is private to the battery (``load_battery`` skips modules starting with ``_``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np

from workstation.analysis.compare import Comparison
from workstation.checks.support.budgetrule import Item, Verdict, judge_outcomes, prefetch_steps
from workstation.engine.context import CallOutcome, CheckContext, case_label
from workstation.protocol.extras.calls import CallExtra
from workstation.protocol.steps import Transform


@dataclass(eq=False)
class Trial:
    """One run of both roles: ``case``/``seed`` with per-role transforms; ``label`` names
    the variation in findings; ``info`` is check-specific JSON-ready detail."""

    case: dict[str, Any]
    seed: int
    label: str = ""
    ref_transforms: list[Transform] = field(default_factory=list)
    cand_transforms: list[Transform] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    #: monitors around the candidate's call (``PoisonMaskedLoads`` for derived shapes).
    cand_monitors: list[Any] = field(default_factory=list)


@dataclass(eq=False)
class TrialResult:
    """A classified trial (module doc): ``status`` is ``pass`` / ``dropped`` / ``mismatch``
    / ``nonfinite`` / ``error``; ``klass`` refines a failure for grouping and shrinking
    (``mismatch``, ``nan``, ``runtime-error:ValueError``, ``crash``, ``timeout``...).
    ``unjudged``: a ``dropped`` trial that was not a choice of the contract (the reference or
    ``make_inputs`` rejecting a derived input) but a limit of this run: a budget timeout, a
    reference that died, kws's own input transform failing, a candidate that was not run; a
    check reports such trials as not judged (``CheckContext.could_not_judge``), never as passed.
    ``budget``: the budget rule's :class:`~.budgetrule.Verdict` on a mismatch (None when the
    rule was not asked); status ``tolerance`` when it found the candidate within budget.
    Compared by identity (``eq=False``)."""

    trial: Trial
    ref: CallOutcome
    cand: CallOutcome | None
    status: str
    klass: str = ""
    comps: list[Comparison] = field(default_factory=list)
    reason: str = ""
    unjudged: bool = False
    budget: Verdict | None = None

    @property
    def failed(self) -> bool:
        return self.status in ("mismatch", "nonfinite", "error")

    def first_bad(self) -> tuple[int, Comparison] | None:
        """(output index, comparison) of the first failing output."""
        return next(((j, c) for j, c in enumerate(self.comps) if not c.ok), None)


def output_finite(out: CallOutcome) -> bool:
    """True when every floating output of a successful call is finite."""
    for t in out.outputs:
        v = t.values
        if v.dtype.kind in "fc" and not np.isfinite(v).all():
            return False
    return True


def _classify(ctx: CheckContext, t: Trial, ref: CallOutcome, cand: CallOutcome | None,
              drop_nonfinite_ref: bool) -> TrialResult:
    if not ref.ok:
        phase = ref.error.phase if ref.error is not None else None
        who = "make_inputs" if phase == "make_inputs" else "the reference"
        if phase == "transform":
            who = "the kws input transform"
        return TrialResult(t, ref, cand, "dropped", reason=f"{who} {ref.failure_text()}",
                           unjudged=ref.step is None or phase == "transform")
    if drop_nonfinite_ref and not output_finite(ref):
        return TrialResult(t, ref, cand, "dropped", reason="the reference's output is not finite")
    if cand is None:
        return TrialResult(t, ref, cand, "dropped", reason="the candidate was not run", unjudged=True)
    if not cand.ok:
        cls = cand.failure_class() or "runtime-error"
        if cls == "runtime-error":
            cls += ":" + (cand.error.type if cand.error is not None else "").rsplit(".", 1)[-1]
        return TrialResult(t, ref, cand, "error", cls, reason=cand.failure_text())
    comps = ctx.compare(ref, cand, t.case)
    if all(c.ok for c in comps):
        return TrialResult(t, ref, cand, "pass", comps=comps)
    nonfinite = False
    for c, e, g in zip(comps, ref.outputs, cand.outputs, strict=False):
        if c.ok or e.values.dtype.kind not in "fc" or g.values.shape != e.values.shape:
            continue
        if (np.isfinite(e.values) & ~np.isfinite(g.values)).any():
            nonfinite = True
    bad = next(c for c in comps if not c.ok)
    if nonfinite:
        return TrialResult(t, ref, cand, "nonfinite", "nan", comps, bad.reason)
    return TrialResult(t, ref, cand, "mismatch", "mismatch", comps, bad.reason)


def classify(ctx: CheckContext, t: Trial, ref: CallOutcome, cand: CallOutcome | None,
             drop_nonfinite_ref: bool = True) -> TrialResult:
    """Classify one reference/candidate pair already run (module doc): the rule
    :func:`run_trials` applies, for callers that ran the pair themselves (a replay of the
    battery's calls on another role)."""
    return _classify(ctx, t, ref, cand, drop_nonfinite_ref)


def apply_budget_rule(ctx: CheckContext, results: list[TrialResult]) -> None:
    """The budget rule (:mod:`.budgetrule`) on every ``mismatch`` of ``results``, in place:
    each gets its :class:`~.budgetrule.Verdict` in ``budget``; one within the budget becomes
    ``tolerance`` (no longer failed). The oracles of all of them run in one reference job."""
    todo: list[TrialResult] = []
    got: list[list[np.ndarray | None]] = []
    for r in results:
        if r.status == "mismatch" and r.cand is not None:
            todo.append(r)
            got.append([t.values for t in r.cand.outputs])
    if not todo:
        return
    items = [Item(r.trial.case, r.trial.seed, tuple(r.trial.ref_transforms), r.ref) for r in todo]
    verdicts = judge_outcomes(ctx, items, got, [r.comps for r in todo])
    for r, v in zip(todo, verdicts, strict=True):
        r.budget = v
        if v.available and v.within:
            r.status, r.klass = "tolerance", ""


def run_trials(ctx: CheckContext, trials: Sequence[Trial], *, drop_nonfinite_ref: bool = True,
               ref_extra: dict[str, Any] | None = None, budget_timeout: float | None = None,
               budget_rule: bool = False) -> list[TrialResult]:
    """Run every trial's reference and candidate (two children at once) and classify.

    ``drop_nonfinite_ref``: drop a trial whose reference output holds NaN/inf (the
    special-values rule unless the contract admits non-finite inputs). ``ref_extra``: more
    call-step keys for the reference (``send_inputs``...). ``budget_timeout``: a per-call
    wall-clock limit (s) of kws's own choosing (derived cases on the CPU, where the
    interpreter's cost is hard to predict); a call that exceeds it is dropped ("over the
    budget"), not charged to the candidate, and results are not memoised. ``budget_rule``:
    apply :func:`apply_budget_rule` to the mismatches.
    """
    # the oracles the rule may need run in the reference's job, beside its calls
    prefetch = (prefetch_steps(ctx, [(t.case, t.seed, tuple(t.ref_transforms)) for t in trials])
                if budget_rule and budget_timeout is None and trials else [])
    out = _run_trials(ctx, trials, drop_nonfinite_ref=drop_nonfinite_ref, ref_extra=ref_extra,
                      budget_timeout=budget_timeout, prefetch=prefetch)
    if budget_rule:
        apply_budget_rule(ctx, out)
    return out


def _run_trials(ctx: CheckContext, trials: Sequence[Trial], *, drop_nonfinite_ref: bool,
                ref_extra: dict[str, Any] | None, budget_timeout: float | None,
                prefetch: list[Any]) -> list[TrialResult]:
    if not trials:
        return []
    rkw = dict(ref_extra or {})
    ref_steps = [ctx.call_step("reference", t.case, t.seed, transforms=t.ref_transforms, **rkw) for t in trials]
    cand_steps = [ctx.call_step("candidate", t.case, t.seed, transforms=t.cand_transforms,
                                **({"monitors": list(t.cand_monitors)} if t.cand_monitors else {})) for t in trials]
    if budget_timeout is not None:
        def go(steps):
            return ctx.run_steps(steps, step_timeout=budget_timeout, budget=True)
    else:
        def go(steps):
            return ctx.calls(steps, memo=True)
    with ThreadPoolExecutor(max_workers=2) as pool:
        fr = pool.submit(go, ref_steps + prefetch)
        fc = pool.submit(go, cand_steps)
        refs, cands = fr.result()[: len(ref_steps)], fc.result()
    if budget_timeout is not None:
        out = []
        for t, r, c in zip(trials, refs, cands, strict=True):
            late = [who for who, o in (("reference", r), ("candidate", c)) if o.death_status == "timeout"]
            if late:
                out.append(TrialResult(t, r, c, "dropped", reason=f"the {' and '.join(late)} did not finish within "
                                       f"the {budget_timeout:.1f} s budget of one derived case (slow under the "
                                       f"interpreter, or a hang)", unjudged=True))
            else:
                out.append(_classify(ctx, t, r, c, drop_nonfinite_ref))
        return out
    # A timeout can be the machine's load rather than the code (children run at a lower
    # priority): rerun those calls once in a fresh child before believing it.
    for outs, steps in ((refs, ref_steps), (cands, cand_steps)):
        timed_out = [i for i, o in enumerate(outs) if o.death_status == "timeout"]
        if timed_out:
            again = ctx.calls([steps[i] for i in timed_out], memo=False)
            for i, o in zip(timed_out, again, strict=True):
                if o.death_status != "timeout":
                    outs[i] = o
    return [_classify(ctx, t, r, c, drop_nonfinite_ref) for t, r, c in zip(trials, refs, cands, strict=True)]


def same_failure(r: TrialResult, base: TrialResult | None) -> bool:
    """True when ``r`` fails the way its declared ``base`` case already fails (same class):
    the variation did not cause it, and ``correctness`` reports the declared case."""
    return base is not None and base.failed and r.failed and r.klass == base.klass


def declared_baselines(ctx: CheckContext, cases: list[dict[str, Any]], seed: int) -> dict[str, TrialResult]:
    """Each declared case's own run at ``seed`` (the steps ``correctness`` runs, shared by
    memo), keyed by :func:`case_key`."""
    res = run_trials(ctx, [Trial(dict(c), seed, "declared") for c in cases])
    return {case_key(r.trial.case): r for r in res}


def case_key(case: dict[str, Any]) -> str:
    """A hashable, order-independent key of a case."""
    return repr(sorted(case.items()))


def cheapest_per_dtype(ctx: CheckContext) -> list[dict[str, Any]]:
    """The cheapest declared case (smallest product of integer parameters) of each dtype,
    in declaration order (with ``--case``, that case)."""
    best: dict[Any, tuple[int, dict[str, Any]]] = {}
    for c in ctx.cases:
        size = 1
        for k, v in c.items():
            if k != "dtype" and isinstance(v, int) and not isinstance(v, bool):
                size *= max(v, 1)
        dt = c.get("dtype")
        if dt not in best or size < best[dt][0]:
            best[dt] = (size, c)
    return [dict(c) for _, c in best.values()]


# -- describing mismatches -------------------------------------------------------------------


def _dim_names(ndim: int) -> list[str]:
    if ndim == 1:
        return ["elements"]
    if ndim == 2:
        return ["rows", "cols"]
    return [f"dim{i}" for i in range(ndim)]


def region_phrase(c: Comparison) -> str:
    """Where the mismatches of ``c`` lie, in the output's terms: ``"cols 1024..1029 of 1030
    (the ragged last tile past 1024)"``, ``"every element"``, ``"rows 1..63 of 64"``."""
    reg, shape = c.bad_region, c.shape
    if not reg or not shape:
        return ""
    names = _dim_names(len(shape))
    parts = []
    full = 0
    for (lo, hi), n, nm in zip(reg.values(), shape, names, strict=False):
        if lo == 0 and hi == n - 1:
            full += 1
            if n > 1:
                parts.append(f"all {n} {nm}")
            continue
        p = f"{nm} {lo}..{hi} of {n}"
        if hi == n - 1 and lo > 0 and lo % 16 == 0:
            b = lo & -lo  # largest power of two dividing lo: the block size it is a multiple of
            p += f" (the ragged last tile past {lo})" if n - lo < b else f" (everything past the first {lo})"
        parts.append(p)
    if full == len(shape):
        if c.n_bad == c.numel:
            return "every element" if c.numel > 1 else "the only element"
        return f"{c.n_bad} elements spread over the whole output" + (f" ({', '.join(parts)})" if parts else "")
    return ", ".join(parts)


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        if math.isnan(x):
            return "nan"
        return f"{x:.6g}"
    return str(x)


def failure_text(r: TrialResult) -> str:
    """One clause for a failed trial: what went wrong, the worst element and where."""
    if r.status == "error":
        if r.cand is not None and r.cand.step is None:  # the child died or timed out
            return f"the candidate's call never returned: {r.reason} [{r.klass}]"
        return f"the candidate {r.reason} [{r.klass.split(':')[0]}]"
    hit = r.first_bad()
    if hit is None:
        return r.reason
    j, c = hit
    w = c.worst or {}
    out = f" output {j}:" if len(r.comps) > 1 else ""
    s = f"{out} {c.reason}"
    if "expected" in w and "got" in w:
        s += f"; worst at {w.get('index')}: expected {_fmt(w['expected'])}, got {_fmt(w['got'])}"
    where = region_phrase(c)
    if where:
        s += f"; mismatches in {where}"
    return s.strip()


def evidence_of(r: TrialResult) -> dict[str, Any]:
    """JSON-ready evidence of a trial: case, seed, transforms, inputs' layouts, comparisons."""
    t = r.trial
    ev: dict[str, Any] = {"case": t.case, "seed": t.seed, "label": t.label, "status": r.status}
    if t.info:
        ev.update(t.info)
    if t.cand_transforms:
        ev["candidate_transforms"] = msgspec.to_builtins(t.cand_transforms)
    if t.ref_transforms != t.cand_transforms:
        ev["reference_transforms"] = msgspec.to_builtins(t.ref_transforms)
    if r.cand is not None and r.cand.step is not None:
        ev["candidate_inputs"] = [
            {"index": d.index, "kind": d.kind, "dtype": d.dtype, "shape": list(d.shape), "stride": list(d.stride),
             "storage_offset": d.storage_offset, "contiguous": d.contiguous, "value": d.value}
            | ({"data_ptr_mod_16": d.data_ptr % 16} if d.data_ptr else {})
            for d in r.cand.payload(CallExtra).inputs
        ]
    if r.status == "error" and r.cand is not None:
        ev["failure_class"] = r.klass.split(":")[0]
        ev["error"] = r.cand.failure_evidence()
    if r.comps:
        ev["outputs"] = [c.evidence() for c in r.comps]
        hit = r.first_bad()
        if hit is not None:
            ev["mismatch_where"] = region_phrase(hit[1])
    if r.status == "dropped":
        ev["dropped_because"] = r.reason
    if r.budget is not None:
        ev["budget_rule"] = r.budget.evidence()
    return ev


def tolerance_finding(check: Any, ctx: CheckContext, results: list[TrialResult]) -> Any:
    """The ``info`` finding of ``check`` (a :class:`~workstation.engine.check.Check`) on the
    trials the budget rule gave to the tolerance (status ``tolerance``): what mismatched,
    and why it is not the candidate's."""
    r = results[0]
    head = f"{len(results)} case(s) kws derived" if len(results) > 1 else "a case kws derived"
    where = trial_line(r)
    summary = (f"{head} mismatch the declared tolerance with the candidate within kws's error budget: {where}: "
               f"{failure_text(r)}; {r.budget.text() if r.budget is not None else ''}")
    if len(results) > 1:
        summary += "; also " + ", ".join(trial_line(x) for x in results[1:4]) + (" ..." if len(results) > 4 else "")
    return check.finding(ctx, "info", summary, {"cases": [evidence_of(x) for x in results[:8]]},
                         case=r.trial.case, seed=r.trial.seed)


def trial_line(r: TrialResult) -> str:
    """``"M=64 K=1000 float32 seed 0"`` plus the trial's label."""
    s = f"case {case_label(r.trial.case)}, seed {r.trial.seed}"
    return f"{r.trial.label}: {s}" if r.trial.label else s


def oracle_judgement(ctx: CheckContext, r: TrialResult) -> dict[str, Any]:
    """Who is off in a mismatching trial: the reference re-run on float64 copies of the
    trial's inputs under the ``keep_float64`` dispatch mode (a float64 oracle even when the
    reference casts internally), and both results compared with it at the declared
    tolerance. ``available`` False (with ``why``) where there is no oracle (the reference
    raises, or still returns a narrower dtype on float64 inputs).

    Returns: ``{"available", "candidate_within", "reference_within",
    "candidate_max_err", "reference_max_err"}`` (errors against the oracle, max over outputs).
    """
    from workstation.protocol.steps import KeepFloat64, Upcast

    step = ctx.call_step("reference", r.trial.case, r.trial.seed,
                         transforms=[*r.trial.ref_transforms, Upcast(dtype="float64")], monitors=[KeepFloat64()])
    o = ctx.calls([step], memo=True)[0]
    if not o.ok or r.cand is None or len(o.outputs) != len(r.ref.outputs):
        return {"available": False, "why": o.failure_text() if not o.ok else "the oracle's outputs do not match"}
    if any(t.values.dtype.kind == "f" and t.dtype != "float64" for t in o.outputs):
        return {"available": False, "why": "no oracle: the reference returns a narrower dtype on float64 inputs"}
    cand_ok = ref_ok = True
    cmax = rmax = 0.0
    for e, g, ov in zip(r.ref.outputs, r.cand.outputs, o.outputs, strict=False):
        if e.values.dtype.kind != "f" or g.values.shape != ov.values.shape:
            continue
        tol = ctx.tolerance(r.trial.case, e.dtype)
        lim = tol.atol + tol.rtol * np.abs(ov.values)
        ce, re_ = np.abs(g.values - ov.values), np.abs(e.values - ov.values)
        cand_ok &= bool(np.all(ce <= lim))
        ref_ok &= bool(np.all(re_ <= lim))
        cmax, rmax = max(cmax, float(np.nanmax(ce)) if ce.size else 0.0), max(rmax, float(np.nanmax(re_)) if re_.size else 0.0)
    return {"available": True, "candidate_within": cand_ok, "reference_within": ref_ok,
            "candidate_max_err": cmax, "reference_max_err": rmax}
