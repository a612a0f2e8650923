"""The rules between records, and between a record and its rubric, that one file cannot
state: checked by :func:`cross_check` once every record of a commit is parsed
(:func:`workstation.records.parse.load_records`).

A record that parses but cannot be right moves to the set's ``problems`` and does not
count: a reservation dated more than :data:`FUTURE_ALLOWANCE` after the reader's clock (it
would hold until then) or longer than :data:`MAX_RESERVATION`, a value the verdict's rubric
does not allow, a dispute of a verdict that is not among the records (or of another task,
or another task version), disputing a field that is not a choice field of the verdict's
rubric or with the value the verdict already has, a resolution of a dispute that is not
(or citing another verdict), an ``overturned`` one whose values are not the dispute's, or
one by the disputed verdict's author where the queue's policy refuses that. A record of
another kind dated in the future is a warning (its place in the history orders it); fields
a rubric does not have are warnings (a later rubric version may add them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TypeVar

from workstation.records.model import Dispute, Reservation, Resolution, Verdict, record_file
from workstation.records.state import RecordSet, same_reviewer
from workstation.rubric.model import Rubric
from workstation.schema.problem import Problem

__all__ = ["FUTURE_ALLOWANCE", "MAX_RESERVATION", "cross_check"]

#: How far after the reader's clock a record's time may be (clock skew between machines).
FUTURE_ALLOWANCE = timedelta(days=1)
#: The longest reservation a record may hold (``kws reserve --hours`` allows 336).
MAX_RESERVATION = timedelta(hours=336)
#: Why a record that another names may be missing from the set.
_ABSENT = "which is not among this queue's records (never committed, skipped or unverified: see its own problem)"

R = TypeVar("R", Verdict, Dispute, Resolution, Reservation)


def cross_check(rs: RecordSet, kinds: tuple[str, ...], rubric_of: Callable[[str], Rubric | None],
                now: datetime) -> None:
    """Check the records of ``rs`` (those of ``kinds`` were read) against each other and
    against their rubrics (``rubric_of(id)``: the rubric a record names, None when there is
    none to check against), with ``now`` the reader's clock (aware, UTC); move the records
    that cannot be right to ``rs.problems`` and add the warnings to ``rs.warnings``
    (module doc)."""
    c = _Checker(rs, kinds, rubric_of, now + FUTURE_ALLOWANCE)
    rs.verdicts = c.keep(rs.verdicts, c.verdict)
    rs.reservations = c.keep(rs.reservations, c.reservation)
    verdicts = {v.verdict_id: v for v in rs.verdicts}
    rs.disputes = c.keep(rs.disputes, lambda d: c.dispute(d, verdicts))
    disputes = {d.dispute_id: d for d in rs.disputes}
    rs.resolutions = c.keep(rs.resolutions, lambda r: c.resolution(r, verdicts, disputes))


def _rubric_problem(rubric: Rubric, values: Mapping[str, str], file: Path, prefix: str) -> Problem | None:
    """A value in ``values`` that ``rubric`` does not allow, as a Problem (None: all allowed)."""
    for key, value in values.items():
        f = rubric.field(key)
        if f is None or f.kind != "choice":
            continue  # a field of another rubric version: reported as a warning by the caller
        if value not in f.allowed:
            return Problem(file, f"{prefix}.{key}" if prefix else key,
                           f"unknown value {value!r} for rubric {rubric.id}; expected one of {', '.join(f.allowed)}")
    return None


def _mismatch(file: Path, pairs: tuple[tuple[str, str, str, str], ...]) -> Problem | None:
    """The first ``(key, this record's value, the cited record's value, message)`` of
    ``pairs`` whose values differ, as a Problem at ``key`` of ``file`` (None: all agree)."""
    return next((Problem(file, key, text) for key, mine, theirs, text in pairs if mine != theirs), None)


@dataclass
class _Checker:
    """The rules of :func:`cross_check`, with what they share: the set, the kinds read, the
    rubric lookup and the latest time a record may carry (``limit``)."""

    rs: RecordSet
    kinds: tuple[str, ...]
    rubric_of: Callable[[str], Rubric | None]
    limit: datetime

    def keep(self, records: list[R], check: Callable[[R], Problem | None]) -> list[R]:
        """``records`` that ``check`` passes; the others' problems go to ``rs.problems``."""
        kept = []
        for r in records:
            p = check(r)
            if p is None:
                kept.append(r)
            else:
                self.rs.problems.append(p)
        return kept

    def future(self, r: Verdict | Dispute | Resolution) -> None:
        """Warn about a record dated in the future; never skips it: it is kept where its
        commit put it."""
        if r.timestamp > self.limit:
            self.rs.warnings.append(Problem(
                record_file(r), "timestamp", f"{r.timestamp.isoformat()} is in the future (more than "
                f"{FUTURE_ALLOWANCE.days} day after this machine's clock): its writer's clock (or this one) is off; "
                "its place in the history, not its time, decides which record is current"))

    def verdict(self, v: Verdict) -> Problem | None:
        self.future(v)
        rub = self.rubric_of(v.rubric_id)
        if rub is None:
            return None
        for key in v.fields:
            if rub.field(key) is None:
                self.rs.warnings.append(Problem(record_file(v), f"fields.{key}",
                                                f"not a field of rubric {rub.id} version {rub.version}"))
        return _rubric_problem(rub, dict(v.fields) | {"overall": v.overall}, record_file(v), "fields")

    def reservation(self, r: Reservation) -> Problem | None:
        """A reservation is a lock that runs on times: one dated in the future would hold
        until then, so it is skipped; so is one longer than :data:`MAX_RESERVATION`."""
        if r.timestamp > self.limit:
            return Problem(record_file(r), "timestamp", f"{r.timestamp.isoformat()} is in the future (more than "
                           f"{FUTURE_ALLOWANCE.days} day after this machine's clock): a reservation with it would "
                           "hold the task until then")
        if r.expires is not None and r.expires - r.timestamp > MAX_RESERVATION:
            return Problem(record_file(r), "expires", f"a reservation of {(r.expires - r.timestamp).total_seconds() / 3600:.0f} "
                           f"hours; at most {MAX_RESERVATION.total_seconds() / 3600:.0f}")
        return None

    def dispute(self, d: Dispute, verdicts: Mapping[str, Verdict]) -> Problem | None:
        self.future(d)
        if "verdict" not in self.kinds:
            return None
        v = verdicts.get(d.verdict_id)
        if v is None:
            return Problem(record_file(d), "verdict_id", f"disputes verdict {d.verdict_id}, {_ABSENT}")
        return _mismatch(record_file(d), (
            ("task", d.task, v.task, f"{d.task!r}, but the disputed verdict is on {v.task!r}"),
            ("task_tree", d.task_tree, v.task_tree, f"{d.task_tree[:12]}, but the disputed verdict judged task "
             f"version {v.task_tree[:12]}"),
        )) or self._disputed_fields(d, v)

    def _disputed_fields(self, d: Dispute, v: Verdict) -> Problem | None:
        """A disputed field the verdict's rubric (or, without one, the verdict) does not
        have as a choice, or a disputed value the verdict already has."""
        current = v.values()
        rub = self.rubric_of(v.rubric_id)
        for key, value in d.fields.items():
            if rub is not None and ((f := rub.field(key)) is None or f.kind != "choice"):
                return Problem(record_file(d), f"fields.{key}", f"not a choice field of rubric {rub.id} (a dispute names "
                               "choice fields; its reasoning goes in rationale)")
            if rub is None and key not in current:
                return Problem(record_file(d), f"fields.{key}", "the disputed verdict has no such field")
            if current.get(key) == value:
                return Problem(record_file(d), f"fields.{key}", f"{value!r} is what the verdict already says; a dispute "
                               "names values that differ from the verdict's")
        return _rubric_problem(rub, d.fields, record_file(d), "fields") if rub is not None else None

    def resolution(self, r: Resolution, verdicts: Mapping[str, Verdict],
                   disputes: Mapping[str, Dispute]) -> Problem | None:
        self.future(r)
        if "dispute" not in self.kinds:
            return None
        d = disputes.get(r.dispute_id)
        if d is None:
            return Problem(record_file(r), "dispute_id", f"resolves dispute {r.dispute_id}, {_ABSENT}")
        wrong = _mismatch(record_file(r), (
            ("verdict_id", r.verdict_id, d.verdict_id, f"{r.verdict_id}, but the dispute is of verdict {d.verdict_id}"),
            ("task", r.task, d.task, f"{r.task!r}, but the dispute is on {d.task!r}"),
        ))
        if wrong is not None:
            return wrong
        if r.outcome == "overturned" and dict(r.fields) != dict(d.fields):
            return Problem(record_file(r), "fields", "an overturned verdict takes the dispute's values "
                           f"({', '.join(f'{k}={v}' for k, v in d.fields.items())}), not others (use amended)")
        v = verdicts.get(r.verdict_id)
        if v is None:
            return None
        policy = self.rs.policy
        if policy is not None and policy.self_resolution != "allow" and same_reviewer(v.reviewer, r.reviewer):
            return Problem(record_file(r), "reviewer", f"{r.reviewer.email} resolved a dispute of their own verdict "
                           f"{v.verdict_id[:8]}; the queue's policy refuses that (queue.toml [records] "
                           f"self_resolution = {policy.self_resolution!r}), so it does not count")
        rub = self.rubric_of(v.rubric_id)
        if rub is None:
            return None
        # every table of values a resolution holds names its key when one is wrong: the
        # values it gives (fields) and the two sides it cites (verdict_values, dispute_values)
        for table, values in (("fields", r.fields), ("verdict_values", r.verdict_values),
                              ("dispute_values", r.dispute_values)):
            for key in values:
                if rub.field(key) is None:
                    self.rs.warnings.append(Problem(record_file(r), f"{table}.{key}",
                                                    f"not a field of rubric {rub.id} version {rub.version}"))
            wrong_value = _rubric_problem(rub, values, record_file(r), table)
            if wrong_value is not None:
                return wrong_value
        return None
