"""``late-write``: outputs written after the call returned, or not plain tensors."""

from __future__ import annotations

from typing import Any

from workstation.checks.support.series import (
    changed_elements,
    run_series,
    series_failure,
    series_payload,
)
from workstation.checks.support.suspicion import suspect
from workstation.engine.check import Check, Finding, register
from workstation.engine.context import CheckContext, case_label
from workstation.engine.report import json_scalar
from workstation.protocol.extras.series import SerialCall, SeriesLoop

#: an output type accepted beside ``torch.Tensor`` (with a ``warn``): a parameter is a
#: plain tensor with ``requires_grad``.
PARAMETER = "torch.nn.parameter.Parameter"


@register
class LateWrite(Check):
    """Outputs that change after the call returned (async or lazy writes) or are not exactly
    `torch.Tensor`.

    Catches:
        a candidate whose outputs are still being written when the call returns: work
        launched on a side stream or a background thread that fills the output later, a
        merged launch that writes the outputs of earlier calls at a later one (GPU MODE's
        NVFP4 submission: one launch for the 15 timed calls), a lazy output filled when
        first read; and outputs that are not exactly `torch.Tensor` (a subclass, a
        `FakeTensor`, a lazy wrapper), which SOL-ExecBench rejects.

    How:
        the shared `call_series` step (`workstation.harness.series`) calls the
        candidate 12 times on fresh copies of the inputs of the first declared case (first
        seed), fingerprints every output (BLAKE2b of its bytes) right after the call returns
        (on CUDA after a host copy on the current stream) and again after
        `torch.cuda.synchronize()`, a 20 ms wait and a second synchronize; then 12 calls back
        to back without a synchronize, one chosen at random in the child (the audit)
        fingerprinted right after return and again after the loop's synchronize and wait. Each
        output's exact type is recorded. Fewer calls (at least 4 per phase) where one call
        is slow.

    Findings:
        | finding | severity |
        |---|---|
        | an output whose fingerprint changed between return and the synchronize + wait (which call, how many elements, where, both fingerprints); an output that cannot be read (lazy, fake or meta); an output type other than `torch.Tensor` | `fail` |
        | an output that is a `torch.nn.Parameter` | `warn` |
        | the candidate raised during the series although a plain call returns (behaviour that depends on the call count) | `warn`, not judged |
        | fingerprints stable and outputs plain tensors on every call | `info` |

    Example:
        (a candidate that fills its output from a thread 5 ms after returning):
        `serial call 1 output 0: 4096 of 4096 elements changed after the call returned
        (fingerprint 3f2a... right after return, 9c41... after synchronize + 20 ms): the
        output is written after return`.

    Source:
        GPU MODE reference-kernels PR #104 and #159-#162 (output fingerprints after
        return and after a sync; lazy outputs); NVIDIA SOL-ExecBench
        `src/sol_execbench/core/bench/reward_hack.py` (outputs must be exactly
        `torch.Tensor`).

    Limits:
        a write that lands later than the 20 ms wait after a synchronize is not seen (a
        plain correctness call reads after a synchronize too, so such a write also misses
        correctness). On the CPU there are no streams: only threads can write late. Only
        the first declared case; types are judged on the candidate alone.

    Not judged when:
        the plain call of the first case fails (correctness judges it), or the series was
        stopped by kws's CPU budget or a limit that says nothing about the candidate:
        `NotJudged`. A series that raised partway (the plain call returns) is judged on the calls
        that completed, with a `warn` tagged `state` and the check not judged (one rule for suspicion: a hack-class signal kws could not confirm is not judged, never a `warn` in a report that exits 0).

    Forgeable:
        Measured in the job process: fingerprints taken by the harness right after the call returns and after the synchronize.
        Still forgeable from inside: a candidate that detects the harness's synchronize (patching `torch.cuda.synchronize`, which `tampering` reports) or finishes its late write within the copy.
    """

    id = "late-write"
    order = 50
    title = "Outputs written after return"

    def run(self, ctx: CheckContext) -> list[Finding]:
        spec, out = run_series(ctx)
        case = spec.case
        label = case_label(case)
        findings: list[Finding] = []
        st = out.step
        series = series_payload(out)
        serial = series.serial
        if not out.ok:
            # the plain call returns (run_series): failing partway through a series is behaviour
            # that depends on the call count, and the rest of the series was not examined
            tag = suspect(ctx, "state", f"case {label}: {series_failure(spec, out)}")
            findings.append(self.finding(ctx, "warn", f"case {label}: {series_failure(spec, out)}",
                                         {"case": case, **out.failure_evidence(), **tag}, case=case, seed=spec.seed_a))
            if not serial:
                ctx.could_not_judge(f"case {label}: no call of the series completed")
                return findings
        arrays = st.arrays if st is not None else {}
        loop = series.loop if out.ok else SeriesLoop()
        late, types = self._inspect(serial, loop, arrays)
        if late:
            first = late[0]
            findings.append(self.finding(
                ctx, "fail",
                f"case {label}: {first['where']}: {first['text']}: the output is written after the call returns"
                + (f"; {len(late) - 1} more output(s) the same way" if len(late) > 1 else ""),
                {"case": case, "seed": spec.seed_a, "late_writes": late[:16], "settle_s": spec.settle_s},
                case=case, seed=spec.seed_a))
        bad_types = [t for t in types if t.get("type") != PARAMETER or t.get("problem")]
        if bad_types:
            t = bad_types[0]
            what = t.get("problem") or f"is a {t['type']}, not exactly torch.Tensor"
            findings.append(self.finding(
                ctx, "fail", f"case {label}: {t['where']} {what}" + (
                    f"; {len(bad_types) - 1} more the same way" if len(bad_types) > 1 else "")
                + " (SOL-ExecBench accepts exactly torch.Tensor: a subclass, fake or lazy output can defer or "
                "forge its values)", {"case": case, "outputs": bad_types[:16]}, case=case, seed=spec.seed_a))
        elif types:
            findings.append(self.finding(ctx, "warn", f"case {label}: {types[0]['where']} is a torch.nn.Parameter, "
                                         "not a plain torch.Tensor", {"case": case, "outputs": types[:16]},
                                         case=case, seed=spec.seed_a))
        if not any(f.severity in ("fail", "warn") for f in findings):
            sync = "after torch.cuda.synchronize()" if ctx.on_gpu else "after the wait (no CUDA streams on the CPU)"
            findings.append(self.finding(
                ctx, "info",
                f"case {label}: the outputs of {len(serial)} serial calls and the audit call of a {loop.n}-call "
                f"loop had the same fingerprint right after return and {sync} + {spec.settle_s * 1000:.0f} ms; every "
                "output is exactly torch.Tensor",
                {"case": case, "seed": spec.seed_a, "serial_calls": len(serial), "loop_calls": loop.n,
                 "audit_call": loop.audit, "fingerprints": [r.late for r in serial[:2]]}))
        return findings

    def _inspect(self, serial: list[SerialCall], loop: SeriesLoop,
                 arrays: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The outputs written after return (serial calls, then the loop's audit call) and the
        outputs that are not exactly ``torch.Tensor`` or could not be read."""
        late, types = self._serial_outputs(serial, arrays)
        loop_late, loop_types = self._loop_outputs(loop, arrays)
        return late + loop_late, types + loop_types

    def _serial_outputs(self, serial: list[SerialCall],
                        arrays: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The serial calls' outputs written after return, and those not exactly ``torch.Tensor``
        or unreadable."""
        late: list[dict[str, Any]] = []
        types: list[dict[str, Any]] = []
        for row in serial:
            k = row.call
            for j, (he, hl) in enumerate(zip(row.early, row.late, strict=False)):
                where = f"serial call {k + 1} output {j}"
                if hl.startswith("unreadable") or he.startswith("unreadable"):
                    types.append({"where": where, "type": row.types[j], "problem": hl if hl.startswith(
                        "unreadable") else he})
                elif he != hl:
                    late.append(self._late(where, he, hl, arrays.get(row.early_arrays[j] or ""),
                                           arrays.get(row.arrays[j] or ""), k))
                if not row.exact_tensor[j]:
                    types.append({"where": where, "type": row.types[j]})
        return late, types

    def _loop_outputs(self, loop: SeriesLoop,
                      arrays: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The loop's audit-call outputs written after return, and the audit and last calls'
        outputs not exactly ``torch.Tensor``."""
        late: list[dict[str, Any]] = []
        types: list[dict[str, Any]] = []
        for j, (he, hl) in enumerate(zip(loop.audit_early, loop.audit_late, strict=False)):
            where = f"audit call (loop call {(loop.audit or 0) + 1} of {loop.n}) output {j}"
            if he != hl and not hl.startswith("unreadable") and not he.startswith("unreadable"):
                late.append(self._late(where, he, hl, arrays.get(f"audit_early{j}"), arrays.get(f"audit{j}"), None))
        for name, kept_types, kept_exact in (("audit", loop.audit_types, loop.audit_exact_tensor),
                                             ("last", loop.last_types, loop.last_exact_tensor)):
            for j, (type_name, exact) in enumerate(zip(kept_types, kept_exact, strict=False)):
                if not exact:
                    types.append({"where": f"{name} call of the loop output {j}", "type": type_name})
        return late, types

    @staticmethod
    def _late(where: str, he: str, hl: str, early: Any, final: Any, call: int | None) -> dict[str, Any]:
        item: dict[str, Any] = {"where": where, "fingerprint_after_return": he, "fingerprint_after_sync": hl}
        if call is not None:
            item["call"] = call + 1
        if early is not None and final is not None:
            n, idx = changed_elements(early, final)
            item.update(changed=n, elements=int(final.size), changed_at=idx)
            if idx:
                i0 = tuple(idx[0])
                item["example"] = {"index": list(i0), "after_return": json_scalar(early[i0]),
                                   "after_sync": json_scalar(final[i0])}
            text = f"{n} of {final.size} elements changed after the call returned"
        else:
            text = "its bytes changed after the call returned"
        item["text"] = (f"{text} (fingerprint {he[:12]}... right after return, {hl[:12]}... after synchronize + wait)")
        return item
