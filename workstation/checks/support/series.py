"""The ``call_series`` step shared by ``late-write``, ``call-count`` and ``thread-census``.

The three checks ask for the same step (:func:`series_step`: the first declared case, the
first two seeds), so the engine's memo runs it once per role and they judge the one result
(:mod:`workstation.harness.series` documents what comes back).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from workstation.analysis.compare import Comparison, compare
from workstation.checks.support.guarded import seed_pair
from workstation.engine.check import NotJudged
from workstation.engine.context import CallOutcome, CheckContext, case_label, step_timeout_s
from workstation.protocol.extras import extra_as
from workstation.protocol.extras.series import CallSeriesExtra
from workstation.protocol.steps import CallSeriesStep, memo_key

#: serial calls on fresh copies (call-count-dependent behaviour shows by the 12th call:
#: GPU MODE's NVFP4 submission switched after the correctness calls).
SERIAL = 12
#: back-to-back calls of the timed-style loop (GPU MODE times 15 calls; kws 12 after 12).
LOOP = 12
#: wait between the two synchronizes after a call (s).
SETTLE_S = 0.02


#: the fewest calls of each phase when the candidate is slow.
MIN_CALLS = 4
#: share of the step's CPU budget the calls are planned to use.
PLAN_SHARE = 0.25


def call_cpu_s(out: CallOutcome) -> float:
    """CPU seconds of one plain call's step (its ``cpu_s``; 0 when it did not finish)."""
    return out.step.cpu_s if out.step is not None else 0.0


def series_step(ctx: CheckContext, call_cpu: float) -> CallSeriesStep:
    """The shared candidate step on the first declared case: :data:`SERIAL` + :data:`LOOP`
    calls, fewer (at least :data:`MIN_CALLS` each) where ``call_cpu`` (CPU s of one plain
    call) times their number exceeds :data:`PLAN_SHARE` of the step budget."""
    a, b = seed_pair(ctx.seeds)
    serial, loop = SERIAL, LOOP
    plan = PLAN_SHARE * step_timeout_s()
    if call_cpu * (serial + loop) > plan:
        k = max(MIN_CALLS, int(plan / max(call_cpu, 1e-9) / 2))
        serial, loop = min(serial, k), min(loop, k)
    return CallSeriesStep(role="candidate", case=dict(ctx.cases[0]), seed_a=a, seed_b=b, serial=serial, loop=loop,
                          settle_s=SETTLE_S)


def run_series(ctx: CheckContext) -> tuple[CallSeriesStep, CallOutcome]:
    """The candidate's series, run once per engine run for the three checks.

    It runs under a CPU budget of kws's choosing (the step budget, or 4x the planned calls'
    CPU when more): over it, the series says nothing about the candidate.

    Raises:
        NotJudged: the plain call of the case failed (correctness judges it), or the series
            was stopped by kws's budget or a limit that says nothing about the candidate.
    """
    case = ctx.cases[0]
    a, _b = seed_pair(ctx.seeds)
    plain = ctx.candidate([(case, a)])[0]
    if not plain.ok:
        raise NotJudged(f"case {case_label(case)}: the candidate {plain.failure_text()[:200]} on a plain call "
                        "(correctness judges it); the call series was not run")
    cpu = call_cpu_s(plain)
    spec = series_step(ctx, cpu)
    budget = max(step_timeout_s(), 4.0 * cpu * (spec.serial + spec.loop + 2))
    out = ctx.stash.once(("call_series", memo_key(spec)),
                         lambda: ctx.run_steps([spec], step_timeout=budget, budget=True)[0])
    if out.step is None and (out.budget or out.unjudged):
        raise NotJudged(f"case {case_label(case)}: the call series ({spec.serial} + {spec.loop} calls) was stopped "
                        f"by kws's budget of {budget:.0f} CPU s ({out.death or out.unjudged}); not examined")
    return spec, out


def series_payload(out: CallOutcome) -> CallSeriesExtra:
    """The series' payload (:class:`~workstation.protocol.extras.series.CallSeriesExtra`); an
    empty one (no serial call, ``loop.n`` 0) when the step left no result (the job died).

    Raises:
        TypeError: ``out`` is a step of another kind (a kws bug).
    """
    return extra_as(out.step.extra, CallSeriesExtra) if out.step is not None else CallSeriesExtra()


def series_failure(spec: CallSeriesStep, out: CallOutcome) -> str:
    """A failed series of a candidate whose plain call returns, in words."""
    done = len(series_payload(out).serial)
    return (f"the candidate {out.failure_text()} during the call series (after {done} of {spec.serial} serial "
            f"call(s) on fresh copies of the same inputs completed), but returns on a plain call")


def compare_array(ctx: CheckContext, case: dict[str, Any], ref: CallOutcome, j: int, got: np.ndarray | None,
                  got_dtype: str) -> Comparison:
    """Output ``j`` of ``ref`` against ``got`` at the task's tolerance."""
    e = ref.outputs[j]
    if got is None:
        return Comparison(ok=False, reason="the output could not be read", shape=(), dtype=e.dtype)
    return compare(e.values, got, ctx.tolerance(case, e.dtype), expected_dtype=e.dtype, got_dtype=got_dtype or e.dtype,
                   nonfinite_ok=ctx.task.contract.nonfinite_inputs)


def changed_elements(a: np.ndarray, b: np.ndarray) -> tuple[int, list[list[int]]]:
    """(count, first indices) of elements that differ bitwise (NaN equal to NaN)."""
    if a.shape != b.shape:
        return int(max(a.size, b.size)), []
    with np.errstate(invalid="ignore"):
        same = (a == b) | ((a != a) & (b != b))
    diff = ~same
    idx = np.argwhere(diff)[:8].tolist()
    return int(diff.sum()), idx
