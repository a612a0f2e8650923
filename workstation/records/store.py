"""Writing records: each verdict, dispute, resolution and reservation is a new TOML file
committed with one git commit of its own, and never edited afterwards.

Layout (format: ``docs/records.md``)::

    verdicts/<task-id>/<reviewer-slug>--<UTC time>--<random>.toml
    disputes/<task-id>/<reviewer-slug>--<UTC time>--<random>.toml
    resolutions/<task-id>/<reviewer-slug>--<UTC time>--<random>.toml
    reservations/<task-id>/<reviewer-slug>--<UTC time>--<random>.toml

Because no two writers ever touch the same file, concurrent reviewers' commits rebase onto
each other without conflicts. Records are named by the ids stored in them (``verdict_id``,
``dispute_id``, ...), never by commit ids, which a rebase rewrites.

Every write refuses, with a :class:`~workstation.records.model.RecordError` and nothing
committed, what would make a bad record (values the rubric rejects, a detached HEAD, a
merge or rebase in progress, a file kws could not read back); each returns the record as
read back from the file it committed (:func:`workstation.records.format.parse_record`).
Reading is :mod:`workstation.records.parse`, derived state :mod:`workstation.records.state`.
"""

from __future__ import annotations

import json
import logging
import math
import re
import secrets
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import git
import tomli_w

import workstation
from workstation.engine.report import finite_json, not_judged_of
from workstation.records.drafts import Draft, delete_draft
from workstation.records.format import MAX_RECORD_BYTES, parse_record
from workstation.records.model import (
    FOLDERS,
    OUTCOMES,
    SCHEMA,
    Dispute,
    RecordError,
    Reservation,
    Resolution,
    Verdict,
)
from workstation.records.parse import load_records
from workstation.records.scrub import relative_repro, scrub_secrets, scrub_text, scrub_value
from workstation.records.state import RecordSet, same_reviewer
from workstation.repo.gitqueue import (
    Identity,
    detached_advice,
    git_env,
    harden,
    head_branch,
    reviewer_identity,
    task_version,
)
from workstation.repo.lock import queue_lock
from workstation.repo.plumbing import (
    RefMoved,
    StorageError,
    WorkTreeConflict,
    commit_tree,
    move_branch,
    rev,
    run_git,
    storage_advice,
    storage_fault,
    temp_index,
    tree_of,
)
from workstation.rubric.model import Rubric, validate_values
from workstation.schema.problem import Problem
from workstation.schema.text import safe_tree
from workstation.schema.toml import parse_toml_bytes

__all__ = [
    "CLOCK_ALLOWANCE",
    "clock_warnings",
    "commit_dispute",
    "commit_resolution",
    "commit_verdict",
    "record_path",
    "release",
    "reserve",
    "reviewer_slug",
    "toml_safe",
]

_EVIDENCE_LIMIT = 16_384  # bytes of JSON; larger evidence is not stored (kws recheck redoes it)
#: How far a new record's time may be from its commit's dates, and before the commit it
#: follows or the newest commit fetched from a remote, before its author is warned.
CLOCK_ALLOWANCE = timedelta(hours=1)

log = logging.getLogger("workstation.records")



def _now() -> datetime:
    return datetime.now(UTC)


def _rfc3339(ts: datetime) -> str:
    return ts.astimezone(UTC).isoformat().replace("+00:00", "Z")


def reviewer_slug(who: Identity) -> str:
    """File-name-safe slug of a reviewer: the lower-cased email with other characters as '-'."""
    base = who.email or who.name
    slug = re.sub(r"[^a-z0-9._-]+", "-", base.lower()).strip("-.")
    return slug[:64] or "reviewer"


def _new_record(kind: str, task: str, who: Identity) -> tuple[str, Path, dict[str, Any]]:
    """A new record's id (a UUID), its path relative to the queue root, and the keys every
    record starts with: schema, record kind, ``<kind>_id``, task, timestamp (now, UTC) and
    reviewer."""
    ts = _now()
    rid = str(uuid.uuid4())
    base = {"schema": SCHEMA, "record": kind, f"{kind}_id": rid, "task": task, "timestamp": ts,
            "reviewer": _identity_table(who)}
    return rid, record_path(kind, task, who, ts), base


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
        return finite_json(obj)
    return str(obj)


def _trailers(**pairs: str) -> str:
    lines = []
    for key, val in pairs.items():
        if val is None:
            continue
        name = "Kws-" + "-".join(p.capitalize() for p in key.split("_"))
        lines.append(f"{name}: {' '.join(str(val).split())}")
    return "\n".join(lines)


def _check_branch(repo: git.Repo, what: str) -> str:
    harden(repo)
    branch = head_branch(repo)
    if branch is None:
        raise RecordError(f"{what} not committed: {detached_advice(repo)}")
    git_dir = Path(repo.git_dir)
    if (git_dir / "MERGE_HEAD").exists():
        raise RecordError(
            f"{what} not committed: a merge is in progress in {repo.working_tree_dir} (git merge left "
            f"MERGE_HEAD); finish it (git -C {repo.working_tree_dir} commit) or undo it "
            f"(git -C {repo.working_tree_dir} merge --abort) and try again")
    return branch


_MOVE_ATTEMPTS = 20


def _commit_record(
    repo: git.Repo, kind: str, task: str, rel: Path, data: Mapping[str, Any], message: str, who: Identity
) -> Any:
    """Commit ``data`` as a new TOML file at ``rel`` (must not exist) and return the record
    as every reader will see it.

    The file is read back first, as :func:`~workstation.records.parse.load_records` reads
    it (size, depth, schema): a record kws could not read is a RecordError and never
    committed. The commit is built with plumbing in a temporary index (the blob, a tree of
    HEAD's tree plus that file, ``commit-tree``), then the branch is moved by
    :func:`~workstation.repo.plumbing.move_branch` under kws's lock: killed before that the
    queue is unchanged; after it the commit exists and the next kws command finishes
    writing the file to the index and work tree. Nothing the reviewer has staged is
    touched or committed. No hook runs.
    """
    # a record stores task-derived text (evidence, exception texts, titles): control
    # characters and escape sequences escaped (schema.text), never raw in the queue
    payload = tomli_w.dumps(safe_tree(dict(data), None)).encode("utf-8")
    if len(payload) > MAX_RECORD_BYTES:
        raise RecordError(f"{kind} not committed: {len(payload)} bytes, over the {MAX_RECORD_BYTES}-byte record limit")
    try:
        record = parse_record(kind, parse_toml_bytes(payload, rel, max_bytes=MAX_RECORD_BYTES), task, rel)
    except Problem as p:
        raise RecordError(f"{kind} not committed: it would not read back ({p})") from None
    posix = rel.as_posix()
    env = git_env(who)
    sign, policy = _signing(repo, kind)
    with queue_lock(repo):
        branch = _check_branch(repo, kind)
        commit: str | None = None
        try:
            for _ in range(_MOVE_ATTEMPTS):
                old = rev(repo, f"refs/heads/{branch}")
                blob = run_git(repo, "hash-object", "-w", "--stdin", input=payload).decode().strip()
                with temp_index(repo, tree_of(repo, old) if old else None) as ienv:
                    if run_git(repo, "ls-files", "-z", "--", posix, env=ienv):
                        raise RecordError(f"{kind} not committed: {posix} already exists in HEAD")
                    run_git(repo, "update-index", "--add", "--cacheinfo", f"100644,{blob},{posix}", env=ienv)
                    tree = run_git(repo, "write-tree", env=ienv).decode().strip()
                try:
                    commit = commit_tree(repo, tree, [old] if old else [], message, env, sign=sign)
                except git.GitCommandError as exc:
                    if not sign or storage_fault(exc) is not None:
                        raise
                    raise RecordError(f"{kind} not committed: git could not sign the commit ({_short(exc)}); check "
                                      "your signing key (kws signing setup)") from exc
                try:
                    move_branch(repo, branch, old, commit, f"kws {kind}: {task}")
                except RefMoved:
                    continue  # the reviewer's own git committed meanwhile: build on the new tip
                except WorkTreeConflict as exc:
                    raise RecordError(f"{kind} not committed: {exc}") from exc
                _warn_clock(repo, record, commit)
                _warn_unverified(repo, record, commit, sign, policy)
                return record
        except (OSError, git.GitCommandError) as exc:
            fault = storage_fault(exc)
            if fault is None:
                raise
            where = repo.working_tree_dir or repo.git_dir
            if commit is not None and rev(repo, f"refs/heads/{branch}") == commit:
                log.warning("warning: the %s is committed (%s) but %s could not be brought into the work tree: %s; "
                            "the next kws command finishes that once it can write", kind, commit[:12], posix,
                            storage_advice(fault, where))
                return record
            raise StorageError(fault, f"{kind} not committed (the branch is unchanged): "
                               f"{storage_advice(fault, where)} [{_short(exc)}]") from exc
    raise RecordError(f"{kind} not committed: {branch} kept moving ({_MOVE_ATTEMPTS} tries); try again")


def _signing(repo: git.Repo, kind: str) -> tuple[bool, Any]:
    """Whether a record commit is signed: when the queue's committed policy requires
    signatures (:func:`~workstation.records.signing.records_policy`) and the reviewer set
    up SSH signing. Refused (RecordError, nothing committed) when the queue has an
    allowed-signers file, so the record would count, but the reviewer cannot sign."""
    from workstation.records.signing import records_policy, signing_key

    policy = records_policy(repo)
    if policy.off:
        return False, policy
    if signing_key(repo) is not None:
        return True, policy
    if policy.signers is not None:
        raise RecordError(f"{kind} not committed: this queue counts only signed records (its allowed signers are "
                          f"{policy.allowed_signers}) and git has no SSH signing key set up here; set it up once "
                          "with: kws signing setup --apply (it prints the line an owner adds to the allowed signers)")
    return False, policy


def _warn_unverified(repo: git.Repo, record: Any, commit: str, signed: bool, policy: Any) -> None:
    """Tell the author at once when the record just committed will not count."""
    from workstation.records.signing import check_commit

    v = check_commit(repo, commit, record.reviewer.email, policy=policy)
    if not v.ok:
        log.warning("warning: %s %s is committed but unverified, so it is not counted: %s%s", record.kind,
                    record.id[:8], v.why, "" if signed else "; set up signing with kws signing setup")


def _short(exc: BaseException) -> str:
    """The last line of ``exc``'s text (git's stderr for a git error)."""
    text = exc.stderr if isinstance(exc, git.GitCommandError) else str(exc)
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    lines = [ln.strip().strip("'") for ln in str(text).replace("stderr:", "").splitlines() if ln.strip().strip("'")]
    return lines[-1][:300] if lines else type(exc).__name__


def _iso(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.strip()).astimezone(UTC)
    except ValueError:
        return None


def clock_warnings(repo: git.Repo, when: datetime, commit: str) -> list[str]:
    """Why the time ``when`` of a record committed as ``commit`` looks wrong: more than
    :data:`CLOCK_ALLOWANCE` from the commit's author or committer date (a
    ``GIT_AUTHOR_DATE`` / ``GIT_COMMITTER_DATE`` in the environment), or before the commit
    it follows or the newest commit fetched from a remote (this machine's clock is behind).
    Empty when nothing looks wrong. A record's place in the history, not its time, decides
    which record is current, so a wrong clock misleads only the times shown."""
    out: list[str] = []
    lines = run_git(repo, "log", "-2", "--format=%aI %cI %h %an", commit).decode("utf-8", "replace").splitlines()
    if not lines:
        return out
    author, committer = (_iso(x) for x in lines[0].split(" ", 2)[:2])
    for label, t in (("author", author), ("committer", committer)):
        if t is not None and abs(t - when) > CLOCK_ALLOWANCE:
            out.append(f"the record is dated {_rfc3339(when)} but its commit's {label} date is {_rfc3339(t)} "
                       f"({abs(t - when).total_seconds() / 3600:.1f} h apart; is GIT_{label.upper()}_DATE set?)")
    refs = []
    if len(lines) > 1:
        parts = lines[1].split(" ", 3)
        refs.append((_iso(parts[1]), f"the commit it follows ({parts[2]} by {parts[3] if len(parts) > 3 else '?'})"))
    newest = run_git(repo, "for-each-ref", "--sort=-committerdate", "--count=1",
                     "--format=%(committerdate:iso-strict) %(refname:short)", "refs/remotes").decode().split()
    if newest:
        refs.append((_iso(newest[0]), f"the newest commit fetched from the remote ({newest[1] if len(newest) > 1 else ''})"))
    for t, what in refs:
        if t is not None and when < t - CLOCK_ALLOWANCE:
            out.append(f"the record is dated {_rfc3339(when)}, {(t - when).total_seconds() / 3600:.1f} h before "
                       f"{what}: this machine's clock looks behind")
            break
    return out


def _warn_clock(repo: git.Repo, record: Any, commit: str) -> None:
    for w in clock_warnings(repo, record.timestamp, commit):
        log.warning("warning: %s %s: %s. Its place in the history, not its time, decides which record is "
                    "current; fix the clock (NTP) so that the times shown are right", record.kind, record.id[:8], w)


def _identity_table(who: Identity) -> dict[str, str]:
    return {"name": who.name, "email": who.email}


def _finding_table(f: Mapping[str, Any], root: Path | str | None = None) -> dict[str, Any]:
    """One finding as stored: text scrubbed (:mod:`workstation.records.scrub`: no
    credentials, no machine-local paths), the repro command relative to the queue root."""
    out: dict[str, Any] = {
        "check": str(f.get("check", "")),
        "severity": str(f.get("severity", "")),
        "summary": scrub_text(str(f.get("summary", "")), root),
    }
    if f.get("repro"):
        out["repro"] = relative_repro(str(f["repro"]), root)
    ev = f.get("evidence")
    if isinstance(ev, Mapping) and ev:
        ev = scrub_value(ev, root)
        size = len(json.dumps(ev, default=str))
        if size <= _EVIDENCE_LIMIT:
            out["evidence"] = toml_safe(ev)
        else:
            out["evidence"] = {
                "not_stored": f"{size} bytes of evidence exceed {_EVIDENCE_LIMIT}; kws recheck reproduces it"
            }
    return out


def _check_table(c: Mapping[str, Any], root: Path | str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"check": str(c.get("check", "")), "status": str(c.get("status", ""))}
    secs = c.get("seconds")
    if isinstance(secs, (int, float)) and not isinstance(secs, bool) and math.isfinite(secs):
        out["seconds"] = float(secs)
    if c.get("reason"):
        out["reason"] = scrub_text(str(c["reason"]), root)
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
    ``complete``; versions), the checks that could not look (``not_judged``: check id =
    reason, from the report's ``not_judged`` and its ``error`` checks), the checks that had
    not finished (``unfinished_checks``) and
    where each accepted suggestion came from (``suggested``). One commit, only this file, with trailers ``Kws-Record``,
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
    root = repo.working_tree_dir
    vid, rel, data = _new_record("verdict", draft.task, who)
    data.update({
        "task_tree": tv.tree,
        "overall": overall,
        "rationale": scrub_secrets(rationale.strip()),
        "kws_version": workstation.__version__,
        "device": scrub_text(str(report.get("device") or "none (no checks run)"), root),
        "rubric": {"id": rubric.id, "version": rubric.version},
        "fields": fields,
    })
    if report:
        if isinstance(report.get("complete"), bool):
            # every check that applies was judged: a skip with nothing to look at (no bench,
            # no claim) does not make a verdict incomplete; an error, a not-judged check or an
            # unfinished one does (the report's own ``complete`` also counts skips: contract)
            checks = [c for c in report.get("checks") or [] if isinstance(c, Mapping)]
            data["checks_complete"] = bool(checks) and not draft.unfinished_checks and not any(
                c.get("status") == "error" for c in checks) and not not_judged_of(report)
        vers = report.get("versions")
        if isinstance(vers, Mapping):
            data["versions"] = {str(k): str(v) for k, v in vers.items() if v is not None}
        data["findings"] = [_finding_table(f, root) for f in report.get("findings") or []]
        data["checks"] = [_check_table(c, root) for c in report.get("checks") or []]
        if isinstance(report.get("sandbox"), str) and report["sandbox"]:
            data["sandbox"] = report["sandbox"]
        not_judged = {str(n.get("check")): scrub_text(str(n.get("reason") or "could not look"), root)[:500]
                      for n in not_judged_of(report) if n.get("check")}
        if not_judged:  # what the verdict was not based on
            data["not_judged"] = not_judged
    if draft.unfinished_checks:
        data["unfinished_checks"] = [str(c) for c in draft.unfinished_checks]
    suggested = {k: v for k, v in draft.suggested.items() if k in values or k == "overall"}
    if suggested:
        data["suggested"] = {f.key: suggested[f.key] for f in rubric.fields if f.key in suggested}
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
    record = _commit_record(repo, "verdict", draft.task, rel, data, message, who)
    if remove_draft:
        delete_draft(draft.queue or repo.working_tree_dir, draft.task)
    return record


def _field_problem(key: str, value: str, rubric: Rubric | None, current: Mapping[str, str]) -> str | None:
    """Why ``key = value`` cannot be a disputed or resolved value (None: it can): with
    ``rubric``, ``key`` must be one of its choice fields and ``value`` an allowed value;
    without, ``key`` must be one of the verdict's ``current`` values."""
    if rubric is not None:
        f = rubric.field(key)
        if f is None or f.kind != "choice":
            return f"{key}: not a choice field of rubric {rubric.id}"
        if value not in f.allowed:
            return f"{key}: {value!r} is not one of: {', '.join(f.allowed)}"
    elif key not in current:
        return f"{key}: the verdict has no such field"
    return None


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
        elif (wrong := _field_problem(k, v, rubric, current)) is not None:
            problems.append(wrong)
        elif current.get(k) == v:
            problems.append(f"{k}: the verdict already says {v!r}")
    if problems:
        raise RecordError("dispute not committed:\n  " + "\n  ".join(problems))
    _check_branch(repo, "dispute")
    did, rel, data = _new_record("dispute", verdict.task, who)
    data.update({
        "verdict_id": verdict.verdict_id,
        "task_tree": verdict.task_tree,
        "rationale": scrub_secrets(rationale.strip()),
        "fields": dict(fields),
    })
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
    return _commit_record(repo, "dispute", verdict.task, rel, data, message, who)


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
    resolver's values, required; checked against ``rubric`` when given). Refused when
    ``identity`` made the disputed verdict, unless the queue's committed policy says
    ``[records] self_resolution = "allow"``. A dispute that
    already has a resolution is refused unless ``supersede``: the new one then names every
    standing resolution of the dispute in ``supersedes`` and replaces them (also
    conflicting ones: see :meth:`~workstation.records.state.RecordSet.resolution_conflicts`). The record copies the verdict's and the dispute's values for the disputed
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
    from workstation.records.signing import records_policy

    policy = records.policy if records.policy is not None else records_policy(repo)
    if policy.self_resolution != "allow" and same_reviewer(verdict.reviewer, who):
        raise RecordError(
            f"resolution not committed: you ({who.email}) made verdict {verdict.verdict_id[:8]}, and this queue's "
            "policy is that a verdict's author does not resolve a dispute of it (queue.toml [records] "
            f"self_resolution = {policy.self_resolution!r}, the default); ask another reviewer to resolve dispute "
            f"{dispute.dispute_id[:8]}, or the queue's owners set self_resolution = \"allow\"")
    standing = records.standing_resolutions(dispute.dispute_id)
    if standing and not supersede:
        prior = standing[-1]
        if len(standing) > 1:
            raise RecordError(
                f"resolution not committed: dispute {dispute.dispute_id[:8]} has {len(standing)} resolutions "
                "already (" + "; ".join(f"{r.outcome} by {r.reviewer}" for r in standing)
                + "); pass --supersede to replace them all with yours")
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
        current = verdict.values()
        problems = [w for k, v in fields.items() if (w := _field_problem(k, v, rubric, current)) is not None]
        if problems:
            raise RecordError("resolution not committed:\n  " + "\n  ".join(problems))
    elif outcome == "overturned":
        fields = dict(dispute.fields)
    vvals = verdict.values()
    disputed = sorted(set(dispute.fields) | set(fields))
    _check_branch(repo, "resolution")
    rid, rel, data = _new_record("resolution", dispute.task, who)
    data.update({
        "dispute_id": dispute.dispute_id,
        "verdict_id": verdict.verdict_id,
        "outcome": outcome,
        "rationale": scrub_secrets(rationale.strip()),
        "verdict_values": {k: vvals[k] for k in disputed if k in vvals},
        "dispute_values": dict(dispute.fields),
        "fields": fields,
    })
    if supersede and standing:
        data["supersedes"] = [r.resolution_id for r in standing]
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
    return _commit_record(repo, "resolution", dispute.task, rel, data, message, who)


def _reservation(
    repo: git.Repo, task: str, action: str, who: Identity, hours: float | None
) -> Reservation:
    _check_branch(repo, action)
    rid, rel, data = _new_record("reservation", task, who)
    data["action"] = action
    if hours is not None:
        data["expires"] = data["timestamp"] + timedelta(hours=hours)
    message = (
        f"kws {action}: {task}\n\n"
        + _trailers(record=f"reservation:{rid}", task=task, action=action, reviewer=str(who))
        + "\n"
    )
    return _commit_record(repo, "reservation", task, rel, data, message, who)


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
    if held is not None and not same_reviewer(held.reviewer, who):
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
    if held is None or not same_reviewer(held.reviewer, who):
        other = f" (held by {held.reviewer})" if held is not None else ""
        raise RecordError(f"you hold no reservation of {task}{other}")
    return _reservation(repo, task, "release", who, None)
