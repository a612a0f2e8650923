"""``content-follow``: every output follows the content of the inputs it was given."""

from __future__ import annotations

from typing import Any

import numpy as np

from workstation.checks.support.audit import AuditRun, CallJudgement, run_audit, variant_text
from workstation.engine.check import Check, Finding, NotJudged, register
from workstation.engine.context import CheckContext, case_label
from workstation.protocol.extras.audit import AuditCall

#: writes that leave the tensor's version counter as it was.
NO_BUMP = ("data", "numpy", "storage")


@register
class ContentFollow(Check):
    """Every output must match the reference on the inputs it was given, however and whenever
    they were written.

    Catches:
        any result that is not a function of the input's content: a cache keyed on what the
        caller's writes leave unchanged (the storage pointer, `id()`, the shape, the tensor
        version counter, a fingerprint of a few sampled elements, the first row), a result
        replayed from an earlier call, a candidate honest for its first calls and different
        after more calls than a correctness run makes, a wrong answer served to calls made
        right after another, or from a caller that looks like a benchmark.

    How:
        the shared invariant audit (`audit_series`, `workstation/harness/audit.py`) on the
        audit case (the smallest declared case with its integer parameters halved within
        `[params]`): the candidate is called many times in one process on variants of the
        inputs (three seeds' inputs, every element new; and the first seed's with one element,
        one row or the last element replaced by another seed's values there, at places drawn
        at run time); each variant reaches the candidate through one of seven write paths (new
        tensors; the previous call's tensors rewritten by `copy_`, through `.data`, through a
        numpy view or by a raw storage copy, the last three leaving the version counter as it
        was; new tensors allocated right after the old ones were freed; the previous values at
        a new address) and from one of ten contexts, in an order the child draws at run time;
        halfway, a long run of plain calls (more calls than any other loop of the run). Every
        call's outputs are compared with the reference on exactly its inputs (the edits travel
        to the reference as `splice` transforms), at the task's tolerance. A mismatch where the candidate is within kws's error budget of the float64 oracle at every
        element (and no more than 32 roundings per term off it, what a correct implementation
        stays well within) is the declared tolerance's, not the candidate's: the budget rule
        (`workstation/checks/support/budgetrule.py`; [numerics.md](numerics.md)) reports it as `info`.

    Findings:
        | finding | severity |
        |---|---|
        | a call's output mismatches the reference on its own inputs while the plain calls on new tensors match (the call, its inputs, write path and context; the worst element; which earlier inputs' result it returned instead, where it returned one) | `fail` |
        | a mismatch against the declared tolerance with the candidate within kws's error budget of the float64 oracle (the budget rule: the tolerance is too tight at the audit case, tolerance-tight's subject), with the budget, the candidate's error over it and what two correct implementations may differ by | `info` |
        | every audited call matches the reference of its own inputs (calls, variants, write paths) | `info` |

    Example:
        (a cache keyed on the data pointer and `_version`): `case N=512 float32 (the audit
        case): call 14 of 60 (before the long run) on seed 1002's inputs, delivered as a write
        through a numpy view of the previous call's tensors (same tensors and addresses,
        version counter bumped on 0 of 2), called plainly: 512 of 512 elements outside
        atol=1e-05, rtol=1e-05 ...; it returned the result of seed 1001's inputs (call 13's)`.

    Source:
        GPU MODE reference-kernels PRs #104 and #159-#162 (results cached on input pointers and
        replayed), CUDA-L1 (pointer caches defeated by fresh addresses), pygpubench (caches
        that tell warm-up from timed calls); PyTorch's version counter is bumped only by
        in-place ops through the tensor (`.data`, numpy views and raw copies do not).

    Limits:
        one case, small; a cache keyed on the whole content is correct by construction and
        not reported (its timing is `benchmark-bias`'s). A switch after more calls than the
        audit makes (the long run plus the mixed calls) is not seen. Edits are made only to
        float inputs without structure an edit would break (sorted, symmetric, rows summing to
        one, integer-valued).

    Not judged when:
        the candidate's plain call on the audit case fails (edge-shapes and correctness judge
        it), plain calls on new tensors already mismatch there (a tolerance or shape question,
        not an invariant), the audit was stopped by kws's CPU budget, or the reference fails on
        a variant (those calls are left out).

    Forgeable:
        Measured in the job process: the harness writes the inputs and reads the outputs.
        Still forgeable from inside: a candidate that reads kws's own module state to tell the audit from other calls; one that caches on the whole content.
    """

    id = "content-follow"
    order = 55
    title = "Outputs follow the inputs' content"

    def run(self, ctx: CheckContext) -> list[Finding]:
        run = run_audit(ctx)
        case = run.spec.case
        label = f"case {case_label(case)} (the audit case)"
        for why in run.unjudged:
            ctx.could_not_judge(f"{label}: {why}; its calls were not compared")
        base = [j for j in run.judged if j.call.path == "fresh" and j.call.context == "plain" and j.call.error is None]
        if base and not any(j.ok for j in base):
            raise NotJudged(f"{label}: even plain calls on new tensors mismatch the reference there "
                            f"({_worst(base[0])}); a question of the case or the tolerance, not of this invariant")
        bad = [j for j in run.judged if j.call.error is None and not j.ok]
        tol = [j for j in run.judged if j.call.error is None and not j.matches and j.ok]
        notes = [self._tolerance(ctx, run, label, tol)] if tol else []
        if not bad:
            return notes + [self.finding(
                ctx, "info",
                f"{label}: all {len(run.judged)} audited calls match the reference on their own inputs "
                f"({len(run.extra.variants)} variants, write paths {_counts(run, 'path')}, {run.extra.long_run} calls "
                "in a row in the long run)",
                {"case": case, "calls": len(run.judged), "variants": [variant_text(v) for v in run.extra.variants]},
                case=case)]
        first = bad[0]
        instead = _returned_instead(ctx, run, first)
        pattern = _pattern(run, bad)
        summary = (f"{label}: {run.describe(first.call)}: {_worst(first)}"
                   + (f"; it returned {instead}" if instead else "")
                   + f"; {len(bad)} of {len(run.judged)} audited calls mismatch{pattern}")
        ev: dict[str, Any] = {
            "case": case, "call": _call_ev(run, first), "comparisons": [c.evidence() for c in first.comps if not c.ok][:4],
            "mismatching_calls": [_call_ev(run, j) for j in bad[:12]], "calls": len(run.judged),
            "returned_instead": instead or None}
        return [*notes, self.finding(ctx, "fail", summary, ev, case=case)]

    def _tolerance(self, ctx: CheckContext, run: AuditRun, label: str, tol: list[CallJudgement]) -> Finding:
        """The info on calls that miss the declared tolerance within kws's error budget."""
        first = tol[0]
        why = first.budget.text() if first.budget is not None else ""
        return self.finding(
            ctx, "info",
            f"{label}: {len(tol)} audited call(s) miss the declared tolerance with the candidate within kws's error "
            f"budget of the float64 oracle (first: {run.describe(first.call)}: {_worst(first)}); {why}",
            {"calls": [_call_ev(run, j) | {"budget_rule": j.budget.evidence() if j.budget else None}
                       for j in tol[:8]]},
            case=run.spec.case)


def _worst(j: CallJudgement) -> str:
    c = next((c for c in j.comps if not c.ok), None)
    return c.reason if c is not None else "mismatch"


def _counts(run: AuditRun, attr: str) -> str:
    from collections import Counter

    n = Counter(getattr(j.call, attr) for j in run.judged)
    return ", ".join(f"{k} x{v}" for k, v in sorted(n.items()))


def _call_ev(run: AuditRun, j: CallJudgement) -> dict[str, Any]:
    c = j.call
    return {"call": c.index + 1, "phase": c.phase, "variant": variant_text(run.extra.variants[c.variant]),
            "path": c.path, "path_note": c.path_note, "context": c.context, "frame": c.frame or None,
            "ok": j.ok}


def _returned_instead(ctx: CheckContext, run: AuditRun, j: CallJudgement) -> str:
    """Which other variant's reference the call's output matches (a replayed or stale result):
    ``"the result of seed 1001's inputs (call 13's)"``, or ""."""
    got = run.values(j.call, 0)
    if got is None:
        return ""
    earlier = {c.variant: c.index for c in run.extra.calls if c.index < j.call.index}
    for k, ref in enumerate(run.refs):
        if k == j.call.variant or not ref.ok or not ref.outputs or ref.outputs[0].values.shape != got.shape:
            continue
        tol = ctx.tolerance(run.spec.case, ref.outputs[0].dtype)
        with np.errstate(invalid="ignore"):
            close = np.isclose(got, ref.outputs[0].values, atol=tol.atol, rtol=tol.rtol, equal_nan=True).all()
        if close:
            where = f" (call {earlier[k] + 1}'s)" if k in earlier else ""
            return f"the result of {variant_text(run.extra.variants[k])}{where}"
    return ""


def _pattern(run: AuditRun, bad: list[CallJudgement]) -> str:
    """What the mismatching calls have in common, in words ("" when nothing stands out)."""
    calls: list[AuditCall] = [j.call for j in bad]
    good = [j.call for j in run.judged if j.ok]
    parts = []
    if all(c.path in NO_BUMP for c in calls) and good:
        parts.append("only after writes that leave the tensor's version counter as it was")
    elif all(c.path != "fresh" for c in calls) and any(c.path == "fresh" for c in good):
        parts.append("only when the inputs reuse earlier tensors or addresses")
    first_long = min((c.index for c in calls if c.phase != "first"), default=None)
    if first_long is not None and all(c.phase != "first" for c in calls):
        parts.append(f"only from call {first_long + 1} on, after {first_long} calls in this process")
    contexts = {c.context for c in calls}
    if len(contexts) == 1 and good and next(iter(contexts)) != "plain":
        parts.append(f"only when {next(iter(contexts))}")
    return (": " + "; ".join(parts)) if parts else ""
