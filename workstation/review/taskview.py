"""What the spec and source panels show of a task: :class:`TaskView` (spec, diffs and
listings of its files, the texts to highlight), built by :func:`load_task_view` from the
task folder alone (no git, no task code run).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workstation.review.diff import diff_files, listing
from workstation.schema.problem import Problem
from workstation.schema.text import safe_text
from workstation.task.format import load_task

__all__ = ["TaskView", "load_task_view"]


@dataclass
class TaskView:
    """What the spec and source panels show of a task.

    ``files`` are (label, :class:`~workstation.review.diff.FileDiff`) pairs: first the
    candidate against its baseline (``[entry] baseline``) or the translation's original
    (``original``, a kws extension key), or a plain listing without either; then the other
    task files (reference, inputs, baseline/original, test, bench) as listings.
    ``sources[label]`` is ``(old name, old text, new name, new text)`` for highlighting.
    ``problem`` is set (and the rest empty) when the task does not load.
    """

    title: str = ""
    spec: str = ""
    files: list[tuple[str, Any]] = field(default_factory=list)
    sources: dict[str, tuple[str | None, str, str, str]] = field(default_factory=dict)
    problem: str = ""
    bytes: int = 0


def _read_text(path: Path) -> str:
    try:
        # task files are the queue's (untrusted): control characters and escape sequences shown escaped
        return safe_text(path.read_text(encoding="utf-8", errors="replace"), None)
    except OSError as e:
        return f"(cannot read {path.name}: {e})"


def load_task_view(task_dir: Path | str) -> TaskView:
    """Read a task's spec and sources and build its diffs (no git, no task code run)."""
    task_dir = Path(task_dir)
    try:
        task = load_task(task_dir)
    except Problem as e:
        return TaskView(problem=str(e))
    view = TaskView(title=task.title, spec=_read_text(task_dir / task.spec) or "*(empty spec)*")
    cand = task.entry["candidate"].file
    has_base = "baseline" in task.entry
    base_name = task.entry["baseline"].file if has_base else task.original
    new = _read_text(task_dir / cand)
    old = _read_text(task_dir / base_name) if base_name else None
    label = "candidate" + (f" vs {'baseline' if has_base else 'original'}" if base_name else "")
    view.files.append((label, diff_files(old, new, base_name, cand)))
    view.sources[label] = (base_name, old or "", cand, new)
    view.bytes = len(new) + len(old or "")
    others = [("reference", task.entry["reference"].file), ("inputs", task.entry["inputs"].file)]
    if base_name:
        others.append(("baseline" if has_base else "original", base_name))
    if task.original and task.original != base_name:
        others.append(("original", task.original))
    for role in ("test", "bench"):
        if role in task.entry:
            others.append((role, task.entry[role].file))
    seen = {cand}
    for role, name in others:
        if name in seen:
            continue
        seen.add(name)
        text = _read_text(task_dir / name)
        lbl = f"{role}: {name}"
        view.files.append((lbl, listing(text, name)))
        view.sources[lbl] = (None, "", name, text)
        view.bytes += len(text)
    return view

