"""``call-count``: results that depend on how many times the candidate has been called."""

from __future__ import annotations

from typing import Any

import numpy as np

from workstation.analysis.compare import Comparison, compare
from workstation.checks.support.series import (
    compare_array,
    run_series,
    series_failure,
    series_payload,
)
from workstation.engine.check import Check, Finding, register
from workstation.engine.context import CallOutcome, CheckContext, case_label


@register
class CallCount(Check):
    """The candidate's result depends on how many times it has been called.

    Catches:
        a candidate honest on its first calls (the correctness calls) and different later:
        one that counts calls and then returns a cached, partial or merged result (GPU MODE's
        NVFP4 submission, honest during correctness, ran one merged launch for the 15 timed
        calls), one wrong only inside a timed loop (SOL-ExecBench's audit call), a cache keyed
        on input addresses that serves another call's values when the allocator hands the
        same address back with new values (CUDA-L1), state that drifts from call to call, a
        candidate that raises after a number of calls.

    How:
        the shared `call_series` step (`workstation.harness.series`) on the first declared
        case: 12 serial calls, each on fresh copies of the inputs of the first seed; then 12
        calls back to back without a synchronize, alternating fresh copies of the first and
        second seeds' inputs (the copies of a call dropped before the next, so an address can
        come back with other values), one chosen at random in the child kept as the audit, and
        the last. Each serial output, the audit's and the last's are compared with the
        reference of their seed at the task's tolerance. When the candidate's plain call
        already mismatches the reference (correctness's finding), each call is compared with the
        first serial call instead: the question is only whether later calls differ. Fewer
        calls (at least 4 per phase) where one call is slow.

    Findings:
        | finding | severity |
        |---|---|
        | a later serial call, the audit call or the last loop call mismatches while the first matches (which calls, the worst element, the comparison); the candidate raises or dies during the series while a plain call returns | `fail` |
        | every call of the series matches the reference (or the first call, where correctness fails); only the first call is wrong and the later ones match the reference (correctness reports the first) | `info` |

    Example:
        (a candidate that returns its first result from the 4th call on):
        `case N=64 float32: serial calls 4-12 of 12 on fresh copies of the same inputs
        mismatch the reference while calls 1-3 match: 64 of 64 elements (100%) outside ...`.

    Source:
        GPU MODE kernelboard news 2026-03-09 and reference-kernels PR #104, #159-#162
        (call counting); NVIDIA SOL-ExecBench `reward_hack.py` (one extra call at an
        unpredictable point inside the timed loop, checked against the reference); CUDA-L1
        (outputs cached on the input pointer, defeated by fresh addresses every iteration).
        `stale-output` covers the same address refilled in place.

    Limits:
        a candidate that switches after more calls than the series makes (24 at most) is
        not seen; the audit call is one of the loop's calls, so a candidate wrong on a few
        loop calls may be missed. Only the first declared case.

    Not judged when:
        the plain call of the first case fails (correctness judges it), or the series was
        stopped by kws's CPU budget or a limit that says nothing about the candidate:
        `NotJudged`. A reference that fails on the second seed leaves the loop's odd calls
        unjudged (said in the info).

    Forgeable:
        Measured in the job process: outputs copied by the harness after each call.
        Still forgeable from inside: a candidate that recognises kws's series step (reading the job file) and stays honest only there.
    """

    id = "call-count"
    order = 51
    title = "Call-count-dependent results"

    def run(self, ctx: CheckContext) -> list[Finding]:
        spec, out = run_series(ctx)
        case, a, b = spec.case, spec.seed_a, spec.seed_b
        label = case_label(case)
        refs = dict(zip((a, b), ctx.reference([(case, a), (case, b)]), strict=True))
        plain = ctx.candidate([(case, a)])[0]
        st = out.step
        if not out.ok:
            return [self.finding(ctx, "fail", f"case {label}: {series_failure(spec, out)}",
                                 {"case": case, "seeds": [a, b], **out.failure_evidence()}, case=case, seed=a)]
        assert st is not None
        if not refs[a].ok:
            ctx.could_not_judge(f"case {label}: the reference failed on seed {a}")
            return []
        plain_ok = all(c.ok for c in ctx.compare(refs[a], plain, case))
        series = series_payload(out)
        serial, loop = series.serial, series.loop
        first: dict[int, np.ndarray] = {}
        bad: dict[int, tuple[int, Comparison]] = {}
        for row in serial:
            k = row.call
            for j, key in enumerate(row.arrays):
                got = st.arrays.get(key) if key else None
                if k == 0 and got is not None:
                    first[j] = got
                c = (compare_array(ctx, case, refs[a], j, got, row.dtypes[j]) if plain_ok
                     else self._against_first(ctx, case, refs[a], j, first.get(j), got, row.dtypes[j]))
                if not c.ok and k not in bad:
                    bad[k] = (j, c)
        findings: list[Finding] = []
        basis = "the reference" if plain_ok else "the candidate's own first call (its plain call mismatches the reference)"
        fixed = not plain_ok and bool(bad) and all(
            compare_array(ctx, case, refs[a], j, st.arrays.get(key) if key else None, row.dtypes[j]).ok
            for row in serial if row.call in bad for j, key in enumerate(row.arrays))
        if fixed:
            findings.append(self.finding(
                ctx, "info",
                f"case {label}: the first call of the series mismatches the reference (as the plain call does: "
                f"correctness's finding) and call(s) {_ranges([k + 1 for k in sorted(bad)])} match it: the first "
                "call runs in another state (autotuning or warm-up on in-place data?)",
                {"case": case, "seed": a, "right_calls": [k + 1 for k in sorted(bad)]}, case=case, seed=a))
            bad = {}
        if bad:
            calls = sorted(bad)
            k0 = calls[0]
            j, c = bad[k0]
            w = c.worst or {}
            good = [r.call + 1 for r in serial if r.call not in bad]
            findings.append(self.finding(
                ctx, "fail",
                f"case {label}: serial call(s) {_ranges([k + 1 for k in calls])} of {len(serial)} on fresh copies of the "
                f"same inputs (seed {a}) mismatch {basis}"
                + (f" while call(s) {_ranges(good)} match" if good else "")
                + f": call {k0 + 1} output {j}: {c.reason}; worst at {w.get('index')}: expected {w.get('expected')}, "
                f"got {w.get('got')}",
                {"case": case, "seed": a, "basis": "reference" if plain_ok else "first call",
                 "mismatching_calls": [k + 1 for k in calls], "matching_calls": good, "output": j,
                 "comparison": c.evidence()}, case=case, seed=a))
        loop_unjudged = []
        for name in ("audit", "last"):
            if not loop.n:  # no loop: no audit or last call (a loop keeps both)
                continue
            seed = loop.audit_seed if name == "audit" else loop.last_seed
            dtypes = loop.audit_dtypes if name == "audit" else loop.last_dtypes
            ref = refs.get(seed)
            if ref is None or not ref.ok:
                loop_unjudged.append(f"the {name} call (seed {seed}): the reference failed on that seed")
                continue
            if not plain_ok:
                continue  # the loop alternates seeds: without a right plain call there is no basis
            for j, dt in enumerate(dtypes):
                c = compare_array(ctx, case, ref, j, st.arrays.get(f"{name}{j}"), dt)
                if not c.ok:
                    w = c.worst or {}
                    pos = (loop.audit or 0) + 1 if name == "audit" else loop.n
                    what = ("the audit call, chosen at random" if name == "audit" else "the last call")
                    findings.append(self.finding(
                        ctx, "fail",
                        f"case {label}: {what} (call {pos} of a {loop.n}-call loop without synchronize, fresh "
                        f"copies of seed {seed}'s inputs) mismatches the reference: output {j}: {c.reason}; worst at "
                        f"{w.get('index')}: expected {w.get('expected')}, got {w.get('got')}",
                        {"case": case, "seed": seed, "loop_call": pos, "loop_calls": loop.n, "output": j,
                         "serial_calls_before": len(serial), "comparison": c.evidence()}, case=case, seed=seed))
                    break
        if not any(f.severity == "fail" for f in findings) and not fixed:
            findings.append(self.finding(
                ctx, "info",
                f"case {label}: {len(serial)} serial calls on fresh copies and the audit (call "
                f"{(loop.audit or 0) + 1}) and last calls of a {loop.n}-call loop alternating seeds {a} "
                f"and {b} match {basis}" + (f"; not judged: {'; '.join(loop_unjudged)}" if loop_unjudged else ""),
                {"case": case, "seeds": [a, b], "serial_calls": len(serial), "loop_calls": loop.n,
                 "audit_call": loop.audit, "basis": "reference" if plain_ok else "first call"}))
        if loop_unjudged and not bad:
            ctx.could_not_judge(f"case {label}: " + "; ".join(loop_unjudged))
        return findings

    @staticmethod
    def _against_first(ctx: CheckContext, case: dict[str, Any], ref: CallOutcome, j: int, first: np.ndarray | None,
                       got: np.ndarray | None, dtype: str) -> Comparison:
        """Output ``j`` of a later call against the first call's, at the task's tolerance."""
        e = ref.outputs[j] if j < len(ref.outputs) else None
        if first is None or got is None or e is None:
            return Comparison(ok=True, reason="", shape=(), dtype=dtype)
        return compare(first, got, ctx.tolerance(case, e.dtype), expected_dtype=dtype, got_dtype=dtype,
                       nonfinite_ok=True)


def _ranges(xs: list[int]) -> str:
    """``[1, 2, 3, 5]`` as ``1-3, 5``."""
    out: list[tuple[int, int]] = []
    for x in xs:
        if out and out[-1][1] == x - 1:
            out[-1] = (out[-1][0], x)
        else:
            out.append((x, x))
    return ", ".join(f"{s}" if s == e else f"{s}-{e}" for s, e in out)
