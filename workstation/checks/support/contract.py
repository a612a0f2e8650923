"""The declared accuracy contract (``[contract] compute_dtype`` / ``accumulate``, a kws
extension; docs/task-format.md, docs/numerics.md "Declared accuracy contracts").

Some kernels compute at the input dtype by design (a library that forms fp16 logits and
whose own tests compare against an fp16-logit reference). Judged against the float64 oracle
alone they look "less precise than the reference", though they are exactly as precise as
their contract allows. When a task declares the contract, ``special-values`` and
``precision-regime`` also run the **contract oracle**: the reference on the same float64
inputs with every floating operation's result rounded to the compute dtype (Higham's model
of one rounding per operation, ``fl(x op y) = (x op y)(1 + d)``, ``|d| <= u``; partial sums
rounded too with ``accumulate = "input"``), the ``contract_round`` monitor of
:mod:`workstation.harness.contract`, in the same sandboxed child as any reference call.
Its error against the float64 oracle, ``E``, is what the contract itself incurs; a
candidate whose error ``C`` is at most ``CONTRACT_MARGIN * E`` plus the check's rounding
floor is judged by the contract (an ``info``), one beyond it still fails with both
figures, and an error that is systematic (a different function) fails regardless. The
same oracle with ``compute = float32`` gives how far the contract is from fp32 (``D``,
always reported when a contract is declared).

Parent side only: this module builds the steps and compares arrays (numpy).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, cast

import numpy as np

from workstation.analysis.compare import unit_roundoff
from workstation.analysis.numerics import FA_FACTOR, error_structure, num
from workstation.engine.context import CallOutcome, CheckContext
from workstation.protocol.steps import ContractRound, Transform, Upcast
from workstation.task.model import AccuracyContract

#: a candidate is within its contract when its error against the float64 oracle is at most
#: this many times the contract oracle's own (FlashAttention's factor for two
#: implementations of one computation, as the ratio rules of docs/numerics.md) plus the
#: check's rounding floor.
CONTRACT_MARGIN = FA_FACTOR

#: the dtypes of :class:`~workstation.protocol.monitors.ContractRound`'s fields.
_Compute = Literal["float16", "bfloat16", "float32", "float64"]
_Accumulate = Literal["float16", "bfloat16", "float32"]


def declared(ctx: CheckContext) -> AccuracyContract | None:
    """The task's declared accuracy contract, or None (judged as without one)."""
    return ctx.task.extensions.accuracy


@dataclass
class ContractRun:
    """The contract oracle and its fp32 twin for one (case, seed, transforms)."""

    case: dict[str, Any]
    contract: CallOutcome
    fp32: CallOutcome
    compute: str
    accumulate: str
    words: str

    def outputs(self, which: str = "contract") -> list[np.ndarray | None]:
        """Float64 arrays of each output (None where the call failed or an output is not floating)."""
        o = self.contract if which == "contract" else self.fp32
        if not o.ok:
            return []
        return [t.values.astype(np.float64) if t.values.dtype.kind == "f" else None for t in o.outputs]


def steps_for(ctx: CheckContext, acc: AccuracyContract, case: dict[str, Any], seed: int,
              transforms: list[Transform] | None = None) -> tuple[Any, Any]:
    """The contract oracle's call step and its fp32 twin (the reference on float64 copies of
    the inputs after ``transforms``)."""
    dt = str(case.get("dtype", "float32"))
    base = [*(transforms or []), Upcast(dtype="float64")]
    # compute_for/accumulate_for return str; msgspec checks the Literal when the job is encoded
    rnd = ContractRound(compute=cast(_Compute, acc.compute_for(dt)),
                        accumulate=cast(_Accumulate, acc.accumulate_for(dt)))
    c = ctx.call_step("reference", case, seed, transforms=base, monitors=[rnd])
    f = ctx.call_step("reference", case, seed, transforms=base,
                      monitors=[ContractRound(compute="float32", accumulate="float32")])
    return c, f


def run_contract(ctx: CheckContext, acc: AccuracyContract,
                 items: list[tuple[dict[str, Any], int, list[Transform]]]) -> list[ContractRun]:
    """One :class:`ContractRun` per (case, seed, transforms), all in one memoised batch."""
    if not items:
        return []
    steps: list[Any] = []
    for case, seed, tr in items:
        steps += list(steps_for(ctx, acc, case, seed, tr))
    outs = ctx.calls(steps, memo=True)
    runs = []
    for i, (case, _seed, _tr) in enumerate(items):
        dt = str(case.get("dtype", "float32"))
        runs.append(ContractRun(dict(case), outs[2 * i], outs[2 * i + 1], acc.compute_for(dt),
                                acc.accumulate_for(dt), acc.describe(dt)))
    return runs


def max_err(got: np.ndarray, oracle: np.ndarray) -> tuple[float, int]:
    """(max |got - oracle| over the elements where both are finite, count of elements where
    ``got`` is not finite but the oracle is)."""
    g = np.asarray(got, dtype=np.float64)
    o = np.asarray(oracle, dtype=np.float64)
    if g.shape != o.shape:
        return float("nan"), 0
    with np.errstate(invalid="ignore", over="ignore"):
        fin = np.isfinite(g) & np.isfinite(o)
        err = float(np.abs(g - o)[fin].max()) if fin.any() else 0.0
    return err, int((np.isfinite(o) & ~np.isfinite(g)).sum())


def contract_error(run: ContractRun, j: int, oracle: np.ndarray) -> dict[str, Any] | None:
    """The contract oracle's error against the float64 oracle on output ``j`` (``E``), and
    how far the contract is from fp32 there (``D = max|contract - fp32 twin|``); None where
    the contract oracle has no such output."""
    c, f = run.outputs("contract"), run.outputs("fp32")
    cj = c[j] if j < len(c) else None
    if cj is None or cj.shape != np.shape(oracle):
        return None
    e, e_nf = max_err(cj, oracle)
    fj = f[j] if j < len(f) else None
    if fj is not None and fj.shape == cj.shape:
        d = max_err(cj, fj)[0]
        f_err = max_err(fj, oracle)[0]
    else:
        d, f_err = float("nan"), float("nan")
    return {"contract_err": e, "contract_nonfinite": e_nf, "from_fp32": d, "fp32_err": f_err,
            "compute": run.compute, "accumulate": run.accumulate, "contract": run.words}


def budget(run: ContractRun, j: int, oracle: np.ndarray) -> np.ndarray | None:
    """A per-element rounding budget under the contract, for the systematic-error classifier
    (:func:`workstation.analysis.numerics.error_structure`): the contract oracle's own error
    at each element, at least one unit roundoff of the compute dtype times ``|oracle|``."""
    c = run.outputs("contract")
    cj = c[j] if j < len(c) else None
    if cj is None or cj.shape != np.shape(oracle):
        return None
    o = np.asarray(oracle, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.abs(cj - o)
        b = np.maximum(np.where(np.isfinite(e), e, 0.0), unit_roundoff(run.compute) * np.abs(o))
    return b


def within(cand_err: float, ce: dict[str, Any], floor: float) -> tuple[bool, float]:
    """(the candidate's error is within what the contract incurs, the limit):
    ``C <= CONTRACT_MARGIN * E + floor``."""
    limit = CONTRACT_MARGIN * ce["contract_err"] + floor
    return bool(np.isfinite(cand_err) and cand_err <= limit), limit


@dataclass
class Judgement:
    """One output of a candidate judged against the declared contract (:func:`judge`)."""

    accepted: bool            # within the limit, all finite, not systematic against the contract's rounding
    figures: dict[str, Any]   # contract_error's figures plus candidate_err, floor, limit
    nonfinite: int            # elements the candidate made non-finite where the oracle is finite
    structure: dict[str, Any]  # error_structure against the contract's per-element budget


def judge(run: ContractRun, j: int, got: np.ndarray, oracle: np.ndarray, floor: float,
          dtype: str) -> Judgement | None:
    """Output ``j`` of the candidate (``got``) against the float64 ``oracle`` under the contract
    of ``run``: accepted when ``C <= CONTRACT_MARGIN * E + floor`` (:func:`within`), with no
    non-finite element the oracle does not have, and an error that is not systematic against
    the contract's rounding budget (:func:`budget`, the classifier of
    :func:`workstation.analysis.numerics.error_structure`). None where the contract oracle
    has no such output."""
    ce = contract_error(run, j, oracle)
    if ce is None:
        return None
    cand_err, cand_nf = max_err(got, oracle)
    inside, limit = within(cand_err, ce, floor)
    b = budget(run, j, oracle)
    structure = error_structure(got, oracle, b, dtype) if b is not None else {"systematic": False}
    return Judgement(bool(inside and not cand_nf and not structure["systematic"]),
                     {**ce, "candidate_err": cand_err, "floor": floor, "limit": limit}, cand_nf, structure)


DERIVATION = ("The contract oracle is the reference on float64 inputs with every floating operation's result "
              "rounded to the compute dtype (Higham's model, one rounding per operation; docs/numerics.md, "
              "'Declared accuracy contracts'); its fp32 twin rounds to float32 instead.")


def within_text(ce: dict[str, Any], cand_err: float) -> str:
    """The info sentence for a candidate the contract accepts."""
    return (f"under the declared contract ({ce['contract']}) the reference itself is off the float64 oracle by "
            f"{num(ce['contract_err'])}; the candidate by {num(cand_err)}")


def beyond_text(ce: dict[str, Any], cand_err: float, limit: float) -> str:
    """The clause for a candidate worse than its contract allows."""
    return (f"worse than the declared contract ({ce['contract']}) allows: the candidate is off the float64 oracle "
            f"by {num(cand_err)}, the reference under the contract by {num(ce['contract_err'])} (limit "
            f"{num(CONTRACT_MARGIN)}x that + floor = {num(limit)})")


def distance_text(acc: AccuracyContract, worst: dict[str, Any], where: str) -> str:
    """The always-reported info: how far the declared contract is from fp32."""
    return (f"the declared contract ({acc.describe()}) is {num(worst['from_fp32'])} from fp32 on {where} "
            f"(max |reference under the contract - the same at fp32|; its error against the float64 oracle "
            f"{num(worst['contract_err'])}, fp32's {num(worst['fp32_err'])})")
