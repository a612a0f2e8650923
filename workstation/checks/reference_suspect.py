"""``reference-suspect``: a reference that is not a legitimate yardstick."""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np

from workstation.analysis.compare import FORMATS
from workstation.analysis.numerics import error_stats, num, pow2_text, round_to
from workstation.checks.support.numaudit import (
    REF_FAIL_RATIO,
    REF_WARN_RATIO,
    OutData,
    Run,
    audit,
)
from workstation.checks.support.static import scan_reference_imports
from workstation.engine.check import Check, Finding, NotJudged, TaskProblem, register
from workstation.engine.context import CheckContext, case_label
from workstation.protocol.extras.calls import CallExtra
from workstation.protocol.extras.monitors import NumCallersReport
from workstation.protocol.extras.numerics import NumOracleExtra

#: fraction of oracle values a narrower format must hold exactly to call the oracle quantised.
QUANTISED_FRACTION = 0.999
#: fewest nonzero oracle values, and distinct ones, the quantisation test looks at.
QUANTISED_MIN_VALUES = 64
QUANTISED_MIN_DISTINCT = 16


@register
class ReferenceSuspect(Check):
    """The reference is not a legitimate yardstick: it disagrees with a float64 oracle beyond
    the error budget (half-precision accumulation), computes at a fixed low precision,
    imports or calls the candidate, mutates its inputs, or is nondeterministic.

    Catches:
        a reference that is not a legitimate yardstick: it disagrees with a float64
        oracle beyond the budget (half-precision accumulation), computes at a fixed low
        precision, imports or calls the candidate, mutates its inputs, or is nondeterministic.

    How:
        the reference's output against the float64 oracle and the budget (per declared
        case and seed); the oracle's values checked for exact representability in a narrower
        format while the inputs are not; an `ast` scan of the reference file and its task-local
        imports for imports of the candidate's module and literals naming its file; a second,
        traced run of the reference (`sys.setprofile`: calls of functions defined in the
        candidate's file, also when loaded by path under another name), compared bitwise with the
        first; sha256 of every input before and after the call.

    Findings:
        | finding | severity |
        |---|---|
        | error against the oracle beyond 8x the budget (with the candidate's own ratio on the same run) | `fail` (beyond 2x: `warn`) |
        | all float64 outputs exact values of a narrower format (at least 64 values, 16 distinct, not all integers: a count or an index is exact in every format) while the inputs are not | `fail` |
        | imports or calls the candidate (static hits with file:line and import chain; traced calls per function) | `fail` |
        | writes to an input the contract does not let it write | `fail` |
        | two runs differ: beyond the budget `fail`, within it `warn` | `fail`/`warn` |
        | no float64 oracle (raises on float64, or returns a narrower dtype) | `warn` |
        | the reference raises on a declared case, or returns non-finite values for finite inputs where `[contract] nonfinite_inputs = false` (the other checks are not judged: a task problem) | `fail` |

    Examples:
        `layernorm-ref-half`: running sums in fp16 (`total += x[:, j]`) put the
        reference ~10^4x over its budget while the candidate is within it. `gelu-ref-imports-candidate`:
        reference.py loads candidate.py by path (line 16) and its traced run executes the
        candidate's `tanh`, `_launch` and `_tanh_kernel`.

    Source:
        a reference that accumulates in the input's half precision
        (`total += x[:, j]` on fp16 tensors) is wrong by more than the kernel it judges, and
        a tolerance loosened to make them agree hides it; a reference that shares the
        candidate's code cannot catch the shared code's bugs.

    Limits:
        the static scan follows task-local imports and literal file names, not
        computed paths; the trace sees Python-level calls only. CPU and GPU alike.

    Not judged when:
        `make_inputs` is broken on a declared case (a task problem naming inputs.py), a
        library the reference's files import is not installed here, or the reference's
        backend cannot run here: `NotJudged` with the reason.

    Forgeable:
        Measured in the job process: the outputs only (copied by the harness into the result files).
        Still forgeable from inside: nothing short of computing the right values: the harness's writer and the result path are watched, and a result file written by task code is refused.
    """

    id = "reference-suspect"
    order = 14
    title = "Reference that is not a legitimate yardstick"

    def run(self, ctx: CheckContext) -> list[Finding]:
        try:
            runs = (a := audit(ctx)).declared()
        except TaskProblem as e:
            if e.file != str(ctx.task.entry["reference"]):
                raise
            # the reference itself is broken on a declared case: that is this check's finding
            return [self.finding(ctx, "fail", f"the reference is broken on a declared case: {e.problem}",
                                 {"file": e.file, "problem": e.problem,
                                  "source": {"file": ctx.task.entry["reference"].file, "line": 1}})]
        findings: list[Finding] = []
        findings += self._independence(ctx, a)
        findings += self._accuracy(ctx, a, runs)
        findings += self._purity(ctx, a, runs)
        return findings

    # -- independence ------------------------------------------------------------------------

    def _independence(self, ctx: CheckContext, a: Any) -> list[Finding]:
        task = ctx.task
        ref_ep, cand_ep = task.entry["reference"], task.entry["candidate"]
        out: list[Finding] = []
        if ref_ep.file == cand_ep.file:
            out.append(self.finding(
                ctx, "fail", f"the reference and the candidate are defined in the same file ({ref_ep.file})",
                {"reference": str(ref_ep), "candidate": str(cand_ep), "source": {"file": ref_ep.file, "line": 1},
                 "derivation": "A reference that lives in the candidate's module shares its imports, helpers and "
                               "global state; kws cannot tell which code the comparison exercises."}))
            return out
        hits = scan_reference_imports(task.dir, ref_ep.file, cand_ep.file)
        calls: dict[str, int] = {}
        traced_runs = 0
        for _, o in a.reruns():
            rep = (o.payload(CallExtra).monitors.of(NumCallersReport)
                   if o.ok and o.step is not None else None)
            if rep is not None:
                traced_runs += 1
            for k, v in (rep.calls if rep is not None else {}).items():
                calls[k] = calls.get(k, 0) + int(v)
        if hits or calls:
            h = hits[0] if hits else None
            where = f"{h['file']}:{h['line']} {h['what']}" if h else ""
            fn_txt = ", ".join(f"{k.split(':')[0]} (line {k.split(':')[1]}, {v} calls)" for k, v in
                               sorted(calls.items(), key=lambda kv: -kv[1])[:4])
            summary = "the reference depends on the candidate: " + "; ".join(
                p for p in (where and f"{where}", fn_txt and f"while the reference ran, functions of "
                            f"{cand_ep.file} executed: {fn_txt}") if p)
            deriv = (
                "The reference is the yardstick the candidate is judged against, so it must not share the candidate's "
                "code. " + (f"Statically, {h['file']} line {h['line']} {h['what']}"
                            + (f" (reached via {' -> '.join(h['via'])})" if len(h['via']) > 1 else "") + ". "
                            if h else "")
                + (f"Dynamically, a traced run of the reference on {traced_runs} declared case(s) executed "
                   f"{sum(calls.values())} calls of functions defined in {cand_ep.file} ({fn_txt}). " if calls else "")
                + "Whatever those functions compute wrongly, the reference computes the same way, and the float64 "
                  "'oracle' (the reference on float64 inputs) too; agreement proves nothing about that code. An "
                  "independent reference (plain torch ops) is needed."
            )
            out.append(self.finding(
                ctx, "fail", summary,
                {"static": hits, "dynamic_calls": calls, "traced_runs": traced_runs,
                 "source": {"file": h["file"], "line": h["line"]} if h else {"file": ref_ep.file, "line": 1},
                 "derivation": deriv}))
        else:
            out.append(self.finding(
                ctx, "info",
                f"the reference neither imports nor calls {cand_ep.file} (static scan of {ref_ep.file} and its "
                f"task-local imports; {traced_runs} traced run(s))",
                {"traced_runs": traced_runs,
                 "derivation": "ast scan for imports of the candidate's module and literals naming its file, and a "
                               "sys.setprofile trace of calls into it while the reference ran."}))
        return out

    # -- accuracy against the oracle --------------------------------------------------------------

    def _accuracy(self, ctx: CheckContext, a: Any, runs: list[Run]) -> list[Finding]:
        out: list[Finding] = []
        notes = sorted({r.note for r in runs if r.note.startswith("no float64 oracle")})
        if notes:
            r0 = next(r for r in runs if r.note in notes)
            out.append(self.finding(
                ctx, "warn", f"{notes[0]} (case {case_label(r0.case)}): kws has no oracle to check the reference "
                "or the tolerance against",
                {"case": r0.case, "seed": r0.seed, "notes": notes,
                 "derivation": "kws builds its oracle by running the reference on inputs upcast to float64; a "
                               "reference that does not compute in its inputs' dtype (or raises on float64) "
                               "leaves the tolerance checks without ground truth."}, case=r0.case, seed=r0.seed))
        items = [(r, o) for r in runs for o in r.outs if o.oracle is not None and o.ref_err is not None]
        if not items:
            return out
        q = self._quantised(items)
        if q is not None:
            r, o, fmt, frac, in_frac = q
            out.append(self.finding(
                ctx, "fail",
                f"the reference computes in {fmt} internally: all {frac[1]} nonzero outputs of its float64 run on "
                f"{r.label} are exact {fmt} values, although its inputs are not ({num(100 * in_frac)}% of them are)",
                {"case": r.case, "seed": r.seed, "output": o.j, "format": fmt, "representable": frac[0],
                 "values": frac[1], "inputs_representable": in_frac,
                 "derivation": f"Given float64 inputs, a reference that computes in its inputs' dtype returns values "
                               f"that are almost never exactly representable in {fmt} (p = {FORMATS[fmt].p} bits). "
                               f"Here every one of {frac[1]} nonzero outputs is, so the reference rounds to {fmt} "
                               f"(u = {pow2_text(FORMATS[fmt].unit_roundoff)}) on the way: it is no better than a "
                               f"{fmt} kernel, and kws's float64 oracle inherits that."},
                case=r.case, seed=r.seed))
        # items holds only outputs with an oracle and a reference error
        worst = max(items, key=lambda t: t[1].known_ref_err.budget_ratio or 0.0)
        r, o = worst
        e = o.known_ref_err
        ratio = e.budget_ratio or 0.0
        beyond_runs = [(rr, oo) for rr, oo in items if (oo.known_ref_err.budget_ratio or 0) > REF_WARN_RATIO]
        if ratio > REF_WARN_RATIO:
            sev = "fail" if ratio > REF_FAIL_RATIO else "warn"
            w = e.worst or {}
            deriv = (
                f"The float64 oracle is the reference itself run on inputs upcast to float64. On {r.label} the "
                f"reference's own {o.dtype} output differs from it by up to {num(e.max_abs)} (relative "
                f"{num(e.max_rel)}, {num(e.max_ulp)} ULP of {o.dtype}); at {w.get('index')} the oracle is "
                f"{num(w.get('oracle'), 6)}, the reference {num(w.get('got'), 6)}. The error budget of a "
                f"correct implementation is {o.bud.formula_text()}, {num(w.get('budget'))} at that element: "
                f"the reference "
                f"is {num(ratio)}x over it, on {e.beyond} of {e.numel} elements, and over 2x on {len(beyond_runs)} of "
                f"{len(items)} runs. That is the signature of accumulating in the input's precision (or another "
                f"lost upcast) in the reference. The candidate is judged against these values, so its own "
                f"correctness cannot be read from the comparison; a tolerance wide enough for this reference is "
                f"too wide for a correct kernel."
            )
            cand_txt = ""
            cands = self._candidate_errors(ctx, beyond_runs[:3])
            if cands:
                cand_txt = (f"; the candidate's error on the same run is {num(cands[0][1])}x the budget")
                deriv += (f" The candidate, on the same inputs, is at {num(cands[0][1])}x its budget against the same "
                          f"oracle.")
                if sev == "fail" and cands[0][1] > REF_WARN_RATIO:
                    # both round in the input's precision (e.g. bf16 arithmetic, as the
                    # production code does): the reference is no worse in kind than the
                    # candidate, so this is for the reviewer to weigh, not a defect
                    sev = "warn"
                    cand_txt += " (the candidate also computes beyond the fp32-accumulation budget: both round in the input dtype)"
            out.append(self.finding(
                ctx, sev,
                f"the reference misses the float64 oracle by {num(e.max_abs)} on {r.label}, {num(ratio)}x the "
                f"{o.dtype} error budget ({e.beyond}/{e.numel} elements beyond it; {len(beyond_runs)} of "
                f"{len(items)} runs over 2x){cand_txt}",
                {"case": r.case, "seed": r.seed, "output": o.j, "reference_vs_oracle": e.as_dict(),
                 "budget": o.bud.as_dict(), "runs_over_2x": len(beyond_runs), "runs": len(items),
                 "candidate_budget_ratio": cands[0][1] if cands else None, "derivation": deriv},
                case=r.case, seed=r.seed))
        else:
            out.append(self.finding(
                ctx, "info",
                f"the reference agrees with the float64 oracle within its error budget on all {len(items)} runs "
                f"(worst {num(ratio)} of the budget, {r.label}: max error {num(e.max_abs)}, "
                f"{num(e.max_ulp)} ULP)",
                {"worst": {"case": r.case, "seed": r.seed, **e.as_dict()}, "budget": o.bud.as_dict(),
                 "derivation": o.bud.formula_text()},
                case=r.case, seed=r.seed))
        return out

    def _candidate_errors(self, ctx: CheckContext, items: list[tuple[Run, OutData]]) -> list[tuple[Run, float]]:
        """The candidate's budget ratio on the runs where the reference is over budget
        (shared candidate calls; best effort)."""
        try:
            outs = ctx.candidate([(r.case, r.seed) for r, _ in items])
        except NotJudged:  # the candidate's calls could not run here: no comparison to add
            return []
        res = []
        for (r, o), c in zip(items, outs, strict=True):
            if c.ok and o.j < len(c.outputs) and c.outputs[o.j].values.shape == o.known_oracle.shape:
                st = error_stats(c.outputs[o.j].values, o.known_oracle, o.dtype, o.B)
                res.append((r, st.budget_ratio or 0.0))
        return res

    def _quantised(self, items: list[tuple[Run, OutData]]) -> tuple | None:
        for r, o in items:
            if o.oracle_dtype != "float64":
                continue  # an op with a fixed output dtype (a cast): its values are that dtype's
            oracle = o.known_oracle  # items holds only outputs with an oracle
            vals = oracle[np.isfinite(oracle) & (oracle != 0)]
            if vals.size < QUANTISED_MIN_VALUES or np.unique(vals).size < QUANTISED_MIN_DISTINCT:
                continue
            if np.all(vals == np.round(vals)):
                continue  # integer results (counts, indices, buckets) are exact in every format: no evidence

            p_case = FORMATS.get(r.case.get("dtype", ""), FORMATS["float64"]).p
            rep = (r.probe.payload(NumOracleExtra).input_representable
                   if r.probe is not None and r.probe.ok and r.probe.step is not None else {})
            for fmt in ("bfloat16", "float16", "float32"):
                if FORMATS[fmt].p >= p_case:
                    continue
                frac = float(np.mean(round_to(vals, fmt) == vals))
                if frac < QUANTISED_FRACTION:
                    continue
                in_frac = max((v.get(fmt, 1.0) for v in rep.values()), default=1.0)
                if in_frac < 0.5:
                    return (r, o, fmt, (frac, int(vals.size)), in_frac)
        return None

    # -- purity -------------------------------------------------------------------------------------

    def _purity(self, ctx: CheckContext, a: Any, runs: list[Run]) -> list[Finding]:
        out: list[Finding] = []
        task = ctx.task
        written = set(task.out_args) | set(task.inout_args)
        mutated = False
        if not task.contract.mutates_inputs:
            for r in runs:
                if not r.ref.ok:
                    continue
                changed = [d for d in r.ref.payload(CallExtra).inputs
                           if d.kind == "tensor" and d.index not in written
                           and d.sha256_after and d.sha256_after != d.sha256]
                if changed:
                    mutated = True
                    idx = [d.index for d in changed]
                    out.append(self.finding(
                        ctx, "fail",
                        f"the reference writes to its input(s) {idx} on {r.label} (sha256 differs before and after "
                        f"the call; the contract says mutates_inputs = false)",
                        {"case": r.case, "seed": r.seed, "inputs": msgspec.to_builtins(changed),
                         "derivation": "kws hashes every input tensor (sha256 of its bytes in logical order) before "
                                       "and after the reference call. A reference that modifies its inputs hands "
                                       "the candidate different data in any test that reuses them, and is not the "
                                       "pure function the comparison assumes."},
                        case=r.case, seed=r.seed))
                    break
        diffs: list[tuple[Run, OutData, int | None, float | None]] = []
        compared = 0
        for r, o2 in a.reruns():
            if not r.ref.ok or not o2.ok:
                continue
            for o in r.outs:
                if o.j >= len(o2.outputs):
                    continue
                v1, v2 = o.ref, o2.outputs[o.j].values
                if v1.shape != v2.shape:
                    diffs.append((r, o, None, None))
                    continue
                compared += 1
                same = (v1 == v2) | (np.isnan(v1) & np.isnan(v2))
                if not same.all():
                    d = np.abs(v1 - v2)
                    ratio = float(np.nanmax(d / o.B)) if o.B is not None else None
                    diffs.append((r, o, int((~same).sum()), ratio))
        if diffs:
            r, o, n, ratio = diffs[0]
            sev = "fail" if ratio is None or ratio > 1.0 else "warn"
            out.append(self.finding(
                ctx, sev,
                f"the reference is nondeterministic: two runs on the same inputs of {r.label} differ in "
                f"{n if n is not None else 'shape'} elements"
                + (f" (up to {num(ratio)}x the error budget)" if ratio is not None else ""),
                {"case": r.case, "seed": r.seed, "output": o.j, "differing": n, "budget_ratio": ratio,
                 "derivation": "kws ran the reference twice on copies of the same inputs and compared the outputs "
                               "bitwise. A reference whose output varies gives the candidate a moving target"
                               + ("; these differences exceed the error budget, so they are not summation-order "
                                  "noise." if sev == "fail" else "; the differences are within the budget "
                                  "(summation order, atomics).")},
                case=r.case, seed=r.seed))
        elif compared:
            out.append(self.finding(
                ctx, "info", f"the reference is deterministic (bitwise equal on a second run, {compared} output/run(s))"
                + ("" if mutated or task.contract.mutates_inputs else " and leaves its inputs unchanged"),
                {"compared": compared,
                 "derivation": "kws ran the reference twice on copies of the same inputs (separate calls) and "
                               "compared the outputs bitwise, and hashed every input before and after the call."}))
        return out
