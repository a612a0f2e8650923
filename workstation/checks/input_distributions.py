"""``input-distributions``: a candidate right only on the task's own input distribution."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

import numpy as np

from workstation.analysis.compare import FORMATS, Comparison, compare
from workstation.checks.support.structure import input_structure
from workstation.checks.support.trials import (
    Trial,
    TrialResult,
    evidence_of,
    oracle_judgement,
    run_trials,
)
from workstation.engine.check import Check, Finding, NotJudged, Skip, register
from workstation.engine.context import CallOutcome, CheckContext, case_label
from workstation.protocol.extras.calls import CallExtra
from workstation.protocol.steps import Diverse, Rescale, Transform

#: replacement distributions (:mod:`workstation.harness.values`, ``diverse``; unit variance
#: times the input's RMS): bounded, and heavy-tailed (Student-t, 2 degrees of freedom).
DISTRIBUTIONS: tuple[Literal["uniform", "heavy"], ...] = ("uniform", "heavy")
#: the largest |value| a draw reaches, in units of the input's RMS (heavy: clipped at 20).
DRAW_REACH = {"uniform": 3.0**0.5, "heavy": 20.0}
#: factors the make_inputs values are multiplied by (KernelBench-Hard's 1e-4..64).
SCALES = (1e-4, 64.0)
#: a scaled input keeps its RMS at least this many times the dtype's smallest normal (else
#: most values are subnormal: kernels may flush them, the contract does not say) ...
HEADROOM_SMALL = 2.0**10
#: ... and its largest magnitude this many times below the dtype's largest finite value.
HEADROOM_LARGE = 2.0**4
#: an output whose max |y| is under this many times its dtype's smallest normal underflows.
HEADROOM_OUT = 2.0**3


def _magnitude(v: np.ndarray) -> float:
    """max |v| over finite elements (0 when none)."""
    f = np.abs(v[np.isfinite(v)]) if v.dtype.kind in "fc" else np.abs(v)
    return float(f.max()) if f.size else 0.0


@register
class InputDistributions(Check):
    """The candidate is right on the task's input distribution only.

    Catches:
        analytic shortcuts and distribution-fitted kernels: a loss computed from the
        moments of standard-normal inputs instead of the inputs (KernelBench's
        `test_level1_hacks.py`: such kernels pass normal inputs and fail uniform or Pareto
        ones), a normalisation that assumes unit variance or zero mean, a kernel that
        clamps or rounds at a magnitude the task's inputs never reach, one that is right only
        at the magnitude `make_inputs` draws (KernelBench-Hard rescales inputs 1e-4..64).

    How:
        on the first declared case (first seed), the floating-point inputs the callables
        read (not `out_args`, not `[inputs] keep_structure`; integer inputs, integer-valued
        floating inputs and scalars keep their values) are replaced in both roles by a uniform
        and a heavy-tailed draw (Student-t,
        2 degrees of freedom, clipped at 20; unit variance times the input's RMS, non-negative
        inputs kept non-negative; an input that is sorted, symmetric or has rows summing to one
        on every seed `make_inputs` drew stays so), and separately multiplied by 1e-4 and by 64. The candidate
        is compared with the reference at the task's tolerance with its `atol` multiplied by
        the ratio of the reference's output magnitude (max |y|) on those inputs to that on the
        task's own (never below 1 for the draws): the absolute part of the tolerance moves
        with the output, the relative part stays. A scale is moved toward 1 where the scaled
        inputs would leave the dtype's comfortable range (RMS under 2^10 times the smallest
        normal, or max |x| within 2^4 of the largest finite value: float16's 1e-4 becomes about
        0.06), and skipped when no factor on its side of 1 fits; a draw or scale that could
        exceed the contract's `max_abs_input` is skipped (all said in the info). A run where
        the reference's output is not finite (it overflows), or on a shrinking scale loses
        nonzero elements or falls below 8 times the output dtype's smallest normal (it
        underflows), is dropped and said.

    Findings:
        | finding | severity |
        |---|---|
        | the candidate mismatches the reference on uniform, heavy-tailed or rescaled inputs while it matches on the task's own (which inputs, the worst element, the scaled tolerance), or raises there | `fail` |
        | the two disagree there but the candidate is within tolerance of the float64 oracle and the reference is not (the reference is off on those inputs, e.g. a float16 reference overflowing its sum of squares at x 64) | `warn` |
        | every run matches; the scales or draws skipped and why | `info` |

    Example:
        (an MSE loss returning the value `2.0` that unit-normal inputs give):
        `case N=64 float32: with heavy-tailed inputs (Student-t, 2 dof) the candidate
        mismatches the reference: 1 of 1 elements ... expected 7.31, got 2.0`.

    Source:
        KernelBench `tests/test_level1_hacks.py` (analytic loss kernels caught by
        uniform/Pareto inputs); KernelBench-Hard (inputs rescaled 1e-4..64).

    Limits:
        the structure `make_inputs` shows on every seed is kept (`support/structure.py`: sorted
        along the last dimension, non-negative, symmetric, rows summing to one are restored after
        each draw or scale; integer-valued inputs keep their values), relations between inputs
        (SPD matrices, indices into another input) are not: declare them in `[inputs]
        keep_structure`; a shortcut exact for these distributions too is not seen. Only the
        first declared case.

    Not judged when:
        the candidate fails on the task's own inputs of that case (correctness judges it);
        no floating-point input can be varied: `skip`. Runs dropped by a limit of this run
        (a budget, a kws transform failing) leave the check not judged for them.

    Forgeable:
        Measured in the job process: the outputs only (copied by the harness into the result files).
        Still forgeable from inside: a candidate that detects non-normal inputs and falls back to the exact computation only then.
    """

    id = "input-distributions"
    order = 53
    title = "Other input distributions"

    def run(self, ctx: CheckContext) -> list[Finding]:
        case, seed = dict(ctx.cases[0]), ctx.seeds[0]
        label = case_label(case)
        ref = ctx.reference([(case, seed)], send_inputs=True)[0]
        plain_ref = ctx.reference([(case, seed)])[0]
        plain = ctx.candidate([(case, seed)])[0]
        if not plain.ok or not all(c.ok for c in ctx.compare(plain_ref, plain, case)):
            raise NotJudged(f"case {label}: the candidate does not match the reference on the task's own inputs "
                            "(correctness judges it); other distributions not examined")
        args, in_dtypes, stats = self._inputs(ctx, ref)
        # the structure make_inputs always shows (sorted, non-negative, symmetric, rows summing to
        # one) is kept through every variant; integer-valued inputs keep their values
        st = input_structure(ctx, case)
        args = st.args(args)
        keep = st.keep_for(args)
        if not args:
            raise Skip("no floating-point input the callables read can be varied (out_args, keep_structure, "
                       "integer inputs and integer-valued floating inputs keep their values)")
        trials: list[Trial] = []
        skipped: list[str] = []
        bound = ctx.task.contract.max_abs_input
        for dist in DISTRIBUTIONS:
            reach = max((DRAW_REACH[dist] * stats[i][0] for i in args), default=0.0)
            if bound and reach > bound:
                skipped.append(f"{dist} inputs: values up to {reach:.3g} would exceed the contract's max_abs_input "
                               f"= {bound:g}")
                continue
            t: Transform = Diverse(dist=dist, args=args, seed=seed, keep=keep)
            trials.append(Trial(case, seed, f"{dist} inputs", [t], [t], {"variant": dist}))
        notes: list[str] = []
        for s in SCALES:
            f, why = self._fit_scale(s, in_dtypes, stats)
            reach = max((stats[i][1] * f for i in args), default=0.0)
            if f and bound and reach > bound:
                f, why = 0.0, f"values up to {reach:.3g} would exceed the contract's max_abs_input = {bound:g}"
            if not f:
                skipped.append(f"scale {s:g}: {why}")
                continue
            if why:
                notes.append(f"scale {s:g} moved to {f:.3g}: {why}")
            t = Rescale(factor=f, args=args, seed=seed, keep=keep)
            trials.append(Trial(case, seed, f"inputs x {f:.3g}", [t], [t], {"variant": f"x{f:.3g}", "factor": f}))
        results = run_trials(ctx, trials)
        findings: list[Finding] = []
        passed: list[str] = []
        for r in results:
            label_v = r.trial.label
            if r.status == "dropped":
                (ctx.could_not_judge if r.unjudged else skipped.append)(f"{label_v}: {r.reason}")
                continue
            if r.status == "error":
                findings.append(self.finding(
                    ctx, "fail", f"case {label}: with {label_v} the candidate {r.reason} (it returns on the task's "
                    "own inputs)", {**evidence_of(r), **(r.cand.failure_evidence() if r.cand else {})},
                    case=case, seed=seed))
                continue
            under = self._underflow(plain_ref, r.ref, r.trial.info.get("factor", 1.0))
            if under:
                skipped.append(f"{label_v}: {under}")
                continue
            comps, ratios = self._judge(ctx, case, plain_ref, r, diverse="variant" in r.trial.info
                                        and "factor" not in r.trial.info)
            bad = next(((j, c) for j, c in enumerate(comps) if not c.ok), None)
            if bad is None:
                passed.append(label_v)
                continue
            j, c = bad
            w = c.worst or {}
            ev = {**evidence_of(r), "output": j, "comparison": c.evidence(), "atol_factor": ratios[j],
                  "inputs_varied": args, "structure": st.evidence()}
            # a float64 oracle tells a candidate error from a reference that is off itself on
            # these inputs (as edge-shapes does): then the reference, not the candidate, is named
            ev["oracle"] = verdict = oracle_judgement(ctx, r)
            if verdict.get("available") and verdict["candidate_within"] and not verdict["reference_within"]:
                findings.append(self.finding(
                    ctx, "warn", f"case {label}: with {label_v} (inputs {args}) the reference is off: it misses the "
                    f"float64 oracle by {verdict['reference_max_err']:.3g} while the candidate is within tolerance "
                    f"of it ({verdict['candidate_max_err']:.3g}); reference-suspect judges the reference", ev,
                    case=case, seed=seed))
                continue
            findings.append(self.finding(
                ctx, "fail",
                f"case {label}: with {label_v} (inputs {args}) the candidate mismatches the reference"
                + (f" output {j}" if len(comps) > 1 else "") + f": {c.reason}; worst at {w.get('index')}: expected "
                f"{w.get('expected')}, got {w.get('got')} (atol x {ratios[j]:.3g} for the output's magnitude); it "
                "matches on the task's own inputs", ev, case=case, seed=seed))
        if not findings:
            kept_text = ", ".join(f"input {i} {'/'.join(k)}" for i, k in keep.items())
            findings.append(self.finding(
                ctx, "info",
                f"case {label}: the candidate matches the reference with " + (", ".join(passed) or "no variant")
                + (f"; skipped: {'; '.join(skipped)}" if skipped else "") + (f"; {'; '.join(notes)}" if notes else "")
                + (f"; kept: {kept_text}" if keep else ""),
                {"case": case, "seed": seed, "inputs_varied": args, "passed": passed, "skipped": skipped,
                 "scale_notes": notes, "structure": st.evidence()}))
            if not passed:
                ctx.could_not_judge(f"case {label}: every variant was skipped or dropped")
        return findings

    @staticmethod
    def _inputs(ctx: CheckContext, ref: CallOutcome) -> tuple[list[int], dict[int, str], dict[int, tuple[float, float]]]:
        """(indices of variable floating inputs, their dtypes, their (rms, max |x|))."""
        written = set(ctx.task.out_args) | set(ctx.task.inout_args)
        keep = set(ctx.task.extensions.keep_structure)
        args, dtypes, stats = [], {}, {}
        if ref.step is None:
            return [], {}, {}
        for d in ref.payload(CallExtra).inputs:
            i = d.index
            dt = d.dtype
            if d.kind != "tensor" or i in written or i in keep or not dt.startswith(("float", "bfloat")):
                continue
            arr = ref.step.arrays.get(f"in{i}")
            if arr is None or arr.size == 0:
                continue
            args.append(i)
            dtypes[i] = dt
            fin = arr[np.isfinite(arr)]
            stats[i] = (float(np.sqrt(np.mean(np.square(fin)))) if fin.size else 0.0, _magnitude(arr))
        return args, dtypes, stats

    @staticmethod
    def _fit_scale(s: float, dtypes: dict[int, str], stats: dict[int, tuple[float, float]]) -> tuple[float, str]:
        """``s`` moved into the range every input's dtype holds comfortably (RMS at least
        :data:`HEADROOM_SMALL` times the smallest normal, max |x| at most the largest finite
        value over :data:`HEADROOM_LARGE`): (factor, note), factor 0 when no factor on that
        side of 1 fits (the note says why)."""
        lo, hi, why_lo, why_hi = 0.0, float("inf"), "", ""
        for i, dt in dtypes.items():
            fmt = FORMATS.get(dt)
            rms, mx = stats[i]
            if fmt is None or rms <= 0 or mx <= 0:
                continue
            a = HEADROOM_SMALL * 2.0**fmt.emin / rms
            b = fmt.max / HEADROOM_LARGE / mx
            if a > lo:
                lo, why_lo = a, f"input {i} ({dt}) keeps its values normal only down to x {a:.3g}"
            if b < hi:
                hi, why_hi = b, f"input {i} ({dt}) stays finite with headroom only up to x {b:.3g}"
        f = min(max(s, lo), hi)
        if (s < 1 and f > 0.5) or (s > 1 and f < 2):
            return 0.0, why_lo if s < 1 else why_hi
        return f, (why_lo if f != s and s < 1 else why_hi if f != s else "")

    @staticmethod
    def _underflow(base: CallOutcome, got: CallOutcome, factor: float) -> str:
        """Why the reference's output underflows on inputs scaled by ``factor`` ("" when it
        does not): nonzero elements become 0 (on a shrinking scale only: on a growing one a
        saturating function's zeros are values), or max |y| nears the smallest normal."""
        for j, (e, g) in enumerate(zip(base.outputs, got.outputs, strict=False)):
            if g.values.dtype.kind != "f" or e.values.shape != g.values.shape:
                continue
            nz_base, nz = int(np.count_nonzero(e.values)), int(np.count_nonzero(g.values))
            if factor < 1 and nz < nz_base - max(1, nz_base // 100):
                return f"the reference's output {j} underflows ({nz_base - nz} elements nonzero before are 0)"
            fmt = FORMATS.get(g.dtype)
            m = _magnitude(g.values)
            if fmt is not None and 0 < m < HEADROOM_OUT * 2.0**fmt.emin:
                return f"the reference's output {j} underflows (max |y| {m:.3g} near the dtype's smallest normal)"
        return ""

    @staticmethod
    def _judge(ctx: CheckContext, case: dict[str, Any], base: CallOutcome, r: TrialResult,
               diverse: bool) -> tuple[list[Comparison], list[float]]:
        """Each output compared at the task's tolerance with atol scaled by the output's magnitude."""
        comps, ratios = [], []
        assert r.cand is not None
        for j, (e, g) in enumerate(zip(r.ref.outputs, r.cand.outputs, strict=False)):
            tol = ctx.tolerance(case, e.dtype)
            m0 = _magnitude(base.outputs[j].values) if j < len(base.outputs) else 0.0
            m1 = _magnitude(e.values)
            ratio = m1 / m0 if m0 > 0 and m1 > 0 else 1.0
            if diverse:
                ratio = max(ratio, 1.0)
            t = dataclasses.replace(tol, atol=tol.atol * ratio,
                                    source=f"{tol.source}, atol x {ratio:.3g} (output magnitude)")
            comps.append(compare(e.values, g.values, t, expected_dtype=e.dtype, got_dtype=g.dtype,
                                 nonfinite_ok=ctx.task.contract.nonfinite_inputs))
            ratios.append(ratio)
        if len(r.cand.outputs) != len(r.ref.outputs):
            comps.append(Comparison(ok=False, reason=f"the reference returns {len(r.ref.outputs)} outputs, the "
                                    f"candidate {len(r.cand.outputs)}", shape=(), dtype=""))
            ratios.append(1.0)
        return comps, ratios
