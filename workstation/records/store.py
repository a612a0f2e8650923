"""Verdicts, disputes, resolutions and reservations: append-only records in the queue.

Every record is a new TOML file (written with tomli-w, read with tomllib), committed with
one git commit of its own, and never edited afterwards. Layout (format: ``docs/records.md``)::

    verdicts/<task-id>/<reviewer-slug>--<UTC time>--<random>.toml
    disputes/<task-id>/<reviewer-slug>--<UTC time>--<random>.toml
    resolutions/<task-id>/<reviewer-slug>--<UTC time>--<random>.toml
    reservations/<task-id>/<reviewer-slug>--<UTC time>--<random>.toml

Because no two writers ever touch the same file, concurrent reviewers' commits rebase onto
each other without conflicts. Records are named by the ids stored in them (``verdict_id``,
``dispute_id``, ...), never by commit ids, which a rebase rewrites.

State is derived when read, deterministically (the **tie-break**): records are ordered by
``(timestamp, id)``, both compared as stored (UTC instants, then the id string); "latest"
means last in that order. A task's current verdict is its latest verdict; a reviewer's
current verdict on a task is their latest one; a dispute's resolution is the latest
resolution citing it; a verdict's effective values are its own values with the resolutions
of its disputes applied in that order. Reservations are the exception, since they are
locks: the earliest unexpired reservation holds until it expires or its holder releases it
(see :meth:`RecordSet.reservation`).

A record file that does not parse or validate is reported as a :class:`RecordProblem`
(file, key, problem) and skipped; every other record still loads.
"""

from __future__ import annotations

import functools
import json
import math
import re
import secrets
import time
import tomllib
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import git
import tomli_w

import workstation
from workstation.records.drafts import Draft, delete_draft
from workstation.repo.gitqueue import (
    Identity,
    QueueError,
    git_env,
    head_branch,
    reviewer_identity,
    task_version,
)
from workstation.rubric.model import OVERALL_VALUES, Rubric, validate_values

__all__ = [
    "FOLDERS",
    "OUTCOMES",
    "SCHEMA",
    "CheckStatus",
    "Dispute",
    "FindingSummary",
    "RecordError",
    "RecordProblem",
    "RecordSet",
    "Reservation",
    "Resolution",
    "TaskFlags",
    "Verdict",
    "commit_dispute",
    "commit_resolution",
    "commit_verdict",
    "load_records",
    "release",
    "reserve",
]

#: Record schema version written by this kws.
SCHEMA = 1
#: The folder under the queue root for each record kind.
FOLDERS = {
    "verdict": "verdicts",
    "dispute": "disputes",
    "resolution": "resolutions",
    "reservation": "reservations",
}
#: Resolution outcomes; each names what happens to the **disputed verdict**:
#: ``upheld`` (it stands), ``overturned`` (the dispute's values replace it),
#: ``amended`` (the resolver's own values replace the fields they give).
OUTCOMES = ("upheld", "overturned", "amended")

_EVIDENCE_LIMIT = 16_384  # bytes of JSON; larger evidence is not stored (kws recheck redoes it)
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_TASK_ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


class RecordError(QueueError):
    """A record cannot be written or found; the message says why (nothing was committed)."""


@dataclass(frozen=True)
class RecordProblem:
    """A record file kws skipped: ``path`` (relative to the queue root), ``key``, ``problem``."""

    path: Path
    key: str
    problem: str

    def __str__(self) -> str:
        return f"{self.path}: {self.key}: {self.problem}" if self.key else f"{self.path}: {self.problem}"


@dataclass(frozen=True)
class FindingSummary:
    """One finding as recorded in a verdict (task format v1 finding, evidence made TOML-safe)."""

    check: str
    severity: str
    summary: str
    repro: str = ""
    evidence: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CheckStatus:
    """One check's status as recorded in a verdict (task format v1 ``checks`` entry)."""

    check: str
    status: str
    seconds: float | None = None
    reason: str = ""


@dataclass(frozen=True)
class Verdict:
    """A committed verdict.

    ``fields`` holds the rubric's choice field values other than ``overall``; ``overall``
    and ``rationale`` are stored at the top level. ``task_tree`` is the git tree id of
    ``tasks/<task>`` judged. ``timestamp`` is an aware UTC datetime. ``path`` is the file,
    relative to the queue root.
    """

    verdict_id: str
    task: str
    task_tree: str
    reviewer: Identity
    timestamp: datetime
    rubric_id: str
    rubric_version: int
    overall: str
    rationale: str
    fields: Mapping[str, str]
    findings: tuple[FindingSummary, ...] = ()
    checks: tuple[CheckStatus, ...] = ()
    checks_complete: bool | None = None
    kws_version: str = ""
    device: str = ""
    versions: Mapping[str, str] = field(default_factory=dict)
    path: Path | None = None

    kind = "verdict"

    @property
    def id(self) -> str:
        return self.verdict_id

    @property
    def sort_key(self) -> tuple[datetime, str]:
        return (self.timestamp, self.verdict_id)

    def values(self, rationale_key: str = "rationale") -> dict[str, str]:
        """Every rubric field value: ``fields`` plus ``overall`` and the rationale."""
        out = dict(self.fields)
        out["overall"] = self.overall
        out[rationale_key] = self.rationale
        return out


@dataclass(frozen=True)
class Dispute:
    """A field-level disagreement with one verdict: ``fields`` are the disputer's values."""

    dispute_id: str
    verdict_id: str
    task: str
    task_tree: str
    reviewer: Identity
    timestamp: datetime
    fields: Mapping[str, str]
    rationale: str
    path: Path | None = None

    kind = "dispute"

    @property
    def id(self) -> str:
        return self.dispute_id

    @property
    def sort_key(self) -> tuple[datetime, str]:
        return (self.timestamp, self.dispute_id)


@dataclass(frozen=True)
class Resolution:
    """An adjudication of one dispute, citing both sides.

    ``verdict_values`` and ``dispute_values`` are the two sides' values for the disputed
    fields, copied at resolution time; ``fields`` are the values the verdict takes from now
    on (empty when ``upheld``; the dispute's values when ``overturned``; the resolver's when
    ``amended``).
    """

    resolution_id: str
    dispute_id: str
    verdict_id: str
    task: str
    reviewer: Identity
    timestamp: datetime
    outcome: str
    fields: Mapping[str, str]
    verdict_values: Mapping[str, str]
    dispute_values: Mapping[str, str]
    rationale: str
    path: Path | None = None

    kind = "resolution"

    @property
    def id(self) -> str:
        return self.resolution_id

    @property
    def sort_key(self) -> tuple[datetime, str]:
        return (self.timestamp, self.resolution_id)


@dataclass(frozen=True)
class Reservation:
    """A reserve or release of a task. ``expires`` is set on a reserve, None on a release."""

    reservation_id: str
    task: str
    reviewer: Identity
    timestamp: datetime
    action: str
    expires: datetime | None
    path: Path | None = None

    kind = "reservation"

    @property
    def id(self) -> str:
        return self.reservation_id

    @property
    def sort_key(self) -> tuple[datetime, str]:
        return (self.timestamp, self.reservation_id)


@dataclass(frozen=True)
class TaskFlags:
    """What the queue screen shows for one task (see :meth:`RecordSet.flags`).

    ``mine`` is the viewer's latest verdict (None: not reviewed by them), ``current`` the
    task's latest verdict, ``overall`` its effective overall after resolutions,
    ``open_disputes`` the count of unresolved disputes, ``reserved_by`` / ``reserved_until``
    the current reservation.
    """

    task: str
    verdicts: int = 0
    current: Verdict | None = None
    overall: str | None = None
    mine: Verdict | None = None
    open_disputes: int = 0
    reserved_by: Identity | None = None
    reserved_until: datetime | None = None

    @property
    def disputed(self) -> bool:
        return self.open_disputes > 0


# --------------------------------------------------------------------------------------------
# the loaded set of records


def _same(a: Identity, b: Identity) -> bool:
    return a.email.strip().lower() == b.email.strip().lower()


@dataclass
class RecordSet:
    """Every readable record of a queue, each list in ``(timestamp, id)`` order, plus the
    problems found in the unreadable ones.

    The per-task queries use an index built on first use: treat a loaded set as read-only
    (load it again after committing a record).
    """

    verdicts: list[Verdict] = field(default_factory=list)
    disputes: list[Dispute] = field(default_factory=list)
    resolutions: list[Resolution] = field(default_factory=list)
    reservations: list[Reservation] = field(default_factory=list)
    problems: list[RecordProblem] = field(default_factory=list)

    @functools.cached_property
    def _ix(self) -> dict[str, dict[str, list[Any]]]:
        ix: dict[str, dict[str, list[Any]]] = {
            "verdicts": {}, "disputes": {}, "resolutions": {}, "reservations": {},
            "disputes_of": {}, "resolutions_of": {},
        }
        for name in ("verdicts", "disputes", "resolutions", "reservations"):
            for r in getattr(self, name):
                ix[name].setdefault(r.task, []).append(r)
        for d in self.disputes:
            ix["disputes_of"].setdefault(d.verdict_id, []).append(d)
        for r in self.resolutions:
            ix["resolutions_of"].setdefault(r.dispute_id, []).append(r)
        return ix

    # ---- lookup by id (full id or a unique prefix of at least 4 characters)

    @staticmethod
    def _find(items: Sequence[Any], ident: str, kind: str) -> Any:
        ident = ident.strip().lower()
        exact = [r for r in items if r.id == ident]
        if exact:
            return exact[0]
        if len(ident) < 4:
            raise RecordError(f"no {kind} with id {ident!r} (give the full id or at least 4 characters)")
        hits = [r for r in items if r.id.startswith(ident)]
        if not hits:
            raise RecordError(f"no {kind} with id {ident!r} in this queue (run kws sync to fetch others')")
        if len(hits) > 1:
            raise RecordError(
                f"{kind} id {ident!r} is ambiguous: " + ", ".join(sorted(r.id for r in hits))
            )
        return hits[0]

    def verdict(self, ident: str) -> Verdict:
        """The verdict with id (or unique id prefix) ``ident``; RecordError otherwise."""
        return self._find(self.verdicts, ident, "verdict")

    def dispute(self, ident: str) -> Dispute:
        """The dispute with id (or unique id prefix) ``ident``; RecordError otherwise."""
        return self._find(self.disputes, ident, "dispute")

    # ---- per task

    def task_ids(self) -> list[str]:
        """Every task id with at least one verdict, dispute, resolution or reservation."""
        ids = {r.task for r in self.verdicts}
        ids |= {r.task for r in self.disputes}
        ids |= {r.task for r in self.resolutions}
        ids |= {r.task for r in self.reservations}
        return sorted(ids)

    def verdicts_for(self, task: str) -> list[Verdict]:
        """The task's verdicts, oldest first."""
        return list(self._ix["verdicts"].get(task, ()))

    def current_verdict(self, task: str) -> Verdict | None:
        """The task's latest verdict by ``(timestamp, verdict_id)``, or None."""
        vs = self.verdicts_for(task)
        return vs[-1] if vs else None

    def latest_by_reviewer(self, task: str) -> dict[str, Verdict]:
        """Each reviewer's latest verdict on ``task``, keyed by lower-cased email."""
        out: dict[str, Verdict] = {}
        for v in self.verdicts_for(task):
            out[v.reviewer.email.lower()] = v
        return out

    def reviewed_by(self, who: Identity) -> dict[str, Verdict]:
        """``{task id: who's latest verdict}`` over the whole queue (reviewed-by-me)."""
        out: dict[str, Verdict] = {}
        for v in self.verdicts:
            if _same(v.reviewer, who):
                out[v.task] = v
        return out

    def disputes_of(self, verdict_id: str) -> list[Dispute]:
        """The disputes of one verdict, oldest first."""
        return list(self._ix["disputes_of"].get(verdict_id, ()))

    def resolution_of(self, dispute_id: str) -> Resolution | None:
        """The latest resolution citing ``dispute_id``, or None (the dispute is open)."""
        rs = self._ix["resolutions_of"].get(dispute_id)
        return rs[-1] if rs else None

    def open_disputes(self, task: str | None = None) -> list[Dispute]:
        """Disputes without a resolution, of ``task`` or of every task, oldest first."""
        ds = self.disputes if task is None else self._ix["disputes"].get(task, ())
        return [d for d in ds if d.dispute_id not in self._ix["resolutions_of"]]

    def effective_values(self, verdict: Verdict, rationale_key: str = "rationale") -> dict[str, str]:
        """The verdict's values with its disputes' resolutions applied in ``(timestamp, id)``
        order (only each dispute's latest resolution counts)."""
        vals = verdict.values(rationale_key)
        applied = []
        for d in self.disputes_of(verdict.verdict_id):
            r = self.resolution_of(d.dispute_id)
            if r is not None:
                applied.append(r)
        for r in sorted(applied, key=lambda r: r.sort_key):
            vals.update(r.fields)
        return vals

    def reservation(self, task: str, now: datetime | None = None) -> Reservation | None:
        """The reserve record holding ``task`` at ``now`` (default: now), or None.

        Walk the task's reservation records in ``(timestamp, id)`` order: a reserve takes
        the task when it is free (no holder, or the holder's reservation expired before the
        record's time) or renews it when it is the holder's own; a reserve by someone else
        while it is held loses (first come, first served, also after a concurrent sync);
        a release by the holder frees it. At ``now``, an expired holder holds nothing.
        """
        now = now or datetime.now(UTC)
        holder: Reservation | None = None
        for r in self._ix["reservations"].get(task, ()):
            if holder is not None and holder.expires is not None and holder.expires <= r.timestamp:
                holder = None
            if r.action == "reserve":
                if holder is None or _same(holder.reviewer, r.reviewer):
                    holder = r
            elif r.action == "release" and holder is not None and _same(holder.reviewer, r.reviewer):
                holder = None
        if holder is not None and holder.expires is not None and holder.expires <= now:
            return None
        return holder

    def flags(self, task: str, me: Identity | None = None, now: datetime | None = None) -> TaskFlags:
        """The queue screen's view of ``task`` for viewer ``me``."""
        vs = self.verdicts_for(task)
        cur = vs[-1] if vs else None
        mine = None
        if me is not None:
            own = [v for v in vs if _same(v.reviewer, me)]
            mine = own[-1] if own else None
        res = self.reservation(task, now)
        return TaskFlags(
            task=task,
            verdicts=len(vs),
            current=cur,
            overall=self.effective_values(cur)["overall"] if cur else None,
            mine=mine,
            open_disputes=len(self.open_disputes(task)),
            reserved_by=res.reviewer if res else None,
            reserved_until=res.expires if res else None,
        )

    def all_flags(self, me: Identity | None = None, now: datetime | None = None) -> dict[str, TaskFlags]:
        """:meth:`flags` for every task that has records (tasks without any have none)."""
        return {t: self.flags(t, me, now) for t in self.task_ids()}


# --------------------------------------------------------------------------------------------
# reading


class _Bad(Exception):
    def __init__(self, key: str, problem: str) -> None:
        self.key, self.problem = key, problem


def _get(d: Mapping[str, Any], key: str, typ: type | tuple[type, ...], where: str = "", required: bool = True) -> Any:
    name = f"{where}.{key}" if where else key
    if key not in d:
        if required:
            raise _Bad(name, "missing")
        return None
    v = d[key]
    if typ is int and type(v) is not int:
        raise _Bad(name, f"must be an integer, got {v!r}")
    if not isinstance(v, typ):
        tn = typ.__name__ if isinstance(typ, type) else "/".join(t.__name__ for t in typ)
        raise _Bad(name, f"must be {tn}, got {type(v).__name__} {v!r}")
    return v


def _str(d: Mapping[str, Any], key: str, where: str = "", required: bool = True, nonempty: bool = False) -> str:
    v = _get(d, key, str, where, required)
    if v is None:
        return ""
    if nonempty and not v.strip():
        raise _Bad(f"{where}.{key}" if where else key, "must not be empty")
    return v


def _time(d: Mapping[str, Any], key: str, required: bool = True) -> datetime | None:
    if key not in d:
        if required:
            raise _Bad(key, "missing")
        return None
    v = d[key]
    if isinstance(v, str):
        try:
            v = datetime.fromisoformat(v)
        except ValueError as exc:
            raise _Bad(key, f"not an RFC 3339 date-time: {v!r}") from exc
    if not isinstance(v, datetime):
        raise _Bad(key, f"must be an RFC 3339 date-time, got {v!r}")
    if v.tzinfo is None:
        raise _Bad(key, "must carry a UTC offset (e.g. 2025-01-31T12:00:00Z)")
    return v.astimezone(UTC)


def _ident(d: Mapping[str, Any], key: str = "reviewer") -> Identity:
    t = _get(d, key, dict)
    return Identity(_str(t, "name", key, nonempty=True), _str(t, "email", key, nonempty=True))


def _str_table(d: Mapping[str, Any], key: str, required: bool = False) -> dict[str, str]:
    t = _get(d, key, dict, required=required) or {}
    for k, v in t.items():
        if not isinstance(v, str):
            raise _Bad(f"{key}.{k}", f"must be a string, got {v!r}")
    return dict(t)


def _id(d: Mapping[str, Any], key: str) -> str:
    v = _str(d, key, nonempty=True).strip().lower()
    if not re.fullmatch(r"[0-9a-f][0-9a-f-]{7,63}", v):
        raise _Bad(key, f"{v!r} is not a record id (hex digits and '-', e.g. a UUID)")
    return v


def _common(d: Mapping[str, Any], kind: str) -> None:
    schema = d.get("schema")
    if type(schema) is not int:
        raise _Bad("schema", "missing or not an integer")
    if schema > SCHEMA:
        raise _Bad("schema", f"schema {schema} is newer than this kws reads ({SCHEMA}); update kws")
    rec = d.get("record")
    if rec != kind:
        raise _Bad("record", f"expected {kind!r} in {FOLDERS[kind]}/, got {rec!r}")


def _task(d: Mapping[str, Any], folder_task: str) -> str:
    t = _str(d, "task", nonempty=True)
    if t != folder_task:
        raise _Bad("task", f"{t!r} differs from the folder it is in ({folder_task!r})")
    return t


def _tree(d: Mapping[str, Any], key: str = "task_tree") -> str:
    t = _str(d, key, nonempty=True)
    if not _HEX40.match(t):
        raise _Bad(key, f"{t!r} is not a git tree id (40 hex digits)")
    return t


def _parse_verdict(d: Mapping[str, Any], task: str, rel: Path) -> Verdict:
    _common(d, "verdict")
    overall = _str(d, "overall")
    if overall not in OVERALL_VALUES:
        raise _Bad("overall", f"{overall!r} is not one of accept, reject, needs-work")
    rationale = _str(d, "rationale", required=False)
    if overall == "reject" and not rationale.strip():
        raise _Bad("rationale", "required when overall is reject")
    rub = _get(d, "rubric", dict)
    fields = _str_table(d, "fields", required=True)
    if "overall" in fields or "rationale" in fields:
        raise _Bad("fields", "overall and rationale are top-level keys, not fields")
    findings = []
    for i, f in enumerate(_get(d, "findings", list, required=False) or []):
        w = f"findings[{i}]"
        if not isinstance(f, dict):
            raise _Bad(w, "must be a table")
        findings.append(
            FindingSummary(
                check=_str(f, "check", w, nonempty=True),
                severity=_str(f, "severity", w, nonempty=True),
                summary=_str(f, "summary", w, required=False),
                repro=_str(f, "repro", w, required=False),
                evidence=_get(f, "evidence", dict, w, required=False) or {},
            )
        )
    checks = []
    for i, c in enumerate(_get(d, "checks", list, required=False) or []):
        w = f"checks[{i}]"
        if not isinstance(c, dict):
            raise _Bad(w, "must be a table")
        secs = _get(c, "seconds", (int, float), w, required=False)
        checks.append(
            CheckStatus(
                check=_str(c, "check", w, nonempty=True),
                status=_str(c, "status", w, nonempty=True),
                seconds=float(secs) if secs is not None else None,
                reason=_str(c, "reason", w, required=False),
            )
        )
    versions = _str_table(d, "versions")
    return Verdict(
        verdict_id=_id(d, "verdict_id"),
        task=_task(d, task),
        task_tree=_tree(d),
        reviewer=_ident(d),
        timestamp=_time(d, "timestamp"),
        rubric_id=_str(rub, "id", "rubric", nonempty=True),
        rubric_version=_get(rub, "version", int, "rubric"),
        overall=overall,
        rationale=rationale,
        fields=fields,
        findings=tuple(findings),
        checks=tuple(checks),
        checks_complete=_get(d, "checks_complete", bool, required=False),
        kws_version=_str(d, "kws_version", required=False),
        device=_str(d, "device", required=False),
        versions=versions,
        path=rel,
    )


def _parse_dispute(d: Mapping[str, Any], task: str, rel: Path) -> Dispute:
    _common(d, "dispute")
    fields = _str_table(d, "fields", required=True)
    if not fields:
        raise _Bad("fields", "a dispute names at least one field")
    return Dispute(
        dispute_id=_id(d, "dispute_id"),
        verdict_id=_id(d, "verdict_id"),
        task=_task(d, task),
        task_tree=_tree(d),
        reviewer=_ident(d),
        timestamp=_time(d, "timestamp"),
        fields=fields,
        rationale=_str(d, "rationale", nonempty=True),
        path=rel,
    )


def _parse_resolution(d: Mapping[str, Any], task: str, rel: Path) -> Resolution:
    _common(d, "resolution")
    outcome = _str(d, "outcome")
    if outcome not in OUTCOMES:
        raise _Bad("outcome", f"{outcome!r} is not one of {', '.join(OUTCOMES)}")
    fields = _str_table(d, "fields")
    if outcome == "upheld" and fields:
        raise _Bad("fields", "an upheld verdict keeps its values: fields must be empty")
    if outcome != "upheld" and not fields:
        raise _Bad("fields", f"an {outcome} resolution gives the values the verdict takes")
    return Resolution(
        resolution_id=_id(d, "resolution_id"),
        dispute_id=_id(d, "dispute_id"),
        verdict_id=_id(d, "verdict_id"),
        task=_task(d, task),
        reviewer=_ident(d),
        timestamp=_time(d, "timestamp"),
        outcome=outcome,
        fields=fields,
        verdict_values=_str_table(d, "verdict_values"),
        dispute_values=_str_table(d, "dispute_values"),
        rationale=_str(d, "rationale", nonempty=True),
        path=rel,
    )


def _parse_reservation(d: Mapping[str, Any], task: str, rel: Path) -> Reservation:
    _common(d, "reservation")
    action = _str(d, "action")
    if action not in ("reserve", "release"):
        raise _Bad("action", f"{action!r} is not reserve or release")
    ts = _time(d, "timestamp")
    expires = _time(d, "expires", required=action == "reserve")
    if action == "reserve" and expires <= ts:
        raise _Bad("expires", "must be later than timestamp")
    return Reservation(
        reservation_id=_id(d, "reservation_id"),
        task=_task(d, task),
        reviewer=_ident(d),
        timestamp=ts,
        action=action,
        expires=expires if action == "reserve" else None,
        path=rel,
    )


_PARSERS: dict[str, Callable[[Mapping[str, Any], str, Path], Any]] = {
    "verdict": _parse_verdict,
    "dispute": _parse_dispute,
    "resolution": _parse_resolution,
    "reservation": _parse_reservation,
}


def load_records(root: Path | str, kinds: Iterable[str] = tuple(FOLDERS)) -> RecordSet:
    """Read every record under the queue at ``root`` (the work tree, i.e. what HEAD holds
    plus anything not yet committed), skipping and reporting the malformed ones.

    Only ``<folder>/<task-id>/*.toml`` files are records; any other file or folder under a
    record folder is reported as a problem. Two files with the same record id: the one
    later in path order is reported and skipped.
    """
    root = Path(root)
    rs = RecordSet()
    seen: dict[str, Path] = {}
    for kind in kinds:
        folder = root / FOLDERS[kind]
        if not folder.is_dir():
            continue
        out: list[Any] = []
        for task_dir in sorted(folder.iterdir()):
            rel_dir = task_dir.relative_to(root)
            if task_dir.name.startswith("."):
                continue
            if not task_dir.is_dir():
                rs.problems.append(RecordProblem(rel_dir, "", f"not in a task folder ({FOLDERS[kind]}/<task-id>/)"))
                continue
            if not _TASK_ID_RE.match(task_dir.name):
                rs.problems.append(RecordProblem(rel_dir, "", "folder name is not a task id"))
                continue
            for f in sorted(task_dir.iterdir()):
                rel = f.relative_to(root)
                if f.name.startswith("."):
                    continue
                if f.suffix != ".toml" or not f.is_file():
                    rs.problems.append(RecordProblem(rel, "", "not a .toml record file"))
                    continue
                try:
                    data = tomllib.loads(f.read_text(encoding="utf-8"))
                except (OSError, UnicodeDecodeError) as exc:
                    rs.problems.append(RecordProblem(rel, "", f"cannot read: {exc}"))
                    continue
                except tomllib.TOMLDecodeError as exc:
                    rs.problems.append(RecordProblem(rel, "", f"not valid TOML: {exc}"))
                    continue
                try:
                    rec = _PARSERS[kind](data, task_dir.name, rel)
                except _Bad as bad:
                    rs.problems.append(RecordProblem(rel, bad.key, bad.problem))
                    continue
                if rec.id in seen:
                    rs.problems.append(
                        RecordProblem(rel, f"{kind}_id", f"duplicate id {rec.id} (also in {seen[rec.id]})")
                    )
                    continue
                seen[rec.id] = rel
                out.append(rec)
        out.sort(key=lambda r: r.sort_key)
        setattr(rs, FOLDERS[kind], out)
    return rs


# --------------------------------------------------------------------------------------------
# writing


def _now() -> datetime:
    return datetime.now(UTC)


def _rfc3339(ts: datetime) -> str:
    return ts.astimezone(UTC).isoformat().replace("+00:00", "Z")


def reviewer_slug(who: Identity) -> str:
    """File-name-safe slug of a reviewer: the lower-cased email with other characters as '-'."""
    base = who.email or who.name
    slug = re.sub(r"[^a-z0-9._-]+", "-", base.lower()).strip("-.")
    return slug[:64] or "reviewer"


def record_path(kind: str, task: str, who: Identity, ts: datetime) -> Path:
    """``<folder>/<task>/<reviewer-slug>--<YYYYmmddTHHMMSS.ffffffZ>--<6 hex>.toml``."""
    stamp = ts.astimezone(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    return Path(FOLDERS[kind]) / task / f"{reviewer_slug(who)}--{stamp}--{secrets.token_hex(3)}.toml"


def toml_safe(obj: Any) -> Any:
    """Make a JSON-like value writable as TOML: TOML has no null, so None values are
    dropped from tables and written as the string "null" in arrays; non-finite floats become
    "nan", "inf", "-inf" (as task format v1 writes them in JSON); tuples become arrays; keys
    become strings; anything else becomes its ``str()``."""
    if isinstance(obj, Mapping):
        return {str(k): toml_safe(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, (list, tuple)):
        return ["null" if v is None else toml_safe(v) for v in obj]
    if isinstance(obj, bool) or isinstance(obj, (int, str, datetime)):
        return obj
    if isinstance(obj, float):
        if math.isnan(obj):
            return "nan"
        if math.isinf(obj):
            return "inf" if obj > 0 else "-inf"
        return obj
    return str(obj)


def _trailers(**pairs: str) -> str:
    lines = []
    for key, val in pairs.items():
        if val is None:
            continue
        name = "Kws-" + "-".join(p.capitalize() for p in key.split("_"))
        lines.append(f"{name}: {' '.join(str(val).split())}")
    return "\n".join(lines)


def _git_retry(fn: Callable[[], Any], attempts: int = 20) -> Any:
    """Run a git command, retrying while another git process holds the index lock."""
    for i in range(attempts):
        try:
            return fn()
        except git.GitCommandError as exc:
            if "index.lock" not in str(exc) or i == attempts - 1:
                raise
            time.sleep(0.05 * (i + 1))


def _check_branch(repo: git.Repo, what: str) -> str:
    branch = head_branch(repo)
    if branch is None:
        raise RecordError(
            f"{what} not committed: HEAD is detached in {repo.working_tree_dir}; a commit there "
            f"belongs to no branch and sync would not send it. Check out your branch "
            f"(git -C {repo.working_tree_dir} switch main) and try again"
        )
    try:
        repo.git.rev_parse("--verify", "-q", "MERGE_HEAD")
        raise RecordError(f"{what} not committed: a merge is in progress in {repo.working_tree_dir}")
    except git.GitCommandError:
        pass
    git_dir = Path(repo.git_dir)
    if (git_dir / "rebase-merge").exists() or (git_dir / "rebase-apply").exists():
        raise RecordError(
            f"{what} not committed: a rebase is in progress in {repo.working_tree_dir} "
            "(finish it or run git rebase --abort)"
        )
    return branch


def _commit_file(repo: git.Repo, rel: Path, data: Mapping[str, Any], message: str, who: Identity) -> str:
    """Write ``data`` as a new TOML file at ``rel`` (must not exist) and commit only that
    path. On any failure the file is removed and unstaged again; returns the commit id."""
    root = Path(repo.working_tree_dir)
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = tomli_w.dumps(data).encode("utf-8")
    tomllib.loads(payload.decode("utf-8"))  # round-trip: never commit a file kws cannot read
    with path.open("xb") as fh:  # exclusive: records are never overwritten
        fh.write(payload)
    posix = rel.as_posix()
    try:
        _git_retry(lambda: repo.git.add("--", posix))
        _git_retry(
            lambda: repo.git.commit("-q", "-m", message, "--only", "--", posix, env=git_env(who))
        )
        return repo.head.commit.hexsha
    except BaseException:
        try:
            repo.git.rm("-q", "--cached", "--ignore-unmatch", "--", posix)
        except git.GitCommandError:
            pass
        path.unlink(missing_ok=True)
        raise


def _identity_table(who: Identity) -> dict[str, str]:
    return {"name": who.name, "email": who.email}


def _finding_table(f: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "check": str(f.get("check", "")),
        "severity": str(f.get("severity", "")),
        "summary": str(f.get("summary", "")),
    }
    if f.get("repro"):
        out["repro"] = str(f["repro"])
    ev = f.get("evidence")
    if isinstance(ev, Mapping) and ev:
        size = len(json.dumps(ev, default=str))
        if size <= _EVIDENCE_LIMIT:
            out["evidence"] = toml_safe(ev)
        else:
            out["evidence"] = {
                "not_stored": f"{size} bytes of evidence exceed {_EVIDENCE_LIMIT}; kws recheck reproduces it"
            }
    return out


def _check_table(c: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"check": str(c.get("check", "")), "status": str(c.get("status", ""))}
    secs = c.get("seconds")
    if isinstance(secs, (int, float)) and not isinstance(secs, bool) and math.isfinite(secs):
        out["seconds"] = float(secs)
    if c.get("reason"):
        out["reason"] = str(c["reason"])
    return out


def commit_verdict(
    repo: git.Repo,
    draft: Draft,
    rubric: Rubric,
    *,
    identity: Identity | None = None,
    remove_draft: bool = True,
) -> Verdict:
    """Validate ``draft`` against ``rubric`` and commit it as a new verdict file.

    Preconditions, each a :class:`RecordError` (or :class:`~workstation.repo.gitqueue.IdentityError`)
    that commits nothing and leaves the saved draft alone: the reviewer has a git identity;
    the values pass :func:`~workstation.rubric.model.validate_values`; HEAD is on a branch (not
    detached, no merge or rebase in progress); ``tasks/<task>`` is committed in HEAD and its
    work tree matches HEAD (otherwise the verdict would name a version nobody reviewed); and
    where the draft names the tree its checks ran on, HEAD still has that tree.

    The verdict records the draft's check report, if any (findings with check, severity,
    summary, repro and TOML-safe evidence; checks with status, seconds, reason; device;
    ``complete``; versions). One commit, only this file, with trailers ``Kws-Record``,
    ``Kws-Task``, ``Kws-Overall``, ``Kws-Reviewer``, ``Kws-Task-Tree``. The draft file is
    deleted after the commit succeeded (``remove_draft``).
    """
    who = identity or reviewer_identity(repo)
    if draft.rubric_id and draft.rubric_id != rubric.id:
        raise RecordError(
            f"verdict not committed: the draft was made with rubric {draft.rubric_id!r}, not {rubric.id!r}"
        )
    problems = validate_values(rubric, draft.values)
    if problems:
        raise RecordError("verdict not committed:\n  " + "\n  ".join(problems))
    _check_branch(repo, "verdict")
    tv = task_version(repo, draft.task)
    if tv.tree is None:
        raise RecordError(
            f"verdict not committed: tasks/{draft.task} is not in HEAD of {repo.working_tree_dir}"
        )
    if tv.dirty:
        raise RecordError(
            f"verdict not committed: tasks/{draft.task} has uncommitted changes, so no git tree "
            "names the version you reviewed:\n  "
            + "\n  ".join(tv.dirty)
            + "\ncommit them (a new task version) or discard them, then commit the verdict"
        )
    if draft.task_tree and draft.task_tree != tv.tree:
        raise RecordError(
            f"verdict not committed: tasks/{draft.task} changed since its checks ran (tree "
            f"{draft.task_tree[:10]} then, {tv.tree[:10]} in HEAD now); re-run the checks on "
            "the current version"
        )
    report = draft.report or {}
    values = dict(draft.values)
    overall = values.pop("overall")
    rationale = values.pop(rubric.rationale_field, "") or ""
    fields = {f.key: values[f.key] for f in rubric.fields if values.get(f.key)}  # rubric order
    ts = _now()
    vid = str(uuid.uuid4())
    rel = record_path("verdict", draft.task, who, ts)
    data: dict[str, Any] = {
        "schema": SCHEMA,
        "record": "verdict",
        "verdict_id": vid,
        "task": draft.task,
        "task_tree": tv.tree,
        "timestamp": ts,
        "overall": overall,
        "rationale": rationale.strip(),
        "kws_version": workstation.__version__,
        "device": str(report.get("device") or "none (no checks run)"),
        "reviewer": _identity_table(who),
        "rubric": {"id": rubric.id, "version": rubric.version},
        "fields": fields,
    }
    if report:
        if isinstance(report.get("complete"), bool):
            data["checks_complete"] = report["complete"]
        vers = report.get("versions")
        if isinstance(vers, Mapping):
            data["versions"] = {str(k): str(v) for k, v in vers.items() if v is not None}
        data["findings"] = [_finding_table(f) for f in report.get("findings") or []]
        data["checks"] = [_check_table(c) for c in report.get("checks") or []]
    message = (
        f"kws verdict: {overall} {draft.task}\n\n"
        + _trailers(
            record=f"verdict:{vid}",
            task=draft.task,
            overall=overall,
            reviewer=str(who),
            task_tree=tv.tree,
        )
        + "\n"
    )
    _commit_file(repo, rel, data, message, who)
    if remove_draft:
        delete_draft(draft.queue or repo.working_tree_dir, draft.task)
    return _parse_verdict(toml_safe_roundtrip(data), draft.task, rel)


def toml_safe_roundtrip(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` as it reads back from its TOML form (what other kws instances will see)."""
    return tomllib.loads(tomli_w.dumps(data))


def commit_dispute(
    repo: git.Repo,
    verdict: Verdict,
    fields: Mapping[str, str],
    rationale: str,
    rubric: Rubric | None = None,
    *,
    identity: Identity | None = None,
) -> Dispute:
    """Commit a dispute of ``verdict``: the disputer's values for some of its fields.

    ``fields`` must be non-empty, name choice fields of the verdict's rubric (``rubric``,
    when given, is used to check the values) and differ from the verdict's values; the
    rationale is required. Trailers: ``Kws-Record``, ``Kws-Task``, ``Kws-Verdict``,
    ``Kws-Reviewer``.
    """
    who = identity or reviewer_identity(repo)
    if not fields:
        raise RecordError("dispute not committed: name at least one field (--field KEY=VALUE)")
    if not rationale.strip():
        raise RecordError("dispute not committed: a dispute needs a rationale")
    current = verdict.values()
    problems = []
    for k, v in fields.items():
        if k == "rationale" or (rubric is not None and k == rubric.rationale_field):
            problems.append(f"{k}: the rationale is text; put your reasoning in --rationale")
            continue
        if rubric is not None:
            f = rubric.field(k)
            if f is None or f.kind != "choice":
                problems.append(f"{k}: not a choice field of rubric {rubric.id}")
                continue
            if v not in f.allowed:
                problems.append(f"{k}: {v!r} is not one of: {', '.join(f.allowed)}")
                continue
        elif k not in current:
            problems.append(f"{k}: the verdict has no such field")
            continue
        if current.get(k) == v:
            problems.append(f"{k}: the verdict already says {v!r}")
    if problems:
        raise RecordError("dispute not committed:\n  " + "\n  ".join(problems))
    _check_branch(repo, "dispute")
    ts = _now()
    did = str(uuid.uuid4())
    rel = record_path("dispute", verdict.task, who, ts)
    data = {
        "schema": SCHEMA,
        "record": "dispute",
        "dispute_id": did,
        "verdict_id": verdict.verdict_id,
        "task": verdict.task,
        "task_tree": verdict.task_tree,
        "timestamp": ts,
        "rationale": rationale.strip(),
        "reviewer": _identity_table(who),
        "fields": dict(fields),
    }
    message = (
        f"kws dispute: {verdict.task} verdict {verdict.verdict_id[:8]} "
        f"({', '.join(f'{k}={v}' for k, v in fields.items())})\n\n"
        + _trailers(
            record=f"dispute:{did}",
            task=verdict.task,
            verdict=verdict.verdict_id,
            reviewer=str(who),
        )
        + "\n"
    )
    _commit_file(repo, rel, data, message, who)
    return _parse_dispute(toml_safe_roundtrip(data), verdict.task, rel)


def commit_resolution(
    repo: git.Repo,
    records: RecordSet,
    dispute: Dispute,
    outcome: str,
    rationale: str,
    fields: Mapping[str, str] | None = None,
    rubric: Rubric | None = None,
    *,
    identity: Identity | None = None,
    supersede: bool = False,
) -> Resolution:
    """Commit an adjudication of ``dispute`` citing both the verdict and the dispute.

    ``outcome``: ``upheld`` (the verdict stands; no ``fields``), ``overturned`` (the
    dispute's values replace the verdict's; no ``fields``), ``amended`` (``fields`` are the
    resolver's values, required; checked against ``rubric`` when given). A dispute that
    already has a resolution is refused unless ``supersede`` (the latest resolution
    counts). The record copies the verdict's and the dispute's values for the disputed
    fields. Trailers: ``Kws-Record``, ``Kws-Task``, ``Kws-Outcome``, ``Kws-Verdict``,
    ``Kws-Dispute``, ``Kws-Reviewer`` and, when the resolution changes it, ``Kws-Overall``.
    """
    who = identity or reviewer_identity(repo)
    if outcome not in OUTCOMES:
        raise RecordError(f"resolution not committed: outcome must be one of {', '.join(OUTCOMES)}")
    if not rationale.strip():
        raise RecordError("resolution not committed: a resolution needs a rationale")
    fields = dict(fields or {})
    try:
        verdict = records.verdict(dispute.verdict_id)
    except RecordError as exc:
        raise RecordError(
            f"resolution not committed: the disputed verdict {dispute.verdict_id} is not "
            "readable in this queue (run kws sync; see kws history for problems)"
        ) from exc
    prior = records.resolution_of(dispute.dispute_id)
    if prior is not None and not supersede:
        raise RecordError(
            f"resolution not committed: dispute {dispute.dispute_id[:8]} was already resolved "
            f"({prior.outcome}) by {prior.reviewer} at {_rfc3339(prior.timestamp)}; "
            "pass --supersede to replace that adjudication"
        )
    if outcome in ("upheld", "overturned") and fields:
        raise RecordError(f"resolution not committed: {outcome} takes no --field (use amended)")
    if outcome == "amended":
        if not fields:
            raise RecordError("resolution not committed: amended needs the new values (--field KEY=VALUE)")
        problems = []
        for k, v in fields.items():
            if rubric is not None:
                f = rubric.field(k)
                if f is None or f.kind != "choice":
                    problems.append(f"{k}: not a choice field of rubric {rubric.id}")
                elif v not in f.allowed:
                    problems.append(f"{k}: {v!r} is not one of: {', '.join(f.allowed)}")
            elif k not in verdict.values():
                problems.append(f"{k}: the verdict has no such field")
        if problems:
            raise RecordError("resolution not committed:\n  " + "\n  ".join(problems))
    elif outcome == "overturned":
        fields = dict(dispute.fields)
    vvals = verdict.values()
    disputed = sorted(set(dispute.fields) | set(fields))
    _check_branch(repo, "resolution")
    ts = _now()
    rid = str(uuid.uuid4())
    rel = record_path("resolution", dispute.task, who, ts)
    data = {
        "schema": SCHEMA,
        "record": "resolution",
        "resolution_id": rid,
        "dispute_id": dispute.dispute_id,
        "verdict_id": verdict.verdict_id,
        "task": dispute.task,
        "timestamp": ts,
        "outcome": outcome,
        "rationale": rationale.strip(),
        "reviewer": _identity_table(who),
        "verdict_values": {k: vvals[k] for k in disputed if k in vvals},
        "dispute_values": dict(dispute.fields),
        "fields": fields,
    }
    message = (
        f"kws resolution: {outcome} {dispute.task} verdict {verdict.verdict_id[:8]} "
        f"(dispute {dispute.dispute_id[:8]})\n\n"
        + _trailers(
            record=f"resolution:{rid}",
            task=dispute.task,
            outcome=outcome,
            verdict=verdict.verdict_id,
            dispute=dispute.dispute_id,
            reviewer=str(who),
            overall=fields.get("overall"),
        )
        + "\n"
    )
    _commit_file(repo, rel, data, message, who)
    return _parse_resolution(toml_safe_roundtrip(data), dispute.task, rel)


def _reservation(
    repo: git.Repo, task: str, action: str, who: Identity, hours: float | None
) -> Reservation:
    _check_branch(repo, action)
    ts = _now()
    expires = ts + timedelta(hours=hours) if hours is not None else None
    rid = str(uuid.uuid4())
    rel = record_path("reservation", task, who, ts)
    data: dict[str, Any] = {
        "schema": SCHEMA,
        "record": "reservation",
        "reservation_id": rid,
        "task": task,
        "action": action,
        "timestamp": ts,
        "reviewer": _identity_table(who),
    }
    if expires is not None:
        data["expires"] = expires
    message = (
        f"kws {action}: {task}\n\n"
        + _trailers(record=f"reservation:{rid}", task=task, action=action, reviewer=str(who))
        + "\n"
    )
    _commit_file(repo, rel, data, message, who)
    return _parse_reservation(toml_safe_roundtrip(data), task, rel)


def reserve(
    repo: git.Repo,
    task: str,
    hours: float = 4.0,
    *,
    identity: Identity | None = None,
    records: RecordSet | None = None,
) -> Reservation:
    """Reserve ``task`` for ``hours`` (renewing one's own reservation).

    Refused (RecordError) when, as far as this clone knows, someone else holds it; two
    reviewers reserving at once both commit, and after sync the earlier one holds (see
    :meth:`RecordSet.reservation`). The task must exist in HEAD.
    """
    who = identity or reviewer_identity(repo)
    if not (0 < hours <= 24 * 14):
        raise RecordError("reservation not committed: --hours must be in (0, 336]")
    if task_version(repo, task).tree is None:
        raise RecordError(f"reservation not committed: tasks/{task} is not in HEAD")
    rs = records if records is not None else load_records(repo.working_tree_dir, ("reservation",))
    held = rs.reservation(task)
    if held is not None and not _same(held.reviewer, who):
        raise RecordError(
            f"{task} is reserved by {held.reviewer} until {_rfc3339(held.expires)}"
        )
    return _reservation(repo, task, "reserve", who, hours)


def release(
    repo: git.Repo,
    task: str,
    *,
    identity: Identity | None = None,
    records: RecordSet | None = None,
) -> Reservation:
    """Release one's own reservation of ``task`` (RecordError when one holds none)."""
    who = identity or reviewer_identity(repo)
    rs = records if records is not None else load_records(repo.working_tree_dir, ("reservation",))
    held = rs.reservation(task)
    if held is None or not _same(held.reviewer, who):
        other = f" (held by {held.reviewer})" if held is not None else ""
        raise RecordError(f"you hold no reservation of {task}{other}")
    return _reservation(repo, task, "release", who, None)
