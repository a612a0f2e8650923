"""A task's history: every verdict, dispute and resolution, oldest first, with the task
version each one judged and what changed between those versions.

Task versions are git tree ids of ``tasks/<id>`` (see :mod:`workstation.repo.gitqueue`); "what
changed" is the list of files that differ between two judged trees (``git diff-tree``),
paths relative to the task folder.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import git

from workstation.records.model import Dispute, Resolution, Unverified, Verdict
from workstation.records.parse import load_records
from workstation.records.state import RecordSet
from workstation.repo.gitqueue import (
    QueueError,
    TaskVersion,
    git_text,
    harden,
    run_git,
    task_version,
)
from workstation.schema.problem import Problem

__all__ = ["History", "HistoryEntry", "conflict_text", "format_history", "task_history", "tree_changes"]


@dataclass(frozen=True)
class HistoryEntry:
    """One record in a task's history.

    ``task_tree`` is the version it concerns (a dispute or resolution: its verdict's). For a
    verdict, ``changed_from`` is the version the previous verdict judged when that differs,
    and ``changes`` the files that differ from it (``"M candidate.py"``, status letters as ``git diff --name-status``:
    A added, D deleted, M modified, T type changed); ``changes`` is None when this clone
    lacks one of the trees (run ``kws sync``).
    """

    record: Verdict | Dispute | Resolution
    task_tree: str | None
    changed_from: str | None = None
    changes: tuple[str, ...] | None = ()

    @property
    def kind(self) -> str:
        return self.record.kind

    @property
    def timestamp(self) -> datetime:
        return self.record.timestamp


@dataclass
class History:
    """``entries`` oldest first in history order (the place of each record's commit in
    the branch, :meth:`~workstation.records.state.RecordSet.order_key`). ``head`` is the task's version in
    HEAD now; ``head_changes`` the files that differ between the last judged version and
    HEAD's (None when either is unknown, empty when equal). ``problems``: record files of
    this task (or anywhere, when they could not be attributed) that were skipped."""

    task: str
    entries: list[HistoryEntry]
    head: TaskVersion
    last_judged: str | None = None
    head_changes: tuple[str, ...] | None = None
    problems: list[Problem] = field(default_factory=list)
    unverified: list[Unverified] = field(default_factory=list)
    note: str | None = None


def tree_changes(repo: git.Repo, a: str, b: str) -> tuple[str, ...] | None:
    """Files that differ between trees ``a`` and ``b`` as ``"<status> <path>"``; None when
    either tree is not in this repository."""
    if a == b:
        return ()
    try:
        out = git_text(repo, "diff-tree", "-r", "--name-status", "--no-renames", a, b)
    except git.GitCommandError:
        return None
    rows = []
    for line in out.splitlines():
        status, _, path = line.partition("\t")
        if path:
            rows.append(f"{status} {path}")
    return tuple(rows)


def task_history(repo: git.Repo, task_id: str, records: RecordSet | None = None) -> History:
    """The history of ``task_id`` in the queue ``repo`` (``records``: its records as
    :func:`~workstation.records.parse.load_records` reads them from HEAD, read here when
    not given)."""
    harden(repo)
    rs = records if records is not None else load_records(repo)
    verdict_tree = {v.verdict_id: v.task_tree for v in rs.verdicts}
    recs: list[Verdict | Dispute | Resolution] = []
    recs += [v for v in rs.verdicts if v.task == task_id]
    recs += [d for d in rs.disputes if d.task == task_id]
    recs += [r for r in rs.resolutions if r.task == task_id]
    recs.sort(key=rs.order_key)
    entries: list[HistoryEntry] = []
    last: str | None = None
    for r in recs:
        tree = r.task_tree if not isinstance(r, Resolution) else verdict_tree.get(r.verdict_id)
        changed_from = None
        changes: tuple[str, ...] | None = ()
        if isinstance(r, Verdict):
            if last is not None and r.task_tree != last:
                changed_from = last
                changes = tree_changes(repo, last, r.task_tree)
            last = r.task_tree
        entries.append(HistoryEntry(r, tree, changed_from, changes))
    extra: list[Problem] = []
    try:
        head = task_version(repo, task_id)
    except QueueError as exc:  # a damaged index: the records still read from commits
        tree = run_git(repo, "rev-parse", "-q", "--verify", f"HEAD:tasks/{task_id}", check=False).decode().strip()
        head = TaskVersion(task=task_id, tree=tree or None)
        extra.append(Problem(Path(repo.git_dir) / "index", "", f"{exc} (uncommitted changes are not shown)"))
    head_changes = None
    if last is not None and head.tree is not None:
        head_changes = tree_changes(repo, last, head.tree)
    prefix = (f"verdicts/{task_id}/", f"disputes/{task_id}/", f"resolutions/{task_id}/")
    problems = [p for p in rs.problems if p.file.as_posix().startswith(prefix)] + extra
    return History(task_id, entries, head, last, head_changes, problems,
                   rs.unverified_for(task_id), rs.signature_note)


def conflict_text(clash: list[Resolution], rule: str) -> str:
    """``"2 resolutions disagree: ..."`` for conflicting resolutions of one dispute, with
    what the queue's rule (``resolution_conflict``) makes of them."""
    sides = "; ".join(f"{r.outcome} by {r.reviewer.email} ({r.resolution_id[:8]})" for r in clash)
    then = {"first": "the first counts", "last": "the last counts"}.get(
        rule, "neither counts: the dispute is open again")
    return (f"{len(clash)} resolutions disagree: {sides}; queue rule resolution_conflict = {rule!r}: {then}; "
            "settle it with kws resolve --supersede")


def _when(ts: datetime) -> str:
    return ts.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def format_history(h: History, records: RecordSet | None = None) -> str:
    """Plain-text rendering of ``h`` for ``kws history`` (one block per record)."""
    lines = [f"history of {h.task}: {len(h.entries)} record(s)"
             + (f", {len(h.unverified)} unverified (not counted)" if h.unverified else "")]
    if h.note:
        lines.append(f"  {h.note}")
    lines += [f"  skipped {p}" for p in h.problems]
    lines += [f"{_when(u.record.timestamp)}  {u.kind:<10} {u.record.id[:8]}  {u.record.reviewer}  {u.said}  "
              f"UNVERIFIED, not counted: {u.why}  [{u.path}]" for u in h.unverified]
    for e in h.entries:
        r = e.record
        head = f"{_when(r.timestamp)}  {r.kind:<10} {r.id[:8]}  {r.reviewer}"
        if isinstance(r, Verdict):
            lines += _verdict_lines(e, r, head, records)
        elif isinstance(r, Dispute):
            lines += _dispute_lines(r, head, records)
        else:
            lines += _resolution_lines(r, head)
    return "\n".join(lines + _version_lines(h))


def _verdict_lines(e: HistoryEntry, r: Verdict, head: str, records: RecordSet | None) -> list[str]:
    """A verdict's block: its overall and version, what changed since the version judged
    before, its values, rationale and (with ``records``) the values resolutions changed."""
    lines = [f"{head}  {r.overall}  (task version {(e.task_tree or '?')[:10]})"]
    if e.changed_from is not None:
        lines.append(f"    task changed since version {e.changed_from[:10]}:")
        if e.changes is None:
            lines.append("      (a version is not in this clone; run kws sync)")
        else:
            lines.extend(f"      {c}" for c in e.changes)
    lines.append("    " + ", ".join(f"{k}={v}" for k, v in r.fields.items()))
    if r.rationale:
        lines.append(f"    rationale: {r.rationale}")
    if records is not None:
        eff = records.effective_values(r)
        changed = {k: v for k, v in eff.items() if r.values().get(k) != v}
        if changed:
            lines.append("    after resolutions: " + ", ".join(f"{k}={v}" for k, v in changed.items()))
    return lines


def _dispute_lines(r: Dispute, head: str, records: RecordSet | None) -> list[str]:
    """A dispute's block: the verdict it disputes, (with ``records``) whether it is open or
    how it was resolved and any disagreement between its resolutions, values, rationale."""
    state = ""
    if records is not None:
        res = records.resolution_of(r.dispute_id)
        state = f"  [{'open' if res is None else res.outcome}]"
        clash = records.resolution_conflicts(r.dispute_id).get(r.dispute_id)
        if clash:
            state += f"  [{conflict_text(clash, records.resolution_rule)}]"
    return [f"{head}  on verdict {r.verdict_id[:8]}{state}",
            "    " + ", ".join(f"{k}={v}" for k, v in r.fields.items()),
            f"    rationale: {r.rationale}"]


def _resolution_lines(r: Resolution, head: str) -> list[str]:
    """A resolution's block: its outcome, both sides' values, the verdict's new values,
    rationale."""
    lines = [f"{head}  {r.outcome}: verdict {r.verdict_id[:8]}, dispute {r.dispute_id[:8]}"]
    sides = ", ".join(
        f"{k}: verdict {r.verdict_values.get(k, '-')} / dispute {r.dispute_values.get(k, '-')}"
        for k in sorted(set(r.verdict_values) | set(r.dispute_values))
    )
    if sides:
        lines.append(f"    {sides}")
    if r.fields:
        lines.append("    verdict now: " + ", ".join(f"{k}={v}" for k, v in r.fields.items()))
    lines.append(f"    rationale: {r.rationale}")
    return lines


def _version_lines(h: History) -> list[str]:
    """Where the task's version in HEAD (and its work tree) stands against the last judged."""
    if h.head.tree is None:
        lines = [f"tasks/{h.task} is not in HEAD"]
    elif h.last_judged is None:
        lines = [f"current task version {h.head.tree[:10]}: not judged yet"]
    elif h.head_changes == ():
        lines = [f"current task version {h.head.tree[:10]}: the one last judged"]
    else:
        lines = [f"current task version {h.head.tree[:10]} differs from the last judged {h.last_judged[:10]}:"]
        if h.head_changes is None:
            lines.append("  (the judged version is not in this clone; run kws sync)")
        else:
            lines.extend(f"  {c}" for c in h.head_changes)
    if h.head.dirty:
        lines.append("uncommitted changes in the work tree: " + ", ".join(h.head.dirty))
    return lines
