"""What the review app writes and shares through the queue: a verdict, a dispute, a
resolution (and the forms' drafts), reservations, sync, calibration and a task's report.
Split from :mod:`workstation.review.services` (which reads the queue); like it, it imports
the records and repository packages only inside its functions, and failures come back as
data (an outcome with ``error``) for the TUI to display.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from workstation.records.drafts import FormDraft
from workstation.review.services import (
    VerdictSummary,
    _gq,
    _queue_repo,
    _summary,
    _verdict_rubric,
    identity,
)
from workstation.review.session import ReviewSession
from workstation.rubric.model import Rubric
from workstation.schema.problem import Problem

if TYPE_CHECKING:
    import git

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
    gq = _gq()
    try:
        with _queue_repo(root) as repo:
            v = session.commit(repo)
    except gq.QueueError as e:  # RecordError and IdentityError are QueueErrors
        return CommitOutcome(error=str(e))
    return CommitOutcome(verdict=_summary(v))


@dataclass(frozen=True)
class DisputeOutcome:
    """The dispute committed (its id), or ``error``: why nothing was committed. ``note``:
    what the sync after it did (or why it did not reach the remote: the dispute stays
    committed here, and ``records.sync.unpushed_records`` counts it)."""

    dispute_id: str = ""
    error: str = ""
    note: str = ""


def commit_dispute(root: Path, verdict_id: str, fields: Mapping[str, str], rationale: str,
                   rubric: Rubric | None) -> DisputeOutcome:
    """Commit a dispute of verdict ``verdict_id``: the disputer's ``fields`` values and
    ``rationale`` (checked against ``rubric`` when given). One git commit."""
    gq = _gq()
    from workstation.records.parse import load_records
    from workstation.records.store import commit_dispute as _commit_dispute

    try:
        with _queue_repo(root) as repo:
            verdict = next((v for v in load_records(root).verdicts if v.verdict_id == verdict_id), None)
            if verdict is None:
                return DisputeOutcome(error=f"verdict {verdict_id[:8]} is not in the queue's records")
            d = _commit_dispute(repo, verdict, dict(fields), rationale, rubric)
            _drop_form_draft(root, "dispute", verdict_id)
            shared = _share(repo, f"dispute {d.dispute_id[:8]} committed")  # pushed on write, like a reservation
    except gq.QueueError as e:
        return DisputeOutcome(error=str(e))
    return DisputeOutcome(dispute_id=d.dispute_id, note=shared.error or shared.text)


# --------------------------------------------------------------------------------------------
# disputes, reservations, sync, calibration, reports


@dataclass(frozen=True)
class ActionOutcome:
    """What a record action did, as one line for the reviewer (``text``), or ``error``:
    why it did not happen (nothing was committed then, or, for a sync, nothing was lost)."""

    text: str = ""
    error: str = ""


@dataclass(frozen=True)
class DisputeSummary:
    """An open dispute as the app shows it: the disputed verdict's values and the
    disputer's for the disputed ``fields`` (``verdict_values`` / ``dispute_values``)."""

    dispute_id: str
    verdict_id: str
    task: str
    disputer: str
    verdict_reviewer: str
    timestamp: datetime
    rationale: str
    verdict_values: Mapping[str, str]
    dispute_values: Mapping[str, str]
    #: why this reviewer may not resolve it ("" when they may): the queue refuses a
    #: verdict's author resolving its disputes, or there is no git identity
    refusal: str = ""


def open_disputes(root: Path, task_id: str) -> tuple[DisputeSummary, ...]:
    """The unresolved disputes of ``task_id``, oldest first, each with the rule that keeps
    this reviewer from resolving it (``refusal``: the queue's ``self_resolution`` policy
    for the verdict's author, or a missing git identity), checked when the dialog opens
    rather than on commit."""
    gq = _gq()
    from workstation.records.parse import load_records
    from workstation.records.state import same_reviewer

    rs = load_records(root)
    me, no_identity = identity(root)
    policy = rs.policy
    out = []
    for d in rs.open_disputes(task_id):
        try:
            v = rs.verdict(d.verdict_id)
        except gq.QueueError:
            continue
        vals = rs.effective_values(v)
        refusal = ""
        if me is None:
            refusal = no_identity
        elif (policy is None or policy.self_resolution != "allow") and same_reviewer(v.reviewer, me):
            refusal = (f"you ({me.email}) made verdict {v.verdict_id[:8]}, and this queue's policy is that a verdict's "
                       "author does not resolve a dispute of it (queue.toml [records] self_resolution = "
                       f"{getattr(policy, 'self_resolution', 'refuse')!r}); another reviewer resolves it")
        out.append(DisputeSummary(d.dispute_id, d.verdict_id, d.task, str(d.reviewer), str(v.reviewer), d.timestamp,
                                  d.rationale, {k: vals.get(k, "") for k in d.fields}, dict(d.fields), refusal))
    return tuple(out)


def load_form_draft(root: Path, kind: str, target: str) -> FormDraft | None:
    """The saved draft of the ``kind`` form (``dispute`` of verdict ``target``,
    ``resolution`` of dispute ``target``) in the queue at ``root``, or None."""
    from workstation.records.drafts import load_form_draft as _load

    try:
        return _load(root, kind, target)
    except ValueError:
        return None


def new_form_draft(root: Path, kind: str, task: str, target: str) -> FormDraft:
    """An empty draft of the ``kind`` form for record ``target`` of ``task``."""
    return FormDraft(kind=kind, task=task, queue=str(root), target=target)


def resolve_dispute(root: Path, dispute_id: str, outcome: str, rationale: str,
                    fields: Mapping[str, str] | None = None) -> ActionOutcome:
    """Resolve dispute ``dispute_id`` (``upheld``, ``overturned``, or ``amended`` with
    ``fields``), citing both sides; one git commit (``records.store.commit_resolution``)."""
    gq = _gq()
    from workstation.records.parse import load_records
    from workstation.records.store import commit_resolution

    try:
        with _queue_repo(root) as repo:
            rs = load_records(root)
            d = rs.dispute(dispute_id)
            v = rs.verdict(d.verdict_id)
            r = commit_resolution(repo, rs, d, outcome, rationale, dict(fields or {}),
                                  _verdict_rubric(v.rubric_id, root))
            _drop_form_draft(root, "resolution", d.dispute_id)
            text = f"resolution {r.resolution_id[:8]} committed: verdict {v.verdict_id[:8]} {outcome}"
            if r.fields:
                text += " (now " + ", ".join(f"{k}={val}" for k, val in r.fields.items()) + ")"
            # shared at once, like a reservation; a resolution that disagrees with one the
            # remote already has is held back and its writer told (docs/records.md)
            return _share(repo, text, hold_conflicts=True)
    except gq.QueueError as e:
        return ActionOutcome(error=str(e))


def _drop_form_draft(root: Path, kind: str, target: str) -> None:
    """Delete the form draft of a record just committed (a failure to is harmless: the
    draft names a record that now exists, and the next commit of the form replaces it)."""
    from workstation.records.drafts import delete_form_draft

    try:
        delete_form_draft(root, kind, target)
    except (OSError, ValueError):
        pass


def _share(repo: git.Repo, text: str, *, hold_conflicts: bool = False) -> ActionOutcome:
    """``text``, then a sync where the queue has a remote (its outcome appended);
    ``hold_conflicts``: see ``records.sync.sync``."""
    gq = _gq()
    from workstation.records.sync import SyncError, sync

    if not repo.remotes:
        return ActionOutcome(text=f"{text} (this queue has no remote: the record is local)")
    try:
        return ActionOutcome(text=f"{text}; sync: {sync(repo, hold_conflicts=hold_conflicts)}")
    except SyncError as e:
        if e.kind == "resolution-conflict":
            return ActionOutcome(text=text, error=str(e))
        return ActionOutcome(text=text, error=f"committed locally but not shared yet: {e}")
    except gq.QueueError as e:
        return ActionOutcome(text=text, error=f"committed locally but not shared yet: {e}")


def reserve_task(root: Path, task_id: str, hours: float = 4.0) -> ActionOutcome:
    """Reserve ``task_id`` for ``hours`` and sync (so others see it taken); refused when
    someone else holds it (as far as this clone knows, or after the sync)."""
    gq = _gq()
    from workstation.records.parse import load_records
    from workstation.records.state import same_reviewer
    from workstation.records.store import reserve

    try:
        with _queue_repo(root) as repo:
            who = gq.reviewer_identity(repo)
            r = reserve(repo, task_id, hours, identity=who)
            out = _share(repo, f"reserved {task_id} until {r.expires:%Y-%m-%d %H:%MZ}")
            holder = load_records(root, ("reservation",)).reservation(task_id)
            if holder is not None and not same_reviewer(holder.reviewer, who):
                return ActionOutcome(error=f"{holder.reviewer} reserved {task_id} first (until "
                                           f"{holder.expires:%Y-%m-%d %H:%MZ}); yours does not hold")
            return out
    except gq.QueueError as e:
        return ActionOutcome(error=str(e))


def release_task(root: Path, task_id: str) -> ActionOutcome:
    """Release one's reservation of ``task_id`` and sync."""
    gq = _gq()
    from workstation.records.store import release

    try:
        with _queue_repo(root) as repo:
            release(repo, task_id)
            return _share(repo, f"released {task_id}")
    except gq.QueueError as e:
        return ActionOutcome(error=str(e))


def sync_queue(root: Path) -> ActionOutcome:
    """Pull (rebase) and push the queue's records (``records.sync.sync``: never forces)."""
    gq = _gq()
    from workstation.records.sync import sync

    try:
        with _queue_repo(root) as repo:
            return ActionOutcome(text=f"sync: {sync(repo)}")
    except gq.QueueError as e:
        return ActionOutcome(error=f"sync: {e}")


def calibration(root: Path, rubric: Rubric | None) -> str:
    """The queue's calibration (agreement with gold verdicts per reviewer and field,
    Krippendorff's alpha per field) as text, or why there is none."""
    gq = _gq()
    from workstation.records.calibration import calibrate, format_calibration

    if rubric is None:
        return "no calibration: the queue has no usable rubric"
    try:
        return format_calibration(calibrate(root, rubric))
    except (gq.QueueError, Problem) as e:
        return f"no calibration: {e}"


def task_report(root: Path, task_id: str) -> ActionOutcome:
    """The Markdown report of ``task_id``'s current verdict (``records.report``) in
    ``text``, or ``error`` (no verdict yet)."""
    gq = _gq()
    from workstation.records.parse import load_records
    from workstation.records.report import render_report

    try:
        with _queue_repo(root) as repo:
            rs = load_records(root)
            v = rs.current_verdict(task_id)
            if v is None:
                return ActionOutcome(error=f"no verdict on {task_id} yet: nothing to report")
            return ActionOutcome(text=render_report(repo, rs, v, _verdict_rubric(v.rubric_id, root)))
    except gq.QueueError as e:
        return ActionOutcome(error=str(e))
