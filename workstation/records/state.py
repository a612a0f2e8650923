"""The state derived from a queue's records, deterministically, when they are read.

The **order**: a record's place is the position of the commit that added it in the
branch's history (first-parent order, :func:`workstation.records.parse.record_commits`),
so every clone that holds the same history orders the same way, whatever the writers'
clocks said. Times are shown, never compared to order; ``(timestamp, id)`` only breaks a
tie between records of one commit, or orders records not read from a history.
"Latest" means last in that order. A task's current verdict is its latest verdict; a
reviewer's current verdict on a task is their latest one; a dispute's resolution is its
standing resolution (below); a verdict's effective values are its own values with the
resolutions of its disputes applied in that order.

**Conflicting resolutions**: a resolution is *standing* unless a later one names it in
``supersedes`` (``kws resolve --supersede``). Two standing resolutions of one dispute
that disagree (outcome or values) were written without either knowing of the other: a
conflict (:meth:`RecordSet.resolution_conflicts`), settled by the queue owner's rule,
``resolution_conflict`` in queue.toml: ``open`` (default: neither applies, the dispute is
open again until someone resolves it with ``--supersede``), ``first`` or ``last`` (in
history order).

Reservations are the exception, since they are locks: the earliest unexpired reservation
holds until it expires or its holder releases it (see :meth:`RecordSet.reservation`).

Nothing here reads files or runs git: :func:`workstation.records.parse.load_records`
builds a :class:`RecordSet`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from workstation.records.model import (
    Dispute,
    RecordError,
    Reservation,
    Resolution,
    TaskFlags,
    Unverified,
    Verdict,
)
from workstation.repo.gitqueue import Identity
from workstation.schema.problem import Problem

__all__ = ["CONFLICT_RULES", "RecordSet", "same_reviewer"]

#: ``resolution_conflict`` values in queue.toml (the first is the default).
CONFLICT_RULES = ("open", "first", "last")


def same_reviewer(a: Identity, b: Identity) -> bool:
    """Whether ``a`` and ``b`` are the same reviewer: emails compared case-insensitively."""
    return a.email.strip().lower() == b.email.strip().lower()


@dataclass
class RecordSet:
    """Every readable record of a queue, each list in history order (:meth:`order_key`).

    ``problems``: the record files (or stray files) that were skipped, each a
    :class:`~workstation.schema.problem.Problem` whose ``file`` is relative to the queue
    root. ``warnings``: parts of loaded records that were ignored (an unknown key, e.g.
    from a later kws), same shape; the record itself loaded.

    The per-task queries use an index built on first use: treat a loaded set as read-only
    (load it again after committing a record).

    ``place``: record id -> the place of the commit that added it (0: oldest);
    ``resolution_rule``: how conflicting resolutions are settled (:data:`CONFLICT_RULES`).
    ``unverified``: records that parsed but do not count (unsigned or wrongly signed:
    :mod:`workstation.records.signing`); they are in none of the lists above.
    ``policy``: the queue's committed record policy
    (:class:`workstation.records.signing.RecordsPolicy`; None: not read).
    """

    verdicts: list[Verdict] = field(default_factory=list)
    disputes: list[Dispute] = field(default_factory=list)
    resolutions: list[Resolution] = field(default_factory=list)
    reservations: list[Reservation] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    place: dict[str, int] = field(default_factory=dict)
    resolution_rule: str = CONFLICT_RULES[0]
    unverified: list[Unverified] = field(default_factory=list)
    policy: Any = None

    @property
    def signature_note(self) -> str | None:
        """The line histories and reports print about signatures (signature checks off, or
        no allowed signers file), None when records are checked."""
        return self.policy.note if self.policy is not None else None

    def unverified_for(self, task: str, kinds: Sequence[str] = ("verdict", "dispute", "resolution")
                       ) -> list[Unverified]:
        """The unverified records of ``task`` of ``kinds`` (default: all but reservations,
        which histories and reports do not list), in history order."""
        return sorted((u for u in self.unverified if u.task == task and u.kind in kinds),
                      key=lambda u: self.order_key(u.record))

    def order_key(self, r: Any) -> tuple[int, datetime, str]:
        """Where ``r`` sorts: its commit's place in the history, then ``(timestamp, id)``
        (records not read from a history sort after those that were)."""
        return (self.place.get(r.id, 1 << 62), r.timestamp, r.id)

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

    def _find(self, items: Sequence[Any], ident: str, kind: str) -> Any:
        """The record of ``items`` with id (or unique prefix of at least 4 characters)
        ``ident``.

        Raises:
            RecordError: none, or several; a record of ``kind`` with that id that is
                unverified is named as such, with why it does not count.
        """
        ident = ident.strip().lower()
        exact = [r for r in items if r.id == ident]
        if exact:
            return exact[0]
        if len(ident) < 4:
            raise RecordError(f"no {kind} with id {ident!r} (give the full id or at least 4 characters)")
        hits = [r for r in items if r.id.startswith(ident)]
        if not hits:
            shadow = [u for u in self.unverified if u.kind == kind and u.record.id.startswith(ident)]
            if len(shadow) == 1:
                u = shadow[0]
                raise RecordError(f"{kind} {u.record.id[:8]} on {u.task} ({u.path}) is unverified, so it does not "
                                  f"count: {u.why}; nothing can refer to it (docs/records.md, \"Signed records\")")
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
        """The task's latest verdict in history order, or None."""
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
            if same_reviewer(v.reviewer, who):
                out[v.task] = v
        return out

    def disputes_of(self, verdict_id: str) -> list[Dispute]:
        """The disputes of one verdict, oldest first."""
        return list(self._ix["disputes_of"].get(verdict_id, ()))

    def resolutions_for(self, dispute_id: str) -> list[Resolution]:
        """Every resolution citing ``dispute_id``, in history order."""
        return list(self._ix["resolutions_of"].get(dispute_id, ()))

    def standing_resolutions(self, dispute_id: str) -> list[Resolution]:
        """The resolutions of ``dispute_id`` that no later one supersedes, in order."""
        rs = self.resolutions_for(dispute_id)
        replaced = {x for r in rs for x in r.supersedes}
        return [r for r in rs if r.resolution_id not in replaced]

    def resolution_conflicts(self, dispute_id: str | None = None) -> dict[str, list[Resolution]]:
        """``{dispute id: its standing resolutions}`` for each dispute (of ``dispute_id``
        only, when given) with standing resolutions that disagree: another outcome or other
        values, written without either knowing of the other (two reviewers at once)."""
        ids = [dispute_id] if dispute_id is not None else list(self._ix["resolutions_of"])
        out = {}
        for did in ids:
            standing = self.standing_resolutions(did)
            if len({(r.outcome, tuple(sorted(r.fields.items()))) for r in standing}) > 1:
                out[did] = standing
        return out

    def resolution_of(self, dispute_id: str) -> Resolution | None:
        """The resolution that counts for ``dispute_id``, or None (the dispute is open):
        its latest standing resolution; where standing resolutions disagree, the one the
        queue's :attr:`resolution_rule` picks (``open``: none)."""
        standing = self.standing_resolutions(dispute_id)
        if not standing:
            return None
        if dispute_id in self.resolution_conflicts(dispute_id):
            return {"first": standing[0], "last": standing[-1]}.get(self.resolution_rule)
        return standing[-1]

    def open_disputes(self, task: str | None = None) -> list[Dispute]:
        """Disputes without a resolution that counts (none, or conflicting ones under the
        rule ``open``), of ``task`` or of every task, in order."""
        ds = self.disputes if task is None else self._ix["disputes"].get(task, ())
        return [d for d in ds if self.resolution_of(d.dispute_id) is None]

    def effective_values(self, verdict: Verdict, rationale_key: str = "rationale") -> dict[str, str]:
        """The verdict's values with its disputes' resolutions (:meth:`resolution_of`)
        applied in history order."""
        vals = verdict.values(rationale_key)
        applied = []
        for d in self.disputes_of(verdict.verdict_id):
            r = self.resolution_of(d.dispute_id)
            if r is not None:
                applied.append(r)
        for r in sorted(applied, key=self.order_key):
            vals.update(r.fields)
        return vals

    def reservation(self, task: str, now: datetime | None = None) -> Reservation | None:
        """The reserve record holding ``task`` at ``now`` (default: now), or None.

        Walk the task's reservation records in history order: a reserve takes
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
                if holder is None or same_reviewer(holder.reviewer, r.reviewer):
                    holder = r
            elif r.action == "release" and holder is not None and same_reviewer(holder.reviewer, r.reviewer):
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
            own = [v for v in vs if same_reviewer(v.reviewer, me)]
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
