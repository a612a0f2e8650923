"""Reading record files: the TOML schema of each record kind, and :func:`load_records`.

A record file is read by :func:`workstation.schema.toml.read_toml` (UTF-8, at most
:data:`MAX_RECORD_BYTES`, nesting depth guarded) and converted into the msgspec struct
of its kind (``_VerdictFile``, ``_DisputeFile``, ``_ResolutionFile``,
``_ReservationFile``: the format of ``docs/records.md``) by
:func:`workstation.schema.structs.convert`; the rules a struct cannot state (RFC 3339
times with a UTC offset, 40-hex tree ids, record ids, the task id matching its folder,
the rules between keys) are checked after the conversion, and the result is the record
type of :mod:`workstation.records.model`.

A file that does not read, parse or validate is a
:class:`~workstation.schema.problem.Problem` (file relative to the queue root, dotted key,
problem) and is skipped; every other record still loads. A key no struct names is a
warning, never a reason to skip: records written by a later kws still load.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import git
from msgspec import Meta, Struct

from workstation.records.model import (
    FOLDERS,
    KINDS,
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
from workstation.records.state import RecordSet, same_reviewer
from workstation.repo.gitqueue import Identity, harden
from workstation.repo.plumbing import git_result, run_git
from workstation.repo.plumbing import rev as rev_id
from workstation.schema.problem import Problem
from workstation.schema.structs import convert, unknown_keys
from workstation.schema.toml import parse_toml
from workstation.task.format import TASK_ID_RE

__all__ = ["MAX_RECORD_BYTES", "load_records", "parse_record", "record_commits"]

#: Largest record file read (bytes): 4 MiB. A verdict's findings carry at most 16 KiB of
#: evidence each, so real verdicts stay far below; a larger file is reported and skipped.
MAX_RECORD_BYTES = 4 << 20
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_RECORD_ID = re.compile(r"[0-9a-f][0-9a-f-]{7,63}")
_UNKNOWN = "unknown key, ignored (a later kws may write it)"

T = TypeVar("T")

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


def _tree_entries(repo: git.Repo, rev: str, folders: list[str]) -> list[tuple[str, str, str, int, str]]:
    """``(mode, type, object id, size, path)`` of every entry under ``folders`` in the tree
    of ``rev`` (recursively; [] when ``rev`` does not exist, e.g. no commit yet)."""
    if rev_id(repo, rev) is None:
        return []
    out = run_git(repo, "ls-tree", "-r", "-z", "-l", "--full-tree", rev, "--", *folders)
    entries = []
    for item in out.split(b"\0"):
        if not item:
            continue
        meta, _, path = item.partition(b"\t")
        mode, typ, oid, size = meta.decode().split()
        entries.append((mode, typ, oid, int(size) if size.isdigit() else -1, path.decode("utf-8", "surrogateescape")))
    return entries


def _read_blobs(repo: git.Repo, oids: list[str]) -> tuple[dict[str, bytes], dict[str, str]]:
    """The contents of blobs ``oids``, read with one ``git cat-file --batch``, and for each
    blob that cannot be read (missing, or corrupt: git stops the batch at it) git's
    words. After a failed batch each blob is read on its own, so one corrupt object costs
    only its own record."""
    if not oids:
        return {}, {}
    proc = git_result(repo, "cat-file", "--batch", input=("\n".join(oids) + "\n").encode())
    blobs: dict[str, bytes] = {}
    bad: dict[str, str] = {}
    if proc.returncode == 0:
        out, pos = proc.stdout, 0
        for oid in oids:
            nl = out.index(b"\n", pos)
            header = out[pos:nl].decode().split()
            pos = nl + 1
            if len(header) < 3 or header[1] == "missing":
                bad[oid] = "missing from this clone"
                continue
            size = int(header[2])
            blobs[oid] = out[pos:pos + size]
            pos += size + 1
        return blobs, bad
    for oid in oids:
        one = git_result(repo, "cat-file", "blob", oid)
        if one.returncode == 0:
            blobs[oid] = one.stdout
        else:
            lines = [ln.strip() for ln in one.stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
            bad[oid] = (lines[-1] if lines else f"git cat-file exited {one.returncode}").removeprefix("fatal: ")
    return blobs, bad


def record_commits(repo: git.Repo, rev: str = "HEAD", folders: Iterable[str] = tuple(FOLDERS.values())
                   ) -> dict[str, tuple[int, str, datetime | None]]:
    """``{path: (place, commit id, committer date)}``: for each file under ``folders`` in the
    history of ``rev``, the commit that (last) added it, and that commit's place in the
    branch: 0 for the oldest, in first-parent order (a record that came in by a merge takes
    the merge's place). Empty when ``rev`` does not exist or its history cannot be read."""
    if rev_id(repo, rev) is None:
        return {}
    proc = git_result(repo, "-c", "core.quotePath=off", "log", "--first-parent", "--diff-merges=first-parent",
                      "--reverse", "--diff-filter=A", "--no-renames", "--name-only", "--format=%x00%H %cI",
                      rev, "--", *folders)
    if proc.returncode != 0:
        return {}
    out: dict[str, tuple[int, str, datetime | None]] = {}
    for place, chunk in enumerate(proc.stdout.decode("utf-8", "surrogateescape").split("\0")[1:]):
        head, _, names = chunk.partition("\n")
        commit, _, date = head.partition(" ")
        try:
            when: datetime | None = datetime.fromisoformat(date.strip()).astimezone(UTC)
        except ValueError:
            when = None
        for name in names.splitlines():
            if name.strip():
                out[name.strip()] = (place, commit, when)
    return out


def _record_entries(entries: list[tuple[str, str, str, int, str]], kind: str,
                    problems: list[Problem]) -> Iterator[tuple[Path, str, str, int]]:
    """``(path, task id, blob id, size)`` of each ``<folder>/<task-id>/*.toml`` of ``kind``
    in ``entries``, in path order; anything else under the folder goes to ``problems``
    (names starting with "." are passed over)."""
    folder = FOLDERS[kind]
    for mode, typ, oid, size, path in entries:
        parts = path.split("/")
        if parts[0] != folder:
            continue
        rel = Path(path)
        if any(p.startswith(".") for p in parts[1:]):
            continue
        if len(parts) != 3:
            problems.append(Problem(rel, "", f"not in a task folder ({folder}/<task-id>/<file>.toml)"))
            continue
        if not TASK_ID_RE.match(parts[1]):
            problems.append(Problem(rel, "", "folder name is not a task id"))
            continue
        if typ != "blob" or mode not in ("100644", "100755"):
            what = {"120000": "a symbolic link", "160000": "a submodule"}.get(mode, f"a {typ}")
            problems.append(Problem(rel, "", f"{what}, not a record file"))
            continue
        if not parts[2].endswith(".toml"):
            problems.append(Problem(rel, "", "not a .toml record file"))
            continue
        yield rel, parts[1], oid, size


def load_records(source: Path | str | git.Repo, kinds: Iterable[str] = KINDS, *, rev: str = "HEAD") -> RecordSet:
    """Read every record of ``kinds`` **committed** in the queue ``source`` (a repository,
    or the path of one): the files in the tree of ``rev`` (default ``HEAD``; e.g.
    ``refs/remotes/origin/main`` for the fetched remote), never the work tree. A file that
    was written but not committed (a killed ``kws verdict``, a hand-made file) is not a
    record; ``kws doctor`` reports it (:func:`workstation.records.doctor.stray_files`).

    Skips and reports the malformed files in ``problems`` and the unknown keys of the
    others in ``warnings``. Only ``<folder>/<task-id>/*.toml`` files are records; any other
    entry under a record folder is a problem. Two files with the same record id: the one
    later in path order is reported and skipped. Never raises for a record's content; a
    path that is not a git repository gives an empty set with one problem.
    """
    rs = RecordSet()
    if isinstance(source, git.Repo):
        repo = harden(source)
    else:
        try:
            repo = harden(git.Repo(Path(source)))
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            rs.problems.append(Problem(Path(source), "", "not a git repository: records are read from its commits"))
            return rs
    kinds = tuple(kinds)
    entries = _tree_entries(repo, rev, [FOLDERS[k] for k in kinds])
    chosen: dict[str, list[tuple[Path, str, str, int]]] = {}
    for kind in kinds:
        chosen[kind] = []
        for rel, task, oid, size in _record_entries(entries, kind, rs.problems):
            if size > MAX_RECORD_BYTES:
                rs.problems.append(Problem(rel, "", f"{size} bytes, larger than the {MAX_RECORD_BYTES}-byte limit for this file"))
                continue
            chosen[kind].append((rel, task, oid, size))
    blobs, unreadable = _read_blobs(repo, sorted({oid for items in chosen.values() for _, _, oid, _ in items}))
    added = record_commits(repo, rev, [FOLDERS[k] for k in kinds])

    def commit_of(rel: Path) -> str:
        c = added.get(rel.as_posix())
        return f" (committed in {c[1][:12]})" if c else ""

    seen: dict[str, Path] = {}
    for kind in kinds:
        out: list[Any] = []
        for rel, task, oid, _size in chosen[kind]:
            found: list[Problem] = []
            if oid in unreadable:
                rs.problems.append(Problem(rel, "", f"its git object {oid[:12]}{commit_of(rel)} cannot be read: "
                                           f"{unreadable[oid]}; the object is corrupt or missing in this clone: run "
                                           "git fsck, and restore it from another clone or the remote"))
                continue
            try:
                raw = blobs[oid]
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise Problem(rel, "", f"not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start})") from None
                rec = parse_record(kind, parse_toml(text, rel), task, rel, found)
            except KeyError:
                rs.problems.append(Problem(rel, "", "its blob is missing from this clone (run git fsck)"))
                continue
            except Problem as p:
                rs.problems.append(Problem(rel, p.key, p.problem))
                continue
            if rec.id in seen:
                rs.problems.append(Problem(rel, f"{kind}_id", f"duplicate id {rec.id} (also in {seen[rec.id]})"))
                continue
            seen[rec.id] = rel
            rs.warnings.extend(found)
            placed = added.get(rel.as_posix())
            if placed is not None:
                rs.place[rec.id] = placed[0]
                _clock_warning(rs, rec, placed[2])
            out.append(rec)
        out.sort(key=rs.order_key)
        setattr(rs, FOLDERS[kind], out)
    _verify(repo, rs, kinds, rev)
    root = Path(repo.working_tree_dir or repo.git_dir)
    try:
        from workstation.task.queue import read_queue_config

        rs.resolution_rule = read_queue_config(root).resolution_conflict
    except Problem:
        pass  # the default rule; kws doctor reports queue.toml's problem
    _cross_check(rs, kinds, root, datetime.now(UTC))
    return rs


def _verify(repo: git.Repo, rs: RecordSet, kinds: tuple[str, ...], rev: str) -> None:
    """Move the records whose commits do not verify (:mod:`workstation.records.signing`)
    from ``rs``'s lists to ``rs.unverified``; set ``rs.policy``. A queue with
    ``signatures = "off"`` keeps every record."""
    from workstation.records.model import Unverified
    from workstation.records.signing import records_policy, verify_added

    rs.policy = policy = records_policy(repo, rev)
    rs.problems.extend(policy.problems)
    if policy.off:
        return
    lists = {k: getattr(rs, FOLDERS[k]) for k in kinds}
    pairs = [(r.path.as_posix(), r.reviewer.email) for recs in lists.values() for r in recs if r.path is not None]
    if not pairs:
        return
    checked = verify_added(repo, policy, pairs, rev)
    for kind, recs in lists.items():
        kept = []
        for r in recs:
            v = checked.get(r.path.as_posix()) if r.path is not None else None
            if v is None or v.ok:
                kept.append(r)
            else:
                rs.unverified.append(Unverified(r, v.commit, v.why))
        setattr(rs, FOLDERS[kind], kept)


#: How far a record's time may be after its commit's committer date before it is flagged.
COMMIT_ALLOWANCE = timedelta(hours=1)


def _clock_warning(rs: RecordSet, rec: Any, committed: datetime | None) -> None:
    """Warn about a record dated after the commit that added it (its writer's clock was
    ahead of the committer's, or the committer's behind)."""
    if committed is not None and rec.timestamp - committed > COMMIT_ALLOWANCE:
        hours = (rec.timestamp - committed).total_seconds() / 3600
        rs.warnings.append(Problem(rec.path, "timestamp", f"dated {rec.timestamp.isoformat()}, {hours:.1f} h after "
                                   f"the commit that added it ({committed.isoformat()}): a clock was off; its place "
                                   "in the history, not its time, decides which record is current"))


#: How far after the reader's clock a record's time may be (clock skew between machines).
FUTURE_ALLOWANCE = timedelta(days=1)
#: The longest reservation a record may hold (``kws reserve --hours`` allows 336).
MAX_RESERVATION = timedelta(hours=336)


def _rubric_problem(rubric: Any, values: Mapping[str, str], file: Path, prefix: str) -> Problem | None:
    """A value in ``values`` that ``rubric`` does not allow, as a Problem (None: all allowed)."""
    for key, value in values.items():
        f = rubric.field(key)
        if f is None or f.kind != "choice":
            continue  # a field of another rubric version: reported as a warning by the caller
        if value not in f.allowed:
            return Problem(file, f"{prefix}.{key}" if prefix else key,
                           f"unknown value {value!r} for rubric {rubric.id}; expected one of {', '.join(f.allowed)}")
    return None


def _cross_check(rs: RecordSet, kinds: tuple[str, ...], root: Path, now: datetime) -> None:
    """Move to ``rs.problems`` the records that parse but cannot be right: a reservation
    dated more than :data:`FUTURE_ALLOWANCE` after ``now`` (it would hold until then) or
    longer than :data:`MAX_RESERVATION`, a value the verdict's rubric does not allow, a
    dispute of a verdict that is not among the records (or of another task, or another
    task version), disputing a field that is not a choice field of the verdict's rubric or
    with the value the verdict already has, a resolution of a dispute that is not (or
    citing another verdict), or an ``overturned`` one whose values are not the dispute's.
    A record of another kind dated in the future is a warning (its place in the history
    orders it); fields a rubric does not have are warnings (a later rubric version may add
    them)."""
    from workstation.rubric.model import find_rubric

    limit = now + FUTURE_ALLOWANCE
    rubrics: dict[str, Any] = {}

    def rubric(rid: str) -> Any:
        if rid not in rubrics:
            try:
                rubrics[rid] = find_rubric(rid, root)
            except Problem:
                rubrics[rid] = None
        return rubrics[rid]

    def keep(records: list[Any], check: Callable[[Any], Problem | None]) -> list[Any]:
        kept = []
        for r in records:
            p = check(r)
            if p is None:
                kept.append(r)
            else:
                rs.problems.append(p)
        return kept

    def future(r: Any) -> Problem | None:
        """Never skips: a record dated in the future is kept where its commit put it."""
        if r.timestamp > limit:
            rs.warnings.append(Problem(r.path, "timestamp", f"{r.timestamp.isoformat()} is in the future (more than "
                                       f"{FUTURE_ALLOWANCE.days} day after this machine's clock): its writer's clock "
                                       "(or this one) is off; its place in the history, not its time, decides which "
                                       "record is current"))
        return None

    def verdict_ok(v: Verdict) -> Problem | None:
        if (p := future(v)) is not None:
            return p
        rub = rubric(v.rubric_id)
        if rub is None:
            return None
        for key in v.fields:
            if rub.field(key) is None:
                rs.warnings.append(Problem(v.path, f"fields.{key}", f"not a field of rubric {rub.id} version {rub.version}"))
        return _rubric_problem(rub, dict(v.fields) | {"overall": v.overall}, v.path, "fields")

    rs.verdicts = keep(rs.verdicts, verdict_ok)
    def future_lock(r: Reservation) -> Problem | None:
        """A reservation is a lock that runs on times: one dated in the future would hold
        until then, so it is skipped."""
        if r.timestamp > limit:
            return Problem(r.path, "timestamp", f"{r.timestamp.isoformat()} is in the future (more than "
                           f"{FUTURE_ALLOWANCE.days} day after this machine's clock): a reservation with it would "
                           "hold the task until then")
        return None

    rs.reservations = keep(rs.reservations, lambda r: future_lock(r) or (
        Problem(r.path, "expires", f"a reservation of {(r.expires - r.timestamp).total_seconds() / 3600:.0f} hours; "
                f"at most {MAX_RESERVATION.total_seconds() / 3600:.0f}")
        if r.expires is not None and r.expires - r.timestamp > MAX_RESERVATION else None))
    verdicts = {v.verdict_id: v for v in rs.verdicts}

    def dispute_ok(d: Dispute) -> Problem | None:
        if (p := future(d)) is not None:
            return p
        if "verdict" not in kinds:
            return None
        v = verdicts.get(d.verdict_id)
        if v is None:
            return Problem(d.path, "verdict_id", f"disputes verdict {d.verdict_id}, which is not among this queue's "
                           "records (never committed, skipped or unverified: see its own problem)")
        if v.task != d.task:
            return Problem(d.path, "task", f"{d.task!r}, but the disputed verdict is on {v.task!r}")
        if v.task_tree != d.task_tree:
            return Problem(d.path, "task_tree", f"{d.task_tree[:12]}, but the disputed verdict judged task version "
                           f"{v.task_tree[:12]}")
        current = v.values()
        rub = rubric(v.rubric_id)
        for key, value in d.fields.items():
            if rub is not None and ((f := rub.field(key)) is None or f.kind != "choice"):
                return Problem(d.path, f"fields.{key}", f"not a choice field of rubric {rub.id} (a dispute names "
                               "choice fields; its reasoning goes in rationale)")
            if rub is None and key not in current:
                return Problem(d.path, f"fields.{key}", "the disputed verdict has no such field")
            if current.get(key) == value:
                return Problem(d.path, f"fields.{key}", f"{value!r} is what the verdict already says; a dispute "
                               "names values that differ from the verdict's")
        return _rubric_problem(rub, d.fields, d.path, "fields") if rub is not None else None

    rs.disputes = keep(rs.disputes, dispute_ok)
    disputes = {d.dispute_id: d for d in rs.disputes}

    def resolution_ok(r: Resolution) -> Problem | None:
        if (p := future(r)) is not None:
            return p
        if "dispute" not in kinds:
            return None
        d = disputes.get(r.dispute_id)
        if d is None:
            return Problem(r.path, "dispute_id", f"resolves dispute {r.dispute_id}, which is not among this queue's "
                           "records (never committed, skipped or unverified: see its own problem)")
        if d.verdict_id != r.verdict_id:
            return Problem(r.path, "verdict_id", f"{r.verdict_id}, but the dispute is of verdict {d.verdict_id}")
        if r.task != d.task:
            return Problem(r.path, "task", f"{r.task!r}, but the dispute is on {d.task!r}")
        if r.outcome == "overturned" and dict(r.fields) != dict(d.fields):
            return Problem(r.path, "fields", "an overturned verdict takes the dispute's values "
                           f"({', '.join(f'{k}={v}' for k, v in d.fields.items())}), not others (use amended)")
        v = verdicts.get(r.verdict_id)
        if (v is not None and rs.policy is not None and rs.policy.self_resolution != "allow"
                and same_reviewer(v.reviewer, r.reviewer)):
            return Problem(r.path, "reviewer", f"{r.reviewer.email} resolved a dispute of their own verdict "
                           f"{v.verdict_id[:8]}; the queue's policy refuses that (queue.toml [records] "
                           f"self_resolution = {rs.policy.self_resolution!r}), so it does not count")
        rub = rubric(v.rubric_id) if v is not None else None
        return _rubric_problem(rub, r.fields, r.path, "fields") if rub is not None else None

    rs.resolutions = keep(rs.resolutions, resolution_ok)
