"""``kws report``: a Markdown report of a verdict with its evidence, for a review thread.

Everything comes from the recorded verdict (its fields, rationale, findings with evidence
and reproduction commands, check statuses), the disputes and resolutions on it, and the
queue's git history; nothing is re-run. kws's suggestions are recomputed from the recorded
findings with the verdict's rubric, so the report shows where the reviewer departed from
them.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import git

from workstation.records.history import tree_changes
from workstation.records.model import Verdict
from workstation.records.state import RecordSet
from workstation.repo.gitqueue import harden, task_version, work_tree
from workstation.rubric.model import Rubric
from workstation.rubric.suggest import Suggestion, suggest
from workstation.schema.problem import Problem
from workstation.schema.text import safe_text
from workstation.schema.toml import read_toml

__all__ = ["render_report"]


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|") or " "


def _when(ts: datetime) -> str:
    return ts.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _title(root: Path, task: str) -> str:
    try:
        data = read_toml(root / "tasks" / task / "task.toml")
    except Problem:  # the report goes on without a title; kws check names the problem
        return ""
    t = data.get("title")
    return t if isinstance(t, str) else ""


def _fence(text: str, lang: str = "") -> str:
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}{lang}\n{text}\n{fence}"


def render_report(
    repo: git.Repo,
    records: RecordSet,
    verdict: Verdict,
    rubric: Rubric | None = None,
) -> str:
    """Markdown for ``verdict`` (see the module). ``rubric`` supplies field labels and the
    suggestions; without it, field keys are shown as they are."""
    harden(repo)
    v = verdict
    eff = records.effective_values(v)
    values = v.values()
    out = [
        *_header(repo, records, v, eff),
        *_field_table(v, rubric, values, eff),
        *_rationale(v),
        *_findings(v),
        *_section("Checks", ["| Check | Status | Seconds | Reason |", "|---|---|---|---|"] + [
            f"| `{c.check}` | {c.status} | {f'{c.seconds:.2f}' if c.seconds is not None else ''} | {_cell(c.reason)} |"
            for c in v.checks] if v.checks else []),
        *_section("Disputes", _dispute_lines(records, v, values)),
        *_section("Unverified records (not counted)", [
            f"- {u.kind} `{u.record.id[:8]}` by {_cell(u.record.reviewer)} {u.said}: {_cell(u.why)} (`{u.path}`)"
            for u in records.unverified_for(v.task)]),
    ]
    # a record, a task title or evidence may hold escape sequences: shown escaped, never raw
    return safe_text("\n".join(out).rstrip(), None) + "\n"


def _section(title: str, lines: list[str]) -> list[str]:
    """A ``## title`` section holding ``lines`` (nothing when there are none)."""
    return [f"## {title}", "", *lines, ""] if lines else []


def _header(repo: git.Repo, records: RecordSet, v: Verdict, eff: Mapping[str, str]) -> list[str]:
    """The title, the verdict line and the list of what it judged (ids, rubric, versions,
    completeness, signatures, and whether the task changed since)."""
    title = _title(work_tree(repo), v.task)
    complete = {True: "yes", False: "no (some checks skipped or errored)", None: "no checks recorded"}[
        v.checks_complete if v.checks else None
    ]
    out = [
        f"# Review of `{v.task}`" + (f": {title}" if title else ""),
        "",
        f"**Verdict: {v.overall.upper()}**"
        + (f" (now **{eff['overall'].upper()}** after resolution)" if eff["overall"] != v.overall else "")
        + f" by {v.reviewer.name} <{v.reviewer.email}>, {_when(v.timestamp)}",
        "",
        f"- verdict id: `{v.verdict_id}`",
        f"- task version (git tree of `tasks/{v.task}`): `{v.task_tree}`",
        f"- rubric: {v.rubric_id} v{v.rubric_version}; kws {v.kws_version or '?'}; device: {v.device or '?'}",
    ]
    if v.versions:
        out.append("- versions: " + ", ".join(f"{k} {val}" for k, val in v.versions.items()))
    out.append(f"- checks complete: {complete}")
    if records.signature_note:
        out.append(f"- {records.signature_note}")
    head = task_version(repo, v.task)
    if head.tree is not None and head.tree != v.task_tree:
        changes = tree_changes(repo, v.task_tree, head.tree)
        what = ", ".join(changes) if changes else "(the judged version is not in this clone)"
        out.append(f"- **the task has changed since this verdict**: {what}")
    out.append("")
    return out


def _field_table(v: Verdict, rubric: Rubric | None, values: Mapping[str, str], eff: Mapping[str, str]) -> list[str]:
    """The table of field values (struck through where a resolution changed them) beside
    what kws suggests from the recorded findings under ``rubric``."""
    sugg: dict[str, Suggestion] = {}
    if rubric is not None and rubric.id == v.rubric_id and (v.findings or v.checks):
        sugg = suggest(
            rubric,
            [{"check": f.check, "severity": f.severity, "summary": f.summary} for f in v.findings],
            [{"check": c.check, "status": c.status, "reason": c.reason} for c in v.checks],
            [{"check": k, "reason": r} for k, r in v.not_judged.items()],
        )
    out = ["| Field | Value | kws suggested |", "|---|---|---|"]
    keys = [f.key for f in rubric.choice_fields] if rubric is not None else list(values)
    keys += [k for k in values if k not in keys and k != "rationale"]
    for k in keys:
        if k == "rationale" or (rubric is not None and k == rubric.rationale_field):
            continue
        field = rubric.field(k) if rubric is not None else None
        label = field.label if field is not None else k
        val = values.get(k, "")
        if eff.get(k) != val:
            val = f"~~{val}~~ {eff.get(k)} (resolution)"
        s = sugg.get(k)
        sv = s.value if s is not None and s.value else "-"
        out.append(f"| {_cell(label)} | {_cell(val)} | {_cell(sv)} |")
    out.append("")
    return out


def _rationale(v: Verdict) -> list[str]:
    out = ["## Rationale", ""]
    if v.rationale.strip():
        out.extend("> " + line if line else ">" for line in v.rationale.strip().splitlines())
    else:
        out.append("_none given_")
    out.append("")
    return out


_SEVERITY_ORDER = {"fail": 0, "warn": 1, "info": 2}


def _findings(v: Verdict) -> list[str]:
    """The findings, worst first, each with its summary, reproduction and evidence."""
    counts = Counter(f.severity for f in v.findings)
    summary = ", ".join(f"{n} {sev}" for sev, n in sorted(counts.items(), key=lambda kv: _SEVERITY_ORDER.get(kv[0], 9)))
    out = [f"## Findings ({summary or 'none recorded'})", ""]
    for f in sorted(v.findings, key=lambda f: _SEVERITY_ORDER.get(f.severity, 3)):
        out += [f"### {f.severity}: `{f.check}`", "", f.summary or "_no summary_", ""]
        if f.repro:
            out += ["Reproduce:", "", _fence(f.repro, "sh"), ""]
        if f.evidence:
            out += ["Evidence:", "", _fence(json.dumps(f.evidence, indent=2, sort_keys=True, default=str), "json"), ""]
    return out


def _dispute_lines(records: RecordSet, v: Verdict, values: Mapping[str, str]) -> list[str]:
    """One entry per dispute of ``v`` (its state, the disputed values, both rationales)."""
    out = []
    for d in records.disputes_of(v.verdict_id):
        res = records.resolution_of(d.dispute_id)
        state = "open" if res is None else f"{res.outcome} by {res.reviewer.name}, {_when(res.timestamp)}"
        fields = ", ".join(f"{k}: {values.get(k, '-')} → {val}" for k, val in d.fields.items())
        out.append(f"- `{d.dispute_id[:8]}` by {d.reviewer.name}, {_when(d.timestamp)} ({state}): {fields}")
        out.append(f"  - dispute: {_cell(d.rationale)}")
        if res is not None:
            out.append(f"  - resolution: {_cell(res.rationale)}")
    return out
