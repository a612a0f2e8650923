"""The record files' format: the TOML schema of each record kind and :func:`parse_record`.

A record file's parsed TOML is converted into the msgspec struct of its kind
(``_VerdictFile``, ``_DisputeFile``, ``_ResolutionFile``, ``_ReservationFile``: the format of
``docs/records.md``) by :func:`workstation.schema.structs.convert`; the rules a struct
cannot state (RFC 3339 times with a UTC offset, 40-hex tree ids, record ids, the task id
matching its folder, the rules between keys) are checked after the conversion, and the
result is the record type of :mod:`workstation.records.model`. Reading the files of a
commit is :mod:`workstation.records.parse`; writing one, :mod:`workstation.records.store`
(which reads each record back through :func:`parse_record` before it commits it).

A record that does not validate is a :class:`~workstation.schema.problem.Problem` (file
relative to the queue root, dotted key, problem). A key no struct names is a warning,
never a reason to refuse: records written by a later kws still load.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from msgspec import Meta, Struct

from workstation.records.model import (
    FOLDERS,
    SCHEMA,
    CheckStatus,
    Dispute,
    FindingSummary,
    Outcome,
    Overall,
    Provenance,
    Reservation,
    Resolution,
    Verdict,
)
from workstation.repo.gitqueue import Identity
from workstation.schema.problem import Problem
from workstation.schema.structs import convert, unknown_keys

__all__ = ["MAX_RECORD_BYTES", "parse_record"]

#: Largest record file read (bytes): 4 MiB. A verdict's findings carry at most 16 KiB of
#: evidence each, so real verdicts stay far below; a larger file is reported and skipped.
MAX_RECORD_BYTES = 4 << 20
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_RECORD_ID = re.compile(r"[0-9a-f][0-9a-f-]{7,63}")
_UNKNOWN = "unknown key, ignored (a later kws may write it)"


# --------------------------------------------------------------------------------------------
# the file schemas (docs/records.md); descriptions are quoted in messages

_Id = Annotated[str, Meta(description="a record id: hex digits and '-', e.g. a UUID")]
_TaskId = Annotated[str, Meta(description="a task id")]
_Tree = Annotated[str, Meta(description="a git tree id of 40 hex digits")]
_Time = Annotated[datetime, Meta(description="an RFC 3339 date-time with a UTC offset")]
_Values = Annotated[dict[str, str], Meta(description="a table of rubric field values, each a string")]


class _Header(Struct, kw_only=True):
    """The keys every record starts with; read first, so a record of a later schema or of
    another kind is named as such before anything else is checked."""

    schema: Annotated[int, Meta(description="an integer schema version")]
    record: Annotated[str, Meta(description="the record kind: verdict, dispute, resolution or reservation")]


class _Reviewer(Struct, kw_only=True):
    name: Annotated[str, Meta(description="the reviewer's name, as git user.name")]
    email: Annotated[str, Meta(description="the reviewer's email, as git user.email")]


_ReviewerTable = Annotated[_Reviewer, Meta(description="a table with the reviewer's name and email")]


class _RubricRef(Struct, kw_only=True):
    id: Annotated[str, Meta(description="a rubric id")]
    version: Annotated[int, Meta(description="an integer rubric version")]


class _Finding(Struct, kw_only=True):
    check: Annotated[str, Meta(description="a check id")]
    severity: Annotated[str, Meta(description="a severity: fail, warn or info")]
    summary: str = ""
    repro: str = ""
    evidence: Annotated[dict[str, Any], Meta(description="a table of evidence")] = {}


class _Check(Struct, kw_only=True):
    check: Annotated[str, Meta(description="a check id")]
    status: Annotated[str, Meta(description="a check status: pass, fail, warn, skip or error")]
    seconds: Annotated[float, Meta(description="a number of seconds")] | None = None
    reason: str = ""


# Field order is the order missing keys are reported in: what the record says first, then
# whose it is and when.


class _VerdictFile(_Header, kw_only=True):
    overall: Overall
    rationale: str = ""
    rubric: Annotated[_RubricRef, Meta(description="a table with the rubric's id and version")]
    fields: _Values
    findings: list[_Finding] = []
    checks: list[_Check] = []
    checks_complete: bool | None = None
    kws_version: str = ""
    device: str = ""
    versions: Annotated[dict[str, str], Meta(description="a table of version strings")] = {}
    sandbox: Annotated[str, Meta(description="the check report's sandbox, e.g. bwrap or none")] = ""
    unfinished_checks: Annotated[list[str], Meta(description="an array of check ids")] = []
    not_judged: Annotated[dict[str, str], Meta(description="a table of check id = reason")] = {}
    suggested: Annotated[dict[str, Provenance], Meta(description="a table of field = provenance")] = {}
    verdict_id: _Id
    task: _TaskId
    task_tree: _Tree
    reviewer: _ReviewerTable
    timestamp: _Time


class _DisputeFile(_Header, kw_only=True):
    fields: _Values
    rationale: Annotated[str, Meta(description="the disputer's reasoning")]
    dispute_id: _Id
    verdict_id: _Id
    task: _TaskId
    task_tree: _Tree
    reviewer: _ReviewerTable
    timestamp: _Time


class _ResolutionFile(_Header, kw_only=True):
    outcome: Outcome
    fields: _Values = {}
    verdict_values: _Values = {}
    dispute_values: _Values = {}
    rationale: Annotated[str, Meta(description="the resolver's reasoning")]
    supersedes: Annotated[list[_Id], Meta(description="an array of resolution ids")] = []
    resolution_id: _Id
    dispute_id: _Id
    verdict_id: _Id
    task: _TaskId
    reviewer: _ReviewerTable
    timestamp: _Time


class _ReservationFile(_Header, kw_only=True):
    action: Literal["reserve", "release"]
    timestamp: _Time
    expires: _Time | None = None
    reservation_id: _Id
    task: _TaskId
    reviewer: _ReviewerTable


# --------------------------------------------------------------------------------------------
# conversion, and the rules a struct cannot state


def _nonempty(file: Path, texts: Mapping[str, str]) -> None:
    """Each value of ``texts`` (dotted key: value) must hold more than white space."""
    for key, value in texts.items():
        if not value.strip():
            raise Problem(file, key, "must not be empty")


def _record_id(value: str, file: Path, key: str) -> str:
    """``value`` lower-cased and stripped; it must look like a record id."""
    v = value.strip().lower()
    if not _RECORD_ID.fullmatch(v):
        raise Problem(file, key, f"{v!r} is not a record id (hex digits and '-', e.g. a UUID)")
    return v


def _task(value: str, folder_task: str, file: Path) -> str:
    _nonempty(file, {"task": value})
    if value != folder_task:
        raise Problem(file, "task", f"{value!r} differs from the folder it is in ({folder_task!r})")
    return value


def _tree(value: str, file: Path, key: str = "task_tree") -> str:
    if not _HEX40.match(value):
        raise Problem(file, key, f"{value!r} is not a git tree id (40 hex digits)")
    return value


def _utc(ts: datetime, file: Path, key: str) -> datetime:
    """``ts`` in UTC; a time without an offset is refused (whose local time would it be?)."""
    if ts.tzinfo is None:
        raise Problem(file, key, "must carry a UTC offset (e.g. 2025-01-31T12:00:00Z)")
    return ts.astimezone(UTC)


def _identity(r: _Reviewer, file: Path) -> Identity:
    _nonempty(file, {"reviewer.name": r.name, "reviewer.email": r.email})
    return Identity(r.name, r.email)


def _verdict(f: _VerdictFile, task: str, file: Path) -> Verdict:
    if f.overall == "reject" and not f.rationale.strip():
        raise Problem(file, "rationale", "required when overall is reject")
    _nonempty(file, {"rubric.id": f.rubric.id})
    if "overall" in f.fields or "rationale" in f.fields:
        raise Problem(file, "fields", "overall and rationale are top-level keys, not fields")
    for i, x in enumerate(f.findings):
        _nonempty(file, {f"findings[{i}].check": x.check, f"findings[{i}].severity": x.severity})
    for i, c in enumerate(f.checks):
        _nonempty(file, {f"checks[{i}].check": c.check, f"checks[{i}].status": c.status})
    for i, cid in enumerate(f.unfinished_checks):
        _nonempty(file, {f"unfinished_checks[{i}]": cid})
    for key in f.suggested:
        if key != "overall" and key not in f.fields:
            raise Problem(file, f"suggested.{key}", "names a field this verdict has no value for")
    return Verdict(
        verdict_id=_record_id(f.verdict_id, file, "verdict_id"),
        task=_task(f.task, task, file),
        task_tree=_tree(f.task_tree, file),
        reviewer=_identity(f.reviewer, file),
        timestamp=_utc(f.timestamp, file, "timestamp"),
        rubric_id=f.rubric.id,
        rubric_version=f.rubric.version,
        overall=f.overall,
        rationale=f.rationale,
        fields=f.fields,
        findings=tuple(
            FindingSummary(x.check, x.severity, x.summary, x.repro, x.evidence) for x in f.findings
        ),
        checks=tuple(
            CheckStatus(c.check, c.status, float(c.seconds) if c.seconds is not None else None, c.reason)
            for c in f.checks
        ),
        checks_complete=f.checks_complete,
        kws_version=f.kws_version,
        device=f.device,
        versions=f.versions,
        sandbox=f.sandbox,
        unfinished_checks=tuple(f.unfinished_checks),
        not_judged=dict(f.not_judged),
        suggested=dict(f.suggested),
        path=file,
    )


def _dispute(f: _DisputeFile, task: str, file: Path) -> Dispute:
    if not f.fields:
        raise Problem(file, "fields", "a dispute names at least one field")
    _nonempty(file, {"rationale": f.rationale})
    return Dispute(
        dispute_id=_record_id(f.dispute_id, file, "dispute_id"),
        verdict_id=_record_id(f.verdict_id, file, "verdict_id"),
        task=_task(f.task, task, file),
        task_tree=_tree(f.task_tree, file),
        reviewer=_identity(f.reviewer, file),
        timestamp=_utc(f.timestamp, file, "timestamp"),
        fields=f.fields,
        rationale=f.rationale,
        path=file,
    )


def _resolution(f: _ResolutionFile, task: str, file: Path) -> Resolution:
    if f.outcome == "upheld" and f.fields:
        raise Problem(file, "fields", "an upheld verdict keeps its values: fields must be empty")
    if f.outcome != "upheld" and not f.fields:
        raise Problem(file, "fields", f"an {f.outcome} resolution gives the values the verdict takes")
    _nonempty(file, {"rationale": f.rationale})
    return Resolution(
        resolution_id=_record_id(f.resolution_id, file, "resolution_id"),
        dispute_id=_record_id(f.dispute_id, file, "dispute_id"),
        verdict_id=_record_id(f.verdict_id, file, "verdict_id"),
        task=_task(f.task, task, file),
        reviewer=_identity(f.reviewer, file),
        timestamp=_utc(f.timestamp, file, "timestamp"),
        outcome=f.outcome,
        fields=f.fields,
        verdict_values=f.verdict_values,
        dispute_values=f.dispute_values,
        rationale=f.rationale,
        path=file,
        supersedes=tuple(_record_id(x, file, f"supersedes[{i}]") for i, x in enumerate(f.supersedes)),
    )


def _reservation(f: _ReservationFile, task: str, file: Path) -> Reservation:
    ts = _utc(f.timestamp, file, "timestamp")
    expires = _utc(f.expires, file, "expires") if f.expires is not None else None
    if f.action == "reserve":
        if expires is None:
            raise Problem(file, "expires", "missing required key when action is reserve (when the reservation ends)")
        if expires <= ts:
            raise Problem(file, "expires", "must be later than timestamp")
    return Reservation(
        reservation_id=_record_id(f.reservation_id, file, "reservation_id"),
        task=_task(f.task, task, file),
        reviewer=_identity(f.reviewer, file),
        timestamp=ts,
        action=f.action,
        expires=expires if f.action == "reserve" else None,
        path=file,
    )


@dataclass(frozen=True)
class _Kind:
    struct: type[_Header]
    build: Callable[[Any, str, Path], Any]


_KINDS: dict[str, _Kind] = {
    "verdict": _Kind(_VerdictFile, _verdict),
    "dispute": _Kind(_DisputeFile, _dispute),
    "resolution": _Kind(_ResolutionFile, _resolution),
    "reservation": _Kind(_ReservationFile, _reservation),
}


def parse_record(
    kind: str,
    data: Mapping[str, Any],
    task: str,
    file: Path,
    warnings: list[Problem] | None = None,
) -> Verdict | Dispute | Resolution | Reservation:
    """The record of ``kind`` (a key of :data:`~workstation.records.model.FOLDERS`) held
    by ``data``, a parsed record file at ``file`` (relative to the queue root) in the
    folder of ``task``. Unknown keys are appended to ``warnings`` (when given) as
    :class:`~workstation.schema.problem.Problem` s.

    Raises:
        Problem: the record does not validate: a schema newer than :data:`SCHEMA`, another
            kind, a missing key, a value of the wrong type or not allowed, or a rule
            between keys broken (``file`` and the dotted key name where).
    """
    head = convert(data, _Header, file=file)
    if head.schema > SCHEMA:
        raise Problem(file, "schema", f"schema {head.schema} is newer than this kws reads ({SCHEMA}); update kws")
    if head.record != kind:
        raise Problem(file, "record", f"expected {kind!r} in {FOLDERS[kind]}/, got {head.record!r}")
    spec = _KINDS[kind]
    raw = convert(data, spec.struct, file=file)
    record = spec.build(raw, task, file)
    if warnings is not None:
        warnings.extend(Problem(file, key, _UNKNOWN) for key in unknown_keys(data, spec.struct))
    return record
