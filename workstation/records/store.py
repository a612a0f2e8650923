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
This module decides what each record holds; the commit of its file is
:func:`workstation.records.commit.commit_record`. Reading is
:mod:`workstation.records.parse`, derived state :mod:`workstation.records.state`.
"""

from __future__ import annotations

import json
import math
import re
import secrets
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import git

import workstation
from workstation.engine.report import finite_json, not_judged_of
from workstation.records.commit import check_branch, commit_record, rfc3339
from workstation.records.drafts import Draft, delete_draft
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
from workstation.repo.gitqueue import Identity, reviewer_identity, task_version, work_tree
from workstation.rubric.model import Rubric, validate_values

__all__ = [
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


def _now() -> datetime:
    return datetime.now(UTC)


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


def _trailers(**pairs: str | None) -> str:
    """Git trailers ``Kws-<Key>: value`` for ``pairs`` (None values left out)."""
    lines = []
    for key, val in pairs.items():
        if val is None:
            continue
        name = "Kws-" + "-".join(p.capitalize() for p in key.split("_"))
        lines.append(f"{name}: {' '.join(str(val).split())}")
    return "\n".join(lines)


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
    check_branch(repo, "verdict")
    tree = _reviewed_tree(repo, draft)
    report = draft.report or {}
    values = dict(draft.values)
    overall = values.pop("overall")
    rationale = values.pop(rubric.rationale_field, "") or ""
    fields = {f.key: values[f.key] for f in rubric.fields if values.get(f.key)}  # rubric order
    root = work_tree(repo)
    vid, rel, data = _new_record("verdict", draft.task, who)
    data.update({
        "task_tree": tree,
        "overall": overall,
        "rationale": scrub_secrets(rationale.strip()),
        "kws_version": workstation.__version__,
        "device": scrub_text(str(report.get("device") or "none (no checks run)"), root),
        "rubric": {"id": rubric.id, "version": rubric.version},
        "fields": fields,
    })
    if report:
        data.update(_report_keys(report, draft, root))
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
            task_tree=tree,
        )
        + "\n"
    )
    record = commit_record(repo, "verdict", draft.task, rel, data, message, who)
    if remove_draft:
        delete_draft(draft.queue or root, draft.task)
    return record


def _reviewed_tree(repo: git.Repo, draft: Draft) -> str:
    """The git tree of ``tasks/<draft.task>`` in HEAD, the version the verdict judges.

    Raises:
        RecordError: the task is not in HEAD, its work tree differs from HEAD, or the draft's
            checks ran on another tree.
    """
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
    return tv.tree


def _report_keys(report: dict[str, Any], draft: Draft, root: Path) -> dict[str, Any]:
    """The keys a verdict takes from the draft's check ``report`` (in the order they are
    written): ``checks_complete``, ``versions``, ``findings``, ``checks``, ``sandbox`` and
    ``not_judged``, text scrubbed against the queue ``root``."""
    data: dict[str, Any] = {}
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
    return data


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
    check_branch(repo, "dispute")
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
    return commit_record(repo, "dispute", verdict.task, rel, data, message, who)


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
    try:
        verdict = records.verdict(dispute.verdict_id)
    except RecordError as exc:
        raise RecordError(
            f"resolution not committed: the disputed verdict {dispute.verdict_id} is not "
            "readable in this queue (run kws sync; see kws history for problems)"
        ) from exc
    _refuse_self_resolution(repo, records, verdict, dispute, who)
    standing = _standing(records, dispute, supersede)
    fields = _resolved_values(outcome, dict(fields or {}), verdict, dispute, rubric)
    vvals = verdict.values()
    disputed = sorted(set(dispute.fields) | set(fields))
    check_branch(repo, "resolution")
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
    return commit_record(repo, "resolution", dispute.task, rel, data, message, who)


def _refuse_self_resolution(repo: git.Repo, records: RecordSet, verdict: Verdict, dispute: Dispute,
                            who: Identity) -> None:
    """Raise RecordError when ``who`` made ``verdict`` and the queue's committed policy
    (``[records] self_resolution``) does not allow its author to resolve a dispute of it."""
    from workstation.records.signing import records_policy

    policy = records.policy if records.policy is not None else records_policy(repo)
    if policy.self_resolution != "allow" and same_reviewer(verdict.reviewer, who):
        raise RecordError(
            f"resolution not committed: you ({who.email}) made verdict {verdict.verdict_id[:8]}, and this queue's "
            "policy is that a verdict's author does not resolve a dispute of it (queue.toml [records] "
            f"self_resolution = {policy.self_resolution!r}, the default); ask another reviewer to resolve dispute "
            f"{dispute.dispute_id[:8]}, or the queue's owners set self_resolution = \"allow\"")


def _standing(records: RecordSet, dispute: Dispute, supersede: bool) -> list[Resolution]:
    """The standing resolutions of ``dispute`` (those a new one with ``supersede`` replaces).

    Raises:
        RecordError: there are some and ``supersede`` is not set.
    """
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
            f"({prior.outcome}) by {prior.reviewer} at {rfc3339(prior.timestamp)}; "
            "pass --supersede to replace that adjudication"
        )
    return standing


def _resolved_values(outcome: str, fields: dict[str, str], verdict: Verdict, dispute: Dispute,
                     rubric: Rubric | None) -> dict[str, str]:
    """The values a resolution of ``outcome`` gives the verdict: none when ``upheld``, the
    dispute's when ``overturned``, the resolver's ``fields`` (checked against ``rubric``
    when given) when ``amended``.

    Raises:
        RecordError: ``fields`` given for upheld or overturned, missing for amended, or
            not allowed.
    """
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
        return dict(dispute.fields)
    return fields


def _reservation(
    repo: git.Repo, task: str, action: str, who: Identity, hours: float | None
) -> Reservation:
    check_branch(repo, action)
    rid, rel, data = _new_record("reservation", task, who)
    data["action"] = action
    if hours is not None:
        data["expires"] = data["timestamp"] + timedelta(hours=hours)
    message = (
        f"kws {action}: {task}\n\n"
        + _trailers(record=f"reservation:{rid}", task=task, action=action, reviewer=str(who))
        + "\n"
    )
    return commit_record(repo, "reservation", task, rel, data, message, who)


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
    rs = records if records is not None else load_records(repo, ("reservation",))
    held = rs.reservation(task)
    if held is not None and not same_reviewer(held.reviewer, who):
        raise RecordError(f"{task} is reserved by {held.reviewer}"
                          + (f" until {rfc3339(held.expires)}" if held.expires is not None else ""))
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
    rs = records if records is not None else load_records(repo, ("reservation",))
    held = rs.reservation(task)
    if held is None or not same_reviewer(held.reviewer, who):
        other = f" (held by {held.reviewer})" if held is not None else ""
        raise RecordError(f"you hold no reservation of {task}{other}")
    return _reservation(repo, task, "release", who, None)
