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
- one task: :func:`load_draft`, :func:`task_tree`, :func:`task_history`,
  :func:`open_disputes`, :func:`task_report`;
- commits: :func:`commit_verdict`, :func:`commit_dispute`, :func:`resolve_dispute`,
  :func:`reserve_task`, :func:`release_task`;
- the queue's records with others: :func:`sync_queue` (also after a reserve or release,
  where the queue has a remote), :func:`unpushed` (what has not reached the remote),
  :func:`calibration`, :func:`identity`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workstation.records.drafts import Draft, FormDraft, draft_path
from workstation.records.drafts import load_draft as _load_draft
from workstation.review.queueview import (
    QueueIndex,
    QueueRow,
    build_rows,
    scan_queue,
    validate_index,
)
from workstation.rubric.model import Rubric, queue_rubric
from workstation.schema.problem import Problem

if TYPE_CHECKING:
    import git

__all__ = [
    "FormDraft",
    "QueueState",
    "ServiceError",
    "TaskHistory",
    "TaskTree",
    "VerdictSummary",
    "bundled_queue_copy",
    "identity",
    "load_draft",
    "load_queue",
    "load_screens",
    "open_queue_root",
    "problem_lines",
    "reload_records",
    "task_dir",
    "task_history",
    "task_tree",
    "unpushed",
]


class ServiceError(Exception):
    """The queue cannot be used as asked; the message says why and what to do."""


def _gq() -> Any:
    """:mod:`workstation.repo.gitqueue`, imported on first use: it imports git, which the
    app needs only after its first paint (services is imported before it)."""
    from workstation.repo import gitqueue

    return gitqueue


@contextmanager
def _queue_repo(root: Path) -> Iterator[git.Repo]:
    """The queue's git repository at ``root``, closed when the block ends.

    Raises:
        QueueError: (``repo.gitqueue``) ``root`` is not a queue's repository.
    """
    repo = _gq().open_queue(root)
    try:
        yield repo
    finally:
        repo.close()


def _verdict_rubric(rubric_id: str, root: Path) -> Rubric | None:
    """The rubric a verdict names (``rubric_id``) as found from the queue at ``root``, or
    None when it does not load (the record is still shown or resolved without it)."""
    from workstation.rubric.model import find_rubric

    try:
        return find_rubric(rubric_id, root)
    except Problem:
        return None


# --------------------------------------------------------------------------------------------
# the queue


def open_queue_root(queue: Path | str | None) -> Path:
    """The queue folder to open, as git finds a repository
    (``repo.locate.find_queue``): ``queue`` (``--queue``), else the queue whose clone
    holds the current folder, else the ``queue`` setting, else the per-user sample queue
    (created on first use). A queue folder kws ships (``sample_queue``,
    ``sample_queue_real``: a folder next to ``sample_queue/`` with ``tasks/``, inside kws's
    own repository) opens as its per-user git copy (:func:`bundled_queue_copy`), made on
    first use like the sample queue's.

    Raises:
        ServiceError: no such folder (the message names the nearest names), the sample
            queue cannot be made, or the folder has no ``tasks/``.
    """
    gq = _gq()
    try:
        from workstation.repo.locate import find_queue

        root = find_queue(queue).root
        copy = bundled_queue_copy(root) if queue is not None else None
        if copy is not None:  # a queue folder kws ships: review the per-user git copy
            root = gq.ensure_default_queue(source=root, dest=copy)
    except gq.QueueError as e:
        raise ServiceError(str(e)) from None
    if not (root / "tasks").is_dir():
        raise ServiceError(f"{root}: not a kws queue (no tasks/ folder; a queue is a git repository with "
                           "tasks/ and queue.toml: docs/task-format.md)")
    return root


def bundled_queue_copy(folder: Path) -> Path | None:
    """Where the per-user copy of ``folder`` lives when ``folder`` is a queue kws ships
    (a folder with ``tasks/`` beside the bundled ``sample_queue/``, not a git repository
    of its own): ``<data dir>/queue`` for the sample queue (the first-run copy),
    ``<data dir>/queues/<name>`` for another; None for any other folder."""
    gq = _gq()
    try:
        sample = gq.sample_queue_source().resolve()
    except gq.QueueError:
        return None
    p = folder.expanduser().resolve()
    if p.parent != sample.parent or not (p / "tasks").is_dir() or (p / ".git").exists():
        return None
    return gq.default_queue_path() if p == sample else gq.data_dir() / "queues" / p.name


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
    pre-screen badge (:func:`load_screens`); ``validating`` is true while tasks the index
    cache did not vouch for are being validated; ``loaded``: the rows are there;
    ``flags_loaded``: the rubric, identity, records and pre-screens too.
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
    flags_loaded: bool = False
    record_problems: list[Problem] = field(default_factory=list)
    record_warnings: list[Problem] = field(default_factory=list)
    #: record commits of this clone its remote lacks (:func:`unpushed`): the title bars
    #: say "N records not pushed" while it is above 0
    unpushed: int = 0
    #: the task ids whose draft was written on another version of the task than HEAD's
    #: (:func:`outdated_drafts`)
    outdated_drafts: set[str] = field(default_factory=set)


def problem_lines(state: QueueState) -> list[str]:
    """The queue screen's problem list, one line each (file relative to the queue root:
    key: problem), grouped: tasks that do not load, files under the record folders that
    are not committed records or do not load (skipped, never counted), and warnings
    (queue.toml, tasks, records: unknown keys, duplicate cases)."""
    def rel(p: Problem) -> str:
        try:
            f = Path(p.file).resolve().relative_to(Path(state.root).resolve()) if Path(p.file).is_absolute() else p.file
        except ValueError:
            f = Path(p.file)
        return f"{f}: {p.key + ': ' if p.key else ''}{p.problem}"

    lines: list[str] = []
    ix = state.index
    errs = list(ix.errors.values()) if ix else []
    if errs:
        lines.append(f"Malformed tasks ({len(errs)}): file: key: problem")
        lines += [f"  {rel(e)}" for e in errs]
    if state.record_problems:
        lines.append(f"Skipped record files ({len(state.record_problems)}; not counted)")
        lines += [f"  {rel(p)}" for p in state.record_problems]
    warns = (list(ix.queue_problems) if ix else []) + [w for ws in (ix.warnings.values() if ix else ()) for w in ws]
    warns += state.record_warnings
    if warns:
        lines.append(f"Warnings ({len(warns)})")
        lines += [f"  {rel(w)}" for w in warns]
    return lines


def _drafts_present(root: Path) -> set[str]:
    folder = draft_path(root, "x").parent
    return {p.stem for p in folder.glob("*.json")} if folder.is_dir() else set()


def load_queue(root: Path, *, validate: bool = True) -> Iterator[QueueState]:
    """Index the queue at ``root`` in stages, each yielded as soon as it is ready (a new
    :class:`QueueState` each time, so the UI thread can keep reading the one before):

    1. the task rows (file reads only) and the drafts: what the first frame shows;
    2. the rubric, the review flags (the reviewer's git identity, the records and the
       pre-screens);
    3. with ``validate``, when the index cache did not vouch for every task: the rows
       after validating those tasks (``validating`` is true in the stages before).

    The app shows stage 1 before it asks for the next (its worker waits for that frame):
    git, the records and the rubric never compete with the first paint.

    Raises:
        Problem: ``root`` is not a queue, or its ``queue.toml`` does not load (before the
            first stage).
    """
    index = scan_queue(root)
    st = QueueState(root=root, index=index, drafts=_drafts_present(root))
    st.rows = build_rows(index, None, None, st.drafts)
    st.loaded = True
    st.validating = validate and bool(index.pending)
    yield st

    st = replace(st)
    try:
        st.rubric = queue_rubric(root)
    except Problem as e:
        st.rubric_problem = str(e)
    st.screens = load_screens(root)
    _read_records(st)
    st.flags_loaded = True
    yield st

    if st.validating:
        ix = index.copy()
        validate_index(ix)  # on a copy: the UI thread reads the one yielded before
        st = replace(st, index=ix, validating=False)
        st.rows = build_rows(ix, st.records, st.me, st.drafts, st.screens, st.outdated_drafts)
        yield st


def _read_records(st: QueueState) -> None:
    """Read into ``st`` the reviewer's identity, the records (with the skipped and stray
    files and the warnings) and the count of unpushed record commits; rebuild its rows."""
    from workstation.records.parse import load_records

    st.me, st.identity_problem = identity(st.root)
    st.records = load_records(st.root)
    st.record_problems, st.record_warnings = _record_problems(st.root, st.records)
    st.unpushed = unpushed(st.root)
    st.outdated_drafts = outdated_drafts(st.root, st.drafts)
    if st.index is not None:
        st.rows = build_rows(st.index, st.records, st.me, st.drafts, st.screens, st.outdated_drafts)


def _record_problems(root: Path, records: Any) -> tuple[list[Problem], list[Problem]]:
    """(skipped record files and stray files under the record folders, record warnings)."""
    from workstation.records.doctor import stray_files

    gq = _gq()
    problems = list(records.problems)
    try:
        with _queue_repo(root) as repo:
            problems += stray_files(repo)
    except gq.QueueError:
        pass  # the queue's own problem is reported where it is opened
    return problems, list(records.warnings)


def identity(root: Path) -> tuple[Any, str]:
    """The reviewer's git identity in the queue at ``root`` and ``""``, or None and why
    not (the message says how to set it)."""
    gq = _gq()
    try:
        repo = gq.open_queue(root)
    except gq.QueueError:
        repo = None  # the queue's own problem is reported where it is opened: this is the identity
    try:
        return gq.reviewer_identity(repo), ""
    except gq.QueueError as e:
        return None, str(e)
    finally:
        if repo is not None:
            repo.close()


def outdated_drafts(root: Path, drafts: set[str]) -> set[str]:
    """Of the task ids ``drafts`` (those with a saved draft), the ones whose draft names a
    task version (its ``task_tree``) other than the task's tree in ``HEAD``: the task
    changed since the values were entered. One ``git ls-tree`` of ``HEAD:tasks``; a draft
    without a version, or a queue git cannot read, counts as current."""
    import git

    from workstation.records.drafts import load_draft as _load

    if not drafts:
        return set()
    gq = _gq()
    try:
        with _queue_repo(root) as repo:
            out = gq.run_git(repo, "ls-tree", "-d", "HEAD:tasks", check=False).decode("utf-8", "replace")
    except (gq.QueueError, git.GitError):
        return set()
    trees = {}
    for line in out.splitlines():
        meta, _, name = line.partition("\t")
        parts = meta.split()
        if len(parts) == 3:
            trees[name] = parts[2]
    stale = set()
    for task in drafts:
        d = _load(root, task)
        if d is not None and d.task_tree and d.values and trees.get(task) not in (None, d.task_tree):
            stale.add(task)
    return stale


def reload_records(state: QueueState) -> QueueState:
    """``state`` with the reviewer's identity and the records read again (after a commit,
    a dispute, a sync, or the identity being set meanwhile) and the rows rebuilt."""
    st = replace(state)
    _read_records(st)
    return st


def unpushed(root: Path) -> int:
    """How many commits touching the records (verdicts, disputes, resolutions,
    reservations) this clone of the queue at ``root`` holds that its remote branch, as last
    fetched, lacks (``records.sync.unpushed_records``: one ``git rev-list``, no network);
    0 for a queue without a remote or one that does not open."""
    import git

    from workstation.records.sync import unpushed_records

    gq = _gq()
    try:
        with _queue_repo(root) as repo:
            return unpushed_records(repo)
    except (gq.QueueError, git.GitError):
        return 0


def load_screens(root: Path) -> dict[str, Any]:
    """``{task id: pre-screen badge}`` (:class:`workstation.screen.summary.PrescreenBadge`)
    for the tasks whose version in ``HEAD`` has a stored screening result (``kws screen``);
    empty when the queue is not a git repository or git fails (the queue still shows)."""
    import git

    from workstation.screen.summary import badges

    gq = _gq()
    try:
        repo = gq.open_queue(root)
    except gq.QueueError:
        return {}
    with closing(repo):
        try:
            return badges(repo, root)
        except git.GitError:
            return {}


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


#: the seeds of the app's check runs: the engine's defaults (engine.context.DEFAULT_SEEDS; the
#: app does not import the engine, tests/test_review.py checks that the two agree).
APP_SEEDS = (0, 1, 2)


def reuse_refusal(report: Mapping[str, Any] | None, tree: TaskTree, kws_version: str) -> str:
    """Why a draft's stored ``report`` cannot be shown again instead of a new run ("" when
    it can): it must be of the task version in ``HEAD`` with a clean work tree (``tree``),
    of this kws version, and of the app's seeds (:data:`APP_SEEDS`)."""
    if not report:
        return "no stored report"
    if tree.tree is None or tree.dirty:
        return "the task folder is not a clean committed version"
    if report.get("task_tree") != tree.tree:
        return "the task changed since the stored run"
    if str((report.get("versions") or {}).get("kws")) != kws_version:
        return f"the stored run was made by kws {(report.get('versions') or {}).get('kws')}, this is {kws_version}"
    if list(report.get("seeds") or []) != list(APP_SEEDS):
        return f"the stored run used seeds {report.get('seeds')}"
    return ""


def task_tree(root: Path, task_id: str) -> TaskTree:
    """The version of ``task_id`` a verdict would name (see :class:`TaskTree`)."""
    gq = _gq()
    try:
        with _queue_repo(root) as repo:
            tv = gq.task_version(repo, task_id)
    except gq.QueueError:
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
    #: the task's records that do not count (unsigned or wrongly signed), one line each:
    #: "verdict 1a2b3c4d by ...: why"
    unverified: tuple[str, ...] = ()


def task_history(root: Path, task_id: str) -> TaskHistory:
    """The history of ``task_id`` (records and git); its text says why when unavailable."""
    gq = _gq()
    from workstation.records.history import format_history
    from workstation.records.history import task_history as _task_history
    from workstation.records.parse import load_records

    try:
        with _queue_repo(root) as repo:
            rs = load_records(root)
            h = _task_history(repo, task_id, rs)
            text = format_history(h, rs)
            verdicts = tuple(_summary(e.record) for e in h.entries if e.kind == "verdict")
            unverified = tuple(f"{u.kind} {u.record.id[:8]} by {u.record.reviewer}: {u.why}" for u in h.unverified)
    except gq.QueueError as e:
        return TaskHistory(f"history unavailable: {e}")
    return TaskHistory(text, verdicts, unverified)
