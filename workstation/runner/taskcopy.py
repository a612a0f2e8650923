"""Copying a task folder for a job, and its content digest, without following it anywhere.

A task folder comes from someone else: it may hold a symlink to ``~/.ssh/id_ed25519`` or to
``/dev/zero``, a FIFO that blocks a reader forever, or gigabytes. :func:`scan` walks it
once without following symlinks and refuses (:class:`TaskFolderError`, naming the entry)
device nodes, FIFOs, sockets, symlinks whose target lies outside the folder (or does not
exist), more than :data:`MAX_FILES` entries and more than :func:`task_max_bytes` of file
content; ``__pycache__`` and ``.git`` are skipped. :func:`copy` copies what :func:`scan`
accepted (a symlink inside the folder becomes a copy of its target's bytes) and
:func:`digest` hashes it; both refuse what :func:`scan` refuses, so a folder that changed
between the scan and the copy cannot sneak one in.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from workstation import settings

#: most files and folders in a task folder.
MAX_FILES = 20_000
SKIP = ("__pycache__", ".git")


def task_max_bytes() -> int:
    """Most bytes of file content in a task folder: the ``task_max_bytes`` setting
    (``KWS_TASK_MAX_BYTES``), default 256 MiB."""
    return settings.current().task_max_bytes


class TaskFolderError(ValueError):
    """The task folder holds something kws will not copy: ``path`` (relative to the folder)
    and the ``problem``."""

    def __init__(self, folder: Path, path: str, problem: str):
        self.folder, self.path, self.problem = folder, path, problem
        super().__init__(f"{folder / path}: {problem}")


@dataclass(frozen=True)
class Entry:
    """One entry to copy: ``rel`` path, ``kind`` (``"dir"`` or ``"file"``), ``source``
    (the file whose bytes to copy: itself, or the target of a symlink inside the folder)."""

    rel: str
    kind: str
    source: Path


def scan(folder: Path, *, max_bytes: int | None = None, max_files: int = MAX_FILES) -> list[Entry]:
    """The entries of ``folder`` in walk order (module doc).

    Raises:
        TaskFolderError: an entry kws refuses, or the folder is too large.
    """
    limit = task_max_bytes() if max_bytes is None else max_bytes
    root = folder.resolve()
    out: list[Entry] = []
    total = 0

    def walk(d: Path, rel: str) -> None:
        nonlocal total
        try:
            items = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError as e:
            raise TaskFolderError(folder, rel or ".", f"cannot list: {e.strerror}") from None
        for it in items:
            if it.name in SKIP:
                continue
            r = f"{rel}/{it.name}" if rel else it.name
            if len(out) >= max_files:
                raise TaskFolderError(folder, r, f"the task folder has more than {max_files} entries")
            st, source = _resolved(it, folder, root, r)
            if stat.S_ISDIR(st.st_mode):
                out.append(Entry(r, "dir", source))
                walk(source, r)
            elif stat.S_ISREG(st.st_mode):
                total += st.st_size
                if total > limit:
                    raise TaskFolderError(folder, r, f"the task folder holds more than {limit // 2**20} MiB")
                out.append(Entry(r, "file", source))
            else:
                raise TaskFolderError(folder, r, f"{_kind_of(st.st_mode)} (kws copies regular files and folders only)")

    walk(root, "")
    return out


def _resolved(it: os.DirEntry[str], folder: Path, root: Path, rel: str) -> tuple[os.stat_result, Path]:
    """The ``stat`` of entry ``it`` (``rel`` in ``folder``, resolved as ``root``) and the
    path whose bytes to copy: the entry itself, or the target of a symlink to a file inside
    the folder.

    Raises:
        TaskFolderError: a symlink whose target does not exist, lies outside the folder, or
            is a folder.
    """
    st = it.stat(follow_symlinks=False)
    if not stat.S_ISLNK(st.st_mode):
        return st, Path(it.path)
    try:
        target = Path(os.path.realpath(it.path, strict=True))
    except (OSError, RuntimeError):
        raise TaskFolderError(folder, rel, f"symlink to {os.readlink(it.path)!r}, which does not exist") from None
    if not target.is_relative_to(root):
        raise TaskFolderError(folder, rel, f"symlink to {os.readlink(it.path)!r}, outside the task folder")
    st = target.stat()
    if stat.S_ISDIR(st.st_mode):
        raise TaskFolderError(folder, rel, "symlink to a folder (copy it instead)")
    return st, target


def _kind_of(mode: int) -> str:
    """What an entry kws does not copy is, in words."""
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device node"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    return "a socket" if stat.S_ISSOCK(mode) else "not a regular file"


def _open_regular(p: Path, rel: str, folder: Path) -> int:
    fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise TaskFolderError(folder, rel, "changed into something that is not a regular file")
    return fd


def copy(folder: Path, dest: Path, entries: list[Entry] | None = None) -> int:
    """Copy ``folder`` to ``dest`` (created); returns the bytes copied.

    Raises:
        TaskFolderError: as :func:`scan`; or an entry changed kind since the scan.
    """
    entries = scan(folder) if entries is None else entries
    dest.mkdir(parents=True)
    limit = task_max_bytes()
    n = 0
    for e in entries:
        target = dest / e.rel
        if e.kind == "dir":
            target.mkdir()
            continue
        fd = _open_regular(e.source, e.rel, folder)
        with os.fdopen(fd, "rb") as src, open(target, "wb") as dst:
            n += _copy_bounded(src, dst, limit - n, limit, folder, e.rel)
        shutil.copymode(e.source, target)
    return n


def _copy_bounded(src, dst, room: int, limit: int, folder: Path, rel: str) -> int:
    n = 0
    while True:
        chunk = src.read(1 << 20)
        if not chunk:
            return n
        n += len(chunk)
        if n > room:
            raise TaskFolderError(folder, rel, f"the task folder holds more than {limit // 2**20} MiB")
        dst.write(chunk)


def digest(folder: Path) -> str:
    """sha256 over every file's relative path and bytes (the entries of :func:`scan`).

    Raises:
        TaskFolderError: as :func:`scan`.
    """
    h = hashlib.sha256()
    for e in scan(folder):
        if e.kind != "file":
            continue
        h.update(e.rel.encode())
        fd = _open_regular(e.source, e.rel, folder)
        with os.fdopen(fd, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()
