"""The tolerance-versus-budget rule (issue 39, item 7) of the checks that compare on inputs
kws derives: ``edge-shapes``, ``noncontiguous``, ``content-follow`` and ``size-range``.

A declared tolerance is the author's; kws's error budget is the error any correct
implementation may show against the exact result (:mod:`workstation.analysis.numerics`,
docs/numerics.md: ``B_i = rho·S_i + u_out·|y_i| + tau`` with the reduction length K of the
case, Higham 2002 and Higham and Mary 2019). On a case the author never ran (a longer
reduction, another layout) a tolerance written for the declared cases can be tighter than
that budget: an fp32 column sum over M = 769 rows compared at ``atol = rtol = 1e-5`` misses
on one of 149 outputs by 1.7e-5 while its budget there is about 1e-3. So:

    where the candidate is within kws's budget of the float64 oracle at every element of
    every output that mismatches, the mismatch is the tolerance's (``tolerance-tight``
    judges tolerances), never a fail of the candidate: the check reports it as ``info``.

A mismatch the rule cannot judge (no float64 oracle: a reference that computes at a fixed
precision; an integer output; a shape or a count of outputs that differs) stays what it was.
Non-finite values, exceptions and crashes are never the tolerance's.

The oracle of a derived case is the reference on float64 copies of exactly the inputs it
was given: the ``num_oracle`` step (:meth:`.NumericsAudit.probe_step`, with the op on
``|inputs|`` for a multilinear op) when the reference's inputs are the case's own, the
numerics audit's declared run when the case is declared, else the reference called on the
float64 inputs after the trial's own transforms under ``keep_float64`` (``S = |y|``, the
floor of :data:`~workstation.analysis.numerics.TAU_OPS` roundings).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from workstation.analysis.compare import Comparison
from workstation.analysis.numerics import error_stats, num
from workstation.checks.support.numaudit import OutData, Run, audit
from workstation.engine.check import Skip
from workstation.engine.context import CallOutcome, CheckContext
from workstation.protocol.steps import (
    CallStep,
    KeepFloat64,
    NumOracleStep,
    Transform,
    Upcast,
    memo_key,
)

#: a candidate within this many budgets of the oracle at every element is within the budget.
WITHIN = 1.0
#: the most error, in units of one rounding per term (:func:`rounding_units`), a correct
#: implementation makes: a sequential fp32 sum, the least accurate order, stays within a few;
#: an fp16 operand, a cheap exp, a bf16 step are hundreds to thousands.
EXCESS = 32.0


def rounding_units(o: OutData) -> np.ndarray:
    """Per element ``E_i = u_acc·S_i + u_out·|y_i| + tau``: the error of about one rounding
    in the accumulator per term's magnitude (``S_i``: the op on ``|inputs|`` for a
    multilinear op, else ``|y_i|``; ``tau`` the budget's floor), what the least accurate
    correct evaluation order (a sequential sum) reaches. kws's budget ``B_i`` is
    ``rho·S_i + ...`` with ``rho = min(γ̃_K(λ), γ_K)``, which for a long reduction is
    ``λ·√K`` times larger: a bound, where ``E`` is the scale of what correct kernels do."""
    if o.bud is None or o.mag is None:
        raise ValueError(f"output {o.j} has no budget")
    return o.bud.u_acc * np.abs(o.mag) + o.bud.u_out * np.abs(o.truth) + o.bud.tau


def excess(o: OutData, got: np.ndarray) -> tuple[float, dict[str, Any] | None]:
    """The candidate's largest error in :func:`rounding_units` (0 without an oracle) and its
    element (index, oracle, got, unit)."""
    if o.oracle is None or o.bud is None or o.mag is None or got.shape != o.oracle.shape:
        return 0.0, None
    e = rounding_units(o)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        d = np.abs(np.asarray(got, dtype=np.float64) - o.oracle)
        r = np.where(np.isfinite(d), d / e, np.where(np.isfinite(o.oracle), np.inf, 0.0))
    r = np.nan_to_num(r, nan=np.inf, posinf=np.inf)
    if not r.size:
        return 0.0, None
    i = int(np.argmax(r))
    idx = [int(k) for k in np.unravel_index(i, r.shape)] if r.shape else []
    return float(r.flat[i]), {"index": idx, "oracle": float(o.oracle.flat[i]), "got": float(np.asarray(got).flat[i]),
                              "unit": float(e.flat[i])}


@dataclass
class Verdict:
    """The rule's answer for one compared call.

    ``available``: an oracle and a budget exist for every mismatching output (``why``
    otherwise); ``within``: the candidate is within :data:`WITHIN` budgets of the oracle at
    every element of each of them and no more than :data:`EXCESS` roundings per term off
    (``excess``: its largest error in :func:`rounding_units`; a kernel hundreds of
    roundings off is not a correct one, however wide the budget's bound at a long
    reduction); ``candidate_ratio`` / ``reference_ratio``: the largest
    error over budget of the candidate and of the reference there; ``worst``: the
    candidate's worst element (index, oracle, got, budget); ``budget``: that output's
    budget (:meth:`~workstation.analysis.numerics.Budget.as_dict`), ``tolerance`` the
    declared tolerance applied, ``need``: the largest ``2B`` (what two correct
    implementations may differ by) of those outputs."""

    available: bool
    why: str = ""
    within: bool = False
    candidate_ratio: float | None = None
    reference_ratio: float | None = None
    candidate_err: float | None = None
    worst: dict[str, Any] | None = None
    budget: dict[str, Any] | None = None
    tolerance: dict[str, Any] | None = None
    need: float | None = None
    excess: float | None = None
    reference_excess: float | None = None
    outputs: list[int] = field(default_factory=list)

    def text(self) -> str:
        """One clause for a finding."""
        if not self.available:
            return f"kws's error budget could not judge it ({self.why})"
        b = self.budget or {}
        model = (f"K = {b.get('K')} ({b.get('K_source')}), {b.get('accumulator')} accumulation, "
                 f"S = {b.get('magnitude')}")
        if not self.within:
            if (self.candidate_ratio or 0.0) <= WITHIN:
                return (f"the candidate is within kws's error budget ({num(self.candidate_ratio or 0.0)}x; {model}) "
                        f"but {num(self.excess or 0.0)} roundings per term off the float64 oracle, more than a "
                        f"correct implementation makes (at most {EXCESS:g})")
            return (f"the candidate is {num(self.candidate_ratio or 0.0)}x kws's error budget off the float64 "
                    f"oracle ({model})")
        tol = self.tolerance or {}
        s = (f"the candidate is within kws's error budget of the float64 oracle at every element (max |err| "
             f"{num(self.candidate_err or 0.0)}, {num(self.candidate_ratio or 0.0)}x the budget; {model})")
        if self.reference_off:
            return s + (f"; the reference itself is {num(self.reference_ratio or 0.0)}x its budget, "
                        f"{num(self.reference_excess or 0.0)} roundings per term off the oracle here: the mismatch "
                        "is the reference's (reference-suspect's subject), not a fail of the candidate")
        return s + (f"; two correct implementations may differ by up to {num(self.need or 0.0)} here, more than the "
                    f"declared tolerance (atol={tol.get('atol', 0):g}, rtol={tol.get('rtol', 0):g}) allows: the "
                    "tolerance is too tight at this case (tolerance-tight's finding), not a fail of the candidate")

    @property
    def reference_off(self) -> bool:
        """The reference is beyond its budget or :data:`EXCESS` roundings per term here."""
        return (self.reference_ratio or 0.0) > WITHIN or (self.reference_excess or 0.0) > EXCESS

    def evidence(self) -> dict[str, Any]:
        """JSON-ready evidence."""
        if not self.available:
            return {"available": False, "why": self.why}
        return {"available": True, "within_budget": self.within, "candidate_err_over_budget": self.candidate_ratio,
                "reference_err_over_budget": self.reference_ratio, "candidate_max_abs_err": self.candidate_err,
                "worst": self.worst, "budget": self.budget, "declared_tolerance": self.tolerance,
                "two_budgets_max": self.need, "roundings_per_term": self.excess,
                "reference_roundings_per_term": self.reference_excess, "outputs": self.outputs}


@dataclass(frozen=True)
class Item:
    """One compared call: the case and seed its inputs come from, the transforms the
    reference's inputs got (``[]``: the case's own inputs), and the reference's outcome."""

    case: dict[str, Any]
    seed: int
    ref_transforms: tuple[Transform, ...]
    ref: CallOutcome


def _keep64_step(case: dict[str, Any], seed: int, ref_transforms: tuple[Transform, ...]) -> CallStep:
    return CallStep(role="reference", case=dict(case), seed=int(seed),
                    transforms=[*ref_transforms, Upcast(dtype="float64")], monitors=[KeepFloat64()])


def _no_oracle(run: Run) -> bool:
    return any(o.oracle is None for o in run.outs)


def prefetch_steps(ctx: CheckContext, cases: list[tuple[dict[str, Any], int, tuple[Transform, ...]]]) -> list[Any]:
    """The oracle steps :func:`oracle_runs` would run for calls on ``cases`` (case, seed,
    the reference's transforms), for a caller to add to the reference job it runs anyway
    (memoised: :func:`oracle_runs` then finds them done, with no job of its own). Empty
    when the numerics audit cannot run."""
    try:
        na = audit(ctx)
        na.declared()
    except Skip:
        return []
    steps: list[Any] = []
    for case, seed, tr in cases:
        if tr:
            steps.append(_keep64_step(case, seed, tr))
        elif na.declared_run(case, seed) is None:
            steps.append(na.probe_step(case, seed))
    return list({memo_key(s): s for s in steps}.values())


def oracle_runs(ctx: CheckContext, items: list[Item]) -> list[Run | str]:
    """Per item, its :class:`~workstation.checks.support.numaudit.Run` (oracle, budget,
    reference error), or why there is none. Every oracle step runs in one reference job
    (memoised: equal steps are shared with the numerics checks and across items)."""
    try:
        na = audit(ctx)
        na.declared()
    except Skip as e:  # NotJudged, TaskProblem: the numerics audit itself could not run
        return [f"the numerics audit could not run: {e}"] * len(items)
    out: list[Run | str | None] = [None] * len(items)
    steps: list[Any] = []
    where: list[int] = []
    for i, it in enumerate(items):
        if not it.ref.ok:
            out[i] = f"the reference {it.ref.failure_text()[:160]}"
            continue
        if not it.ref_transforms:
            d = na.declared_run(it.case, it.seed)
            if d is not None and d.outs and not _no_oracle(d):
                out[i] = d
                continue
            steps.append(na.probe_step(it.case, it.seed))
        else:
            steps.append(_keep64_step(it.case, it.seed, it.ref_transforms))
        where.append(i)
    got = ctx.calls(steps, memo=True) if steps else []
    again: list[int] = []
    for i, s, o in zip(where, steps, got, strict=True):
        run = na.build_run(items[i].case, items[i].seed, "derived", items[i].ref, o)
        out[i] = run
        if isinstance(s, NumOracleStep) and _no_oracle(run):
            again.append(i)  # a reference that casts internally: the keep_float64 oracle
    if again:
        more = ctx.calls([_keep64_step(items[i].case, items[i].seed, items[i].ref_transforms) for i in again],
                         memo=True)
        for i, o in zip(again, more, strict=True):
            run = na.build_run(items[i].case, items[i].seed, "derived", items[i].ref, o)
            if not _no_oracle(run):
                out[i] = run
    return [o if o is not None else "no oracle" for o in out]


def judge(run: Run | str, got: list[np.ndarray | None], comps: list[Comparison]) -> Verdict:
    """The rule (module doc) for one call whose outputs ``got`` compared as ``comps``
    against the reference at the declared tolerance."""
    if isinstance(run, str):
        return Verdict(False, why=run)
    bad = [j for j, c in enumerate(comps) if not c.ok]
    if not bad:
        return Verdict(False, why="nothing mismatches")
    outs = {o.j: o for o in run.outs}
    v = Verdict(True, within=True, outputs=bad)
    worst_ratio = -1.0
    for j in bad:
        o = outs.get(j)
        if o is None:
            return Verdict(False, why=f"output {j} is not a floating-point output of the reference")
        if o.oracle is None or o.B is None:
            return Verdict(False, why=run.note or f"no float64 oracle of output {j}")
        g = got[j] if j < len(got) else None
        if g is None or g.shape != o.oracle.shape:
            return Verdict(False, why=f"output {j} has another shape than the oracle's")
        st = error_stats(g, o.oracle, o.dtype, o.B)
        ratio = float(st.budget_ratio) if st.budget_ratio is not None else float("inf")
        x, _ = excess(o, g)
        v.excess = max(v.excess or 0.0, x)
        v.reference_excess = max(v.reference_excess or 0.0, excess(o, o.ref)[0])
        if st.nonfinite or not ratio <= WITHIN or not x <= EXCESS:
            v.within = False
        if ratio > worst_ratio:
            worst_ratio = ratio
            v.candidate_ratio, v.candidate_err, v.worst = ratio, st.max_abs, st.worst
            v.budget = o.bud.as_dict() if o.bud is not None else None
            v.tolerance = o.tol.as_dict()
        if o.ref_err is not None and o.ref_err.budget_ratio is not None:
            v.reference_ratio = max(v.reference_ratio or 0.0, float(o.ref_err.budget_ratio))
        v.need = max(v.need or 0.0, 2.0 * float(np.max(o.B)) if o.B.size else 0.0)
    return v


def judge_outcomes(ctx: CheckContext, items: list[Item], cands: list[list[np.ndarray | None]],
                   comps: list[list[Comparison]]) -> list[Verdict]:
    """:func:`judge` for several calls at once (one reference job for their oracles)."""
    runs = oracle_runs(ctx, items) if items else []
    return [judge(r, g, c) for r, g, c in zip(runs, cands, comps, strict=True)]
