"""A queue's shared helper folder (kws extension): where it is, in one place.

``queue.toml`` may name a folder of helper modules with ``helpers = "<folder>"`` (relative
to the queue root, inside it). Every task of the queue can import them: the job child puts
the folder on ``sys.path`` after the task folder. The folder's content is part of each
task's identity (:func:`workstation.repo` tree ids, recheck, screening keys combine the
task's tree with the helper folder's).

:func:`queue_helpers_dir` is the single function that says where the folder is; the
sandbox (which binds folders read-only into a child) and every identity computation call
it rather than reading ``queue.toml`` themselves.
"""

from __future__ import annotations

from pathlib import Path

from workstation.schema.problem import Problem
from workstation.schema.toml import read_toml


def queue_root_of(task_dir: Path) -> Path | None:
    """The queue root of a task folder laid out as ``<root>/tasks/<id>``, else ``None``."""
    task_dir = Path(task_dir).resolve()
    if task_dir.parent.name != "tasks":
        return None
    return task_dir.parent.parent


def queue_helpers_dir(root: Path) -> Path | None:
    """The shared helper folder of the queue at ``root`` (absolute), or ``None`` when
    ``queue.toml`` is absent or names none.

    Raises:
        Problem: ``queue.toml``'s ``helpers`` is not a string, is absolute, contains
            ``..``, resolves outside the queue, or is not a folder.
    """
    root = Path(root)
    qt = root / "queue.toml"
    if not qt.is_file():
        return None
    value = read_toml(qt).get("helpers")
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise Problem(qt, "helpers", f"expected a folder name relative to the queue, got {value!r}")
    p = Path(value)
    if p.is_absolute() or ".." in p.parts:
        raise Problem(qt, "helpers", f"{value!r} must be relative to the queue root, without '..'")
    full = (root / p).resolve()
    try:
        full.relative_to(root.resolve())
    except ValueError:
        raise Problem(qt, "helpers", f"{value!r} resolves outside the queue") from None
    if not full.is_dir():
        raise Problem(qt, "helpers", f"folder {value!r} does not exist in {root}")
    if full.name == "tasks" or full == root.resolve():
        raise Problem(qt, "helpers", f"{value!r} must be a folder of its own, not the queue or tasks/")
    return full
