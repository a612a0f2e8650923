"""``tolerance-loose``: a declared tolerance that accepts clearly wrong outputs, or is far
wider than the error budget of the dtype and reduction length."""

from __future__ import annotations

from typing import Any

import numpy as np

from workstation.analysis.compare import ResolvedTolerance, compare
from workstation.analysis.numerics import LOOSE_FACTOR, error_stats, num, round_to
from workstation.checks.support.numaudit import OutData, Run, accepts, audit, require_outputs
from workstation.engine.check import Check, Finding, register
from workstation.engine.context import CheckContext, case_label

CONTROL_SEED = 20240617


def _tol_text(t: ResolvedTolerance) -> str:
    if t.ulp is not None:
        return f"ulp = {num(t.ulp)} (atol floor {num(t.atol)})"
    return f"atol = {num(t.atol)}, rtol = {num(t.rtol)}"


def parent_controls(o: OutData, seed: int) -> list[tuple[str, str, np.ndarray]]:
    """Negative controls built from the reference's output (parent side): (name, what,
    values) for all zeros, the output rolled by one along its last dimension, permuted
    along it (a fixed random permutation), and random values of the output's mean and
    spread. Shape of ``o.ref``."""
    r = o.ref
    out: list[tuple[str, str, np.ndarray]] = [("zeros", "an all-zero output", np.zeros_like(r))]
    rng = np.random.default_rng(CONTROL_SEED + seed)
    if r.ndim >= 1 and r.shape[-1] >= 2:
        out.append(("rolled", "the reference rolled by one along its last dimension", np.roll(r, 1, axis=-1)))
    if r.ndim >= 1 and r.shape[-1] >= 3:
        perm = rng.permutation(r.shape[-1])
        while np.array_equal(perm, np.arange(r.shape[-1])):
            perm = rng.permutation(r.shape[-1])
        out.append(("permuted", "the reference permuted along its last dimension", np.take(r, perm, axis=-1)))
    fin = r[np.isfinite(r)]
    if fin.size:
        mu, sd = float(fin.mean()), float(fin.std())
        if sd == 0:
            sd = max(abs(mu), float(np.abs(fin).max()), 1e-30)
        rand = round_to(rng.normal(mu, sd, size=r.shape), o.dtype)
        out.append(("random", f"random values of the output's scale (normal, mean {num(mu)}, std {num(sd)})", rand))
    return out


@register
class ToleranceLoose(Check):
    """The declared tolerance accepts outputs that are clearly wrong, or is far wider than the
    error a correct implementation makes.

    Catches:
        a declared tolerance that accepts clearly wrong outputs, or that is far wider
        than the error a correct implementation makes for the dtype and reduction length.

    How:
        (model: [numerics.md](numerics.md)): for every declared case and seed kws has the
        reference's output, a float64 oracle (the reference on inputs upcast to float64) and a
        per-element error budget `B` (fp32 accumulation over the reduction length K, Higham's
        γ_K or Higham and Mary's probabilistic γ̃_K(λ), one rounding to the output dtype). It then
        puts **negative controls** in place of the candidate and applies the declared tolerance
        exactly as it is applied to the candidate (torch.testing's rule against the reference):

        | control | built from |
        |---|---|
        | `zeros` | an all-zero output |
        | `rolled` | the reference rolled by one along its last dimension |
        | `permuted` | the reference under a fixed random permutation of its last dimension |
        | `random` | normal values with the output's mean and standard deviation |
        | `float16 reference`, `bfloat16 reference` | the reference run on its floating inputs cast to a lower precision (fp32 cases: float16 and bfloat16; fp16 cases: bfloat16), the result cast back |

        A control counts only when it is genuinely wrong: its error against the oracle exceeds 10x
        the budget at some element (a roll of constant rows, or a lower-precision result within
        the budget, is not used and is listed as such).

    Findings:
        | finding | severity |
        |---|---|
        | the tolerance accepts a genuine control (named, with the case, the seed, the control's largest difference from the reference and its error in budget units) | `fail` |
        | the tolerance allows more than 10x `2B` (what two correct implementations may differ by) at every element of every run of a dtype | `warn` |
        | the tolerance kws would accept per declared dtype, `evidence = {"suggested": {"atol", "rtol"}, "derivation", ...}`, and whether the candidate passes it | `info` |
        | which controls were rejected / not genuinely wrong | `info` |

    Example:
        (`softmax-loose-atol`): `atol = rtol = 1e-2` on fp32 softmax rows of 2048
        (outputs at most 4.2e-3) accepts all zeros, the rolled and permuted references, random
        values and the fp16- and bf16-computed references; budget-derived: `atol 6e-10, rtol 5e-5`.

    Source:
        an atol larger than the outputs (softmax probabilities of
        ~1e-3 compared at atol 1e-2) lets an all-zero kernel pass; FlashAttention's tests derive
        their tolerance from the error of a low-precision reference for the same reason.

    Limits:
        the budget models a correct kernel with an fp32 accumulator; for reductions of
        random-sign data it is conservative (S = `|a|ᵀ|b|`), so the 10x warning fires late rather
        than early. CPU and GPU alike (controls and budget come from the reference, in torch).

    Not judged when:
        a lower-precision reference control did not run (killed, lost: not the reference
        refusing the dtype): the part is not judged, the other controls and the budget
        comparison are still reported; `skip` unless one of them warns or fails. A declared
        case whose reference fails is the task's problem (the context's `TaskProblem`: not
        judged).

    Forgeable:
        Measured in the job process: the outputs only (copied by the harness into the result files).
        Still forgeable from inside: nothing short of computing the right values: the harness's writer and the result path are watched, and a result file written by task code is refused.
    """

    id = "tolerance-loose"
    order = 11
    title = "Tolerance that accepts wrong outputs or exceeds the error budget"

    def run(self, ctx: CheckContext) -> list[Finding]:
        runs = (a := audit(ctx)).declared()
        pairs = [(r, o) for r in runs for o in r.outs]
        if not pairs:
            require_outputs(runs)
        findings: list[Finding] = []
        findings += self._controls(ctx, a, pairs)
        findings += self._budget(ctx, a, pairs)
        findings += self._suggestions(ctx, a, runs)
        return findings

    # -- negative controls ---------------------------------------------------------------

    def _controls(self, ctx: CheckContext, a: Any, pairs: list[tuple[Run, OutData]]) -> list[Finding]:
        accepted: dict[str, list[dict[str, Any]]] = {}
        tried: dict[str, int] = {}
        not_wrong: dict[str, int] = {}
        whats: dict[str, str] = {}

        def judge(name: str, what: str, r: Run, o: OutData, values: np.ndarray) -> None:
            whats.setdefault(name, what)
            st = error_stats(values, o.truth, o.dtype, o.B)
            if st.budget_ratio is None or st.budget_ratio < LOOSE_FACTOR:
                not_wrong[name] = not_wrong.get(name, 0) + 1
                return
            tried[name] = tried.get(name, 0) + 1
            c = accepts(o, values)
            if c.ok:
                accepted.setdefault(name, []).append({"run": r, "out": o, "stats": st, "cmp": c})

        for r, o in pairs:
            for name, what, values in parent_controls(o, r.seed):
                judge(name, what, r, o, values)
        for r, low, outcome in a.lower_precision():
            if not outcome.ok:
                if outcome.step is None:  # killed or lost, not the reference refusing the dtype
                    ctx.could_not_judge(f"the {low} reference control on case {case_label(r.case)} did not run: "
                                         f"{outcome.failure_text()[:160]}")
                continue
            for o in r.outs:
                if o.j < len(outcome.outputs) and outcome.outputs[o.j].values.shape == o.ref.shape:
                    vals = round_to(outcome.outputs[o.j].values, o.dtype)
                    judge(f"{low} reference", f"the reference computed in {low} (floating inputs cast to {low}, "
                          f"the result cast back to {o.dtype})", r, o, vals)
        out: list[Finding] = []
        for name, hits in accepted.items():
            h = hits[0]
            r, o, st, c = h["run"], h["out"], h["stats"], h["cmp"]
            w = c.worst or {}
            deriv = (
                f"The declared tolerance for this output is {_tol_text(o.tol)} (torch.testing's rule "
                f"|got - expected| <= atol + rtol*|expected| against the reference). Put in place of the candidate, "
                f"{whats[name]} passes it on {r.label}: its largest difference from the reference is "
                f"{num(c.max_abs)} (at {w.get('index')}: reference {num(w.get('expected'), 6)}, control "
                f"{num(w.get('got'), 6)}, allowed {num(w.get('allowed'))}). Yet the control is wrong: "
                f"against the float64 oracle its error reaches {num(st.max_abs)}, {num(st.budget_ratio)}x the error "
                f"budget at "
                f"that element ({o.bud.formula_text()}), and {st.beyond} of {st.numel} elements exceed their "
                f"budget. A kernel returning this output would be accepted, so the task's validation cannot tell a "
                f"correct kernel from this one."
            )
            out.append(self.finding(
                ctx, "fail",
                f"the declared {_tol_text(o.tol)} accepts {whats[name]} on case {case_label(r.case)} seed {r.seed}"
                f"{f' output {o.j}' if o.j else ''} (max |control - reference| {num(c.max_abs)} vs largest output "
                f"{num(float(np.nanmax(np.abs(o.ref))) if o.ref.size else 0.0)}; the control is wrong by "
                f"{num(st.budget_ratio)}x the error budget); accepted on {len(hits)} of {tried[name]} runs",
                {"control": name, "what": whats[name], "case": r.case, "seed": r.seed, "output": o.j,
                 "tolerance": o.tol.as_dict(), "control_vs_reference": c.evidence(),
                 "control_vs_oracle": st.as_dict(), "accepted_runs": len(hits), "runs": tried[name],
                 "budget": o.bud.as_dict(), "derivation": deriv},
                case=r.case, seed=r.seed))
        rejected = sorted(n for n in tried if n not in accepted)
        if rejected or not_wrong:
            parts = [f"{n} ({tried[n]} runs)" for n in rejected]
            msg = "the declared tolerance rejects every genuinely wrong negative control: " + (", ".join(parts) or "none")
            if not_wrong:
                msg += "; not genuinely wrong here (within 10x the budget), so not used: " + ", ".join(
                    f"{n} ({k} runs)" for n, k in sorted(not_wrong.items()))
            out.append(self.finding(ctx, "info", msg, {
                "rejected": {n: tried[n] for n in rejected}, "accepted": {n: len(v) for n, v in accepted.items()},
                "not_genuinely_wrong": not_wrong, "controls": whats,
                "derivation": "Each control replaces the candidate and is judged at the declared tolerance against "
                              "the reference; it counts when its error against the float64 oracle exceeds "
                              f"{num(LOOSE_FACTOR)}x the per-element error budget somewhere."}))
        return out

    # -- tolerance vs budget -------------------------------------------------------------

    def _budget(self, ctx: CheckContext, a: Any, pairs: list[tuple[Run, OutData]]) -> list[Finding]:
        by_dtype: dict[str, list[tuple[Run, OutData]]] = {}
        for r, o in pairs:
            if o.B is not None:
                by_dtype.setdefault(r.case.get("dtype", o.dtype), []).append((r, o))
        out: list[Finding] = []
        for dtype, items in by_dtype.items():
            best = None  # (ratio, run, out, index)
            for r, o in items:
                allowed = a.allowed(o)
                need = 2.0 * o.B
                ok = np.isfinite(need) & (need > 0) & np.isfinite(o.truth)
                if not ok.any():
                    continue
                ratios = np.where(ok, allowed / np.where(ok, need, 1.0), np.inf)
                i = int(np.argmin(ratios))
                if best is None or ratios.flat[i] < best[0]:
                    best = (float(ratios.flat[i]), r, o, i)
            if best is None:
                continue
            ratio, r, o, i = best
            idx = [int(x) for x in np.unravel_index(i, o.ref.shape)] if o.ref.shape else []
            y = float(o.truth.flat[i])
            allowed_i = float(a.allowed(o).flat[i])
            need_i = float(2.0 * o.B.flat[i])
            sug = a.suggestion(dtype)
            if ratio > LOOSE_FACTOR:
                deriv = (
                    f"{o.bud.formula_text()}. Two correct implementations differ by at most 2B per element. The "
                    f"declared tolerance ({_tol_text(o.tol)}) allows more than {num(ratio)}x that at every element of "
                    f"{len(items)} {dtype} run(s); it is tightest relative to the budget at {idx} of {r.label}, where "
                    f"|y| = {num(abs(y))}, 2B = {num(need_i)} and the tolerance allows {num(allowed_i)}. An error "
                    f"{num(LOOSE_FACTOR)}x beyond what a correct kernel makes passes everywhere."
                    + (f" The budget-derived tolerance is atol = {num(sug['atol'])}, rtol = {num(sug['rtol'])}."
                       if sug else "")
                )
                out.append(self.finding(
                    ctx, "warn",
                    f"{dtype}: the declared {_tol_text(o.tol)} is at least {num(ratio)}x the error budget at every "
                    f"element (tightest at {idx} of {r.label}: allows {num(allowed_i)} where two correct "
                    f"implementations differ by at most {num(need_i)})"
                    + (f"; budget-derived: atol = {num(sug['atol'])}, rtol = {num(sug['rtol'])}" if sug else ""),
                    {"dtype": dtype, "min_allowed_over_budget": ratio, "at": {"case": r.case, "seed": r.seed,
                     "output": o.j, "index": idx, "abs_y": abs(y), "allowed": allowed_i, "two_B": need_i},
                     "tolerance": o.tol.as_dict(), "budget": o.bud.as_dict(),
                     "suggested": {"atol": sug["atol"], "rtol": sug["rtol"]} if sug else None,
                     "derivation": deriv},
                    case=r.case, seed=r.seed))
        return out

    # -- suggestions -------------------------------------------------------------------------

    def _suggestions(self, ctx: CheckContext, a: Any, runs: list[Run]) -> list[Finding]:
        out: list[Finding] = []
        dtypes: list[str | None] = []
        for r in runs:
            if r.case.get("dtype") not in dtypes:
                dtypes.append(r.case.get("dtype"))
        cands = {}
        try:
            pairs = [(r.case, r.seed) for r in runs]
            for (case, seed), outcome in zip(pairs, ctx.candidate(pairs), strict=True):
                cands[(repr(sorted(case.items())), seed)] = outcome
        except Exception:  # noqa: BLE001  (the suggestion stands without the candidate's verdict)
            cands = {}
        for dtype in dtypes:
            sug = a.suggestion(dtype)
            if sug is None:
                continue
            mine = [r for r in runs if r.case.get("dtype") == dtype]
            passes, total = 0, 0
            for r in mine:
                cand = cands.get((repr(sorted(r.case.items())), r.seed))
                if cand is None or not cand.ok or not r.ref.ok:
                    continue
                total += 1
                good = True
                for o in r.outs:
                    tol_s = ResolvedTolerance(sug["atol"], sug["rtol"], None, o.dtype, "kws error budget")
                    if o.j >= len(cand.outputs):
                        good = False
                        continue
                    g = cand.outputs[o.j]
                    c = compare(o.ref, g.values, tol_s, expected_dtype=o.dtype, got_dtype=g.dtype)
                    good &= c.ok
                passes += good
            decl = mine[0].outs[0].tol if mine and mine[0].outs else None
            cand_txt = (f"; the candidate passes it against the reference on {passes} of {total} runs"
                        if total else "")
            deriv = sug["derivation"] + (f" At this tolerance the candidate passes against the reference on "
                                         f"{passes} of {total} runs." if total else "")
            if decl is not None:
                deriv += f" Declared: {_tol_text(decl)}."
            basis = ("the op is exact in this dtype" if sug.get("exact") else
                     f"2x the error budget at every element of {sug['runs']} runs")
            out.append(self.finding(
                ctx, "info",
                f"{dtype}: kws would accept atol = {num(sug['atol'])}, rtol = {num(sug['rtol'])} "
                f"({basis}; declared {_tol_text(decl) if decl else 'none'}){cand_txt}",
                {"dtype": dtype, "suggested": {"atol": sug["atol"], "rtol": sug["rtol"]}, "fit": sug["fit"],
                 "declared": decl.as_dict() if decl else None, "candidate_passes": [passes, total],
                 "budget": sug["budget"], "magnitude_basis": a.magnitude_basis(), "exact": bool(sug.get("exact")),
                 "derivation": deriv}))
        return out
