"""A queue's shared helper folder (kws extension): where it is, in one place.

``queue.toml`` may name a folder of helper modules with ``helpers = "<folder>"`` (relative
to the queue root, inside it). Every task of the queue can import them: the job child puts
the folder on ``sys.path`` after the task folder. The folder's content is part of each
task's identity (:func:`workstation.repo` tree ids, recheck, screening keys combine the
task's tree with the helper folder's).

:func:`queue_helpers_dir` is the single function that says where the folder is; the
sandbox (which binds folders read-only into a child) and every identity computation call
it rather than reading ``queue.toml`` themselves.

The queue repository is untrusted input: its ``queue.toml`` could name the gold answers,
the records or ``.git`` (whose config holds the remote URL, perhaps with a token) as its
"helpers", and every job would get a copy. So the folder must be one plain folder of its
own below the queue root: not a reserved folder (:data:`RESERVED`), reached through no
symbolic link, holding no reserved folder or file at any depth and no link that leads out
of it. Anything else is a :class:`Problem` naming ``queue.toml`` and ``helpers``, and
nothing of it is copied into a job (the task loads with no helper folder).
"""

from __future__ import annotations

import os
from pathlib import Path

from workstation.schema.problem import Problem
from workstation.schema.toml import read_toml


def queue_root_of(task_dir: Path) -> Path | None:
    """The queue root of a task folder laid out as ``<root>/tasks/<id>``, else ``None``."""
    task_dir = Path(task_dir).resolve()
    if task_dir.parent.name != "tasks":
        return None
    return task_dir.parent.parent


#: Names a helper folder may not be nor hold at any depth: the gold answers, the record
#: folders (``records.model.FOLDERS``; the task layer may not import records, and
#: tests/test_taskfmt_ext.py keeps the two in step), the task folders, git's own data
#: and kws's per-queue state.
RESERVED = frozenset({"gold", "verdicts", "disputes", "resolutions", "reservations", "tasks", ".git", ".kws"})
#: The most entries a helper folder may hold (its check walks it once per load).
MAX_ENTRIES = 10_000


def queue_helpers_dir(root: Path) -> Path | None:
    """The shared helper folder of the queue at ``root`` (absolute), or ``None`` when
    ``queue.toml`` is absent or names none.

    Raises:
        Problem: ``queue.toml``'s ``helpers`` is not a string, is absolute, contains
            ``..``, resolves outside the queue, is not a folder, is or holds a reserved
            name (:data:`RESERVED`: ``gold``, the record folders, ``tasks``, ``.git``),
            is reached through a symbolic link, holds a link that leads outside it, or
            holds more than :data:`MAX_ENTRIES` entries.
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
    if p in (Path("tasks"), Path(".")):
        raise Problem(qt, "helpers", f"{value!r} must be a folder of its own, not the queue or tasks/")
    bad = [part for part in p.parts if part in RESERVED]
    if bad:
        raise Problem(qt, "helpers", f"{value!r} is or lies in the reserved folder {bad[0]!r} "
                                     "(gold answers, records, tasks and git data are never copied into a job)")
    here = root
    for part in p.parts:
        here = here / part
        if here.is_symlink():
            raise Problem(qt, "helpers", f"{value!r} is reached through the symbolic link {part!r}; "
                                         "the helper folder must be a plain folder in the queue")
    full = (root / p).resolve()
    try:
        full.relative_to(root.resolve())
    except ValueError:
        raise Problem(qt, "helpers", f"{value!r} resolves outside the queue") from None
    if not full.is_dir():
        raise Problem(qt, "helpers", f"folder {value!r} does not exist in {root}")
    if full == root.resolve():
        raise Problem(qt, "helpers", f"{value!r} must be a folder of its own, not the queue or tasks/")
    _check_content(qt, value, full)
    return full


def _check_content(qt: Path, value: str, full: Path) -> None:
    """Raise the :class:`Problem` for the first reserved name, link leading out of
    ``full`` or entry past :data:`MAX_ENTRIES` in the helper folder ``full``."""
    seen = 0
    for dirpath, dirnames, filenames in os.walk(full, followlinks=False):
        for name in dirnames + filenames:
            seen += 1
            if seen > MAX_ENTRIES:
                raise Problem(qt, "helpers", f"{value!r} holds more than {MAX_ENTRIES} entries")
            entry = Path(dirpath) / name
            rel = entry.relative_to(full)
            if name in RESERVED:
                raise Problem(qt, "helpers", f"{value!r} holds the reserved name {str(rel)!r} "
                                             "(gold answers, records, tasks and git data are never copied into a job)")
            if entry.is_symlink():
                target = entry.resolve()
                try:
                    target.relative_to(full)
                except ValueError:
                    raise Problem(qt, "helpers", f"{value!r} holds {str(rel)!r}, a link that leads outside "
                                                 "the helper folder") from None
