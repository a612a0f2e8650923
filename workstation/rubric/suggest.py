"""kws's suggestion for each rubric field from the findings of the checks it names.

A choice field's ``informed_by`` lists check ids and ``suggest`` maps the worst outcome
among those checks (:data:`~workstation.rubric.model.OUTCOMES`) to one of the field's
values. Pure data handling on a ``kws check --json`` report: the TUI calls it on every
repaint.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workstation.rubric.model import Rubric, RubricField

__all__ = ["Suggestion", "suggest"]

_SEVERITY_RANK = {"fail": 2, "warn": 1}
_RAN = frozenset({"pass", "warn", "fail"})


@dataclass(frozen=True)
class Suggestion:
    """kws's suggestion for one field, from the findings of the checks that inform it.

    ``value`` is None where the field's rule gives no value for the outcome (e.g. every
    informing check was skipped and the rule has no ``skipped``/``not-run`` entry).
    ``outcome`` is the class from :data:`OUTCOMES`. ``findings`` are the informing findings
    (the contract's finding dicts, unchanged), worst first. ``not_run`` lists the informing
    checks that were in the report but did not run (status ``skip`` or ``error``), so a
    ``clean`` outcome on an incomplete run is visible as such; ``not_judged`` the informing
    checks that could not look (wholly or in part, or ended in ``error``): with any of them
    and no warn or fail the outcome is ``not-judged``, never ``clean``.
    """

    value: str | None
    reason: str
    findings: tuple[Mapping[str, Any], ...] = ()
    outcome: str = "not-run"
    not_run: tuple[str, ...] = ()
    not_judged: tuple[str, ...] = ()



def _severity(s: Any) -> int:
    return _SEVERITY_RANK.get(s, 0)


def suggest(
    rubric: Rubric,
    findings: Sequence[Mapping[str, Any]],
    checks: Sequence[Mapping[str, Any]],
    not_judged: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Suggestion]:
    """kws's suggestion for each choice field that names informing checks.

    ``findings`` and ``checks`` are the ``findings`` and ``checks`` arrays of a
    ``kws check --json`` report (task format v1): findings are
    ``{"check", "severity", "summary", "evidence", "repro"}`` with severity fail/warn/info;
    checks are ``{"check", "status", "seconds", "reason"}`` with status
    pass/warn/fail/skip/error. Both may be partial (a run still streaming in).
    ``not_judged`` is the report's ``not_judged`` array (``{"check", "reason"}``): the checks
    that could not look, wholly or in a part that could have failed.

    For one field, the informing findings are those whose check is in ``informed_by``; the
    outcome is ``fail`` if any of them (or an informing check's status) is fail, else
    ``warn`` likewise, else ``not-judged`` if an informing check is in ``not_judged`` or
    ended in ``error`` (kws never proposes a passing value from a check that did not look),
    else ``clean`` if at least one informing check ran, else ``skipped`` if every informing
    check present was skipped, else ``not-run`` (see :data:`OUTCOMES`). ``info`` findings
    never raise the outcome but are listed. The value is ``field.suggest[outcome]``
    (``skipped`` and ``not-judged`` fall back to ``not-run``), or None.

    Returns ``{field key: Suggestion}`` for every choice field with ``informed_by``.
    """
    status: dict[str, Mapping[str, Any]] = {}
    for c in checks:
        cid = c.get("check")
        if isinstance(cid, str):
            status[cid] = c
    unjudged: dict[str, str] = {}
    for n in not_judged:
        cid = n.get("check")
        if isinstance(cid, str):
            unjudged.setdefault(cid, str(n.get("reason") or ""))
    for cid, c in status.items():
        if c.get("status") == "error":
            unjudged.setdefault(cid, str(c.get("reason") or "kws error"))
    return {f.key: _suggestion(f, findings, status, unjudged) for f in rubric.choice_fields if f.informed_by}


def _suggestion(f: RubricField, findings: Sequence[Mapping[str, Any]], status: Mapping[str, Mapping[str, Any]],
                unjudged: Mapping[str, str]) -> Suggestion:
    """The suggestion for the choice field ``f`` (:func:`suggest`): ``status`` maps each
    check id in the report to its ``checks`` entry, ``unjudged`` the checks that could not
    look to why."""
    informing = set(f.informed_by)
    fs = [x for x in findings if x.get("check") in informing]
    fs.sort(key=lambda x: -_severity(x.get("severity")))
    present = [status[c] for c in f.informed_by if c in status]
    ran = {c.get("check") for c in present if c.get("status") in _RAN}
    ran.update(x.get("check") for x in fs)  # a finding means its check ran
    not_run = tuple(c for c in f.informed_by if c in status and status[c].get("status") in ("skip", "error"))
    nj = tuple(c for c in f.informed_by if c in unjudged)
    worst = max(
        [_severity(x.get("severity")) for x in fs]
        + [_severity(c.get("status")) for c in present],
        default=0,
    )
    subject = [status[c] for c in f.subject if c in status]
    if worst == 2:
        outcome = "fail"
    elif worst == 1:
        outcome = "warn"
    elif subject and all(c.get("status") == "skip" for c in subject) and not any(
            c.get("check") in unjudged for c in subject):
        outcome = "skipped"  # the field's subject is not in the task (no benchmark, no claim)
    elif nj:
        outcome = "not-judged"
    elif ran:
        outcome = "clean"
    elif present and all(c.get("status") == "skip" for c in present):
        outcome = "skipped"
    else:
        outcome = "not-run"
    value = f.suggest.get(outcome)
    if value is None and outcome in ("skipped", "not-judged"):
        value = f.suggest.get("not-run")
    return Suggestion(
        value=value,
        reason=_reason(f, outcome, fs, present, ran, not_run, status, {c: unjudged[c] for c in nj}),
        findings=tuple(fs),
        outcome=outcome,
        not_run=not_run,
        not_judged=nj,
    )


def _reason(
    f: RubricField,
    outcome: str,
    fs: list[Mapping[str, Any]],
    present: list[Mapping[str, Any]],
    ran: set[Any],
    not_run: tuple[Any, ...],
    status: Mapping[str, Mapping[str, Any]],
    unjudged: Mapping[str, str],
) -> str:
    parts: list[str] = []
    if outcome in ("fail", "warn"):
        hits = [x for x in fs if x.get("severity") == outcome]
        if hits:
            first = hits[0]
            parts.append(f"{outcome}: {first.get('check')}: {first.get('summary', '')}".rstrip(": "))
            if len(hits) > 1:
                more = sorted({str(x.get("check")) for x in hits[1:]})
                parts.append(f"and {len(hits) - 1} more {outcome} finding(s) ({', '.join(more)})")
        else:
            bad = [str(c.get("check")) for c in present if c.get("status") == outcome]
            parts.append(f"{outcome}: status of {', '.join(bad)}")
    elif outcome == "clean":
        names = [c for c in f.informed_by if c in ran]
        parts.append(f"no warn or fail finding from {', '.join(names)}")
    if unjudged:
        parts.append("could not look: " + "; ".join(
            f"{c} ({why.strip().splitlines()[0][:160]})" if why.strip() else c for c, why in unjudged.items()))
    not_run = tuple(c for c in not_run if c not in unjudged)
    if not_run:
        desc = []
        for c in not_run:
            st = status[c]
            why = str(st.get("reason") or "").strip()
            desc.append(f"{c} ({st.get('status')}{': ' + why if why else ''})")
        parts.append("did not run: " + "; ".join(desc))
    if outcome == "not-run" and not present and not fs:
        parts.append("no informing check in the report (" + ", ".join(f.informed_by) + ")")
    return "; ".join(parts)
