"""``forbidden-ops``: the candidate dispatches a framework op the task forbids."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from workstation.checks.fallback import delegate_names as op_names  # the rule of [delegation] ops
from workstation.checks.support.suspicion import suspect
from workstation.engine.check import Check, Finding, NotJudged, register
from workstation.engine.context import CheckContext, case_label
from workstation.protocol.extras.calls import CallExtra
from workstation.protocol.extras.monitors import AtenOpsReport
from workstation.protocol.steps import AtenOps, TritonLaunches

if TYPE_CHECKING:
    from workstation.task.model import Task


def forbidden_hits(ops: dict[str, dict[str, Any]], forbidden: set[str]) -> dict[str, dict[str, Any]]:
    """The traced ops (name -> record: ``count``, ``max_numel``, ``site``, and ``seen_by``
    for one only the profiler saw) that a forbidden name covers: the name itself or its
    overload packet (``mm`` covers ``mm.out``)."""
    return {n: r for n, r in ops.items() if n in forbidden or n.split(".")[0] in forbidden}


@register
class ForbiddenOps(Check):
    """The candidate dispatches a framework op the task forbids (`[contract] forbidden_ops`).

    Catches:
        a candidate that does the work the task asked it to write with the framework op
        it was meant to replace: `torch.mm` inside a "Triton GEMM", `F.softmax` called
        for the hard rows, cuBLAS reached through `torch.matmul`: the task declares the ops in
        `[contract] forbidden_ops` (a kws extension, docs/task-format.md).

    How:
        the candidate runs once per declared case (first seed) inside kws's dispatch trace
        (`workstation.harness.trace`: a `TorchDispatchMode` that records every aten op with
        the innermost task frame that called it, and the autograd profiler's top-level aten
        events, which see composite ops such as `matmul` before they decompose); the first
        case's traced call is the one `fallback` runs. Any traced op a forbidden name covers
        (the name or its overload packet; `aten::`/`torch.` prefixes and `.default` ignored)
        is reported with its count, the largest operand and the task line.

    Findings:
        | finding | severity |
        |---|---|
        | a forbidden op dispatched by the candidate's call (op, count, largest operand in elements, case, the task file and line that called it) | `fail` |
        | no forbidden op in the traced calls (the ops seen) | `info` |

    Example:
        (`forbidden_ops = ["aten::mm"]`, a candidate calling `a @ b`): `case M=64
        float32: the candidate's call dispatches forbidden op(s) mm x1 (largest operand
        4096 elements) from candidate.py:7 (add)`.

    Source:
        GPU MODE and KernelBench graders forbid library calls for the op under test
        (KernelBench-Hard's ban list; SOL-ExecBench's CUPTI kernel records); the trace is
        the one `fallback` reads.

    Limits:
        ops that do not pass through PyTorch's dispatcher (a cuBLAS call from a C++
        extension, a library's own kernels) are not seen; work done at import time is not
        traced.

    Not judged when:
        the task declares no `forbidden_ops` (the check is not scheduled); the candidate
        fails in the traced run of a case (correctness judges it: that case is not judged; where
        a plain run returns, a `warn` tagged `observation`: behaviour that depends on being traced);
        the trace was removed by task code (not judged).

    Forgeable:
        Measured in the job process: a dispatch mode and the profiler around the call.
        Still forgeable from inside: a candidate that pops kws's dispatch mode (reported: the trace says it was removed) or calls a library below the dispatcher.
    """

    id = "forbidden-ops"
    order = 54
    title = "Forbidden framework ops"

    @classmethod
    def applies(cls, task: Task) -> str:
        if not task.extensions.forbidden_ops:
            return "the task declares no [contract] forbidden_ops"
        return ""

    def run(self, ctx: CheckContext) -> list[Finding]:
        forbidden = op_names(ctx.task.extensions.forbidden_ops)
        seed = ctx.seeds[0]
        steps = [ctx.call_step("candidate", c, seed, monitors=[AtenOps(), TritonLaunches()]) for c in ctx.cases]
        outs = ctx.calls(steps, memo=True)
        findings: list[Finding] = []
        seen: set[str] = set()
        examined = 0
        for case, out in zip(ctx.cases, outs, strict=True):
            label = case_label(case)
            if not out.ok:
                plain = ctx.candidate([(case, seed)])[0]
                if plain.ok:
                    text = f"case {label}: the candidate {out.failure_text()} in the traced run but returns in a plain run"
                    findings.append(self.finding(
                        ctx, "warn", text, {"case": case, **out.failure_evidence(), **suspect(ctx, "observation", text)},
                        case=case, seed=seed))
                else:
                    ctx.could_not_judge(f"case {label}: the traced call failed ({out.failure_text()[:160]})")
                continue
            rep = out.payload(CallExtra).monitors.of(AtenOpsReport)
            ops: dict[str, dict[str, Any]] = {n: msgspec.to_builtins(r) for n, r in rep.ops.items()}
            if rep.profiler is not None and rep.profiler.mode_removed:
                ctx.could_not_judge(f"case {label}: task code removed kws's dispatch trace during the call")
            for n, p in (rep.profiler.ops if rep.profiler is not None else {}).items():
                ops.setdefault(n, {**msgspec.to_builtins(p), "site": None, "seen_by": "profiler"})
            examined += 1
            seen |= set(ops)
            hits = forbidden_hits(ops, forbidden)
            if not hits:
                continue
            parts = []
            for n, r in sorted(hits.items()):
                s = r.get("site") or {}
                where = f" from {s.get('file')}:{s.get('line')} ({s.get('function')})" if s else ""
                parts.append(f"{n} x{r.get('count')} (largest operand {r.get('max_numel')} elements){where}")
            site = next((r["site"] for r in hits.values() if r.get("site")), None)
            ev: dict[str, Any] = {"case": case, "seed": seed, "forbidden": sorted(forbidden), "hits": hits}
            if site:
                ev["source"] = {"file": site["file"], "line": site["line"]}
            findings.append(self.finding(
                ctx, "fail", f"case {label}: the candidate's call dispatches forbidden op(s) " + "; ".join(parts)
                + f" ([contract] forbidden_ops = {sorted(ctx.task.extensions.forbidden_ops)})", ev,
                case=case, seed=seed))
        if not examined:
            if findings:  # what it saw (a call that fails only when traced) is kept; not judged all the same
                return findings
            raise NotJudged("no traced call of the candidate returned: " + "; ".join(ctx.unjudged)[:300])
        if not any(f.severity == "fail" for f in findings):
            findings.append(self.finding(
                ctx, "info", f"no forbidden op ({', '.join(sorted(forbidden))}) in the traced calls of {examined} "
                f"case(s); ops seen: {', '.join(sorted(seen)[:20])}",
                {"forbidden": sorted(forbidden), "ops_seen": sorted(seen), "cases": examined}))
        return findings
