"""A queue: ``queue.toml`` (the one reader of it), and loading every task of a queue.

A queue is a git repository with ``tasks/<task-id>/task.toml`` folders (task format v1,
"A queue"). ``queue.toml`` is optional; its keys (documented in ``docs/task-format.md``):

- ``name``: the queue's display name (default: the folder's name);
- ``rubric``: the rubric id verdicts use (default ``kernel-review``);
- ``sync_refs``: extra git refs ``kws sync`` exchanges besides the branch (full names such
  as ``refs/notes/kws-screen``; default none).
- ``helpers`` (kws extension): a folder of helper modules every task may import
  (:mod:`workstation.task.helpers`);
- ``resolution_conflict`` (kws extension): what counts when two resolutions of one dispute
  disagree (written at once, neither superseding the other): ``open`` (default: neither,
  the dispute is open again), ``first`` or ``last`` in history order (docs/records.md).
- ``[records]`` (kws extension; docs/records.md, "Signed records" and "Queue-owner
  policies"): ``signatures`` (``required``, default, or ``off`` for a local-only queue),
  ``allowed_signers`` (the allowed-signers file, default ``.kws/allowed_signers``),
  ``self_resolution`` (``refuse``, default, or ``allow``: may a verdict's author resolve a
  dispute of it) and ``overturned_verdicts`` (``final``, default, ``author`` or
  ``excluded``: what calibration counts for a verdict a resolution changed). kws reads this
  table from the **committed** queue.toml (:mod:`workstation.records.signing`).

Unknown keys are warnings, as in task.toml. Every component that needs queue settings
(the CLI, the queue screen's index, the rubric lookup) reads them through
:func:`read_queue_config`, so they agree.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

from msgspec import Meta, Struct

from workstation.schema.problem import Problem
from workstation.schema.structs import convert, unknown_keys
from workstation.schema.toml import read_toml
from workstation.task.format import load_task
from workstation.task.model import Task

DEFAULT_RUBRIC = "kernel-review"
#: The queue's settings file, relative to the queue root.
QUEUE_TOML = "queue.toml"


class RecordsTable(Struct, frozen=True, kw_only=True):
    """queue.toml's ``[records]`` table: the queue owner's record policies (all optional)."""

    signatures: Annotated[
        Literal["required", "off"],
        Meta(description="whether records must be signed: required, or off for a local-only queue")] = "required"
    allowed_signers: Annotated[
        str, Meta(description="the allowed-signers file, relative to the queue root", min_length=1,
                  max_length=200)] = ".kws/allowed_signers"
    self_resolution: Annotated[
        Literal["refuse", "allow"],
        Meta(description="whether a verdict's author may resolve a dispute of it: refuse or allow")] = "refuse"
    overturned_verdicts: Annotated[
        Literal["final", "author", "excluded"],
        Meta(description="what calibration counts for a verdict a resolution changed: final, author or "
                         "excluded")] = "final"


class QueueFile(Struct, frozen=True):
    """``queue.toml``'s keys (all optional)."""

    name: Annotated[str, Meta(description="a string", max_length=200)] | None = None
    rubric: Annotated[str, Meta(description="a rubric id", pattern=r"^[a-z0-9][a-z0-9._-]*$")] | None = None
    sync_refs: Annotated[
        list[Annotated[str, Meta(pattern=r"^refs/(?!heads/|remotes/|tags/)[A-Za-z0-9._/-]+$",
                                 description="a full ref name such as refs/notes/NAME")]],
        Meta(description="an array of ref names")] = []
    helpers: Annotated[str, Meta(description="a folder name", max_length=200)] | None = None
    resolution_conflict: Annotated[
        Literal["open", "first", "last"],
        Meta(description="what counts when resolutions of one dispute disagree: open, first or last")] = "open"
    records: Annotated[RecordsTable, Meta(description="a table of record policies")] = RecordsTable()


@dataclass(frozen=True)
class QueueConfig:
    """A queue's settings: ``name``, ``rubric`` (with defaults applied), ``sync_refs``,
    ``resolution_conflict`` and the warnings reading ``queue.toml`` produced (unknown keys)."""

    root: Path
    name: str
    rubric: str
    warnings: tuple[Problem, ...] = ()
    sync_refs: tuple[str, ...] = ()
    resolution_conflict: str = "open"
    records: RecordsTable = RecordsTable()


def read_queue_config(root: Path | str) -> QueueConfig:
    """The settings of the queue at ``root`` (defaults where ``queue.toml`` is absent).

    Raises:
        Problem: ``queue.toml`` exists but does not read, parse or validate, or is not a
            file (a folder, a link to nothing).
    """
    root = Path(root)
    qt = root / QUEUE_TOML
    if not qt.is_file():
        if os.path.lexists(qt):
            raise Problem(qt, "", "not a file (a folder, or a link to nothing); queue.toml must be a TOML file, "
                                  "or absent for the defaults")
        return QueueConfig(root, root.name, DEFAULT_RUBRIC)
    data = read_toml(qt)
    doc = convert(data, QueueFile, file=qt)
    warnings = tuple(Problem(qt, k, "unknown key (ignored)") for k in unknown_keys(data, QueueFile))
    if doc.helpers is not None:
        from workstation.task.helpers import queue_helpers_dir

        queue_helpers_dir(root)  # raises the Problem naming queue.toml's helpers key
    return QueueConfig(root, doc.name or root.name, doc.rubric or DEFAULT_RUBRIC, warnings, tuple(doc.sync_refs),
                       doc.resolution_conflict, doc.records)


@dataclass
class QueueLoad:
    """The result of loading a queue: its valid tasks (sorted by id), the tasks that do not
    load (one :class:`Problem` each), and warnings (unknown keys in queue.toml and tasks)."""

    root: Path
    name: str
    rubric: str
    tasks: list[Task]
    errors: list[Problem]
    warnings: list[Problem] = field(default_factory=list)

    def task(self, task_id: str) -> Task | None:
        return next((t for t in self.tasks if t.id == task_id), None)


def task_dirs(root: Path) -> list[Path]:
    """Every task folder under ``<root>/tasks`` (sorted; hidden folders skipped)."""
    return sorted(p for p in (root / "tasks").iterdir() if p.is_dir() and not p.name.startswith("."))


def load_queue(root: Path | str) -> QueueLoad:
    """Load every task under ``<root>/tasks``; malformed ones become :class:`Problem` s. A
    ``queue.toml`` that does not read, parse or validate is one of those problems too (the
    defaults are used, so the tasks still list).

    Raises:
        Problem: only when there is no queue (no ``tasks/`` folder).
    """
    root = Path(root)
    if not (root / "tasks").is_dir():
        raise Problem(root, "", "not a kws queue: no tasks/ folder")
    tasks: list[Task] = []
    errors: list[Problem] = []
    warnings: list[Problem] = []
    try:
        cfg = read_queue_config(root)
        warnings += cfg.warnings
    except Problem as e:
        cfg = QueueConfig(root, root.name, DEFAULT_RUBRIC)
        errors.append(e)
    for d in task_dirs(root):
        try:
            t = load_task(d)
        except Problem as e:
            errors.append(e)
            continue
        tasks.append(t)
        warnings.extend(t.warnings)
    return QueueLoad(root=root, name=cfg.name, rubric=cfg.rubric, tasks=tasks, errors=errors, warnings=warnings)


def find_queue_root(path: Path | str) -> Path | None:
    """The queue root above ``path`` (a folder holding ``tasks/``), or ``None``."""
    p = Path(path).resolve()
    for cand in (p, *p.parents):
        if (cand / "tasks").is_dir() and (cand / "queue.toml").is_file():
            return cand
    for cand in (p, *p.parents):
        if (cand / "tasks").is_dir():
            return cand
    return None
