"""Runs a battery of checks on one task and builds the contract's report.

The engine owns a :class:`~workstation.runner.sandbox.Runner` (or borrows one), gives each
check a :class:`~workstation.engine.context.CheckContext`, runs independent checks in
parallel threads (their child jobs share the runner's slots, one per core), then
``exclusive`` checks (timing) alone. It emits events as checks start and finish, so the TUI
can fill in live, and returns the results (``kws check --json``'s shape, see
:mod:`workstation.engine.report`).
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workstation.engine.check import (
    Check,
    CheckResult,
    Finding,
    NotJudged,
    Skip,
    check_class,
    check_ids,
    ids_where,
    status_of,
)
from workstation.engine.context import DEFAULT_SEEDS, CheckContext, Event, TaskDied, case_label
from workstation.runner import Runner, RunnerError
from workstation.runner.sandbox import tree_digest
from workstation.runner.taskcopy import TaskFolderError
from workstation.schema.problem import Problem
from workstation.task.format import load_task
from workstation.task.model import Task

#: how a role is named in a death finding.
_WHO = {"candidate": "the candidate", "reference": "the reference", "baseline": "the baseline",
        "test": "the author's test", "bench": "the author's benchmark", "inputs": "make_inputs",
        "timing": "the timed code"}


@dataclass
class EngineResult:
    """The results of one engine run, before rendering."""

    task: Task
    device: str
    versions: dict[str, str]
    seeds: tuple[int, ...]
    results: list[CheckResult]
    task_tree: str | None
    seconds: float
    extensions: dict[str, Any] = field(default_factory=dict)
    #: ``"bwrap"`` or ``"none"`` (how task code was isolated).
    sandbox: str = "none"
    #: what the report should say about the isolation (memory cap, inherited limits...).
    notes: tuple[str, ...] = ()

    @property
    def runner_failed(self) -> bool:
        """True when kws's own runner failed in some check (``kws check`` exits 3)."""
        return any(r.runner_failed for r in self.results)

    @property
    def findings(self) -> list[Finding]:
        return [f for r in self.results for f in r.findings]


def task_tree(task: Task) -> str | None:
    """The git tree id of the task folder in its queue's HEAD (``None`` outside a queue
    repository). Where the work tree differs from HEAD, the id has ``+dirty`` appended,
    so a report never claims a version it did not see."""
    from workstation.engine.derivation import queue_tree

    tree, dirty = queue_tree(task.dir, task.id)
    if tree is None:
        return None
    return tree + ("+dirty" if dirty else "")


def select_checks(only: Iterable[str] | None, task: Task | None = None) -> list[str]:
    """Check ids to run, in report order: those in ``only``, or every registered check
    that :meth:`~workstation.engine.check.Check.applies` to ``task``.

    Raises:
        KeyError: an id that is not a registered check.
    """
    known = check_ids()
    if only:
        ids = [i.strip() for i in only if i.strip()]
        unknown = [i for i in ids if i not in known]
        if unknown:
            raise KeyError(f"unknown check id(s): {', '.join(unknown)}; known: {', '.join(known)}")
        return [i for i in known if i in ids]
    if task is not None:
        known = [i for i in known if not check_class(i).applies(task)]
    return known


def run_checks(task: Task, runner: Runner, *, only: Iterable[str] | None = None,
               seeds: Iterable[int] = DEFAULT_SEEDS, on_event: Event | None = None,
               task_arg: str | None = None, case: dict[str, Any] | None = None) -> EngineResult:
    """Run the selected checks on ``task`` and return their results.

    Phases (:data:`~workstation.engine.check.Phase`): ``parallel`` checks in threads (their
    child jobs share the runner's slots), then ``exclusive`` ones alone, then ``after``
    ones with every earlier result in ``ctx.results``; finally each check's
    :meth:`~workstation.engine.check.Check.after_all` sees the end state.

    Events (``on_event(kind, data)``): ``"start"`` {checks, device, timing_checks,
    timing_evidence_checks}, ``"check_started"`` {check}, ``"check_finished"`` {result:
    CheckResult}, ``"done"`` {result: EngineResult}.
    """
    emit = on_event or (lambda kind, data: None)
    t0 = time.monotonic()
    ids = select_checks(only, task)
    try:
        digest = tree_digest(task.dir)  # refuses device nodes, FIFOs, symlinks leaving the folder
    except TaskFolderError as e:
        raise Problem(e.folder / e.path, "", e.problem) from None
    ctx = CheckContext(task, runner, seeds=seeds, task_arg=task_arg, case_filter=case)
    device = runner.device
    emit("start", {"checks": ids, "device": device.label, "sandbox": device.sandbox,
                   "timing_checks": ids_where(phase="exclusive", among=ids),
                   "timing_evidence_checks": ids_where(timing_evidence=True, among=ids)})
    ctx.task_digest_before = digest
    checks = {cid: check_class(cid)() for cid in ids}
    returned: set[str] = set()  # checks whose run returned findings (after_all sees them)

    def one(cid: str) -> CheckResult:
        emit("check_started", {"check": cid})
        res, ran = run_one(checks[cid], ctx.for_check(cid), task)
        if ran:
            returned.add(cid)
        ctx.results[cid] = res
        emit("check_finished", {"result": res})
        return res

    parallel = [c for c in ids if checks[c].phase == "parallel"]
    with ThreadPoolExecutor(max_workers=max(2, runner.max_parallel * 2)) as pool:
        list(pool.map(one, parallel))
    for phase in ("exclusive", "after"):
        for cid in ids:
            if checks[cid].phase == phase:
                one(cid)
    for cid in ids:
        res = ctx.results[cid]
        if cid not in returned or res.status == "error":
            continue
        extra = checks[cid].after_all(ctx)
        if extra:
            res.findings.extend(extra)
            res.status = status_of(res.findings, not_judged=res.not_judged)
            res.reason = res.not_judged if res.status == "skip" else ""
    res = EngineResult(task=task, device=device.label, versions=dict(device.versions),
                       seeds=tuple(seeds), results=[ctx.results[c] for c in ids],
                       task_tree=task_tree(task), seconds=time.monotonic() - t0, extensions=dict(ctx.extensions),
                       sandbox=device.sandbox, notes=tuple(device.notes))
    emit("done", {"result": res})
    return res


def run_one(check: Check, view: CheckContext, task: Task) -> tuple[CheckResult, bool]:
    """Run one check on its view of the run: its result (deaths of task code charged,
    :func:`charge_deaths`; its timings, :mod:`workstation.engine.costs`) and whether its
    ``run`` returned findings (``after_all`` then sees it). ``Skip``/``NotJudged`` make it
    ``skip``, ``TaskDied`` a ``fail``, a runner failure an ``error`` (exit 3), any other
    exception an ``error`` (a bug in kws: reported, never a verdict)."""
    cid = check.id
    s, cpu0 = time.monotonic(), time.thread_time()
    ran = False
    try:
        if reason := check.applies(task) or check.skip_reason(task):
            raise Skip(reason)
        findings = check.run(view)
        # judged what it returned; could not judge the parts it named (never ``pass``)
        unjudged = "; ".join(view.unjudged)
        status = status_of(findings, not_judged=unjudged)
        res = CheckResult(cid, status, time.monotonic() - s, unjudged if status == "skip" else "", findings,
                          not_judged=unjudged)
        ran = True
    except NotJudged as e:
        why = "; ".join([*view.unjudged, str(e)])
        res = CheckResult(cid, "skip", time.monotonic() - s, why, not_judged=why)
    except Skip as e:
        res = CheckResult(cid, "skip", time.monotonic() - s, str(e))
    except TaskDied as e:
        res = CheckResult(cid, "fail", time.monotonic() - s, "", [check.finding(view, "fail", str(e), e.evidence)])
    except RunnerError as e:  # kws's runner (or its environment) failed: exit code 3
        res = CheckResult(cid, "error", time.monotonic() - s, f"the isolated runner failed: {e}",
                          not_judged=f"the isolated runner failed: {str(e)[:300]}", runner_failed=True)
    except Exception as e:  # noqa: BLE001  (a bug in kws: reported, never a verdict)
        tb = traceback.format_exc(limit=8)
        res = CheckResult(cid, "error", time.monotonic() - s, f"{type(e).__name__}: {e}\n{tb}",
                          not_judged=f"kws error: {type(e).__name__}: {str(e)[:300]}")
    res = charge_deaths(check, view, res)
    res.timings = view.cost.as_dict(wall_s=res.seconds, thread_cpu_s=time.thread_time() - cpu0)
    return res, ran


def charge_deaths(check: Check, view: CheckContext, res: CheckResult) -> CheckResult:
    """A check whose calls the candidate's code killed (a crash, a confirmed hang, an
    ``os._exit``, a forged result: the candidate's entries of ``view.ledger``) and that has
    no ``fail`` finding gets one: the candidate does not hold up, and the check could not
    judge those calls. A ``skip`` or an ``error`` the deaths caused becomes that ``fail``
    (the reason stays in the evidence); a runner failure stays an ``error``.

    Deaths of other task code (the reference, the baseline, ``make_inputs``, the author's
    test or benchmark) are the task's problem, not the candidate's: with no candidate death
    and no ``fail`` finding the check becomes ``skip``, listed under ``not_judged`` naming the
    role and its file. A step stopped only by a limit that says nothing about the code (the
    wall-clock backstop, the import budget) never reaches the ledger
    (:meth:`CheckContext.run_steps` raises ``NotJudged`` for it)."""
    deaths = view.ledger
    if not deaths or res.runner_failed or any(f.severity == "fail" for f in res.findings):
        return res
    mine = [d for d in deaths if d.get("role") == "candidate"]
    if not mine:
        first = deaths[0]
        role = str(first.get("role", ""))
        who = _WHO.get(role, f"the {role}")
        ep = view.task.entry.get(role) if role else None
        where = f" on case {case_label(first['case'])}" if first.get("case") else ""
        why = (f"{who}{f' ({ep})' if ep else ''}: {first['death']}{where}; a problem of the task's own code, "
               "not the candidate's, so this check could not judge the candidate")
        status = "warn" if res.status == "warn" else "skip"  # never "pass" on what it could not judge
        return CheckResult(res.check, status, res.seconds, why, res.findings, not_judged=why)
    first = mine[0]
    who = _WHO["candidate"]
    where = f" on case {case_label(first['case'])}" if first.get("case") else ""
    seed = f" (seed {first['seed']})" if first.get("seed") is not None else ""
    roles = sorted({d.get("role", "") for d in deaths})
    summary = (f"{who}: {first['death']}{where}{seed}; {len(mine)} of the calls this check needed "
               f"ended this way (task code: {', '.join(roles)}), so it could not judge them")
    klass = "timeout" if first.get("status") in ("timeout", "skipped") else "crash"
    ev: dict[str, Any] = {"failure_class": klass, "deaths": deaths[:20], "count": len(mine)}
    if first.get("case"):
        ev["case"] = first["case"]
    if res.status in ("skip", "error") and res.reason:
        ev["check_reason"] = res.reason[:2000]
    finding = check.finding(view, "fail", summary, ev, case=first.get("case"), seed=first.get("seed"))
    findings = [*res.findings, finding]
    return CheckResult(res.check, status_of(findings), res.seconds, "", findings)


def check_task(task_dir: Path | str, *, only: Iterable[str] | None = None,
               seeds: Iterable[int] = DEFAULT_SEEDS, device: str | None = None,
               on_event: Event | None = None) -> dict[str, Any]:
    """Load a task, run the battery in a fresh runner, return the JSON report as a dict.

    Raises:
        Problem: the task does not load.
    """
    from workstation.engine.report import to_json_dict

    task = load_task(task_dir)
    with Runner(device=device) as runner:
        return to_json_dict(run_checks(task, runner, only=only, seeds=seeds, on_event=on_event))
