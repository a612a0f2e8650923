"""The record types: what a verdict, dispute, resolution and reservation hold once read.

These are the in-memory model, independent of the file format: the TOML schema of each
record file is :mod:`workstation.records.format`, the state derived from a set of records
:mod:`workstation.records.state`, and writing them :mod:`workstation.records.store`.
Times are aware ``datetime`` s in UTC; ``path`` is a record's file relative to the queue
root (None for a record not read from a file).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, get_args

from workstation.repo.gitqueue import Identity, QueueError
from workstation.rubric.model import OVERALL_VALUES

__all__ = [
    "FOLDERS",
    "KINDS",
    "OUTCOMES",
    "Outcome",
    "Overall",
    "PROVENANCES",
    "Provenance",
    "SCHEMA",
    "CheckStatus",
    "Dispute",
    "FindingSummary",
    "Record",
    "RecordError",
    "Reservation",
    "Resolution",
    "TaskFlags",
    "Unverified",
    "Verdict",
    "record_file",
]

#: Record schema version written by this kws (a record naming a later one is not read).
SCHEMA = 1
#: The folder under the queue root for each record kind.
FOLDERS = {
    "verdict": "verdicts",
    "dispute": "disputes",
    "resolution": "resolutions",
    "reservation": "reservations",
}
#: The record kinds, in the order they are read.
KINDS = tuple(FOLDERS)
#: A resolution's outcome (the type; :data:`OUTCOMES` lists the values).
Outcome = Literal["upheld", "overturned", "amended"]
#: Resolution outcomes; each names what happens to the **disputed verdict**:
#: ``upheld`` (it stands), ``overturned`` (the dispute's values replace it),
#: ``amended`` (the resolver's own values replace the fields they give).
OUTCOMES: tuple[str, ...] = get_args(Outcome)
#: A verdict's ``overall`` value (the type): the rubric's ``OVERALL_VALUES``, which every
#: rubric's ``overall`` field must allow.
Overall = Literal["accept", "reject", "needs-work"]
if frozenset(get_args(Overall)) != OVERALL_VALUES:  # pragma: no cover - a guard for edits
    raise ImportError("records.model.Overall differs from rubric.model.OVERALL_VALUES")


#: Where an accepted suggestion came from (a verdict's ``suggested`` table): the findings of
#: a run whose informing checks had all finished, of a run where one was still queued,
#: running or had errored, or of a pre-screen (findings stored by an earlier run of the
#: same task version, shown before a fresh run).
Provenance = Literal["from-complete-run", "from-incomplete-run", "from-prescreen"]
PROVENANCES: tuple[str, ...] = get_args(Provenance)


class RecordError(QueueError):
    """A record cannot be written or found; the message says why (nothing was committed)."""


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
    relative to the queue root. ``sandbox`` is the check report's sandbox (``"bwrap"``,
    ``"none"``; "" when unknown); ``unfinished_checks`` are the checks of the run that had no
    result yet (queued or running) when the verdict was committed; ``not_judged`` maps each
    check of the report that could not look (wholly or in part, or ended in ``error``) to
    why, so a verdict says what it was not based on; ``suggested`` maps each
    field whose value the reviewer took from kws's suggestion to its :data:`Provenance`.
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
    sandbox: str = ""
    unfinished_checks: tuple[str, ...] = ()
    not_judged: Mapping[str, str] = field(default_factory=dict)
    suggested: Mapping[str, str] = field(default_factory=dict)
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
    ``amended``). ``supersedes`` names the earlier resolutions of the same dispute its
    writer knowingly replaced (``kws resolve --supersede``); two resolutions neither of
    which supersedes the other and that disagree are a conflict
    (:meth:`workstation.records.state.RecordSet.resolution_conflicts`).
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
    supersedes: tuple[str, ...] = ()

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


#: Any record kind.
Record = Verdict | Dispute | Resolution | Reservation


def record_file(record: Record) -> Path:
    """``record``'s file relative to the queue root (its kind's folder for a record not
    read from a file: ``path`` None), what a :class:`~workstation.schema.problem.Problem`
    about it names."""
    return record.path if record.path is not None else Path(FOLDERS[record.kind])


@dataclass(frozen=True)
class Unverified:
    """A record that parsed but does not count: its commit carries no good signature by a
    key the queue's allowed signers list for the reviewer the record names
    (:mod:`workstation.records.signing`). ``commit``: the commit that added the file
    (None: none found); ``why``: what is wrong, in words."""

    record: Record
    commit: str | None
    why: str

    @property
    def path(self) -> Path | None:
        return self.record.path

    @property
    def task(self) -> str:
        return self.record.task

    @property
    def kind(self) -> str:
        return self.record.kind

    @property
    def said(self) -> str:
        """What the record said: a verdict's overall, a resolution's outcome ("" for a
        dispute or a reservation)."""
        if isinstance(self.record, Verdict):
            return self.record.overall
        return self.record.outcome if isinstance(self.record, Resolution) else ""

    def __str__(self) -> str:
        return f"{self.path}: {self.kind} by {self.record.reviewer} is unverified and not counted: {self.why}"


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
