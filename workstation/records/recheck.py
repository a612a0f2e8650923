"""``kws recheck``: re-run the checks on the exact task version a verdict judged.

The task folder is extracted from the git tree id recorded in the verdict (``git archive``
of that tree, so later edits, a dirty work tree or another branch do not matter) into a
temporary folder named after the task, checked there with
``workstation.engine.run.check_task``, and today's findings are compared with the recorded
ones: per check, the status then and now; per finding, those that appeared or went away
(matched on check, severity and summary; the findings of timing checks on check and
severity only, since their summaries carry measured times that move with the machine's
load). The battery picks the same derived cases for the same task version on any machine
(:mod:`workstation.engine.derivation`), so an unchanged task rechecks **identical**.
"""

from __future__ import annotations

import io
import tarfile
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import git

from workstation.records.model import RecordError, Verdict
from workstation.repo.gitqueue import harden

__all__ = ["RecheckDiff", "compare_findings", "extract_task", "format_recheck", "recheck"]


def extract_task(repo: git.Repo, task: str, tree: str, dest: Path | str) -> Path:
    """Write the files of git tree ``tree`` (a ``tasks/<task>`` version) to ``dest/<task>``
    and return that folder. Raises RecordError when the tree is not in this clone."""
    harden(repo)
    try:
        obj = repo.rev_parse(tree)
    except (git.BadName, ValueError) as exc:
        raise RecordError(
            f"task version {tree} is not in this clone of the queue (run kws sync)"
        ) from exc
    if obj.type != "tree":
        raise RecordError(f"{tree} is a {obj.type}, not a tree")
    buf = io.BytesIO()
    repo.archive(buf, treeish=tree, format="tar")
    buf.seek(0)
    out = Path(dest) / task
    out.mkdir(parents=True)
    with tarfile.open(fileobj=buf) as tar:
        tar.extractall(out, filter="data")
    return out


@dataclass
class RecheckDiff:
    """Recorded (``then``) vs today's (``now``) check results for one verdict."""

    status: list[tuple[str, str, str]] = field(default_factory=list)  # (check, then, now), changed only
    appeared: list[Mapping[str, Any]] = field(default_factory=list)  # today's findings not recorded
    gone: list[Mapping[str, Any]] = field(default_factory=list)  # recorded findings not seen today
    unchanged: int = 0
    timing_checks: tuple[str, ...] = ()
    complete_then: bool | None = None
    complete_now: bool | None = None
    device_then: str = ""
    device_now: str = ""

    @property
    def identical(self) -> bool:
        """Every check status and every finding as recorded (timing checks' findings by
        check and severity), and ``complete`` as recorded."""
        return not (self.status or self.appeared or self.gone) and self.complete_then == self.complete_now

    @property
    def same(self) -> bool:
        """No check status changed and no fail or warn finding appeared or went away
        (``info`` findings, which describe what a check looked at, may differ)."""
        return not (self.status or self.significant(self.appeared) or self.significant(self.gone))

    @staticmethod
    def significant(findings: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        return [f for f in findings if f.get("severity") != "info"]


def _fkey(f: Mapping[str, Any], timing: frozenset[str] = frozenset()) -> tuple[str, str, str]:
    check = str(f.get("check", ""))
    summary = "" if check in timing else " ".join(str(f.get("summary", "")).split())
    return (check, str(f.get("severity", "")), summary)


def timing_check_ids() -> tuple[str, ...]:
    """The registered checks whose findings carry measured times (``exclusive`` phase or
    timing evidence), from the engine's registry."""
    from workstation.engine.check import ids_where

    return tuple(dict.fromkeys([*ids_where(phase="exclusive"), *ids_where(timing_evidence=True)]))


def compare_findings(verdict: Verdict, report: Mapping[str, Any],
                     timing_checks: tuple[str, ...] | None = None) -> RecheckDiff:
    """Compare ``verdict``'s recorded findings and check statuses with ``report`` (a
    ``kws check --json`` report, task format v1). Findings of ``timing_checks`` (default:
    :func:`timing_check_ids`) match on check and severity only."""
    timing = frozenset(timing_check_ids() if timing_checks is None else timing_checks)
    then_f = [{"check": f.check, "severity": f.severity, "summary": f.summary} for f in verdict.findings]
    now_f = list(report.get("findings") or [])
    then_keys = [_fkey(f, timing) for f in then_f]
    now_keys = [_fkey(f, timing) for f in now_f]
    d = RecheckDiff(
        timing_checks=tuple(sorted(timing)),
        complete_then=verdict.checks_complete,
        complete_now=report.get("complete") if isinstance(report.get("complete"), bool) else None,
        device_then=verdict.device,
        device_now=str(report.get("device") or ""),
    )
    remaining = list(then_keys)
    for f, k in zip(now_f, now_keys, strict=True):
        if k in remaining:
            remaining.remove(k)
            d.unchanged += 1
        else:
            d.appeared.append(f)
    leftover = list(now_keys)
    for f, k in zip(then_f, then_keys, strict=True):
        if k in leftover:
            leftover.remove(k)
        else:
            d.gone.append(f)
    then_s = {c.check: c.status for c in verdict.checks}
    now_s = {str(c.get("check")): str(c.get("status")) for c in report.get("checks") or []}
    for check in list(dict.fromkeys([*then_s, *now_s])):
        a, b = then_s.get(check, "not run"), now_s.get(check, "not run")
        if a != b:
            d.status.append((check, a, b))
    return d


def recheck(
    repo: git.Repo,
    verdict: Verdict,
    check_task: Callable[[Path], Mapping[str, Any]] | None = None,
) -> tuple[Mapping[str, Any], RecheckDiff]:
    """Extract the judged version, run the checks on it, compare. ``check_task`` defaults
    to ``workstation.engine.run.check_task`` (imported here, lazily: it loads the check
    battery). Returns today's report and the comparison."""
    if check_task is None:
        from workstation.engine.run import check_task as engine_check

        check_task = engine_check
    with tempfile.TemporaryDirectory(prefix="kws-recheck-") as tmp:
        folder = extract_task(repo, verdict.task, verdict.task_tree, tmp)
        report = check_task(folder)
    return report, compare_findings(verdict, report)


def format_recheck(verdict: Verdict, diff: RecheckDiff, verbose: bool = False) -> str:
    """Plain-text rendering for ``kws recheck``; ``info`` findings that differ are counted,
    and listed with ``verbose``."""
    lines = [
        f"recheck of verdict {verdict.verdict_id[:8]} on {verdict.task} "
        f"(task version {verdict.task_tree[:10]}, judged {verdict.timestamp:%Y-%m-%d %H:%MZ} "
        f"by {verdict.reviewer.name})",
        f"device then: {diff.device_then or '?'}; now: {diff.device_now or '?'}",
    ]
    if not verdict.checks and not verdict.findings:
        lines.append("the verdict recorded no check results (committed without checks): every finding below is new")
    if diff.status:
        lines.append("check status changed:")
        lines.extend(f"  {c}: {a} -> {b}" for c, a, b in diff.status)
    for title, sign, found in (("new findings today:", "+", diff.appeared),
                               ("recorded findings not seen today:", "-", diff.gone)):
        shown = found if verbose else diff.significant(found)
        if shown:
            lines.append(title)
            lines.extend(f"  {sign} {f.get('severity')} {f.get('check')}: {f.get('summary', '')}" for f in shown)
    info_new = len(diff.appeared) - len(diff.significant(diff.appeared))
    info_gone = len(diff.gone) - len(diff.significant(diff.gone))
    if (info_new or info_gone) and not verbose:
        lines.append(f"info findings differ: {info_new} new, {info_gone} not seen today (-v lists them)")
    if diff.complete_then != diff.complete_now:
        lines.append(f"complete: {diff.complete_then} then, {diff.complete_now} now")
    if diff.identical:
        timing = [c for c in diff.timing_checks if any(f.check == c for f in verdict.findings)]
        lines.append(f"identical: every check status and all {diff.unchanged} finding(s) as recorded"
                     + (f" (the findings of {', '.join(timing)} compared by check and severity: they carry "
                        "measured times)" if timing else ""))
    elif diff.same:
        lines.append(f"same verdict-relevant results: every check status and every fail/warn finding as recorded ({diff.unchanged} finding(s) identical)")
    else:
        lines.append(f"unchanged findings: {diff.unchanged}")
    return "\n".join(lines)
