"""The queue's pre-screen at a glance (``kws screen --summary [--format md|json]``), the
per-task badge the queue screen shows, and a task's stored pre-screen as the events of a
check run (:func:`stored_run`: the review screen shows it at once on opening a task).

For every task of the queue, the latest stored result on its tree in ``HEAD`` (of the
running kws version when there is one, else of any version: the row says which), sorted
by worst finding (``fail``, ``timeout``, ``error``, ``not-judged``, ``warn``, ``info``,
``pass``, then the tasks not screened; ``not-judged``: no fail, but a check that applies
could not look, so the task is not clean), with the failing and not-judged check ids, the check error rate, the time per task,
the device and when and where it ran. Reads the notes only: nothing is run.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import git

from workstation import __version__
from workstation.repo.gitqueue import open_queue
from workstation.screen.keys import dirty_tasks, shared_folder, task_trees
from workstation.screen.store import WORST_ORDER, ResultIndex, ScreenResult, read_index, read_report

__all__ = [
    "PrescreenBadge",
    "QueueSummary",
    "StoredRun",
    "SummaryRow",
    "badges",
    "queue_summary",
    "stored_run",
    "to_json",
    "to_markdown",
]


@dataclass(frozen=True)
class PrescreenBadge:
    """What the queue table shows of a task's pre-screen: ``worst`` (a
    :data:`~workstation.screen.store.WORST_ORDER` value), the ``failing`` and ``errored``
    check ids, ``not_judged`` (ids of checks that could not look), ``finished`` (ISO 8601 UTC), ``host``, ``backend``, ``device``, ``kws`` (the
    version that screened), ``stale``: the work tree differs from the screened version."""

    worst: str
    failing: tuple[str, ...] = ()
    errored: tuple[str, ...] = ()
    not_judged: tuple[str, ...] = ()
    finished: str = ""
    host: str = ""
    backend: str = ""
    device: str = ""
    kws: str = ""
    stale: bool = False

    @property
    def rank(self) -> int:
        return WORST_ORDER.index(self.worst) if self.worst in WORST_ORDER else len(WORST_ORDER)

    @classmethod
    def of(cls, r: ScreenResult, stale: bool = False) -> PrescreenBadge:
        return cls(worst=r.worst, failing=tuple(r.failing), errored=tuple(r.errored),
                   not_judged=tuple(r.not_judged), finished=r.finished,
                   host=r.host, backend=r.backend, device=r.device, kws=r.kws, stale=stale)


def badges(repo: git.Repo, root: Path | str) -> dict[str, PrescreenBadge]:
    """``{task id: badge}`` for every task of the queue with a stored result on its tree in
    ``HEAD`` (one ``git ls-tree``, one ``git status``, one ``git notes list``)."""
    trees = task_trees(repo)
    idx = read_index(repo, trees.values())
    shared = shared_folder(root)
    dirty, shared_dirty = dirty_tasks(repo, [shared] if shared else [])
    out: dict[str, PrescreenBadge] = {}
    for tid, tree in trees.items():
        r = idx.latest(tree, kws=__version__)
        if r is not None:
            out[tid] = PrescreenBadge.of(r, stale=tid in dirty or shared_dirty)
    return out


@dataclass(frozen=True)
class SummaryRow:
    """One task of the summary (``result`` None: not screened)."""

    task: str
    tree: str | None
    result: ScreenResult | None
    stale: bool = False

    def as_dict(self) -> dict[str, Any]:
        r = self.result
        d: dict[str, Any] = {"task": self.task, "tree": self.tree, "stale": self.stale,
                             "worst": r.worst if r else "not screened"}
        if r is not None:
            d.update(outcome=r.outcome, failing=list(r.failing), warning=list(r.warning), errored=list(r.errored),
                     not_judged=list(r.not_judged),
                     checks=r.checks, seconds=r.seconds, device=r.device, finished=r.finished, host=r.host,
                     backend=r.backend, kws=r.kws, timing=r.timing, message=r.message)
        return d


@dataclass
class QueueSummary:
    """The rows (worst first) and the totals of :func:`queue_summary`."""

    queue: str
    rows: list[SummaryRow]
    problems: int = 0
    totals: dict[str, Any] = field(default_factory=dict)


def _sort_key(row: SummaryRow) -> tuple:
    r = row.result
    if r is None:
        return (len(WORST_ORDER) + 1, 0, row.task)
    return (r.rank, -len(r.failing), row.task)


def queue_summary(root: Path | str, index: ResultIndex | None = None) -> QueueSummary:
    """The summary of the queue at ``root`` (see the module).

    Raises:
        workstation.repo.gitqueue.QueueError: ``root`` is not a queue repository.
    """
    from workstation.task.queue import read_queue_config

    repo = open_queue(root)
    try:
        trees = task_trees(repo)
        idx = index if index is not None else read_index(repo, trees.values())
        shared = shared_folder(root)
        dirty, shared_dirty = dirty_tasks(repo, [shared] if shared else [])
    finally:
        repo.close()
    rows = []
    for tid in sorted(trees):
        r = idx.latest(trees[tid], kws=__version__)
        rows.append(SummaryRow(tid, trees[tid], r, stale=tid in dirty or shared_dirty))
    rows.sort(key=_sort_key)
    screened = [r.result for r in rows if r.result is not None]
    n_checks = sum(r.checks for r in screened)
    n_err = sum(len(r.errored) for r in screened)
    secs = [r.seconds for r in screened if r.seconds]
    try:
        name = read_queue_config(root).name
    except Exception:  # noqa: BLE001  (a name only; kws queue reports a bad queue.toml)
        name = Path(root).name
    totals = {
        "tasks": len(rows),
        "screened": len(screened),
        "by_worst": dict(Counter(r.worst for r in screened)),
        "checks": n_checks,
        "check_errors": n_err,
        "check_error_rate": round(n_err / n_checks, 4) if n_checks else 0.0,
        "not_judged": sum(1 for r in screened if r.not_judged),
        "seconds_median": round(statistics.median(secs), 3) if secs else None,
        "seconds_mean": round(statistics.fmean(secs), 3) if secs else None,
        "devices": dict(Counter(r.device for r in screened)),
        "kws_versions": dict(Counter(r.kws for r in screened)),
        "stale": sum(1 for r in rows if r.result is not None and r.stale),
    }
    return QueueSummary(queue=name, rows=rows, problems=idx.problems, totals=totals)


def to_json(s: QueueSummary) -> str:
    """The summary as JSON: ``{"queue", "totals", "tasks": [row, ...], "unreadable_lines"}``."""
    return json.dumps({"queue": s.queue, "totals": s.totals, "tasks": [r.as_dict() for r in s.rows],
                       "unreadable_lines": s.problems}, indent=2)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(s: QueueSummary) -> str:
    """The summary as a Markdown table with a totals paragraph."""
    t = s.totals
    lines = [f"# Pre-screen: {_cell(s.queue)}", ""]
    rate = f"{100 * t['check_error_rate']:.1f}%"
    time_s = (f"median {t['seconds_median']:.1f} s, mean {t['seconds_mean']:.1f} s"
              if t["seconds_median"] is not None else "-")
    devices = ", ".join(f"{d} ({n})" for d, n in t["devices"].items()) or "-"
    lines.append(f"{t['tasks']} tasks, {t['screened']} screened; check error rate {rate} "
                 f"({t['check_errors']} of {t['checks']} checks); time per task: {time_s}; devices: {devices}.")
    if t["not_judged"]:
        lines.append(f"{t['not_judged']} task(s) had checks that could not look: their pre-screen is not a verdict.")
    if t["stale"]:
        lines.append(f"{t['stale']} task(s) have uncommitted changes: their pre-screen is of the committed version.")
    if s.problems:
        lines.append(f"{s.problems} stored line(s) could not be read (written by another kws version?).")
    lines += ["", "| task | worst | failing checks | not judged | check errors | time | device | screened |",
              "|---|---|---|---|---|---|---|---|"]
    for row in s.rows:
        r = row.result
        if r is None:
            lines.append(f"| {_cell(row.task)} | not screened | | | | | | |")
            continue
        worst = r.worst + (" (stale)" if row.stale else "")
        if r.outcome in ("error", "timeout") and r.message:
            worst += f": {r.message[:80]}"
        when = r.finished.replace("T", " ").replace("+00:00", " UTC")
        lines.append(f"| {_cell(row.task)} | {_cell(worst)} | {_cell(', '.join(r.failing))} | "
                     f"{_cell(', '.join(r.not_judged))} | "
                     f"{len(r.errored)}/{r.checks} | {r.seconds:.1f} s | {_cell(r.device)} | "
                     f"{_cell(when)} on {_cell(r.host)} ({r.backend}, kws {r.kws}) |")
    return "\n".join(lines) + "\n"



@dataclass(frozen=True)
class StoredRun:
    """A task's stored pre-screen replayed as a check run: ``events`` (``start``, one
    ``check_finished`` per check, ``done``: the shapes of
    :func:`workstation.engine.events.normalise_event`), the ``report`` (its ``screen`` key
    says where and when it ran) and the ``tree`` it judged."""

    tree: str
    report: dict[str, Any]
    events: tuple[tuple[str, dict[str, Any]], ...]


def stored_run(root: Path | str, task_id: str) -> StoredRun | None:
    """The latest stored pre-screen of ``task_id``'s version in ``HEAD`` by this kws version,
    as a check run; None when there is none, when the work tree differs from that version
    (the findings would not be of what the reviewer sees), or when git fails."""
    from workstation.repo.gitqueue import QueueError

    try:
        repo = open_queue(root)
    except QueueError:
        return None
    try:
        tree = task_trees(repo).get(task_id)
        if tree is None:
            return None
        shared = shared_folder(root)
        dirty, shared_dirty = dirty_tasks(repo, [shared] if shared else [])
        if task_id in dirty or shared_dirty:
            return None
        r = read_index(repo, [tree]).latest(tree, kws=__version__)
        if r is None or r.kws != __version__:
            return None
        report = read_report(repo, tree, r.key)
    except git.GitError:
        return None
    finally:
        repo.close()
    if report is None or not isinstance(report.get("checks"), list):
        return None
    scr = dict(report.get("screen") or {})
    ids = [str(c.get("check")) for c in report["checks"]]
    events: list[tuple[str, dict[str, Any]]] = [("start", {
        "checks": ids, "device": report.get("device", ""),
        "timing_checks": list(scr.get("timing_checks") or []),
        "timing_evidence_checks": list(scr.get("timing_evidence_checks") or []),
        "prescreen": {k: scr.get(k) for k in ("finished", "host", "backend", "key", "timing")},
    })]
    findings = list(report.get("findings") or [])
    unjudged = {n.get("check"): str(n.get("reason") or "") for n in report.get("not_judged") or []
                if isinstance(n, dict)}
    for c in report["checks"]:
        res = {"check": c.get("check"), "status": c.get("status"), "seconds": c.get("seconds", 0.0),
               "reason": c.get("reason", ""), "findings": [f for f in findings if f.get("check") == c.get("check")],
               "not_judged": unjudged.get(c.get("check"), "")}
        events.append(("check_finished", {"result": res}))
    events.append(("done", {"report": report}))
    return StoredRun(tree=tree, report=report, events=tuple(events))
