"""kws's own lock around its git work in a queue, and the recovery it runs when it takes it.

git's ``index.lock`` records no holder, so a ``kill -9`` at the wrong moment leaves one
behind and every later git command fails. kws therefore holds a lock of its own:
``fcntl.flock`` on ``.git/kws/lock``, which the kernel releases when the holding process
dies, however it dies. :func:`queue_lock` takes it (waiting for another kws up to a
timeout) and then, before any git work, :func:`recover`:

- **stale git locks** (``index.lock``, ``HEAD.lock``, ``ORIG_HEAD.lock``, ``config.lock``,
  ``packed-refs.lock``, ``shallow.lock``, ``*.lock`` under ``refs/``): a lock found while kws
  holds its own lock and **no git process runs in the repository** (no process named
  ``git*`` whose working directory is inside the work tree or the git dir, read from
  ``/proc``; other than kws's own children) is removed. Where a git process does run,
  kws waits for it (up to 10 s) and leaves the lock alone if it is still there: git then
  reports it in its own words. Without ``/proc`` (macOS), a lock older than 10 minutes
  counts as stale;
- an **interrupted ref move** (the journal of :mod:`workstation.repo.plumbing`) is finished;
- **temporary index files and work trees** kws left in ``.git/kws`` are removed (and
  ``git worktree prune`` run);
- a **rebase left by an older kws sync** (``.git/rebase-merge`` / ``rebase-apply`` whose
  commits are all kws record commits, trailer ``Kws-Record``) is aborted: the branch goes
  back to the commits it held, which the next sync sends. A rebase of anyone else's
  commits is left alone and reported.

Every recovery step is logged: to the ``workstation.repo`` logger (the CLI prints it on
stderr, prefixed ``kws: recovered:``) and appended to ``.git/kws/recovery.log``.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import git

from workstation.repo.gitqueue import QueueError, harden
from workstation.repo.plumbing import finish_journal, kws_dir, run_git

__all__ = ["QueueBusy", "git_processes", "queue_lock", "recover", "stale_git_locks"]

log = logging.getLogger("workstation.repo")

#: seconds :func:`queue_lock` waits for another kws by default.
LOCK_TIMEOUT = 120.0
#: seconds recovery waits for a running git process before leaving its lock alone.
GIT_WAIT = 10.0
#: age (s) after which a git lock counts as stale where running processes cannot be listed.
STALE_AGE = 600.0
_TOP_LOCKS = ("index.lock", "HEAD.lock", "ORIG_HEAD.lock", "FETCH_HEAD.lock", "config.lock",
              "packed-refs.lock", "shallow.lock")


class QueueBusy(QueueError):
    """Another kws process held the queue's lock for longer than the timeout."""


_held: dict[str, int] = {}
_held_guard = threading.RLock()
_thread_locks: dict[str, threading.RLock] = {}


def _note(repo: git.Repo, text: str) -> None:
    log.warning("recovered: %s", text)
    try:
        with open(kws_dir(repo) / "recovery.log", "a", encoding="utf-8") as fh:
            fh.write(f"{datetime.now(UTC).isoformat()} pid {os.getpid()}: {text}\n")
    except OSError:
        pass


@contextlib.contextmanager
def queue_lock(repo: git.Repo, *, timeout: float = LOCK_TIMEOUT, recovery: bool = True) -> Iterator[None]:
    """Hold kws's lock of ``repo`` (re-entrant within a process; threads queue on a
    per-repository lock), running :func:`recover` when first taken.

    Raises:
        QueueBusy: another kws held it for ``timeout`` seconds.
        QueueError: recovery found a state it must not repair alone (the message says
            what happened and what to do).
    """
    harden(repo)
    key = str(Path(repo.git_dir).resolve())
    with _held_guard:
        tlock = _thread_locks.setdefault(key, threading.RLock())
    if not tlock.acquire(timeout=timeout):
        raise QueueBusy(f"another kws thread has held {repo.working_tree_dir} for {timeout:.0f} s")
    try:
        with _held_guard:
            depth = _held.get(key, 0)
            _held[key] = depth + 1
        if depth:
            yield
            return
        path = kws_dir(repo) / "lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise QueueBusy(
                            f"another kws process has been working in {repo.working_tree_dir} for over "
                            f"{timeout:.0f} s (it holds {path}); wait for it to finish, or end it"
                        ) from None
                    time.sleep(0.02)
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            if recovery:
                recover(repo)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
    finally:
        with _held_guard:
            _held[key] -= 1
        tlock.release()


def _ppid(pid: str) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    if fields and fields[0] == "Z":
        return -1  # a zombie holds nothing
    try:
        return int(fields[1])
    except (IndexError, ValueError):
        return None


def git_processes(repo: git.Repo) -> list[int] | None:
    """Process ids of git processes working in ``repo`` (name ``git*``, working directory
    inside the work tree or the git dir), excluding this process's own children; None
    where processes cannot be listed (no ``/proc``)."""
    proc = Path("/proc")
    if not (proc / "self" / "cwd").exists():
        return None
    roots = {str(Path(repo.git_dir).resolve())}
    if repo.working_tree_dir:
        roots.add(str(Path(repo.working_tree_dir).resolve()))
    me = os.getpid()
    out = []
    for entry in os.listdir(proc):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            comm = (proc / entry / "comm").read_text().strip()
            if not comm.startswith("git"):
                continue
            cwd = os.readlink(proc / entry / "cwd")
        except OSError:
            continue
        if not any(cwd == r or cwd.startswith(r + os.sep) for r in roots):
            continue
        parent = _ppid(entry)
        if parent in (me, -1):
            continue
        out.append(int(entry))
    return out


def stale_git_locks(repo: git.Repo) -> list[Path]:
    """git lock files present in ``repo``'s git dir (top-level ones, ``refs/**.lock``,
    and each linked work tree's ``index.lock``)."""
    gd = Path(repo.git_dir)
    found = [gd / n for n in _TOP_LOCKS if (gd / n).exists()]
    refs = gd / "refs"
    if refs.is_dir():
        found += sorted(p for p in refs.rglob("*.lock") if p.is_file())
    wts = gd / "worktrees"
    if wts.is_dir():
        found += sorted(p for p in wts.glob("*/index.lock") if p.is_file())
    return found


def _remove_stale_locks(repo: git.Repo) -> None:
    locks = stale_git_locks(repo)
    if not locks:
        return
    deadline = time.monotonic() + GIT_WAIT
    while True:
        running = git_processes(repo)
        if running is None:  # cannot list processes: fall back to the lock's age
            now = time.time()
            for p in locks:
                try:
                    age = now - p.stat().st_mtime
                except OSError:
                    continue
                if age > STALE_AGE:
                    p.unlink(missing_ok=True)
                    _note(repo, f"removed {p} ({age:.0f} s old; processes cannot be listed here)")
            return
        if not running:
            break
        if time.monotonic() > deadline:
            log.warning("git process(es) %s still run in %s; leaving %s alone", running,
                        repo.working_tree_dir, ", ".join(str(p) for p in locks))
            return
        time.sleep(0.1)
        locks = stale_git_locks(repo)
        if not locks:
            return
    for p in stale_git_locks(repo):
        try:
            p.unlink()
        except FileNotFoundError:
            continue
        _note(repo, f"removed the stale git lock {p} (left by an interrupted git command; kws held its "
                    "own lock and no git process ran in the repository)")


def _remove_leftovers(repo: git.Repo) -> None:
    d = kws_dir(repo)
    mine = f"-{os.getpid()}-"
    for p in d.glob("index-*"):
        if mine not in p.name:
            p.unlink(missing_ok=True)
    wts = [p for p in d.glob("wt-*") if mine not in p.name]
    for p in wts:
        shutil.rmtree(p, ignore_errors=True)
        _note(repo, f"removed the temporary work tree {p} of an interrupted kws sync")
    if wts or (Path(repo.git_dir) / "worktrees").is_dir():
        run_git(repo, "worktree", "prune", check=False)


def _kws_only_rebase(repo: git.Repo, state: Path) -> tuple[bool, str]:
    """Whether the rebase in ``state`` (rebase-merge / rebase-apply) rebases only kws
    record commits, and the branch it rebases."""
    def read(name: str) -> str:
        try:
            return (state / name).read_text().strip()
        except OSError:
            return ""

    onto, orig, head_name = read("onto"), read("orig-head"), read("head-name")
    if not onto or not orig:
        return False, head_name
    out = run_git(repo, "log", "--format=%H%x00%(trailers:key=Kws-Record,valueonly)%x01",
                  f"{onto}..{orig}", check=False).decode("utf-8", "replace")
    commits = [c.strip() for c in out.split("\x01") if c.strip()]
    ok = bool(commits) and all(c.split("\x00", 1)[1].strip() for c in commits if "\x00" in c)
    return ok and all("\x00" in c for c in commits), head_name


def _abort_kws_rebase(repo: git.Repo) -> None:
    gd = Path(repo.git_dir)
    for name in ("rebase-merge", "rebase-apply"):
        state = gd / name
        if not state.is_dir():
            continue
        kws_only, head_name = _kws_only_rebase(repo, state)
        if not kws_only:
            return  # someone's own rebase: reported by the command that needs the branch
        try:
            run_git(repo, "rebase", "--abort")
        except git.GitCommandError as exc:
            raise QueueError(
                f"a rebase left by an interrupted kws sync is in progress in {repo.working_tree_dir} and "
                f"`git rebase --abort` failed: {exc.stderr!r}; run it yourself, then sync again") from exc
        _note(repo, f"aborted a rebase of {head_name or 'the branch'} left by an interrupted (older) kws sync; "
                    "the branch holds its commits again and the next sync sends them")
        return


def recover(repo: git.Repo) -> None:
    """Repair what an interrupted kws or git command left (see the module docstring);
    call with :func:`queue_lock` held (it does so itself)."""
    _remove_stale_locks(repo)
    _remove_leftovers(repo)
    _abort_kws_rebase(repo)
    done = finish_journal(repo)
    if done:
        _note(repo, done)
