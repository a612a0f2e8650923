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
from datetime import UTC, datetime
from pathlib import Path

import git

from workstation.records.history import tree_changes
from workstation.records.model import Verdict
from workstation.records.state import RecordSet
from workstation.repo.gitqueue import harden, task_version
from workstation.rubric.model import Rubric
from workstation.rubric.suggest import suggest
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
    root = Path(repo.working_tree_dir)
    v = verdict
    title = _title(root, v.task)
    eff = records.effective_values(v)
    out: list[str] = []
    out.append(f"# Review of `{v.task}`" + (f": {title}" if title else ""))
    out.append("")
    out.append(
        f"**Verdict: {v.overall.upper()}**"
        + (f" (now **{eff['overall'].upper()}** after resolution)" if eff["overall"] != v.overall else "")
        + f" by {v.reviewer.name} <{v.reviewer.email}>, {_when(v.timestamp)}"
    )
    out.append("")
    complete = {True: "yes", False: "no (some checks skipped or errored)", None: "no checks recorded"}[
        v.checks_complete if v.checks else None
    ]
    out.append(f"- verdict id: `{v.verdict_id}`")
    out.append(f"- task version (git tree of `tasks/{v.task}`): `{v.task_tree}`")
    out.append(f"- rubric: {v.rubric_id} v{v.rubric_version}; kws {v.kws_version or '?'}; device: {v.device or '?'}")
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

    sugg = {}
    if rubric is not None and rubric.id == v.rubric_id and (v.findings or v.checks):
        sugg = suggest(
            rubric,
            [{"check": f.check, "severity": f.severity, "summary": f.summary} for f in v.findings],
            [{"check": c.check, "status": c.status, "reason": c.reason} for c in v.checks],
            [{"check": k, "reason": r} for k, r in v.not_judged.items()],
        )
    out.append("| Field | Value | kws suggested |")
    out.append("|---|---|---|")
    values = v.values()
    keys = [f.key for f in rubric.choice_fields] if rubric is not None else list(values)
    keys += [k for k in values if k not in keys and k != "rationale"]
    for k in keys:
        if k == "rationale" or (rubric is not None and k == rubric.rationale_field):
            continue
        f = rubric.field(k) if rubric is not None else None
        label = f.label if f is not None else k
        val = values.get(k, "")
        if eff.get(k) != val:
            val = f"~~{val}~~ {eff.get(k)} (resolution)"
        s = sugg.get(k)
        sv = s.value if s is not None and s.value else "-"
        out.append(f"| {_cell(label)} | {_cell(val)} | {_cell(sv)} |")
    out.append("")
    out.append("## Rationale")
    out.append("")
    if v.rationale.strip():
        out.extend("> " + line if line else ">" for line in v.rationale.strip().splitlines())
    else:
        out.append("_none given_")
    out.append("")

    counts = Counter(f.severity for f in v.findings)
    summary = ", ".join(f"{n} {sev}" for sev, n in sorted(counts.items(), key=lambda kv: ("fail", "warn", "info").index(kv[0]) if kv[0] in ("fail", "warn", "info") else 9))
    out.append(f"## Findings ({summary or 'none recorded'})")
    out.append("")
    order = {"fail": 0, "warn": 1, "info": 2}
    for f in sorted(v.findings, key=lambda f: order.get(f.severity, 3)):
        out.append(f"### {f.severity}: `{f.check}`")
        out.append("")
        out.append(f.summary or "_no summary_")
        out.append("")
        if f.repro:
            out.append("Reproduce:")
            out.append("")
            out.append(_fence(f.repro, "sh"))
            out.append("")
        if f.evidence:
            out.append("Evidence:")
            out.append("")
            out.append(_fence(json.dumps(f.evidence, indent=2, sort_keys=True, default=str), "json"))
            out.append("")
    if v.checks:
        out.append("## Checks")
        out.append("")
        out.append("| Check | Status | Seconds | Reason |")
        out.append("|---|---|---|---|")
        for c in v.checks:
            secs = f"{c.seconds:.2f}" if c.seconds is not None else ""
            out.append(f"| `{c.check}` | {c.status} | {secs} | {_cell(c.reason)} |")
        out.append("")

    disputes = records.disputes_of(v.verdict_id)
    if disputes:
        out.append("## Disputes")
        out.append("")
        for d in disputes:
            res = records.resolution_of(d.dispute_id)
            state = "open" if res is None else f"{res.outcome} by {res.reviewer.name}, {_when(res.timestamp)}"
            fields = ", ".join(f"{k}: {values.get(k, '-')} → {val}" for k, val in d.fields.items())
            out.append(f"- `{d.dispute_id[:8]}` by {d.reviewer.name}, {_when(d.timestamp)} ({state}): {fields}")
            out.append(f"  - dispute: {_cell(d.rationale)}")
            if res is not None:
                out.append(f"  - resolution: {_cell(res.rationale)}")
        out.append("")
    unverified = records.unverified_for(v.task)
    if unverified:
        out.append("## Unverified records (not counted)")
        out.append("")
        for u in unverified:
            r = u.record
            what = getattr(r, "overall", None) or getattr(r, "outcome", "")
            out.append(f"- {r.kind} `{r.id[:8]}` by {_cell(r.reviewer)} {what}: {_cell(u.why)} (`{u.path}`)")
        out.append("")
    # a record, a task title or evidence may hold escape sequences: shown escaped, never raw
    return safe_text("\n".join(out).rstrip(), None) + "\n"
