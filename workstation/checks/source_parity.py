"""``source-parity``: a translation or migration against its source, on the same inputs."""

from __future__ import annotations

from typing import Any

import numpy as np

from workstation.analysis.compare import compare
from workstation.checks.support.ragged import ragged_case
from workstation.checks.support.replay import (
    Replayed,
    interpreter_limited,
    outcome_class,
    replay,
    require_baseline,
)
from workstation.checks.support.structure import input_structure
from workstation.checks.support.trials import cheapest_per_dtype, evidence_of, failure_text
from workstation.engine.check import Check, Finding, NotJudged, register
from workstation.engine.context import CheckContext, case_label
from workstation.protocol.steps import CallStep, Nonfinite, SignedZeros

MAX_LISTED = 6


def _direct(ctx: CheckContext, it: Replayed) -> tuple[bool, list[dict[str, Any]], str]:
    """Candidate against the source (expected) at the task's tolerance, NaN equal to NaN at
    the same place: (close, per-output evidence, first reason)."""
    c, o = it.cand.cand, it.other_out
    if c is None or not c.ok or not o.ok:
        return False, [], ""
    evs: list[dict[str, Any]] = []
    ok, reason = True, ""
    for j in range(max(len(c.outputs), len(o.outputs))):
        if j >= len(c.outputs) or j >= len(o.outputs):
            return False, evs, f"the source returns {len(o.outputs)} outputs, the candidate {len(c.outputs)}"
        e, g = o.outputs[j], c.outputs[j]
        cmp = compare(e.values, g.values, ctx.tolerance(it.case, e.dtype), expected_dtype=e.dtype, got_dtype=g.dtype,
                      nonfinite_ok=True)
        ev = cmp.evidence()
        ev["bitwise_equal"] = bool(e.values.shape == g.values.shape and e.dtype == g.dtype
                                   and np.array_equal(e.values, g.values, equal_nan=True))
        evs.append(ev)
        if not cmp.ok and ok:
            ok, reason = False, cmp.reason
    return ok, evs, reason


#: one call where candidate and source differ: the call, the per-output evidence, the first reason.
Diff = tuple[Replayed, list[dict[str, Any]], str]


def _ev_of(it: Replayed, evs: list[dict[str, Any]], reason: str) -> dict[str, Any]:
    """The evidence of one call where candidate and source differ."""
    return {"case": it.case, "seed": it.seed, "input": it.label, "candidate_vs_source": evs,
            "difference": reason, "candidate": {"class": outcome_class(it.cand), **evidence_of(it.cand)},
            "source": {"class": outcome_class(it.other), **evidence_of(it.other)}}


def _extra_calls(ctx: CheckContext) -> list[tuple[CallStep, str]]:
    """The candidate steps run beside the battery's (a ragged case, non-finite values, signed
    zeros on the cheapest declared case), with their labels; none under a case filter."""
    task = ctx.task
    seed = ctx.seeds[0]
    base = cheapest_per_dtype(ctx)[0]
    extra: list[tuple[CallStep, str]] = []
    if not ctx.case_filter:
        rag = ragged_case(base, task.params)
        if rag is not None:
            extra.append((ctx.call_step("candidate", rag, seed), "ragged sizes"))
        # [inputs] keep_structure and the structure make_inputs always shows are kept
        st = input_structure(ctx, base)
        args = st.args([i for i in st.floats if i not in task.out_args])
        if args:
            keep = st.keep_for(args)
            extra.append((ctx.call_step("candidate", base, seed,
                                        transforms=[Nonfinite(seed=seed, args=args, keep=keep)]),
                          "one nan, +inf, -inf per row"))
            extra.append((ctx.call_step("candidate", base, seed,
                                        transforms=[SignedZeros(seed=seed, args=args, keep=keep)]),
                          "signed zeros"))
    return extra


def _compare_all(ctx: CheckContext, items: list[Replayed]) -> tuple[int, int, list[Diff], list[Replayed]]:
    """Candidate against source on every replayed call: how many agree bitwise, how many
    within the tolerance, the calls that differ, and those where the source did not return."""
    agree_bits, agree_tol = 0, 0
    diffs: list[Diff] = []
    broken_source = []
    for it in items:
        if not it.other_out.ok:
            broken_source.append(it)
            continue
        if it.cand.cand is None or not it.cand.cand.ok:
            diffs.append((it, [], "the candidate " + (it.cand.reason or "raised")))
            continue
        ok, evs, reason = _direct(ctx, it)
        if ok:
            if evs and all(e.get("bitwise_equal") for e in evs):
                agree_bits += 1
            else:
                agree_tol += 1
            continue
        diffs.append((it, evs, reason))
    return agree_bits, agree_tol, diffs, broken_source


def _sort_diffs(diffs: list[Diff]) -> tuple[list[Diff], list[Diff], list[Diff], list[Diff]]:
    """The differing calls by the reference's verdict: translation errors (the source passes,
    the candidate not), changed behaviour (the reverse), both failing, and outside the verdict
    (dropped)."""
    translation_errors, changed, both, outside = [], [], [], []
    for it, evs, reason in diffs:
        c_ok, s_ok = it.cand.status == "pass", it.other.status == "pass"
        if it.other.status == "dropped" or it.cand.status == "dropped":
            outside.append((it, evs, reason))
        elif s_ok and not c_ok:
            translation_errors.append((it, evs, reason))
        elif c_ok and not s_ok:
            changed.append((it, evs, reason))
        else:
            both.append((it, evs, reason))
    return translation_errors, changed, both, outside


@register
class SourceParity(Check):
    """A translation or migration that does not do what its source does, on the same inputs.

    Scheduled for:
        `kind = "translation"` / `"migration"`.

    Catches:
        a translation that
        does not do what its source does on the same inputs.

    How:
        (phase `after`): the source is `entry.baseline` (task format v1: "the source of a
        translation"; the display-only `original` file never runs; its backend is `[backends]
        baseline`); the battery's candidate calls (every failing one) plus a
        ragged case, one NaN/+inf/-inf per row and signed zeros are run on the source and compared
        with the candidate directly (task tolerance, NaN equal to NaN at the same place), not only
        each against the reference. The ragged case moves every integer size of the cheapest
        declared case to a legal size no power-of-two block divides (the masking of tails).

    Findings:
        | finding | severity |
        |---|---|
        | the source matches the reference and the candidate does not | `fail` |
        | outside the reference's verdict (non-finite inputs) they differ, naming the difference (e.g. the source propagates NaN, the candidate returns 0) | `warn` where the contract admits non-finite inputs, else `info` |
        | the candidate matches where the source does not (the translation changed, or fixed, the source's behaviour); both fail (`correctness` and the rest report the candidate) | `info` |
        | how many calls agree bitwise / within tolerance | `info` |

    Example:
        (`rmsnorm-pallas2triton`): `the source gets case M=32 N=1024 float16 seed 0
        (declared case) right and the candidate does not: 6140 of 32768 elements ...`.

    Source:
        ports that drop an upcast, a mask on the tail, or NaN
        propagation that the source had (e.g. a Pallas kernel's `astype(jnp.float32)` lost in
        the Triton version), which a comparison against a lenient reference alone can miss.

    Limits:
        CUDA sources run on a GPU or under kws's CPU emulation of CUDA (g++, the `cuda_emulation`
        setting; otherwise `skip` on the CPU, with the reason); Pallas sources
        need JAX; a source written for an old toolchain runs only where that toolchain is (the
        task ships a compatibility shim or the check is `skip`); at most 40 passing calls
        replayed on the CPU (every failing candidate call is replayed, whatever their number).

    Not judged when:
        the source's backend cannot run here (a CUDA source without a GPU or the CPU emulation, a Pallas source
        without the `pallas` extra, a library it imports is not installed), or the source
        returned on none of the replayed calls (`NotJudged`); calls not run on the source
        (skipped after an earlier hang) with no translation error elsewhere (`could_not_judge`).

    Forgeable:
        Measured in the job process: the outputs only (copied by the harness into the result files).
        Still forgeable from inside: nothing short of computing the right values: the harness's writer and the result path are watched, and a result file written by task code is refused.
    """

    id = "source-parity"
    order = 34
    title = "Translation/migration vs its source, same inputs"
    phase = "after"
    kinds = ("translation", "migration")

    def run(self, ctx: CheckContext) -> list[Finding]:
        require_baseline(ctx, "no entry.baseline: the source of the translation is not runnable (the `original` file "
                         "is display-only), so candidate and source cannot be compared directly",
                         who="the source", where=", entry.baseline")
        items = replay(ctx, "baseline", _extra_calls(ctx))
        agree_bits, agree_tol, diffs, broken_source = _compare_all(ctx, items)
        translation_errors, changed, both, outside = _sort_diffs(diffs)
        findings = self._differences(ctx, translation_errors, changed, both, outside)
        findings += self._not_compared(ctx, items, broken_source)
        compared = agree_bits + agree_tol + len(diffs)
        if not compared:
            first = broken_source[0] if broken_source else None
            raise NotJudged(f"the source returned on none of the {len(items)} replayed calls"
                            + (f" (e.g. {first.line()}: {first.other_out.failure_text()})" if first else "")
                            + ": candidate and source were never compared")
        unrun = [it for it in broken_source if not it.other_ran]
        if unrun and not translation_errors:
            ctx.could_not_judge(f"{len(unrun)} call(s) were not run on the source (e.g. {unrun[0].line()}: "
                                 f"{unrun[0].other_out.death})")
        findings.append(self.finding(
            ctx, "info",
            f"candidate vs source ({ctx.backend_of('candidate')} vs {ctx.backend_of('baseline')}) on the same inputs: "
            f"{compared} of {len(items)} calls compared directly: {agree_bits} bitwise equal, {agree_tol} within the "
            f"tolerance, {len(diffs)} differ ({', '.join(sorted({it.label.split(':')[0] for it in items}))})",
            {"compared": compared, "bitwise_equal": agree_bits, "within_tolerance": agree_tol, "differ": len(diffs),
             "calls": [{"case": it.case, "seed": it.seed, "input": it.label} for it in items],
             "cases": sorted({case_label(it.case) for it in items})}))
        return findings

    def _differences(self, ctx: CheckContext, translation_errors: list[Diff], changed: list[Diff],
                     both: list[Diff], outside: list[Diff]) -> list[Finding]:
        """The findings on the calls where candidate and source differ, one per kind of difference."""
        findings: list[Finding] = []
        if translation_errors:
            it, evs, reason = translation_errors[0]
            findings.append(self.finding(
                ctx, "fail",
                f"the source gets {it.line()} right and the candidate does not: {failure_text(it.cand)}; candidate vs "
                f"source on the same inputs: {reason or 'the candidate did not return'}"
                + (f" ({len(translation_errors)} such calls)" if len(translation_errors) > 1 else ""),
                {**_ev_of(it, evs, reason), "all": [_ev_of(*t) for t in translation_errors[:MAX_LISTED]]},
                case=it.case, seed=it.seed))
        if changed:
            it, evs, reason = changed[0]
            findings.append(self.finding(
                ctx, "info",
                f"the candidate matches the reference where its source does not, on {len(changed)} call(s) (e.g. "
                f"{it.line()}: the source {failure_text(it.other)}): the translation changes the source's behaviour",
                {**_ev_of(it, evs, reason), "all": [_ev_of(*t) for t in changed[:MAX_LISTED]]},
                case=it.case, seed=it.seed))
        if both:
            it, evs, reason = both[0]
            findings.append(self.finding(
                ctx, "info", f"candidate and source both fail against the reference, differently, on {len(both)} "
                f"call(s) (e.g. {it.line()}: {reason})", {"all": [_ev_of(*t) for t in both[:MAX_LISTED]]},
                case=it.case, seed=it.seed))
        if outside:
            it, evs, reason = outside[0]
            sev = "warn" if ctx.task.contract.nonfinite_inputs else "info"
            findings.append(self.finding(
                ctx, sev, f"outside the reference's verdict ({it.other.reason or it.cand.reason}), candidate and source "
                f"differ on {len(outside)} call(s): {it.line()}: {reason}"
                + ("" if sev == "warn" else " (non-finite inputs are outside the spec's domain: semantics, not a defect)"),
                {"all": [_ev_of(*t) for t in outside[:MAX_LISTED]]}, case=it.case, seed=it.seed))
        return findings

    def _not_compared(self, ctx: CheckContext, items: list[Replayed], broken_source: list[Replayed]) -> list[Finding]:
        """The findings on calls left out of the comparison: the source did not return, or the
        candidate's call hit a limit of kws's interpreter."""
        findings: list[Finding] = []
        if broken_source:
            it = broken_source[0]
            findings.append(self.finding(
                ctx, "info", f"the source itself did not return on {len(broken_source)} of {len(items)} calls (e.g. "
                f"{it.line()}: {it.other_out.failure_text()}): not compared there",
                {"calls": [{"case": b.case, "seed": b.seed, "input": b.label, **b.other_out.failure_evidence()}
                           for b in broken_source[:MAX_LISTED]]}))
        limited = interpreter_limited(ctx)
        if limited:
            s0, why = limited[0]
            findings.append(self.finding(
                ctx, "info", f"{len(limited)} candidate call(s) of the battery left out of the comparison: {why} "
                f"(e.g. case {case_label(dict(s0.case))}; pallas-kernel leaves them not judged): a limit of kws's "
                "interpreter, not a difference from the source",
                {"calls": [{"case": dict(s.case), "seed": int(s.seed), "reason": w} for s, w in limited[:MAX_LISTED]]}))
        return findings
