"""``input-mutation``: the candidate writes inputs the contract says it only reads.

Also exposes helpers other checks reuse (``reference-suspect`` asks the same question of
the reference): :func:`mutated_inputs` reads the digests a call step records, and
:func:`describe_mutations` reruns a case to say which elements changed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from workstation.checks.support.guarded import indices, region, where_text
from workstation.engine.check import Check, Finding, Skip, register
from workstation.engine.context import CallOutcome, CheckContext, case_label
from workstation.engine.report import json_scalar
from workstation.protocol.extras.calls import CallExtra
from workstation.protocol.steps import InputsOnlyStep, Transform


def written_indices(ctx: CheckContext) -> set[int] | None:
    """Input indices the callables may write (``out_args`` and ``inout_args``), or None
    when the contract lets them write any input (``mutates_inputs = true``)."""
    if ctx.task.contract.mutates_inputs:
        return None
    return set(ctx.task.out_args) | set(ctx.task.inout_args)


def mutated_inputs(out: CallOutcome, exclude: set[int] | frozenset[int] = frozenset()) -> list[dict[str, Any]]:
    """The tensor inputs (indices not in ``exclude``) whose content digest changed during
    a successful call step (``extra.inputs``: sha256 of each input's elements before
    and after the call, computed by the harness). Each item: index, dtype, shape, stride
    and the two digests. Works for any role's call step (``reference-suspect`` uses it)."""
    if not out.ok or out.step is None:
        return []
    res: list[dict[str, Any]] = []
    for d in out.payload(CallExtra).inputs:
        if d.kind != "tensor" or d.index in exclude:
            continue
        if d.sha256_after is not None and d.sha256_after != d.sha256:
            res.append({"index": d.index, "dtype": d.dtype, "shape": list(d.shape), "stride": list(d.stride),
                        "sha256": d.sha256, "sha256_after": d.sha256_after})
    return res


def describe_mutations(ctx: CheckContext, role: str, case: dict[str, Any], seed: int,
                       which: list[int], transforms: list[Transform] | None = None) -> list[dict[str, Any]]:
    """Rerun ``role`` on ``case``/``seed`` and say which elements of inputs ``which``
    changed: one child makes the pristine inputs (``inputs_only``), another calls the role
    and sends its inputs after the call (``send_inputs``); the parent diffs them.

    Returns one dict per input: ``index``, ``changed`` (count), ``elements``, ``indices``
    (first 16), ``region``, ``region_text``, ``sample`` ([index, before, after] x 8),
    ``max_abs_change``, ``after_range`` ([min, max] of the changed elements afterwards);
    or ``{"index", "error"}`` where the rerun failed or did not change it again.
    """
    tf = list(transforms or [])
    pristine_step = InputsOnlyStep(case=dict(case), seed=int(seed), transforms=tf)
    call = ctx.call_step(role, case, seed, send_inputs=True, transforms=tf)
    pristine, after = ctx.calls([pristine_step, call], memo=True)
    out = []
    for i in which:
        if not pristine.ok or not after.ok or pristine.step is None or after.step is None:  # ok: has a step
            out.append({"index": i, "error": (pristine if not pristine.ok else after).failure_text()})
            continue
        b = pristine.step.arrays.get(f"in{i}")
        a = after.step.arrays.get(f"in{i}")
        if a is None or b is None or a.shape != b.shape:
            out.append({"index": i, "error": "the input was not sent back"})
            continue
        with np.errstate(invalid="ignore"):
            changed = ~((a == b) | (np.isnan(a) & np.isnan(b)) if a.dtype.kind in "fc" else (a == b))
        n = int(changed.sum())
        if n == 0:
            out.append({"index": i, "error": "unchanged in the rerun (the mutation is not reproducible)"})
            continue
        diff = np.abs(a[changed].astype(np.float64) - b[changed].astype(np.float64)) if a.dtype.kind in "fiu" else None
        ix = indices(changed, 8)
        out.append({
            "index": i, "changed": n, "elements": int(a.size), "indices": indices(changed),
            "region": region(changed), "region_text": where_text(changed),
            "sample": [[p, json_scalar(b[tuple(p)]), json_scalar(a[tuple(p)])] for p in ix],
            "max_abs_change": float(np.nanmax(diff)) if diff is not None and diff.size else None,
            "after_range": [json_scalar(np.nanmin(a[changed])), json_scalar(np.nanmax(a[changed]))] if a.dtype.kind in "fiu" else None,
        })
    return out


@register
class InputMutation(Check):
    """The candidate changes its inputs where the contract does not allow it.

    Catches:
        the candidate writes an input the contract makes read-only (in-place scratch
        use of the logits, an in-place activation on the caller's tensor).

    How:
        every call step records a sha256 of each input's elements before and after the
        call (in the child). kws reads them from the candidate's runs on every declared case and
        seed (the runs `correctness` makes: no extra call), skipping `out_args` / `inout_args`.
        For a changed input it reruns one seed: one child makes the pristine inputs, another
        calls the candidate and sends its inputs back; the parent diffs them.

    Findings:
        | finding | severity |
        |---|---|
        | per case: which input, how many elements changed (region, max change, an example before -> after, the range afterwards), on which seeds | `fail` |
        | inputs unchanged in n runs | `info` |
        | `mutates_inputs = true` in the contract | `skip` (reason says so) |

    Example:
        (`softmax-inplace-scratch`): `input 0 (float32 [8x2048]): 16384 of 16384
        elements changed (rows 0..7, cols 0..2047), max |change| 13, e.g. at [0, 0]: -3.37752 ->
        1.54666e-07; afterwards in [7.74e-11, 1]`.

    Source:
        in-place scratch use of an input (`exp(x - max)` written back into the
        logits), the PyTorch convention that functional ops do not write their arguments
        unless named `op_`; harnesses that compute the reference first (or on a copy) cannot
        see it.

    Reuse:
        `workstation.checks.input_mutation.mutated_inputs(outcome, exclude)` and
        `describe_mutations(ctx, role, case, seed, indices)` work for any role
        (`reference-suspect` asks the same of the reference).

    Limits:
        a candidate that restores its inputs before returning is not seen; writes through
        an alias outside the input's logical elements are the concern of `out-of-bounds`. CPU
        and GPU alike.

    Not judged when:
        the candidate's backend or a library its files import cannot run here, a call was stopped
        by a limit that says nothing about the code (the wall-clock backstop, the import budget),
        or `make_inputs` is broken on a declared case (a task problem naming the file): `NotJudged`
        (`Skip` where no declared case can be judged on this device). A call that died or hung is
        charged to the candidate (`fail`) by `correctness`. A call that raised or did not return
        records no digests: it is counted in the `info`'s "n of N runs"; a declared case none of
        whose runs returned is not judged (named with the first run's failure), so the check is
        never `pass` on a case it did not observe (`correctness` fails the calls).

    Forgeable:
        Measured in the job process: guard bands and poison in buffers kws allocates, read back by the harness after the call.
        Still forgeable from inside: a candidate that knows kws's sentinel bytes could write them back over what it clobbered before returning.
    """

    id = "input-mutation"
    order = 7
    title = "Inputs written by the candidate"

    def run(self, ctx: CheckContext) -> list[Finding]:
        written = written_indices(ctx)
        if written is None:
            raise Skip("the contract allows the callables to write their inputs (mutates_inputs = true)")
        pairs = ctx.declared_pairs()
        cands = ctx.candidate(pairs)
        findings: list[Finding] = []
        by_case: dict[int, list[tuple[int, list[dict[str, Any]]]]] = {}
        n_ok = 0
        unseen: dict[int, list[str]] = {}  # case index -> why each of its runs recorded no digests
        for k, ((_case, seed), out) in enumerate(zip(pairs, cands, strict=True)):
            if not out.ok:
                unseen.setdefault(k // len(ctx.seeds), []).append(f"seed {seed}: {out.failure_text()}")
                continue
            n_ok += 1
            m = mutated_inputs(out, written)
            if m:
                by_case.setdefault(k // len(ctx.seeds), []).append((seed, m))
        for ci, whys in unseen.items():
            if len(whys) == len(ctx.seeds):  # no run of this case returned: its inputs were never compared
                ctx.could_not_judge(f"case {case_label(ctx.cases[ci])}: the candidate did not return on any of its "
                                     f"{len(whys)} run(s) ({whys[0]}), so whether it writes its inputs there was not "
                                     "observed")
        for ci, runs in by_case.items():
            case = ctx.cases[ci]
            seed, muts = runs[0]
            which = [m["index"] for m in muts]
            detail = describe_mutations(ctx, "candidate", case, seed, which)
            parts = []
            for mut, d in zip(muts, detail, strict=True):
                shape = "x".join(str(s) for s in mut["shape"])
                if "changed" in d:
                    s0 = d["sample"][0] if d["sample"] else None
                    ex = f", e.g. at {s0[0]}: {s0[1]:.6g} -> {s0[2]:.6g}" if s0 and all(
                        isinstance(v, float | int) for v in s0[1:]) else ""
                    rng = d.get("after_range")
                    after = f"; afterwards in [{rng[0]:.3g}, {rng[1]:.3g}]" if rng and all(
                        isinstance(v, float | int) for v in rng) else ""
                    mx = d.get("max_abs_change")
                    big = f", max |change| {mx:.3g}" if isinstance(mx, float) else ""
                    parts.append(f"input {mut['index']} ({mut['dtype']} [{shape}]): {d['changed']} of "
                                 f"{d['elements']} elements changed ({d['region_text'] or 'one element'}){big}"
                                 f"{ex}{after}")
                else:
                    parts.append(f"input {mut['index']} ({mut['dtype']} [{shape}]): content digest changed "
                                 f"({d['error']})")
            seeds = [s for s, _ in runs]
            summary = (f"case {case_label(case)}: the candidate writes an input the contract makes read-only "
                       f"(mutates_inputs = false): {'; '.join(parts)}; on seeds {', '.join(map(str, seeds))}")
            findings.append(self.finding(
                ctx, "fail", summary,
                {"case": case, "seeds": seeds, "inputs": muts, "elements": detail,
                 "excluded": {"out_args": list(ctx.task.out_args), "inout_args": list(ctx.task.inout_args)}},
                case=case, seed=seed))
        if not by_case:
            findings.append(self.finding(
                ctx, "info",
                f"inputs unchanged by the candidate in {n_ok} of {len(pairs)} case/seed runs (sha256 before and after "
                f"each call; out_args {list(ctx.task.out_args)} and inout_args {list(ctx.task.inout_args)} excluded)",
                {"runs": n_ok, "excluded": {"out_args": list(ctx.task.out_args),
                                            "inout_args": list(ctx.task.inout_args)}}))
        return findings
