"""``precision-regime``: validation that misses the precision the kernel serves in."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np

from workstation.analysis.compare import (
    FORMATS,
    ResolvedTolerance,
    compare,
    region_text,
    resolve_tolerance,
    unit_roundoff,
)
from workstation.analysis.numerics import (
    FA_FACTOR,
    HALF_DTYPES,
    error_stats,
    error_structure,
    num,
    pow2_text,
)
from workstation.checks.support import contract as acontract
from workstation.checks.support.numaudit import (
    INTERPRETER_NOTE,
    LONG_K_FACTOR,
    REF_FAIL_RATIO,
    REF_WARN_RATIO,
    OutData,
    Run,
    audit,
    fa_rule,
    suggest,
)
from workstation.checks.support.suspicion import suspect
from workstation.engine.check import Check, Finding, register
from workstation.engine.context import CheckContext, case_label
from workstation.protocol.extras import extra_as
from workstation.protocol.extras.triton import (
    AotKernel,
    IrDot,
    LowPrecisionOp,
    SourceLine,
    TritonAotExtra,
)
from workstation.task.model import Tolerance

_FP8_IR = ("f8E4M3FN", "f8E5M2", "f8E4M3FNUZ", "f8E5M2FNUZ", "f8E4M3", "e4m3", "e5m2")


def _src(d: SourceLine | None) -> str:
    return f"{d.file}:{d.line}" if d else "(no source line)"


def _builtins(x: Any) -> Any:
    """A payload part (a Struct, a list of them, None) as the builtins evidence holds."""
    return msgspec.to_builtins(x)


@dataclass(frozen=True)
class Facts:
    """What one run of the check learned before it judged, passed to the judging methods as
    a value (a check holds no per-run state).

    Attributes:
        cruns: per run (by ``id``), the accuracy contract's oracle run, when the task
            declares a contract.
        untrusted: dtype -> why the interpreter's own numerics are not trusted for it (the
            AOT step's self-test).
        ir_lowp: low-precision accumulation the lowered IR shows, in words.
    """

    cruns: dict[int, Any]
    untrusted: dict[str, str]
    ir_lowp: list[str]

    def sev(self, dtype: str) -> str:
        """``warn`` for a dtype the interpreter miscomputes (the IR decides), else ``fail``."""
        return "warn" if dtype in self.untrusted else "fail"


@register
class PrecisionRegime(Check):
    """Validation that misses the precision the kernel serves in: fp32-only validation of a
    kernel served in fp16/bf16, an fp32 ``tl.dot`` that lowers to TF32 on NVIDIA GPUs,
    half-precision or unpromoted fp8 accumulation.

    Catches:
        validation that misses the precision the kernel serves in: fp32-only cases
        for a kernel `[contract] dtypes` serves in fp16/bf16, an fp32 `tl.dot` that lowers to TF32
        on NVIDIA GPUs (the interpreter computes it in true fp32), accumulators or reductions kept
        in f16/bf16, fp8 dots without promotion.

    How:
        1. *Served dtypes*: the declared cases (up to 3) re-run at each `[contract] dtypes` entry no
           case declares, candidate and reference in separate children, judged at
           `[tolerance.<dtype>]` when declared, else at the budget-derived tolerance; plus their
           errors against the float64 oracle.
        2. *FlashAttention's rule*: on every declared and derived run and on one declared case
           with a 4x longer reduction, the candidate's error against the oracle must be at most 2x
           the reference's plus `2*max|fl(fl(o + 0.3) - 0.3) - o|`, or within 2x its budget. Where
           it breaks, the error's structure names the cause (`analysis.numerics.error_structure`):
           *a different function* when it is at least 8x the rounding budget in every magnitude
           bin and a function of the output's value or of the position along one axis (ANOVA R²
           >= 0.6), else *less precise* (rounding: it scales with the unit roundoff and the
           reduction length and varies element to element).
        3. *Lowered IR* (Triton): launches captured in the interpreter, kernels compiled ahead of
           time for sm_90 in a process without `TRITON_INTERPRET` (`workstation/harness/aot_compile.py`; on
           a GPU, the JIT's own IR), TTIR/TTGIR/PTX read for dot precision and lowering, MMA types,
           f16/bf16 accumulators and reductions, `maxNumImpreciseAcc`, FMA contraction, each with
           the user source line. A TF32 dot is emulated (the reference on TF32-rounded inputs)
           against the declared fp32 tolerance.

    Findings:
        | finding | severity |
        |---|---|
        | the candidate raises or misses the reference at a served, undeclared dtype (with zero rows, budget ratio) | `fail` (`warn` for a dtype whose interpreter arithmetic fails kws's self-test: bfloat16 under Triton 3.9's interpreter) |
        | TF32 lowering whose emulation misses the declared fp32 tolerance | `fail` (`info` when the tolerance absorbs it) |
        | FlashAttention's rule and 2x the budget broken on a run the declared tolerance accepts (a longer-K run: only with low-precision accumulation in the IR, else `warn`) | `fail` |
        | the same break with a systematic error: named "differs systematically from the reference: a missing or different operation" (evidence `error_structure`: excess per magnitude bin, explained variance, sign agreement) | as above |
        | with a declared accuracy contract (`[contract] compute_dtype`): a break of that rule (or of a served dtype's tolerance) where the candidate's error against the oracle is within 2x the contract oracle's own plus the rule's floor and not systematic against the contract's rounding ("under the declared contract (...) the reference itself is off the float64 oracle by E; the candidate by C") | `info` |
        | with a declared contract: a break beyond it; the fail above with "worse than the declared contract ... allows" and both figures (evidence `contract`) | `fail` |
        | with a declared contract: how far it is from fp32 on the runs ("the declared contract (...) is D from fp32") | `info` |
        | fp32-only validation of a kernel served in fp16/bf16 | `warn` |
        | f16/bf16 loop-carried accumulator or reduction, half-precision MMA accumulator, unpromoted fp8 dot, TF32 lowering kws could not emulate (read from the IR only) | `warn`, not judged |
        | FMA contraction (GPU rounds once where the interpreter rounds twice); AOT summary; derived runs that pass | `info` |

    Examples:
        `matmul-fp32-tf32`: `acc += tl.dot(a, b)` at candidate.py:50 lowers to
        `wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32`; emulated TF32 misses `atol = rtol =
        1e-5` by ~70x. `rmsnorm-fp32-only`: contract fp16/bf16, cases fp32 only; at fp16 rows of
        the output are zero (the sum of squares, kept in fp16 at candidate.py:32-33, overflows).

    Source:
        tl.dot's default `input_precision` is TF32 on NVIDIA sm80+
        (Triton docs), which keeps 10 mantissa bits; fp16 sums overflow at 65504 and lose
        precision past 2048 (IEEE 754 binary16); Hopper's fp8 MMA accumulator is narrower than
        fp32, hence periodic promotion (DeepSeek-V3 technical report, 2024, on FP8 GEMM
        accumulation; Triton's `max_num_imprecise_acc`).

    Limits:
        on the CPU every number comes from the Triton interpreter (true fp32 dots,
        numpy reduction order, broken bfloat16 sums) and findings say so; TF32 and reduction-order
        effects are read from the IR and emulated, not measured. The AOT step compiles the kernels
        the smallest declared case launches; kernels defined inside functions are not reachable
        by name. On a GPU the IR comes from the kernels the launch compiled.

    Not judged when:
        the AOT step (or, on a GPU, the launch that compiles) does not complete: killed at a
        limit (its CPU budget is the `aot_budget` setting, KWS_AOT_BUDGET, 300 CPU s by default:
        an autotuned library kernel compiles every config), raised, or kws's compile failed; or
        a captured kernel does not compile: its IR
        was not examined (on the CPU TF32 lowering and low-precision accumulation are answered
        only by the IR). The numerics it did run are still reported; the check is then `skip`
        unless one of them warns or fails. A precision signal it could not confirm (read from the
        IR only; a miss at a dtype whose interpreter arithmetic is not trusted; a longer-reduction
        miss without the IR's low-precision evidence) is a `warn` tagged `precision` and the check
        is not judged (one rule for suspicion). Not a limit of this run (`info`): a backend other than
        Triton (no IR to read; judged from numerics alone), a candidate that launched no Triton
        kernel.

    Forgeable:
        Measured in the job process: TF32/reduced-precision flags during the call; the AOT IR (parent side, no task code).
        Still forgeable from inside: flags set and reset within one call are seen only through the IR.
    """

    id = "precision-regime"
    order = 13
    title = "Validation outside the served precision; TF32, half or fp8 accumulation"

    def run(self, ctx: CheckContext) -> list[Finding]:
        a = audit(ctx)
        aot_box: dict[str, Any] = {}

        def get_aot() -> None:
            try:
                aot_box["out"] = a.aot()
            except Exception as e:  # noqa: BLE001  (reported as an info finding below)
                aot_box["err"] = f"{type(e).__name__}: {e}"

        th = threading.Thread(target=get_aot, daemon=True)
        th.start()
        runs = a.with_candidate()
        th.join()
        findings: list[Finding] = []
        findings += self._coverage(ctx, a, runs)
        facts = Facts(cruns=self._contract_runs(ctx, runs), untrusted=self._untrusted_dtypes(a, aot_box),
                      ir_lowp=self._ir_low_precision(aot_box))
        findings += self._contract_distance(ctx, runs, facts)
        bad_runs: set[int] = set()
        findings += self._derived(ctx, a, runs, bad_runs, facts)
        findings += self._accuracy(ctx, a, runs, bad_runs, facts)
        findings += self._ir(ctx, a, runs, aot_box)
        return findings

    @staticmethod
    def _untrusted_dtypes(a: Any, box: dict[str, Any]) -> dict[str, str]:
        """Dtypes whose interpreter numerics the self-test of the AOT step found wrong
        (``tl.sum`` of ones), with the reason; empty off the interpreter."""
        if not a.interpreter:
            return {}
        outc = box.get("out")
        st = extra_as(outc.step.extra, TritonAotExtra).interpreter_selftest if outc is not None and outc.ok else None
        bad = {}
        for dt, v in st.items() if st is not None else []:
            if not v.ok:
                bad[dt] = (f"the Triton interpreter's own tl.sum over {dt} is wrong (1024 ones summed to "
                           f"{v.error or None}), so a {dt} mismatch measured under it may be the "
                           f"interpreter's, not the kernel's")
        return bad

    @staticmethod
    def _ir_low_precision(box: dict[str, Any]) -> list[str]:
        """Low-precision accumulation the lowered IR shows ("f16 reduction at candidate.py:33")."""
        outc = box.get("out")
        if outc is None or not outc.ok:
            return []
        found: list[str] = []
        for k in extra_as(outc.step.extra, TritonAotExtra).kernels:
            an = k.analysis
            if an is None:
                continue
            for it in an.low_precision_accumulators:
                found.append(f"{it.dtype} loop-carried accumulator at {_src(it.source)}")
            for it in an.low_precision_reductions:
                found.append(f"{it.dtype} reduction at {_src(it.source)}")
            for d in an.dots:
                if d.d in ("f16", "bf16"):
                    found.append(f"tl.dot accumulating in {d.d} at {_src(d.source)}")
        return sorted(set(found))

    # -- served dtypes ---------------------------------------------------------------------

    def _coverage(self, ctx: CheckContext, a: Any, runs: list[Run]) -> list[Finding]:
        served = list(ctx.task.contract.dtypes)
        declared = sorted({c["dtype"] for c in ctx.cases})
        halves = [d for d in served if d in HALF_DTYPES]
        if not halves or any(d in HALF_DTYPES for d in declared):
            return []
        derived = [r for r in runs if r.kind == "dtype"]
        deriv = (
            f"[contract] dtypes says the kernel serves {', '.join(served)}; every declared case is "
            f"{', '.join(declared)}. Half-precision inputs change what the kernel computes: loads, products and any "
            f"accumulator or reduction kept in the input dtype round at u = {pow2_text(unit_roundoff(halves[0]))} "
            f"instead of 2^-24, and float16 overflows above 65504. None of that is exercised by the author's cases. "
            f"kws re-ran {len(derived)} declared case(s) at {', '.join(halves)} (findings below)."
        )
        return [self.finding(
            ctx, "warn",
            f"fp32-only validation: [contract] dtypes serves {', '.join(halves)} but no declared case uses a "
            f"half-precision dtype (declared: {', '.join(declared)})",
            {"contract_dtypes": served, "declared_dtypes": declared, "derived_runs": len(derived),
             "derivation": deriv})]

    def _derived(self, ctx: CheckContext, a: Any, runs: list[Run], bad: set[int], facts: Facts) -> list[Finding]:
        out: list[Finding] = []
        by_dtype: dict[str, list[Run]] = {}
        for r in runs:
            if r.kind == "dtype":
                by_dtype.setdefault(r.case["dtype"], []).append(r)
        for dtype, rs in by_dtype.items():
            declared_tol = dtype in ctx.task.tolerance_by_dtype
            sug = None if declared_tol else suggest(rs, dtype)
            judged_at = (f"[tolerance.{dtype}]" if declared_tol else
                         f"the budget-derived atol = {num(sug['atol'])}, rtol = {num(sug['rtol'])}" if sug else
                         f"torch.testing's defaults for {dtype}")
            raised = [r for r in rs if r.ref.ok and r.cand is not None and not r.cand.ok]
            fails: list[tuple[Run, OutData, Any, Any]] = []
            passed = 0
            for r in rs:
                if not r.ref.ok or r.cand is None or not r.cand.ok:
                    continue
                good = True
                for o in r.outs:
                    if declared_tol:
                        tol = o.tol
                    elif sug is not None:
                        tol = ResolvedTolerance(sug["atol"], sug["rtol"], None, o.dtype,
                                                f"kws error budget (no [tolerance.{dtype}])")
                    else:
                        tol = resolve_tolerance(Tolerance(), o.dtype)
                    if o.j >= len(r.cand.outputs):
                        continue
                    g = r.cand.outputs[o.j]
                    c = compare(o.ref, g.values, tol, expected_dtype=o.dtype, got_dtype=g.dtype,
                                nonfinite_ok=ctx.task.contract.nonfinite_inputs)
                    if c.ok:
                        continue
                    good = False
                    st = error_stats(g.values, o.oracle, o.dtype, o.B) if o.oracle is not None else None
                    if st is None or (st.budget_ratio or 0) > REF_WARN_RATIO or st.nonfinite:
                        fails.append((r, o, c, st))
                passed += good
            if raised:
                r = raised[0]
                cand = r.cand
                assert cand is not None  # raised keeps runs with a candidate outcome
                out.append(self.finding(
                    ctx, "fail",
                    f"at {dtype} (a [contract] dtype no declared case uses) the candidate {cand.failure_text()} on "
                    f"case {case_label(r.case)} seed {r.seed}; {len(raised)} of {len(rs)} derived runs",
                    {"case": r.case, "seed": r.seed, "dtype": dtype, **cand.failure_evidence(),
                     "derivation": f"[contract] dtypes lists {dtype}; kws re-ran the declared case with dtype = {dtype} "
                                   "(make_inputs and the reference accept it) and the candidate raised."},
                    case=r.case, seed=r.seed))
            if facts.cruns:
                kept: list[tuple[tuple[Run, OutData, Any, Any], dict[str, Any]]] = []
                under: list[tuple[tuple[Run, OutData, Any, Any], dict[str, Any]]] = []
                for x in fails:
                    ok, info = self._contract_accepts(facts, x[0], x[1])
                    (under if ok else kept).append((x, info))
                fails = [x for x, _info in kept]
                for (r, o, _c, _st), info in under[:1]:
                    out.append(self.finding(
                        ctx, "info",
                        f"at {dtype} (a [contract] dtype no declared case uses) on case {case_label(r.case)} seed "
                        f"{r.seed}: {acontract.within_text(info, info['candidate_err'])} (within "
                        f"{num(acontract.CONTRACT_MARGIN)}x + floor); {len(under)} run(s) judged by the contract",
                        {"case": r.case, "seed": r.seed, "dtype": dtype, "output": o.j, "contract": info},
                        case=r.case, seed=r.seed))
            bad.update(id(x[0]) for x in fails)
            for r, o, c, st in fails[:1]:
                assert r.cand is not None  # fails holds runs with a candidate outcome
                w = c.worst or {}
                region = region_text(c.bad_region)
                zero_rows = _zero_rows(r.cand.outputs[o.j].values, o.ref)
                tol_src = (f"the task's [tolerance.{dtype}] ({_tol(o.tol)})" if declared_tol else
                           f"{judged_at} (no [tolerance.{dtype}] is declared)")
                # st exists only where o has an oracle, and so a reference error
                ratio_txt = (f"; against the float64 oracle the candidate's error is {num(st.max_abs)}, "
                             f"{num(st.budget_ratio)}x its budget (the reference's: {num(o.known_ref_err.max_abs)}, "
                             f"{num(o.known_ref_err.budget_ratio)}x)") if st is not None else ""
                deriv = (
                    f"[contract] dtypes serves {dtype}, which no declared case uses. kws ran case {case_label(r.case)} "
                    f"(a declared case with dtype = {dtype}), seed {r.seed}: candidate and reference in separate "
                    f"children, compared at {tol_src}. {c.n_bad} of {c.numel} elements are outside it"
                    f"{f' ({region})' if region else ''}; worst at {w.get('index')}: reference "
                    f"{num(w.get('expected'), 6)}, candidate {num(w.get('got'), 6)}"
                    f"{f'; {zero_rows} rows of the output are entirely zero' if zero_rows else ''}{ratio_txt}. "
                    f"{o.bud.formula_text()}. The declared {', '.join(sorted({x['dtype'] for x in ctx.cases}))} "
                    f"cases cannot show this. ({INTERPRETER_NOTE}.)"
                )
                if dtype in facts.untrusted:
                    deriv += f" Not trusted: {facts.untrusted[dtype]}; the lowered IR (below) is the evidence that holds."
                sev = facts.sev(dtype)
                out.append(self.finding(
                    ctx, sev,
                    f"at {dtype} (served per [contract], never declared) the candidate misses the reference on case "
                    f"{case_label(r.case)} seed {r.seed}: {c.n_bad}/{c.numel} elements outside {_tol(c.tolerance)}"
                    f"{f' ({region})' if region else ''}"
                    f"{f', {zero_rows} all-zero rows' if zero_rows else ''}"
                    f"{f', max error vs float64 oracle {num(st.max_abs)} = {num(st.budget_ratio)}x budget' if st else ''}"
                    f"; {len({id(x[0]) for x in fails})} of {len(rs)} {dtype} runs [interpreter numerics"
                    f"{'; the interpreter mis-sums ' + dtype if dtype in facts.untrusted else ''}]",
                    {**(suspect(ctx, "precision", f"at {dtype} (served per [contract]) the candidate misses the reference on "
                                f"case {case_label(r.case)}, but the interpreter's {dtype} arithmetic is not trusted")
                        if sev == "warn" else {}),
                     "case": r.case, "seed": r.seed, "dtype": dtype, "output": o.j, "comparison": c.evidence(),
                     "candidate_vs_oracle": st.as_dict() if st else None,
                     "reference_vs_oracle": o.ref_err.as_dict() if o.ref_err else None,
                     "tolerance_source": "declared" if declared_tol else "budget", "zero_rows": zero_rows,
                     "interpreter": a.interpreter, "untrusted": facts.untrusted.get(dtype), "derivation": deriv},
                    case=r.case, seed=r.seed))
            if not raised and not fails:
                out.append(self.finding(
                    ctx, "info",
                    f"{dtype} (a [contract] dtype no declared case uses): the candidate matches the reference on "
                    f"{passed} of {len(rs)} derived runs at {judged_at}",
                    {"dtype": dtype, "runs": len(rs), "passed": passed, "interpreter": a.interpreter,
                     "derivation": "kws re-ran the declared cases with this dtype; "
                                   + (sug["derivation"] if sug else "judged at the task's per-dtype tolerance.")}))
        return out

    # -- accuracy against the oracle (FlashAttention's rule) -----------------------------------

    def _accuracy(self, ctx: CheckContext, a: Any, runs: list[Run], bad: set[int], facts: Facts) -> list[Finding]:
        out: list[Finding] = []
        viol: list[tuple[float, Run, OutData, dict[str, Any]]] = []
        passing: list[tuple[Run, OutData, dict[str, Any]]] = []
        long_k: list[tuple[Run, OutData, dict[str, Any]]] = []
        # a candidate that already fails a declared case has a plain bug (correctness reports it);
        # its failures at a longer reduction say nothing about precision
        declared_fail = any(
            r.kind == "declared" and r.cand is not None and r.ref.ok and (not r.cand.ok or any(
                o.j >= len(r.cand.outputs) or not compare(o.ref, r.cand.outputs[o.j].values, o.tol,
                                                          expected_dtype=o.dtype, got_dtype=r.cand.outputs[o.j].dtype).ok
                for o in r.outs))
            for r in runs)
        for r in runs:
            if r.kind == "long-K" and declared_fail:
                continue
            if r.cand is None or not r.cand.ok or not r.ref.ok:
                continue
            for o in r.outs:
                if o.oracle is None or o.j >= len(r.cand.outputs):
                    continue
                g = r.cand.outputs[o.j]
                if g.values.shape != o.oracle.shape:
                    continue
                fa = fa_rule(o, g.values)
                assert fa is not None  # o has an oracle
                if r.kind == "long-K":
                    long_k.append((r, o, fa))
                ce = fa["candidate"]
                ref_ok = (o.known_ref_err.budget_ratio or 0) <= REF_FAIL_RATIO
                if not fa["ok"] and (ce.budget_ratio or 0) > REF_WARN_RATIO and ref_ok:
                    if id(r) in bad:
                        continue  # reported by the served-dtype check
                    if r.kind == "declared" and not compare(o.ref, g.values, o.tol, expected_dtype=o.dtype,
                                                            got_dtype=g.dtype).ok:
                        continue  # a mismatch at the declared tolerance: correctness reports it
                    viol.append((ce.budget_ratio if ce.budget_ratio is not None else float("inf"), r, o, fa))
                else:
                    passing.append((r, o, fa))
        if facts.cruns:
            judged = [(v, *self._contract_accepts(facts, v[1], v[2], v[3])) for v in viol]
            under = [(v, info) for v, ok, info in judged if ok]
            viol = [v for v, ok, _info in judged if not ok]
            if under:
                under.sort(key=lambda t: -t[0][0])
                (_ratio, r, o, fa), info = under[0]
                out.append(self.finding(
                    ctx, "info",
                    f"{acontract.within_text(info, info['candidate_err'])} on {r.label} ({r.kind} run), within "
                    f"{num(acontract.CONTRACT_MARGIN)}x that + floor {num(info['floor'])}; against the fp32 "
                    f"reference FlashAttention's rule would not hold (reference error {num(fa['reference_err'])}); "
                    f"{len(under)} output/run(s) judged by the declared contract",
                    {"case": r.case, "seed": r.seed, "kind": r.kind, "output": o.j, "contract": info,
                     "fa_limit": fa["limit"], "reference_err": fa["reference_err"],
                     "derivation": "With [contract] compute_dtype declared, a candidate whose error against the "
                                   "float64 oracle is at most CONTRACT_MARGIN x the contract oracle's own (the "
                                   "reference with each operation rounded to the compute dtype) plus the rounding "
                                   "floor of FlashAttention's rule, and not systematic against the contract's "
                                   "rounding, is as precise as its contract allows (docs/numerics.md, 'Declared "
                                   "accuracy contracts')."},
                    case=r.case, seed=r.seed))
        for untrusted in (False, True):
            pick = [v for v in viol if (v[1].case["dtype"] in facts.untrusted) == untrusted]
            if not pick:
                continue
            pick.sort(key=lambda t: (t[1].kind == "long-K", -t[0]))
            ratio, r, o, fa = pick[0]
            # a longer reduction alone may expose a plain bug: a fail needs the IR's low-precision evidence
            sev = "warn" if untrusted or (r.kind == "long-K" and not facts.ir_lowp) else "fail"
            ce, re_ = fa["candidate"], fa["reference"]
            w = ce.worst or {}
            nonfin = f" and {ce.nonfinite} non-finite outputs" if ce.nonfinite else ""
            where = {"declared": "a declared case, which the declared tolerance accepts",
                     "dtype": "a declared case re-run at a [contract] dtype",
                     "long-K": f"a declared case with a {LONG_K_FACTOR}x longer reduction"}[r.kind]
            deriv = (
                f"On {r.label} ({where}) the candidate's largest error against the float64 oracle is "
                f"{num(ce.max_abs)}{nonfin} (worst at {w.get('index')}: oracle {num(w.get('oracle'), 6)}, "
                f"candidate {num(w.get('got'), 6)}); the reference's is {num(re_.max_abs)}. FlashAttention's "
                f"rule allows "
                f"{num(FA_FACTOR)}x the reference's error plus the rounding floor max(2*max|fl(fl(o + 0.3) - 0.3) - o|, "
                f"max B) = {num(fa['floor'])}, i.e. {num(fa['limit'])}; the candidate exceeds that, and its error budget "
                f"({o.bud.formula_text()}) by {num(ratio)}x at its worst element ({ce.beyond} of {ce.numel} "
                f"elements beyond budget). "
                + (f"The lowered IR shows the mechanism: {'; '.join(facts.ir_lowp)}. " if facts.ir_lowp else
                   "A kernel that keeps the accumulator (or the loaded inputs) in the input's precision behaves "
                   "like this. ")
                + f"({INTERPRETER_NOTE}.)"
            )
            if untrusted:
                deriv += f" Not trusted: {facts.untrusted[r.case['dtype']]}."
            # a different function, not a less precise one: far above rounding at every
            # magnitude and structured (analysis.numerics.error_structure)
            assert r.cand is not None  # viol holds runs with a candidate outcome
            structure = error_structure(r.cand.outputs[o.j].values, o.known_oracle, o.B, o.dtype) \
                if o.B is not None else {"systematic": False, "reason": "no error budget"}
            if structure["systematic"] and not untrusted:
                axis = f", {num(structure['explained_by_axis'])} by the position along axis {structure['axis']}" \
                    if structure.get("axis") is not None else ""
                what = (f"the candidate differs systematically from the reference: a missing or different operation, "
                        f"not rounding, on {r.label} ({r.kind} run): its error against the float64 oracle is at least "
                        f"{num(structure['min_bin_excess'])}x its rounding budget in every magnitude bin, "
                        f"{num(structure['explained_by_value'])} of it explained by the output's value{axis}"
                        + (f", {num(structure['sign_agreement'] * 100)}% of it {structure['sign']}"
                           if structure.get("sign_consistent") else "")
                        + f"; max error {num(ce.max_abs)}, reference {num(re_.max_abs)}")
                deriv += (" Error structure (kws's classifier, docs/numerics.md 'Different function or less precise'): "
                          "rounding, even in a narrower format or one way (truncation), varies from element to element "
                          "and stays within a few ulps times the reduction length; this error is a function of the "
                          "input, far above rounding at every magnitude.")
            else:
                what = (f"the candidate is less accurate than the reference beyond FlashAttention's 2x rule and "
                        f"{num(ratio)}x its error budget on {r.label} ({r.kind} run): max error vs float64 oracle "
                        f"{num(ce.max_abs)}{nonfin}, reference {num(re_.max_abs)}")
            cinfo = self._contract_accepts(facts, r, o, fa)[1] if facts.cruns else None
            if cinfo is not None and "limit" in cinfo:
                what += "; " + acontract.beyond_text(cinfo, ce.max_abs, cinfo["limit"])
            out.append(self.finding(
                ctx, sev,
                f"{what}; {len(pick)} output/run(s) [interpreter numerics"
                f"{'; the interpreter mis-sums ' + r.case['dtype'] if untrusted else ''}]",
                {**(suspect(ctx, "precision", f"{what[:200]} (not confirmed: "
                                              + ("the interpreter's arithmetic at this dtype is not trusted)" if untrusted
                                                 else "a longer reduction alone, with no low-precision evidence in the "
                                                      "IR)")) if sev == "warn" else {}),
                 "case": r.case, "seed": r.seed, "kind": r.kind, "output": o.j, "candidate_vs_oracle": ce.as_dict(),
                 "reference_vs_oracle": re_.as_dict(), "fa_floor": fa["floor"], "fa_limit": fa["limit"],
                 "budget": o.bud.as_dict(), "interpreter": a.interpreter, "ir_low_precision": facts.ir_lowp,
                 "untrusted": facts.untrusted.get(r.case["dtype"]), "error_structure": structure,
                 "cause": "different function" if structure["systematic"] and not untrusted else "less precise",
                 **({"contract": cinfo} if cinfo is not None else {}),
                 "derivation": deriv},
                case=r.case, seed=r.seed))
        if passing:
            r, o, fa = max(passing, key=lambda t: t[2]["candidate_err"] / t[2]["limit"] if t[2]["limit"] > 0 else 0.0)
            growth, ev_growth = "", None
            if long_k:
                lr, lo, lfa = long_k[0]
                growth = (f"; at a {LONG_K_FACTOR}x longer reduction (K = {lr.red.k}, {case_label(lr.case)}) the candidate's "
                          f"error is {num(lfa['candidate_err'])} vs the reference's {num(lfa['reference_err'])}")
                ev_growth = {"case": lr.case, "K": lr.red.k, "candidate_err": lfa["candidate_err"],
                             "reference_err": lfa["reference_err"], "ok": lfa["ok"]}
            total = len(passing) + len(viol)
            out.append(self.finding(
                ctx, "info",
                f"candidate vs float64 oracle: FlashAttention's bound (2x the reference's error + floor) or the error "
                f"budget holds on {len(passing)} of {total} output/run(s); closest: {r.label}, "
                f"{num(fa['candidate_err'])} vs bound {num(fa['limit'])}{growth}",
                {"checked": total, "passing": len(passing),
                 "closest": {"case": r.case, "seed": r.seed, "kind": r.kind, "candidate_err": fa["candidate_err"],
                             "reference_err": fa["reference_err"], "limit": fa["limit"]},
                 "long_reduction": ev_growth, "interpreter": a.interpreter,
                 "derivation": f"FlashAttention's rule (hopper/test_flash_attn.py): max|candidate - oracle| <= "
                               f"{num(FA_FACTOR)} * max|reference - oracle| + floor, floor = max(2*max|fl(fl(o + 0.3) - 0.3) - o|, "
                               "max B: one error budget, gamma of the reduction length times the magnitude). "
                               f"{INTERPRETER_NOTE if a.interpreter else 'Measured on the GPU.'}"},
                case=r.case, seed=r.seed))
        return out

    # -- a declared accuracy contract ([contract] compute_dtype) --------------------------------

    def _contract_runs(self, ctx: CheckContext, runs: list[Run]) -> dict[int, Any]:
        """The contract oracle of every run with a float64 oracle (empty without a declared
        contract: judged exactly as before)."""
        acc = acontract.declared(ctx)
        if acc is None:
            return {}
        pick = [r for r in runs if r.ref.ok and any(o.oracle is not None for o in r.outs)]
        got = acontract.run_contract(ctx, acc, [(r.case, r.seed, []) for r in pick])
        return {id(r): cr for r, cr in zip(pick, got, strict=True)}

    @staticmethod
    def _contract_accepts(facts: Facts, r: Run, o: OutData, fa: dict[str, Any] | None = None) -> tuple[bool, dict[str, Any]]:
        """(the candidate's error on ``r``/``o`` is within what the declared contract incurs and
        not systematic against the contract's rounding, the figures)."""
        cr = facts.cruns.get(id(r))
        if cr is None or o.oracle is None or r.cand is None or not r.cand.ok or o.j >= len(r.cand.outputs):
            return False, {"why": "no contract oracle for this run"}
        if not cr.contract.ok:
            return False, {"why": f"the contract oracle {cr.contract.failure_text()}"}
        g = r.cand.outputs[o.j].values
        fa = fa or fa_rule(o, g)
        jd = acontract.judge(cr, o.j, g, o.oracle, float(fa["floor"]) if fa else 0.0, o.dtype)
        if jd is None:
            return False, {"why": "the contract oracle has no such output"}
        return jd.accepted, {**jd.figures, "candidate_nonfinite": jd.nonfinite, "margin": acontract.CONTRACT_MARGIN,
                             "systematic_vs_contract": bool(jd.structure["systematic"])}

    def _contract_distance(self, ctx: CheckContext, runs: list[Run], facts: Facts) -> list[Finding]:
        """The info a declared contract always gets: how far it is from fp32 (and from the
        float64 oracle) on the runs, worst first."""
        acc = acontract.declared(ctx)
        if acc is None:
            return []
        rows = []
        for r in runs:
            cr = facts.cruns.get(id(r))
            if cr is None:
                continue
            for o in r.outs:
                ce = acontract.contract_error(cr, o.j, o.oracle) if o.oracle is not None else None
                if ce is not None:
                    rows.append((r, o, ce))
        if not rows:
            why = next((cr.contract.failure_text() for cr in facts.cruns.values() if not cr.contract.ok),
                       "no run with a float64 oracle")
            return [self.finding(ctx, "info", f"declared contract ({acc.describe()}): no contract oracle ({why})",
                                 {"contract": acc.describe()})]
        r, o, ce = max(rows, key=lambda t: t[2]["from_fp32"] if t[2]["from_fp32"] == t[2]["from_fp32"] else -1.0)
        return [self.finding(
            ctx, "info", acontract.distance_text(acc, ce, f"{r.label} ({r.kind} run)"),
            {"contract": acc.describe(), "worst": {"case": r.case, "seed": r.seed, "kind": r.kind, "output": o.j, **ce},
             "runs": [{"case": x.case, "seed": x.seed, "kind": x.kind, "output": y.j, **z} for x, y, z in rows[:24]],
             "derivation": acontract.DERIVATION},
            case=r.case, seed=r.seed)]

    # -- lowered IR ---------------------------------------------------------------------------

    def _ir(self, ctx: CheckContext, a: Any, runs: list[Run], box: dict[str, Any]) -> list[Finding]:
        if ctx.task.backend != "triton":
            return [self.finding(ctx, "info", f"the candidate's backend is {ctx.task.backend}: no Triton IR to read",
                                 {"backend": ctx.task.backend,
                                  "derivation": "kws reads lowered IR only for Triton candidates; the precision "
                                                "of other backends is judged from their numerics alone."})]
        if "err" in box:
            # on the CPU the TF32 and accumulator questions are answered only by the IR
            ctx.could_not_judge(f"the Triton IR was not examined: kws's AOT step failed ({box['err'][:200]})")
            return [self.finding(ctx, "info", f"kws could not compile the Triton kernels ahead of time: {box['err']}",
                                 {"error": box["err"], "derivation": "A failure of kws's AOT step is a limitation of "
                                  "kws, not a verdict on the kernel: TF32 lowering and low-precision accumulators "
                                  "were not examined."})]
        outc = box.get("out")
        if outc is None or not outc.ok:
            why = outc.failure_text() if outc is not None else "no result"
            ctx.could_not_judge(f"the Triton IR was not examined: the AOT step {why[:200]}")
            return [self.finding(ctx, "info", f"the Triton IR was not examined: the AOT step {why}",
                                 {"error": outc.failure_evidence() if outc is not None else None,
                                  "derivation": "The AOT step runs the candidate on the smallest declared case to "
                                                "capture its launches; it did not complete, so TF32 lowering and "
                                                "low-precision accumulators were not examined."})]
        ex = extra_as(outc.step.extra, TritonAotExtra)
        launches = ex.launches
        kernels = ex.kernels
        cases = self._aot_cases(ctx)
        out: list[Finding] = []
        ok_k = [k for k in kernels if k.analysis is not None]
        errs = [k for k in kernels if k.error is not None]
        if not launches:
            return [self.finding(ctx, "info", "the candidate launched no Triton kernel on the smallest declared case "
                                 "(IR not examined)", {"cases": cases, "derivation": "The launch monitor saw no "
                                 "Triton launch, so there is no kernel to compile ahead of time."})]
        if errs:
            ctx.could_not_judge(f"{len(errs)} of {len(kernels)} kernel launch(es) did not compile ahead of time "
                                 f"({str(errs[0].error)[:160]}): their IR was not examined")
        tf32: list[tuple[AotKernel, IrDot, list[Any]]] = []
        half_acc: list[tuple[AotKernel, IrDot, list[Any]]] = []
        fp8: list[tuple[AotKernel, IrDot, list[Any]]] = []
        lowp: list[tuple[AotKernel, LowPrecisionOp, list[Any]]] = []
        contract: list[tuple[AotKernel, int, list[Any]]] = []
        for k in ok_k:
            an = k.analysis
            assert an is not None
            rec_cases = launches[k.launch].cases if k.launch < len(launches) else []
            dt = [cases[i]["dtype"] for i in rec_cases if i < len(cases)]
            for d in an.dots:
                if d.a == "f32" and d.b == "f32" and d.input_precision == "tf32" and d.lowering in ("mma", "wgmma"):
                    tf32.append((k, d, dt))
                if d.d in ("f16", "bf16"):
                    half_acc.append((k, d, dt))
                if d.a in _FP8_IR or d.b in _FP8_IR:
                    fp8.append((k, d, dt))
            for item in an.low_precision_accumulators + an.low_precision_reductions:
                lowp.append((k, item, dt))
            n_fma = sum(an.fma.values())
            if n_fma and not an.fma_dots and not an.explicit_fma:
                contract.append((k, n_fma, dt))
        out += self._tf32(ctx, a, tf32)
        for k, d, dt in half_acc[:1]:
            assert k.analysis is not None and d.d is not None
            mma = [m.instr for m in k.analysis.mma if m.d in ("f16", "bf16")]
            text = f"tl.dot at {_src(d.source)} accumulates in {d.d} ({k.target}: {mma[0] if mma else d.text[:120]}); {dt or ''}"
            out.append(self.finding(
                ctx, "warn", text,
                {**suspect(ctx, "precision", text), "kernel": k.qualname, "target": k.target, "dot": _builtins(d),
                 "mma": mma, "dtypes": dt,
                 "source": _builtins(d.source),
                 "derivation": f"The TTIR dot's result type is {d.d}: every MMA adds its products into a "
                               f"{d.d} accumulator (u = {pow2_text(FORMATS[_torch(d.d)].unit_roundoff)}), so the "
                               f"error grows like sqrt(K)*u_{d.d}*|a|ᵀ|b| instead of sqrt(K)*2^-24*|a|ᵀ|b|; "
                               "out_dtype=tl.float32 (the default) keeps fp32."},
            ))
        for k, d, _dt in fp8[:1]:
            kmax = max((r.red.k for r in runs), default=0)
            nimp = d.max_num_imprecise_acc
            if nimp is not None and nimp >= max(kmax, 1):
                text = (f"fp8 tl.dot at {_src(d.source)} accumulates without promotion on {k.target} "
                        f"(maxNumImpreciseAcc = {nimp} >= K = {kmax})")
                out.append(self.finding(
                    ctx, "warn", text,
                    {**suspect(ctx, "precision", text), "kernel": k.qualname, "dot": _builtins(d), "K": kmax,
                     "source": _builtins(d.source),
                     "derivation": "Hopper's fp8 wgmma accumulates into a register narrower than fp32; Triton "
                                   "promotes the partial sum to fp32 every max_num_imprecise_acc elements of K. "
                                   f"Here it is {nimp}, not below K = {kmax}, so the whole reduction stays in the "
                                   "narrow accumulator."}))
        seen_src: set[str] = set()
        for k, item, dt in lowp:
            key = _src(item.source)
            if key in seen_src:
                continue
            seen_src.add(key)
            what = "reduction" if "tt.reduce" in item.text else "loop-carried accumulator"
            text = (f"{item.dtype} {what} at {key} ({k.qualname}, {k.target}, {'/'.join(dt)} inputs): the sum is "
                    f"kept in {item.dtype}")
            out.append(self.finding(
                ctx, "warn", text,
                {**suspect(ctx, "precision", text), "kernel": k.qualname, "target": k.target, "ir": item.text,
                 "dtypes": dt,
                 "source": _builtins(item.source),
                 "derivation": f"The TTGIR adds in {item.dtype} ({item.text[:160]}). A sum kept in "
                               f"{item.dtype} rounds every partial sum at u = "
                               f"{pow2_text(FORMATS[_torch(item.dtype)].unit_roundoff)}, stagnates once the partial "
                               "sum is 2/u times the addends"
                               + (", and overflows past 65504" if item.dtype == "f16" else "")
                               + "; accumulate in tl.float32 (.to(tl.float32) before the sum, or an fp32 "
                                 "accumulator)."}))
        for k, n_fma, dt in contract[:1]:
            out.append(self.finding(
                ctx, "info",
                f"{k.qualname} ({k.target}): {n_fma} fused multiply-adds in the PTX with no tl.fma in the source: "
                "the GPU build contracts a*b + c (one rounding) where the interpreter rounds twice",
                {"kernel": k.qualname, "fma": _builtins(k.analysis.fma if k.analysis else {}), "dtypes": dt,
                 "derivation": "Triton compiles with FP fusion enabled (TRITON_DEFAULT_FP_FUSION=1), so LLVM contracts "
                               "a multiply followed by an add into fma.rn; results can differ from the interpreter's "
                               "by up to one rounding per contraction (usually closer to the exact value)."}))
        mm = sorted({m.instr for k in ok_k if k.analysis is not None for m in k.analysis.mma})
        summary = (f"compiled {len(ok_k)} kernel launch(es) ahead of time for {', '.join(sorted({k.target for k in ok_k}))} "
                   f"({ex.mode}): "  # cached or not is evidence: a summary is the same on every run
                   + (f"MMA {', '.join(mm)}" if mm else "no MMA instructions")
                   + (f"; {len(errs)} failed to compile" if errs else ""))
        out.append(self.finding(
            ctx, "info", summary,
            {"kernels": [{"qualname": k.qualname, "target": k.target, "file": k.file,
                          "dtypes": [cases[i]["dtype"] for i in launches[k.launch].cases]
                          if k.launch < len(launches) else [],
                          **({"dots": _builtins(k.analysis.dots), "mma": _builtins(k.analysis.mma),
                              "fma": _builtins(k.analysis.fma)} if k.analysis is not None else {"error": k.error})}
                         for k in kernels],
             "mode": ex.mode, "cached": ex.cached, "seconds": ex.seconds,
             "derivation": "Each launch's signature and constexprs were captured in the interpreter and the kernel "
                           "compiled with triton.compile(ASTSource(...), target=GPUTarget('cuda', 90, 32)) in a "
                           "process without TRITON_INTERPRET; the TTIR, TTGIR and PTX were read."
                           if ex.mode == "aot" else "The IR was read from the kernels the GPU launch compiled."}))
        return out

    def _aot_cases(self, ctx: CheckContext) -> list[dict[str, Any]]:
        from workstation.checks.support.numaudit import aot_cases

        return aot_cases(ctx.cases, ctx.task.contract.dtypes)

    def _tf32(self, ctx: CheckContext, a: Any, tf32: list[tuple[AotKernel, IrDot, list[Any]]]) -> list[Finding]:
        if not tf32:
            return []
        k, d, dt = tf32[0]
        assert k.analysis is not None
        mma = [m.instr for m in k.analysis.mma if m.a == "tf32"]
        mode = "rna" if k.analysis.cvt_rna_tf32 else "trunc"
        emu = a.tf32_emulation(mode)
        worst = None
        for r, outc in emu:
            if not outc.ok:
                continue
            for o in r.outs:
                if o.j >= len(outc.outputs):
                    continue
                g = outc.outputs[o.j]
                c = compare(o.ref, g.values, o.tol, expected_dtype=o.dtype, got_dtype=g.dtype)
                ratio = _excess(c)
                if worst is None or ratio > worst[0]:
                    worst = (ratio, r, o, c)
        how = ("operands rounded to TF32 (cvt.rna.tf32.f32)" if mode == "rna"
               else "operands truncated to TF32 (the MMA reads fp32 registers and ignores their low 13 bits)")
        base = (f"tl.dot at {_src(d.source)} ({k.qualname}) has fp32 operands and inputPrecision = tf32 "
                f"(tl.dot's default): on {k.target} it lowers to {mma[0] if mma else d.lowering}, so each "
                f"operand keeps 10 of its 23 mantissa bits (u_tf32 = 2^-11 instead of 2^-24). The interpreter "
                f"computes this dot in true fp32, so the declared fp32 cases pass on the CPU and say nothing about "
                f"the GPU.")
        if worst is None:
            text = (f"tl.dot at {_src(d.source)} lowers to TF32 MMA for fp32 inputs ({mma[0] if mma else ''}); kws "
                    "could not emulate it on the declared cases")
            return [self.finding(ctx, "warn", text,
                                 {"kernel": k.qualname, "dot": _builtins(d), "mma": mma, "source": _builtins(d.source),
                                  "derivation": base, **suspect(ctx, "precision", text)})]
        ratio, r, o, c = worst
        w = c.worst or {}
        deriv = (base + f" Emulating it (the reference run on the declared inputs with {how}; products of TF32 values "
                 f"are exact in fp32 and accumulate in fp32 as on the tensor core) on {r.label} gives outputs that "
                 f"differ from the fp32 reference by up to {num(c.max_abs)} (at {w.get('index')}: reference "
                 f"{num(w.get('expected'), 6)}, TF32 {num(w.get('got'), 6)}), {num(ratio)}x the declared "
                 f"{_tol(o.tol)}; {c.n_bad} of {c.numel} elements fail it. Fix: tl.dot(a, b, input_precision=\"ieee\") "
                 f"(or \"tf32x3\"), or a tolerance that admits TF32.")
        sev = "fail" if not c.ok else "info"
        summ = (f"tl.dot at {_src(d.source)} lowers to TF32 on {k.target} ({mma[0] if mma else 'MMA'}) for fp32 "
                f"inputs: emulated TF32 misses the declared {_tol(o.tol)} on {r.label} by {num(ratio)}x "
                f"({c.n_bad}/{c.numel} elements; the interpreter's dot is true fp32, so the declared cases pass on "
                f"the CPU)" if not c.ok else
                f"tl.dot at {_src(d.source)} lowers to TF32 on {k.target} for fp32 inputs; emulated TF32 stays "
                f"within the declared {_tol(o.tol)} on the declared cases (max difference {num(c.max_abs)})")
        return [self.finding(ctx, sev, summ,
                             {"kernel": k.qualname, "target": k.target, "dot": _builtins(d), "mma": mma,
                              "emulation": mode, "case": r.case, "seed": r.seed, "comparison": c.evidence(),
                              "source": _builtins(d.source), "derivation": deriv}, case=r.case, seed=r.seed)]


def _tol(t: ResolvedTolerance | None) -> str:
    if t is None:
        return "the tolerance"
    if t.ulp is not None:
        return f"ulp = {num(t.ulp)}"
    return f"atol = {num(t.atol)}, rtol = {num(t.rtol)}"


def _torch(ir_dtype: str) -> str:
    return {"f16": "float16", "bf16": "bfloat16", "f32": "float32"}.get(ir_dtype, "float32")


def _excess(c: Any) -> float:
    w = c.worst or {}
    err, allowed = w.get("abs_err"), w.get("allowed")
    if not isinstance(err, float) or not isinstance(allowed, float):
        return 0.0
    return err / allowed if allowed > 0 else (0.0 if err == 0 else float("inf"))


def _zero_rows(got: np.ndarray, ref: np.ndarray) -> int:
    """Rows (last dimension) that are entirely zero in ``got`` but not in ``ref``."""
    if got.ndim < 2 or got.shape != ref.shape:
        return 0
    g = got.reshape(-1, got.shape[-1])
    r = ref.reshape(-1, ref.shape[-1])
    return int(((g == 0).all(axis=1) & ~(r == 0).all(axis=1)).sum())

