"""``unwritten-output``: output elements the candidate never writes."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import msgspec
import numpy as np

from workstation.analysis.compare import region_text
from workstation.checks.support.guarded import (
    buffer_text,
    guarded_step,
    guarded_steps,
    indices,
    region,
    source,
    where_text,
)
from workstation.engine.check import Check, Finding, register
from workstation.engine.context import CallOutcome, CheckContext, case_label
from workstation.protocol import sentinels
from workstation.protocol.extras.guards import GuardedBuffer, GuardedCallExtra

SCENARIO_KEYS = {"A": "fresh_process", "B": "after_reference"}


def poison_mask(out: CallOutcome, j: int, dtype: str, scenario: str) -> np.ndarray | None:
    """Elements of output ``j`` of a guarded run that still hold the scenario's poison
    (None when the run failed, sent no bits, or the dtype is not poisoned)."""
    if not out.ok or out.step is None:
        return None
    bits = out.step.arrays.get(f"bits{j}")
    p = sentinels.poison_bits(dtype, scenario)
    if bits is None or p is None or j >= len(out.outputs):
        return None
    return sentinels.as_uint(bits, dtype).reshape(out.outputs[j].shape) == p


def _any_poison(out: CallOutcome, scenario: str) -> bool:
    """True when some output of a guarded run still holds the scenario's poison bits."""
    if not out.ok:
        return False
    return any((m := poison_mask(out, j, o.dtype, scenario)) is not None and bool(m.any())
               for j, o in enumerate(out.outputs))


def output_buffer(out: CallOutcome, j: int) -> GuardedBuffer | None:
    """The guarded run's description of the buffer output ``j`` lives in, if any."""
    if out.step is None:
        return None
    guarded = out.payload(GuardedCallExtra)
    srcs, bufs = guarded.output_sources, guarded.buffers
    k = srcs[j].buffer if j < len(srcs) else None
    return bufs[k] if k is not None and k < len(bufs) else None


@register
class UnwrittenOutput(Check):
    """Output elements the candidate never writes, hidden by whatever memory held before.

    Catches:
        output elements the candidate never writes, hidden by whatever the memory held
        before: zeroed pages in a fresh process, the reference's result in recycled memory
        (KernelBench's no-op kernels that "passed" because `torch.empty` returned the block the
        reference had just freed), zeros from the author's `torch.zeros` out buffer.

    How:
        every write-only buffer the candidate can receive is *poisoned*: `out_args`
        inputs, and every `torch.empty*` allocation made during its import and call (the same
        `TorchDispatchMode` as `out-of-bounds`, on CPU and CUDA; Triton kernels then write over
        the poison through the pointers they get). Float poisons are quiet NaNs with a payload,
        integer poisons repeat the bytes `0x5A` / `0xC3` (`workstation/protocol/sentinels.py`). The
        candidate runs in two scenarios, each with its own poison: **A** on every declared case,
        first thing in a fresh child (before any reference touched memory there), and **B** on the
        first case and on every case where A left poison, in a child right after the reference
        ran on the same case (recycled memory). The child sends each output's raw
        bits; an element still holding the poison's bits where the reference's value is not that
        value was never written. In both scenarios: never written, or only read-modify-written
        (a NaN operand's payload survives arithmetic, so an accumulator that was never
        initialised keeps the poison too); in one only: write coverage depends on what ran
        before. An output with no poison left that is wrong only when allocations are poisoned
        (a plain run matches) read memory it never initialised.

    Findings:
        | finding | severity |
        |---|---|
        | elements never written: count, fraction, first indices, region, per scenario, the reference's values there (e.g. "0 at all of them"), the buffer and its `torch.empty` line | `fail` |
        | the output differs from the reference only when fresh allocations are poisoned | `fail` |
        | the candidate raised or crashed only with poisoned allocations | `warn`, not judged for that case |
        | every element written (outputs examined; outputs not poisoned and why) | `info` |

    Example:
        (`relu-unwritten`): `case M=64 N=1024 float32 (seed 0) output 0: 32851 of
        65536 elements (50.1%) never written ..., they still hold the poison in a fresh process
        and after the reference ran; first at [0, 0], [0, 1], [0, 2]; the reference is 0 at all
        of them (zeroed memory would hide this) (rows 0..63, cols 0..1023); out_args input 1`.

    Source:
        KernelBench (Ouyang et al., 2025) and its reported no-op/partial-write false
        passes; CUDA's and PyTorch's documented "torch.empty returns uninitialized memory".

    Limits:
        buffers allocated before the candidate's import or outside the dispatcher (ctypes,
        `UntypedStorage` with a size, CUDA graph pools) are not poisoned; `bool` and complex outputs are not poisoned (listed in the info).
        Seed: the first seed only; every declared case. CPU and GPU alike; on the CPU fresh pages are zero, which is
        exactly what poisoning defeats.

    Not judged when:
        a case or output was not examined (the reference failed, the candidate failed in a
        plain run too, a shape or dtype differs from the reference): not judged for those,
        with the examined ones reported.

    Forgeable:
        Measured in the job process: guard bands and poison in buffers kws allocates, read back by the harness after the call.
        Still forgeable from inside: a candidate that knows kws's sentinel bytes could write them back over what it clobbered before returning.
    """

    id = "unwritten-output"
    order = 6
    title = "Output elements never written"

    def run(self, ctx: CheckContext) -> list[Finding]:
        seed, cases = ctx.seeds[0], ctx.cases
        pairs = [(c, seed) for c in cases]

        def scenario_b(idx: list[int]) -> list[CallOutcome]:
            steps = [s for i in idx for s in (ctx.call_step("reference", cases[i], seed),
                                              guarded_step(cases[i], seed, "B"))]
            return ctx.calls(steps)[1::2] if steps else []

        with ThreadPoolExecutor(max_workers=3) as ex:
            fa = ex.submit(ctx.calls, guarded_steps(cases, seed, "A"), memo=True)
            fb = ex.submit(scenario_b, [0])
            fr = ex.submit(ctx.reference, pairs)
            plain = ctx.candidate(pairs)
            runs_a, refs = fa.result(), fr.result()
            # scenario B runs on the first case always, and on every case where scenario A
            # left poison in an output (to say whether the second scenario shows it too)
            more = [i for i in range(1, len(cases)) if _any_poison(runs_a[i], "A")]
            b_more = scenario_b(more)
            b_first = fb.result()
        runs_b: list[CallOutcome | None] = [None] * len(cases)
        runs_b[0] = b_first[0]
        for i, o in zip(more, b_more, strict=True):
            runs_b[i] = o
        findings: list[Finding] = []
        examined, not_poisoned, skipped = 0, [], []
        for case, ref, a, b, p in zip(cases, refs, runs_a, runs_b, plain, strict=True):
            label = case_label(case)
            if not ref.ok:
                skipped.append(f"{label}: the reference failed")
                continue
            if not a.ok and (b is None or not b.ok):
                if p.ok:
                    findings.append(self.finding(
                        ctx, "warn",
                        f"case {label} (seed {seed}): the candidate {a.failure_text()} when its fresh "
                        f"allocations were poisoned (NaN / 0x5A bytes), but returned in a plain run: it "
                        f"reads memory it never wrote",
                        {"case": case, "seed": seed, **a.failure_evidence()}, case=case, seed=seed))
                    ctx.could_not_judge(f"case {label}: the poisoned run {a.failure_text()[:160]}, so its outputs were "
                                        "not read for unwritten elements")
                else:
                    skipped.append(f"{label}: the candidate fails in a plain run too (see correctness)")
                continue
            for j, r in enumerate(ref.outputs):
                runs = {s: o for s, o in (("A", a), ("B", b)) if o is not None and o.ok and j < len(o.outputs)}
                shapes_ok = all(o.outputs[j].shape == r.shape and o.outputs[j].dtype == r.dtype for o in runs.values())
                if not runs or not shapes_ok:
                    skipped.append(f"{label} output {j}: shape or dtype differs from the reference (see correctness)")
                    continue
                found = {s: poison_mask(o, j, r.dtype, s) for s, o in runs.items()}
                masks = {s: m for s, m in found.items() if m is not None}
                buf = output_buffer(next(iter(runs.values())), j)
                if not masks or buf is None or not buf.poisoned:
                    not_poisoned.append(f"{label} output {j}")
                    continue
                examined += 1
                f = self._unwritten(ctx, case, seed, j, r, runs, masks, buf)
                if f is None:
                    f = self._reads_uninitialised(ctx, case, seed, j, ref, runs, p, buf)
                if f is not None:
                    findings.append(f)
        ev = {"cases": [case_label(c) for c in cases], "seed": seed, "outputs_examined": examined,
              "not_poisoned": not_poisoned, "skipped": skipped,
              "poison": {SCENARIO_KEYS[s]: sentinels.SCENARIOS[s] for s in ("A", "B")}}
        if skipped:  # a case this run could not examine is not a case that passed
            ctx.could_not_judge(f"{len(skipped)} case(s)/output(s) not examined: " + "; ".join(skipped[:3]))
        if not any(f.severity == "fail" for f in findings):
            what = f"{examined} output(s) in {len(cases)} case(s)" if examined else "no output"
            msg = (f"every element written: {what} checked with poisoned write-only buffers, in a fresh "
                   f"process and after the reference ran" if examined else
                   "no poisoned output to examine")
            if not_poisoned:
                msg += f"; not poisoned (not allocated with torch.empty* during the call, or bool/complex): {', '.join(not_poisoned[:4])}"
            findings.append(self.finding(ctx, "info", msg, ev))
        return findings

    def _unwritten(self, ctx: CheckContext, case: dict[str, Any], seed: int, j: int, r: Any,
                   runs: dict[str, CallOutcome], masks: dict[str, np.ndarray], buf: GuardedBuffer) -> Finding | None:
        ref = r.values
        if sentinels.is_float_nan_poison(r.dtype):
            ambiguous = np.isnan(ref)
        else:
            ambiguous = np.zeros(ref.shape, dtype=bool)
            for s in masks:
                ambiguous |= ref == sentinels.poison_value(r.dtype, s)
        hit = {s: m & ~ambiguous for s, m in masks.items()}
        union = np.zeros(ref.shape, dtype=bool)
        for m in hit.values():
            union |= m
        n = int(union.sum())
        if n == 0:
            return None
        total = int(ref.size)
        counts = {s: int(m.sum()) for s, m in hit.items()}
        both = len(hit) == 2 and all(counts.values())
        if both:
            where = "they still hold the poison in a fresh process and after the reference ran"
        elif len(hit) == 1:
            s0 = next(iter(hit))
            where = f"they still hold the poison ({sentinels.SCENARIOS[s0]}; the other scenario failed)"
        else:
            only = next(s for s, c in counts.items() if c)
            where = f"only {sentinels.SCENARIOS[only]}: the write coverage depends on what ran before"
        rv = ref[union]
        zero = int((rv == 0).sum())
        ref_note = ("the reference is 0 at all of them (zeroed memory would hide this)" if zero == n
                    else f"the reference there ranges {float(rv.min()):.4g}..{float(rv.max()):.4g}")
        first = ", ".join(str(ix) for ix in indices(union, 3))
        acc_note = (" (or only accumulated into: a NaN's payload survives arithmetic)"
                    if sentinels.is_float_nan_poison(r.dtype) else "")
        summary = (f"case {case_label(case)} (seed {seed}) output {j}: {n} of {total} elements "
                   f"({100.0 * n / total:.3g}%) never written{acc_note}, {where}; first at {first}; {ref_note}"
                   f" ({where_text(union) or 'the only element'}); {buffer_text(buf, j)}")
        ev: dict[str, Any] = {
            "case": case, "seed": seed, "output": j, "unwritten": n, "elements": total,
            "fraction": n / total, "indices": indices(union), "region": region(union),
            "region_text": region_text(region(union)),
            "scenarios": {SCENARIO_KEYS[s]: {"unwritten": counts.get(s, 0), "what": sentinels.SCENARIOS[s],
                                             "poison_bits": hex(sentinels.poison_bits(r.dtype, s) or 0)}
                          for s in masks},
            "reference_at_unwritten": {"zero": zero, "min": float(rv.min()), "max": float(rv.max())},
            "buffer": msgspec.to_builtins(buf),
        }
        src = source(buf.site)
        if src:
            ev["source"] = src
        return self.finding(ctx, "fail", summary, ev, case=case, seed=seed)

    def _reads_uninitialised(self, ctx: CheckContext, case: dict[str, Any], seed: int, j: int,
                             ref: CallOutcome, runs: dict[str, CallOutcome], plain: CallOutcome,
                             buf: GuardedBuffer) -> Finding | None:
        """A fail when output ``j`` is within tolerance in a plain run but not with poisoned
        allocations (no poison left in it: it read poisoned memory and computed with it)."""
        if not plain.ok:
            return None
        plain_c = ctx.compare(ref, plain, case)
        if j >= len(plain_c) or not plain_c[j].ok:
            return None  # wrong in a plain run too: correctness reports it
        for s, o in runs.items():
            comps = ctx.compare(ref, o, case)
            c = comps[j] if j < len(comps) else None
            if c is None or c.ok:
                continue
            w = c.worst or {}
            summary = (f"case {case_label(case)} (seed {seed}) output {j}: with its fresh allocations poisoned "
                       f"({sentinels.SCENARIOS[s]}) {c.reason}, worst at {w.get('index')}: expected "
                       f"{w.get('expected')}, got {w.get('got')}; a plain run is within tolerance, so the "
                       f"result depends on memory the candidate allocated but never initialised "
                       f"(e.g. an accumulator from torch.empty)")
            ev: dict[str, Any] = {"case": case, "seed": seed, "output": j, "scenario": SCENARIO_KEYS[s],
                                  **c.evidence(), "buffer": msgspec.to_builtins(buf)}
            src = source(buf.site)
            if src:
                ev["source"] = src
            return self.finding(ctx, "fail", summary, ev, case=case, seed=seed)
        return None
