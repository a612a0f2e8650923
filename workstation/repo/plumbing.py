"""Git plumbing for kws's own ref moves: commits built in a temporary index, a branch moved
by compare-and-swap, and the user's index and work tree brought along path by path.

kws never runs a porcelain command that leaves state in the user's work tree (no
``git rebase``, ``git merge`` or ``git commit`` there). A record commit and a sync both end
in :func:`move_branch`:

1. the paths that differ between the old and the new commit are checked in the index and
   the work tree: each must hold the old version (or, for a new path, nothing, or already
   the new content), else :class:`WorkTreeConflict` names them and nothing moves;
2. a **journal** (``.git/kws/journal.json``: branch, old, new) is written;
3. ``git update-ref refs/heads/<branch> <new> <old>``: the commit point. It fails, moving
   nothing, when the branch moved meanwhile (:class:`RefMoved`);
4. the changed paths are written to the index (``update-index --index-info``) and the work
   tree (``checkout-index -u``), and nothing else is touched: the user's other edits and
   staged changes stay;
5. the journal is removed.

Killed anywhere, the clone is either before 3 (nothing changed: the journal is dropped) or
after it (the branch holds the new commit; :func:`finish_journal`, run by the next kws
command under its lock, redoes 4, accepting each path in its old or its new state).

Every command runs through :func:`workstation.repo.gitqueue.run_git` (re-exported here),
with the repository's hardened environment (:func:`workstation.repo.gitqueue.harden`).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import git

from workstation.repo.gitqueue import QueueError, git_result, run_git, work_tree

__all__ = [
    "EMPTY_TREE",
    "Change",
    "RefMoved",
    "StorageError",
    "WorkTreeConflict",
    "commit_tree",
    "diff_trees",
    "finish_journal",
    "git_result",
    "is_ancestor",
    "kws_dir",
    "move_branch",
    "read_journal",
    "rev",
    "run_git",
    "storage_advice",
    "storage_fault",
    "storage_fault_in",
    "temp_index",
    "tree_of",
]

#: git's empty tree (the parent tree of a root commit).
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
_ZERO = "0" * 40


class RefMoved(QueueError):
    """The branch moved between reading it and updating it (another git command
    committed meanwhile); nothing was changed."""


class StorageError(QueueError):
    """The clone's storage refused a write: ``fault`` is ``"read-only"`` (a read-only file
    system or mount, or no permission to write) or ``"full"`` (no space left, or the disk
    quota exceeded). The message says what was kept and what to do."""

    def __init__(self, fault: str, message: str):
        self.fault = fault
        super().__init__(message)


#: errno values of a write the storage refused, by fault.
_FAULT_ERRNOS = {
    errno.EROFS: "read-only", errno.EACCES: "read-only", errno.EPERM: "read-only",
    errno.ENOSPC: "full", errno.EDQUOT: "full",
}
#: git's words for the same faults (its stderr; LC_ALL=C).
_FAULT_WORDS = (
    ("No space left on device", "full"), ("Out of diskspace", "full"), ("Disk quota exceeded", "full"),
    ("Read-only file system", "read-only"), ("Permission denied", "read-only"),
    ("insufficient permission for adding an object", "read-only"),
)


def storage_fault(exc: BaseException) -> str | None:
    """``"read-only"`` or ``"full"`` when ``exc`` (an ``OSError``, or a
    ``git.GitCommandError`` whose stderr says so) is the storage refusing a write; None for
    anything else."""
    if isinstance(exc, OSError) and exc.errno in _FAULT_ERRNOS:
        return _FAULT_ERRNOS[exc.errno]
    if isinstance(exc, git.GitCommandError):
        err = exc.stderr if isinstance(exc.stderr, str) else bytes(exc.stderr or b"").decode("utf-8", "replace")
        return storage_fault_in(err)
    return None


def storage_fault_in(text: str) -> str | None:
    """:func:`storage_fault` of git's stderr ``text``."""
    for words, fault in _FAULT_WORDS:
        if words in text:
            return fault
    return None


def storage_advice(fault: str, where: str | os.PathLike[str]) -> str:
    """What a reviewer does about ``fault`` (:func:`storage_fault`) at ``where``."""
    if fault == "full":
        return f"the disk holding {where} is full (df -h {where}); free some space and run the command again"
    return (f"{where} cannot be written here (a read-only file system or mount, or no permission); "
            "run the command in a writable clone, or remount it read-write")


class WorkTreeConflict(QueueError):
    """Paths that a ref move would change hold local edits; ``paths`` lists them. Nothing
    was changed."""

    def __init__(self, message: str, paths: Sequence[str]):
        self.paths = tuple(paths)
        super().__init__(message)


def kws_dir(repo: git.Repo) -> Path:
    """kws's own folder in the repository's git dir (``.git/kws``): lock, journal, log."""
    d = Path(repo.git_dir) / "kws"
    with contextlib.suppress(OSError):  # a read-only clone: a writer fails at its own write
        d.mkdir(exist_ok=True)
    return d


def rev(repo: git.Repo, ref: str) -> str | None:
    """The commit id ``ref`` names, or None when it does not exist."""
    out = run_git(repo, "rev-parse", "-q", "--verify", f"{ref}^{{commit}}", check=False)
    return out.decode().strip() or None


def tree_of(repo: git.Repo, commit: str | None) -> str:
    """The tree id of ``commit`` (:data:`EMPTY_TREE` for None)."""
    if commit is None:
        return EMPTY_TREE
    return run_git(repo, "rev-parse", f"{commit}^{{tree}}").decode().strip()


def is_ancestor(repo: git.Repo, a: str, b: str) -> bool:
    """Whether commit ``a`` is an ancestor of (or equal to) commit ``b``."""
    return git_result(repo, "merge-base", "--is-ancestor", a, b).returncode == 0


@dataclass(frozen=True)
class Change:
    """One path that differs between two trees: modes as octal strings, blobs as ids;
    ``old_blob`` / ``new_blob`` None where that side has no such path."""

    path: str
    old_mode: str
    old_blob: str | None
    new_mode: str
    new_blob: str | None


def diff_trees(repo: git.Repo, a: str | None, b: str) -> list[Change]:
    """Every path that differs between trees (or commits) ``a`` (None: empty) and ``b``,
    recursively, without rename detection."""
    out = run_git(repo, "diff-tree", "-r", "-z", "--raw", "--no-renames", "--no-commit-id",
                  "--no-ext-diff", "--no-textconv", a or EMPTY_TREE, b)
    parts = out.split(b"\0")
    changes = []
    i = 0
    while i + 1 < len(parts):
        meta, path = parts[i].decode(), parts[i + 1].decode("utf-8", "surrogateescape")
        i += 2
        if not meta.startswith(":"):
            continue
        om, nm, ob, nb, _status = meta[1:].split(" ")
        changes.append(Change(path, om, None if ob == _ZERO else ob, nm, None if nb == _ZERO else nb))
    return changes


@contextlib.contextmanager
def temp_index(repo: git.Repo, tree: str | None = None) -> Iterator[dict[str, str]]:
    """A temporary index file in ``.git/kws`` holding ``tree`` (empty for None); yields
    the environment that points git at it. The file is removed afterwards (a leftover from
    a killed process is removed by the next kws command's recovery)."""
    path = kws_dir(repo) / f"index-{os.getpid()}-{secrets.token_hex(4)}"
    env = {"GIT_INDEX_FILE": str(path)}
    try:
        run_git(repo, "read-tree", tree, env=env) if tree else run_git(repo, "read-tree", "--empty", env=env)
        yield env
    finally:
        path.unlink(missing_ok=True)


def commit_tree(
    repo: git.Repo,
    tree: str,
    parents: Sequence[str],
    message: str,
    env: Mapping[str, str],
    sign: bool = False,
) -> str:
    """``git commit-tree``: a commit of ``tree`` with ``parents`` and ``message``; ``env``
    names author and committer (``GIT_AUTHOR_NAME`` ...). ``sign``: signed (``-S``) with
    the user's configured key (``gpg.format``, ``user.signingkey``; docs/records.md,
    "Signed records")."""
    args = ["commit-tree", *(["-S"] if sign else []), tree]
    for p in parents:
        args += ["-p", p]
    return run_git(repo, *args, input=message.encode("utf-8"), env=env).decode().strip()


# --------------------------------------------------------------------------------------------
# the journal


def _journal_path(repo: git.Repo) -> Path:
    return kws_dir(repo) / "journal.json"


def read_journal(repo: git.Repo) -> dict[str, str] | None:
    """The journal of an unfinished ref move, or None."""
    try:
        data = json.loads(_journal_path(repo).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not all(isinstance(data.get(k), str) for k in ("branch", "new")):
        return None
    return data


def _write_journal(repo: git.Repo, data: dict[str, str | None]) -> None:
    path = _journal_path(repo)
    tmp = path.with_suffix(f".tmp-{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _clear_journal(repo: git.Repo) -> None:
    _journal_path(repo).unlink(missing_ok=True)


# --------------------------------------------------------------------------------------------
# index and work tree


def _index_entries(repo: git.Repo) -> tuple[dict[str, tuple[str, str]], set[str]]:
    """``({path: (mode, blob)} of stage-0 entries, paths with unmerged stages)``."""
    out = run_git(repo, "ls-files", "-s", "-z")
    entries: dict[str, tuple[str, str]] = {}
    unmerged: set[str] = set()
    for item in out.split(b"\0"):
        if not item:
            continue
        meta, _, path_b = item.partition(b"\t")
        mode, blob, stage = meta.decode().split(" ")
        path = path_b.decode("utf-8", "surrogateescape")
        if stage != "0":
            unmerged.add(path)
        else:
            entries[path] = (mode, blob)
    return entries, unmerged


def _worktree_blobs(repo: git.Repo, paths: Sequence[str]) -> dict[str, str | None]:
    """The blob id each path's work-tree file would have (None: no file there)."""
    root = work_tree(repo)
    present = [p for p in paths if os.path.lexists(root / p) and not (root / p).is_dir()]
    out: dict[str, str | None] = {p: None for p in paths}
    if present:
        ids = run_git(repo, "hash-object", "--stdin-paths", input="\n".join(present).encode() + b"\n").decode().split()
        out.update(zip(present, ids, strict=True))
    return out


def _states(repo: git.Repo, changes: Sequence[Change], lenient: bool) -> list[str]:
    """The changed paths whose index entry or work-tree file is in neither accepted state
    (strict: the old one, or for a path the change adds, nothing or the new content;
    lenient: the old or the new one)."""
    if not changes:
        return []
    index, unmerged = _index_entries(repo)
    modified = {p.decode("utf-8", "surrogateescape")
                for p in run_git(repo, "diff-files", "-z", "--name-only").split(b"\0") if p}
    bad: list[str] = []
    to_hash: list[Change] = []
    for ch in changes:
        if ch.path in unmerged:
            bad.append(ch.path)
            continue
        idx = index.get(ch.path)
        old = (ch.old_mode, ch.old_blob) if ch.old_blob else None
        new = (ch.new_mode, ch.new_blob) if ch.new_blob else None
        ok_index = idx == old or (lenient and idx == new)
        if not ok_index:
            bad.append(ch.path)
            continue
        if idx is not None and ch.path not in modified:
            continue  # the work tree holds what the index holds, an accepted state
        to_hash.append(ch)
    blobs = _worktree_blobs(repo, [c.path for c in to_hash])
    for ch in to_hash:
        have = blobs[ch.path]
        accepted = {ch.old_blob}
        if ch.old_blob is None or lenient:
            accepted.add(ch.new_blob)
        if have not in accepted:
            bad.append(ch.path)
    return bad


def _apply(repo: git.Repo, changes: Sequence[Change]) -> None:
    """Write ``changes`` (their new sides) to the index and the work tree."""
    if not changes:
        return
    root = work_tree(repo)
    info = b"".join(
        (f"{c.new_mode} {c.new_blob}\t".encode() if c.new_blob else f"0 {_ZERO}\t".encode())
        + c.path.encode("utf-8", "surrogateescape") + b"\0"
        for c in changes
    )
    run_git(repo, "update-index", "-z", "--index-info", input=info)
    for c in changes:
        if c.new_blob is None:
            p = root / c.path
            if os.path.lexists(p) and not p.is_dir():
                p.unlink()
            parent = p.parent
            while parent != root:
                try:
                    parent.rmdir()
                except OSError:
                    break
                parent = parent.parent
    written = [c.path for c in changes if c.new_blob and c.new_mode != "160000"]
    if written:
        run_git(repo, "checkout-index", "-f", "-u", "-z", "--stdin",
                input=b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in written))


def move_branch(repo: git.Repo, branch: str, old: str | None, new: str, message: str) -> None:
    """Move ``refs/heads/<branch>`` from ``old`` (None: unborn) to ``new`` and bring the
    index and work tree along for the paths that differ (see the module docstring).

    Raises:
        WorkTreeConflict: changed paths hold local edits (nothing was changed).
        RefMoved: the branch is no longer at ``old`` (nothing was changed).
    """
    changes = diff_trees(repo, tree_of(repo, old) if old else None, tree_of(repo, new))
    bad = _states(repo, changes, lenient=False)
    if bad:
        shown = "\n  ".join(bad[:20]) + ("\n  ..." if len(bad) > 20 else "")
        raise WorkTreeConflict(
            f"these files have uncommitted changes that the update would overwrite:\n  {shown}\n"
            "commit, stash or discard them, then run the command again", bad)
    _write_journal(repo, {"branch": branch, "old": old, "new": new})
    try:
        run_git(repo, "update-ref", "-m", message, f"refs/heads/{branch}", new, old or _ZERO)
    except git.GitCommandError as exc:
        _clear_journal(repo)
        if storage_fault(exc) is not None:
            raise  # the disk refused: not a race, retrying cannot help
        raise RefMoved(f"refs/heads/{branch} moved meanwhile: {_err(exc)}") from exc
    _apply(repo, changes)
    _clear_journal(repo)


def _err(exc: git.GitCommandError) -> str:
    err = exc.stderr
    if isinstance(err, bytes):
        err = err.decode("utf-8", "replace")
    return " ".join(str(err).replace("stderr:", "").split()).strip("'\" ")


def current_branch_ref(repo: git.Repo) -> str | None:
    """The ref HEAD points to (``refs/heads/main``), or None on a detached HEAD."""
    out = run_git(repo, "symbolic-ref", "-q", "HEAD", check=False).decode().strip()
    return out or None


def finish_journal(repo: git.Repo) -> str | None:
    """Finish (or drop) an interrupted :func:`move_branch`; returns what was done (for
    the recovery log), or None when there was no journal.

    Raises:
        QueueError: the branch holds the new commit but some changed path was edited since,
            so kws cannot bring it along without losing that edit (the message names them).
    """
    j = read_journal(repo)
    if j is None:
        return None
    branch, old, new = j["branch"], j.get("old"), j["new"]
    head_ref = current_branch_ref(repo)
    at = rev(repo, f"refs/heads/{branch}")
    if head_ref != f"refs/heads/{branch}" or at != new:
        _clear_journal(repo)
        if at == old:
            return f"an interrupted kws command had not moved {branch} yet; nothing to finish"
        return f"dropped the journal of an interrupted kws update of {branch} (the branch has moved on since)"
    changes = diff_trees(repo, tree_of(repo, old) if old else None, tree_of(repo, new))
    bad = _states(repo, changes, lenient=True)
    if bad:
        raise QueueError(
            f"an interrupted kws command moved {branch} to {new[:12]} but had not finished "
            "updating the work tree, and these files were changed since:\n  " + "\n  ".join(bad[:20])
            + f"\nkws will not overwrite them. Keep a copy of them, then run: git -C {repo.working_tree_dir} "
            f"checkout {new[:12]} -- <those files>  (or remove {_journal_path(repo)} to keep yours)")
    _apply(repo, changes)
    _clear_journal(repo)
    return (f"finished an interrupted kws update of {branch} ({(old or 'nothing')[:12]} -> {new[:12]}): "
            f"{len(changes)} path(s) brought into the index and work tree")
