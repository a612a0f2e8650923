"""``pallas-kernel``: a Pallas candidate's kernels, read from the jaxpr and run strictly."""

from __future__ import annotations

from typing import Any

import msgspec

from workstation.checks.support.ragged import ragged_case, shape_variants
from workstation.checks.support.replay import STRICT_OOB
from workstation.checks.support.suspicion import suspect
from workstation.checks.support.trials import cheapest_per_dtype
from workstation.engine.check import Check, Finding, NotJudged, register
from workstation.engine.context import CallOutcome, CheckContext, case_label
from workstation.protocol.extras import extra_as
from workstation.protocol.extras.backends import PallasReadExtra, PallasReading, TaskLine
from workstation.protocol.extras.calls import CallExtra
from workstation.protocol.extras.triton import given
from workstation.protocol.steps import PallasCalls, PallasReadStep, PallasStrict, Sign

HALF = ("float16", "bfloat16")
#: declared cases run under the strict interpreter (the cheapest per dtype, at most this many).
STRICT_CASES = 2
#: the strict interpreter's own detector messages (shared with the replay, which leaves any
#: other strict failure out as kws's limit).
_OOB = STRICT_OOB


#: inputs driven non-positive one at a time by the gate runs (besides all of them at once).
GATE_INPUTS = 4


def _one_kernel(read: CallOutcome, read_cases: list[dict[str, Any]], case: dict[str, Any]) -> PallasReading | None:
    """The one readable `pallas_call` the reading saw on ``case`` (None for none, several, or
    an unreadable one)."""
    if read.step is None:
        return None
    kernels = extra_as(read.step.extra, PallasReadExtra).kernels
    ks = [k for k in kernels if isinstance(k.error, msgspec.UnsetType) and read_cases[k.case] == case]
    return ks[0] if len(ks) == 1 else None


def _holes(k: PallasReading, r: CallOutcome, c: CallOutcome) -> list[tuple[int, int, int, list[int], list[list[int]],
                                                                          list[Any]]]:
    """(output, elements left NaN where the reference is finite, size, shape, bounding box,
    its writes) of each output of kernel ``k`` that the candidate's run ``c`` left partly
    unwritten while every write of that output lies under a `cond`."""
    import numpy as np

    out = []
    for j, (e, g) in enumerate(zip(r.outputs, c.outputs, strict=False)):
        try:
            ev, gv = np.asarray(e.values, dtype=np.float64), np.asarray(g.values, dtype=np.float64)
        except (TypeError, ValueError):
            continue
        if ev.shape != gv.shape:
            continue
        hole = np.isnan(gv) & ~np.isnan(ev)
        n = int(hole.sum())
        writes = [w for w in given(k.writes, []) if w.target == f"output {j}"]
        if not n or not writes or not all(w.conds for w in writes):
            continue
        idx = np.argwhere(hole)
        box = [[int(idx[:, d].min()), int(idx[:, d].max()) + 1] for d in range(idx.shape[1])]
        out.append((j, n, int(hole.size), list(gv.shape), box, writes))
    return out


def _src(line: TaskLine | None) -> str:
    return f"{line.file}:{line.line}" if line else "(no task line)"


def _ev(x: Any) -> Any:
    """A reading's part as the builtins evidence holds (the keys the harness sent)."""
    return msgspec.to_builtins(x)


@register
class PallasKernel(Check):
    """A Pallas candidate's kernels, read statically from the jaxpr and run under Pallas's
    strict interpreter.

    Scheduled for:
        `backend = "pallas"`.

    Catches:
        a grid that leaves output elements
        unwritten (`M // block` instead of `pl.cdiv(M, block)`; swapped divisors such as
        `(pl.cdiv(C, bc), pl.cdiv(R, br))` that coincide on a square case), stores under a
        `pl.when` that leave blocks unwritten (the condition named), half-precision accumulators, a
        "Pallas" candidate that makes no `pallas_call`, in-kernel out-of-bounds reads, reads of
        uninitialised scratch or output memory, races between grid steps.

    How:
        in the job child kws wraps `pallas_call` (`workstation/harness/pallas.py`) and runs
        every kernel in interpret mode on the CPU. The `pallas_read` step runs the candidate on the
        cheapest declared case per dtype and on derived shape variants of the first (every integer
        size moved to a legal size no power-of-two block divides; each size moved alone, one axis
        ragged at a time; and one case whose sizes all differ, the k-th parameter at k+1 times its
        declared value, `support/ragged.shape_variants`), so that a grid or index map that uses one
        size where another belongs no longer coincides as on a square case, and reads each distinct
        `pallas_call` with
        `jax.make_jaxpr`: the grid, each block mapping's block shape and array, the index map
        evaluated at every grid point (the output elements no step writes; the input blocks that
        reach past their array), scratch buffers, `dot_general` operand/`preferred_element_type`
        dtypes, read-modify-write accumulations into outputs, scratch and loop carries, and every
        store to an output with the `cond`s (`pl.when`, `lax.cond`) it lies under. Then the
        cheapest declared case of up to two dtypes runs under Pallas's TPU interpret mode with
        `InterpretParams(out_of_bounds_reads="raise", uninitialized_memory="nan",
        detect_races=True, num_cores_or_threads=2)`, grid dimensions `parallel` unless the kernel
        states TPU dimension semantics, compared with the reference. Last, on the strict cases and
        the all-ragged variant, the plain run's outputs are compared element by element with the
        reference: elements still NaN (kws starts Pallas outputs as NaN) where the reference is
        finite, in an output the kernel stores only under a `cond`, name that condition's line. A
        kernel with such a conditional store is also run on inputs that make every lane of a
        data-dependent gate false (the `sign` transform: every floating input non-positive, every
        one zero, and each input alone non-positive, up to 4; candidate and reference on the
        cheapest case): `pl.when(jnp.max(x) > 0)` around the only store leaves the block unwritten
        when the gate is all non-positive, which the task's inputs never make.

    Findings:
        | finding | severity |
        |---|---|
        | output elements no grid step writes (which, how far the blocks reach; the first shape variant that shows it) | `fail` |
        | output elements left unwritten (NaN) where the kernel stores that output only under a `pl.when`/`cond` (its line, the store's line), on a declared or ragged case or on inputs that make a gate false everywhere (which inputs) | `fail` |
        | no `pallas_call` on any case | `fail` |
        | the strict pass raises the interpreter's out-of-bounds error (a read, write or block index past a buffer) where the plain run returns | `fail` |
        | the strict pass mismatches the reference where the plain run matches (uninitialised memory) | `fail` |
        | a float16/bfloat16 accumulator; a half `dot_general` result that is accumulated (precision lower than served) | `warn`, not judged |
        | a race between simulated cores (the result depends on the order grid steps run in) | `warn`, not judged |
        | padding reads of input blocks; the readings; a clean strict pass | `info` |

    Example:
        (`matmul-pallas-grid`): `_matmul_kernel on case M=65 N=65 K=65 float32 (ragged
        variant): the grid [2, 2] with output block [32, 32] never writes 129 of 4225 elements of
        output 0 [65, 65] (its blocks reach [0, 64) x [0, 64) only)`.

    Source:
        the Pallas documentation (grids and BlockSpecs: blocks
        past the array edge are padded, the grid must cover the output; "parallel" vs
        "arbitrary" dimension semantics; `preferred_element_type` for accumulation), and
        Pallas's TPU interpret mode (`pltpu.InterpretParams`) built to catch out-of-bounds
        reads, uninitialised memory and races.

    Limits:
        the jaxpr is read on the cases run; dynamic grids, grids over 65536 points and
        block kinds other than blocked/squeezed are reported as not read; the strict pass costs about 0.4-1.2 s per call. JAX's interpreter is not the GPU's or
        TPU's compiler: Mosaic/Triton lowering limits (block shapes a TPU cannot tile,
        shared-memory limits) show only natively. The shape variants are a handful of derived cases,
        not the whole `[params]` space (each costs one interpreted run); a conditional write is named
        only where its NaN shows on a run (the strict cases and the all-ragged variant) and the call
        has one `pallas_call`. Not judged without JAX (`pip install 'kws[pallas]'`).

    Not judged when:
        JAX is not installed for kws: `NotJudged` with the install hint (`pip install 'kws[pallas]'`).
        A step stopped by a limit that says nothing about the code, a library a task file imports
        missing, `make_inputs` or the reference broken on a declared case: `NotJudged`. The jaxpr
        reading step did not run: not judged. A kernel's jaxpr could not be read: `warn`, not
        judged. A half-precision accumulator or a race (tagged `precision` / `state`): `warn`, not
        judged (one rule for suspicion). The
        candidate raised on a read case: `info` (correctness and edge-shapes report it) and not
        judged for that case's grid cover. The strict pass failing where the plain run returns is a
        `fail` only when the interpreter's out-of-bounds detector raised; any other error there
        (the TPU interpreter cannot run masked `plgpu.load`s, advanced indexing or other GPU-only
        ops: JAX's own `pallas.ops.gpu` kernels) leaves that case not judged, naming the error.
        GPU compiler params are set aside for the strict pass (the TPU interpreter asserts on
        them). Where both fail, or the reference or the plain run failed, the case is not judged
        (never listed as a clean strict pass). Race detection that the installed
        JAX does not expose reads as no race.

    Forgeable:
        Measured in the job process: source, jaxpr, compiler output and attached files read by kws.
        Still forgeable from inside: nothing at run time (static); the sources may of course lie in comments.
    """

    id = "pallas-kernel"
    order = 30
    title = "Pallas kernels: grid cover, accumulators, strict interpretation"

    @classmethod
    def applies(cls, task: Any) -> str:
        return "" if task.backend == "pallas" else f"only for Pallas candidates; this one is {task.backend}"

    def run(self, ctx: CheckContext) -> list[Finding]:
        why = ctx.cannot_run("candidate")
        if why:
            raise NotJudged(why if "kws[pallas]" in why or "jax" not in why.lower() else
                            f"{why}; pip install 'kws[pallas]'")
        seed = ctx.seeds[0]
        base = cheapest_per_dtype(ctx)
        read_cases = list(base)
        rag = ragged_case(base[0], ctx.task.params)
        variants: list[dict[str, Any]] = []
        if not ctx.case_filter:
            variants = [rag] if rag is not None else []
            variants += [v for v in shape_variants(base[0], ctx.task.params) if v not in variants and v not in base]
            read_cases += variants
        read = ctx.calls([PallasReadStep(cases=read_cases, seed=seed)], memo=True)[0]
        strict_cases = base[:STRICT_CASES]
        pairs = [(c, seed) for c in strict_cases]
        strict = ctx.calls([ctx.call_step("candidate", c, seed, monitors=[PallasStrict(), PallasCalls()])
                            for c in strict_cases], memo=True)
        refs = ctx.reference(pairs)
        plain = ctx.candidate(pairs)
        findings: list[Finding] = []
        findings += self._reading(ctx, read, read_cases, variants)
        findings += self._strict(ctx, strict_cases, strict, refs, plain)
        if read.ok:
            findings += self._cond_writes(ctx, read, read_cases, strict_cases + ([rag] if rag in variants else []))
            if not any(f.severity == "fail" and "kernel writes output" in f.summary for f in findings):
                findings += self._gates(ctx, read, read_cases, base[0])
        return findings

    # -- conditional writes ----------------------------------------------------------------

    def _cond_writes(self, ctx: CheckContext, read: CallOutcome, read_cases: list[dict[str, Any]],
                     cases: list[dict[str, Any]]) -> list[Finding]:
        """Outputs left NaN (never written: kws starts Pallas outputs as NaN) on a run where the
        kernel writes that output only under a `cond` (`pl.when`): the condition named."""
        seed = ctx.seeds[0]
        pairs = [(c, seed) for c in cases]
        cands, refs = ctx.candidate(pairs), ctx.reference(pairs)
        out: list[Finding] = []
        for case, c, r in zip(cases, cands, refs, strict=True):
            k = _one_kernel(read, read_cases, case)
            if k is None or not (c.ok and r.ok):
                continue
            for j, n, size, shape, box, writes in _holes(k, r, c):
                cond = writes[0].conds[-1]
                out.append(self.finding(
                    ctx, "fail",
                    f"{k.name} on case {case_label(case)}: {n} of {size} elements of output {j} "
                    f"{shape} are never written (they keep the NaN kws starts Pallas outputs with; reference "
                    f"finite there; within {' x '.join(f'[{a}, {b})' for a, b in box)}), and the kernel writes output "
                    f"{j} only under the condition at {_src(cond)} (pl.when / lax.cond; store at "
                    f"{_src(writes[0].line)}): the grid steps where it is false leave their block unwritten",
                    {"kernel": k.name, "case": case, "writes": _ev(writes), "unwritten": n, "box": box,
                     "source": _ev(cond)}, case=case, seed=seed))
        return out

    def _gates(self, ctx: CheckContext, read: CallOutcome, read_cases: list[dict[str, Any]],
               case: dict[str, Any]) -> list[Finding]:
        """A kernel that writes an output only under a `cond`, run on inputs that make every
        lane of a data-dependent gate false (every floating input non-positive, or zero, or
        one input at a time non-positive): an output block left NaN where the reference is
        finite is a block the gate skips."""
        k = _one_kernel(read, read_cases, case)
        if k is None or not any(w.conds for w in given(k.writes, [])):
            return []
        seed = ctx.seeds[0]
        ref = ctx.reference([(case, seed)], send_inputs=True)[0]
        if not ref.ok or ref.step is None:
            return []
        floats = [d.index for d in ref.payload(CallExtra).inputs if d.kind == "tensor"
                  and d.dtype.startswith(("float", "bfloat")) and d.index not in ctx.task.out_args]
        if not floats:
            return []
        drives: list[tuple[Sign, str]] = [(Sign(mode="nonpositive", args=floats, seed=seed),
                                           "every floating input non-positive"),
                                          (Sign(mode="zero", args=floats, seed=seed), "every floating input zero")]
        if len(floats) > 1:
            drives += [(Sign(mode="nonpositive", args=[i], seed=seed), f"input {i} non-positive")
                       for i in floats[:GATE_INPUTS]]
        cands = ctx.calls([ctx.call_step("candidate", case, seed, transforms=[t]) for t, _ in drives], memo=True)
        refs = ctx.calls([ctx.call_step("reference", case, seed, transforms=[t]) for t, _ in drives], memo=True)
        out: list[Finding] = []
        seen: set[int] = set()
        for (_t, what), c, r in zip(drives, cands, refs, strict=True):
            if not (c.ok and r.ok):
                continue
            for j, n, size, shape, box, writes in _holes(k, r, c):
                if j in seen:
                    continue
                seen.add(j)
                cond = writes[0].conds[-1]
                out.append(self.finding(
                    ctx, "fail",
                    f"{k.name} on case {case_label(case)} with {what} (every lane of a data-dependent gate false): "
                    f"{n} of {size} elements of output {j} {shape} are never written (they keep the NaN kws starts "
                    f"Pallas outputs with; reference finite there; within "
                    f"{' x '.join(f'[{a}, {b})' for a, b in box)}), and the kernel writes output {j} only under the "
                    f"condition at {_src(cond)} (pl.when / lax.cond; store at {_src(writes[0].line)}): a block whose "
                    "gate is false everywhere is left unwritten (stale memory on a device)",
                    {"kernel": k.name, "case": case, "inputs": what, "writes": _ev(writes), "unwritten": n, "box": box,
                     "source": _ev(cond)}, case=case, seed=seed))
        return out

    # -- the jaxpr reading ---------------------------------------------------------------

    def _reading(self, ctx: CheckContext, read: CallOutcome, cases: list[dict[str, Any]],
                 variants: list[dict[str, Any]]) -> list[Finding]:
        if not read.ok or read.step is None:
            ctx.could_not_judge(f"the jaxpr reading did not run: {read.failure_text()}: grid cover and "
                                 "accumulators not read")
            return []
        ex = extra_as(read.step.extra, PallasReadExtra)
        kernels = ex.kernels
        errs = ex.case_errors
        calls = ex.calls
        out: list[Finding] = []
        seen_cover: dict[tuple[str, int], list[str]] = {}
        ran = [i for i in range(len(cases)) if str(i) not in errs]
        if ran and all(calls[i] == 0 for i in ran if i < len(calls)):
            out.append(self.finding(
                ctx, "fail",
                f"the candidate (backend pallas) made no pallas_call on {len(ran)} case(s) "
                f"({', '.join(case_label(cases[i]) for i in ran)}): its output comes from JAX/XLA or torch ops, "
                "not from a Pallas kernel", {"cases": [cases[i] for i in ran], "calls": calls}))
        for k in kernels:
            case = cases[k.case]
            label = f"{k.name} on case {case_label(case)}" + (" (a derived shape variant)"
                                                              if case in variants else "")
            if isinstance(k.error, str):
                ctx.could_not_judge(f"{label}: the jaxpr could not be read ({k.error[:160]}): its grid cover and "
                                    "accumulators were not read")
                out.append(self.finding(ctx, "warn", f"{label}: the jaxpr could not be read: {k.error[:300]}",
                                        {"kernel": _ev(k), "case": case}))
                continue
            out += self._cover(ctx, k, case, label, seen_cover)
            out += self._precision(ctx, k, case, label)
        if errs:
            ctx.could_not_judge(f"the candidate raised on {len(errs)} of {len(cases)} read case(s): their grid cover "
                                 "and accumulators were not read")
            first = next(iter(errs.values()))
            out.append(self.finding(ctx, "info", f"the candidate raised on {len(errs)} read case(s) "
                                    f"(correctness and edge-shapes report it): {first.type}: "
                                    f"{first.message[:200]}",
                                    {"case_errors": {cases[int(i)]["dtype"] + " " + case_label(cases[int(i)]): _ev(e)
                                                     for i, e in errs.items()}}))
        summary = "; ".join(
            f"{k.name} grid {given(k.grid, None)} blocks in {[b.block_shape for b in given(k.inputs, [])]} "
            f"out {[b.block_shape for b in given(k.outputs, [])]}"
            + (f" scratch {[(s.shape, s.dtype) for s in given(k.scratch, [])]}" if given(k.scratch, []) else "")
            + (f" dots {[(d.lhs, d.preferred_element_type) for d in given(k.dots, [])]}" if given(k.dots, []) else "")
            for k in kernels if isinstance(k.error, msgspec.UnsetType))
        out.append(self.finding(ctx, "info", f"read {len(kernels)} pallas_call(s) on {len(cases)} case(s): "
                                f"{summary or 'none'}", {"kernels": _ev(kernels), "cases": cases, "calls": calls}))
        return out

    def _cover(self, ctx: CheckContext, k: PallasReading, case: dict[str, Any], label: str,
               seen: dict[tuple[str, int], list[str]]) -> list[Finding]:
        out = []
        for j, o in enumerate(given(k.outputs, [])):
            cov = given(o.cover, None)
            if cov is None or not cov.uncovered:
                continue
            key = (str(k.name), j)
            if key in seen:  # one finding per kernel output: the first case that shows it
                seen[key].append(case_label(case))
                continue
            seen[key] = []
            reach = cov.reach
            shape = o.array_shape
            where = " x ".join(f"[0, {r})" for r in reach)
            out.append(self.finding(
                ctx, "fail",
                f"{label}: the grid {given(k.grid, None)} with output block {o.block_shape} never writes "
                f"{cov.uncovered} of {cov.elements} elements of output {j} {shape} (its blocks reach "
                f"{where} only): the ragged tail is left unwritten (NaN under the interpreter, stale memory on a "
                f"GPU); a grid of pl.cdiv(size, block) covers it", {"kernel": k.name, "case": case, "grid":
                                                                     _ev(given(k.grid, None)), "output": _ev(o),
                                                                     "source": _ev(k.site)}, case=case))
        pads = [(j, b) for j, b in enumerate(given(k.inputs, [])) if any(given(b.padding, []))]
        if pads:
            text = "; ".join(f"input {j} block {b.block_shape} over {b.array_shape} reaches {given(b.padding, [])} "
                             f"past the end" for j, b in pads)
            out.append(self.finding(
                ctx, "info", f"{label}: {text} (padding reads: NaN under the interpreter, undefined on a device; "
                "harmless where they only feed output elements that are dropped, wrong if a reduction takes them in)",
                {"kernel": k.name, "case": case, "inputs": [_ev(b) for _, b in pads]}, case=case))
        return out

    def _precision(self, ctx: CheckContext, k: PallasReading, case: dict[str, Any], label: str) -> list[Finding]:
        out = []
        accs = [a for a in given(k.accumulations, []) if a.dtype in HALF]
        for a in accs:
            text = (f"{label}: a {a.dtype} accumulator: {a.target} is read, added to and written back "
                    f"({a.op}) at {_src(a.line)}: every partial sum is rounded to {a.dtype} (8 or 11 "
                    "significant bits); accumulate in float32 (an f32 scratch buffer or carry) and round once")
            out.append(self.finding(
                ctx, "warn", text, {"kernel": k.name, "case": case, "accumulation": _ev(a),
                                    **({"source": _ev(a.line)} if a.line else {}), **suspect(ctx, "precision", text)},
                case=case))
        half_dots = [d for d in given(k.dots, []) if d.lhs in HALF and d.out in HALF]
        for d in half_dots:
            sev = "warn" if accs or any(a for a in given(k.accumulations, [])) else "info"
            text = (f"{label}: jnp.dot/dot_general of {d.lhs} x {d.rhs} at {_src(d.line)} returns "
                    f"{d.out} (preferred_element_type {d.preferred_element_type}): each tile product is rounded "
                    f"to {d.out} before it is used" + ("" if sev == "info" else " and then accumulated")
                    + "; pass preferred_element_type=jnp.float32")
            tag = suspect(ctx, "precision", text) if sev == "warn" else {}
            out.append(self.finding(
                ctx, sev, text,
                {"kernel": k.name, "case": case, "dot": _ev(d), **({"source": _ev(d.line)} if d.line else {}), **tag},
                case=case))
        return out

    # -- strict interpretation ---------------------------------------------------------

    def _strict(self, ctx: CheckContext, cases: list[dict[str, Any]], strict: list[CallOutcome],
                refs: list[CallOutcome], plain: list[CallOutcome]) -> list[Finding]:
        out: list[Finding] = []
        seed = ctx.seeds[0]
        clean = []
        for case, s, r, p in zip(cases, strict, refs, plain, strict=True):
            label = f"case {case_label(case)} (seed {seed})"
            # None when the strict call raised (its monitors report nothing then)
            mon = s.payload(CallExtra).monitors.pallas_strict if s.step is not None else None
            races = [n for n, k in (mon.kernels if mon is not None else {}).items() if k.races]
            ev = {"case": case, "seed": seed, "strict": msgspec.to_builtins(mon.strict) if mon is not None else None,
                  "kernels": msgspec.to_builtins(mon.kernels) if mon is not None else None}
            if not s.ok:
                if not p.ok:
                    ctx.could_not_judge(f"{label}: the plain run failed too ({p.failure_text()}): the strict pass "
                                         "was not compared")
                if p.ok:
                    msg = (s.error.message if s.error is not None else "") if s.step else s.death
                    if not _OOB.search(msg or ""):
                        # not the strict interpreter's out-of-bounds detector: the TPU interpreter
                        # cannot run this kernel (masked loads, advanced indexing, GPU-only ops)
                        ctx.could_not_judge(f"{label}: the strict interpreter could not run it ({s.failure_text()}; "
                                             "the plain interpreter runs it): out-of-bounds reads and uninitialised "
                                             "memory not examined")
                        continue
                    kind = "an out-of-bounds access inside the kernel"
                    out.append(self.finding(
                        ctx, "fail", f"{label}: under the strict interpreter (out-of-bounds reads raise) the candidate "
                        f"{s.failure_text()}: {kind} that plain interpret mode hides (it clamps dynamic slices)",
                        {**ev, **s.failure_evidence()}, case=case, seed=seed))
                continue
            if races:
                text = (f"{label}: race detected in {', '.join(races)}: two grid steps on different simulated "
                        "cores write the same block with no ordering (every grid step is an independent program on a GPU; "
                        "on a TPU only an 'arbitrary' dimension runs in order)")
                # the result depends on the order the grid steps run in: not judged unless a run shows it
                out.append(self.finding(ctx, "warn", text, {**ev, **suspect(ctx, "state", text)}, case=case, seed=seed))
            if not (r.ok and p.ok):
                ctx.could_not_judge(f"{label}: the {'reference' if not r.ok else 'plain candidate run'} failed "
                                     "here: the strict pass was not compared with it")
                continue
            if r.ok and p.ok:
                strict_ok = all(c.ok for c in ctx.compare(r, s, case))
                plain_ok = all(c.ok for c in ctx.compare(r, p, case))
                if plain_ok and not strict_ok:
                    bad = next(c for c in ctx.compare(r, s, case) if not c.ok)
                    out.append(self.finding(
                        ctx, "fail", f"{label}: with uninitialised memory NaN (strict interpreter) the candidate no longer "
                        f"matches the reference ({bad.reason}): the kernel reads scratch or output memory it never "
                        "wrote", {**ev, "comparison": bad.evidence()}, case=case, seed=seed))
                    continue
            if not races:
                clean.append(case)
        if clean:
            out.append(self.finding(
                ctx, "info", f"strict interpretation (out-of-bounds reads raise, uninitialised memory NaN, race "
                f"detection on 2 cores) found nothing on {', '.join(case_label(c) for c in clean)}",
                {"cases": clean}))
        return out
