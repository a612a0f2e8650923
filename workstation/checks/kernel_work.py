"""``kernel-work``: every output element comes from the candidate's own kernels."""

from __future__ import annotations

from typing import Any

import msgspec

from workstation.checks.support.kernelwork import CaseWork, kernel_work, work_cases
from workstation.engine.check import Check, Finding, NotJudged, register
from workstation.engine.context import CheckContext
from workstation.protocol.extras.calls import CallExtra
from workstation.protocol.extras.monitors import AtenOpsReport, TritonLaunchesReport
from workstation.protocol.steps import AtenOps, TritonLaunches

#: aten ops that allocate, copy or view: never named as the producer of an output.
_BOOKKEEPING = {"empty", "empty_like", "empty_strided", "new_empty", "zeros", "zeros_like", "ones", "full", "copy_",
                "_to_copy", "clone", "contiguous", "view", "_unsafe_view", "reshape", "as_strided", "expand",
                "permute", "transpose", "t", "select", "slice", "unsqueeze", "squeeze", "detach", "alias",
                "lift_fresh", "_reshape_alias", "fill_", "zero_", "set_", "resize_", "item", "_local_scalar_dense",
                "split", "unbind", "narrow", "flatten"}


@register
class KernelWork(Check):
    """Output elements that the candidate's own Triton kernels did not produce.

    Catches:
        a "Triton kernel" whose output, or part of it, comes from elsewhere: a framework op
        doing the ragged tail next to a kernel that covers only whole tiles, the answer
        computed on the host (numpy) beside a decorative launch, a kernel result overwritten by
        a framework op, a size- or dtype-gated path that skips the kernels, a kernel that runs
        only some calls while the rest replay a stored result. Whatever the disguise, an
        element no kernel store reached is not the kernel's work.

    How:
        the candidate runs on every declared case, and on the ragged variant of the cheapest
        declared case of each dtype (every integer size moved to the nearest legal value that
        no power-of-two block divides, `support/ragged.py`), once plainly (shared with the
        other checks) and once under poisoned stores (`harness/interp_ops.py`, the
        `poison_stores` monitor): every `tl.store` (masked or not, through block pointers or
        descriptors) and every atomic of its kernels writes poison into memory (NaN payloads
        for floats, 0x5A bytes for integers), while the kernels read back their own stores
        from a shadow of what they stored, so they compute exactly as in the plain call and
        only code outside them sees poison. An output element that keeps its plain value did
        not come from a kernel store. Left out, and counted: NaN in the plain output, integer
        elements equal to the poison, bool outputs (`int1` stores keep their value), elements
        left as the input at the same place (in-place and `out=` buffers the reference leaves
        there too, pass-through outputs); one fill value in both runs (0, +-1, +-inf, the
        dtype's extremes; a part of the output, or an all-zero whole) is an initialisation the
        kernels did not overwrite (`torch.zeros` before a sparse scatter): `info`. On a failing case the candidate runs
        once more traced (the dispatch-mode tracer and launch counts, shared with `fallback`)
        to name the framework ops and the kernels that launched.

    Findings:
        | finding | severity |
        |---|---|
        | a case where output elements kept their value under poisoned stores: how many, where ("the last 37 columns of every row", "every element: no kernel store on this case"), a sample, the kernels that launched and the framework ops that ran, with the task line | `fail` |
        | elements that hold one constant value in both runs (an initialisation the kernels did not overwrite) | `info` |
        | every judged element of every case came from a kernel store (cases, elements, stores) | `info` |

    Example:
        (a softmax kernel over whole tiles of 64 columns, `F.softmax` for the rest):
        `case M=4 N=100 float32 (ragged: N 64 -> 100, seed 0): 144 of 400 elements of output 0
        (the last 36 columns of every row (columns 64..99 of 100)) kept their values when every
        store of the candidate's kernels wrote poison: they did not come from its kernels; the
        kernels launched: _softmax_tiles x1; framework ops that ran: aten._softmax x1
        (candidate.py:41)`.

    Source:
        the "kernel does the work" invariant of issue 39: KernelBench and GPU MODE
        submissions that compute with `torch` beside a token kernel; the held-out corpus's
        whole-tile kernels with a framework tail and host-computed answers; taint by poison
        as in the guarded-buffer checks (`unwritten-output`), applied to the kernels' writes.

    Limits:
        backend `triton` under the interpreter only (CPU): compiled kernels' stores cannot be
        poisoned. Bool outputs are not judged (no value to spare); NaN elements of the plain
        output and elements equal to the input at the same place cannot tell. A framework op
        that computes from what a kernel stored (a kernel that copies its input, `torch.softmax`
        on the copy) passes here: the output depends on a kernel store (`fallback` judges
        framework compute on the full problem). One seed; the declared cases and one ragged
        case per dtype.

    Not judged when:
        on a GPU (no interpreter); the poisoned run raised, died or went over kws's budget
        (host code may read its kernels' poisoned output as sizes or indices; never charged
        to the candidate) or returned other shapes: that case; the plain call failed
        (correctness judges it): that case; no element of any case could tell.

    Forgeable:
        Measured in the job process: the interpreter's store and atomic ops (patched once for every job, switched on by a flag) and the outputs the harness copies after return.
        Still forgeable from inside: a candidate that reads kws's flag (`workstation.harness.interp_ops._stores`) or inspects the memory its kernels wrote and recomputes when it looks poisoned; one whose kernel copies an input and lets a framework op compute from the copy.
    """

    id = "kernel-work"
    order = 60
    title = "The kernels do the work"

    @classmethod
    def applies(cls, task: Any) -> str:
        if task.backend != "triton":
            return (f"backend {task.backend}: kernel-work poisons the stores of Triton kernels under the interpreter; "
                    "other backends have their own kind checks")
        return ""

    def run(self, ctx: CheckContext) -> list[Finding]:
        if ctx.on_gpu:
            raise NotJudged("on a GPU the Triton kernels run compiled: kws poisons kernel stores only under the "
                            "Triton interpreter (CPU); run kws check --device cpu for this check")
        seed = ctx.seeds[0]
        works = kernel_work(ctx, work_cases(ctx), seed)
        findings: list[Finding] = []
        for w in works:
            if w.plain_failed:  # the candidate fails there anyway: correctness and edge-shapes report it
                findings.append(self.finding(ctx, "info", f"{w.head}: {w.reason}: nothing to poison (correctness and "
                                             "edge-shapes judge the failure)", w.evidence(), case=w.case, seed=w.seed))
            elif not w.judged:
                ctx.could_not_judge(f"{w.head}: {w.reason}; the kernels' share of its output was not seen")
        judged = [w for w in works if w.judged]
        if not any(o.judged for w in judged for o in w.outputs):
            raise NotJudged("no output element of any case could tell whether a kernel stored it: "
                            + ("; ".join(f"{w.head}: {w.reason or _excluded(w)}" for w in works[:3])))
        bad = [w for w in judged if w.bad]
        if bad:
            findings.append(self._fail(ctx, bad[0], bad[1:]))
        for w in judged:
            init = [o for o in w.outputs if o.unchanged and o.constant is not None]
            if init:
                o = init[0]
                findings.append(self.finding(
                    ctx, "info", f"{w.head}: {o.unchanged} of {o.judged} elements of output {o.index} ({o.where}) hold "
                    f"{o.constant:g} in both runs: an initialisation the kernels did not overwrite (not computed)",
                    w.evidence(), case=w.case, seed=w.seed))
        if not bad:
            n = sum(o.judged for w in judged for o in w.outputs)
            stores = sum(w.report.elements for w in judged if w.report is not None)
            findings.insert(0, self.finding(
                ctx, "info", f"every judged output element of {len(judged)} case(s) came from a kernel store "
                f"({n} elements; {stores} elements stored by the kernels under poison)",
                {"cases": [w.evidence() for w in works]}))
        return findings

    def _fail(self, ctx: CheckContext, w: CaseWork, more: list[CaseWork]) -> Finding:
        total = sum(x.computed_elsewhere for x in w.bad)
        stores = w.report.elements if w.report is not None else 0
        summary = (f"{w.head}: {w.bad_text()} kept their values when every store of the candidate's kernels wrote poison: "
                   "they did not come from its kernels (a framework op or host code produced them)")
        if stores == 0:
            summary += "; no kernel stored anything on this case"
        if len(w.bad) > 1:
            summary += f"; {total} such elements over {len(w.bad)} outputs"
        if more:
            summary += f" (the same on {len(more)} more case(s): " + "; ".join(m.head for m in more[:3]) + ")"
        ev = {**w.evidence(), "more_cases": [m.evidence() for m in more]}
        traced = ctx.calls([ctx.call_step("candidate", w.case, w.seed, monitors=[AtenOps(), TritonLaunches()])],
                           memo=True)[0]
        if traced.ok:
            mon = traced.payload(CallExtra).monitors
            kernels = mon.of(TritonLaunchesReport).kernels
            ops = {n: r for n, r in mon.of(AtenOpsReport).ops.items() if n not in _BOOKKEEPING}
            ev["kernels_launched"] = dict(kernels)
            ev["framework_ops"] = msgspec.to_builtins(ops)
            summary += "; the kernels launched: " + (", ".join(f"{k} x{v}" for k, v in kernels.items()) or "none")
            if ops:
                top = sorted(ops.items(), key=lambda kv: -kv[1].max_numel)[:3]
                summary += "; framework ops that ran: " + ", ".join(
                    f"aten.{n} x{r.count}" + (f" ({r.site.file}:{r.site.line})" if r.site else "") for n, r in top)
                site = next((r.site for _n, r in top if r.site), None)
                if site is not None:
                    ev["source"] = {"file": site.file, "line": site.line}
            else:
                summary += "; no framework compute op seen by the dispatcher (host code: numpy, Python)"
        return self.finding(ctx, "fail", summary, ev, case=w.case, seed=w.seed)


def _excluded(w: CaseWork) -> str:
    parts = [f"output {o.index}: " + ", ".join(f"{k} ({v})" for k, v in o.excluded.items()) for o in w.outputs]
    return "; ".join(parts) or "no output"
