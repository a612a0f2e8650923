"""``kws calibrate``: reviewers against gold verdicts, and against each other.

Gold verdicts live at the queue root in ``gold/<task-id>.toml`` (format:
``docs/records.md``). The review screen never reads that folder, so a reviewer does not see
the expected answer while judging; the bundled sample queue ships its gold files in
``sample_queue/gold/``.

For each reviewer, their current verdict on each gold task (their latest, by the records'
tie-break) is compared with gold field by field: agreement = equal values / gold tasks
they judged, per field that gold states. A verdict counts with its **final** values
(after the resolutions of its disputes: an overturned accept counts as what it became),
unless the queue owner's ``[records] overturned_verdicts`` says ``author`` (its own
values) or ``excluded`` (not counted). Unverified verdicts (unsigned or wrongly signed)
never count.

Across reviewers, Krippendorff's alpha per rubric field is computed by the
``krippendorff`` package (Krippendorff 2011, "Computing Krippendorff's Alpha-Reliability"):
units are tasks, coders are reviewers, each reviewer's current verdict gives their rating;
a task a reviewer did not judge is a missing rating. Ordered fields use the ordinal
metric on the field's scale (worst to best; a value marked ``outside_order`` such as
"not-applicable" counts as missing on that scale), other fields the nominal metric. Alpha
is undefined (reported as such) when no task has two ratings, or when every rating is the
same value (no variation to agree on).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import krippendorff
import numpy as np
from msgspec import Meta, Struct

from workstation.records.model import Overall, Verdict
from workstation.records.parse import load_records
from workstation.records.state import RecordSet
from workstation.repo.gitqueue import Identity
from workstation.rubric.model import Rubric
from workstation.schema.problem import Problem
from workstation.schema.structs import convert, unknown_keys
from workstation.schema.toml import read_toml
from workstation.task.format import TASK_ID_RE

__all__ = ["Agreement", "Alpha", "Calibration", "Gold", "calibrate", "format_calibration", "load_gold"]

@dataclass(frozen=True)
class Gold:
    """The expected verdict on ``task``: ``values`` maps rubric field keys (``overall``
    always) to expected values. ``note`` says why (for the calibration session, not for
    the reviewer during review)."""

    task: str
    values: dict[str, str]
    note: str = ""
    path: Path | None = None


@dataclass
class Agreement:
    """One reviewer on one field: ``agree`` of ``total`` gold tasks they judged matched.
    ``misses`` lists ``(task, gold value, their value)``."""

    reviewer: Identity
    field: str
    agree: int = 0
    total: int = 0
    misses: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)  # `field` names the rubric field here

    @property
    def rate(self) -> float | None:
        return self.agree / self.total if self.total else None


@dataclass(frozen=True)
class Alpha:
    """Krippendorff's alpha for one field: ``level`` "ordinal" or "nominal"; ``alpha`` None
    when undefined (``note`` says why); ``units`` tasks with at least two ratings;
    ``ratings`` ratings in those units."""

    field: str
    level: str
    alpha: float | None
    units: int
    ratings: int
    note: str = ""


@dataclass
class Calibration:
    """The result of :func:`calibrate`. ``problems``: record and gold files skipped;
    ``warnings``: unknown keys ignored in the files that loaded."""

    rubric: Rubric
    gold: dict[str, Gold]
    reviewers: list[Identity]
    agreements: list[Agreement]
    alphas: list[Alpha]
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)


class _GoldFile(Struct, kw_only=True):
    """A ``gold/<task-id>.toml`` file (docs/records.md)."""

    schema: Annotated[int, Meta(description="an integer schema version")] = 1
    task: Annotated[str, Meta(description="the task id, the file name")] | None = None
    overall: Overall
    note: Annotated[str, Meta(description="a string")] = ""
    fields: Annotated[dict[str, str], Meta(description="a table of rubric field values, each a string")] = {}


def _gold(data: dict[str, Any], task: str, rel: Path, rubric: Rubric | None) -> Gold:
    """The gold verdict in ``data`` (the parsed file ``rel``); Problem when it is not one."""
    g = convert(data, _GoldFile, file=rel)
    if g.schema > 1:
        raise Problem(rel, "schema", f"unsupported schema {g.schema!r}")
    if g.task is not None and g.task != task:
        raise Problem(rel, "task", f"{g.task!r} differs from the file name ({task!r})")
    if "overall" in g.fields:
        raise Problem(rel, "fields.overall", "overall is a top-level key")
    values = {**g.fields, "overall": g.overall}
    if rubric is not None:
        for k, v in values.items():
            if rubric.field(k) is None or rubric[k].kind != "choice" or v not in rubric[k].allowed:
                where = "overall" if k == "overall" else f"fields.{k}"
                raise Problem(rel, where, f"{v!r} is not a value of rubric {rubric.id} field {k!r}")
    return Gold(task, values, g.note, rel)


def load_gold(
    root: Path | str, rubric: Rubric | None = None, unknown: list[Problem] | None = None
) -> tuple[dict[str, Gold], list[Problem]]:
    """Read ``gold/<task-id>.toml`` files: ``({task: Gold}, problems)``; a malformed file is
    reported as a :class:`~workstation.schema.problem.Problem` (file relative to ``root``)
    and skipped; the unknown keys of the others are appended to ``unknown`` when given.

    A gold file: ``schema = 1`` (optional), ``task`` (optional; must equal the file name),
    ``overall`` (accept / reject / needs-work), optional ``note`` and an optional
    ``[fields]`` table with other rubric field values. With ``rubric``, every value must
    be an allowed value of that field.
    """
    root = Path(root)
    gold: dict[str, Gold] = {}
    problems: list[Problem] = []
    folder = root / "gold"
    if not folder.is_dir():
        return gold, problems
    for p in sorted(folder.glob("*.toml")):
        rel = p.relative_to(root)
        if not TASK_ID_RE.match(p.stem):
            problems.append(Problem(rel, "", "file name is not a task id"))
            continue
        try:
            data = read_toml(p)
        except Problem as exc:
            problems.append(Problem(rel, exc.key, exc.problem))
            continue
        try:
            gold[p.stem] = _gold(data, p.stem, rel, rubric)
        except Problem as exc:
            problems.append(exc)
            continue
        if unknown is not None:
            unknown.extend(Problem(rel, k, "unknown key, ignored") for k in unknown_keys(data, _GoldFile))
    return gold, problems


def _ratings(rs: RecordSet, rubric: Rubric) -> tuple[dict[str, dict[str, dict[str, str]]], dict[str, Identity], int,
                                                    int]:
    """``{reviewer email: {task: values of their latest verdict}}`` for verdicts made with
    ``rubric``, the values as the queue's ``overturned_verdicts`` policy says: ``final``
    (default: the effective values, after resolutions), ``author`` (the verdict's own) or
    ``excluded`` (a verdict a resolution changed is not counted). Also the count of
    verdicts of other rubrics and of verdicts excluded by the policy."""
    policy = getattr(rs.policy, "overturned_verdicts", "final")
    out: dict[str, dict[str, dict[str, str]]] = {}
    who: dict[str, Identity] = {}
    other = excluded = 0
    latest: dict[tuple[str, str], Verdict] = {}
    for v in rs.verdicts:  # history order: later overwrites
        if v.rubric_id != rubric.id:
            other += 1
            continue
        latest[(v.reviewer.email.lower(), v.task)] = v
    for (key, task), v in latest.items():
        own = v.values()
        final = rs.effective_values(v)
        if policy == "excluded" and final != own:
            excluded += 1
            continue
        out.setdefault(key, {})[task] = own if policy == "author" else final
        who[key] = v.reviewer
    return out, who, other, excluded


def _alpha(rubric: Rubric, key: str, ratings: dict[str, dict[str, dict[str, str]]]) -> Alpha:
    f = rubric[key]
    level: Literal["ordinal", "nominal"] = "ordinal" if f.ordered else "nominal"
    domain = list(f.scale()) if f.ordered else list(f.allowed)
    reviewers = sorted(ratings)
    tasks = sorted({t for per in ratings.values() for t in per})
    data = np.full((len(reviewers), len(tasks)), np.nan)
    for i, r in enumerate(reviewers):
        for j, t in enumerate(tasks):
            v = ratings[r].get(t)
            val = v.get(key) if v is not None else None
            if val in domain:
                data[i, j] = domain.index(val)
    counts = (~np.isnan(data)).sum(axis=0) if tasks else np.zeros(0)
    pairable = counts >= 2
    units = int(pairable.sum())
    n = int(counts[pairable].sum()) if units else 0
    if units == 0:
        return Alpha(key, level, None, 0, 0, "undefined: no task has ratings from two reviewers")
    vals = data[:, pairable]
    present = vals[~np.isnan(vals)]
    if np.unique(present).size < 2:
        return Alpha(key, level, None, units, n, "undefined: every rating is the same value")
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        a = float(
            krippendorff.alpha(
                reliability_data=data,
                level_of_measurement=level,
                value_domain=list(range(len(domain))),
            )
        )
    if math.isnan(a):
        return Alpha(key, level, None, units, n, "undefined")
    return Alpha(key, level, a, units, n)


def calibrate(root: Path | str, rubric: Rubric, records: RecordSet | None = None) -> Calibration:
    """Agreement with gold per reviewer and field, and alpha per field (see the module)."""
    rs = records if records is not None else load_records(root)
    found: list[Problem] = list(rs.warnings)
    gold, problems = load_gold(root, rubric, found)
    ratings, who, other, excluded = _ratings(rs, rubric)
    notes = []
    if rs.signature_note:
        notes.append(rs.signature_note)
    unverified = [u for u in rs.unverified if u.kind == "verdict"]
    if unverified:
        notes.append(f"{len(unverified)} unverified verdict(s) (unsigned or wrongly signed) are not counted: "
                     "kws doctor lists them")
    if other:
        notes.append(f"{other} verdict(s) made with another rubric than {rubric.id} are not counted")
    policy = getattr(rs.policy, "overturned_verdicts", "final")
    if excluded:
        notes.append(f"{excluded} verdict(s) changed by a resolution are not counted (queue.toml [records] "
                     "overturned_verdicts = \"excluded\")")
    elif policy == "author":
        notes.append("verdicts count with their authors' own values, resolutions aside (queue.toml [records] "
                     "overturned_verdicts = \"author\")")
    reviewers = [who[k] for k in sorted(ratings)]
    agreements = [ag for key in sorted(ratings) for f in rubric.choice_fields
                  if (ag := _agreement(who[key], f.key, ratings[key], gold)).total]
    alphas = [_alpha(rubric, f.key, ratings) for f in rubric.choice_fields]
    return Calibration(
        rubric, gold, reviewers, agreements, alphas, list(rs.problems) + problems, notes, found
    )


def _agreement(reviewer: Identity, key: str, per: dict[str, dict[str, str]], gold: dict[str, Gold]) -> Agreement:
    """``reviewer``'s agreement with ``gold`` on field ``key``, from their values ``per``
    task (their current verdict's), over the gold tasks that state the field and they
    judged."""
    ag = Agreement(reviewer, key)
    for task, g in sorted(gold.items()):
        if key not in g.values or task not in per:
            continue
        theirs = per[task].get(key, "")
        ag.total += 1
        if theirs == g.values[key]:
            ag.agree += 1
        else:
            ag.misses.append((task, g.values[key], theirs or "-"))
    return ag


def format_calibration(cal: Calibration) -> str:
    """Plain-text rendering for ``kws calibrate``."""
    lines: list[str] = []
    for p in cal.problems:
        lines.append(f"skipped {p}")
    for n in cal.notes:
        lines.append(f"note: {n}")
    lines.append(
        f"rubric {cal.rubric.id} v{cal.rubric.version}; {len(cal.gold)} gold task(s); "
        f"{len(cal.reviewers)} reviewer(s)"
    )
    lines.append("")
    lines.append("Agreement with gold (reviewer's latest verdict per gold task)")
    if not cal.agreements:
        lines.append("  no reviewer has judged a gold task yet")
    else:
        width = max(len(str(a.reviewer)) for a in cal.agreements)
        fw = max(len(a.field) for a in cal.agreements)
        for a in cal.agreements:
            rate = f"{100 * a.rate:5.1f}%" if a.rate is not None else "   - "
            miss = ""
            if a.misses:
                miss = "  missed: " + "; ".join(f"{t} (gold {g}, said {s})" for t, g, s in a.misses)
            lines.append(f"  {str(a.reviewer):<{width}}  {a.field:<{fw}}  {a.agree:>3}/{a.total:<3} {rate}{miss}")
    lines.append("")
    lines.append("Krippendorff's alpha across reviewers (units: tasks; missing ratings allowed)")
    fw = max(len(al.field) for al in cal.alphas) if cal.alphas else 5
    for al in cal.alphas:
        val = f"{al.alpha:6.3f}" if al.alpha is not None else "     -"
        lines.append(
            f"  {al.field:<{fw}}  {al.level:<8} alpha {val}  tasks {al.units:>3}  ratings {al.ratings:>4}"
            + (f"  ({al.note})" if al.note else "")
        )
    return "\n".join(lines)
