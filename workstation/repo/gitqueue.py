"""The queue as a git repository: opening it, task versions, identities, first-run setup.

A queue (task format v1, "A queue") is a git repository whose root holds ``tasks/``.
kws names the version of a task it judged by the **git tree id** of ``tasks/<id>`` in
``HEAD``: content-addressed, so it survives the rebases that ``kws sync`` does (commit ids
do not).

First run: with no ``--queue``, kws uses ``<data dir>/queue``, where the data dir is
``$KWS_DATA_DIR`` or ``platformdirs.user_data_dir("kws")``. If that folder does not exist,
kws copies the bundled ``sample_queue/`` there and makes it a git repository with one
initial commit, using the user's git identity or, where none is set, the fallback identity
``kws <kws@localhost>`` (:data:`FALLBACK_IDENTITY`). Later runs reuse it unchanged.

Records (verdicts, disputes, ...) are committed with the **reviewer's** identity
(:func:`reviewer_identity`), never the fallback: a verdict must say who made it.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import git
import platformdirs

import workstation

__all__ = [
    "FALLBACK_IDENTITY",
    "Identity",
    "IdentityError",
    "QueueError",
    "TaskVersion",
    "data_dir",
    "default_queue_path",
    "ensure_default_queue",
    "git_env",
    "head_branch",
    "open_queue",
    "resolve_queue",
    "reviewer_identity",
    "sample_queue_source",
    "state_dir",
    "task_version",
]

_TASK_ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


class QueueError(Exception):
    """The queue cannot be used as asked; the message says why and what to do."""


class IdentityError(QueueError):
    """No git identity (user.name / user.email) for the reviewer."""


@dataclass(frozen=True)
class Identity:
    """A git identity: ``name`` and ``email`` as git uses them for author and committer."""

    name: str
    email: str

    def __str__(self) -> str:
        return f"{self.name} <{self.email}>"


#: The identity of the first-run sample-queue commit when the user has none configured.
FALLBACK_IDENTITY = Identity("kws", "kws@localhost")


@dataclass(frozen=True)
class TaskVersion:
    """The version of ``tasks/<task>`` in a queue.

    ``tree`` is the git tree id (40 hex) of the folder in ``HEAD``, or None where HEAD has
    no such folder (no commit yet, or the task is not committed). ``dirty`` lists the
    paths under the folder (relative to the repository root) where the work tree differs
    from HEAD: modified, staged, deleted or untracked (ignored files excluded). A dirty task
    is not the version ``tree`` names.
    """

    task: str
    tree: str | None
    dirty: tuple[str, ...] = field(default_factory=tuple)

    @property
    def is_dirty(self) -> bool:
        return bool(self.dirty)


# --------------------------------------------------------------------------------------------
# folders


def data_dir() -> Path:
    """Per-user data folder: ``$KWS_DATA_DIR`` or ``platformdirs.user_data_dir("kws")``."""
    env = os.environ.get("KWS_DATA_DIR")
    return Path(env).expanduser() if env else Path(platformdirs.user_data_dir("kws"))


def state_dir() -> Path:
    """Per-user state folder (drafts): ``$KWS_STATE_DIR`` or ``user_state_dir("kws")``."""
    env = os.environ.get("KWS_STATE_DIR")
    return Path(env).expanduser() if env else Path(platformdirs.user_state_dir("kws"))


def default_queue_path() -> Path:
    """Where the first-run copy of the sample queue lives: ``<data dir>/queue``."""
    return data_dir() / "queue"


def sample_queue_source() -> Path:
    """The bundled sample queue to copy on first run.

    Looks for ``sample_queue/`` next to the ``workstation`` package (a source checkout or an
    editable install), then ``workstation/data/sample_queue`` (package data of a wheel).
    Raises :class:`QueueError` when neither exists.
    """
    pkg = Path(workstation.__file__).resolve().parent
    candidates = [pkg.parent / "sample_queue", pkg / "data" / "sample_queue"]
    for c in candidates:
        if (c / "tasks").is_dir():
            return c
    raise QueueError(
        "this kws install ships no sample queue (looked in "
        + ", ".join(str(c) for c in candidates)
        + "); open a queue with --queue PATH"
    )


# --------------------------------------------------------------------------------------------
# identities


def _git_config_get(key: str, repo: git.Repo | None) -> str | None:
    g = repo.git if repo is not None else git.Git()
    try:
        val = g.config("--get", key)
    except git.GitCommandError:
        return None
    return val.strip() or None


def _identity_or_none(repo: git.Repo | None) -> Identity | None:
    # git's own precedence for an author: GIT_AUTHOR_NAME / GIT_AUTHOR_EMAIL, then the
    # configuration (repository, then global, then system), then $EMAIL for the address.
    name = os.environ.get("GIT_AUTHOR_NAME") or _git_config_get("user.name", repo)
    email = (
        os.environ.get("GIT_AUTHOR_EMAIL")
        or _git_config_get("user.email", repo)
        or os.environ.get("EMAIL")
    )
    if name and email:
        return Identity(name.strip(), email.strip())
    return None


def reviewer_identity(repo: git.Repo | None = None) -> Identity:
    """The reviewer's git identity, as git would use it to author a commit in ``repo``.

    Reads ``GIT_AUTHOR_NAME``/``GIT_AUTHOR_EMAIL``, then ``git config user.name`` /
    ``user.email`` (repository, global, system), then ``$EMAIL``. git's guess from the
    host name is never used. Raises :class:`IdentityError` with the commands to set it.
    """
    ident = _identity_or_none(repo)
    if ident is None:
        where = f"git -C {repo.working_tree_dir} config" if repo is not None else "git config --global"
        raise IdentityError(
            "no git identity: kws records who made each verdict. Set it with\n"
            f"  {where} user.name 'Your Name'\n"
            f"  {where} user.email you@example.com\n"
            "(or the GIT_AUTHOR_NAME / GIT_AUTHOR_EMAIL environment variables)"
        )
    return ident


def git_env(identity: Identity) -> dict[str, str]:
    """Environment for a git command that commits or rebases as ``identity``.

    Sets author and committer to ``identity`` unless the caller's environment already
    names a committer (``GIT_COMMITTER_NAME``/``_EMAIL``), which git then keeps.
    """
    env = {"GIT_AUTHOR_NAME": identity.name, "GIT_AUTHOR_EMAIL": identity.email}
    if not os.environ.get("GIT_COMMITTER_NAME"):
        env["GIT_COMMITTER_NAME"] = identity.name
    if not os.environ.get("GIT_COMMITTER_EMAIL"):
        env["GIT_COMMITTER_EMAIL"] = identity.email
    return env


# --------------------------------------------------------------------------------------------
# opening a queue


def open_queue(path: Path | str) -> git.Repo:
    """Open the queue at ``path`` as a git repository.

    ``path`` must be the repository's root (a queue *is* a repository: its records live at
    ``verdicts/``, ``disputes/``, ... next to ``tasks/``). Raises :class:`QueueError` when
    the folder does not exist, is not a git repository, or is a subfolder of one.
    """
    p = Path(path).expanduser()
    if not p.is_dir():
        raise QueueError(f"{p}: no such folder")
    try:
        repo = git.Repo(p, search_parent_directories=True)
    except git.InvalidGitRepositoryError as exc:
        raise QueueError(
            f"{p}: not a git repository; a queue is one (create it with: git -C {p} init)"
        ) from exc
    except git.NoSuchPathError as exc:
        raise QueueError(f"{p}: no such folder") from exc
    if repo.bare or repo.working_tree_dir is None:
        raise QueueError(f"{p}: a bare repository has no work tree; clone it to review")
    root = Path(repo.working_tree_dir).resolve()
    if root != p.resolve():
        raise QueueError(
            f"{p}: inside the git repository {root} but not its root; a queue is a git "
            "repository of its own (task format v1)"
        )
    return repo


def resolve_queue(path: Path | str | None) -> git.Repo:
    """The queue for a ``--queue`` option: ``path`` if given, else the first-run queue."""
    if path is not None:
        return open_queue(path)
    return open_queue(ensure_default_queue())


def head_branch(repo: git.Repo) -> str | None:
    """The checked-out branch name, or None on a detached HEAD."""
    try:
        return repo.active_branch.name
    except TypeError:  # gitpython: "HEAD is a detached symbolic reference"
        return None


def task_version(repo: git.Repo, task_id: str) -> TaskVersion:
    """The git tree id of ``tasks/<task_id>`` in HEAD and whether the work tree differs."""
    if not _TASK_ID_RE.match(task_id):
        raise QueueError(f"{task_id!r} is not a task id ([a-z0-9][a-z0-9._-]*)")
    rel = f"tasks/{task_id}"
    tree: str | None = None
    try:
        head_tree = repo.head.commit.tree
    except ValueError:  # no commit yet
        head_tree = None
    if head_tree is not None:
        try:
            obj = head_tree / rel
        except KeyError:
            obj = None
        if obj is not None and obj.type == "tree":
            tree = obj.hexsha
    status = repo.git.status("--porcelain=v1", "-z", "--untracked-files=all", "--", rel)
    paths: set[str] = set()
    tokens = iter(status.split("\0"))
    for entry in tokens:
        if len(entry) < 4:
            continue
        paths.add(entry[3:])
        if "R" in entry[:2] or "C" in entry[:2]:
            paths.add(next(tokens, ""))  # -z: a rename's source path follows as its own field
    paths.discard("")
    return TaskVersion(task=task_id, tree=tree, dirty=tuple(sorted(paths)))


# --------------------------------------------------------------------------------------------
# first run


_QUEUE_GITIGNORE = "__pycache__/\n*.pyc\n"


def ensure_default_queue(
    source: Path | str | None = None, dest: Path | str | None = None
) -> Path:
    """Return the first-run queue, creating it from the sample queue if it does not exist.

    ``dest`` defaults to :func:`default_queue_path`, ``source`` to
    :func:`sample_queue_source`. The copy is built in a temporary sibling folder (without
    ``__pycache__``), made a git repository on branch ``main`` with one commit
    ("kws: sample queue"), then renamed into place, so a crash never leaves a half-made
    queue and two first runs at once end with one queue. The commit's author and
    committer are the user's git identity, else :data:`FALLBACK_IDENTITY`.

    An existing ``dest`` is reused as is; one that is not a git repository raises
    :class:`QueueError` (kws does not overwrite a folder it did not make).
    """
    dest = Path(dest) if dest is not None else default_queue_path()
    if dest.exists():
        open_queue(dest)  # raises QueueError when it is not a queue
        return dest
    src = Path(source) if source is not None else sample_queue_source()
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".queue-", dir=dest.parent))
    try:
        work = tmp / "queue"
        shutil.copytree(src, work, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        if not (work / ".gitignore").exists():
            (work / ".gitignore").write_text(_QUEUE_GITIGNORE, encoding="utf-8")
        repo = git.Repo.init(work, initial_branch="main")
        ident = _identity_or_none(repo) or FALLBACK_IDENTITY
        repo.git.add("--all", ".")
        repo.git.commit(
            "-q",
            "--no-verify",
            "-m",
            f"kws: sample queue\n\nCopied from {src} on first run.",
            env=git_env(ident),
        )
        repo.close()
        try:
            os.rename(work, dest)
        except OSError:
            if not dest.exists():
                raise
            # another kws made it first: use theirs
        open_queue(dest)
        return dest
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
