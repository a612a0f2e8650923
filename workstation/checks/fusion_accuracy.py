"""``fusion-accuracy``: a fused kernel less accurate than the unfused code it replaces."""

from __future__ import annotations

from typing import Any

from workstation.analysis.compare import is_float
from workstation.analysis.numerics import FA_FACTOR, error_stats, num, ratio_floor
from workstation.checks.support.numaudit import OutData, Run, audit
from workstation.checks.support.replay import require_baseline
from workstation.engine.check import Check, Finding, NotJudged, register
from workstation.engine.context import CallOutcome, CheckContext, case_label

#: the margin: the fused error may be up to MARGIN x the unfused error plus the floor.
MARGIN = FA_FACTOR


def _row(r: Run, o: OutData, c: CallOutcome, b: CallOutcome) -> dict[str, Any] | None:
    """One output of one run judged against both margins (None when it has no float64 oracle
    or the shapes do not match it): the errors, the limits and whether it is within them."""
    if o.oracle is None or o.j >= len(c.outputs) or o.j >= len(b.outputs):
        return None
    cv, bv = c.outputs[o.j].values, b.outputs[o.j].values
    if cv.shape != o.oracle.shape or bv.shape != o.oracle.shape:
        return None
    ce = error_stats(cv, o.oracle, o.dtype, o.B)
    be = error_stats(bv, o.oracle, o.dtype, o.B)
    fl = ratio_floor(o.oracle, o.dtype, o.B)
    floor = fl["floor"]
    limit = MARGIN * be.max_abs + floor
    # per element, in units of its error budget B (scale-aware: an error at a
    # small |y| that max-abs hides behind the rounding of the largest |y|)
    cb, bb = ce.budget_ratio, be.budget_ratio
    blimit = MARGIN * bb + 1.0 if bb is not None else None
    bad_abs = ce.max_abs > limit
    bad_bud = cb is not None and blimit is not None and cb > blimit
    bad = bad_abs or bad_bud or (ce.nonfinite > be.nonfinite)
    return {
        "case": r.case, "seed": r.seed, "output": o.j, "fused_err": ce.max_abs, "unfused_err": be.max_abs,
        "floor": floor, "floor_parts": fl, "limit": limit, "ratio": ce.max_abs / be.max_abs if be.max_abs else None,
        "fused_budget_ratio": cb, "unfused_budget_ratio": bb, "budget_limit": blimit,
        "beyond_abs": bad_abs, "beyond_budget": bad_bud,
        "ok": not bad, "fused": ce.as_dict(), "unfused": be.as_dict(),
        "fused_nonfinite": ce.nonfinite, "unfused_nonfinite": be.nonfinite}


def _beyond_text(w: dict[str, Any]) -> str:
    """What the worst row beyond the margin shows: its max errors, or its worst element in error budgets."""
    if w["beyond_abs"] or not w["beyond_budget"]:
        ratio = f"{w['ratio']:.3g}x" if w["ratio"] is not None else "infinitely"
        return (f"max error against the float64 oracle {num(w['fused_err'])} vs the baseline's "
                f"{num(w['unfused_err'])} ({ratio}; the margin allows {num(w['limit'])} = {MARGIN:g}x + floor "
                f"{num(w['floor'])})")
    fw = w["fused"].get("worst") or {}
    return (f"its worst element is {num(w['fused_budget_ratio'])} error budgets off the float64 oracle, "
            f"the baseline's {num(w['unfused_budget_ratio'])} (the margin allows {num(w['budget_limit'])}"
            f"; at {fw.get('index')}: oracle {num(fw.get('oracle', 0.0))}, fused {num(fw.get('got', 0.0))}"
            f"; max abs errors fused {num(w['fused_err'])}, unfused {num(w['unfused_err'])})")


@register
class FusionAccuracy(Check):
    """At a production dtype, the fused kernel's error against the float64 oracle exceeds
    the unfused baseline's error at that dtype by more than the margin.

    Scheduled for:
        `kind = "fusion"` with `entry.baseline` (the unfused ops).

    Catches:
        a fused kernel less accurate than the unfused ops it replaces, even within a lenient
        tolerance. A fusion keeps intermediates in registers instead of rounding them to memory,
        so it should be at least as accurate as the chain of ops it replaces; a fused kernel that
        computes an intermediate in half precision, cancels `1 + tanh(u)` in fp16, or drops an
        upcast is less accurate even where it still passes a lenient tolerance.

    How:
        at each production dtype (`[contract] dtypes`, else the declared cases' dtypes), on every
        declared case and seed of that dtype and on the declared cases re-run at a contract dtype
        no case declares (the numerics audit's runs, shared with `precision-regime`), kws computes
        the float64 oracle (the reference on float64 copies of the inputs) and runs the baseline
        on the same inputs. Per output it compares `max|fused - oracle|` with the margin
        `2 max|unfused - oracle| + floor` (the rule of FlashAttention's tests,
        Dao-AILab/flash-attention `hopper/test_flash_attn.py`) with a rounding floor that keeps a
        (nearly) exact baseline from demanding (nearly) zero error of any other evaluation order:
        the larger of FlashAttention's `2*max|fl(fl(o + 0.3) - 0.3) - o|` and one error budget
        `max B` (`B = rho*S + u_out*|y| + tau`, `rho = min(gamma~_K, gamma_K)`, `gamma_K =
        K*u/(1 - K*u)` of the accumulator's unit roundoff and the reduction length K; docs/numerics.md,
        "Ratio rules"): a fused fp32 kernel 1.0e-6 from the oracle beside a baseline's 9e-8 is
        within the margin when its budget allows 1.0e-6),
        and, element by element in units of the error budget B of
        `workstation.analysis.numerics` (an error at a small `|y|` that the maximum absolute
        error hides behind the rounding of the largest `|y|`), `max(|fused - oracle|/B)` with
        `2 max(|unfused - oracle|/B) + 1`.

    Findings:
        | finding | severity |
        |---|---|
        | either margin exceeded on any run of a dtype: the worst run, both errors, their ratio, the worst element | `fail` |
        | per dtype, within both margins: the ratio of the errors | `info` |

    Example:
        (`bias-gelu-halfmath`): `float16: ... its worst element is 140 error budgets off
        the float64 oracle, the baseline's 4.24 (the margin allows 9.48 ...)`.

    Limits:
        needs an oracle (a reference that computes in float64 for float64 inputs) and a
        runnable baseline; on the CPU the numbers come from the Triton interpreter (numpy order
        of reductions, true fp32 dots), so a GPU's TF32 or reduction order is not measured here.

    Not judged when:
        a production dtype had no run with a float64 oracle and both sides returning (the
        baseline or the fused kernel raised, no oracle): that dtype is not judged
        (`could_not_judge`, never `pass`; the other dtypes are judged); when no dtype had one,
        or the baseline's backend cannot run here, the check is `NotJudged`.

    Forgeable:
        Measured in the job process: the outputs only (copied by the harness into the result files).
        Still forgeable from inside: nothing short of computing the right values: the harness's writer and the result path are watched, and a result file written by task code is refused.
    """

    id = "fusion-accuracy"
    order = 36
    title = "Fusion: error within the unfused baseline's, per dtype"
    kinds = ("fusion",)

    def run(self, ctx: CheckContext) -> list[Finding]:
        task = ctx.task
        require_baseline(ctx, "a fusion task without entry.baseline: there are no unfused ops to compare the error with")
        dtypes = [d for d in (task.contract.dtypes or dict.fromkeys(c["dtype"] for c in ctx.cases)) if is_float(d)]
        per, notes = self._rows(ctx, dtypes)
        findings: list[Finding] = []
        rule = (f"max|fused - oracle| <= {MARGIN:g} x max|unfused - oracle| + floor, and "
                f"max(|fused - oracle| / B) <= {MARGIN:g} x max(|unfused - oracle| / B) + 1 (B: the per-element "
                "error budget)")
        if not dtypes:
            raise NotJudged("no floating production dtype to judge (neither [contract] dtypes nor the declared cases "
                            "name one)")
        unjudged = {d: f"{d}: no run with a float64 oracle and both sides returning"
                    + (f" ({'; '.join(n for n in notes if d in n)[:300] or notes[0][:300]})" if notes else "")
                    for d in dtypes if not per[d]}
        if len(unjudged) == len(dtypes):
            raise NotJudged("nothing of its subject ran: " + "; ".join(unjudged.values()))
        for d in dtypes:
            rows = per[d]
            if not rows:
                ctx.could_not_judge(unjudged[d])
                continue
            ev = {"dtype": d, "rule": rule, "margin": MARGIN, "runs": rows, "notes": notes}
            findings.append(self._dtype_finding(ctx, d, rows, rule, ev))
        return findings

    @staticmethod
    def _rows(ctx: CheckContext, dtypes: list[str]) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
        """The judged outputs of every declared and dtype run per production dtype (the baseline
        run on the same inputs), and notes on the runs where a side did not return."""
        runs = [r for r in audit(ctx).with_candidate() if r.kind in ("declared", "dtype") and r.case.get("dtype") in dtypes]
        base = ctx.calls([ctx.call_step("baseline", r.case, r.seed) for r in runs], memo=True)
        per: dict[str, list[dict[str, Any]]] = {d: [] for d in dtypes}
        notes: list[str] = []
        for r, b in zip(runs, base, strict=True):
            c = r.cand
            label = f"case {case_label(r.case)} seed {r.seed}"
            if c is None or not c.ok or not b.ok:
                who = "the fused kernel" if c is None or not c.ok else "the baseline"
                out = c if who == "the fused kernel" else b
                notes.append(f"{label}: {who} {out.failure_text() if out is not None else 'did not run'}")
                continue
            for o in r.outs:
                row = _row(r, o, c, b)
                if row is not None:
                    per[r.case["dtype"]].append(row)
        return per, notes

    def _dtype_finding(self, ctx: CheckContext, d: str, rows: list[dict[str, Any]], rule: str,
                       ev: dict[str, Any]) -> Finding:
        """The finding of one production dtype: ``fail`` naming the worst row beyond the margin,
        else ``info`` with the worst ratio."""
        beyond = [x for x in rows if not x["ok"]]
        worst = max(rows, key=lambda x: x["fused_err"] / x["limit"] if x["limit"] else float("inf"))
        if beyond:
            w = max(beyond, key=lambda x: (x["fused_budget_ratio"] or 0.0) / (x["budget_limit"] or 1.0)
                    if x["beyond_budget"] else x["fused_err"] / x["limit"] if x["limit"] else float("inf"))
            return self.finding(
                ctx, "fail",
                f"{d}: the fused kernel is less accurate than the unfused baseline: case {case_label(w['case'])} "
                f"seed {w['seed']}: {_beyond_text(w)}; {len(beyond)} of {len(rows)} output/run(s) beyond the margin",
                ev, case=w["case"], seed=w["seed"])
        r = worst["ratio"]
        return self.finding(
            ctx, "info",
            f"{d}: the fused kernel's error stays within the unfused baseline's on {len(rows)} output/run(s) "
            f"(worst: case {case_label(worst['case'])}, fused {num(worst['fused_err'])} vs unfused "
            f"{num(worst['unfused_err'])}" + (f", {r:.3g}x" if r is not None else "") + f"; {rule})", ev)
