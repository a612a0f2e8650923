"""The data the four numerics checks share, computed once per engine run.

``tolerance-loose``, ``tolerance-tight``, ``precision-regime`` and ``reference-suspect``
judge the same evidence: the float64 oracle of every declared case and seed, the
reference's and the candidate's errors against it, and the error budget of each output
(:mod:`workstation.analysis.numerics`). :func:`audit` returns one :class:`NumericsAudit` per
:class:`~workstation.engine.run.CheckContext`; each of its parts is computed by the first check
that asks and shared with the others (the engine runs checks in parallel threads).

Child jobs (all through ``ctx.calls(..., memo=True)``, so other checks share them too):

1. the reference on the declared cases (shared with ``correctness``);
2. one reference-side job: the ``num_oracle`` step per declared case and seed (the oracle,
   ``|inputs|`` for ``|a|ᵀ|b|``, the homogeneity and perturbation probes), the reference
   computed in each lower precision (``cast``), and a second run of the reference under the
   ``num_callers`` monitor (determinism, calls into the candidate's file);
3. candidate-side jobs (precision-regime): the candidate on the declared cases (shared with
   ``correctness``), on the cases re-run at each ``[contract] dtypes`` entry no declared case
   uses, and on one case with a 4x longer reduction; the ``triton_aot`` step;
4. the TF32 emulation (the reference on TF32-rounded fp32 inputs) when the AOT IR shows a
   TF32 dot.

Nothing here imports torch or triton.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec
import numpy as np

from workstation.analysis.compare import ResolvedTolerance, compare, is_float
from workstation.analysis.numerics import (
    FA_FACTOR,
    HALF_DTYPES,
    LOWER_PRECISION,
    TAU_OPS,
    Budget,
    ErrorStats,
    Reduction,
    accumulator_dtype,
    budget_floor,
    error_stats,
    fit_tolerance,
    nice_up,
    num,
    ratio_floor,
    reduced_params,
    reduction_from_contract,
    reduction_from_perturbation,
    reduction_from_shapes,
    round_to,
)
from workstation.engine.check import Skip
from workstation.engine.context import CallOutcome, CheckContext, case_label
from workstation.protocol.extras.calls import CallExtra
from workstation.protocol.extras.numerics import NumOracleExtra
from workstation.protocol.steps import (
    CallStep,
    Cast,
    NumCallers,
    NumFresh,
    NumOracleStep,
    NumTf32,
    Step,
    TritonAotStep,
    memo_key,
)

#: the caveat every finding drawn from interpreter numerics carries.
INTERPRETER_NOTE = (
    "measured under the Triton interpreter on the CPU: the interpreter's tl.dot is a numpy "
    "matmul in true fp32 and its reductions run in numpy's order, not a GPU's"
)
#: reference error over budget above which the reference is suspect (warn) / wrong (fail).
REF_WARN_RATIO = 2.0
REF_FAIL_RATIO = 8.0
#: derived cases per contract dtype, and the reduction growth factor of the long-K run.
MAX_DERIVED_CASES = 3
LONG_K_FACTOR = 4


def audit(ctx: CheckContext) -> NumericsAudit:
    """The shared :class:`NumericsAudit` of ``ctx``'s run (created on first use)."""
    return ctx.stash.once(NumericsAudit, lambda: NumericsAudit(ctx))


@dataclass
class OutData:
    """One floating output of one run.

    ``ref``: the reference's values (its own dtype ``dtype``); ``oracle``: the float64
    oracle (None when the reference does not run on float64 inputs); ``oracle_dtype``: what
    the reference returned for float64 inputs; ``mag``: S of the budget; ``bud``/``B``: the
    budget and its per-element array; ``tol``: the declared tolerance resolved for this
    output; ``ref_err``: the reference against the oracle (with ``B``).
    """

    j: int
    dtype: str
    ref: np.ndarray
    oracle: np.ndarray | None
    oracle_dtype: str | None
    mag: np.ndarray
    bud: Budget
    B: np.ndarray
    tol: ResolvedTolerance
    ref_err: ErrorStats | None

    @property
    def truth(self) -> np.ndarray:
        """The oracle, or the reference where no oracle exists."""
        return self.oracle if self.oracle is not None else self.ref

    @property
    def known_oracle(self) -> np.ndarray:
        """``oracle``, for a caller that judges only outputs that have one."""
        assert self.oracle is not None, "an output without a float64 oracle"
        return self.oracle

    @property
    def known_ref_err(self) -> ErrorStats:
        """``ref_err``, for a caller that judges only outputs with an oracle
        (:meth:`NumericsAudit._build` measures the reference wherever it has one)."""
        assert self.ref_err is not None, "an output without a float64 oracle"
        return self.ref_err


@dataclass
class Run:
    """One case and seed: ``kind`` is ``declared``, ``dtype`` (a declared case re-run at a
    ``[contract] dtypes`` entry) or ``long-K`` (a declared case with a longer reduction)."""

    case: dict[str, Any]
    seed: int
    kind: str
    ref: CallOutcome
    probe: CallOutcome | None
    red: Reduction
    outs: list[OutData] = field(default_factory=list)
    cand: CallOutcome | None = None
    note: str = ""

    @property
    def label(self) -> str:
        return f"case {case_label(self.case)} seed {self.seed}"


class NumericsAudit:
    """Lazily computed, shared numerics evidence of one task (see module doc)."""

    def __init__(self, ctx: CheckContext):
        self.ctx = ctx
        self.task = ctx.task

    def _once(self, name: str, fn: Callable[[], Any]) -> Any:
        return self.ctx.stash.once((NumericsAudit, name), fn, cache_errors=True)

    @property
    def interpreter(self) -> bool:
        return bool(self.ctx.runner.device.interpreter)

    # -- steps -------------------------------------------------------------------------

    def _skip_indices(self) -> list[int]:
        return sorted(set(self.task.out_args))

    def _probe_step(self, case: dict[str, Any], seed: int, *, scale: bool, bump: bool) -> NumOracleStep:
        return NumOracleStep(case=dict(case), seed=int(seed), abs=True, scale=scale, bump=bump,
                             skip=self._skip_indices())

    def _lowp_step(self, case: dict[str, Any], seed: int, low: str) -> CallStep:
        return CheckContext.call_step("reference", case, seed, transforms=[Cast(dtype=low, from_dtype=case["dtype"])])

    def _rerun_step(self, case: dict[str, Any], seed: int) -> CallStep:
        cand = self.task.entry["candidate"].file
        return CheckContext.call_step("reference", case, seed, transforms=[NumFresh()],
                                      monitors=[NumCallers(file=cand)])

    # -- declared runs -----------------------------------------------------------------

    def declared(self) -> list[Run]:
        """Every declared case and seed, with oracle, budget and reference error."""
        return self._once("declared", self._declared)

    def _first_seed_pairs(self) -> list[tuple[dict[str, Any], int]]:
        return [(c, self.ctx.seeds[0]) for c in self.ctx.cases]

    def _declared(self) -> list[Run]:
        ctx = self.ctx
        pairs = ctx.declared_pairs()
        need_bump = not self.task.contract.reduction
        probes: list[Step] = [self._probe_step(c, s, scale=(i == 0), bump=need_bump and s == ctx.seeds[0])
                              for i, (c, s) in enumerate(pairs)]
        extra: list[Step] = []
        for c, s in self._first_seed_pairs():
            for low in LOWER_PRECISION.get(c["dtype"], ()):
                extra.append(self._lowp_step(c, s, low))
            extra.append(self._rerun_step(c, s))
        # the reference-side job runs beside the (shared) plain reference calls
        side: Future[list[CallOutcome]] = Future()

        def run_side() -> None:
            try:
                side.set_result(ctx.calls(probes + extra, memo=True))
            except BaseException as e:  # noqa: BLE001
                side.set_exception(e)

        t = threading.Thread(target=run_side, daemon=True)
        t.start()
        refs = ctx.reference(pairs)
        got = side.result()
        probe_out = got[: len(probes)]
        rest = got[len(probes):]
        self._extra = {memo_key(s): o for s, o in zip(extra, rest, strict=True)}
        self._multi = self._multilinear(probe_out[0] if probe_out else None)
        red = self._reductions([(c, r) for (c, _), r in zip(pairs, refs, strict=True)],
                               {json.dumps(c, sort_keys=True): p for (c, s), p in zip(pairs, probe_out, strict=True)
                                if s == ctx.seeds[0]})
        runs = []
        for (c, s), r, p in zip(pairs, refs, probe_out, strict=True):
            runs.append(self._build(c, s, "declared", r, p, red[json.dumps(c, sort_keys=True)]))
        return runs

    def _multilinear(self, probe: CallOutcome | None) -> dict[str, Any]:
        """Homogeneity of degree 1 in every floating input (exact in float64 for a
        multilinear op: doubling an input is exact and commutes with every product and sum)."""
        if probe is None or not probe.ok or probe.step is None:  # (ok implies a step result)
            return {"multilinear": False, "why": "no float64 oracle"}
        oracle = probe.payload(NumOracleExtra)
        floats = oracle.float_inputs
        errs = oracle.probe_errors
        if not floats:
            return {"multilinear": False, "why": "no floating tensor inputs"}
        if self.task.inout_args:
            return {"multilinear": False, "why": "in-place accumulation (inout_args) is affine, not linear"}
        for i in floats:
            if f"scale{i}" in errs:
                return {"multilinear": False, "why": f"the reference raised on input {i} doubled"}
            for j, o in enumerate(probe.outputs):
                a = probe.step.arrays.get(f"scale{i}_{j}")
                if a is None or a.shape != o.values.shape:
                    return {"multilinear": False, "why": f"input {i} doubled changed output {j}'s shape"}
                with np.errstate(invalid="ignore", over="ignore"):
                    same = np.allclose(a, 2.0 * o.values, rtol=1e-12, atol=0.0, equal_nan=True)
                if not same:
                    return {"multilinear": False, "why": f"doubling input {i} does not double output {j}"}
        return {"multilinear": True, "why": f"doubling any one of inputs {floats} doubles every output "
                "(float64, exact), so S = the op applied to |inputs| = |a|ᵀ|b|"}

    def _reductions(self, refs: list[tuple[dict[str, Any], CallOutcome]],
                    probes: dict[str, CallOutcome]) -> dict[str, Reduction]:
        """K per declared case (``[contract] reduction``, else shapes, else perturbation)."""
        out: dict[str, Reduction] = {}
        cases = {json.dumps(c, sort_keys=True): c for c, _ in refs}
        shapes: dict[str, tuple[list[list[int]], list[list[int]]]] = {}
        for c, r in refs:
            k = json.dumps(c, sort_keys=True)
            if k in shapes or not r.ok:
                continue
            written = set(self.task.out_args) | set(self.task.inout_args)
            ins = [list(d.shape) for d in r.payload(CallExtra).inputs
                   if d.kind == "tensor" and d.index not in written]
            shapes[k] = (ins, [list(o.shape) for o in r.outputs])
        params = self.task.contract.reduction
        inferred = () if params else reduced_params((cases[k], *v) for k, v in shapes.items())
        for k, c in cases.items():
            red = reduction_from_contract(c, params) if params else None
            if red is None and inferred:
                red = reduction_from_contract(c, inferred)
                if red is not None:
                    red = Reduction(red.k, f"inferred from shapes: case parameter(s) {' * '.join(inferred)} size "
                                    "a dimension of the inputs that vanishes from the output", inferred)
            if red is None and k in shapes:
                red = reduction_from_shapes(*shapes[k])
            if red is None:
                red = _bump_reduction(probes.get(k))
            out[k] = red or Reduction(1, "no reduction found (elementwise)")
        return out

    def _build(self, case: dict[str, Any], seed: int, kind: str, ref: CallOutcome, probe: CallOutcome | None,
               red: Reduction) -> Run:
        run = Run(case, seed, kind, ref, probe, red)
        if not ref.ok:
            run.note = f"the reference {ref.failure_text()}"
            return run
        poke = probe if probe is not None and probe.ok else None
        if probe is not None and not probe.ok:
            run.note = f"no float64 oracle: the reference {probe.failure_text()} on float64 inputs"
        multi = self._multi.get("multilinear", False)
        acc = accumulator_dtype(case.get("dtype", "float32"))
        for j, td in enumerate(ref.outputs):
            if not is_float(td.dtype):
                continue
            oracle, odt, mag, used_abs = None, None, None, False
            if poke is not None and poke.step is not None and j < len(poke.outputs) \
                    and poke.outputs[j].values.shape == td.values.shape:  # (poke.ok: poke.step is set)
                odt = poke.outputs[j].dtype
                # float64; or, for an op whose output dtype is not its input dtype (a cast, a
                # quantiser, fp16 in -> fp32 out), that same fixed dtype: computed from exact
                # inputs and rounded once to it
                fixed = odt == td.dtype and td.dtype != case.get("dtype")
                if odt == "float64" or fixed:
                    oracle = poke.outputs[j].values
                    absv = poke.step.arrays.get(f"abs{j}")
                    used_abs = bool(multi and absv is not None and absv.shape == oracle.shape)
                    mag = absv if used_abs else np.abs(oracle)
                else:
                    run.note = (f"no float64 oracle: for float64 inputs the reference returns {odt} "
                                f"(output {j}; {td.dtype} for the case's own inputs), so it computes at a "
                                "fixed precision")
            truth = oracle if oracle is not None else td.values
            if mag is None:
                mag = np.abs(truth)
            fin = np.abs(truth[np.isfinite(truth)])
            bud = Budget(red.k, red.source, acc, td.dtype, max(td.values.size, 1),
                         "the op on |inputs| (|a|ᵀ|b| for a product)" if used_abs else "|y|",
                         budget_floor(float(fin.max()) if fin.size else 0.0, acc, td.dtype,
                                      ops=0 if used_abs else TAU_OPS))
            B = bud.per_element(mag, truth)
            tol = self.ctx.tolerance(case, td.dtype)
            ref_err = error_stats(td.values, oracle, td.dtype, B) if oracle is not None else None
            run.outs.append(OutData(j, td.dtype, td.values, oracle, odt, mag, bud, B, tol, ref_err))
        return run

    # -- derived cases of other checks (size-range, the budget rule) ---------------------

    def multilinear(self) -> bool:
        """Whether the op is multilinear in its floating inputs (judged on the declared cases:
        doubling any one input doubles every output), so S = the op on ``|inputs|``."""
        self.declared()
        return bool(self._multi.get("multilinear", False))

    def probe_step(self, case: dict[str, Any], seed: int) -> NumOracleStep:
        """The float64 oracle step of a derived case: the oracle and, for a multilinear op,
        the op on ``|inputs|`` (the step precision-regime runs for its derived cases, so
        equal cases share it); where the declared cases' reduction length came from a
        perturbation (no parameter names it), also the ``bump`` probe, so the derived case's
        own length is measured the same way."""
        runs = self.declared()
        bump = bool(runs) and not runs[0].red.params and runs[0].red.source.startswith("inferred by perturbation")
        step = self._probe_step(case, seed, scale=False, bump=bump)
        # |inputs| only serves a multilinear op (S = |a|ᵀ|b|): skip the run otherwise
        return step if self.multilinear() else msgspec.structs.replace(step, abs=False)

    def declared_run(self, case: dict[str, Any], seed: int) -> Run | None:
        """The declared run of ``case`` and ``seed`` (None when it is not a declared pair)."""
        key = json.dumps(dict(case), sort_keys=True)
        return next((r for r in self.declared() if r.seed == seed and json.dumps(r.case, sort_keys=True) == key),
                    None)

    def build_run(self, case: dict[str, Any], seed: int, kind: str, ref: CallOutcome,
                  probe: CallOutcome | None) -> Run:
        """A :class:`Run` of a case another check derived: ``ref`` the reference's outcome
        on it, ``probe`` its float64 oracle (a :meth:`probe_step` outcome, or a reference
        call on float64 inputs), the budget with the reduction length of the case
        (:meth:`reduction_like`)."""
        runs = self.declared()
        red = self._reduction_like(dict(case), runs)
        if runs and not runs[0].red.params:
            # no parameter names the reduction: measure it on this case as on the declared ones
            if red.source.startswith("inferred from shapes") and ref.ok and ref.step is not None:
                written = set(self.task.out_args) | set(self.task.inout_args)
                ins = [list(d.shape) for d in ref.payload(CallExtra).inputs
                       if d.kind == "tensor" and d.index not in written]
                red = reduction_from_shapes(ins, [list(o.shape) for o in ref.outputs]) or red
            elif probe is not None and isinstance(probe.spec, NumOracleStep):
                red = _bump_reduction(probe) or red
        return self._build(dict(case), seed, kind, ref, probe, red)

    def reduction_like(self, case: dict[str, Any]) -> Reduction:
        """The reduction length of ``case``, derived as for the declared cases."""
        return self._reduction_like(dict(case), self.declared())

    # -- reference-side extras ------------------------------------------------------------

    def magnitude_basis(self) -> dict[str, Any]:
        """Whether the op is multilinear (S = the op on |inputs|) or not (S = |y|), and why."""
        self.declared()
        return dict(self._multi)

    def lower_precision(self) -> list[tuple[Run, str, CallOutcome]]:
        """(run, lower dtype, outcome) for the first seed of every declared case."""
        runs = self.declared()
        out = []
        for run in runs:
            if run.seed != self.ctx.seeds[0]:
                continue
            for low in LOWER_PRECISION.get(run.case["dtype"], ()):
                o = self._extra.get(memo_key(self._lowp_step(run.case, run.seed, low)))
                if o is not None:
                    out.append((run, low, o))
        return out

    def reruns(self) -> list[tuple[Run, CallOutcome]]:
        """(run, second reference run under ``num_callers``) for the first seed of every case."""
        runs = self.declared()
        out = []
        for run in runs:
            if run.seed == self.ctx.seeds[0]:
                o = self._extra.get(memo_key(self._rerun_step(run.case, run.seed)))
                if o is not None:
                    out.append((run, o))
        return out

    # -- candidate side ----------------------------------------------------------------------

    def with_candidate(self) -> list[Run]:
        """Declared runs plus derived ones (contract dtypes, a longer reduction), each with
        the candidate's outcome."""
        return self._once("candidate", self._with_candidate)

    def _derived_cases(self, runs: list[Run]) -> list[tuple[str, dict[str, Any]]]:
        declared_dtypes = {c["dtype"] for c in self.ctx.cases}
        out: list[tuple[str, dict[str, Any]]] = []
        seen = {json.dumps(c, sort_keys=True) for c in self.ctx.cases}
        for dt in self.task.contract.dtypes:
            if dt in declared_dtypes or not is_float(dt):
                continue
            for c in sorted(self.ctx.cases, key=_size)[:MAX_DERIVED_CASES]:
                d = dict(c, dtype=dt)
                k = json.dumps(d, sort_keys=True)
                if k not in seen:
                    seen.add(k)
                    out.append(("dtype", d))
        params = runs[0].red.params if runs else ()
        if params:
            base = min(self.ctx.cases, key=_size)
            halves = [d for d in [*(c["dtype"] for c in self.ctx.cases), *self.task.contract.dtypes]
                      if d in HALF_DTYPES]
            d = dict(base, dtype=halves[0] if halves else base["dtype"])
            ok = True
            for p in params:
                v = d.get(p)
                spec = self.task.params.get(p)
                if not isinstance(v, int):
                    ok = False
                    break
                nv = v * LONG_K_FACTOR
                if spec is not None and spec.max is not None:
                    nv = min(nv, spec.max)
                if spec is not None and spec.multiple_of:
                    nv -= nv % spec.multiple_of
                if spec is not None and not spec.allows(nv):
                    ok = False
                    break
                d[p] = nv
            k = json.dumps(d, sort_keys=True)
            if ok and k not in seen and any(d[p] != base[p] for p in params):
                out.append(("long-K", d))
        return out

    def _with_candidate(self) -> list[Run]:
        ctx = self.ctx
        runs = self.declared()
        derived = self._derived_cases(runs)
        s0 = ctx.seeds[0]
        dpairs = [(c, s0) for _, c in derived]
        # reference side (plain reference + oracle probes) in one child, candidates in others
        side: Future[list[CallOutcome]] = Future()

        def run_side() -> None:
            try:
                steps: list[Step] = [CheckContext.call_step("reference", c, s) for c, s in dpairs]
                steps += [self._probe_step(c, s, scale=False, bump=False) for c, s in dpairs]
                side.set_result(ctx.calls(steps, memo=True) if steps else [])
            except BaseException as e:  # noqa: BLE001
                side.set_exception(e)

        t = threading.Thread(target=run_side, daemon=True)
        t.start()
        cands = ctx.candidate([(r.case, r.seed) for r in runs] + dpairs)
        got = side.result()
        for r, c in zip(runs, cands[: len(runs)], strict=True):
            r.cand = c
        out = list(runs)
        n = len(dpairs)
        dref, dprobe = got[:n], got[n:]
        for (kind, case), ref, probe, cand in zip(derived, dref, dprobe, cands[len(runs):], strict=True):
            if not ref.ok and ref.error and ref.error.phase in ("make_inputs", "call", "import"):
                continue  # the contract: a derived case the inputs or the reference reject is dropped
            red = self._reduction_like(case, runs)
            run = self._build(case, s0, kind, ref, probe, red)
            run.cand = cand
            out.append(run)
        return out

    def _reduction_like(self, case: dict[str, Any], runs: list[Run]) -> Reduction:
        if runs and runs[0].red.params:
            r = reduction_from_contract(case, runs[0].red.params)
            if r is not None:
                src = runs[0].red.source
                return Reduction(r.k, src, r.params)
        same = [r for r in runs if {k: v for k, v in r.case.items() if k != "dtype"}
                == {k: v for k, v in case.items() if k != "dtype"}]
        return same[0].red if same else (runs[0].red if runs else Reduction(1, "no reduction found (elementwise)"))

    def aot(self) -> CallOutcome | None:
        """The ``triton_aot`` step on the smallest declared case at every declared and
        contract dtype (None for a non-Triton candidate)."""
        return self._once("aot", self._aot)

    def _aot(self) -> CallOutcome | None:
        if self.task.backend != "triton":
            return None
        cases = aot_cases(self.ctx.cases, self.task.contract.dtypes)
        step = TritonAotStep(cases=cases, seed=int(self.ctx.seeds[0]), targets=[("cuda", 90, 32)])
        return self.ctx.calls([step], memo=True)[0]

    def tf32_emulation(self, mode: Literal["rna", "trunc"]) -> list[tuple[Run, CallOutcome]]:
        """The reference on TF32-rounded fp32 inputs (first seed of each fp32 declared case)."""
        runs = [r for r in self.declared() if r.seed == self.ctx.seeds[0] and r.case.get("dtype") == "float32"]
        steps = [CheckContext.call_step("reference", r.case, r.seed,
                                        transforms=[NumTf32(mode=mode, skip=self._skip_indices())]) for r in runs]
        return list(zip(runs, self.ctx.calls(steps, memo=True), strict=True)) if steps else []

    # -- judgements shared by several checks ----------------------------------------------

    def suggestion(self, dtype: str) -> dict[str, Any] | None:
        """The tolerance the auditor accepts for the declared cases of ``dtype`` (see
        :func:`suggest`)."""
        return self._once(f"suggest:{dtype}", lambda: suggest([r for r in self.declared()
                                                                if r.case.get("dtype") == dtype], dtype))

    def allowed(self, o: OutData) -> np.ndarray:
        """The declared tolerance's allowed error at each element of ``o.ref``."""
        from workstation.analysis.numerics import allowed_error

        return allowed_error(o.tol, o.ref)


def _bump_reduction(p: CallOutcome | None) -> Reduction | None:
    """K from the ``bump`` probe of a ``num_oracle`` outcome (the outputs one input element
    moves), or None when the probe did not run."""
    bump = p.payload(NumOracleExtra).bump if p is not None and p.ok and p.step else None
    if p is None or p.step is None or bump is None:
        return None
    changed, numel = 0, 0
    for j, o in enumerate(p.outputs):
        b = p.step.arrays.get(f"bump_{j}")
        if b is not None and b.shape == o.values.shape:
            with np.errstate(invalid="ignore"):
                diff = ~((b == o.values) | (np.isnan(b) & np.isnan(o.values)))
            changed = max(changed, int(diff.sum()))
            numel = max(numel, o.values.size)
    return reduction_from_perturbation(changed, bump.input, numel)


def require_outputs(runs: list[Run]) -> list[str]:
    """The distinct notes of ``runs`` (why a run has nothing to judge), sorted.

    Raises:
        Skip: no run has a floating-point output (naming the first note).
    """
    notes = sorted({r.note for r in runs if r.note})
    if not any(r.outs for r in runs):
        raise Skip("no floating-point output to judge" + (f" ({notes[0]})" if notes else ""))
    return notes


def suggest(runs: list[Run], dtype: str) -> dict[str, Any] | None:
    """The smallest ``atol + rtol·|y|`` covering ``2·B`` (two correct implementations) at
    every element of ``runs``, rounded up with :func:`~workstation.analysis.numerics.nice_up`, with
    its derivation; None when no run has a budget."""
    outs = [(r, o) for r in runs for o in r.outs if o.B is not None]
    if not outs:
        return None
    if all(o.oracle is not None and o.oracle.shape == o.ref.shape
           and np.array_equal(o.ref, o.oracle, equal_nan=True)
           and np.array_equal(round_to(o.oracle, o.dtype), o.oracle, equal_nan=True) for _, o in outs):
        return {"atol": 0.0, "rtol": 0.0, "fit": {"atol": 0.0, "rtol": 0.0}, "dtype": dtype, "runs": len(runs),
                "exact": True, "budget": outs[0][1].bud.as_dict(),
                "derivation": f"For {dtype} cases the op is exact: on all {len(runs)} run(s) the float64 oracle's "
                              f"outputs are {outs[0][1].dtype} values and the reference returns them bit for bit, "
                              "so every correct kernel returns the same bits (IEEE 754 rounding is unique); "
                              "compare exactly (atol = rtol = 0)."}
    mags = np.concatenate([np.abs(o.truth).ravel() for _, o in outs])
    need = np.concatenate([(2.0 * o.B).ravel() for _, o in outs])
    fa, fr = fit_tolerance(mags, need)
    atol, rtol = nice_up(fa), nice_up(fr)
    b = outs[0][1].bud
    wr, wo = max(outs, key=lambda t: float(np.max(t[1].B)))
    deriv = (
        f"For {dtype} cases: {b.formula_text()}. Two correct implementations (the candidate and the "
        f"reference) differ by at most 2B per element. The smallest atol + rtol*|y| >= 2B at every element "
        f"of {len(runs)} run(s) (largest 2B = {num(2 * float(np.max(wo.B)))}, {wr.label}) is "
        f"atol = {num(fa)}, rtol = {num(fr)}; rounded up: atol = {num(atol)}, rtol = {num(rtol)}."
    )
    return {"atol": atol, "rtol": rtol, "fit": {"atol": fa, "rtol": fr}, "dtype": dtype,
            "runs": len(runs), "derivation": deriv, "budget": b.as_dict()}


def aot_cases(cases: list[dict[str, Any]], served: tuple[str, ...] | list[str]) -> list[dict[str, Any]]:
    """The cases the AOT step compiles for: the smallest declared case at one dtype of each
    precision class among the declared and ``[contract]`` dtypes (float32: the TF32
    question; the first of float16/bfloat16: half-precision accumulators; the first fp8),
    declared dtypes first. float16 and bfloat16 take the same code path in a kernel, so one
    stands for both."""
    base = min(cases, key=_size)
    picked: list[str] = []
    classes: set[str] = set()
    for d in [*(c["dtype"] for c in cases), *served]:
        cls = "half" if d in HALF_DTYPES else ("fp8" if d.startswith("float8") else d)
        if cls in classes or not is_float(d) or d == "float64":
            continue
        classes.add(cls)
        picked.append(d)
    return [dict(base, dtype=d) for d in picked]


def _size(case: dict[str, Any]) -> int:
    return math.prod(v for v in case.values() if isinstance(v, int) and not isinstance(v, bool) and v > 0)


def accepts(o: OutData, got: np.ndarray, tol: ResolvedTolerance | None = None) -> Any:
    """torch.testing's rule: does ``tol`` (default: the declared one) accept ``got`` against
    the reference's output? Returns the :class:`~workstation.analysis.compare.Comparison`."""
    return compare(o.ref, got, tol or o.tol, expected_dtype=o.dtype, got_dtype=o.dtype)


def fa_rule(o: OutData, cand: np.ndarray) -> dict[str, Any] | None:
    """FlashAttention's rule on one output: ``max|cand - oracle| <= 2·max|ref - oracle| +
    floor``, the floor :func:`~workstation.analysis.numerics.ratio_floor` (FlashAttention's
    floor or one error budget ``max B``, the larger). None without an oracle."""
    if o.oracle is None:
        return None
    ce = error_stats(cand, o.oracle, o.dtype, o.B)
    re_ = o.known_ref_err
    fl = ratio_floor(o.oracle, o.dtype, o.B)
    floor = fl["floor"]
    limit = FA_FACTOR * re_.max_abs + floor
    return {"candidate_err": ce.max_abs, "reference_err": re_.max_abs, "floor": floor, "floor_parts": fl,
            "limit": limit,
            "ok": bool(ce.max_abs <= limit and not ce.nonfinite), "candidate": ce, "reference": re_}


def round_trip(values: np.ndarray, dtype: str) -> np.ndarray:
    """``values`` (another dtype's output) cast back to ``dtype`` (IEEE round to nearest)."""
    return round_to(values, dtype)


# ----------------------------------------------------------------------------- static scan
