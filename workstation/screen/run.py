"""A screen of a queue: the plan (which task versions need a run), the run on a backend,
results streamed back, merged and stored as they finish.

The plan (:func:`plan_screen`): every task of the queue that loads (malformed tasks are left
to ``kws queue``), its tree id in ``HEAD`` and whether its work tree differs, the check ids
to run (``--only`` and the task's kind), split in two runs when the task has timing work:

- ``main``: every selected check except the timing checks that have work on this task
  (a timing check with nothing to judge, :meth:`~workstation.engine.check.Check.skip_reason`,
  stays here and skips at once, as in ``kws check``);
- ``timing``: those timing checks, run alone on a node (the local pool's gate, a whole Ray
  node), after the main run; with ``timing=False`` they are not run and the result says so.

A task is left out when a stored result has the key it would get on one of the backend's
node environments (:class:`~workstation.screen.keys.ScreenKey`), unless ``force``; a stored
``timeout`` counts only when it ran under at least the current time limit, and a result
whose timing checks were not run counts only when timing is off now. A task with
uncommitted changes is always run and never stored.

The run (:func:`run_plan`): runs go to the backend; each finished task is merged (one
report, checks in report order), keyed with the environment of the node that ran it and
the report's own device and versions, stored (:func:`workstation.screen.store.store_result`)
and announced (``on_event``) at once. ``KeyboardInterrupt`` cancels what is still running
and returns with ``interrupted`` set: what finished before is stored.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from workstation.engine.check import check_class, ids_where
from workstation.engine.run import select_checks
from workstation.repo.gitqueue import open_queue
from workstation.screen.keys import (
    NodeEnv,
    ScreenKey,
    dirty_tasks,
    shared_folder,
    shared_tree,
    task_modules,
    task_trees,
)
from workstation.screen.store import (
    ResultIndex,
    ScreenResult,
    StoreError,
    now_iso,
    read_index,
    store_result,
)
from workstation.screen.worker import RunOutcome, RunSpec, task_payload
from workstation.task.queue import load_queue

if TYPE_CHECKING:
    import git

__all__ = [
    "Backend",
    "Plan",
    "ScreenOptions",
    "ScreenRun",
    "SchedulingError",
    "TaskPlan",
    "plan_screen",
    "run_plan",
]

#: ``on_event(kind, data)``: ``planned`` {plan}, ``started`` {task, part, host},
#: ``finished`` {task, result: ScreenResult, stored: bool, why_not: str}, ``warning`` {message}.
OnEvent = Callable[[str, dict[str, Any]], None]

#: run statuses whose result is stored (the task's own doing); the others (the runner or the
#: cluster failed, kws screen stopped) leave the task to the next screen.
STORED_STATUSES = ("ok", "load-error", "timeout")


class SchedulingError(Exception):
    """Runs cannot be scheduled (e.g. GPU requests no node can satisfy); the message says
    what was asked, what the cluster has, and how long kws waited."""


class Backend(Protocol):
    """Where runs happen: :class:`workstation.screen.local.LocalPool`,
    :class:`workstation.screen.raycluster.RayBackend`."""

    name: str

    def envs(self, modules: Iterable[str], device: str | None) -> list[NodeEnv]: ...

    def describe(self) -> str: ...

    def submit(self, spec: RunSpec) -> None: ...

    def pending(self) -> int: ...

    def poll(self, timeout: float) -> list[tuple[str, object]]: ...

    def cancel_all(self) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class ScreenOptions:
    """What a screen runs: ``only`` (check ids; None: all), ``seeds``, ``device`` (passed to
    ``kws check --device``), ``check_args`` (further ``kws check`` arguments, e.g. the
    sandbox flags), ``timeout`` (seconds per ``kws check`` run), ``force`` (run even where a
    result with the same key is stored), ``timing`` (run timing checks, alone on a node),
    ``tasks`` (only these task ids; empty: all), ``store`` (write results)."""

    only: tuple[str, ...] | None = None
    seeds: tuple[int, ...] = (0, 1, 2)
    device: str | None = None
    check_args: tuple[str, ...] = ()
    timeout: float = 1800.0
    force: bool = False
    timing: bool = True
    tasks: tuple[str, ...] = ()
    store: bool = True

    @property
    def key_args(self) -> tuple[str, ...]:
        """The ``kws check`` arguments a key names (besides the check ids and seeds)."""
        return (*(("--device", self.device) if self.device else ()), *self.check_args)

    @property
    def run_args(self) -> tuple[str, ...]:
        """The ``kws check`` arguments every run gets."""
        return ("--seeds", ",".join(str(s) for s in self.seeds), *self.key_args)


@dataclass
class TaskPlan:
    """One task to screen: its version, the checks of each run, its external modules."""

    task: str
    tree: str | None
    dirty: bool
    checks: tuple[str, ...]
    main: tuple[str, ...]
    timing: tuple[str, ...]
    timing_not_run: str = ""
    modules: frozenset[str] = frozenset()
    payload: bytes = field(default=b"", repr=False)
    outcomes: dict[str, RunOutcome] = field(default_factory=dict)

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(p for p, ids in (("main", self.main), ("timing", self.timing)) if ids)


@dataclass
class Plan:
    """The plan of a screen: ``tasks`` to run; ``skipped``: ``(task id, why)`` for the
    tasks left out (already screened, malformed, not asked for); ``envs``: the node
    environments; ``shared``/``shared_tree``: the queue's helper folder and its tree;
    ``seconds``: the plan's own time, without ``probe_seconds`` (the node environments) and
    ``payload_seconds`` (packing the task versions)."""

    root: Path
    tasks: list[TaskPlan]
    skipped: list[tuple[str, str]]
    envs: list[NodeEnv]
    shared: str | None
    shared_tree: str | None
    seconds: float = 0.0
    probe_seconds: float = 0.0
    payload_seconds: float = 0.0


@dataclass
class ScreenRun:
    """What a screen did: ``results`` (every finished task, stored or not), ``not_stored``
    (task id, why), ``interrupted``, wall ``seconds`` and kws's own ``overhead`` (seconds by
    phase: ``plan``, ``payload``, ``store``, ``merge``, ``loop``; ``worker``: the runs' time on
    the workers outside ``kws check`` and its interpreter's start; ``interpreter``: that start,
    which a plain ``kws check`` pays too)."""

    plan: Plan
    results: list[ScreenResult] = field(default_factory=list)
    reports: dict[str, dict[str, Any]] = field(default_factory=dict)
    not_stored: list[tuple[str, str]] = field(default_factory=list)
    interrupted: bool = False
    seconds: float = 0.0
    overhead: dict[str, float] = field(default_factory=dict)
    outcomes: list[RunOutcome] = field(default_factory=list)

    def count(self, *outcomes: str) -> int:
        return sum(1 for r in self.results if r.outcome in outcomes)


# --------------------------------------------------------------------------------------------
# the plan


def _exclusive_with_work(ids: Iterable[str], task: Any) -> tuple[list[str], list[str]]:
    """(timing check ids with work on ``task``, the others of ``ids``)."""
    timing, rest = [], []
    for cid in ids:
        cls = check_class(cid)
        if cls.phase == "exclusive" and not cls.skip_reason(task):
            timing.append(cid)
        else:
            rest.append(cid)
    return timing, rest


def _counts_as_screened(r: ScreenResult | None, opts: ScreenOptions, has_timing: bool) -> bool:
    if r is None:
        return False
    if r.outcome == "timeout" and r.timeout_s < opts.timeout:
        return False
    return not (has_timing and opts.timing and r.timing.startswith("not run"))


def plan_screen(root: Path | str, backend: Backend, opts: ScreenOptions,
                index: ResultIndex | None = None) -> Plan:
    """The plan of a screen of the queue at ``root`` on ``backend`` (see the module).

    Raises:
        workstation.schema.problem.Problem: the queue does not load.
        workstation.repo.gitqueue.QueueError: ``root`` is not a queue repository.
        KeyError: an ``--only`` id that no check registers.
    """
    t0 = time.monotonic()
    root = Path(root)
    repo = open_queue(root)
    try:
        q = load_queue(root)
        trees = task_trees(repo)
        shared = shared_folder(root)
        stree = shared_tree(repo, shared)
        dirty, shared_dirty = dirty_tasks(repo, [shared] if shared else [])
        stored = index if index is not None else read_index(repo)
        wanted = set(opts.tasks)
        skipped: list[tuple[str, str]] = []
        for e in q.errors:
            tid = Path(str(e.file)).parent.name
            if not wanted or tid in wanted:
                skipped.append((tid, f"does not load: {e}"))
        tasks = []
        for t in q.tasks:
            if wanted and t.id not in wanted:
                continue
            ids = select_checks(opts.only, t)
            timing, rest = _exclusive_with_work(ids, t)
            tp = TaskPlan(task=t.id, tree=trees.get(t.id), dirty=t.id in dirty or shared_dirty or t.id not in trees,
                          checks=tuple(ids), main=tuple(rest), timing=tuple(timing) if opts.timing else (),
                          modules=frozenset(task_modules(t)))
            if timing and not opts.timing:
                tp.timing_not_run = "not run: timing checks were turned off (--no-timing)"
            tasks.append(tp)
        missing = wanted - {t.task for t in tasks} - {s[0] for s in skipped}
        skipped.extend((m, "no such task in the queue") for m in sorted(missing))
        tp0 = time.monotonic()
        envs = backend.envs(set().union(*(t.modules for t in tasks)) if tasks else set(), opts.device)
        probe_s = time.monotonic() - tp0
        todo: list[TaskPlan] = []
        for tp in tasks:
            if not opts.force and not tp.dirty and tp.tree is not None:
                has_timing = bool(tp.timing) or bool(tp.timing_not_run)
                hit = None
                for env in envs:
                    key = ScreenKey.of(task=tp.task, tree=tp.tree, shared=stree, checks=tp.checks,
                                       seeds=opts.seeds, args=opts.key_args, env=env, modules=tp.modules)
                    r = stored.for_key(key.digest(), tp.tree)
                    if _counts_as_screened(r, opts, has_timing):
                        hit = r
                        break
                if hit is not None:
                    skipped.append((tp.task, f"screened {hit.finished} on {hit.host or '?'} ({hit.worst})"))
                    continue
            todo.append(tp)
        extra = [p for p in ("queue.toml", shared) if p]
        tpay = time.monotonic()
        for tp in todo:
            tp.payload = task_payload(repo, tp.task, dirty=tp.dirty, extra=extra)
        payload_s = time.monotonic() - tpay
    finally:
        repo.close()
    return Plan(root=root, tasks=todo, skipped=skipped, envs=envs, shared=shared, shared_tree=stree,
                seconds=time.monotonic() - t0 - probe_s - payload_s, probe_seconds=probe_s,
                payload_seconds=payload_s)


# --------------------------------------------------------------------------------------------
# merging and keying a finished task


def merge_reports(tp: TaskPlan, reports: list[dict[str, Any]]) -> dict[str, Any]:
    """One report from a task's runs: checks and findings in report order (the order of
    ``tp.checks``), ``not_judged`` of all, ``complete`` over all, ``seconds`` summed; timing
    checks that were not run (a run that ended early, ``--no-timing``) become ``skip`` with
    the reason and are listed in ``not_judged``: they apply, and nothing looked."""
    order = {c: i for i, c in enumerate(tp.checks)}
    base = dict(reports[0])
    checks = [c for r in reports for c in r.get("checks", [])]
    seen = {c["check"] for c in checks}
    missing_reason = tp.timing_not_run
    for part in ("main", "timing"):
        oc = tp.outcomes.get(part)
        if oc is not None and oc.status != "ok":
            missing_reason = f"not run: the {part} run ended with {oc.message}"
    not_judged = [n for r in reports for n in r.get("not_judged") or []]
    for cid in tp.checks:
        if cid not in seen:
            reason = missing_reason or "not run in this screen"
            checks.append({"check": cid, "status": "skip", "seconds": 0.0, "reason": reason})
            not_judged.append({"check": cid, "reason": reason})
    checks.sort(key=lambda c: order.get(c["check"], len(order)))
    findings = [f for r in reports for f in r.get("findings", [])]
    findings.sort(key=lambda f: order.get(f.get("check"), len(order)))
    base["checks"] = checks
    base["findings"] = findings
    base["not_judged"] = not_judged
    base["runner_failed"] = any(bool(r.get("runner_failed")) for r in reports)
    base["complete"] = all(c.get("status") not in ("error", "skip") for c in checks) and not not_judged
    base["seconds"] = round(sum(float(r.get("seconds") or 0.0) for r in reports), 3)
    base["warnings"] = sorted({w for r in reports for w in r.get("warnings", [])})
    return base


def _worst(report: Mapping[str, Any]) -> str:
    sev = {f.get("severity") for f in report.get("findings", [])}
    for s in ("fail", "warn", "info"):
        if s in sev:
            return s
    return "pass"


def _env_for(envs: list[NodeEnv], oc: RunOutcome | None) -> NodeEnv:
    if oc is not None:
        for e in envs:
            if oc.node and e.node == oc.node:
                return e
        for e in envs:
            if not oc.node and e.host == oc.host:
                return e
    return envs[0] if envs else NodeEnv(device="", versions={})


def finish_task(plan: Plan, tp: TaskPlan, opts: ScreenOptions, backend: str) -> tuple[ScreenResult, dict[str, Any] | None, bool, str]:
    """The result of a task whose runs are over: ``(result, merged report or None,
    storable, why not storable)``."""
    runs = [tp.outcomes[p] for p in ("main", "timing") if p in tp.outcomes]
    first = runs[0]
    ok = [oc.report for oc in runs if oc.status == "ok" and oc.report is not None]
    report = merge_reports(tp, ok) if ok else None
    env = _env_for(plan.envs, first)
    tree = tp.tree or ""
    key = ScreenKey.of(task=tp.task, tree=tree, shared=plan.shared_tree, checks=tp.checks, seeds=opts.seeds,
                       args=opts.key_args, env=env, modules=tp.modules, report=report,
                       libs=first.libs if first.libs or not tp.modules else None)
    digest = key.digest()
    timing = "none"
    if tp.timing_not_run:
        timing = tp.timing_not_run
    elif tp.timing:
        t = tp.outcomes.get("timing")
        timing = "run" if t is not None and t.status == "ok" else (
            f"not run: {t.message}" if t is not None else "not run: the main run did not finish")
    if report is not None:
        report["task_tree"] = tree + ("+dirty" if tp.dirty else "") if tree else None
        report["screen"] = {"key": digest, "host": first.host, "backend": backend, "finished": runs[-1].finished,
                            "timing": timing,
                            "timing_checks": ids_where(phase="exclusive", among=tp.checks),
                            "timing_evidence_checks": ids_where(timing_evidence=True, among=tp.checks)}
        statuses = {c["check"]: c.get("status") for c in report["checks"]}
        unjudged = tuple(dict.fromkeys(str(n.get("check")) for n in report.get("not_judged") or []))
        unjudged += tuple(c for c, s in statuses.items() if s == "error" and c not in unjudged)
        failed = any(f.get("severity") == "fail" for f in report["findings"])
        outcome = "fail" if failed else ("not-judged" if unjudged else "pass")
        worst = "not-judged" if outcome == "not-judged" else _worst(report)
        message = ""
    else:
        statuses, unjudged = {}, ()
        outcome = "timeout" if first.status == "timeout" else "error"
        worst = outcome
        message = first.message
    res = ScreenResult(
        key=digest, task=tp.task, tree=tree, outcome=outcome, worst=worst, finished=runs[-1].finished or now_iso(),
        key_fields=key.as_dict(),
        failing=tuple(c for c, s in statuses.items() if s == "fail"),
        warning=tuple(c for c, s in statuses.items() if s == "warn"),
        errored=tuple(c for c, s in statuses.items() if s == "error"),
        skipped=tuple(c for c, s in statuses.items() if s == "skip"),
        not_judged=unjudged,
        checks=len(statuses), timing=timing, seconds=round(sum(oc.seconds for oc in runs), 3),
        battery_seconds=float(report["seconds"]) if report else 0.0, device=key.device, kws=key.kws,
        host=first.host, backend=backend, attempts=max(oc.attempts for oc in runs), timeout_s=opts.timeout,
        message=message,
    )
    if tp.dirty or not tp.tree:
        return res, report, False, "uncommitted changes: results of a version git does not name are never stored"
    bad = [oc for oc in runs if oc.status not in STORED_STATUSES]
    if bad:
        return res, report, False, f"not the task's doing ({bad[0].message}); screened again next time"
    return res, report, True, ""


# --------------------------------------------------------------------------------------------
# the run


@contextmanager
def _sigint_deferred() -> Iterator[None]:
    """SIGINT blocked while a result is written: Ctrl-C reaches the whole foreground process
    group, and a git killed half-way through a notes update would leave a stale ref lock.
    The git children inherit the blocked mask; the signal arrives when it is unblocked."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _spec(tp: TaskPlan, part: str, opts: ScreenOptions) -> RunSpec:
    ids = tp.main if part == "main" else tp.timing
    return RunSpec(job=f"{tp.task}#{part}", task=tp.task, part=part, payload=tp.payload, only=ids,
                   args=opts.run_args, timeout=opts.timeout, exclusive=part == "timing",
                   modules=tuple(sorted(tp.modules)))


def run_plan(plan: Plan, backend: Backend, opts: ScreenOptions, *, on_event: OnEvent | None = None) -> ScreenRun:
    """Run ``plan`` on ``backend`` (see the module); returns when every task finished, or
    at ``KeyboardInterrupt`` (then ``interrupted`` is set and running runs are cancelled).

    Raises:
        SchedulingError: from the backend (runs cannot be scheduled); finished results are
            stored before it propagates.
        TypeError: the backend sent an event that is none of its protocol's.
    """
    pr = _PlanRun(plan, backend, opts, on_event or (lambda kind, data: None))
    pr.emit("planned", {"plan": plan})
    try:
        pr.run()
    except KeyboardInterrupt:
        pr.result.interrupted = True
        backend.cancel_all()
    finally:
        pr.close()
    return pr.result


class _PlanRun:
    """One :func:`run_plan`: submits each task's runs, follows the backend's events, merges
    and stores each finished task, and keeps kws's own time by phase (``over``)."""

    def __init__(self, plan: Plan, backend: Backend, opts: ScreenOptions, emit: OnEvent) -> None:
        self.plan, self.backend, self.opts, self.emit = plan, backend, opts, emit
        self.t0 = time.monotonic()
        self.result = ScreenRun(plan=plan)
        self.over = {"plan": plan.seconds, "payload": plan.payload_seconds, "store": 0.0, "merge": 0.0, "loop": 0.0,
                     "worker": 0.0, "interpreter": 0.0}
        self.by_job: dict[str, TaskPlan] = {}
        self.repo = open_queue(plan.root) if opts.store else None

    def run(self) -> None:
        """Submit every task's first run, then follow events until every task finished."""
        for tp in self.plan.tasks:
            self._submit(tp, tp.parts[0] if tp.parts else "main")
        open_tasks = {tp.task for tp in self.plan.tasks}
        while open_tasks:
            events = self.backend.poll(0.25)
            tl = time.monotonic()
            for kind, data in events:
                if kind == "started" and isinstance(data, tuple):
                    job, host = data
                    started = self.by_job.get(job)
                    if started is not None:
                        self.emit("started", {"task": started.task, "part": job.rsplit("#", 1)[-1], "host": host})
                elif kind == "warning":
                    self.emit("warning", {"message": str(data)})
                elif isinstance(data, RunOutcome):
                    done = self._finished(data)
                    if done is not None:
                        open_tasks.discard(done)
                else:
                    raise TypeError(f"{self.backend.name}: an event kws screen does not know: {kind!r}")
            self.over["loop"] += time.monotonic() - tl

    def _submit(self, tp: TaskPlan, part: str) -> None:
        spec = _spec(tp, part, self.opts)
        self.by_job[spec.job] = tp
        self.backend.submit(spec)

    def _finished(self, oc: RunOutcome) -> str | None:
        """A run ended: its task's timing run is submitted after a good main run, else the
        task is merged, stored and reported; returns the task id once it is finished."""
        self.result.outcomes.append(oc)
        if oc.check_seconds:
            self.over["worker"] += max(0.0, oc.seconds - oc.check_seconds - oc.interpreter_seconds)
            self.over["interpreter"] += oc.interpreter_seconds
        tp = self.by_job[oc.job]
        tp.outcomes[oc.part] = oc
        if oc.part == "main" and tp.timing and oc.status == "ok":
            self._submit(tp, "timing")
            return None
        tm = time.monotonic()
        res, report, storable, why = finish_task(self.plan, tp, self.opts, self.backend.name)
        self.over["merge"] += time.monotonic() - tm
        stored = False
        if storable and self.repo is not None:
            stored, why = self._store(self.repo, res, report, why)
        elif not storable:
            self.result.not_stored.append((tp.task, why))
        self.result.results.append(res)
        if report is not None:
            self.result.reports[tp.task] = report
        self.emit("finished", {"task": tp.task, "result": res, "stored": stored, "why_not": why})
        return tp.task

    def _store(self, repo: git.Repo, res: ScreenResult, report: dict[str, Any] | None,
               why: str) -> tuple[bool, str]:
        """Store ``res`` (and ``report``) as the task's notes in ``repo``, Ctrl-C deferred
        meanwhile; (stored, why not: the store's error, else ``why`` as it was)."""
        ts = time.monotonic()
        try:
            with _sigint_deferred():
                store_result(repo, res, report)
            return True, why
        except StoreError as e:
            self.emit("warning", {"message": str(e)})
            return False, str(e)
        finally:
            self.over["store"] += time.monotonic() - ts

    def close(self) -> None:
        """Close the queue's repository and settle the figures (``loop`` less merge and store)."""
        if self.repo is not None:
            self.repo.close()
        self.result.seconds = time.monotonic() - self.t0
        self.over["loop"] = max(0.0, self.over["loop"] - self.over["merge"] - self.over["store"])
        self.result.overhead = self.over
