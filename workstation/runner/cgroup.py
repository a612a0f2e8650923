"""A memory cap for the sandbox that also holds for CUDA: a cgroup, where the machine allows one.

``RLIMIT_AS`` caps address space, which CUDA reserves in huge amounts (a CUDA process maps
tens of GiB it never touches), so kws sets it on the CPU only. A memory cgroup caps what
is resident, CUDA or not. :func:`create` makes one cgroup per runner, next to kws's own:

- cgroup v1 (a ``memory`` hierarchy, as on this project's machines): a folder
  ``kws-<pid>-<n>`` under kws's own memory cgroup with ``memory.limit_in_bytes`` (and
  ``memory.memsw.limit_in_bytes`` where swap accounting is on) and, where a ``pids``
  hierarchy is writable too, ``pids.max``;
- cgroup v2: a folder under kws's own cgroup when it is writable and already delegates the
  ``memory`` controller to its children (``cgroup.subtree_control``), with ``memory.max``
  (and ``pids.max``).

The fork server's sandbox is started in it (a ``/bin/sh`` wrapper writes its own pid to
``cgroup.procs`` and ``exec``s bwrap, so every descendant is inside from its first
instruction). Job processes set ``oom_score_adj`` to 1000, so when the cap is reached the
kernel's OOM killer ends a job, not the fork server. :meth:`MemoryCgroup.oom_kills` counts
the kills, so a job that died of ``SIGKILL`` is reported as "killed at the memory cap".

Where neither works (no write access, v2 without delegation), :func:`create` returns
``None`` with the reason; kws then runs without a memory cap on the GPU (the CPU keeps
``RLIMIT_AS``) and says so in the device label.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from pathlib import Path

from workstation import settings

_seq = itertools.count()


def memory_limit_bytes() -> int:
    """The cap (bytes): the ``memory_limit`` setting (``KWS_MEMORY_LIMIT``: bytes, or with a
    K/M/G/T suffix), default 75% of the machine's memory (``MemTotal``).

    Raises:
        Problem: ``KWS_MEMORY_LIMIT`` (or the config file's ``memory_limit``) is not a size.
    """
    limit = settings.current().memory_limit
    if limit is not None:
        return limit
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024 * 3 // 4
    except OSError:
        pass
    return 16 << 30


def _mounts() -> list[tuple[str, str, str]]:
    """(mount point, fstype, super options) of every cgroup file system."""
    out = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                parts, rparts = left.split(), right.split()
                if len(rparts) >= 3 and rparts[0] in ("cgroup", "cgroup2"):
                    out.append((parts[4], rparts[0], rparts[2]))
    except OSError:
        pass
    return out


def _own_paths() -> dict[str, str]:
    """controller (``"memory"``, ``"pids"``, ``""`` for v2) -> this process's cgroup path."""
    out = {}
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, ctrls, path = line.rstrip("\n").split(":", 2)
                for c in ctrls.split(",") if ctrls else [""]:
                    out[c] = path
    except OSError:
        pass
    return out


@dataclass
class MemoryCgroup:
    """A cgroup made for one runner: ``procs`` are the ``cgroup.procs`` files the sandbox
    joins, ``limit`` the memory cap (bytes), ``kind`` ``"v1"`` or ``"v2"``."""

    kind: str
    folders: list[Path]
    procs: list[Path]
    limit: int
    events: Path | None = None
    _oom_at_start: int = field(default=0)

    def describe(self) -> str:
        """``"memory cap 12 GiB (cgroup v1)"``."""
        return f"memory cap {self.limit / 2**30:.0f} GiB (cgroup {self.kind})"

    def oom_kills(self) -> int:
        """OOM kills in the cgroup so far (``oom_kill`` of ``memory.oom_control`` (v1) or
        ``memory.events`` (v2)); 0 when the kernel does not count them."""
        if self.events is None:
            return 0
        try:
            for line in self.events.read_text().splitlines():
                k, _, v = line.partition(" ")
                if k == "oom_kill":
                    return int(v)
        except (OSError, ValueError):
            pass
        return 0

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` started inside the cgroup (``/bin/sh`` joins, then ``exec``s it)."""
        script = 'for f in "$@"; do case "$f" in --) shift; break;; esac; echo $$ > "$f" || exit 97; shift; done; exec "$@"'
        return ["/bin/sh", "-c", script, "kws-cgroup", *map(str, self.procs), "--", *argv]

    def remove(self) -> None:
        """Remove the folders (they must be empty of processes: after the sandbox ended)."""
        for d in reversed(self.folders):
            try:
                d.rmdir()
            except OSError:
                pass


def create(limit: int | None = None) -> tuple[MemoryCgroup | None, str]:
    """A memory cgroup for one runner, or ``(None, why not)`` (module doc)."""
    limit = limit if limit is not None else memory_limit_bytes()
    mounts = _mounts()
    own = _own_paths()
    name = f"kws-{os.getpid()}-{next(_seq)}"
    v1 = {opt: mp for mp, fs, opts in mounts if fs == "cgroup" for opt in opts.split(",")}
    if "memory" in v1 and "memory" in own:
        return _create_v1(limit, name, v1, own)
    v2 = [mp for mp, fs, _ in mounts if fs == "cgroup2"]
    if v2 and "" in own:
        return _create_v2(limit, name, Path(v2[0]) / own[""].lstrip("/"))
    return None, "no memory cgroup controller is mounted"


def _create_v1(limit: int, name: str, v1: dict[str, str], own: dict[str, str]) -> tuple[MemoryCgroup | None, str]:
    """Folder ``name`` under kws's own cgroup of the v1 ``memory`` hierarchy (and of the
    ``pids`` one where that is writable too); ``v1``: controller -> mount point, ``own``:
    controller -> kws's cgroup path."""
    base = Path(v1["memory"]) / own["memory"].lstrip("/")
    d = base / name
    try:
        d.mkdir()
    except OSError as e:
        return None, f"cannot create a memory cgroup under {base}: {e.strerror}"
    folders, procs = [d], [d / "cgroup.procs"]
    try:
        (d / "memory.limit_in_bytes").write_text(str(limit))
        if (d / "memory.memsw.limit_in_bytes").exists():
            try:
                (d / "memory.memsw.limit_in_bytes").write_text(str(limit))
            except OSError:
                pass
    except OSError as e:
        d.rmdir()
        return None, f"cannot set {d}/memory.limit_in_bytes: {e.strerror}"
    if "pids" in v1 and "pids" in own:
        pd = Path(v1["pids"]) / own["pids"].lstrip("/") / name
        try:
            pd.mkdir()
            (pd / "pids.max").write_text(str(pids_limit()))
            folders.append(pd)
            procs.append(pd / "cgroup.procs")
        except OSError:
            try:
                pd.rmdir()
            except OSError:
                pass
    return MemoryCgroup("v1", folders, procs, limit, d / "memory.oom_control"), ""


def _create_v2(limit: int, name: str, base: Path) -> tuple[MemoryCgroup | None, str]:
    """Folder ``name`` under kws's own v2 cgroup ``base``, when it delegates the memory
    controller to its children."""
    try:
        delegated = "memory" in (base / "cgroup.subtree_control").read_text().split()
    except OSError:
        delegated = False
    if not delegated:
        return None, f"cgroup v2 at {base} does not delegate the memory controller to kws"
    d = base / name
    try:
        d.mkdir()
        (d / "memory.max").write_text(str(limit))
        if (d / "pids.max").exists():
            (d / "pids.max").write_text(str(pids_limit()))
    except OSError as e:
        try:
            d.rmdir()
        except OSError:
            pass
        return None, f"cannot create a memory cgroup under {base}: {e.strerror}"
    return MemoryCgroup("v2", [d], [d / "cgroup.procs"], limit, d / "memory.events"), ""


def pids_limit() -> int:
    """Processes (threads included) the sandbox may have: the ``pids_limit`` setting
    (``KWS_PIDS_LIMIT``), default 4096."""
    return settings.current().pids_limit
