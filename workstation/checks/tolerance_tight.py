"""``tolerance-tight``: a declared tolerance no correct output of the dtype can meet."""

from __future__ import annotations

from typing import Any

import numpy as np

from workstation.analysis.compare import Comparison, compare, unit_roundoff
from workstation.analysis.numerics import num, pow2_text, round_to, ulp
from workstation.checks.support.numaudit import REF_FAIL_RATIO, OutData, Run, audit, require_outputs
from workstation.engine.check import Check, Finding, NotJudged, register
from workstation.engine.context import CheckContext, case_label


def _tol_text(o: OutData) -> str:
    t = o.tol
    if t.ulp is not None:
        return f"ulp = {num(t.ulp)} (atol floor {num(t.atol)})"
    return f"atol = {num(t.atol)}, rtol = {num(t.rtol)}"


def _worst(c: Any) -> str:
    w = c.worst or {}
    if not isinstance(w.get("expected"), float):
        return ""
    return (f"worst at {w.get('index')}: oracle {num(w['expected'], 6)}, got {num(w['got'], 6)}, "
            f"error {num(w['abs_err'])} vs allowed {num(w['allowed'])}")


@register
class ToleranceTight(Check):
    """The declared tolerance rejects correct outputs: it asks for less error than the output
    dtype can represent, or less than the reference itself achieves against a float64 oracle.

    Catches:
        a declared tolerance no correct output can meet: tighter than the output
        dtype can represent, or tighter than the reference itself achieves.

    How:
        per declared case and seed, the declared tolerance is applied (torch.testing's
        rule) to (1) the float64 oracle correctly rounded to the output dtype (round to nearest,
        ties to even: the best output any kernel can return) and (2) the reference's own output,
        both against the oracle.

    Findings:
        | finding | severity |
        |---|---|
        | (1) fails: no output of the dtype can pass; with the numbers, the suggested tolerance and its derivation | `fail` |
        | (2) fails while the reference is within 8x its budget: the tolerance rejects a correct implementation | `fail` |
        | (2) fails with the reference beyond 8x its budget: the reference is at fault (`reference-suspect`) | `info` |
        | atol below half an ULP of the median output and rtol below the output's unit roundoff (or `ulp < 0.5`), on outputs that are not exact | `warn` |
        | the reference's and the rounded oracle's headroom under the declared tolerance | `info` |

    Example:
        (`matmul-fp16-tight`): `atol = rtol = 1e-6` on an fp16 GEMM: the correctly
        rounded oracle misses it on ~98% of the elements (half an fp16 ULP at |y| ~ 0.65 is
        2.4e-4); suggested `atol 4e-4, rtol 1.2e-3`.

    Source:
        torch.testing's per-dtype defaults exist because outputs are
        rounded to their dtype (IEEE 754: relative rounding error up to u = 2^-p); an fp16 GEMM
        compared at 1e-6 fails on every element however correct the kernel is.

    Limits:
        `skip` without a float64 oracle (a reference that computes at a fixed
        precision or raises on float64 inputs); the oracle is only as good as the reference's
        float64 path. CPU and GPU alike.

    Not judged when:
        no declared run has a float64 oracle (the reference raised on float64 inputs, or returns a
        fixed precision for them): `NotJudged` with the first reason; no floating-point output at
        all: `Skip`. A run without an oracle (or without a reference output) beside runs with one:
        not judged for that run, with the first run's reason; the runs with an oracle are judged
        (the `info` counts them). A step of the shared numerics audit (its
        lower-precision and re-run steps included) stopped by a limit that says nothing about the
        code, a library the reference imports missing, `make_inputs` or the reference broken on a
        declared case: `NotJudged`. A reference or oracle step that died is the task's problem
        (`skip` unless a finding fails).

    Forgeable:
        Measured in the job process: the outputs only (copied by the harness into the result files).
        Still forgeable from inside: nothing short of computing the right values: the harness's writer and the result path are watched, and a result file written by task code is refused.
    """

    id = "tolerance-tight"
    order = 12
    title = "Tolerance tighter than the dtype or the reference allows"

    def run(self, ctx: CheckContext) -> list[Finding]:
        runs = (a := audit(ctx)).declared()
        pairs = [(r, o) for r in runs for o in r.outs if o.oracle is not None]
        if not pairs:
            notes = require_outputs(runs)
            raise NotJudged("no float64 oracle: " + (notes[0] if notes else "the reference does not run on float64 inputs"))
        left = [r for r in runs if (r.outs and any(o.oracle is None for o in r.outs)) or (not r.outs and r.note)]
        if left:
            r = left[0]
            ctx.could_not_judge(
                f"{len(left)} of {len(runs)} declared run(s) have no float64 oracle for every floating output and were "
                f"not judged, e.g. {r.label}: {r.note or 'the float64 probe returned no matching output'}")
        findings: list[Finding] = []
        by_dtype: dict[str, list[tuple[Run, OutData]]] = {}
        for r, o in pairs:
            by_dtype.setdefault(o.dtype, []).append((r, o))
        for dtype, items in by_dtype.items():
            findings += self._judge(ctx, a, dtype, items)
        return findings

    def _judge(self, ctx: CheckContext, a: Any, dtype: str, items: list[tuple[Run, OutData]]) -> list[Finding]:
        out: list[Finding] = []
        impossible: list[tuple[Run, OutData, Comparison, Comparison]] = []
        ref_fails: list[tuple[Run, OutData, Comparison]] = []
        ref_suspect: list[tuple[Run, OutData, Comparison]] = []
        inexact = False
        best_use, ref_use = 0.0, 0.0
        for r, o in items:
            oracle = o.known_oracle  # run() judges only outputs with an oracle
            rounded = round_to(oracle, dtype)
            inexact |= bool(np.any(rounded[np.isfinite(oracle)] != oracle[np.isfinite(oracle)]))
            c_best = compare(oracle, rounded, o.tol, expected_dtype=dtype, got_dtype=dtype)
            c_ref = compare(oracle, o.ref, o.tol, expected_dtype=dtype, got_dtype=dtype)
            best_use = max(best_use, _use(c_best))
            ref_use = max(ref_use, _use(c_ref))
            if not c_best.ok:
                impossible.append((r, o, c_best, c_ref))
            elif not c_ref.ok:
                ratio = o.ref_err.budget_ratio if o.ref_err else None
                (ref_suspect if ratio is not None and ratio > REF_FAIL_RATIO else ref_fails).append((r, o, c_ref))
        case_dtype = items[0][0].case.get("dtype", dtype)
        sug = a.suggestion(case_dtype)
        sug_text = (f" A tolerance derived from the {dtype} error budget would be atol = {num(sug['atol'])}, "
                    f"rtol = {num(sug['rtol'])} (see the tolerance-loose suggestion)." if sug else "")
        if impossible:
            out.append(self._impossible(ctx, dtype, items, impossible, sug, sug_text))
        elif ref_fails:
            out.append(self._reference_fails(ctx, dtype, items, ref_fails, sug, sug_text))
        if ref_suspect and not impossible:
            out.append(self._reference_suspect(ctx, ref_suspect))
        if not impossible and not ref_fails:
            out += self._met(ctx, dtype, items, inexact, best_use, ref_use, sug_text)
        return out

    def _impossible(self, ctx: CheckContext, dtype: str, items: list[tuple[Run, OutData]],
                    impossible: list[tuple[Run, OutData, Comparison, Comparison]], sug: dict[str, Any] | None,
                    sug_text: str) -> Finding:
        """The ``fail`` finding where even the float64 oracle correctly rounded to ``dtype`` misses
        the declared tolerance: no output of that dtype can pass."""
        u_out = unit_roundoff(dtype)
        r, o, cb, cr = impossible[0]
        typical = _typical(o.known_oracle)
        half = 0.5 * float(ulp(np.array([typical]), dtype)[0]) if typical > 0 else 0.0
        runs_txt = ", ".join(sorted({x[0].label for x in impossible})[:4])
        deriv = (
            f"The declared tolerance for {dtype} outputs is {_tol_text(o)}: at the median output magnitude "
            f"|y| = {num(typical)} it allows {num(o.tol.atol + o.tol.rtol * typical)}. Rounding the exact "
            f"result to {dtype} (IEEE 754 round to nearest, u = {pow2_text(u_out)} = {num(u_out)}) already "
            f"costs up to half an ULP, {num(half)} at that magnitude. The float64 oracle (the reference on "
            f"inputs upcast to float64) correctly rounded to {dtype} misses the declared tolerance on "
            f"{cb.n_bad} of {cb.numel} elements of {r.label} ({_worst(cb)}); the reference itself misses it "
            f"on {cr.n_bad} elements (max error {num(cr.max_abs)}). No {dtype} output, however computed, "
            f"can pass.{sug_text}"
        )
        summary = (
            f"no {dtype} output can meet the declared {_tol_text(o)}: the float64 oracle correctly rounded to "
            f"{dtype} misses it on {cb.n_bad}/{cb.numel} elements of case {case_label(r.case)} seed {r.seed} "
            f"(max error {num(cb.max_abs)} vs allowed {num(float((cb.worst or {}).get('allowed', 0.0)))})")
        if len(impossible) > 1:
            summary += f"; {len(impossible)} of {len(items)} runs ({runs_txt}...)"
        return self.finding(
            ctx, "fail", summary,
            {"case": r.case, "seed": r.seed, "output": o.j, "dtype": dtype,
             "tolerance": o.tol.as_dict(), "rounded_oracle_vs_oracle": cb.evidence(),
             "reference_vs_oracle": cr.evidence(), "runs_failing": len(impossible), "runs": len(items),
             "suggested": {"atol": sug["atol"], "rtol": sug["rtol"]} if sug else None,
             "derivation": deriv},
            case=r.case, seed=r.seed)

    def _reference_fails(self, ctx: CheckContext, dtype: str, items: list[tuple[Run, OutData]],
                         ref_fails: list[tuple[Run, OutData, Comparison]], sug: dict[str, Any] | None,
                         sug_text: str) -> Finding:
        """The ``fail`` finding where the reference, within its error budget, misses the declared tolerance."""
        r, o, cr = ref_fails[0]
        e = o.known_ref_err
        deriv = (
            f"The declared tolerance for {dtype} outputs is {_tol_text(o)}. The reference, run on {r.label}, "
            f"differs from the float64 oracle (the same reference on inputs upcast to float64) by up to "
            f"{num(e.max_abs)} (relative {num(e.max_rel)}, {num(e.max_ulp)} ULP of {dtype}), which is "
            f"{num(e.budget_ratio)} of its error budget ({o.bud.formula_text()}): the reference is a correct "
            f"implementation, yet {cr.n_bad} of {cr.numel} of its elements fall outside the declared "
            f"tolerance ({_worst(cr)}). A candidate as accurate as the reference fails the same way; the "
            f"tolerance, not the kernel, decides.{sug_text}"
        )
        return self.finding(
            ctx, "fail",
            f"the reference itself fails the declared {_tol_text(o)} against a float64 oracle on "
            f"{len(ref_fails)} of {len(items)} runs: {cr.n_bad}/{cr.numel} elements of case "
            f"{case_label(r.case)} seed {r.seed} (max error {num(cr.max_abs)}), while it is within its "
            f"{dtype} error budget ({num(e.budget_ratio)} of it)",
            {"case": r.case, "seed": r.seed, "output": o.j, "dtype": dtype, "tolerance": o.tol.as_dict(),
             "reference_vs_oracle": cr.evidence(), "reference_error": e.as_dict(), "budget": o.bud.as_dict(),
             "suggested": {"atol": sug["atol"], "rtol": sug["rtol"]} if sug else None,
             "derivation": deriv},
            case=r.case, seed=r.seed)

    def _reference_suspect(self, ctx: CheckContext, ref_suspect: list[tuple[Run, OutData, Comparison]]) -> Finding:
        """The ``info`` finding where the reference misses the tolerance beyond its own error budget
        (the reference's fault, not the tolerance's)."""
        r, o, cr = ref_suspect[0]
        e = o.known_ref_err
        return self.finding(
            ctx, "info",
            f"the reference fails the declared {_tol_text(o)} against the float64 oracle on {r.label} "
            f"({cr.n_bad}/{cr.numel} elements), but its error is {num(e.budget_ratio)}x its budget: "
            f"the reference is at fault (see reference-suspect), not the tolerance",
            {"case": r.case, "seed": r.seed, "output": o.j, "reference_vs_oracle": cr.evidence(),
             "reference_error": e.as_dict(),
             "derivation": f"{o.bud.formula_text()}; the reference's error exceeds it by "
                           f"{num(e.budget_ratio)}x, beyond the {num(REF_FAIL_RATIO)}x kws allows a "
                           "correct reference."},
            case=r.case, seed=r.seed)

    def _met(self, ctx: CheckContext, dtype: str, items: list[tuple[Run, OutData]], inexact: bool,
             best_use: float, ref_use: float, sug_text: str) -> list[Finding]:
        """The findings where the reference meets the declared tolerance on every run: a ``warn``
        when the tolerance is below what ``dtype`` can represent, and the ``info`` on its headroom."""
        out: list[Finding] = []
        u_out = unit_roundoff(dtype)
        r, o = items[0]
        t = o.tol
        typical = max((_typical(oo.known_oracle) for _, oo in items), default=0.0)
        half = 0.5 * float(ulp(np.array([typical]), dtype)[0]) if typical > 0 else 0.0
        too_small = (t.ulp is not None and t.ulp < 0.5) or (t.ulp is None and t.atol < half and t.rtol < u_out)
        if inexact and too_small:
            deriv = (
                f"The declared tolerance for {dtype} outputs is {_tol_text(o)}. The median output magnitude is "
                f"|y| = {num(typical)}, where half an ULP of {dtype} is {num(half)}; the unit roundoff of {dtype} "
                f"is u = {pow2_text(u_out)} = {num(u_out)} (IEEE 754). atol is below that half ULP and rtol below "
                f"u, so the tolerance asks for less error than rounding to {dtype} introduces; it held on these "
                f"{len(items)} runs (the correctly rounded oracle used {num(100 * best_use)}% of it) only because "
                f"of where these particular values fall.{sug_text}"
            )
            out.append(self.finding(
                ctx, "warn",
                f"the declared {_tol_text(o)} asks for less than {dtype} can represent: atol < half an ULP of the "
                f"median output ({num(half)} at |y| = {num(typical)}) and rtol < u = {pow2_text(u_out)}",
                {"dtype": dtype, "tolerance": t.as_dict(), "median_abs_output": typical, "half_ulp": half,
                 "u_out": u_out, "derivation": deriv}))
        worst = max(items, key=lambda it: it[1].ref_err.max_abs if it[1].ref_err else 0.0)
        e = worst[1].known_ref_err
        out.append(self.finding(
            ctx, "info",
            f"{dtype}: the reference meets the declared {_tol_text(worst[1])} against the float64 oracle on all "
            f"{len(items)} runs (max error {num(e.max_abs)}, {num(e.max_ulp)} ULP, "
            f"using {num(100 * ref_use)}% of "
            f"the allowed error at its worst element; the correctly rounded oracle uses {num(100 * best_use)}%)",
            {"dtype": dtype, "runs": len(items), "reference_error": e.as_dict(),
             "reference_headroom_used": ref_use, "rounded_oracle_headroom_used": best_use,
             "derivation": f"Each run compares the reference (and the float64 oracle rounded to {dtype}) with "
                           f"the float64 oracle at the declared tolerance, elementwise: |got - oracle| <= atol + "
                           f"rtol*|oracle|. {worst[1].bud.formula_text()}."},
            case=worst[0].case, seed=worst[0].seed))
        return out

def _use(c: Any) -> float:
    """The largest abs_err / allowed of a comparison (its headroom used)."""
    w = c.worst or {}
    err, allowed = w.get("abs_err"), w.get("allowed")
    if not isinstance(err, float) or not isinstance(allowed, float):
        return 0.0
    if allowed <= 0:
        return 0.0 if err == 0 else float("inf")
    return err / allowed


def _typical(oracle: np.ndarray) -> float:
    a = np.abs(oracle[np.isfinite(oracle)])
    a = a[a > 0]
    return float(np.median(a)) if a.size else 0.0
