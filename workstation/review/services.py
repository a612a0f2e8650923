"""Services: every git, record and file operation the review app needs, as plain functions
that return plain data.

The TUI displays and dispatches; it calls these from its worker threads (the UI thread
never waits on git, on the records of a whole queue or on a queue-wide file walk) and never
imports the records, repository or task packages itself. Failures come back as data (an
``error`` or ``problem`` string for the reviewer) or as :class:`ServiceError` /
:class:`~workstation.schema.problem.Problem`, never as an exception type of those packages. (The record store and history modules are
imported where they are used: the app imports this module before its first paint.)

- the queue: :func:`open_queue_root`, :func:`load_queue` (the index in stages, with the
  rubric, drafts, identity, records and pre-screens), :func:`reload_records`,
  :func:`load_screens`, :func:`task_dir`;
- one task: :func:`load_draft`, :func:`task_tree`, :func:`task_history`;
- commits: :func:`commit_verdict`, :func:`commit_dispute`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from workstation.records.drafts import Draft, draft_path
from workstation.records.drafts import load_draft as _load_draft
from workstation.repo.gitqueue import (
    QueueError,
    ensure_default_queue,
    open_queue,
    reviewer_identity,
    task_version,
)
from workstation.review.queueview import (
    QueueIndex,
    QueueRow,
    build_rows,
    scan_queue,
    validate_index,
)
from workstation.review.session import ReviewSession
from workstation.rubric.model import Rubric, queue_rubric
from workstation.schema.problem import Problem

__all__ = [
    "CommitOutcome",
    "DisputeOutcome",
    "QueueState",
    "ServiceError",
    "TaskHistory",
    "TaskTree",
    "VerdictSummary",
    "commit_dispute",
    "commit_verdict",
    "load_draft",
    "load_queue",
    "load_screens",
    "open_queue_root",
    "reload_records",
    "task_dir",
    "task_history",
    "task_tree",
]


class ServiceError(Exception):
    """The queue cannot be used as asked; the message says why and what to do."""


# --------------------------------------------------------------------------------------------
# the queue


def open_queue_root(queue: Path | str | None) -> Path:
    """The queue folder to open: ``queue``, or the per-user sample queue (created on first
    use).

    Raises:
        ServiceError: the sample queue cannot be made, or the folder has no ``tasks/``.
    """
    try:
        root = Path(queue) if queue is not None else ensure_default_queue()
    except QueueError as e:
        raise ServiceError(str(e)) from None
    if not (root / "tasks").is_dir():
        raise ServiceError(f"{root}: not a kws queue (no tasks/ folder)")
    return root


def task_dir(root: Path, task_id: str) -> Path:
    """The folder of task ``task_id`` in the queue at ``root``."""
    return root / "tasks" / task_id


@dataclass
class QueueState:
    """What the app knows about the open queue (each stage of :func:`load_queue` is one).

    ``records`` is the queue's record set (opaque to the display: :func:`build_rows` reads
    it), ``me`` the reviewer's git identity (``name``, ``email``) or None with
    ``identity_problem`` saying why; ``rubric`` the queue's rubric or None with
    ``rubric_problem``; ``drafts`` the task ids with a saved draft; ``screens`` each task's
    pre-screen badge (:func:`load_screens`); ``validating`` is true
    while tasks the index cache did not vouch for are being validated.
    """

    root: Path
    index: QueueIndex | None = None
    rows: list[QueueRow] = field(default_factory=list)
    records: Any = None
    me: Any = None
    identity_problem: str = ""
    rubric: Rubric | None = None
    rubric_problem: str = ""
    drafts: set[str] = field(default_factory=set)
    screens: dict[str, Any] = field(default_factory=dict)
    validating: bool = False
    loaded: bool = False


def _drafts_present(root: Path) -> set[str]:
    folder = draft_path(root, "x").parent
    return {p.stem for p in folder.glob("*.json")} if folder.is_dir() else set()


def load_queue(root: Path, *, validate: bool = True) -> Iterator[QueueState]:
    """Index the queue at ``root`` in stages, each yielded as soon as it is ready (a new
    :class:`QueueState` each time, so the UI thread can keep reading the one before):

    1. the task rows (file reads only), the rubric and the drafts;
    2. the review flags: the reviewer's git identity, the records and the pre-screens;
    3. with ``validate``, when the index cache did not vouch for every task: the rows
       after validating those tasks (``validating`` is true in the stages before).

    Raises:
        Problem: ``root`` is not a queue, or its ``queue.toml`` does not load (before the
            first stage).
    """
    st = QueueState(root=root)
    st.index = scan_queue(root)
    try:
        st.rubric = queue_rubric(root)
    except Problem as e:
        st.rubric_problem = str(e)
    st.drafts = _drafts_present(root)
    st.rows = build_rows(st.index, None, None, st.drafts)
    st.loaded = True
    st.validating = validate and bool(st.index.pending)
    yield st

    st = replace(st)
    try:
        repo = open_queue(root)
        try:
            st.me = reviewer_identity(repo)
        except QueueError as e:
            st.identity_problem = str(e)
        repo.close()
    except QueueError as e:
        st.identity_problem = str(e)
    from workstation.records.parse import load_records

    st.records = load_records(root)
    st.screens = load_screens(root)
    st.rows = build_rows(st.index, st.records, st.me, st.drafts, st.screens)
    yield st

    if st.validating:
        ix = st.index
        ix = QueueIndex(ix.root, ix.name, ix.rubric_id, dict(ix.tasks), dict(ix.errors), dict(ix.signatures))
        validate_index(ix)  # on a copy: the UI thread reads the one yielded before
        st = replace(st, index=ix, validating=False)
        st.rows = build_rows(ix, st.records, st.me, st.drafts, st.screens)
        yield st


def reload_records(state: QueueState) -> QueueState:
    """``state`` with the records read again (after a commit or a dispute) and the rows
    rebuilt."""
    from workstation.records.parse import load_records

    st = replace(state)
    st.records = load_records(st.root)
    if st.index is not None:
        st.rows = build_rows(st.index, st.records, st.me, st.drafts, st.screens)
    return st


def load_screens(root: Path) -> dict[str, Any]:
    """``{task id: pre-screen badge}`` (:class:`workstation.screen.summary.PrescreenBadge`)
    for the tasks whose version in ``HEAD`` has a stored screening result (``kws screen``);
    empty when the queue is not a git repository or git fails (the queue still shows)."""
    import git

    from workstation.screen.summary import badges

    try:
        repo = open_queue(root)
    except QueueError:
        return {}
    try:
        return badges(repo, root)
    except git.GitError:
        return {}
    finally:
        repo.close()


# --------------------------------------------------------------------------------------------
# one task


def load_draft(root: Path, task_id: str) -> Draft | None:
    """The reviewer's saved draft of ``task_id`` in the queue at ``root``, or None."""
    return _load_draft(root, task_id)


@dataclass(frozen=True)
class TaskTree:
    """The git tree id of a task in ``HEAD`` (None: not committed, or no repository) and
    the paths where the work tree differs from it (a verdict needs a clean version)."""

    tree: str | None
    dirty: tuple[str, ...] = ()


def task_tree(root: Path, task_id: str) -> TaskTree:
    """The version of ``task_id`` a verdict would name (see :class:`TaskTree`)."""
    try:
        repo = open_queue(root)
        try:
            tv = task_version(repo, task_id)
        finally:
            repo.close()
    except QueueError:
        return TaskTree(None)
    return TaskTree(tv.tree, tuple(tv.dirty))


@dataclass(frozen=True)
class VerdictSummary:
    """A committed verdict as the app shows it: ``values`` holds every rubric field's
    value (choice fields, ``overall`` and the rationale); ``reviewer`` is ``Name <email>``;
    ``path`` the record file relative to the queue root."""

    verdict_id: str
    task: str
    reviewer: str
    timestamp: datetime
    overall: str
    values: Mapping[str, str]
    path: str = ""


def _summary(v: Any) -> VerdictSummary:
    return VerdictSummary(verdict_id=v.verdict_id, task=v.task, reviewer=str(v.reviewer), timestamp=v.timestamp,
                          overall=v.overall, values=v.values(), path=str(v.path) if v.path is not None else "")


@dataclass(frozen=True)
class TaskHistory:
    """A task's history as text (verdicts, disputes, resolutions, task versions) and its
    verdicts, oldest first."""

    text: str
    verdicts: tuple[VerdictSummary, ...] = ()


def task_history(root: Path, task_id: str) -> TaskHistory:
    """The history of ``task_id`` (records and git); its text says why when unavailable."""
    from workstation.records.history import format_history
    from workstation.records.history import task_history as _task_history
    from workstation.records.parse import load_records

    try:
        repo = open_queue(root)
        try:
            rs = load_records(root)
            h = _task_history(repo, task_id, rs)
            text = format_history(h, rs)
            verdicts = tuple(_summary(e.record) for e in h.entries if e.kind == "verdict")
        finally:
            repo.close()
    except QueueError as e:
        return TaskHistory(f"history unavailable: {e}")
    return TaskHistory(text, verdicts)


# --------------------------------------------------------------------------------------------
# commits


@dataclass(frozen=True)
class CommitOutcome:
    """The verdict committed, or ``error``: why nothing was committed."""

    verdict: VerdictSummary | None = None
    error: str = ""


def commit_verdict(root: Path, session: ReviewSession) -> CommitOutcome:
    """Commit ``session``'s verdict to the queue at ``root`` (one git commit; the draft is
    removed). Refused with the rubric's problems, a missing git identity, or a git error."""
    try:
        repo = open_queue(root)
        try:
            v = session.commit(repo)
        finally:
            repo.close()
    except QueueError as e:  # RecordError and IdentityError are QueueErrors
        return CommitOutcome(error=str(e))
    return CommitOutcome(verdict=_summary(v))


@dataclass(frozen=True)
class DisputeOutcome:
    """The dispute committed (its id), or ``error``: why nothing was committed."""

    dispute_id: str = ""
    error: str = ""


def commit_dispute(root: Path, verdict_id: str, fields: Mapping[str, str], rationale: str,
                   rubric: Rubric | None) -> DisputeOutcome:
    """Commit a dispute of verdict ``verdict_id``: the disputer's ``fields`` values and
    ``rationale`` (checked against ``rubric`` when given). One git commit."""
    from workstation.records.parse import load_records
    from workstation.records.store import commit_dispute as _commit_dispute

    try:
        repo = open_queue(root)
        try:
            verdict = next((v for v in load_records(root).verdicts if v.verdict_id == verdict_id), None)
            if verdict is None:
                return DisputeOutcome(error=f"verdict {verdict_id[:8]} is not in the queue's records")
            d = _commit_dispute(repo, verdict, dict(fields), rationale, rubric)
        finally:
            repo.close()
    except QueueError as e:
        return DisputeOutcome(error=str(e))
    return DisputeOutcome(dispute_id=d.dispute_id)
