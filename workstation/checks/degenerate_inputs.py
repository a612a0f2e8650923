"""``degenerate-inputs``: the task's own inputs or outputs cannot tell a wrong kernel from
a right one."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from workstation.analysis.compare import compare
from workstation.checks.support.keep import kept_inputs
from workstation.checks.support.structure import input_structure
from workstation.checks.support.trials import (
    Trial,
    case_key,
    cheapest_per_dtype,
    evidence_of,
    failure_text,
    run_trials,
)
from workstation.engine.check import Check, Finding, register
from workstation.engine.context import CallOutcome, CheckContext, case_label
from workstation.protocol.extras.calls import CallExtra
from workstation.protocol.steps import Diverse, Perturb

#: distributions of the replacement inputs (:mod:`workstation.harness.values`, ``diverse``).
DISTRIBUTIONS: tuple[Literal["normal", "uniform", "heavy", "mixed"], ...] = ("normal", "uniform", "heavy", "mixed")
#: a relative perturbation this small must change some output bit of a live computation.
SLIGHT = 1e-2
#: a perturbation this large must move the output beyond the tolerance for an input to count.
COARSE = 0.5
#: rerun at most this many flagged cases with diverse inputs.
MAX_RERUN_CASES = 2
#: a share of constant rows at or above this flags the input.
ROW_SHARE = 0.5


def _rows(v: np.ndarray) -> np.ndarray:
    return v.reshape(-1, v.shape[-1])


def input_indicators(v: np.ndarray, atol: float) -> list[str]:
    """Degeneracy of one floating-point input (any shape): constant, constant rows (along
    the last dim), identical rows, all within ``atol`` of zero. Texts do not depend on the
    values drawn."""
    out: list[str] = []
    if v.size <= 1 or not np.isfinite(v).all():
        return out
    if np.ptp(v) == 0:
        out.append("constant (one value throughout)")
        return out
    if v.ndim >= 2 and v.shape[-1] > 1:
        r = _rows(v)
        const = np.ptp(r, axis=1) == 0
        share = float(const.mean())
        if share >= ROW_SHARE:
            out.append(f"{int(const.sum())} of {r.shape[0]} rows constant along the last dim")
        if r.shape[0] > 1 and (r == r[0]).all():
            out.append(f"all {r.shape[0]} rows identical")
    if float(np.abs(v).max()) <= atol:
        out.append(f"every value within atol = {atol:g} of zero")
    return out


def output_indicators(ctx: CheckContext, case: dict[str, Any], ref: CallOutcome) -> list[str]:
    """Degeneracy of the reference's outputs: constant, or so close to zero that an
    all-zero output passes the declared tolerance. The texts do not depend on the seed,
    so runs of one case merge."""
    out: list[str] = []
    for j, t in enumerate(ref.outputs):
        v = t.values
        name = f"output {j}" if len(ref.outputs) > 1 else "the output"
        if v.dtype.kind != "f" or v.size <= 1 or not np.isfinite(v).all():
            continue
        if np.ptp(v) == 0:
            out.append(f"{name} is constant ({float(v.flat[0]):.6g} everywhere)")
            continue
        tol = ctx.tolerance(case, t.dtype)
        c = compare(v, np.zeros_like(v), tol, expected_dtype=t.dtype, got_dtype=t.dtype)
        if c.ok:
            out.append(f"{name} is within the tolerance of zero (atol {tol.atol:g}): an all-zero result passes")
    return out


def _within(ctx: CheckContext, case: dict[str, Any], a: CallOutcome, b: CallOutcome) -> tuple[bool, bool]:
    """(bitwise equal, within the declared tolerance) of two reference results."""
    if len(a.outputs) != len(b.outputs):
        return False, False
    exact = within = True
    for x, y in zip(a.outputs, b.outputs, strict=True):
        if x.values.shape != y.values.shape:
            return False, False
        if not np.array_equal(x.values, y.values, equal_nan=True):
            exact = False
        c = compare(x.values, y.values, ctx.tolerance(case, x.dtype), expected_dtype=x.dtype, got_dtype=y.dtype)
        within = within and c.ok
    return exact, within


@register
class DegenerateInputs(Check):
    """The task's inputs or outputs are degenerate, so wrong kernels can pass.

    Catches:
        tasks whose own inputs or outputs cannot tell a wrong kernel from a right
        one: constant rows fed to a softmax (the answer is 1/N whatever the denominator), a zero
        bias, a weight of ones, inputs so small that every output is within atol of zero, outputs
        saturated so that the inputs do not matter (KernelBench's zero-output false passes,
        `expand`-built inputs).

    How:
        the reference runs on every declared case (first seed) with its inputs sent back;
        every floating-point input the callables read is inspected: constant; at least half of the
        rows (last dimension) constant; all rows identical; every value within the declared atol
        of zero. Every seed's reference output (the runs `correctness` has) is inspected:
        constant; so close to zero that an all-zero output passes the declared tolerance. On the
        cheapest case of each dtype each such input is then perturbed in the reference: slightly
        (`x + 1e-2 (|x| + rms) n`: an output that does not change in a single bit is saturated or
        ignores the input) and coarsely (`x + 0.5 (|x| + rms) n`: an output that stays within the
        declared tolerance cannot see the input). Where anything is degenerate, candidate and
        reference rerun (first seed, up to two cases, distinct dtypes first) on diverse inputs of
        the same shapes and dtypes, made in the child by replacing the values of the
        floating-point inputs: normal, uniform (unit variance), heavy-tailed (Student-t, 2 degrees
        of freedom, clipped at 20) and mixed signs (log-uniform magnitudes in [1e-2, 1e2]), each
        scaled to the input's RMS; an input whose values were all >= 0 stays non-negative;
        integer (index) inputs and Python scalars keep their values. A rerun where the reference
        raises or goes non-finite is dropped.

    Findings:
        | finding | severity |
        |---|---|
        | the case's degenerate inputs/outputs, and the candidate's mismatch on diverse inputs (which distributions, worst element, region) | `fail` |
        | degenerate inputs/outputs and no mismatch on diverse inputs: "a wrong kernel could pass these cases" | `warn` |
        | what was inspected, per case | `info` |

    Example:
        (`softmax-degenerate`): `case M=4 N=2000 float32: the task's inputs/outputs are
        degenerate (input 0: 4 of 4 rows constant along the last dim; the output is constant
        (0.0005 everywhere)); with normal, uniform, heavy, mixed inputs of the same shapes the
        candidate mismatches: 21 of 8000 elements (0.263%) outside atol=1e-06, rtol=1e-05
        [declared [tolerance]]; worst at [2, 1286]: expected 0.99992, got 0.24998 ...`.
        `softmax-loose-atol` gets a `warn`: its outputs (about 5e-4) are within atol = 1e-2 of zero.

    Limits:
        only floating-point inputs are inspected and replaced; input degeneracy is read
        at the first seed. Replacement values do not keep relations between inputs that a spec may
        require (positive-definite matrices, sorted indices, probabilities summing to 1); where
        the reference then raises or goes non-finite the rerun is dropped. A discrete-valued
        output (rounding, argmax as float) can look insensitive to a slight perturbation.

    Not judged when:
        the reference or `make_inputs` is broken on a declared case (a task problem naming the
        file), a library the reference imports is not installed, or a step was stopped by a limit
        that says nothing about the code: `NotJudged`; the candidate runs only for a flagged case,
        so its backend or libraries failing here make the check `NotJudged` only then (the flags
        are not reported). A reference that died on a case: not judged for that case (its inputs
        and outputs are not inspected; `warn` "nothing to inspect", not judged, where it died on
        every case).
        Diverse-input reruns that were dropped leave a flagged case at `warn` with each reason. A
        perturbed (or unperturbed) reference run of the sensitivity reading that raised, died or
        whose kws transform failed: not judged for that input's sensitivity, with the first
        reason (an input whose values must keep a structure belongs in `[inputs] keep_structure`).
        An `[inputs] keep_structure` index beyond the inputs `make_inputs` returns: a task problem
        naming task.toml, the key and the input count (`NotJudged`).

    Forgeable:
        Measured in the job process: the outputs only (copied by the harness into the result files).
        Still forgeable from inside: nothing short of computing the right values: the harness's writer and the result path are watched, and a result file written by task code is refused.
    """

    id = "degenerate-inputs"
    order = 10
    title = "Degenerate inputs or outputs"

    def run(self, ctx: CheckContext) -> list[Finding]:
        pairs = ctx.declared_pairs()
        refs = ctx.reference(pairs)  # the outputs of every seed (shared with correctness)
        seed0 = ctx.seeds[0]
        with_inputs = ctx.reference([(c, seed0) for c in ctx.cases], send_inputs=True)
        written = set(ctx.task.out_args)
        # [inputs] keep_structure: not perturbed; an index beyond the inputs is a task problem
        keep = kept_inputs(ctx, zip(ctx.cases, with_inputs, strict=True))
        per_case: dict[int, dict[str, Any]] = {}
        inspected = 0
        for ci, (case, ref) in enumerate(zip(ctx.cases, with_inputs, strict=True)):
            if not ref.ok or ref.step is None:
                ctx.could_not_judge(f"case {case_label(case)}: the reference {ref.failure_text()}, so its inputs and "
                                     "outputs were not inspected")
                continue
            info = per_case.setdefault(ci, {"case": case, "seed": seed0, "inputs": {}, "outputs": [], "args": []})
            for d in ref.payload(CallExtra).inputs:
                i = d.index
                if d.kind != "tensor" or i in written or not d.dtype.startswith(("float", "bfloat")):
                    continue
                if i in keep:
                    continue
                arr = ref.step.arrays.get(f"in{i}")
                if arr is None:
                    continue
                info["args"].append(i)
                atol = ctx.tolerance(case, d.dtype).atol
                for ind in input_indicators(arr, atol):
                    info["inputs"].setdefault(i, {}).setdefault(ind, []).append(seed0)
        for k, ((case, _seed), ref) in enumerate(zip(pairs, refs, strict=True)):
            ci = k // len(ctx.seeds)
            if not ref.ok or ci not in per_case:
                continue
            inspected += 1
            for ind in output_indicators(ctx, case, ref):
                if ind not in per_case[ci]["outputs"]:
                    per_case[ci]["outputs"].append(ind)
        if not per_case:
            ctx.could_not_judge("the reference fails on every declared case: nothing to inspect")
            return [self.finding(ctx, "warn", "the reference fails on every declared case: nothing to inspect", {})]
        self._sensitivity(ctx, per_case)
        flagged = [ci for ci, info in per_case.items() if self._indicators(info)]
        findings: list[Finding] = []
        if flagged:
            findings += self._rerun(ctx, [per_case[ci] for ci in flagged])
        examined = {case_label(info["case"]): self._indicators(info) for info in per_case.values()}
        findings.append(self.finding(
            ctx, "info",
            f"inspected the inputs and outputs of {inspected} case/seed runs of the reference: "
            + (f"degenerate in {len(flagged)} of {len(per_case)} cases" if flagged else "no degenerate input or output"),
            {"per_case": examined, "perturbation": {"slight_rel": SLIGHT, "coarse_rel": COARSE}}))
        return findings

    @staticmethod
    def _indicators(info: dict[str, Any]) -> list[str]:
        out = [f"input {i}: {ind}" for i, inds in sorted(info["inputs"].items()) for ind in inds]
        return out + list(info["outputs"]) + list(info.get("insensitive", []))

    def _sensitivity(self, ctx: CheckContext, per_case: dict[int, dict[str, Any]]) -> None:
        """Perturb each input of each case (first seed) in the reference; record inputs the
        output does not respond to."""
        steps, keys = [], []
        cheapest = {case_key(c) for c in cheapest_per_dtype(ctx)}
        for ci, info in per_case.items():
            if case_key(info["case"]) not in cheapest:
                continue
            st = input_structure(ctx, info["case"])  # make_inputs' structure kept (sorted stays sorted)
            for i in st.args(info["args"]):
                for mode, rel in (("slight", SLIGHT), ("coarse", COARSE)):
                    t = Perturb(args=[i], rel=rel, seed=info["seed"], keep=st.keep_for([i]))
                    steps.append(ctx.call_step("reference", info["case"], info["seed"], transforms=[t]))
                    keys.append((ci, i, mode))
        if not steps:
            return
        todo = sorted({ci for ci, _, _ in keys})
        base = dict(zip(todo, ctx.reference([(per_case[ci]["case"], per_case[ci]["seed"]) for ci in todo]), strict=True))
        dropped: list[str] = []
        for (ci, i, mode), out in zip(keys, ctx.calls(steps, memo=True), strict=True):
            b = base[ci]
            if not out.ok or not b.ok:
                bad = out if not out.ok else b
                what = "perturbed" if not out.ok else "unperturbed"
                dropped.append(f"input {i} ({mode}) on case {case_label(per_case[ci]['case'])}: the {what} reference "
                               f"run {bad.failure_text()}")
                continue
            if not all(t.values.dtype.kind == "f" for t in b.outputs):
                continue
            exact, within = _within(ctx, per_case[ci]["case"], b, out)
            ins = per_case[ci].setdefault("insensitive", [])
            if mode == "slight" and exact:
                ins.append(f"input {i}: a relative {SLIGHT:g} perturbation leaves every output bit unchanged")
            elif mode == "coarse" and within:
                ins.append(f"input {i}: a relative {COARSE:g} perturbation keeps the output within the declared tolerance")
        if dropped:
            more = f" (and {len(dropped) - 1} more)" if len(dropped) > 1 else ""
            ctx.could_not_judge(
                f"the sensitivity of the reference's output to {len(dropped)} perturbation(s) was not read: "
                f"{dropped[0]}{more} (an input whose values must keep a structure belongs in [inputs] keep_structure)")

    def _rerun(self, ctx: CheckContext, infos: list[dict[str, Any]]) -> list[Finding]:
        chosen: list[dict[str, Any]] = []
        for info in infos:  # prefer distinct dtypes
            if len(chosen) < MAX_RERUN_CASES and info["case"].get("dtype") not in {c["case"].get("dtype") for c in chosen}:
                chosen.append(info)
        for info in infos:
            if len(chosen) < MAX_RERUN_CASES and info not in chosen:
                chosen.append(info)
        trials = []
        for info in chosen:
            st = input_structure(ctx, info["case"])
            args = st.args(info["args"])
            if not args:
                continue
            for dist in DISTRIBUTIONS:
                t = Diverse(dist=dist, args=args, seed=info["seed"], keep=st.keep_for(args))
                trials.append(Trial(info["case"], info["seed"], f"{dist} inputs", [t], [t], {"dist": dist}))
        results = run_trials(ctx, trials)
        findings = []
        for info in chosen:
            rs = [r for r in results if r.trial.case == info["case"]]
            bad = [r for r in rs if r.failed]
            inds = self._indicators(info)
            ev: dict[str, Any] = {"case": info["case"], "seed": info["seed"], "degenerate": inds,
                                  "inputs_replaced": info["args"],
                                  "reruns": [{"dist": r.trial.info["dist"], "status": r.status,
                                              **({"reason": r.reason} if r.reason else {})} for r in rs]}
            head = f"case {case_label(info['case'])}: the task's inputs/outputs are degenerate ({'; '.join(inds)})"
            if bad:
                lead = bad[0]
                ev["failing"] = evidence_of(lead)
                findings.append(self.finding(
                    ctx, "fail",
                    f"{head}; with {', '.join(r.trial.info['dist'] for r in bad)} inputs of the same shapes the "
                    f"candidate mismatches: {failure_text(lead)}",
                    ev, case=info["case"], seed=info["seed"]))
            else:
                ran = [r.trial.info["dist"] for r in rs if r.status == "pass"]
                tail = (f"the candidate matches the reference on {', '.join(ran)} inputs of the same shapes"
                        if ran else "every rerun with diverse inputs was dropped: "
                        + "; ".join(f"{r.trial.info['dist']}: {r.reason}" for r in rs))
                findings.append(self.finding(ctx, "warn", f"{head}: a wrong kernel could pass these cases; {tail}",
                                             ev, case=info["case"], seed=info["seed"]))
        return findings

