"""The queue screen's model: a fast, cached index of a queue's tasks, their review flags,
and filtering / sorting / "next unreviewed" over them.

Pure Python (no Textual, no torch): the TUI only displays what this module computes.

Speed. Validating a task (:func:`workstation.task.format.load_task`) parses its TOML and every
entry file with :mod:`ast`; for a queue of 5,000 tasks that takes seconds. The index
therefore works in two passes:

1. :func:`scan_queue` (fast, for the first paint): one ``scandir`` per task folder gives a
   *signature* (name, size and mtime of every file in it). A task whose signature matches
   the on-disk index cache reuses its cached validation result (summary or error). Any
   other task gets a display summary read from ``task.toml`` by a line scanner
   (:func:`quick_summary`: top-level ``key = "string"`` lines and ``[claims] status``),
   marked ``validated = False``.
2. :func:`validate_index` (in a worker thread): runs :func:`load_task` on every
   unvalidated task, replaces its summary with the validated one or moves it to
   ``errors`` (file, key, problem), and writes the cache.

The cache lives at ``<cache dir>/queue-index/<queue key>.json`` (cache dir:
``$KWS_CACHE_DIR`` or ``platformdirs.user_cache_dir("kws")``). It is only a speed-up:
deleting it loses nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from workstation import settings
from workstation.schema.problem import Problem

__all__ = [
    "FILTER_KEYS",
    "SORT_KEYS",
    "QueueFilter",
    "QueueIndex",
    "QueueRow",
    "TaskSummary",
    "build_rows",
    "next_reserved_by_me",
    "next_task",
    "next_unreviewed",
    "parse_filter",
    "quick_summary",
    "scan_queue",
    "sort_rows",
    "validate_index",
]

#: the index cache's format; a cache of another format is ignored (3: errors as
#: ``Problem.as_dict()``, without the task name of format 2; 4: task warnings).
_CACHE_SCHEMA = 4


@dataclass(frozen=True)
class TaskSummary:
    """What the queue table shows of one task.

    ``claimed`` is ``[claims] status`` ("pass" / "fail"), ``failure_class`` the claimed
    class (may be ""). ``validated`` is True once :func:`load_task` accepted the task
    (or the cache says it did for these exact files).
    """

    id: str
    title: str
    kind: str
    backend: str
    claimed: str
    failure_class: str
    dir: str
    validated: bool = False


@dataclass
class QueueIndex:
    """The tasks of a queue, by folder name. A folder is either in ``tasks`` (loads, or not
    yet validated) or in ``errors`` (does not load: the file, the dotted key and the
    problem). ``warnings`` holds each validated task's warnings (unknown keys, duplicate
    cases); ``queue_problems`` queue.toml's (a queue.toml that does not load is reported
    there and the defaults are used; its unknown keys are there too)."""

    root: Path
    name: str
    rubric_id: str
    tasks: dict[str, TaskSummary] = field(default_factory=dict)
    errors: dict[str, Problem] = field(default_factory=dict)
    signatures: dict[str, str] = field(default_factory=dict)
    warnings: dict[str, list[Problem]] = field(default_factory=dict)
    queue_problems: list[Problem] = field(default_factory=list)

    @property
    def pending(self) -> list[str]:
        """Folder names still to validate."""
        return [k for k, s in self.tasks.items() if not s.validated]

    def copy(self) -> QueueIndex:
        """A copy whose tables (and warning lists) can change without touching this one's."""
        return QueueIndex(self.root, self.name, self.rubric_id, dict(self.tasks), dict(self.errors),
                          dict(self.signatures), {k: list(v) for k, v in self.warnings.items()},
                          list(self.queue_problems))


# --------------------------------------------------------------------------------------------
# cache


def cache_file(root: Path | str) -> Path:
    """The index cache file of the queue at ``root``."""
    base = settings.current().cache_dir
    p = Path(root).expanduser().resolve()
    key = hashlib.sha256(str(p).encode()).hexdigest()[:16]
    return Path(base) / "queue-index" / f"{re.sub(r'[^A-Za-z0-9._-]+', '-', p.name)}-{key}.json"


def _load_cache(root: Path) -> dict[str, Any]:
    try:
        data = json.loads(cache_file(root).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("schema") != _CACHE_SCHEMA:
        return {}
    entries = data.get("tasks")
    return entries if isinstance(entries, dict) else {}


def _save_cache(index: QueueIndex) -> None:
    entries: dict[str, Any] = {}
    for name, sig in index.signatures.items():
        s = index.tasks.get(name)
        if s is not None and s.validated:
            entries[name] = {"sig": sig, "summary": asdict(s),
                             "warnings": [w.as_dict() for w in index.warnings.get(name, [])]}
        elif name in index.errors:
            entries[name] = {"sig": sig, "error": index.errors[name].as_dict()}
    path = cache_file(index.root)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".index-", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"schema": _CACHE_SCHEMA, "tasks": entries}, fh)
        os.replace(tmp, path)
    except OSError:
        pass  # a cache that cannot be written only costs speed next time


def folder_signature(folder: Path | str) -> str:
    """A digest of the names, sizes and mtimes (ns) of the files in ``folder`` (one level:
    task files are flat; entry files must be inside the folder). Any edit, added or removed
    file changes it."""
    h = hashlib.blake2b(digest_size=12)
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return ""
    for e in entries:
        if e.name == "__pycache__" or e.name.startswith("."):
            continue
        try:
            st = e.stat()
        except OSError:
            continue
        h.update(f"{e.name}\0{st.st_size}\0{st.st_mtime_ns}\0{e.is_dir()}\n".encode())
    return h.hexdigest()


# --------------------------------------------------------------------------------------------
# pass 1: fast scan

_KV = re.compile(r'^[ \t]*([A-Za-z_][A-Za-z0-9_-]*)[ \t]*=[ \t]*"((?:[^"\\\n]|\\.)*)"', re.MULTILINE)
_FIRST_HEADER = re.compile(r"^[ \t]*\[", re.MULTILINE)
_CLAIMS = re.compile(r"^[ \t]*\[[ \t]*claims[ \t]*\][^\n]*\n(.*?)(?=^[ \t]*\[|\Z)", re.MULTILINE | re.DOTALL)


def quick_summary(text: str, folder: str, dir_: str) -> TaskSummary:
    """A display summary of a ``task.toml`` read with two regular expressions, without a
    TOML parser.

    Reads top-level ``id``, ``title``, ``kind``, ``backend`` (``key = "basic string"``
    lines before the first table header) and ``status`` / ``failure_class`` in ``[claims]``.
    Anything it cannot read shows as "?"; :func:`validate_index` replaces the summary with
    the validated one (or an error) shortly after. Never used to decide validity.
    """
    m = _FIRST_HEADER.search(text)
    head = text[: m.start()] if m else text
    top: dict[str, str] = {}
    for k, v in _KV.findall(head):
        top.setdefault(k, v)
    claims: dict[str, str] = {}
    cm = _CLAIMS.search(text)
    if cm:
        for k, v in _KV.findall(cm.group(1)):
            claims.setdefault(k, v)
    return TaskSummary(
        id=top.get("id", folder),
        title=top.get("title", "?"),
        kind=top.get("kind", "?"),
        backend=top.get("backend", "?"),
        claimed=claims.get("status", "pass"),
        failure_class=claims.get("failure_class", ""),
        dir=dir_,
        validated=False,
    )


def scan_queue(root: Path | str, *, use_cache: bool = True) -> QueueIndex:
    """Pass 1: index every folder under ``<root>/tasks`` quickly (see the module docstring).

    Raises:
        Problem: ``root`` has no ``tasks/`` folder, or its ``queue.toml`` does not load.
    """
    from workstation.task.queue import read_queue_config

    root = Path(root)
    tasks_dir = root / "tasks"
    if not tasks_dir.is_dir():
        raise Problem(root, "", "not a kws queue: no tasks/ folder")
    from workstation.task.queue import DEFAULT_RUBRIC

    try:
        cfg = read_queue_config(root)
        name, rubric, queue_problems = cfg.name, cfg.rubric, list(cfg.warnings)
    except Problem as e:  # skipped with its message: the defaults apply
        name, rubric, queue_problems = root.name, DEFAULT_RUBRIC, [e]
    index = QueueIndex(root=root, name=name, rubric_id=rubric, queue_problems=queue_problems)
    cache = _load_cache(root) if use_cache else {}
    folders = sorted(e.name for e in os.scandir(tasks_dir) if e.is_dir() and not e.name.startswith("."))
    for folder in folders:
        d = tasks_dir / folder
        sig = folder_signature(d)
        index.signatures[folder] = sig
        hit = cache.get(folder)
        if hit and hit.get("sig") == sig and _from_cache(index, folder, d, hit):
            continue
        toml = d / "task.toml"
        try:
            text = toml.read_text(encoding="utf-8")
        except FileNotFoundError:
            index.errors[folder] = Problem(toml, "", "no task.toml in this task folder")
            continue
        except (OSError, UnicodeDecodeError) as e:
            index.errors[folder] = Problem(toml, "", f"cannot read: {e}")
            continue
        index.tasks[folder] = quick_summary(text, folder, str(d))
    return index


def _from_cache(index: QueueIndex, folder: str, d: Path, hit: dict[str, Any]) -> bool:
    """Put task ``folder``'s cached validation result ``hit`` (its folder signature
    unchanged) into ``index``: its summary and warnings, or its error; False when the
    entry holds neither or is of another shape (the task is read again)."""
    try:
        if "summary" in hit:
            index.tasks[folder] = TaskSummary(**{**hit["summary"], "dir": str(d)})
            if hit.get("warnings"):
                index.warnings[folder] = [Problem(**w) for w in hit["warnings"]]
            return True
        if "error" in hit:
            index.errors[folder] = Problem(**hit["error"])
            return True
    except TypeError:
        pass  # an entry of another shape: re-validate
    return False


# --------------------------------------------------------------------------------------------
# pass 2: validation


def summary_of(task: Any) -> TaskSummary:
    """The summary of a validated :class:`workstation.task.format.Task`."""
    return TaskSummary(
        id=task.id,
        title=task.title,
        kind=task.kind,
        backend=task.backend,
        claimed=task.claims.status,
        failure_class=task.claims.failure_class,
        dir=str(task.dir),
        validated=True,
    )


def validate_index(
    index: QueueIndex,
    *,
    on_progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    save: bool = True,
) -> QueueIndex:
    """Pass 2: validate every pending task with :func:`load_task` (in place; also returns
    ``index``). ``on_progress(done, total)`` is called every 50 tasks; ``should_stop()``
    ends early (the cache keeps what was validated)."""
    from workstation.task.format import load_task

    pending = index.pending
    for i, folder in enumerate(pending, 1):
        if should_stop is not None and should_stop():
            break
        d = index.root / "tasks" / folder
        try:
            task = load_task(d)
            index.tasks[folder] = summary_of(task)
            if task.warnings:
                index.warnings[folder] = list(task.warnings)
        except Problem as e:
            index.tasks.pop(folder, None)
            index.errors[folder] = e
        if on_progress is not None and (i % 50 == 0 or i == len(pending)):
            on_progress(i, len(pending))
    if save:
        _save_cache(index)
    return index


# --------------------------------------------------------------------------------------------
# rows: summary + review flags


@dataclass(frozen=True)
class QueueRow:
    """One row of the queue table.

    ``mine`` is the viewer's latest verdict's overall on this task (None: not reviewed by
    them), ``overall`` the task's effective current overall (any reviewer),
    ``reserved_by`` the holder's name ("" when free), ``open_disputes`` the count of
    unresolved disputes, ``screen`` the task's stored pre-screen
    (:class:`workstation.screen.summary.PrescreenBadge`: worst severity, failing check ids,
    when and where it ran) or None when its version has none.
    """

    summary: TaskSummary
    mine: str | None = None
    mine_id: str | None = None
    overall: str | None = None
    verdicts: int = 0
    reserved_by: str = ""
    reserved_by_me: bool = False
    open_disputes: int = 0
    has_draft: bool = False
    screen: Any = None
    #: the draft was written on another version of the task than the one in HEAD
    draft_outdated: bool = False

    @property
    def id(self) -> str:
        return self.summary.id

    @property
    def claimed_label(self) -> str:
        s = self.summary
        return f"fail ({s.failure_class})" if s.claimed == "fail" and s.failure_class else s.claimed

    @property
    def reviewed(self) -> bool:
        return self.mine is not None


def build_rows(
    index: QueueIndex,
    records: Any | None = None,
    me: Any | None = None,
    drafts: Iterable[str] = (),
    screens: Mapping[str, Any] | None = None,
    outdated: Iterable[str] = (),
) -> list[QueueRow]:
    """Rows for every loadable task, in folder order, with flags from a
    :class:`workstation.records.state.RecordSet` for viewer ``me`` (an Identity) when given,
    each task's pre-screen badge from ``screens`` (task id -> badge), and its draft (from
    ``drafts``; ``outdated``: those written on another version of the task)."""
    flags: Mapping[str, Any] = records.all_flags(me) if records is not None else {}
    drafted = set(drafts)
    stale = set(outdated)
    badges = screens or {}
    out = []
    for s in index.tasks.values():
        f = flags.get(s.id)
        if f is None:
            out.append(QueueRow(summary=s, has_draft=s.id in drafted, screen=badges.get(s.id),
                                draft_outdated=s.id in stale))
            continue
        reserved = f.reserved_by
        out.append(
            QueueRow(
                summary=s,
                mine=f.mine.overall if f.mine is not None else None,
                mine_id=f.mine.verdict_id if f.mine is not None else None,
                overall=f.overall,
                verdicts=f.verdicts,
                reserved_by=reserved.name if reserved is not None else "",
                reserved_by_me=bool(
                    reserved is not None and me is not None
                    and reserved.email.strip().lower() == me.email.strip().lower()
                ),
                open_disputes=f.open_disputes,
                has_draft=s.id in drafted,
                screen=badges.get(s.id),
                draft_outdated=s.id in stale,
            )
        )
    return out


# --------------------------------------------------------------------------------------------
# filter and sort

#: filter keys of the queue's filter line and what each matches.
FILTER_KEYS: dict[str, str] = {
    "kind": "task kind (generation, translation, ...)",
    "backend": "candidate backend (triton, cuda, ...)",
    "claimed": "claimed status: pass or fail, or a failure class",
    "reserved": "yes / no / me, or part of the holder's name",
    "disputed": "yes / no: has an open dispute",
    "mine": "yes / no (reviewed by me), or my overall: accept / reject / needs-work",
    "screen": "pre-screen's worst: fail / warn / info / pass / error / timeout / not-judged, none (not screened), stale",
    "failing": "a check id (or its start) the pre-screen failed, errored or could not judge on",
}
#: sort keys, in the order the sort key cycles.
SORT_KEYS: tuple[str, ...] = ("id", "kind", "backend", "claimed", "reserved", "disputed", "mine", "screen")

_YES = {"yes", "y", "true", "1"}
_NO = {"no", "n", "false", "0"}


@dataclass(frozen=True)
class QueueFilter:
    """A parsed filter line: ``key:value[,value...]`` terms (AND across terms, OR within
    a term's values) plus free words matched against id and title (all must match)."""

    terms: tuple[tuple[str, tuple[str, ...]], ...] = ()
    words: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()

    def matches(self, row: QueueRow) -> bool:
        s = row.summary
        for w in self.words:
            if w not in s.id.lower() and w not in s.title.lower():
                return False
        for key, values in self.terms:
            if not any(_term_matches(key, v, row) for v in values):
                return False
        return True

    def describe(self) -> str:
        parts = [f"{k}:{','.join(v)}" for k, v in self.terms] + list(self.words)
        return " ".join(parts)


def _term_matches(key: str, v: str, row: QueueRow) -> bool:
    """Whether ``row`` matches value ``v`` of filter term ``key`` (:data:`FILTER_KEYS`)."""
    match = _MATCHERS.get(key)
    return match is not None and match(v, row)


def _yes_no(v: str, present: bool) -> bool | None:
    """Whether the answer ``v`` agrees with ``present`` when it is a yes or a no; None when
    it is neither."""
    if v in _YES:
        return present
    if v in _NO:
        return not present
    return None


def _reserved(v: str, row: QueueRow) -> bool:
    yes_no = _yes_no(v, bool(row.reserved_by))
    if yes_no is not None:
        return yes_no
    return row.reserved_by_me if v == "me" else v in row.reserved_by.lower()


def _mine(v: str, row: QueueRow) -> bool:
    yes_no = _yes_no(v, row.mine is not None)
    return yes_no if yes_no is not None else (row.mine or "") == v


def _screen(v: str, row: QueueRow) -> bool:
    b = row.screen
    if v in ("none", *_NO):
        return b is None
    if v in ("any", *_YES):
        return b is not None
    if v == "stale":
        return b is not None and b.stale
    return b is not None and b.worst.startswith(v)


def _failing(v: str, row: QueueRow) -> bool:
    b = row.screen
    return b is not None and any(c.startswith(v) for c in (*b.failing, *b.errored, *b.not_judged))


#: each filter key's match of one value against a row.
_MATCHERS: dict[str, Callable[[str, QueueRow], bool]] = {
    "kind": lambda v, row: row.summary.kind.lower().startswith(v),
    "backend": lambda v, row: row.summary.backend.lower().startswith(v),
    "claimed": lambda v, row: v in (row.summary.claimed.lower(), row.summary.failure_class.lower()),
    "reserved": _reserved,
    "disputed": lambda v, row: bool(_yes_no(v, row.open_disputes > 0)),
    "mine": _mine,
    "screen": _screen,
    "failing": _failing,
}


def parse_filter(text: str) -> QueueFilter:
    """Parse a filter line such as ``kind:fusion,optimization disputed:yes softmax``.

    Unknown keys and empty values become ``problems`` (shown to the reviewer) and are
    ignored; matching is case-insensitive.
    """
    terms: list[tuple[str, tuple[str, ...]]] = []
    words: list[str] = []
    problems: list[str] = []
    for tok in text.split():
        key, sep, value = tok.partition(":")
        if not sep:
            words.append(tok.lower())
            continue
        key = key.lower()
        values = tuple(v for v in value.lower().split(",") if v)
        if key not in FILTER_KEYS:
            problems.append(f"unknown filter key {key!r} (keys: {', '.join(FILTER_KEYS)})")
            continue
        if not values:
            problems.append(f"{key}: needs a value")
            continue
        terms.append((key, values))
    return QueueFilter(tuple(terms), tuple(words), tuple(problems))


def _sort_value(key: str, row: QueueRow) -> tuple:
    s = row.summary
    if key == "kind":
        return (s.kind, s.id)
    if key == "backend":
        return (s.backend, s.id)
    if key == "claimed":
        return (s.claimed, s.failure_class, s.id)
    if key == "reserved":
        return (row.reserved_by == "", row.reserved_by.lower(), s.id)
    if key == "disputed":
        return (-row.open_disputes, s.id)
    if key == "mine":
        return (row.mine is not None, row.mine or "", s.id)
    if key == "screen":
        b = row.screen
        return (b.rank, -len(b.failing), -len(b.errored), s.id) if b is not None else (99, 0, 0, s.id)
    return (s.id,)


def sort_rows(rows: Iterable[QueueRow], key: str = "id", reverse: bool = False) -> list[QueueRow]:
    """``rows`` ordered by ``key`` (one of :data:`SORT_KEYS`), ties by task id."""
    if key not in SORT_KEYS:
        raise ValueError(f"unknown sort key {key!r} (keys: {', '.join(SORT_KEYS)})")
    return sorted(rows, key=lambda r: _sort_value(key, r), reverse=reverse)


def next_task(rows: list[QueueRow], after: str | None = None, which: str = "unreviewed",
              exclude: Iterable[str] = ()) -> QueueRow | None:
    """The next row after task ``after`` (wrapping around) of kind ``which``:
    ``unreviewed`` (:func:`next_unreviewed`) or ``reserved`` (:func:`next_reserved_by_me`),
    never one of ``exclude``."""
    skip = set(exclude)
    if which == "reserved":
        return _next_where(rows, after, lambda r: r.id not in skip and r.reserved_by_me and r.mine is None)
    return _next_where(rows, after, lambda r: r.id not in skip and r.mine is None
                       and (not r.reserved_by or r.reserved_by_me))


def _next_where(rows: list[QueueRow], after: str | None, want: Any) -> QueueRow | None:
    if not rows:
        return None
    start = 0
    if after is not None:
        for i, r in enumerate(rows):
            if r.id == after:
                start = i + 1
                break
    n = len(rows)
    for k in range(n):
        r = rows[(start + k) % n]
        if want(r):
            return r
    return None


def next_unreviewed(rows: list[QueueRow], after: str | None = None) -> QueueRow | None:
    """The first row after task ``after`` (in ``rows`` order, wrapping around) that I have
    not reviewed and nobody else holds reserved; None when there is none."""
    return _next_where(rows, after, lambda r: r.mine is None and (not r.reserved_by or r.reserved_by_me))


def next_reserved_by_me(rows: list[QueueRow], after: str | None = None) -> QueueRow | None:
    """The first row after task ``after`` (wrapping around) that I hold reserved and have
    not reviewed yet; None when there is none."""
    return _next_where(rows, after, lambda r: r.reserved_by_me and r.mine is None)


def with_summary(row: QueueRow, summary: TaskSummary) -> QueueRow:
    """``row`` with its summary replaced (after validation)."""
    return replace(row, summary=summary)
