"""The seed of a check's randomised choices: one integer per task version and kws version.

Checks that derive cases of their own (``edge-shapes``: new shapes and the inputs of
those shapes) must pick the same cases on every machine and every run of the same task
version, or a verdict could not be re-checked exactly (``kws recheck``). So every
randomised choice of a check is seeded from :func:`derivation_seed`: a hash of

- the task version: the git tree id of ``tasks/<id>`` in its queue's ``HEAD`` when the
  folder is committed and clean; otherwise the folder's content hash, computed the way
  git computes a tree id (:func:`folder_tree_id`: blobs ``"blob <size>\\0<bytes>"``,
  trees of ``<mode> <name>\\0<20-byte id>`` entries in git's order; ``__pycache__``,
  ``*.pyc`` and ``.git`` left out, as the queue's ``.gitignore`` leaves them out), so an
  unchanged task extracted from its tree (``kws recheck`` does this) hashes to its tree id
  and gets the same seed;
- the kws version (``workstation.__version__``): a new kws may explore other cases.

Source of the tree format: git's object model ("Git Internals - Git Objects", Pro Git,
2nd ed., ch. 10.2) and ``git hash-object`` / ``git write-tree``.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Derivation", "derivation_for", "derivation_seed", "folder_tree_id", "queue_tree"]

_SKIP_DIRS = {"__pycache__", ".git"}


def _blob_id(data: bytes) -> bytes:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).digest()  # git's object id


def _tree_id(folder: Path) -> bytes | None:
    """The raw git tree id of ``folder`` (None for a folder with no file: git has no
    empty trees)."""
    entries: list[tuple[bytes, bytes, bytes]] = []  # (sort key, mode name, id)
    for e in os.scandir(folder):
        name = e.name.encode("utf-8", "surrogateescape")
        if e.is_symlink():
            target = os.readlink(e.path).encode("utf-8", "surrogateescape")
            entries.append((name, b"120000 " + name, _blob_id(target)))
        elif e.is_dir():
            if e.name in _SKIP_DIRS:
                continue
            sub = _tree_id(Path(e.path))
            if sub is not None:
                entries.append((name + b"/", b"40000 " + name, sub))  # git sorts a tree as "name/"
        elif e.is_file():
            if e.name.endswith(".pyc"):
                continue
            mode = b"100755" if e.stat().st_mode & stat.S_IXUSR else b"100644"
            entries.append((name, mode + b" " + name, _blob_id(Path(e.path).read_bytes())))
    if not entries:
        return None
    body = b"".join(mode_name + b"\0" + oid for _key, mode_name, oid in sorted(entries))
    return hashlib.sha1(b"tree %d\0" % len(body) + body).digest()


def folder_tree_id(folder: Path | str) -> str:
    """The git tree id (40 hex digits) the files of ``folder`` would have if committed as
    they are (``__pycache__``, ``*.pyc`` and ``.git`` left out)."""
    raw = _tree_id(Path(folder))
    return raw.hex() if raw is not None else hashlib.sha1(b"tree 0\0").hexdigest()


def derivation_seed(version: str, kws_version: str) -> int:
    """A non-negative 31-bit seed from a task version and a kws version."""
    h = hashlib.sha256(f"kws-derivation\0{version}\0{kws_version}".encode()).digest()
    return int.from_bytes(h[:4], "big") & 0x7FFFFFFF


@dataclass(frozen=True)
class Derivation:
    """What a run's derived choices are seeded from: ``seed``, the task ``version`` (a
    tree id), where that came from (``source``: ``"git tree"`` or ``"content hash"``)
    and the ``kws`` version."""

    seed: int
    version: str
    source: str
    kws: str

    def as_dict(self) -> dict[str, object]:
        return {"seed": self.seed, "task_version": self.version, "from": self.source, "kws": self.kws}


def queue_tree(task_dir: Path | str, task_id: str) -> tuple[str | None, bool]:
    """The git tree id of the task folder in its queue's HEAD (None outside a queue
    repository, or when it is not committed) and whether the work tree differs from it."""
    import git

    from workstation.repo.gitqueue import QueueError, open_queue, task_version
    from workstation.task.queue import find_queue_root

    folder = Path(task_dir)
    root = find_queue_root(folder)
    if root is None or folder.resolve().parent != (root / "tasks").resolve():
        return None, False
    try:
        repo = open_queue(root)
        try:
            v = task_version(repo, task_id)
        finally:
            repo.close()
    except (QueueError, git.GitError):
        return None, False
    return v.tree, bool(v.dirty)


def derivation_for(task_dir: Path | str, tree: str | None = None, task_id: str | None = None) -> Derivation:
    """The :class:`Derivation` of the task folder ``task_dir``: its git tree id (``tree``,
    or looked up with ``task_id`` in its queue) when the folder is committed and clean,
    else the folder's content hash."""
    import workstation

    kws = workstation.__version__
    if tree is None and task_id is not None:
        t, dirty = queue_tree(task_dir, task_id)
        tree = t if not dirty else None
    if tree:
        return Derivation(derivation_seed(tree, kws), tree, "git tree", kws)
    v = folder_tree_id(task_dir)
    return Derivation(derivation_seed(v, kws), v, "content hash", kws)
