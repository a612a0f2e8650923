"""``case-coverage``: a generated kernel checked over the whole domain its spec declares."""

from __future__ import annotations

from typing import Any

from workstation.analysis.compare import is_float
from workstation.checks.support.costmodel import GPU_MAX_ELEMENTS, CostModel, elements
from workstation.checks.support.legal import UNLISTED, int_params, snap
from workstation.checks.support.ragged import ragged_value
from workstation.checks.support.replay import ran, reference_step
from workstation.checks.support.trials import (
    Trial,
    TrialResult,
    case_key,
    cheapest_per_dtype,
    classify,
    declared_baselines,
    evidence_of,
    failure_text,
    oracle_judgement,
    run_trials,
)
from workstation.engine.check import Check, Finding, register
from workstation.engine.context import CallOutcome, CheckContext, case_label
from workstation.protocol.steps import CallStep, memo_key
from workstation.task.model import ParamSpec

#: most coverage cases run by this check (the rest are reported as not run). Which cases
#: fit is decided by edge-shapes' deterministic cost model
#: (:mod:`workstation.checks.support.costmodel`: cost units, never measured times), so the
#: same task version gets the same coverage runs on every machine.
MAX_RUNS = 16
#: Under the Triton interpreter (CPU) one coverage case may cost this many times the largest
#: declared case's cost units (:mod:`workstation.checks.support.costmodel`; a derived edge
#: shape may cost 2x): each target is one case, so a [params] maximum just past twice the
#: declared sizes is still reached, while one far beyond them (65536 rows: the interpreter runs
#: one Python program per row tile) is left to a GPU run. All of them together: the edge-shapes
#: plan's budget (24x). Other backends on the CPU, and every backend on a GPU, are limited by
#: elements only.
INTERPRETER_CASE_CAP = 4


#: the smallest block a ragged target must overrun: a ragged-tail target is a power of two
#: P >= this (and >= the largest declared value), plus one step, so every power-of-two block
#: up to P leaves a partial last tile after at least one full one.
TAIL_BLOCK = 16


def ragged_tail(spec: ParamSpec, declared_max: int) -> tuple[int, int] | None:
    """(value, P): the smallest legal ``P + m`` (``m`` = ``multiple_of`` or 1) over a power
    of two ``P`` with ``P >= max(TAIL_BLOCK, largest power of two <= declared_max, 2m)``: a
    size just above a block multiple and above the block, whose last tile is partial for
    every power-of-two block from ``2m`` to ``P`` (17 for a 16-row block, 1025 for 1024).
    None when ``[params]`` admits none (then :func:`_targets` falls back to an odd size)."""
    m = spec.multiple_of or 1
    p = max(TAIL_BLOCK, 2 * m)
    while p * 2 <= declared_max:
        p *= 2
    for _ in range(24):
        v = p + m
        if spec.max is not None and v > spec.max:
            return None
        if spec.allows(v):
            return v, p
        p *= 2
    return None


def _targets(p: str, spec: ParamSpec, declared_max: int = 1) -> list[tuple[str, int]]:
    """(what, value) the cases must reach for parameter ``p``: its min, its max (when
    ``[params]`` gives one), a ragged tail (:func:`ragged_tail`: just above a power-of-two
    block multiple, past the block; where none is legal an odd multiple of ``multiple_of``
    or an odd size), or every one of its ``choices``."""
    if spec.choices is not None:
        return [(f"choice {c}", c) for c in spec.choices if isinstance(c, int) and not isinstance(c, bool)]
    out: list[tuple[str, int]] = []
    lo = snap(spec.min if spec.min is not None else 1, spec, "up")
    if lo is not None:
        out.append(("min", lo))
    if spec.max is not None:
        hi = snap(spec.max, spec, "down")
        if hi is not None and hi != lo:
            out.append(("max", hi))
    tail = ragged_tail(spec, declared_max)
    if tail is not None:
        v, blk = tail
        out.append((f"ragged tail ({v} = {blk} + {v - blk}: a partial last tile after full ones for every "
                     f"power-of-two block up to {blk})", v))
        return out
    r = ragged_value(max(lo or 1, 2), spec)
    if r is not None:
        m = spec.multiple_of
        out.append((f"ragged (an odd multiple of {m})" if m and m > 1 else "ragged (odd)", r))
    return out


def _observed_written(ctx: CheckContext) -> list[tuple[CallStep, CallOutcome]]:
    """The battery's candidate calls whose every output element was observed written: the
    call returned, its reference step (the same case, seed and input transforms) ran too, and
    the candidate matched it at the task's tolerance (kws fills fresh allocations with NaN,
    and Pallas outputs start as NaN, so an element no program wrote cannot match). A call
    that only reached a size, failed there or was never compared covers nothing: a coverage
    claim rests on rows seen written (issue 39: "7 of 7 domain targets covered" on a Pallas
    grid of ``M // 16`` blocks)."""
    log = ctx.call_log()
    by_key = {memo_key(s): o for s, o in log if ran(o)}
    out, seen = [], set()
    drop = not ctx.task.contract.nonfinite_inputs
    for s, o in log:
        if s.role != "candidate" or not o.ok or s.repeat != 1:
            continue
        k = memo_key(s)
        if k in seen:
            continue
        seen.add(k)
        rs = reference_step(s)
        ref = by_key.get(memo_key(rs))
        if ref is None or not ref.ok:
            continue
        t = Trial(dict(s.case), int(s.seed), "", list(rs.transforms), list(s.transforms))
        if classify(ctx, t, ref, o, drop).status == "pass":
            out.append((s, o))
    return out


@register
class CaseCoverage(Check):
    """A generated kernel that was never run at the edges of its own declared domain.

    Scheduled for:
        `kind = "generation"`.

    Catches:
        a generated kernel never run at the edges of its declared domain that fails there: the
        spec (`[params]`, `[contract] dtypes`) declares the domain the new kernel serves, and
        the checks must have run it at every corner of it.

    How:
        (phase `after`): kws lists the cases the battery ran whose every output element was
        observed written (every `call` step of the candidate: declared cases, derived shapes,
        layouts, value variants, dtype runs, that returned and matched its reference step at
        the task's tolerance: fresh allocations and Pallas outputs start as NaN, so an element no
        program wrote cannot match; a call that only reached a size, or failed there, covers
        nothing) and
        requires, for every integer case parameter, its `[params]` `min` (1 when unlisted),
        its `max` (when given), a ragged tail (`P + m` over a power of two `P` at least 16 and
        at least the largest declared value rounded down to a power of two, `m` = `multiple_of`
        or 1: 17 for small sizes, 1025 beside a declared 1024; the last tile is partial after
        full ones for every power-of-two block up to `P`; an odd multiple of `m` where no such
        size is legal), every one of its
        `choices`; and every `[contract] dtypes` entry. Each target no call reached is run
        here against the reference (one parameter moved from the cheapest declared case; for a
        maximum, the other parameters at their smallest legal value so that the run fits), in
        the order min, ragged, max, dtypes, as far as the budget allows (on the CPU the cost
        model of `edge-shapes`, fitted on the declared cases' call times: 8 s predicted per
        case, 20 s in all, 12 s per call; 16 runs at most). The summary lists, per parameter and
        dtype, which call covered each target.

    Findings:
        | finding | severity |
        |---|---|
        | a target run fails (mismatch, NaN, raised, crashed) where the declared case it came from passes | `fail` |
        | a target run mismatches, but the candidate is within tolerance of the float64 oracle and the reference is not (the reference is off at that size) | `warn` |
        | targets not run (CPU: interpreter cost) | `info` (`warn` on a GPU) |
        | targets dropped by make_inputs/the reference; the coverage table | `info` |

    Example:
        (`softmax-wide-gen`): `at the max of N (N=8192), case M=1 N=8192 float32: 7766 of
        8192 elements ... outside atol=1e-06, rtol=1e-05` (a kernel whose single block is capped
        at 4096 columns, run at the `[params]` maximum).

    Source:
        kernels generated against a few round sizes and the first dtype of the list, which break
        at the extremes of the declared range (index overflow, a block-size cap, a grid limit) or
        at the other dtypes.

    Limits:
        a target counts as covered only by a call whose outputs matched the reference (a
        failing call elsewhere in the battery does not cover it: the target is run here); targets
        are reached one parameter at a time (corners of several parameters at once only
        as far as other checks tried them); on the CPU large maxima are usually beyond the
        interpreter's budget.

    Not judged when:
        the candidate's backend or a library it imports cannot run here, or `make_inputs` or
        the reference is broken on a declared case (a task problem, naming the file):
        `NotJudged`. Targets the CPU budget leaves out are listed (`info`; `warn` on a GPU).

    Forgeable:
        Measured in the job process: the outputs only (copied by the harness into the result files).
        Still forgeable from inside: nothing short of computing the right values: the harness's writer and the result path are watched, and a result file written by task code is refused.
    """

    id = "case-coverage"
    order = 37
    title = "Generation: cases cover every [params] extreme and dtype"
    phase = "after"
    kinds = ("generation",)

    def run(self, ctx: CheckContext) -> list[Finding]:
        seed = ctx.seeds[0]
        declared = declared_baselines(ctx, ctx.cases, seed)
        log = _observed_written(ctx)
        params = int_params(ctx.cases)
        cheapest = cheapest_per_dtype(ctx)
        base = cheapest[0]
        cost = CostModel.plan(ctx.cases, params, ctx.on_gpu)
        table, todo, dtypes = _domain_targets(ctx, params, base, seed, log)
        runnable, skipped = _fit(ctx, todo, cost, params)
        results = run_trials(ctx, [t for _, t in runnable]) if runnable else []
        fails: list[tuple[dict[str, Any], TrialResult]] = []
        for (row, _), r in zip(runnable, results, strict=True):
            row["run_here"] = r.status
            if r.status == "dropped":
                row["dropped_because"] = r.reason
            elif r.failed:
                fails.append((row, r))
            else:
                row["covered_by"] = "run by case-coverage"
        findings: list[Finding] = []
        for row, r in fails:
            found = self._failure(ctx, row, r, declared.get(case_key(base)))
            if found is not None:
                findings.append(found)
        return findings + self._summary(ctx, table, skipped, dtypes)

    def _failure(self, ctx: CheckContext, row: dict[str, Any], r: TrialResult,
                 origin: TrialResult | None) -> Finding | None:
        """The finding of a target run here that failed (None when the declared case it varies,
        ``origin``, fails too); ``warn`` naming the reference when the float64 oracle finds it off."""
        if origin is not None and origin.failed:
            row["inherits"] = "the declared case it varies fails too"
            return None
        ev = {"target": row, **evidence_of(r)}
        head = f"at the {row['target']} of {row['param']} ({row['param']}={row['value']}), case " \
               f"{case_label(r.trial.case)}: {failure_text(r)}"
        if r.status == "mismatch":
            # a float64 oracle tells a candidate error from a reference that is off itself at
            # this size (as edge-shapes does): then the reference, not the candidate, is named
            ev["oracle"] = verdict = oracle_judgement(ctx, r)
            if verdict.get("available") and verdict["candidate_within"] and not verdict["reference_within"]:
                row["reference_off"] = True
                return self.finding(
                    ctx, "warn", head + f"; but the candidate is within tolerance of the float64 oracle (error "
                    f"{verdict['candidate_max_err']:.3g}) and the reference is not ({verdict['reference_max_err']:.3g}): "
                    "the reference is off at this size (reference-suspect judges it)", ev,
                    case=r.trial.case, seed=r.trial.seed)
        return self.finding(ctx, "fail", head, ev, case=r.trial.case, seed=r.trial.seed)

    def _summary(self, ctx: CheckContext, table: list[dict[str, Any]], skipped: list[dict[str, Any]],
                 dtypes: list[str]) -> list[Finding]:
        """The findings on the targets as a whole: those dropped, those not run, and how many are covered."""
        findings: list[Finding] = []
        dropped = [row for row in table if row.get("run_here") == "dropped"]
        if dropped:
            findings.append(self.finding(
                ctx, "info", f"{len(dropped)} target(s) rejected by make_inputs or the reference (dropped): "
                + ", ".join(f"{r['param']}={r['value']}" for r in dropped), {"dropped": dropped}))
        if skipped:
            sev = "warn" if ctx.on_gpu else "info"
            findings.append(self.finding(
                ctx, sev, f"{len(skipped)} target(s) of the declared domain not run"
                + (" (the Triton interpreter's cost on the CPU; a GPU runs them)" if not ctx.on_gpu else "")
                + ": " + ", ".join(f"{r['param']}={r['value']} ({r['target']}: {r['not_run']})" for r in skipped[:8]),
                {"not_run": skipped}))
        covered = sum(1 for row in table if row.get("covered_by"))
        findings.append(self.finding(
            ctx, "info", f"{covered} of {len(table)} domain targets covered by a call whose every output element "
            "was observed written (it matched the reference) ("
            + "; ".join(f"{r['param']} {r['target']} {r['value']}: {r.get('covered_by') or r.get('run_here') or 'not run'}"
                        for r in table) + ")",
            {"targets": table, "dtypes": dtypes, "floating": [d for d in dtypes if is_float(d)]}))
        return findings


def _domain_targets(ctx: CheckContext, params: list[str], base: dict[str, Any], seed: int,
                    log: list[tuple[CallStep, CallOutcome]]) -> tuple[list[dict[str, Any]],
                                                                  list[tuple[dict[str, Any], Trial]], list[str]]:
    """Every target of the declared domain as a table row (covered by a logged call or not),
    the trials of those not covered (in order of priority), and the contract's dtypes."""
    task = ctx.task
    table: list[dict[str, Any]] = []
    todo: list[tuple[dict[str, Any], Trial]] = []
    for p in params:
        spec = task.params.get(p, UNLISTED)
        for what, v in _targets(p, spec, max(int(c[p]) for c in ctx.cases)):
            hit = next((s for s, _ in log if s.case.get(p) == v), None)
            row = {"param": p, "target": what, "value": v,
                   "covered_by": f"case {case_label(dict(hit.case))}" if hit is not None else None}
            table.append(row)
            if hit is None:
                case = {**base, p: v}
                if what == "max":  # the other sizes at their smallest legal value, so the run fits
                    for q in params:
                        if q != p:
                            case[q] = snap(1, task.params.get(q, UNLISTED), "up") or base[q]
                todo.append((row, Trial(case, seed, f"{p}={v} ({what})")))
    dtypes = [d for d in task.contract.dtypes if d]
    for d in dtypes:
        hit = next((s for s, _ in log if s.case.get("dtype") == d), None)
        row = {"param": "dtype", "target": "contract dtype", "value": d,
               "covered_by": f"case {case_label(dict(hit.case))}" if hit is not None else None}
        table.append(row)
        if hit is None:
            todo.append((row, Trial(dict(base, dtype=d), seed, f"dtype {d} (contract)")))
    order = {"min": 0, "ragged": 1, "max": 2, "contract dtype": 3}
    todo.sort(key=lambda t: order.get(t[0]["target"].split(" ")[0], 4))
    return table, todo, dtypes


def _fit(ctx: CheckContext, todo: list[tuple[dict[str, Any], Trial]], cost: CostModel,
         params: list[str]) -> tuple[list[tuple[dict[str, Any], Trial]], list[dict[str, Any]]]:
    """The targets to run here (within the element limit, the interpreter's cost caps and
    ``MAX_RUNS``) and the rows of those left out, each with its ``not_run`` reason."""
    runnable: list[tuple[dict[str, Any], Trial]] = []
    skipped: list[dict[str, Any]] = []
    interpreted = not ctx.on_gpu and ctx.backend_of("candidate") == "triton"
    cap, budget = INTERPRETER_CASE_CAP * cost.declared_max, cost.budget
    total = 0
    for row, t in todo:
        units = cost.units(t.case)
        if elements(t.case, params) > GPU_MAX_ELEMENTS:
            row["not_run"] = f"{elements(t.case, params)} elements, over the {GPU_MAX_ELEMENTS} a derived case may have"
            skipped.append(row)
        elif interpreted and units > cap:
            row["not_run"] = (f"{units} cost units, over the {cap} a coverage case may have under the Triton "
                              f"interpreter ({INTERPRETER_CASE_CAP}x the largest declared case; a GPU runs it)")
            skipped.append(row)
        elif interpreted and total + units > budget:
            row["not_run"] = (f"the coverage cases would exceed {budget} cost units together under the Triton "
                              "interpreter (a GPU runs it)")
            skipped.append(row)
        elif len(runnable) >= MAX_RUNS:
            row["not_run"] = f"beyond the {MAX_RUNS} coverage runs of one check"
            skipped.append(row)
        else:
            total += units if interpreted else 0
            runnable.append((row, t))
    return runnable, skipped
