"""``bounds-proof``: in-bounds and full-coverage proofs of Triton kernels over the legal
shape space."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:
    from workstation.checks.support.boundsmodel import Slot, Verdict

from workstation.checks.out_of_bounds import band_changes, smallest_case
from workstation.checks.support.guarded import guarded_step
from workstation.checks.support.legal import UNLISTED, int_params, smallest, snap
from workstation.checks.support.suspicion import suspect
from workstation.checks.unwritten_output import output_buffer, poison_mask
from workstation.engine.check import Check, Finding, NotJudged, Skip, register
from workstation.engine.context import CheckContext, case_label
from workstation.protocol.extras import extra_as
from workstation.protocol.extras.guards import GuardedCallExtra
from workstation.protocol.extras.triton import BoundsCase, BoundsLaunch, TritonBoundsExtra
from workstation.protocol.steps import TritonBoundsStep

#: the largest product of a sample shape's integer parameters (the launches are recorded by
#: running the candidate under the interpreter).
SAMPLE_ELEMENTS = 1 << 15
#: values tried for each parameter (snapped to legal values), the others at their smallest.
SAMPLE_VALUES = (1, 2, 3, 5, 7, 13, 37, 97, 130, 1000, *((1 << k) + 1 for k in range(3, 16)))
#: shapes varying two parameters at once (to fit products), as values of the first two.
JOINT = ((7, 13), (37, 5), (13, 97))


def sample_cases(base: dict[str, Any], params: list[str], specs: dict[str, Any]) -> list[dict[str, Any]]:
    """Legal shapes at which the launches are recorded: each parameter over
    :data:`SAMPLE_VALUES` (snapped to its legal values) with the others at their smallest
    legal value, plus :data:`JOINT` shapes; at most :data:`SAMPLE_ELEMENTS` as the product
    of the parameters. Non-integer case values (dtype...) from ``base``."""
    spec = {p: specs.get(p, UNLISTED) for p in params}
    low = {p: max(smallest(spec[p]) or 1, 1) for p in params}
    out: list[dict[str, Any]] = []

    def add(vals: dict[str, int]) -> None:
        if any(v is None or v < 1 or not spec[p].allows(v) for p, v in vals.items()):
            return
        n = 1
        for v in vals.values():
            n *= v
        c = dict(base, **vals)
        if n <= SAMPLE_ELEMENTS and c not in out:
            out.append(c)

    add(dict(low))
    for p in params:
        for v in SAMPLE_VALUES:
            add(dict(low, **{p: snap(v, spec[p], "nearest")}))
        if spec[p].max is not None:
            add(dict(low, **{p: spec[p].max}))
    if len(params) >= 2:
        for a, b in JOINT:
            add(dict(low, **{params[0]: snap(a, spec[params[0]]), params[1]: snap(b, spec[params[1]])}))
    return out


#: the modules whose code answers a proof question (their bytes are part of a proof's cache key).
_PROVERS = ("workstation.checks.support.boundsmodel", "workstation.checks.support.ttir_z3")


def proved_kernel(ttir: str, slot: Slot, params: list[str], specs: dict[str, Any],
           region: list[Any] | None) -> tuple[list[Verdict], int, bool]:
    """:func:`~workstation.checks.support.boundsmodel.prove_kernel`'s verdicts and access
    count for one kernel, from kws's content-addressed cache when the same question was
    answered before (:mod:`workstation.engine.kwscache`, namespace ``proofs``: keyed by the
    TTIR text, the fitted slot, the ``[params]`` domain, the constexpr region, the solver
    budget and the kws and Z3 versions; the parent computes and writes every entry), else
    proved now and kept. The third value says whether it came from the cache.

    Raises:
        Unsupported, z3.Z3Exception: as ``prove_kernel`` (never kept).
    """
    import dataclasses

    import z3

    from workstation import __version__
    from workstation.checks.support.boundsmodel import KERNEL_RLIMIT, Verdict, prove_kernel
    from workstation.engine import kwscache

    key = kwscache.key_of("bounds-proof", __version__, kwscache.code_digest(*_PROVERS), z3.get_version_string(),
                          ttir, repr(slot), params,
                          repr(sorted(specs.items())), [r.sexpr() for r in region or []], KERNEL_RLIMIT)
    hit = kwscache.get_json("proofs", key)
    if isinstance(hit, dict) and isinstance(hit.get("verdicts"), list) and isinstance(hit.get("accesses"), int):
        try:
            return [Verdict(**v) for v in hit["verdicts"]], hit["accesses"], True
        except TypeError:  # an entry of another Verdict shape: prove again
            pass
    vs, n = prove_kernel(ttir, slot, params, specs, region)
    if all(v.status != "unknown" for v in vs):  # an answer cut by the solver budget may differ elsewhere
        kwscache.put_json("proofs", key, {"verdicts": [dataclasses.asdict(v) for v in vs], "accesses": n})
    return vs, n, False


def _short(err: str) -> str:
    """An error text's first line and its last non-empty line (a Triton CompilationError
    quotes the kernel source between them)."""
    lines = [ln.strip() for ln in err.splitlines() if ln.strip()]
    if len(lines) <= 2:
        return " ".join(lines)[:300]
    return f"{lines[0][:120]} ... {lines[-1][:200]}"


def _constexprs(rec: BoundsLaunch) -> str:
    return ", ".join(f"{k}={v}" for k, v in rec.constexprs.items()) or "no constexpr"


@register
class BoundsProof(Check):
    """In-bounds and full-coverage proofs of a Triton candidate's loads and stores over every
    shape the task declares legal.

    Catches:
        an out-of-bounds load or store, an output element no program writes, or a
        masked edge tile that is wrong, at a legal shape the declared cases and the sampled
        edge shapes never reach: a tail rounded up to whole vectors, a store mask that
        depends on the data, a block capped below the widest legal row, a reduction loop
        (`range(K // BLOCK_K)`) that never reads the ragged tail tile of its input.

    How:
        1. *Launch model*: the candidate runs under the interpreter at up to ~40 legal shapes
           (each `[params]` value over small primes, powers of two plus one and its maximum, the
           others at their smallest; a few joint shapes; at most 2^15 as the product of the
           parameters) while every Triton launch's grid, integer arguments, tensor arguments
           (sizes, strides, footprint, which are outputs) and constexprs are recorded. Each of
           these integers is fitted as a function of the parameters (`c*m`, `cdiv(m, c)`,
           `cdiv(m, c)*c`, `next_pow2(m)`, `min(next_pow2(m), c)`, `m` a product of up to four
           parameters); each distinct launch is lowered to TTIR for sm_90 without a GPU.
        2. *Encoding*: the TTIR's address arithmetic (`tt.make_range`, `tt.splat`,
           `tt.expand_dims`, `tt.broadcast`, `tt.addptr`, integer `arith`, `arith.cmpi`,
           `arith.select`, `tt.get_program_id`, `scf.for` with constant-step inductions, `scf.if`)
           becomes Z3 terms over the parameters, the program ids (over the fitted grid), the lanes
           and the loop counters (`workstation/checks/support/ttir_z3.py`). Loaded values are
           opaque: a mask that depends on them is an uninterpreted predicate.
        3. *Questions* (Z3, `workstation/checks/support/boundsmodel.py`), with every parameter
           over its legal values (`min`, `max`, `multiple_of`, `choices`): is a masked-in lane
           of any load or store outside `[0, footprint)` of its tensor? Is there an element of an
           output that no program's masked-in store reaches (first proved from writer candidates
           learned at concrete points, quantifier-free; else asked with a universal quantifier
           for a counterexample)? The same question of every input the kernel only loads (an
           element no program reads). Counterexamples are searched in growing boxes (parameters
           up to 16, 256, 4096, then all), so the shape is small.
        4. *Confirmation*: a counterexample shape runs in the guarded run of `out-of-bounds` and
           `unwritten-output` (guard bands, poisoned outputs; `checks/support/guarded.py`); for
           a data-dependent refutation the smallest declared case runs as well. An unread input
           element is confirmed by running candidate and reference at that shape and comparing.

    Findings:
        | finding | severity |
        |---|---|
        | a refuted question whose counterexample run shows it (guard elements written, poisoned output elements left): the shape, the access and source line, the program and lane, what the run saw | `fail` |
        | an input element read by no program, where the candidate's output misses the reference at that shape | `fail` |
        | a refuted question the run did not show (an out-of-bounds read: guard bands see writes only; data that did not trigger a data-dependent mask) | `warn` |
        | an output element no program of the kernel writes, while the guarded run saw that output written all over kws's poison (another writer: a framework op, host code; or a launch model that does not hold) | `warn`, not judged |
        | an input element read by no program while the output still matches the reference (a kernel need not read its whole input); read-coverage questions Z3 left open | `info` |
        | proved: the domain, the number of accesses and outputs proved, solver seconds per kernel | `info` |

    Example:
        `copy-cast-oob`: `store y_ptr at candidate.py:16 writes past the end of y_ptr for n=1
        (offset 1, footprint 1, program 0, lane 1); the guarded run at n=1 shows 7 guard
        element(s) written past the end of output 0`.

    Source:
        triton-viz's compiled-mode symbolic sanitizer (TTIR address arithmetic and masks
        for Z3, "UNSAT = proof for all inputs consistent with scalars and grid"); Z3
        (de Moura and Bjorner, TACAS 2008).

    Limits:
        proofs hold under the fitted launch model: the wrapper's integers are fitted at the
        sampled shapes and assumed to follow the same formula over the whole domain
        (a wrapper that switches behaviour above 2^15 elements is not seen), at the smallest
        declared case's dtype and non-integer values, for the strides the task's `make_inputs`
        gives. Integers are mathematical (i32 wrap-around is not modelled). The bound of a
        pointer is its tensor's own footprint from the data pointer (holes of a strided view
        count as inside). Coverage is asked only of outputs a single launch writes. An autotuned
        kernel whose configurations are benchmarked at some shapes and cached at others changes
        the launch sequence with the shape: not judged.
        Out of scope: Pallas, CUDA, NKI; block pointers, tensor descriptors, atomics,
        data-dependent indices, indirect pointers, loop-carried addresses other than
        constant-step inductions (`p += BLOCK * stride`) -- named, never passed.

    Not judged when:
        the candidate is not Triton (skip); the launches could not be recorded or fitted (the
        launch sequence changes with the shape, an integer fits no template); a kernel's TTIR
        could not be produced; an access uses a construct the encoder does not follow (named);
        Z3 answers unknown or the solver budget runs out (Z3 resource units, deterministic: 4 million
        per query, 20 million per kernel, about 2 s and 10 s on an idle core; 10 s of wall clock
        per query as a backstop); a
        constexpr variant of the domain was not sampled; a counterexample's confirmation run
        failed for a reason other than the candidate. An unwritten-element refutation whose
        guarded run saw the output written all over the poison: a static reading the run did
        not bear out (tagged `work-elsewhere`, listed as a disagreement in the report).

    Forgeable:
        Measured in the job process: the launch records (grid, arguments, tensor facts) come from the launch wrapper while the candidate's wrapper runs; the TTIR from a compile in a child without task state; the proof in the parent.
        Still forgeable from inside: a wrapper that launches differently when it detects kws's recording (its kernels are not run there) or that hides launches from `JITFunction.run`; a kernel that behaves differently from its TTIR is not possible.
    """

    id = "bounds-proof"
    order = 24
    title = "In-bounds and coverage proofs over the legal shape space (Triton, Z3)"

    @classmethod
    def applies(cls, task: Any) -> str:
        """Only Triton candidates have TTIR to prove (the default battery leaves others out)."""
        if task.backend != "triton":
            return f"only for Triton candidates; this one is {task.backend}"
        return ""

    def run(self, ctx: CheckContext) -> list[Finding]:
        try:
            import z3  # noqa: F401  (the optional `prove` extra)
        except ImportError:
            raise NotJudged("z3-solver is not installed (pip install -e '.[prove]')") from None
        return self._run(ctx)

    def _run(self, ctx: CheckContext) -> list[Finding]:
        import z3

        from workstation.checks.support.boundsmodel import ModelError, fit
        from workstation.checks.support.ttir_z3 import Unsupported

        params = int_params(ctx.cases)
        if not params:
            raise NotJudged("the cases have no integer shape parameter to prove over")
        specs = dict(ctx.task.params)
        base = smallest_case(ctx.cases)
        seed = int(ctx.seeds[0])
        cases = sample_cases(base, params, specs)
        out = ctx.calls([TritonBoundsStep(cases=cases, seed=seed)], memo=True)[0]
        if not out.ok or out.step is None:
            raise NotJudged(f"the launches could not be recorded: {out.failure_text()}")
        data = extra_as(out.step.extra, TritonBoundsExtra)
        ok = [(c, r) for c, r in zip(cases, data.cases, strict=True) if r.error is None]
        failed = [(c, r) for c, r in zip(cases, data.cases, strict=True) if r.error is not None]
        if not ok:
            err = failed[0][1].error
            raise NotJudged(f"the candidate raised at every sampled shape (first: {case_label(failed[0][0])}: "
                            f"{(err.message if err is not None else '')[:200]})")
        if not any(r.launches for _, r in ok):
            raise Skip("the candidate launched no Triton kernel")
        try:
            slots = fit([c for c, _ in ok], [r for _, r in ok], params)
        except ModelError as e:
            raise NotJudged(f"launch model: {e}") from None
        records = data.launches
        findings: list[Finding] = []
        timings: list[dict[str, Any]] = []
        verdicts: list[tuple[Verdict, Slot, int]] = []
        n_access = 0
        uncovered: list[str] = []
        for si, slot in enumerate(slots):
            keys = sorted({r.launches[si].key for _, r in ok})
            regions = self._regions(ok, si, keys, records, params, specs)
            if isinstance(regions, str):
                ctx.could_not_judge(f"{slot.qualname}: {regions}")
                continue
            gap = self._uncovered(regions, params, specs)
            if gap:
                uncovered.append(f"{slot.qualname}: {gap}")
            for key in keys:
                rec = records[key]
                if rec.ttir is None:
                    ctx.could_not_judge(f"{slot.qualname} ({_constexprs(rec)}): no TTIR "
                                         f"({_short(rec.ttir_error or 'not lowered')})")
                    continue
                t0 = time.perf_counter()
                try:
                    vs, n, cached = proved_kernel(rec.ttir, slot, params, specs, regions[key])
                except (Unsupported, z3.Z3Exception) as e:
                    ctx.could_not_judge(f"{slot.qualname}: {e}")
                    continue
                n_access += n
                timings.append({"kernel": slot.qualname, "constexprs": msgspec.to_builtins(rec.constexprs), "accesses": n,
                                "seconds": round(time.perf_counter() - t0, 3), "cached": cached,
                                "verdicts": {s: sum(v.status == s for v in vs)
                                             for s in ("proved", "refuted", "unknown", "unsupported")}})
                verdicts += [(v, slot, key) for v in vs]
        for g in uncovered:
            ctx.could_not_judge(f"constexpr variant not sampled, not proved there: {g}")
        refuted = [(v, s, k) for v, s, k in verdicts if v.status == "refuted"]
        read_open = []
        for v, s, _k in verdicts:
            if v.question == "read-coverage" and v.status in ("unknown", "unsupported"):
                # reading every input element is not required of a kernel: an open read
                # question is reported, not a gap in what the check judges
                read_open.append(f"{s.qualname}: {v.access}: {v.detail or v.status}")
            elif v.status == "unsupported":
                ctx.could_not_judge(f"{s.qualname}: unsupported construct: {v.access}{': ' + v.detail if v.detail else ''}")
            elif v.status == "unknown":
                ctx.could_not_judge(f"{s.qualname}: {v.question} of {v.access} (line {v.line}): Z3 gave no answer "
                                     f"({v.detail})")
        seen: set[tuple] = set()
        for v, s, k in refuted:
            sig = (v.question, v.arg, s.qualname)
            if sig in seen:
                continue
            seen.add(sig)
            if v.question == "read-coverage":
                findings.append(self._unread(ctx, v, s, base, seed, records[k].file))
            else:
                findings.append(self._refuted(ctx, v, s, base, seed, records[k].file))
        proved = [v for v, _, _ in verdicts if v.status == "proved"]
        dom = ", ".join(self._spec_text(p, specs) for p in params)
        ev = {"domain": {p: self._spec_text(p, specs) for p in params}, "accesses": n_access,
              "proved": [{"question": v.question, "access": v.access, "line": v.line} for v in proved],
              "kernels": timings, "read_coverage_open": read_open[:8], "sampled_shapes": len(ok), "failed_shapes": [case_label(c) for c, _ in failed][:8],
              "launch_model": [{"kernel": s.qualname, "grid": [g.text() for g in s.grid],
                                "ints": {n: f.text() for n, f in s.ints.items()},
                                "footprints": {n: t["footprint"].text() for n, t in s.tensors.items()}}
                               for s in slots]}
        if proved:
            n_b = sum(v.question == "in-bounds" for v in proved)
            n_c = sum(v.question == "coverage" for v in proved)
            n_cq = sum(v.question == "coverage" for v, _, _ in verdicts)
            n_r = sum(v.question == "read-coverage" for v in proved)
            n_rq = sum(v.question == "read-coverage" for v, _, _ in verdicts)
            secs = sum(t["seconds"] for t in timings)
            findings.append(self.finding(
                ctx, "info",
                f"proved over {dom} (dtype {base.get('dtype', '-')}): {n_b} of {n_access} load/store(s) in bounds, "
                f"{n_c} of {n_cq} output coverage and {n_r} of {n_rq} input read-coverage question(s), in "
                f"{len(timings)} compiled kernel(s) of "
                f"{len(slots)} launch(es); launch model fitted at {len(ok)} shapes; solver {secs:.2f} s"
                + (f" ({sum(bool(t['cached']) for t in timings)} of {len(timings)} kernels' proofs from kws's cache)"
                   if any(t["cached"] for t in timings) else ""),
                ev))
        elif not findings:
            findings.append(self.finding(ctx, "info", f"nothing proved over {dom}", ev))
        return findings

    # -- helpers ---------------------------------------------------------------------------

    @staticmethod
    def _spec_text(p: str, specs: dict[str, Any]) -> str:
        s = specs.get(p)
        if s is None:
            return f"{p} >= 1"
        if s.choices is not None:
            return f"{p} in {list(s.choices)}"
        txt = f"{s.min if s.min is not None else 1} <= {p}" + (f" <= {s.max}" if s.max is not None else "")
        return txt + (f", {p} % {s.multiple_of} == 0" if s.multiple_of else "")

    def _regions(self, ok: list[tuple[dict[str, Any], BoundsCase]], si: int, keys: list[int],
                 records: list[BoundsLaunch], params: list[str], specs: dict[str, Any]) -> dict[int, list[Any]] | str:
        """Per launch key of slot ``si``: the part of the domain that launches it (the
        constexprs that vary with the shape, fitted); a text when they cannot be fitted."""
        import z3

        from workstation.checks.support.boundsmodel import fit_one, monomial_bound

        if len(keys) == 1:
            return {keys[0]: []}
        penv = {p: z3.Int(p) for p in params}
        names = sorted({n for k in keys for n in records[k].constexprs})
        varying = [n for n in names if len({repr(records[k].constexprs.get(n)) for k in keys}) > 1]
        envs = [({p: int(c[p]) for p in params}, records[r.launches[si].key].constexprs) for c, r in ok]
        out: dict[int, list[Any]] = {k: [] for k in keys}
        hi = monomial_bound(specs, params)
        for n in varying:
            vals = [(e, cx.get(n)) for e, cx in envs]
            ints = [(e, v) for e, v in vals if isinstance(v, int) and not isinstance(v, bool)]
            if len(ints) != len(vals):
                return f"constexpr {n} changes with the shape and is not an integer"
            f = fit_one(ints, params)
            if f is None:
                return f"constexpr {n} changes with the shape and fits no template"
            for k in keys:
                out[k].append(f.z3(penv, hi) == records[k].constexprs[n])
        return out

    @staticmethod
    def _uncovered(regions: dict[int, list[Any]], params: list[str], specs: dict[str, Any]) -> str:
        import z3

        from workstation.checks.support.boundsmodel import domain

        if any(not r for r in regions.values()):
            return ""
        penv = {p: z3.Int(p) for p in params}
        s = z3.Solver()
        s.set("timeout", 4000)
        s.add(*domain(penv, specs), z3.Not(z3.Or(*[z3.And(*r) for r in regions.values()])))
        if s.check() == z3.sat:
            m = s.model()
            return "e.g. " + ", ".join(f"{p}={m.eval(x, model_completion=True)}" for p, x in penv.items())
        return ""

    def _refuted(self, ctx: CheckContext, v: Verdict, slot: Slot, base: dict[str, Any], seed: int,
                 file: str) -> Finding:
        ce = v.counterexample or {}
        case = dict(base, **{p: x for p, x in ce.get("params", {}).items() if x is not None})
        label = case_label(case)
        at = f"{file}:{v.line}" if file and v.line else f"line {v.line}"
        if v.question == "in-bounds":
            what = (f"{v.access} at {at} reaches element offset {ce.get('offset')} of {v.arg}, whose "
                    f"footprint is {ce.get('footprint')} element(s), at {label} (program {ce.get('program')}, "
                    f"lane {ce.get('lanes')})")
        else:
            what = f"{v.access} (store at {at}): element {ce.get('element')} is written by no program at {label}"
        confirm_cases = [case]
        if v.data_dependent:
            declared = smallest_case(ctx.cases)
            if declared != case:
                confirm_cases.append(declared)
        seen, runs = [], []
        for c in confirm_cases:
            out = ctx.calls([guarded_step(c, seed, "A")], memo=True)[0]
            runs.append((c, out))
            s = self._seen(v, slot, out)
            if s:
                seen.append(f"at {case_label(c)}: {s}")
                break
        ev = {"question": v.question, "access": v.access, "line": v.line, "argument": v.arg,
              "source": {"file": file, "line": v.line} if file and v.line else None,
              "counterexample": ce, "case": case, "seed": seed, "solver_seconds": round(v.seconds, 3),
              "confirmation": seen or [f"at {case_label(c)}: " + (o.failure_text() if not o.ok else "nothing seen")
                                       for c, o in runs]}
        if seen:
            return self.finding(ctx, "fail", f"{slot.qualname}: {what}; the guarded run {seen[0]}", ev,
                                case=case, seed=seed)
        why = ("guard bands see writes only" if "load" in v.access else
               "the run did not show it (data that does not trigger the mask, or the write lands beyond the band)")
        failed = [o for _, o in runs if not o.ok]
        if failed and len(failed) == len(runs):
            ctx.could_not_judge(f"the confirmation run at {label} failed: {failed[0].failure_text()}")
        text = f"{slot.qualname}: {what} (refuted by Z3, not confirmed by a run: {why})"
        if v.question != "in-bounds" and any(self._written(v, slot, o) for _, o in runs):
            # the proof says no program of the kernel writes the element, and the run saw it
            # written over kws's poison: another writer (a framework op, host code) or a launch
            # model that does not hold; a static reading the run did not bear out
            text = (f"{slot.qualname}: {what}, yet the guarded run saw every element of that output written over "
                    "kws's poison: written by something other than this kernel, or the launch model does not hold "
                    "(refuted by Z3, not confirmed by a run)")
            ev.update(suspect(ctx, "work-elsewhere", text, static_vs_run=True))
        return self.finding(ctx, "warn", text, ev, case=case, seed=seed)

    @staticmethod
    def _written(v: Verdict, slot: Slot, out: Any) -> bool:
        """Whether the guarded run ``out`` poisoned the output a coverage refutation names and
        saw all of it written (no poison left)."""
        if not out.ok or out.step is None:
            return False
        j = slot.tensors.get(v.arg, {}).get("output")
        if j is None or j >= len(out.outputs):
            return False
        m = poison_mask(out, j, out.outputs[j].dtype, "A")
        buf = output_buffer(out, j)
        return m is not None and buf is not None and bool(buf.poisoned) and not m.any()

    def _unread(self, ctx: CheckContext, v: Verdict, slot: Slot, base: dict[str, Any], seed: int,
                file: str) -> Finding:
        """An input element no program reads: a ``fail`` when the candidate's output misses
        the reference at the counterexample shape, else ``info`` (a kernel need not read
        its whole input)."""
        ce = v.counterexample or {}
        case = dict(base, **{p: x for p, x in ce.get("params", {}).items() if x is not None})
        label = case_label(case)
        at = f"{file}:{v.line}" if file and v.line else f"line {v.line}"
        what = (f"{slot.qualname}: {v.access} (load at {at}): element {ce.get('element')} is read by no program "
                f"at {label}")
        ev: dict[str, Any] = {"question": v.question, "access": v.access, "line": v.line, "argument": v.arg,
              "source": {"file": file, "line": v.line} if file and v.line else None,
              "counterexample": ce, "case": case, "seed": seed}
        try:
            (ref,) = ctx.reference([(case, seed)])
            (cand,) = ctx.candidate([(case, seed)])
        except Skip as e:
            ctx.could_not_judge(f"the confirmation run at {label} could not run: {e}")
            return self.finding(ctx, "info", f"{what} (not confirmed: the run at that shape could not run)", ev)
        if not ref.ok or not cand.ok:
            o = ref if not ref.ok else cand
            ev["confirmation"] = o.failure_text()
            return self.finding(ctx, "info", f"{what} (not confirmed: {o.failure_text()})", ev, case=case, seed=seed)
        bad = [c for c in ctx.compare(ref, cand, case) if not c.ok]
        if bad:
            ev["confirmation"] = [c.reason for c in bad][:4]
            return self.finding(ctx, "fail", f"{what}; the candidate's output there misses the reference: "
                                f"{bad[0].reason}", ev, case=case, seed=seed)
        ev["confirmation"] = "the output matches the reference at that shape"
        return self.finding(ctx, "info", f"{what}; the output still matches the reference there", ev,
                            case=case, seed=seed)

    @staticmethod
    def _seen(v: Verdict, slot: Slot, out: Any) -> str:
        """What the guarded run shows of the refuted question ('' when nothing)."""
        if not out.ok or out.step is None:
            return ""
        if v.question == "in-bounds":
            parts = []
            for k, buf in enumerate(out.payload(GuardedCallExtra).buffers):
                if not buf.guarded:
                    continue
                ch = band_changes(out, k, buf)
                if ch:
                    for side in ("before", "after"):
                        if side in ch:
                            parts.append(f"{ch[side]['changed']} guard element(s) written {side} "
                                         f"{buf.kind} buffer {k} ({buf.dtype} {buf.shape})")
            return "; ".join(parts)
        j = slot.tensors.get(v.arg, {}).get("output")
        if j is None or j >= len(out.outputs):
            return ""
        m = poison_mask(out, j, out.outputs[j].dtype, "A")
        buf = output_buffer(out, j)
        if m is None or buf is None or not buf.poisoned or not m.any():
            return ""
        return f"{int(m.sum())} of {m.size} element(s) of output {j} still hold the poison"
