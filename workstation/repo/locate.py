"""Which queue a command works on, as git finds a repository: ``--queue`` when given, else
the queue whose clone holds the current folder, else the ``queue`` setting, else the
per-user sample queue (:func:`find_queue`); the messages for a path or a name that does not
exist are :func:`workstation.repo.gitqueue.missing_folder` and ``near_names``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import git

from workstation import settings
from workstation.repo.gitqueue import (
    QueueError,
    default_queue_path,
    ensure_default_queue,
    missing_folder,
    open_queue,
)


@dataclass(frozen=True)
class QueueChoice:
    """Which queue a command works on, and why (:func:`find_queue`).

    ``root``: the queue's folder; ``how``: where the choice came from, in words
    (``--queue``, ``the clone you are in``, ``setting queue (environment KWS_QUEUE)``,
    ``the per-user sample queue``); ``sample``: the per-user sample queue was taken
    because nothing else named a queue (a command that writes says so)."""

    root: Path
    how: str
    sample: bool = False


def is_queue_folder(folder: Path) -> bool:
    """Whether ``folder`` is a queue's root: it holds ``tasks/`` or ``queue.toml``."""
    return (folder / "tasks").is_dir() or (folder / "queue.toml").is_file()


def enclosing_queue(start: Path | str | None = None) -> Path | None:
    """The root of the git work tree that contains ``start`` (default: the current folder),
    as git finds it (parent folders searched, a ``.git`` file of a linked work tree
    followed), when that root is a queue (:func:`is_queue_folder`); else None. Runs no
    git: GitPython reads the repository's files."""
    here = Path(start) if start is not None else Path.cwd()
    try:
        repo = git.Repo(here, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, OSError):
        return None
    try:
        wt = repo.working_tree_dir
    finally:
        repo.close()
    if wt is None:
        return None
    root = Path(wt)
    return root if is_queue_folder(root) else None


def find_queue(path: Path | str | None = None, *, cwd: Path | str | None = None, make: bool = True) -> QueueChoice:
    """The queue a command works on, as git finds its repository: ``path`` (``--queue``)
    when given; else the queue whose clone holds the current folder (``cwd``; a subfolder
    of it too); else the ``queue`` setting (``KWS_QUEUE`` or ``queue`` in the user config
    file); else the per-user sample queue (made on first use,
    :func:`ensure_default_queue`; with ``make`` False its path, made or not), marked
    ``sample``.

    Raises:
        QueueError: ``path`` or the setting names a folder that does not exist (the message
            names the nearest names), or the sample queue cannot be made.
    """
    if path is not None:
        p = Path(path).expanduser()
        if not p.exists():
            raise QueueError(f"--queue {missing_folder(p)}")
        return QueueChoice(p, "--queue")
    here = enclosing_queue(cwd)
    if here is not None:
        return QueueChoice(here, "the clone you are in")
    cfg = settings.current()
    if cfg.queue is not None:
        p = cfg.queue
        if not p.exists():
            raise QueueError(f"the queue setting ({cfg.sources.get('queue', 'default')}): {missing_folder(p)}")
        return QueueChoice(p, f"setting queue ({cfg.sources.get('queue', 'default')})")
    return QueueChoice(ensure_default_queue() if make else default_queue_path(), "the per-user sample queue",
                       sample=True)


def resolve_queue(path: Path | str | None) -> git.Repo:
    """The queue for a ``--queue`` option, opened: :func:`find_queue`'s choice (``path``,
    else the clone you are in, else the ``queue`` setting, else the first-run queue).

    Raises:
        QueueError: as :func:`find_queue` and :func:`open_queue`.
    """
    return open_queue(find_queue(path).root)
