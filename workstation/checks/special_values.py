"""``special-values``: mismatches on legal inputs of large magnitude, signed zeros, tiny
(subnormal) values and, where the contract admits them, inf and nan."""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np

from workstation.analysis.compare import FORMATS, unit_roundoff
from workstation.analysis.numerics import num
from workstation.checks.support import contract as acontract
from workstation.checks.support.keep import kept_inputs
from workstation.checks.support.structure import input_structure
from workstation.checks.support.trials import (
    Trial,
    TrialResult,
    case_key,
    cheapest_per_dtype,
    declared_baselines,
    evidence_of,
    failure_text,
    run_trials,
    same_failure,
)
from workstation.engine.check import Check, Finding, Skip, register
from workstation.engine.context import CallOutcome, CheckContext, case_label
from workstation.protocol.extras.calls import CallExtra
from workstation.protocol.extras.monitors import KeepFloat64Report
from workstation.protocol.steps import (
    KeepFloat64,
    Magnitude,
    Nonfinite,
    Perturb,
    SignedZeros,
    Tiny,
    Upcast,
)

#: the value transforms :func:`variants` makes (members of the step protocol's ``Transform``)
Variant = Magnitude | SignedZeros | Tiny | Nonfinite

#: magnitudes tried when the contract states no bound (``max_abs_input = 0``), per input
#: dtype: well inside each format's range (fp16 max 65504, e4m3 448), large enough that
#: exp, squares and long sums of them overflow or lose precision in a careless kernel.
DEFAULT_MAGNITUDES: dict[str, tuple[float, ...]] = {
    "float64": (1e2, 1e8),
    "float32": (1e2, 1e4),
    "bfloat16": (1e2, 1e4),
    "float16": (1e2, 1e4),
    "float8_e4m3fn": (1e2,),
    "float8_e4m3fnuz": (1e2,),
    "float8_e5m2": (1e2, 1e4),
    "float8_e5m2fnuz": (1e2, 1e4),
}
#: a finite mismatch is the candidate's fault when its error against the float64 oracle
#: exceeds the declared tolerance plus this many times the reference's own largest error
#: against the oracle (the rounding noise of an fp32/fp16 computation at this magnitude).
NOISE_FACTOR = 8.0
#: the conditioning oracle: the float64 reference on inputs perturbed by this many unit
#: roundoffs of the compute precision (:func:`compute_dtype`; ``Perturb``: ``x + rel (|x| +
#: rms x) N(0, 1)``): how far the exact result moves when the inputs move by what one
#: rounding in that precision does to them. A backward-stable algorithm in it (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed.,
#: §1.5-1.6: forward error <~ condition number x backward error, a backward error of a few
#: unit roundoffs) is expected to be that far off; :data:`NOISE_FACTOR` x it is the leeway
#: for the growth of a reduction's backward error (gamma_n, §3.1, §4.2).
CONDITIONING_ROUNDOFFS = 1.0


def float_read_inputs(ctx: CheckContext, ref: CallOutcome) -> list[int]:
    """Indices of the floating-point tensor inputs the callables read (everything but
    ``out_args``), from the reference call's ``extra.inputs``."""
    ins = ref.payload(CallExtra).inputs if ref.step is not None else []
    return [d.index for d in ins if d.kind == "tensor" and d.index not in ctx.task.out_args
            and d.dtype.startswith(("float", "bfloat"))]


def variants(dtype: str, max_abs: float, nonfinite: bool) -> list[tuple[str, Variant, str]]:
    """(name, transform without ``args``/``seed``, description) of every value variant
    for inputs of ``dtype`` (see :mod:`workstation.harness.values`)."""
    out: list[tuple[str, Variant, str]] = []
    if max_abs > 0:
        src = f"max_abs_input = {max_abs:g}"
        out += [
            (f"spikes {max_abs:g}", Magnitude(mode="spikes", amax=max_abs),
             f"one +{max_abs:g} and one -{max_abs:g} per row ({src})"),
            (f"scale {max_abs:g}", Magnitude(mode="scale", amax=max_abs),
             f"inputs scaled so that max |x| = {max_abs:g} ({src})"),
            (f"shift {max_abs:g}", Magnitude(mode="shift", amax=max_abs),
             f"every input in [0.85, 0.95] x {max_abs:g}, one sign ({src})"),
        ]
    else:
        mags = DEFAULT_MAGNITUDES.get(dtype, (1e2,))
        src = "no max_abs_input stated: kws's magnitudes for " + dtype
        for a in mags:
            out.append((f"spikes {a:g}", Magnitude(mode="spikes", amax=a),
                        f"one +{a:g} and one -{a:g} per row ({src})"))
            out.append((f"scale {a:g}", Magnitude(mode="scale", amax=a),
                        f"inputs scaled so that max |x| = {a:g} ({src})"))
        out.append((f"shift {mags[0]:g}", Magnitude(mode="shift", amax=mags[0]),
                    f"every input in [0.85, 0.95] x {mags[0]:g}, one sign ({src})"))
    out.append(("signed zeros", SignedZeros(), "every third element -0.0, row 0 all -0.0, row 1 all +0.0"))
    out.append(("tiny", Tiny(), "magnitudes within 4x the smallest normal, mostly subnormal"))
    if nonfinite:
        out.append(("nonfinite", Nonfinite(),
                    "one nan, +inf and -inf per row (the contract admits non-finite inputs)"))
    return out


def oracle_verdict(ctx: CheckContext, r: TrialResult, oracle: CallOutcome | None,
                   perturbed: CallOutcome | None = None) -> dict[str, Any]:
    """Whether a finite mismatch is beyond the rounding noise of the computation at these
    magnitudes: the candidate's error against the float64 oracle vs the declared
    tolerance plus :data:`NOISE_FACTOR` times the larger of the reference's own largest
    error there and, with ``perturbed`` (the conditioning oracle, :data:`CONDITIONING_ROUNDOFFS`),
    how far the float64 result moves when the inputs move by their dtype's rounding
    (``conditioning_noise``: what an fp32 computation of an ill-conditioned function cannot
    avoid, which a reference computed in float64 does not show)."""
    if oracle is None or not oracle.ok or len(oracle.outputs) != len(r.ref.outputs):
        return {"available": False, "why": oracle.failure_text() if oracle is not None and not oracle.ok
                else "the reference gave no float64 result"}
    narrow = [j for j, o in enumerate(oracle.outputs)
              if o.values.dtype.kind == "f" and o.dtype not in ("float64", "complex128")]
    if narrow:
        # the reference computed in a narrower format even on float64 inputs, through
        # something kws's float64 dispatch mode cannot reach: there is no oracle
        return {"available": False, "why": f"no oracle: on float64 inputs the reference still returns "
                f"{', '.join(oracle.outputs[j].dtype for j in narrow)} (output(s) {narrow})"}
    kept = (oracle.payload(CallExtra).monitors.of(KeepFloat64Report).kept
            if oracle.step is not None else {})
    worst_excess, ref_err_max, cond_max = 0.0, 0.0, 0.0
    per = []
    assert r.cand is not None  # a mismatch: the candidate ran
    for j, (e, g, o) in enumerate(zip(r.ref.outputs, r.cand.outputs, oracle.outputs, strict=False)):
        if e.values.dtype.kind not in "f" or g.values.shape != o.values.shape:
            continue
        tol = ctx.tolerance(r.trial.case, e.dtype)
        ov = o.values.astype(np.float64)
        fin = np.isfinite(ov) & np.isfinite(e.values) & np.isfinite(g.values)
        if not fin.any():
            continue
        ref_err = float(np.abs(e.values - ov)[fin].max())
        cond = _conditioning_noise(perturbed, j, ov, fin)
        cand_err = np.abs(g.values - ov)
        allowed = tol.atol + tol.rtol * np.abs(ov) + NOISE_FACTOR * max(ref_err, cond or 0.0)
        excess = float(np.max((cand_err - allowed)[fin]))
        row = {"output": j, "reference_max_err_vs_oracle": ref_err,
               "candidate_max_err_vs_oracle": float(cand_err[fin].max()), "noise_factor": NOISE_FACTOR}
        if cond is not None:
            row["conditioning_noise"] = cond
        per.append(row)
        worst_excess = max(worst_excess, excess)
        ref_err_max = max(ref_err_max, ref_err)
        cond_max = max(cond_max, cond or 0.0)
    out = {"available": True, "beyond_noise": worst_excess > 0, "reference_max_err_vs_oracle": ref_err_max,
           "outputs": per, "casts_kept_in_float64": kept}
    if perturbed is not None:
        out["conditioning"] = {"max_noise": cond_max, "roundoffs": CONDITIONING_ROUNDOFFS,
                               "ran": bool(perturbed.ok), **({} if perturbed.ok else {"why": perturbed.failure_text()})}
    return out


def compute_dtype(dtype: str) -> str:
    """The precision a correct kernel computes in for inputs of ``dtype`` when no accuracy
    contract says otherwise: float64 for float64, else float32 (half and fp8 inputs are
    stored narrow and computed and accumulated in fp32 by convention; a kernel that computes
    in the narrow type is what special-values and precision-regime look for)."""
    return "float64" if dtype == "float64" else "float32"


def _conditioning_noise(perturbed: CallOutcome | None, j: int, ov: np.ndarray, fin: np.ndarray) -> float | None:
    """The largest change of output ``j`` of the float64 oracle under the conditioning
    perturbation (None without one, or where it did not run or has another shape)."""
    if perturbed is None or not perturbed.ok or j >= len(perturbed.outputs):
        return None
    pv = perturbed.outputs[j].values
    if pv.shape != ov.shape or pv.dtype.kind != "f":
        return None
    ok = fin & np.isfinite(pv)
    return float(np.abs(pv.astype(np.float64) - ov)[ok].max()) if ok.any() else None


def _subnormal_only(r: TrialResult) -> bool:
    """Every mismatching element has a subnormal (or zero) expected and got value: a
    flush-to-zero difference, not a wrong result."""
    assert r.cand is not None  # a mismatch: the candidate ran
    for c, e, g in zip(r.comps, r.ref.outputs, r.cand.outputs, strict=False):
        if c.ok:
            continue
        fmt = FORMATS.get(e.dtype)
        if fmt is None or e.values.shape != g.values.shape:
            return False
        tol = c.tolerance
        bad = ~(np.abs(g.values - e.values) <= (tol.atol + tol.rtol * np.abs(e.values) if tol else 0))
        if not (np.abs(e.values[bad]) < fmt.tiny).all() or not (np.abs(g.values[bad]) < fmt.tiny).all():
            return False
    return True



def _variant_trials(ctx: CheckContext, cases: list[dict[str, Any]], base: dict[str, TrialResult],
                    seed: int) -> list[Trial]:
    """The value-variant trials of every case whose reference returned, on the floating inputs
    the callables read outside ``[inputs] keep_structure``."""
    contract = ctx.task.contract
    trials: list[Trial] = []
    keep = kept_inputs(ctx, [(c, base[case_key(c)].ref) for c in cases])  # task.toml's indices, checked
    for case in cases:
        ref = base[case_key(case)].ref
        if not ref.ok:
            continue
        # make_inputs' structure (sorted, non-negative, symmetric, rows summing to one) is put
        # back after each variant; integer-valued inputs keep their values
        st = input_structure(ctx, case)
        args = st.args([i for i in float_read_inputs(ctx, ref) if i not in keep])
        if not args:
            continue
        for name, spec, desc in variants(case.get("dtype", ""), contract.max_abs_input, contract.nonfinite_inputs):
            t = msgspec.structs.replace(spec, args=args, seed=seed, keep=st.keep_for(args))
            trials.append(Trial(dict(case), seed, name, [t], [t],
                                {"variant": name, "inputs_changed": args, "values": desc}))
    return trials


def _float64_oracles(ctx: CheckContext, rs: list[TrialResult]) -> dict[int, CallOutcome]:
    """The float64 reference (the float64 oracle) on each result's inputs, by ``id`` of the
    result (one step each, run together; none when ``rs`` is empty)."""
    if not rs:
        return {}
    steps = [ctx.call_step("reference", r.trial.case, r.trial.seed,
                           transforms=[*r.trial.ref_transforms, Upcast(dtype="float64")],
                           monitors=[KeepFloat64()]) for r in rs]
    return {id(r): o for r, o in zip(rs, ctx.calls(steps, memo=True), strict=True)}

@register
class SpecialValues(Check):
    """Mismatch on legal inputs of large magnitude, signed zeros, subnormals, and (where
    the contract admits them) inf and nan.

    Catches:
        kernels that break on legal values the author's N(0, 1) inputs never reach:
        `exp` overflow (fp32 above 88.7) in a softmax without the max subtraction, an fp16 sum of
        squares above 65504, a one-pass variance cancelling on large values of one sign, `-0.0`
        turned into `-inf` by `1/x`, subnormals mishandled; NaN and inf where the contract admits
        them.

    How:
        for the cheapest declared case of each dtype (first seed), the floating-point
        tensor inputs the callables read are transformed in the child
        (`workstation/harness/values.py`), the same for reference and candidate:

        | variant | values |
        |---|---|
        | `spikes A` | the inputs as drawn, with one `+A` and one `-A` in every row (last dimension) at seeded positions |
        | `scale A` | `x * A / max(abs(x))` |
        | `shift A` | every element in `[0.85, 0.95] A` (large, one sign) |
        | `signed zeros` | every third element `-0.0`, row 0 all `-0.0`, row 1 all `+0.0` |
        | `tiny` | magnitudes within 4x the smallest normal of the dtype: mostly subnormal |
        | `nonfinite` | one `nan`, `+inf`, `-inf` per row; only where `nonfinite_inputs = true` |

        `A` is the contract's `max_abs_input` (rounded down to a value of the dtype, so no input
        exceeds it). When `max_abs_input = 0` (no bound stated), kws uses its own magnitudes:
        `spikes` and `scale` at 1e2 and 1e4 for float32, float16 and bfloat16 (1e2 and 1e8 for
        float64; 1e2 for float8 e4m3), `shift` at 1e2. A variant where the reference raises or its
        output is not finite is dropped (unless the contract admits non-finite inputs).

        A finite mismatch is judged against the float64 oracle. Without a declared accuracy
        contract, one beyond 8x the reference's own error there is tried once more against the
        conditioning oracle: the float64 reference on the same inputs moved by one unit roundoff
        of the compute precision (`x + u (|x| + rms x) N(0, 1)`; u of fp32 for fp32, fp16, bf16
        and fp8 inputs, which are computed in fp32 by convention; of fp64 for fp64). A reference computed in float64 has almost
        no error of its own, so without this a correct fp32 layer norm of values near 90 (mean/std
        of 60: every fp32 rounding of x moves the result by 5e-4) read as a defect; a one-pass
        variance there is off by 1e-1 and still fails (Higham 2002, §1.5-1.6: forward error is
        about condition number x backward error).

    Findings:
        | finding | severity |
        |---|---|
        | NaN or inf in the candidate's output where the reference is finite, or the candidate raises or crashes | `fail` |
        | a finite mismatch beyond the tolerance plus 8x the larger of the reference's own largest error against a float64 oracle (the reference on upcast inputs) and the conditioning noise (how far that oracle moves when the inputs move by one fp32 unit roundoff; fp64 for fp64 inputs) | `fail` |
        | a finite mismatch within that noise: the candidate is as close to the oracle as the reference, or as close as a correct fp32 computation can be on these ill-conditioned values (a float64 reference hides that); the declared tolerance does not scale to these magnitudes | `info` |
        | a finite mismatch without an oracle (the reference does not run in float64) | `fail` within a declared `max_abs_input`, `warn` (not judged) at kws's own magnitudes |
        | with a declared accuracy contract (`[contract] compute_dtype`): a mismatch beyond that noise but within 2x the contract oracle's own error against the float64 oracle plus that floor, and not systematic against the contract's rounding ("under the declared contract (compute at X, accumulate in Y) the reference itself is off the float64 oracle by E; the candidate by C") | `info` |
        | with a declared contract: a mismatch beyond it, or systematic (a different function), with both figures in the evidence (`oracle.contract`) | `fail` |
        | with a declared contract: how far it is from fp32 on the variants ("the declared contract (...) is D from fp32") | `info` |
        | only subnormal outputs differ (flush-to-zero) | `warn` |
        | a variant that fails the way the declared case already fails (`correctness`) | `info` |
        | the variants checked, the magnitudes used, the dropped ones with the reason | `info` |

    Example:
        (`softmax-overflow`, `max_abs_input = 100`): `spikes 100 (one +100 and one -100
        per row (max_abs_input = 100)): case M=32 N=500 float32, seed 0: 32 NaN in the candidate's
        output; 32 of 16000 elements (0.2%) outside atol=1e-06, rtol=1e-05 [declared [tolerance]];
        worst at [0, 345]: expected 1, got nan; mismatches in all 32 rows, cols 13..496 of 500; the
        reference is finite there`.

    Limits:
        one case per dtype, one seed. On the CPU the interpreter computes with numpy
        (IEEE arithmetic, no flush-to-zero, numpy's `exp`), so a GPU's fast-math paths
        (`ex2.approx`, FTZ) are only exercised on a GPU. Integer inputs are never changed.

        Inputs listed in `[inputs] keep_structure` are never transformed, nor are floating
        inputs whose values are integers on every seed; an input `make_inputs` always draws
        sorted, non-negative, symmetric or with rows summing to one is put back into that
        structure after each variant (`support/structure.py`). The float64
        oracle runs the reference under the `keep_float64` dispatch mode, so a reference that
        casts internally (`x.float()`) still yields a float64 result; when it returns a narrower
        dtype anyway, the evidence says "no oracle" and the mismatch is judged without one (a
        `warn` at kws's own magnitudes), never against an "oracle" that was the fp32 reference.
        A declared contract never excuses NaN or inf in the candidate's output (the reference is
        finite there), even where computing at the compute dtype would overflow too.

    Not judged when:
        a value variant was not tried for a reason of this run (over the per-case budget,
        the reference died, kws's input transform failed, the candidate was not run): not
        judged for those variants, with the rest reported. Variants the contract lets the
        reference or `make_inputs` reject are dropped without that (nothing to look at). An
        `[inputs] keep_structure` index beyond the inputs `make_inputs` returns: a task problem
        naming task.toml, the key and the input count (`NotJudged`).

    Forgeable:
        Measured in the job process: the outputs only (copied by the harness into the result files).
        Still forgeable from inside: nothing short of computing the right values: the harness's writer and the result path are watched, and a result file written by task code is refused.
    """

    id = "special-values"
    order = 5
    title = "Large magnitudes, signed zeros, subnormals, inf and nan"

    def run(self, ctx: CheckContext) -> list[Finding]:
        contract = ctx.task.contract
        seed = ctx.seeds[0]
        cases = cheapest_per_dtype(ctx)
        base = declared_baselines(ctx, cases, seed)
        trials = _variant_trials(ctx, cases, base, seed)
        if not trials:
            raise Skip("no floating-point tensor input the callables read outside [inputs] keep_structure "
                       "(or the reference fails on every declared case)")
        results = run_trials(ctx, trials, drop_nonfinite_ref=not contract.nonfinite_inputs)
        inherited = [r for r in results if same_failure(r, base[case_key(r.trial.case)])]
        mism = [r for r in results if r.status == "mismatch" and r not in inherited]
        oracles = _float64_oracles(ctx, mism)
        findings: list[Finding] = [self._inherited(ctx, inherited)] if inherited else []
        acc = acontract.declared(ctx)
        perturbed = self._conditioning_oracles(ctx, mism, oracles) if acc is None else {}
        cruns: dict[int, acontract.ContractRun] = {}
        if acc is not None:
            # the contract oracle (and its fp32 twin) on every variant that ran, and the
            # float64 oracle of those that matched (the mismatches' is above)
            judged = [r for r in results if r.status in ("pass", "mismatch") and r not in inherited]
            oracles.update(_float64_oracles(ctx, [r for r in judged if id(r) not in oracles]))
            for r, cr in zip(judged, acontract.run_contract(
                    ctx, acc, [(r.trial.case, r.trial.seed, list(r.trial.ref_transforms)) for r in judged]), strict=True):
                cruns[id(r)] = cr
            dist = self._contract_distance(ctx, acc, judged, oracles, cruns)
            if dist is not None:
                findings.append(dist)
        for r in results:
            if r in inherited:
                continue
            if r.status in ("nonfinite", "error"):
                findings.append(self._finding(ctx, "fail", r, None))
            elif r.status == "mismatch":
                findings.append(self._mismatch(ctx, r, oracles, perturbed, cruns))
        findings.append(self._summary(ctx, results, cases, seed))
        return findings

    def _mismatch(self, ctx: CheckContext, r: TrialResult, oracles: dict[int, CallOutcome],
                  perturbed: dict[int, CallOutcome], cruns: dict[int, acontract.ContractRun]) -> Finding:
        """The finding of one variant that mismatches the reference, judged against the float64
        oracle (its noise and conditioning) or the declared contract."""
        if r.trial.info["variant"] == "tiny" and _subnormal_only(r):
            return self._finding(ctx, "warn", r, None, "only subnormal outputs differ (flush-to-zero)")
        verdict = oracle_verdict(ctx, r, oracles.get(id(r)), perturbed.get(id(r)))
        cond = (verdict.get("conditioning") or {}).get("max_noise") or 0.0
        if verdict["available"] and not verdict["beyond_noise"] and cond > verdict["reference_max_err_vs_oracle"]:
            cd = compute_dtype(str(r.trial.case.get("dtype", "")))
            return self._finding(
                ctx, "info", r, verdict,
                f"within {NOISE_FACTOR:g}x of how far the float64 result moves when the inputs move by one "
                f"{cd} rounding ({CONDITIONING_ROUNDOFFS:g} x u = {unit_roundoff(cd):.3g}: {cond:.3g}): the "
                f"function is ill-conditioned at these values, a correct {cd} computation is off by as much, "
                f"and the declared tolerance does not scale to them")
        if verdict["available"] and not verdict["beyond_noise"]:
            return self._finding(
                ctx, "info", r, verdict,
                f"the candidate is as close to the float64 oracle as the reference "
                f"(reference error {verdict['reference_max_err_vs_oracle']:.3g}): the declared tolerance "
                f"does not scale to these magnitudes")
        if verdict["available"] and id(r) in cruns:
            return self._under_contract(ctx, r, verdict, oracles[id(r)], cruns[id(r)])
        if verdict["available"]:
            note = (f"beyond {NOISE_FACTOR:g}x the reference's own error against the float64 oracle "
                    f"({verdict['reference_max_err_vs_oracle']:.3g})")
            if cond:
                note += (f" and {NOISE_FACTOR:g}x how far that result moves when the inputs move by one "
                         f"{compute_dtype(str(r.trial.case.get('dtype', '')))} rounding ({cond:.3g})")
            return self._finding(ctx, "fail", r, verdict, note)
        sev = "fail" if ctx.task.contract.max_abs_input > 0 else "warn"
        if sev == "warn":  # rounding or error: not told apart here
            ctx.could_not_judge(f"{r.trial.label} on case {case_label(r.trial.case)}: a mismatch with no "
                                "float64 oracle to tell rounding from error")
        return self._finding(ctx, sev, r, verdict, "no float64 oracle to tell rounding from error")

    def _summary(self, ctx: CheckContext, results: list[TrialResult], cases: list[dict[str, Any]],
                 seed: int) -> Finding:
        """The closing ``info`` on every variant tried (variants that could not be tried are
        reported as not judged first)."""
        contract = ctx.task.contract
        n_drop = [r for r in results if r.status == "dropped"]
        lost = [r for r in n_drop if r.unjudged]
        if lost:  # a variant this run could not try is not a variant that matched
            ctx.could_not_judge(f"{len(lost)} value variant(s) not tried: " + "; ".join(
                f"{r.trial.label} on {case_label(r.trial.case)}: {r.reason[:120]}" for r in lost[:3]))
        summary = (f"checked {len(results)} value variants on {len(cases)} case(s) "
                   f"({', '.join(sorted({r.trial.info['variant'] for r in results}))}): "
                   f"{sum(r.status == 'pass' for r in results)} match, {sum(r.failed for r in results)} differ, "
                   f"{len(n_drop)} dropped")
        if n_drop:
            summary += " (" + "; ".join(f"{r.trial.label} on {case_label(r.trial.case)}: {r.reason}" for r in n_drop[:3]) + ")"
        return self.finding(ctx, "info", summary, {
            "seed": seed,
            "magnitudes": (f"max_abs_input = {contract.max_abs_input:g} (contract)" if contract.max_abs_input > 0
                           else {d: list(m) for d, m in DEFAULT_MAGNITUDES.items()}),
            "trials": [{"case": r.trial.case, "variant": r.trial.info["variant"], "values": r.trial.info["values"],
                        "status": r.status, **({"reason": r.reason} if r.reason else {})} for r in results]})

    def _conditioning_oracles(self, ctx: CheckContext, mism: list[TrialResult],
                              oracles: dict[int, CallOutcome]) -> dict[int, CallOutcome]:
        """For each mismatch beyond the reference's own noise (:func:`oracle_verdict`), the
        float64 reference on the same inputs perturbed by :data:`CONDITIONING_ROUNDOFFS` unit
        roundoffs of the case's compute precision (:func:`compute_dtype`; one reference step
        each, run together)."""
        todo = []
        for r in mism:
            v = oracle_verdict(ctx, r, oracles.get(id(r)))
            dtype = r.trial.case.get("dtype", "")
            if not (v["available"] and v["beyond_noise"]) or dtype not in FORMATS or not r.trial.ref_transforms:
                continue
            args = list(getattr(r.trial.ref_transforms[0], "args", []) or [])
            if args:
                todo.append((r, Perturb(args=args, seed=r.trial.seed, keep=dict(getattr(r.trial.ref_transforms[0], "keep", {})),
                                        rel=CONDITIONING_ROUNDOFFS * unit_roundoff(compute_dtype(dtype)))))
        if not todo:
            return {}
        steps = [ctx.call_step("reference", r.trial.case, r.trial.seed,
                               transforms=[*r.trial.ref_transforms, Upcast(dtype="float64"), p],
                               monitors=[KeepFloat64()]) for r, p in todo]
        return {id(r): o for (r, _), o in zip(todo, ctx.calls(steps, memo=True), strict=True)}

    def _contract_distance(self, ctx: CheckContext, acc: Any, judged: list[TrialResult],
                           oracles: dict[int, CallOutcome], cruns: dict[int, Any]) -> Finding | None:
        """The info a declared contract always gets: how far it is from fp32 on the variants."""
        worst: tuple[dict[str, Any], TrialResult] | None = None
        per = []
        for r in judged:
            o, cr = oracles.get(id(r)), cruns.get(id(r))
            if o is None or not o.ok or cr is None:
                continue
            for j, t in enumerate(o.outputs):
                if t.values.dtype.kind != "f":
                    continue
                ce = acontract.contract_error(cr, j, t.values)
                if ce is None:
                    continue
                per.append({"variant": r.trial.info["variant"], "case": r.trial.case, "output": j, **ce})
                if worst is None or (ce["from_fp32"] or 0) > (worst[0]["from_fp32"] or 0):
                    worst = (ce, r)
        if worst is None:
            why = next((cr.contract.failure_text() for cr in cruns.values() if not cr.contract.ok),
                       "no variant had both a float64 oracle and a contract oracle")
            return self.finding(ctx, "info", f"declared contract ({acc.describe()}): no contract oracle ({why})",
                                {"contract": acc.describe()})
        ce, r = worst
        return self.finding(
            ctx, "info",
            acontract.distance_text(acc, ce, f"{r.trial.info['variant']}, case {case_label(r.trial.case)}"),
            {"contract": acc.describe(), "worst": {"variant": r.trial.info["variant"], "case": r.trial.case, **ce},
             "variants": per[:24], "margin": acontract.CONTRACT_MARGIN,
             "derivation": acontract.DERIVATION},
            case=r.trial.case, seed=r.trial.seed)

    def _under_contract(self, ctx: CheckContext, r: TrialResult, verdict: dict[str, Any], oracle: CallOutcome,
                        cr: Any) -> Finding:
        """A mismatch beyond the fp32 noise, judged against the declared contract: within
        ``CONTRACT_MARGIN`` x the contract oracle's own error plus the rounding floor (the
        declared tolerance plus NOISE_FACTOR x the reference's error) and not systematic:
        info; else fail with both figures."""
        worst: dict[str, Any] | None = None
        ok = True
        assert r.cand is not None  # a mismatch: the candidate ran
        for j, (e, g, o) in enumerate(zip(r.ref.outputs, r.cand.outputs, oracle.outputs, strict=False)):
            if e.values.dtype.kind != "f" or g.values.shape != o.values.shape:
                continue
            ov = o.values.astype(np.float64)
            ref_err = acontract.max_err(e.values, ov)[0]
            tol = ctx.tolerance(r.trial.case, e.dtype)
            floor = tol.atol + tol.rtol * float(np.abs(ov[np.isfinite(ov)]).max() if np.isfinite(ov).any() else 0.0) \
                + NOISE_FACTOR * ref_err
            jd = acontract.judge(cr, j, g.values, ov, floor, e.dtype)
            if jd is None:
                ok = False
                worst = worst or {"output": j, "why": f"the contract oracle {cr.contract.failure_text()}"
                                  if not cr.contract.ok else "the contract oracle has no such output"}
                continue
            good = jd.accepted
            row = {"output": j, **jd.figures, "systematic": bool(jd.structure["systematic"]),
                   "error_structure": jd.structure}
            if worst is None or not good or jd.figures["candidate_err"] > worst.get("candidate_err", -1.0):
                worst = row
            ok &= good
            if not good:
                break
        ev_note = dict(verdict, contract=worst)
        if ok and worst is not None and "candidate_err" in worst:
            return self._finding(ctx, "info", r, ev_note, acontract.within_text(worst, worst["candidate_err"]))
        if worst is not None and worst.get("systematic"):
            note = (f"differs systematically from the reference (a missing or different operation), whatever the "
                    f"declared contract ({worst['contract']}): off the float64 oracle by "
                    f"{num(worst['candidate_err'])}, the reference under the contract by {num(worst['contract_err'])}")
        elif worst is not None and "candidate_err" in worst:
            note = acontract.beyond_text(worst, worst["candidate_err"], worst["limit"])
        else:
            note = (f"beyond {NOISE_FACTOR:g}x the reference's own error against the float64 oracle "
                    f"({verdict['reference_max_err_vs_oracle']:.3g}); no contract oracle: "
                    f"{(worst or {}).get('why', '')}")
        return self._finding(ctx, "fail", r, ev_note, note)

    def _inherited(self, ctx: CheckContext, inherited: list[TrialResult]) -> Finding:
        """One info finding for variants that fail as their declared case already does."""
        r = inherited[0]
        return self.finding(
            ctx, "info",
            f"{len(inherited)} variant(s) fail the way the declared case {case_label(r.trial.case)} already "
            f"fails ({r.klass}; correctness reports it): " + ", ".join(x.trial.info["variant"] for x in inherited),
            {"variants": [evidence_of(x) for x in inherited[:3]]}, case=r.trial.case, seed=r.trial.seed)
    def _finding(self, ctx: CheckContext, severity: str, r: TrialResult, verdict: dict[str, Any] | None,
                 note: str = "") -> Finding:
        summary = (f"{r.trial.info['variant']} ({r.trial.info['values']}): case {case_label(r.trial.case)}, "
                   f"seed {r.trial.seed}: {failure_text(r)}")
        if r.status == "nonfinite":
            summary += "; the reference is finite there"
        if note:
            summary += f"; {note}"
        ev = evidence_of(r)
        if verdict is not None:
            ev["oracle"] = verdict
        return self.finding(ctx, severity, summary, ev, case=r.trial.case, seed=r.trial.seed)

