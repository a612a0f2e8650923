"""``noncontiguous``: mismatches on strided, sliced, transposed, broadcast or misaligned
views of legal inputs."""

from __future__ import annotations

from typing import Any

from workstation.checks.support import trials
from workstation.engine.check import Check, Finding, Skip, register
from workstation.engine.context import CheckContext, case_label
from workstation.protocol.extras.calls import CallExtra, InputDesc
from workstation.protocol.layouts import DESCRIPTIONS, KINDS, PADDED, applies
from workstation.protocol.steps import Layout, Transform


def read_tensor_inputs(ctx: CheckContext, inputs: list[InputDesc]) -> list[InputDesc]:
    """The tensor inputs the callables only read (not ``out_args``, not ``inout_args``),
    from a call step's ``extra.inputs``."""
    written = set(ctx.task.out_args) | set(ctx.task.inout_args)
    return [d for d in inputs if d.kind == "tensor" and d.index not in written]


#: which inputs may be handed over as stride-0 (expanded) views (documented in docs/checks.md).
EXPAND_RULE = (
    "a floating-point tensor the callables only read, whose rank is lower than the highest-rank "
    "tensor input (a broadcast operand: a bias, a per-row scale, a norm weight), with dim 0 larger "
    "than 1. Every element of such an operand plays the same role, so equal values along dim 0 are "
    "still a legal input, while the primary operands keep their values (all-equal rows are "
    "degenerate-inputs' subject). Index and integer tensors are never expanded: repeated indices "
    "change the semantics of a gather or scatter."
)


def expand_eligible(reads: list[InputDesc]) -> list[int]:
    """Indices of the inputs (``extra.inputs`` entries of the ones the callables read)
    that :data:`EXPAND_RULE` admits as stride-0 views."""
    top = max((len(d.shape) for d in reads), default=0)
    return [d.index for d in reads
            if d.dtype.startswith(("float", "bfloat")) and len(d.shape) < top and d.shape and d.shape[0] > 1]


def _layout_of(r: trials.TrialResult, args: list[int]) -> str:
    """``"input 0: stride (3072, 1), offset 1024; input 1: ..."`` from the candidate's call."""
    ins = r.cand.payload(CallExtra).inputs if r.cand is not None and r.cand.step is not None else []
    parts = []
    for d in ins:
        if d.index in args and d.kind == "tensor":
            s = f"input {d.index} {tuple(d.shape)}: stride {tuple(d.stride)}, offset {d.storage_offset}"
            if d.data_ptr:
                s += f", data_ptr % 16 = {d.data_ptr % 16}"
            parts.append(s)
    return "; ".join(parts)


@register
class Noncontiguous(Check):
    """Mismatch on strided, sliced, transposed, broadcast or misaligned views of legal inputs.

    Catches:
        kernels that are right on contiguous inputs and wrong on the views production
        code passes without a copy: a wrapper that passes `x.shape[-1]` or the output's strides
        where it should pass `x.stride(0)`, a kernel that assumes `stride(-1) == 1`, a weight or
        bias loaded with unit stride, an ignored storage offset.

    How:
        skipped (with the reason) when the contract sets `contiguous_only = true`.
        Otherwise, for the cheapest declared case of each dtype (first seed), every tensor input
        the callables only read (never `out_args` / `inout_args`) is rebuilt in the child
        (`workstation/harness/layouts.py`) as a view with the same values:

        | layout | what the kernel gets |
        |---|---|
        | `padded-rows` | `buf[..., :N]` of a buffer with rows padded to a multiple of 64 plus 64: `stride(-1) == 1`, row stride > N |
        | `column-slice` | `buf[..., N:2N]` of a `(..., 3N)` buffer, like `qkv[:, k:2k]`: row stride 3N, storage offset N |
        | `row-step` | `buf[::2]` (every other row; a 1-D input gets stride 2) |
        | `col-step` | `buf[..., ::2]`: `stride(-1) == 2` |
        | `transposed` | `x.transpose(-1, -2).contiguous().transpose(-1, -2)`: the same values column-major |
        | `misaligned` | a contiguous view one element into its buffer: `data_ptr() % 16 != 0` (Triton specialises pointer arguments on divisibility by 16) |
        | `expand` | `x.narrow(0, 0, 1).expand_as(x)`: stride 0 along dim 0 |

        A kind that does not change a tensor's layout (a 1-D tensor has no rows to pad or
        transpose) leaves it alone. The padding around a view is NaN (0 for integer tensors), so a
        kernel that reads outside the view it was given turns outputs into NaN. The reference runs
        on the contiguous inputs (the runs `correctness` already has); for `expand`, whose values
        differ, it gets a contiguous copy of the expanded values.

    Expand rule:
        a stride-0 view is built only for a floating-point input the callables
        only read whose rank is lower than the highest-rank tensor input (a broadcast operand: a
        bias, a per-row scale, a norm weight) and whose dim 0 is larger than 1. Every element of
        such an operand plays the same role, so equal values along dim 0 are still a legal input;
        the primary operands keep their values (all-equal rows are `degenerate-inputs`' subject),
        and integer (index) tensors are never expanded, since repeated indices change what a
        gather or scatter means.

        When a layout fails with several inputs transformed, each is retried alone to name the one
        the kernel mishandles. When the contiguous declared case itself fails (`correctness`), a
        layout counts only if it changes the candidate's result: its output on the view is
        compared with its own output on contiguous inputs (for `expand`, on a contiguous copy of
        the same values) at the declared tolerance. A mismatch where the candidate is within kws's error budget of the float64 oracle at every
        element (and no more than 32 roundings per term off it, what a correct implementation
        stays well within) is the declared tolerance's, not the candidate's: the budget rule
        (`workstation/checks/support/budgetrule.py`; [numerics.md](numerics.md)) reports it as `info`.

    Findings:
        | finding | severity |
        |---|---|
        | per layout: the input(s) at fault with shape, strides, storage offset and `data_ptr % 16`, the case, the comparison (worst element, region), "the padding around the view is NaN, so the kernel read outside the view it was given" where NaN came from the padding | `fail` |
        | layouts that fail only as the contiguous declared case does (output equal to the contiguous output) | `info` |
        | a mismatch against the declared tolerance with the candidate within kws's error budget of the float64 oracle (the budget rule: the tolerance is too tight at that case, tolerance-tight's subject), with the budget, the candidate's error over it and what two correct implementations may differ by | `info` |
        | layouts checked per case, with strides; the expand rule | `info` |
        | `contiguous_only = true`, or no tensor input the candidate reads | `skip` (with the reason) |

    Example:
        (`scale-rows-noncontig`): `layout column-slice (input 0 (48, 320): stride (960,
        1), offset 320, data_ptr % 16 = 0): case M=48 N=320 float32, seed 0: 10240 NaN in the
        candidate's output; 15040 of 15360 elements (97.9%) outside atol=1e-06, rtol=1e-05 ...;
        worst at [1, 0]: expected -0.1457, got nan; mismatches in rows 1..47 of 48, all 320 cols;
        the padding around the view is NaN, so the kernel read outside the view it was given`.

    Limits:
        one case per dtype, one seed; layouts of `out_args`/`inout_args` are not varied
        (kws never rewrites what the callables write). On the CPU the interpreter does not
        specialise on pointer alignment, so `misaligned` only catches offset arithmetic there; on a
        GPU it also runs Triton's unaligned specialisation.

    Not judged when:
        a layout trial was not run for a reason of this run (over the per-case budget, the
        reference died, kws's input transform failed): not judged for those layouts, with
        the rest reported.

    Forgeable:
        Measured in the job process: the outputs only (copied by the harness into the result files).
        Still forgeable from inside: nothing short of computing the right values: the harness's writer and the result path are watched, and a result file written by task code is refused.
    """

    id = "noncontiguous"
    order = 4
    title = "Strided, sliced, transposed and misaligned views"

    def run(self, ctx: CheckContext) -> list[Finding]:
        if ctx.task.contract.contiguous_only:
            raise Skip("the contract sets contiguous_only = true: the spec admits only contiguous inputs")
        seed = ctx.seeds[0]
        cases = trials.cheapest_per_dtype(ctx)
        base = trials.declared_baselines(ctx, cases, seed)
        todo: list[trials.Trial] = []
        skipped: list[str] = []
        for case in cases:
            ref = base[trials.case_key(case)].ref
            if not ref.ok or ref.step is None:
                skipped.append(f"{case_label(case)}: the reference {ref.failure_text()}")
                continue
            reads = read_tensor_inputs(ctx, ref.payload(CallExtra).inputs)
            todo += self._trials_for(case, seed, reads)
        if not todo:
            raise Skip("no tensor input the candidate reads can take another layout"
                       + (f" ({'; '.join(skipped)})" if skipped else ""))
        results = trials.run_trials(ctx, todo, budget_rule=True)
        inherited = [r for r in results if r.failed and self._inherited(ctx, r, base[trials.case_key(r.trial.case)])]
        # attribute multi-input failures to single inputs
        follow = []
        for r in results:
            if r.failed and r not in inherited and len(r.trial.info["args"]) > 1:
                for i in r.trial.info["args"]:
                    follow.append(self._trial(r.trial.case, seed, r.trial.info["kind"], [i]))
        single = trials.run_trials(ctx, follow, budget_rule=True) if follow else []
        for x in single:  # a single input "fails" only if the view, not the case, is at fault
            if x.failed and self._inherited(ctx, x, base[trials.case_key(x.trial.case)]):
                x.status = "pass"
                x.reason = "fails only as the contiguous declared case does"
        findings = self._findings(ctx, [r for r in results if r not in inherited], single)
        if inherited:
            r = inherited[0]
            findings.append(self.finding(
                ctx, "info",
                f"{len(inherited)} layout(s) fail only as the contiguous declared case already does "
                f"({', '.join(sorted({x.trial.info['kind'] for x in inherited}, key=KINDS.index))} on "
                f"{case_label(r.trial.case)}: {r.klass}); the candidate's output on these views equals its output on "
                f"contiguous inputs (correctness reports the case)",
                {"layouts": [{"layout": x.trial.info["kind"], "case": x.trial.case, "class": x.klass} for x in inherited],
                 "invariance": [x.trial.info.get("invariance") for x in inherited]},
                case=r.trial.case, seed=r.trial.seed))
        tol = [r for r in results if r.status == "tolerance"]
        if tol:
            findings.append(trials.tolerance_finding(self, ctx, tol))
        n_pass = sum(r.status in ("pass", "tolerance") for r in results)
        n_drop = sum(r.status == "dropped" for r in results)
        lost = [r for r in results if r.status == "dropped" and r.unjudged]
        if lost:  # a layout this run could not try is not a layout that matched
            ctx.could_not_judge(f"{len(lost)} layout trial(s) not run: " + "; ".join(
                f"{r.trial.info['kind']} on {case_label(r.trial.case)}: {r.reason[:120]}" for r in lost[:3]))
        kinds = sorted({r.trial.info["kind"] for r in results}, key=KINDS.index)
        summary = (f"checked {len(results)} layouts ({', '.join(kinds)}) on {len(cases)} case(s): "
                   f"{n_pass} match, {sum(r.failed for r in results)} fail, {n_drop} dropped")
        findings.append(self.finding(ctx, "info", summary, {
            "seed": seed,
            "trials": [{"case": r.trial.case, "layout": r.trial.info["kind"], "args": r.trial.info["args"],
                        "status": r.status, "inputs": _layout_of(r, r.trial.info["args"])} for r in results],
            "layouts": {k: DESCRIPTIONS[k] for k in kinds},
            "expand_rule": EXPAND_RULE,
            "skipped_cases": skipped}))
        return findings

    @staticmethod
    def _inherited(ctx: CheckContext, r: trials.TrialResult, b: trials.TrialResult) -> bool:
        """A layout failure the contiguous declared run already has: the same failure class
        and, where both returned, the candidate's output on the view equal (within the
        tolerance) to its own output on contiguous inputs (layout invariance; for
        ``expand``, on a contiguous copy of the expanded values)."""
        if not b.failed:
            return False
        if r.status == "error" or b.status == "error":
            return trials.same_failure(r, b)
        assert r.cand is not None and b.cand is not None  # failed, not an error: both sides ran
        contiguous = b.cand
        if r.trial.info["kind"] == "expand":  # other values: rerun on their contiguous copy
            [contiguous] = ctx.calls([ctx.call_step("candidate", r.trial.case, r.trial.seed,
                                                    transforms=r.trial.ref_transforms)], memo=True)
            if not contiguous.ok:
                return trials.same_failure(r, b)
        inv = ctx.compare(contiguous, r.cand, r.trial.case)
        r.trial.info["invariance"] = {"layout": r.trial.info["kind"],
                                      "same_as_contiguous": all(c.ok for c in inv),
                                      "outputs": [c.evidence() for c in inv]}
        return all(c.ok for c in inv)

    @staticmethod
    def _trial(case: dict[str, Any], seed: int, kind: str, args: list[int]) -> trials.Trial:
        layout = Layout(kind=kind, args=args)
        ref_t: list[Transform] = [Layout(kind=kind, args=args, materialize=True)] if kind == "expand" else []
        return trials.Trial(dict(case), seed, f"layout {kind}", ref_t, [layout], {"kind": kind, "args": args})

    def _trials_for(self, case: dict[str, Any], seed: int, reads: list[InputDesc]) -> list[trials.Trial]:
        out = []
        for kind in KINDS:
            if kind == "expand":
                args = expand_eligible(reads)
            else:
                args = [d.index for d in reads if applies(kind, d.shape)]
            if args:
                out.append(self._trial(case, seed, kind, args))
        return out

    def _findings(self, ctx: CheckContext, results: list[trials.TrialResult], single: list[trials.TrialResult]) -> list[Finding]:
        by_kind: dict[str, list[trials.TrialResult]] = {}
        for r in results:
            if r.failed:
                by_kind.setdefault(r.trial.info["kind"], []).append(r)
        findings = []
        for kind, rs in by_kind.items():
            r = rs[0]
            culprits = [s for s in single if s.trial.info["kind"] == kind and s.trial.case == r.trial.case and s.failed]
            lead = culprits[0] if culprits else r
            args = lead.trial.info["args"]
            layout = _layout_of(lead, args)
            summary = (f"layout {kind} ({layout}): case {case_label(lead.trial.case)}, seed {lead.trial.seed}: "
                       f"{trials.failure_text(lead)}")
            if lead.status == "nonfinite" and kind in PADDED:
                summary += "; the padding around the view is NaN, so the kernel read outside the view it was given"
            inv = lead.trial.info.get("invariance")
            if inv is not None and not inv["same_as_contiguous"]:
                summary += ("; the contiguous declared case fails too, and this layout changes the candidate's "
                            "result beyond the tolerance")
            if len(rs) > 1:
                summary += f"; also fails on {', '.join(case_label(x.trial.case) for x in rs[1:])}"
            ev: dict[str, Any] = {
                "layout": kind, "layout_description": DESCRIPTIONS[kind],
                "case": lead.trial.case, "seed": lead.trial.seed,
                "failing": trials.evidence_of(lead),
                "inputs_at_fault": [s.trial.info["args"][0] for s in culprits],
                "other_failing_cases": [trials.evidence_of(x) for x in rs[1:]],
            }
            if culprits and len(r.trial.info["args"]) > 1:
                ok_alone = [s.trial.info["args"][0] for s in single
                            if s.trial.info["kind"] == kind and s.trial.case == r.trial.case and s.status == "pass"]
                ev["inputs_fine_alone"] = ok_alone
            findings.append(self.finding(ctx, "fail", summary, ev, case=lead.trial.case, seed=lead.trial.seed))
        return findings
