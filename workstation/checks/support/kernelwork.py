"""Which output elements the candidate's own kernels produced: the poisoned-store run
(``kernel-work``; ``fallback`` and ``profile`` confirm their suspicions with it).

The candidate runs on a case and seed once plainly (memoised with every other check) and
once under the :class:`~workstation.protocol.steps.PoisonStores` monitor: every ``tl.store``
and atomic of its Triton kernels writes poison into memory (NaN payloads for floats, 0x5A
bytes for integers) while the kernels themselves read back what they stored
(:mod:`workstation.harness.interp_ops`), so the kernels compute exactly as in the plain call
and only code outside them (framework ops, numpy, the host) sees poison where they wrote. An
output element that holds its plain value after the poisoned call depends on no kernel
store: a framework op or host code produced it.

Elements that cannot tell are left out, each counted by its reason: a NaN in the plain
output (poison is NaN too), an integer element whose plain value is the poison value, a bool
output (``int1`` stores keep their value: no value to spare), an element left as the input at
the same place (an in-place or ``out=`` buffer the kernels did not touch there, a pass-through
output). Elements that hold one constant value in both runs, as a part of the output or an
all-zero whole, are an initialisation the kernels did not overwrite (``torch.zeros`` before a
sparse scatter), reported but not judged a fault, when that value is one outputs are filled with
(0, +-1, +-inf, the dtype's extremes: :func:`is_fill`); any other value was computed.

The poisoned run is a budget of kws's own (:data:`BUDGET_FACTOR` x the plain call's CPU
seconds, at least the step budget): a run over it, or one that raised or died, says nothing
about the kernels (host code may have read their poisoned output as sizes or indices), so
its deaths are never charged to the candidate; the case is not judged.

Same imports as the checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np

from workstation.checks.support.ragged import ragged_case
from workstation.checks.support.trials import cheapest_per_dtype
from workstation.engine.context import CallOutcome, CheckContext, case_label, step_timeout_s
from workstation.protocol.extras.calls import CallExtra
from workstation.protocol.extras.monitors import PoisonStoresReport
from workstation.protocol.extras.probes import InputsOnlyExtra
from workstation.protocol.sentinels import POISON, poison_value
from workstation.protocol.steps import (
    CallStep,
    InputsOnlyStep,
    PoisonMaskedLoads,
    PoisonStores,
    Step,
    memo_key,
)

#: the poisoned call's CPU budget: this many times the plain call's CPU seconds (at least the
#: step budget).
BUDGET_FACTOR = 8.0
#: elements listed in a finding's evidence.
SAMPLE = 6


@dataclass
class OutputWork:
    """One output of one case: how many of its elements the kernels' stores reached.

    Attributes:
        index: the output's position; dtype, shape: as the plain call returned it.
        judged: elements that can tell (module doc).
        unchanged: judged elements that kept their plain value under poisoned stores.
        excluded: reason -> elements left out.
        constant: the one value the unchanged elements hold, when they are an
            initialisation (module doc); None otherwise.
        where: where the unchanged elements lie, in the output's terms.
        sample: a few unchanged elements (index, value).
    """

    index: int
    dtype: str
    shape: tuple[int, ...]
    judged: int = 0
    unchanged: int = 0
    excluded: dict[str, int] = field(default_factory=dict)
    constant: float | None = None
    where: str = ""
    sample: list[dict[str, Any]] = field(default_factory=list)

    @property
    def computed_elsewhere(self) -> int:
        """Unchanged elements that are not an initialisation: produced outside the kernels."""
        return 0 if self.constant is not None else self.unchanged

    def evidence(self) -> dict[str, Any]:
        return {"output": self.index, "dtype": self.dtype, "shape": list(self.shape), "judged": self.judged,
                "unchanged": self.unchanged, "where": self.where, "excluded": self.excluded,
                **({"constant": self.constant} if self.constant is not None else {}),
                **({"unchanged_sample": self.sample} if self.sample else {})}


@dataclass
class CaseWork:
    """The poisoned-store run of one case against its plain run.

    Attributes:
        case, seed, label: what ran (``label``: why this case: "declared", "ragged ...").
        judged: the comparison was made (else ``reason`` says why not).
        reason: why it was not, in words.
        plain_failed: the plain call itself failed (correctness and edge-shapes judge that).
        outputs: per output, what the stores reached.
        report: the monitor's report (None when the poisoned run did not return).
    """

    case: dict[str, Any]
    seed: int
    label: str
    judged: bool = False
    reason: str = ""
    plain_failed: bool = False
    outputs: list[OutputWork] = field(default_factory=list)
    report: PoisonStoresReport | None = None

    @property
    def bad(self) -> list[OutputWork]:
        """Outputs with elements produced outside the kernels."""
        return [o for o in self.outputs if o.computed_elsewhere]

    def bad_text(self) -> str:
        """``"37 of 400 output elements (the last 37 columns of every row)"`` for the first
        output with elements produced outside the kernels."""
        o = self.bad[0]
        which = f"elements of output {o.index}" if len(self.outputs) > 1 else "output elements"
        return f"{o.unchanged} of {o.judged} {which} ({o.where})"

    @property
    def head(self) -> str:
        return f"case {case_label(self.case)} ({self.label}, seed {self.seed})"

    def evidence(self) -> dict[str, Any]:
        ev: dict[str, Any] = {"case": self.case, "seed": self.seed, "why": self.label,
                              "outputs": [o.evidence() for o in self.outputs]}
        if self.report is not None:
            ev["kernel_stores"] = msgspec.to_builtins(self.report)
        if self.reason:
            ev["not_judged"] = self.reason
        return ev


def work_cases(ctx: CheckContext) -> list[tuple[dict[str, Any], str]]:
    """The cases the poisoned-store run covers: every declared case, and the ragged variant
    (:func:`~workstation.checks.support.ragged.ragged_case`) of the cheapest declared case of
    each dtype; with ``--case``, that case."""
    if ctx.case_filter:
        return [(dict(ctx.case_filter), "the case given")]
    out: list[tuple[dict[str, Any], str]] = [(dict(c), "declared") for c in ctx.cases]
    for base in cheapest_per_dtype(ctx):
        rag = ragged_case(base, ctx.task.params)
        if rag is not None and all(rag != c for c, _ in out):
            moved = ", ".join(f"{k} {base[k]} -> {rag[k]}" for k in rag if rag[k] != base.get(k))
            out.append((rag, f"ragged: {moved}"))
    return out


def plain_step(case: dict[str, Any], seed: int, label: str) -> CallStep:
    """The plain call the poisoned one is compared with (a derived case runs with masked-load
    poison, as ``edge-shapes`` runs derived shapes)."""
    mons = [] if label in ("declared", "the case given") else [PoisonMaskedLoads()]
    return CallStep(role="candidate", case=dict(case), seed=int(seed), monitors=list(mons))


def poisoned_step(plain: CallStep) -> CallStep:
    """``plain`` with every kernel store poisoned."""
    return CallStep(role="candidate", case=dict(plain.case), seed=plain.seed,
                    monitors=[*plain.monitors, PoisonStores()])


def run_poisoned(ctx: CheckContext, plains: list[CallStep], outs: list[CallOutcome]) -> list[CallOutcome]:
    """The poisoned runs of ``plains`` (whose plain outcomes are ``outs``), memoised for the
    run; a budget of kws's own, and no death of theirs charged to the candidate (module doc)."""
    cpu = max([o.step.cpu_s for o in outs if o.step is not None] + [0.0])
    return _run_memo(ctx, [poisoned_step(p) for p in plains], cpu)


def _run_memo(ctx: CheckContext, steps: list[CallStep], cpu: float) -> list[CallOutcome]:
    budget = max(step_timeout_s(), BUDGET_FACTOR * cpu * max(s.repeat for s in steps))

    def run(todo: list[CallStep]) -> list[CallOutcome]:
        n = len(ctx.ledger)
        got = ctx.run_steps(list[Step](todo), step_timeout=budget, budget=True)
        del ctx.ledger[n:]  # poison read by host code is kws's doing, never the candidate's death
        return got

    keys = [("poisoned_stores", memo_key(s)) for s in steps]
    futs, mine = ctx.stash.claim(keys)
    if mine:  # one job for the steps no other check asked for yet
        try:
            for i, o in zip(mine, run([steps[i] for i in mine]), strict=True):
                futs[i].set_result(o)
        except BaseException as e:
            ctx.stash.fail([keys[i] for i in mine], [futs[i] for i in mine], e)
            raise
    return [f.result() for f in futs]


def later_call_work(ctx: CheckContext, case: dict[str, Any], seed: int, earlier: int) -> CaseWork:
    """The poisoned-store judgement of call ``earlier + 1`` on the same inputs, the ``earlier``
    calls before it run plainly in the same process (a result kept from them and returned again
    holds plain values: it did not come from this call's kernels)."""
    plain = ctx.calls([CallStep(role="candidate", case=dict(case), seed=int(seed))], memo=True)[0]
    step = CallStep(role="candidate", case=dict(case), seed=int(seed), repeat=earlier + 1,
                    monitors=[PoisonStores(from_call=earlier + 1)])
    pois = _run_memo(ctx, [step], plain.step.cpu_s if plain.step is not None else 0.0)[0]
    return judge(ctx, case, seed, f"call {earlier + 1} on the same inputs, after {earlier} plain call(s)", plain, pois)


def judge(ctx: CheckContext, case: dict[str, Any], seed: int, label: str, plain: CallOutcome,
          pois: CallOutcome) -> CaseWork:
    """What the kernels' stores reached on one case (module doc)."""
    cw = CaseWork(dict(case), seed, label)
    if not plain.ok:
        cw.reason = f"the candidate {plain.failure_text()[:200]} on its plain call"
        cw.plain_failed = True
        return cw
    if pois.step is None:
        cw.reason = (f"under poisoned stores the candidate's call {pois.death or 'did not finish'}"
                     + (" (over kws's own budget)" if pois.budget else ""))
        return cw
    rep = pois.payload(CallExtra).monitors.poison_stores if pois.ok else None
    if not pois.ok:
        cw.reason = (f"under poisoned stores the candidate {pois.failure_text()[:200]}: host code read what its "
                     "kernels wrote (poison) and could not go on")
        return cw
    if rep is None or not rep.active:
        cw.reason = "the store poison was not installed" + (f" ({rep.why})" if rep is not None and rep.why else "")
        return cw
    cw.report = rep
    if len(plain.outputs) != len(pois.outputs):
        cw.reason = (f"under poisoned stores the candidate returned {len(pois.outputs)} outputs, "
                     f"{len(plain.outputs)} plainly")
        return cw
    inputs: list[np.ndarray | None] | None = None
    for j, (a, b) in enumerate(zip(plain.outputs, pois.outputs, strict=True)):
        ow = OutputWork(j, a.dtype, tuple(a.shape))
        cw.outputs.append(ow)
        if a.values.shape != b.values.shape:
            ow.excluded["another shape under poison"] = int(a.values.size)
            continue
        if a.dtype == "bool" or a.values.dtype == np.bool_:
            ow.excluded["bool output (int1 stores keep their value)"] = int(a.values.size)
            continue
        p, q = a.values, b.values
        can = np.ones(p.shape, dtype=bool)
        if p.dtype.kind in "fc":
            nan = np.isnan(p)
            if nan.any():
                ow.excluded["NaN in the plain output"] = int(nan.sum())
                can &= ~nan
            with np.errstate(invalid="ignore"):
                same = (p == q) | (np.isnan(p) & np.isnan(q))
        else:
            pv = poison_value(a.dtype, "A") if a.dtype in POISON["A"] else None
            if pv is not None:
                coincide = p == pv
                if coincide.any():
                    ow.excluded["the plain value is the poison value"] = int(coincide.sum())
                    can &= ~coincide
            same = p == q
        unchanged = same & can
        if unchanged.any():
            if inputs is None:
                inputs = _inputs(ctx, case, seed)
            left = np.zeros(p.shape, dtype=bool)
            for x in inputs:
                if x is not None and x.shape == p.shape:
                    with np.errstate(invalid="ignore"):
                        left |= unchanged & (x == p)
            if left.any():
                ow.excluded["left as the input there"] = int(left.sum())
                can &= ~left
                unchanged &= ~left
        ow.judged = int(can.sum())
        ow.unchanged = int(unchanged.sum())
        if ow.unchanged:
            vals = np.unique(p[unchanged])
            if vals.size == 1 and is_fill(float(vals[0]), a.dtype) and (ow.unchanged < ow.judged or vals[0] == 0):
                ow.constant = float(vals[0])
            ow.where = "every element that can tell" if ow.unchanged == ow.judged and ow.judged < p.size else \
                where_text(unchanged)
            flat = np.flatnonzero(unchanged)[:SAMPLE]
            ow.sample = [{"index": [int(i) for i in np.unravel_index(k, p.shape)] if p.ndim else [],
                          "value": float(p.reshape(-1)[k]) if p.dtype.kind == "f" else int(p.reshape(-1)[k])}
                         for k in flat]
    cw.judged = True
    return cw


#: the largest finite value of each float dtype (a fill such as ``torch.finfo(dt).min``).
_FMAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38, "float32": float(np.finfo(np.float32).max),
         "float64": float(np.finfo(np.float64).max)}


def is_fill(v: float, dtype: str) -> bool:
    """Whether ``v`` is a value outputs are initialised with: 0, +-1, +-inf, the dtype's
    largest finite magnitude, an integer type's extremes."""
    if v in (0.0, 1.0, -1.0) or np.isinf(v):
        return True
    if dtype in _FMAX:
        return abs(v) == _FMAX[dtype]
    if dtype.startswith(("int", "uint")):
        info = np.iinfo(getattr(np, dtype))
        return v in (float(info.max), float(info.min))
    return False


def _inputs(ctx: CheckContext, case: dict[str, Any], seed: int) -> list[np.ndarray | None]:
    """The tensor inputs' values of ``case``/``seed`` as made (None for a non-tensor)."""
    out = ctx.calls([InputsOnlyStep(case=dict(case), seed=int(seed))], memo=True)[0]
    if not out.ok or out.step is None:
        return []
    arrays = out.step.arrays
    return [arrays.get(f"in{d.index}") for d in out.payload(InputsOnlyExtra).inputs]


def where_text(mask: np.ndarray) -> str:
    """Where the True elements of ``mask`` lie, in the output's terms: ``"every element"``,
    ``"the last 37 columns of every row"``, ``"rows 60..63 of 64"``, ``"elements 96..99 of
    100"``, else a count with its bounding rows and columns."""
    n = int(mask.sum())
    if mask.size == 0 or n == 0:
        return ""
    if n == mask.size:
        return "every element" if n > 1 else "the only element"
    if mask.ndim <= 1:
        idx = np.flatnonzero(mask.reshape(-1))
        lo, hi, size = int(idx[0]), int(idx[-1]), mask.size
        if hi - lo + 1 == n:
            if hi == size - 1:
                return f"the last {_n(n, 'element')} ({lo}..{hi} of {size})"
            if lo == 0:
                return f"the first {_n(n, 'element')} (0..{hi} of {size})"
            return f"elements {lo}..{hi} of {size}"
        return f"{n} elements between {lo} and {hi} of {size}"
    rows, cols = int(np.prod(mask.shape[:-1])), mask.shape[-1]
    m2 = mask.reshape(rows, cols)
    r_any, c_any = m2.any(axis=1), m2.any(axis=0)
    ri, ci = np.flatnonzero(r_any), np.flatnonzero(c_any)
    box = np.array_equal(m2, np.outer(r_any, c_any))
    r_run = ri[-1] - ri[0] + 1 == ri.size
    c_run = ci[-1] - ci[0] + 1 == ci.size
    if box and r_run and c_run:
        all_rows, all_cols = ri.size == rows, ci.size == cols
        span = f"column {ci[0]} of {cols}" if ci.size == 1 else f"columns {ci[0]}..{ci[-1]} of {cols}"
        rspan = f"row {ri[0]} of {rows}" if ri.size == 1 else f"rows {ri[0]}..{ri[-1]} of {rows}"
        if all_rows and ci[-1] == cols - 1:
            return f"the last {_n(ci.size, 'column')} of every row ({span})"
        if all_rows and ci[0] == 0:
            return f"the first {_n(ci.size, 'column')} of every row ({span})"
        if all_cols and ri[-1] == rows - 1:
            return f"the last {_n(ri.size, 'row')} ({rspan})"
        if all_cols:
            return rspan
        return f"{rspan}, {span}"
    return (f"{n} elements in {ri.size} of {rows} rows and {ci.size} of {cols} columns "
            f"(rows {ri[0]}..{ri[-1]}, columns {ci[0]}..{ci[-1]})")


def _n(k: int, noun: str) -> str:
    """``"column"`` for 1, ``"37 columns"`` otherwise."""
    return noun if k == 1 else f"{k} {noun}s"


def kernel_work(ctx: CheckContext, cases: list[tuple[dict[str, Any], str]], seed: int) -> list[CaseWork]:
    """The poisoned-store judgement of every case of ``cases`` (``(case, label)``) at ``seed``."""
    plains = [plain_step(c, seed, label) for c, label in cases]
    outs = ctx.calls(list[Step](plains), memo=True)
    pois = run_poisoned(ctx, plains, outs)
    return [judge(ctx, c, seed, label, o, p) for (c, label), o, p in zip(cases, outs, pois, strict=True)]
