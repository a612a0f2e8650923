"""``observer-effect``: being observed does not change the answer."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from workstation.analysis.compare import compare
from workstation.checks.support.audit import CONTEXT_TEXT, AuditRun, run_audit, variant_text
from workstation.checks.support.series import changed_elements
from workstation.engine.check import Check, Finding, register
from workstation.engine.context import CheckContext, case_label
from workstation.protocol.extras.audit import AuditCall


def context_text(c: AuditCall) -> str:
    """Where a call came from, in words (``called under torch.profiler``)."""
    if c.context == "frame":
        return f"called from a frame named {c.frame!r}"
    return CONTEXT_TEXT.get(c.context, c.context)


@register
class ObserverEffect(Check):
    """The same inputs must give the same answer however the candidate is called and
    whoever watches.

    Catches:
        behaviour that depends on being observed: the real kernel only under a tracer, a
        dispatch or function mode or the profiler (a framework op otherwise); a cached or
        cheaper result when the caller's frame looks like a benchmark, when it is called right
        after another call, inside a run of back-to-back calls, or when the clock says the
        process is old; raising in one of those contexts while returning in another.

    How:
        the shared invariant audit (see `content-follow`): each variant of the inputs is
        called from several contexts (plain; under a pass-through `TorchDispatchMode`, a
        pass-through `TorchFunctionMode`, `torch.profiler`, a Python profile hook; from a
        caller frame named like a benchmark (`benchmark`, `do_bench`, `warmup`, ...); right
        after the previous call; after a 20 ms pause; as the last of 6 back-to-back calls; with
        the clocks of `time` reading an hour later), in the long run and around it. Where the
        contract says `deterministic = true`, all calls on one variant must be bitwise equal
        (NaN equal to NaN); otherwise they must agree at the task's tolerance.

    Findings:
        | finding | severity |
        |---|---|
        | two calls on the same inputs differ (the two contexts, write paths and phases; the first differing element and its two values; how many elements differ) | `fail` |
        | a call raised in one context where the same inputs returned in another | `fail` |
        | every variant gave one answer in every context (which contexts) | `info` |

    Example:
        (the real kernel only under the profiler): `case N=512 float32 (the audit case): on
        seed 1002's inputs, a call under torch.profiler and a call called plainly differ in
        512 of 512 elements (first at [0]: 0.7310585975646973 vs 0.7310585379600525)`.

    Source:
        pygpubench's cheats (telling warm-up from timed calls; the harness's own frames on the
        stack); SOL-ExecBench's audit call (one call inside the timed loop checked); KernelBench
        reward hacks that dispatch to a framework op unless a profiler is running.

    Limits:
        one case, small; contexts kws does not make (a GPU event timer, a CUDA graph
        capture) are not covered here (`speedup-claim`, `benchmark-bias` time on the GPU).
        The fresh interpreter and another hash seed are `nondeterminism`'s.

    Not judged when:
        the audit was not run (see `content-follow`), or no variant was called from two
        contexts with both calls returning.

    Forgeable:
        Measured in the job process: the harness calls the candidate and reads its outputs.
        Still forgeable from inside: a candidate that inspects kws's harness state (its module globals) rather than the ordinary signals (the stack, the clock, the modes) to tell the audit apart.
    """

    id = "observer-effect"
    order = 56
    title = "Observation does not change the answer"

    def run(self, ctx: CheckContext) -> list[Finding]:
        run = run_audit(ctx)
        case = run.spec.case
        label = f"case {case_label(case)} (the audit case)"
        by_variant: dict[int, list[AuditCall]] = defaultdict(list)
        for c in run.extra.calls:
            by_variant[c.variant].append(c)
        deterministic = ctx.task.contract.deterministic
        findings: list[Finding] = []
        compared = 0
        for v, calls in sorted(by_variant.items()):
            returned = [c for c in calls if c.error is None]
            raised = [c for c in calls if c.error is not None]
            if returned and raised:
                r, a = raised[0], returned[0]
                findings.append(self.finding(
                    ctx, "fail",
                    f"{label}: on {variant_text(run.extra.variants[v])}, call {r.index + 1} {context_text(r)} raised "
                    f"{r.error.type if r.error else ''}: {(r.error.message if r.error else '')[:160]}, while call "
                    f"{a.index + 1} {context_text(a)} returned",
                    {"case": case, "raised": _ev(run, r), "returned": _ev(run, a),
                     "error": r.error.as_evidence() if r.error else None}, case=case))
                continue
            if len(returned) < 2:
                continue
            compared += len(returned)
            diff = self._first_difference(ctx, run, returned, deterministic)
            if diff is not None:
                findings.append(self.finding(ctx, "fail", f"{label}: on {variant_text(run.extra.variants[v])}, {diff[0]}",
                                             {"case": case, **diff[1]}, case=case))
        if findings:
            return findings[:3]
        if not compared:
            ctx.could_not_judge(f"{label}: no variant was called from two contexts with both calls returning")
            return []
        contexts = sorted({c.context for c in run.extra.calls})
        return [self.finding(
            ctx, "info",
            f"{label}: each of {len(by_variant)} variants gave one answer {'bitwise ' if deterministic else ''}in "
            f"every context it was called from ({', '.join(contexts)}; {compared} calls)",
            {"case": case, "contexts": contexts, "calls": compared, "bitwise": deterministic}, case=case)]

    @staticmethod
    def _first_difference(ctx: CheckContext, run: AuditRun, calls: list[AuditCall],
                          bitwise: bool) -> tuple[str, dict[str, Any]] | None:
        """The first pair of calls (the first call against each later one) whose outputs
        differ (bitwise, or beyond the tolerance), in words and evidence."""
        a = calls[0]
        for b in calls[1:]:
            for j in range(min(len(a.fingerprints), len(b.fingerprints))):
                if bitwise and a.fingerprints[j] == b.fingerprints[j]:
                    continue
                x, y = run.values(a, j), run.values(b, j)
                if x is None or y is None:
                    continue
                if bitwise:
                    n, idx = changed_elements(x, y)
                    if n == 0:
                        continue
                    first = idx[0] if idx else []
                    va, vb = (x[tuple(first)], y[tuple(first)]) if first or x.ndim == 0 else (None, None)
                    text = (f"call {b.index + 1} {context_text(b)} and call {a.index + 1} {context_text(a)} differ in "
                            f"{n} of {x.size} elements (first at {first}: {_num(vb)} vs {_num(va)})")
                    return text, {"calls": [_ev(run, a), _ev(run, b)], "output": j, "differing": n,
                                  "first_index": first, "values": [_num(va), _num(vb)], "bitwise": True}
                dtype = a.dtypes[j] if j < len(a.dtypes) else ""
                c = compare(x, y, ctx.tolerance(run.spec.case, dtype), expected_dtype=dtype, got_dtype=dtype,
                            nonfinite_ok=ctx.task.contract.nonfinite_inputs)
                if not c.ok:
                    text = (f"call {b.index + 1} {context_text(b)} and call {a.index + 1} {context_text(a)} disagree "
                            f"beyond the tolerance: {c.reason}")
                    return text, {"calls": [_ev(run, a), _ev(run, b)], "output": j, "comparison": c.evidence(),
                                  "bitwise": False}
        return None


def _num(v: Any) -> Any:
    if v is None:
        return None
    f = float(v) if np.asarray(v).dtype.kind in "fiub" else v
    return repr(f) if isinstance(f, float) and not np.isfinite(f) else f


def _ev(run: AuditRun, c: AuditCall) -> dict[str, Any]:
    return {"call": c.index + 1, "phase": c.phase, "context": c.context, "frame": c.frame or None, "path": c.path,
            "path_note": c.path_note}
