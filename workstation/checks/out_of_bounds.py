"""``out-of-bounds``: writes outside the extent of the candidate's buffers."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import msgspec
import numpy as np

from workstation.checks.support.guarded import buffer_text, fmt_values, guarded_steps, source
from workstation.engine.check import Check, Finding, register
from workstation.engine.context import CallOutcome, CheckContext, case_label
from workstation.engine.report import json_scalar
from workstation.protocol import sentinels
from workstation.protocol.extras.guards import GuardedBuffer, GuardedCallExtra, SanitizerCallExtra
from workstation.protocol.steps import SanitizerCallStep

#: how many sanitizer report lines go into the evidence.
SANITIZER_LINES = 40
#: wall-clock limit of the memcheck run (memcheck slows kernels 10-100x, plus the JIT).
SANITIZER_TIMEOUT_S = 240


def smallest_case(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """The declared case with the smallest product of its integer parameters."""
    def size(c: dict[str, Any]) -> int:
        n = 1
        for v in c.values():
            if isinstance(v, int) and not isinstance(v, bool):
                n *= max(v, 1)
        return n
    return min(cases, key=size)


def band_changes(out: CallOutcome, k: int, buf: GuardedBuffer) -> dict[str, Any] | None:
    """Changed guard elements of buffer ``k`` of a guarded run: ``{"before": {...},
    "after": {...}}`` with, per side, the changed elements' offsets (1-based distance
    from the buffer's first / last element: -1 is the element just before the start, +1
    the one just past the end) and the values written; None when untouched."""
    if out.step is None or f"gb{k}" not in out.step.arrays:
        return None
    dtype = buf.dtype
    guard = sentinels.guard_element(dtype)
    res: dict[str, Any] = {}
    for side, key in (("before", f"gb{k}"), ("after", f"ga{k}")):
        el = sentinels.bytes_to_elements(out.step.arrays[key], dtype)
        changed = el != guard if el.ndim == 1 else (el != sentinels.GUARD_BYTE).any(axis=1)
        idx = np.flatnonzero(changed)
        if not idx.size:
            continue
        n = len(el)
        offsets = (idx + 1) if side == "after" else -(n - idx)
        vals = sentinels.decode(el[idx], dtype) if el.ndim == 1 else np.zeros(idx.size)
        res[side] = {"changed": int(idx.size), "guard_elements": n, "offsets": offsets[:64].tolist(),
                     "min_offset": int(offsets.min()), "max_offset": int(offsets.max()),
                     "values": [json_scalar(v) for v in vals[:16]]}
    return res or None


def _span(side: dict[str, Any], where: str) -> str:
    lo, hi = side["min_offset"], side["max_offset"]
    if where == "after":
        rng = f"+{lo}" if lo == hi else f"+{lo}..+{hi}"
        return f"{side['changed']} element(s) past the end (offsets {rng} after the last element)"
    rng = f"{hi}" if lo == hi else f"{lo}..{hi}"
    return f"{side['changed']} element(s) before the start (offsets {rng} from the first element)"


@register
class OutOfBounds(Check):
    """Writes outside the extent of the output (and every other buffer the candidate gets).

    Catches:
        writes outside the extent of the output (and of any other buffer the
        candidate is handed or allocates): a store mask missing on the ragged last tile, a tail
        rounded up to whole vectors, an off-by-one in a row stride.

    How:
        the *guarded run* (shared with `unwritten-output`, scenario A below). In a child
        where nothing else ran first, every tensor input (`out_args` and `inout_args` included)
        is copied into the middle of a larger buffer, and every `torch.empty` / `empty_like` /
        `empty_strided` / `new_empty` allocation made while the candidate is imported and called
        is replaced, by a `TorchDispatchMode`, with a tensor of the same shape, strides, dtype
        and device in the middle of a larger buffer. The bands before and after hold the byte
        `0xA5`; each band is max(4096, the buffer's own size) elements, at most 2^18, rounded up
        to 256 bytes so the guarded tensor keeps the allocator's alignment (Triton specialises
        pointer arguments on 16-byte divisibility). The child sends the raw bytes of every band;
        the parent reports each guard element that changed.

    Findings:
        | finding | severity |
        |---|---|
        | guard elements changed: which buffer (output j / out_args input / scratch allocation, with the `torch.empty` line), which side, the offsets (+1 is the element just past the last one, -1 the one just before the first), the values written; one finding per buffer, listing every case where it happened | `fail` |
        | compute-sanitizer memcheck (GPU) reports errors, with its first report line | `fail` |
        | the candidate crashed with guarded, poisoned buffers but returns in a plain run | `warn`, not judged for that call |
        | guard bands untouched (how many buffers, band lengths); the compute-sanitizer part not run, with the reason | `info` |

    Example:
        (`copy-cast-oob`): `case n=4093 float32 (seed 0): wrote 3 element(s) past the
        end (offsets +1..+3 after the last element) of output 0 (float16 [4093], torch.empty at
        candidate.py:28); values written: 0, 0, 0; also in 2 more of 5 cases (n=3070 ...: 2, n=1023 ...: 1)`.

    Source:
        the classic missing or rounded-up store mask on the ragged last tile (Triton
        tutorials' `mask=offs < n`; CUDA vector-store ports that round the tail up to whole
        vectors), which on a GPU writes into the neighbouring allocation without faulting
        (the caching allocator packs blocks) and on the CPU may corrupt the heap.

    Limits:
        a write that skips past the whole band lands in unguarded memory (on the CPU
        it may corrupt the heap: then the guarded run crashes, a `warn`); buffers allocated
        outside the dispatcher (ctypes, `UntypedStorage(n)`, CUDA graph pools) are not guarded;
        reads out of bounds are not seen by the guards. On a GPU the declared case with the fewest
        elements also runs once under `compute-sanitizer --tool memcheck` (in a fresh
        interpreter, 240 s at most) where the binary is installed (`PATH`, `$CUDA_HOME/bin`, `/usr/local/cuda/bin`); on the CPU that part is an
        `info` finding: "compute-sanitizer memcheck not run: no CUDA device ...".

    Not judged when:
        on a GPU, compute-sanitizer's memcheck did not run (tool missing, killed, failed):
        not judged, with the guard-band results reported. On the CPU memcheck is
        structurally impossible (no CUDA device, GPU-only tool): an `info` when the guard
        bands were observed.

    Forgeable:
        Measured in the job process: guard bands and poison in buffers kws allocates, read back by the harness after the call.
        Still forgeable from inside: a candidate that knows kws's sentinel bytes could write them back over what it clobbered before returning.
    """

    id = "out-of-bounds"
    order = 2
    title = "Writes outside buffer extents"

    def run(self, ctx: CheckContext) -> list[Finding]:
        seed, cases = ctx.seeds[0], ctx.cases
        with ThreadPoolExecutor(max_workers=2) as ex:
            san_case = smallest_case(cases)
            san = ex.submit(self._sanitizer, ctx, san_case, seed) if ctx.on_gpu else None
            runs = ctx.calls(guarded_steps(cases, seed, "A"), memo=True)
            plain = ctx.candidate([(c, seed) for c in cases])
            san_res = san.result() if san is not None else None
        findings: list[Finding] = []
        groups: dict[tuple, list[tuple[dict[str, Any], GuardedBuffer, dict[str, Any], int | None]]] = {}
        n_buffers, guard_sizes, crashed = 0, set(), []
        for case, out, p in zip(cases, runs, plain, strict=True):
            if not out.ok:
                if p.ok:
                    crashed.append((case, out))
                continue
            guarded = out.payload(GuardedCallExtra)
            outs_of = {s.buffer: s.output for s in guarded.output_sources if s.buffer is not None}
            for k, buf in enumerate(guarded.buffers):
                if not buf.guarded:
                    continue
                n_buffers += 1
                guard_sizes.add(buf.guard)
                ch = band_changes(out, k, buf)
                if ch is None:
                    continue
                key = (buf.kind, buf.index if buf.kind != "allocation" else
                       (buf.site.line if buf.site is not None else None), outs_of.get(k))
                groups.setdefault(key, []).append((case, buf, ch, outs_of.get(k)))
        for items in groups.values():
            findings.append(self._finding(ctx, seed, items, len(cases)))
        findings += [self._crashed_guarded(ctx, case, seed, out) for case, out in crashed]
        if not groups:
            findings.append(self.finding(
                ctx, "info",
                f"guard bands untouched: {n_buffers} buffer(s) over {len(cases)} case(s) (inputs, out_args and "
                f"fresh allocations), {min(guard_sizes, default=0)}..{max(guard_sizes, default=0)} guard "
                f"elements on each side",
                {"cases": [case_label(c) for c in cases], "seed": seed, "buffers": n_buffers,
                 "guard_elements": sorted(guard_sizes)}))
        findings.append(self._sanitizer_finding(ctx, san_case, seed, san_res))
        return findings


    def _crashed_guarded(self, ctx: CheckContext, case: dict[str, Any], seed: int, out: CallOutcome) -> Finding:
        """A warn for a call that fails only with guarded buffers (a plain run returns): the
        guard bands of that call were not read, so it is not judged."""
        ctx.could_not_judge(f"case {case_label(case)} (seed {seed}): the guarded run {out.failure_text()[:160]} where "
                            "a plain run returns: its guard bands were not read")
        return self.finding(
            ctx, "warn",
            f"case {case_label(case)} (seed {seed}): the candidate {out.failure_text()} with guarded, "
            f"poisoned buffers but returns in a plain run: a write or read outside its buffers may have "
            f"reached unguarded memory",
            {"case": case, "seed": seed, **out.failure_evidence()}, case=case, seed=seed)
    def _finding(self, ctx: CheckContext, seed: int, items: list, n_cases: int) -> Finding:
        case, buf, ch, out_j = items[0]
        parts = [_span(ch[s], s) for s in ("before", "after") if s in ch]
        vals = np.array([v for s in ("before", "after") if s in ch for v in ch[s]["values"]], dtype=object)
        summary = (f"case {case_label(case)} (seed {seed}): wrote {' and '.join(parts)} of "
                   f"{buffer_text(buf, out_j)}; values written: {fmt_values(vals)}")
        if len(items) > 1:
            others = "; ".join(
                f"{case_label(c)}: " + ", ".join(_span(h[s], s).split(" (")[0] for s in ("before", "after") if s in h)
                for c, _, h, _ in items[1:4])
            summary += f"; also in {len(items) - 1} more of {n_cases} cases ({others}{'; ...' if len(items) > 4 else ''})"
        ev: dict[str, Any] = {
            "case": case, "seed": seed, "buffer": msgspec.to_builtins(buf), "output": out_j,
            "per_case": [{"case": c, "before": h.get("before"), "after": h.get("after")} for c, _, h, _ in items],
        }
        src = source(buf.site)
        if src:
            ev["source"] = src
        return self.finding(ctx, "fail", summary, ev, case=case, seed=seed)

    def _sanitizer(self, ctx: CheckContext, case: dict[str, Any], seed: int) -> CallOutcome:
        step = SanitizerCallStep(role="candidate", case=dict(case), seed=int(seed), timeout=SANITIZER_TIMEOUT_S)
        return ctx.run_steps([step], step_timeout=SANITIZER_TIMEOUT_S + 30)[0]

    def _sanitizer_finding(self, ctx: CheckContext, case: dict[str, Any], seed: int,
                           res: CallOutcome | None) -> Finding:
        if res is None:
            how = ("a CUDA candidate's kernels run under kws's CPU emulation of CUDA, which does not detect "
                   "out-of-bounds reads" if ctx.task.backend == "cuda" else
                   f"kernels run in the Triton interpreter on the {ctx.device.label.split(' ')[0]}")
            reason = f"compute-sanitizer memcheck not run: no CUDA device ({how}); guard bands only"
            return self.finding(ctx, "info", reason, {"compute_sanitizer": "skipped", "reason": reason})
        ex = res.payload(SanitizerCallExtra) if res.ok and res.step is not None else None
        if ex is None or not ex.ran:
            reason = (ex.reason if ex is not None else "") or res.failure_text()
            # on a GPU the memcheck part is part of the check: a missing tool or a killed run is not a pass
            ctx.could_not_judge(f"compute-sanitizer memcheck not run on case {case_label(case)}: {reason[:200]}")
            return self.finding(ctx, "info", f"compute-sanitizer memcheck not run: {reason}",
                                {"compute_sanitizer": "skipped", "reason": reason})
        errors = ex.errors
        report = ex.report[:SANITIZER_LINES]
        ev = {"case": case, "seed": seed, "compute_sanitizer": "ran", "errors": errors, "report": report,
              "returncode": ex.returncode, "binary": ex.binary}
        if errors:
            first = next((ln.strip("= ").strip() for ln in report if "Invalid" in ln or "out of bounds" in ln),
                         report[0].strip("= ") if report else "")
            return self.finding(ctx, "fail",
                                f"case {case_label(case)} (seed {seed}): compute-sanitizer memcheck reports "
                                f"{errors} error(s): {first}", ev, case=case, seed=seed)
        if errors is None:
            ctx.could_not_judge(f"compute-sanitizer memcheck on case {case_label(case)} printed no ERROR SUMMARY "
                                f"(exit {ex.returncode})")
            return self.finding(ctx, "warn", "compute-sanitizer memcheck ran but printed no ERROR SUMMARY "
                                f"(exit {ex.returncode})", {**ev, "tail": ex.tail[-2000:]},
                                case=case, seed=seed)
        return self.finding(ctx, "info", f"compute-sanitizer memcheck: 0 errors on case {case_label(case)} "
                            f"(seed {seed})", ev, case=case, seed=seed)
