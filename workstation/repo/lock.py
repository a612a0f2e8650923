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

A clone kws cannot write (a read-only mount, no permission, a full disk) cannot hold the
lock: ``queue_lock(write=False)`` (commands that only read) goes on without it and without
recovery, logging a note; a writer gets :class:`~workstation.repo.plumbing.StorageError`
before anything changed. :func:`damaged_branch` names a branch ref that names no commit.

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
from workstation.repo.plumbing import (
    StorageError,
    finish_journal,
    kws_dir,
    run_git,
    storage_advice,
    storage_fault,
)

__all__ = ["QueueBusy", "StorageError", "damaged_branch", "git_processes", "queue_lock", "recover",
           "stale_git_locks"]

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
def queue_lock(repo: git.Repo, *, timeout: float = LOCK_TIMEOUT, recovery: bool = True,
               write: bool = True) -> Iterator[bool]:
    """Hold kws's lock of ``repo`` (re-entrant within a process; threads queue on a
    per-repository lock), running :func:`recover` when first taken. Yields True when the
    lock is held.

    ``write=False`` (a command that only reads): where the clone cannot be written (a
    read-only file system or mount, no permission, no space for the lock file) it goes on
    without the lock and without recovery, logs one note saying so, and yields False.

    Raises:
        QueueBusy: another kws held it for ``timeout`` seconds.
        StorageError: (``write=True``) the lock file cannot be created or opened for
            writing: the clone is read-only here or its disk is full. Nothing was changed.
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
            yield True
            return
        path = Path(repo.git_dir) / "kws" / "lock"
        try:
            path.parent.mkdir(exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            fault = storage_fault(exc)
            if fault is None:
                raise
            if write:
                raise StorageError(fault, f"nothing was changed: kws cannot take its lock {path} ({exc.strerror}); "
                                   + storage_advice(fault, repo.working_tree_dir or repo.git_dir)) from exc
            log.warning("note: %s cannot be written here (%s: %s): reading without kws's lock; the recovery of "
                        "interrupted commands did not run", repo.working_tree_dir, path, exc.strerror)
            yield False
            return
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
            with contextlib.suppress(OSError):  # the holder's pid is for people; a full disk may refuse it
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
            if recovery:
                recover(repo)
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
    finally:
        with _held_guard:
            _held[key] -= 1
        tlock.release()


def damaged_branch(repo: git.Repo) -> str | None:
    """What is wrong when HEAD names a branch whose ref exists but names no commit (an
    empty or damaged ``refs/heads/<branch>`` file, e.g. after a crash on a file system
    that lost its data), with the command that restores it from the branch's reflog;
    None when HEAD is fine (or the branch is unborn: no commit yet)."""
    gd = Path(repo.git_dir)
    try:  # read, not `git symbolic-ref`: that fails outright when the branch's ref is broken
        head = (gd / "HEAD").read_text(errors="replace").strip()
    except OSError:
        return None
    if not head.startswith("ref: refs/heads/"):
        return None  # detached: the commands that need a branch say so themselves
    ref = head.removeprefix("ref: ").strip()
    if run_git(repo, "rev-parse", "-q", "--verify", f"{ref}^{{commit}}", check=False).strip():
        return None
    loose = gd / ref
    packed = gd / "packed-refs"
    in_packed = packed.is_file() and f" {ref}\n" in packed.read_text(errors="replace")
    if not loose.exists() and not in_packed:
        return None  # unborn
    wt = repo.working_tree_dir or repo.git_dir
    last = ""
    try:
        lines = (gd / "logs" / ref).read_text(errors="replace").splitlines()
        last = lines[-1].split()[1] if lines else ""
    except (OSError, IndexError):
        pass
    fix = (f"restore it from its reflog: git -C {wt} update-ref {ref} {last}" if last else
           f"find its last commit (git -C {wt} fsck --lost-found) and set it with git -C {wt} update-ref {ref} COMMIT")
    return (f"the branch {ref.removeprefix('refs/heads/')} names no commit: {loose if loose.exists() else packed} is "
            f"empty or damaged (a crash while it was written?); kws reads records from that branch's commits; {fix}")


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
