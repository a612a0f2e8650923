"""``kws sync``: exchange records with the queue's shared remote without losing any.

One round is ``git fetch`` of the branch's remote, ``git rebase`` of the local commits
onto the fetched branch (what ``git pull --rebase`` does), then ``git push`` without
force. A push that the remote rejects because it moved in between (another reviewer
pushed first) starts another round, up to ``attempts`` rounds with a short randomised
back-off. Records are append-only files with unique names, so the rebase never conflicts
on them; a conflict elsewhere (someone edited the same task file) aborts the rebase and
leaves the branch exactly as it was.

Refused up front, with a message that says what to do and with every local commit and
every draft kept: a detached HEAD, a merge or rebase in progress, uncommitted changes to
tracked files, no git identity (a rebase re-commits), no remote. An unreachable remote is
reported the same way; the local commits stay and a later sync sends them.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass
from pathlib import Path

import git

from workstation.repo.gitqueue import (
    Identity,
    QueueError,
    git_env,
    head_branch,
    reviewer_identity,
)

__all__ = ["SyncError", "SyncResult", "sync", "unsent"]

_RETRYABLE = (
    "[rejected]",
    "non-fast-forward",
    "fetch first",
    "cannot lock ref",
    "failed to update ref",
    "incorrect old value",
    "failed to lock",
    "remote rejected",  # e.g. "! [remote rejected] main -> main (failed to update ref)"
    "index.lock",
)


class SyncError(QueueError):
    """Sync stopped; ``kind`` is one of ``detached``, ``busy``, ``dirty``, ``no-remote``,
    ``unreachable``, ``conflict``, ``push-failed``, ``gave-up``. Nothing was lost: the
    message says so and what to do."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)


@dataclass(frozen=True)
class SyncResult:
    """``received``: commits taken from the remote; ``sent``: local commits pushed;
    ``attempts``: fetch-rebase-push rounds used (1 when nothing raced)."""

    remote: str
    branch: str
    received: int
    sent: int
    attempts: int

    def __str__(self) -> str:
        if not self.received and not self.sent:
            return f"up to date with {self.remote}/{self.branch}"
        return (
            f"received {self.received} commit(s), sent {self.sent} to {self.remote}/{self.branch}"
            + (f" ({self.attempts} rounds: the remote moved meanwhile)" if self.attempts > 1 else "")
        )


_KEPT = "nothing was lost: your commits and drafts are kept"


def _stderr(exc: git.GitCommandError) -> str:
    err = exc.stderr if isinstance(exc.stderr, str) else str(exc)
    lines = [ln.strip() for ln in err.replace("stderr:", "").splitlines() if ln.strip()]
    lines = [ln.strip("'").strip() for ln in lines]
    return "; ".join(ln for ln in lines if ln)[-600:]


def _remote_for(repo: git.Repo, branch: str) -> tuple[str, str]:
    reader = repo.config_reader()
    section = f'branch "{branch}"'
    remote = reader.get_value(section, "remote", None) if reader.has_section(section) else None
    merge = reader.get_value(section, "merge", None) if reader.has_section(section) else None
    names = [r.name for r in repo.remotes]
    if remote is None or remote == ".":
        if "origin" in names:
            remote = "origin"
        elif len(names) == 1:
            remote = names[0]
        else:
            raise SyncError(
                "no-remote",
                f"{repo.working_tree_dir} has no remote to sync with"
                + (f" (several: {', '.join(names)}; set one with git branch -u REMOTE/{branch})" if names else
                   f"; add the shared one with: git -C {repo.working_tree_dir} remote add origin URL")
                + f"; {_KEPT}",
            )
    if remote not in names:
        raise SyncError(
            "no-remote", f"branch {branch} tracks remote {remote!r}, which does not exist; {_KEPT}"
        )
    rbranch = str(merge).removeprefix("refs/heads/") if merge else branch
    return str(remote), rbranch


def _count(repo: git.Repo, rng: str) -> int:
    return int(repo.git.rev_list("--count", rng).strip() or 0)


def unsent(repo: git.Repo) -> int | None:
    """Local commits not on the last-fetched remote branch (no network); None when the
    branch has no remote branch yet or HEAD is detached."""
    branch = head_branch(repo)
    if branch is None:
        return None
    try:
        remote, rbranch = _remote_for(repo, branch)
    except SyncError:
        return None
    ref = f"refs/remotes/{remote}/{rbranch}"
    try:
        repo.git.rev_parse("--verify", "-q", ref)
    except git.GitCommandError:
        return None
    return _count(repo, f"{ref}..HEAD")


def sync(
    repo: git.Repo,
    *,
    attempts: int = 6,
    identity: Identity | None = None,
    timeout: float = 120.0,
) -> SyncResult:
    """Fetch, rebase onto the remote branch, push; retry rejected pushes. See the module.

    Raises :class:`SyncError` (or :class:`~workstation.repo.gitqueue.IdentityError`) with a
    message naming the problem and the fix; in every case the local branch holds all the
    commits it held before (a failed rebase is aborted).
    """
    wt = repo.working_tree_dir
    branch = head_branch(repo)
    if branch is None:
        raise SyncError(
            "detached",
            f"HEAD is detached in {wt}; sync works on a branch. Check out yours "
            f"(git -C {wt} switch main); {_KEPT}",
        )
    gd = Path(repo.git_dir)
    if (gd / "rebase-merge").exists() or (gd / "rebase-apply").exists() or (gd / "MERGE_HEAD").exists():
        raise SyncError(
            "busy",
            f"a rebase or merge is in progress in {wt}; finish or abort it first; {_KEPT}",
        )
    who = identity or reviewer_identity(repo)
    changed = [
        ln[3:]
        for ln in repo.git.status("--porcelain=v1", "--untracked-files=no").splitlines()
        if len(ln) > 3
    ]
    if changed:
        shown = "\n  ".join(changed[:20]) + ("\n  ..." if len(changed) > 20 else "")
        raise SyncError(
            "dirty",
            f"uncommitted changes in {wt}:\n  {shown}\ncommit or discard them (kws records are "
            f"committed as they are made), then sync again; {_KEPT}",
        )
    remote, rbranch = _remote_for(repo, branch)
    url = repo.remote(remote).url
    env = dict(git_env(who))
    env.setdefault("GIT_TERMINAL_PROMPT", "0")
    if "GIT_SSH_COMMAND" not in os.environ:
        try:
            repo.git.config("--get", "core.sshCommand")
        except git.GitCommandError:
            env["GIT_SSH_COMMAND"] = "ssh -o BatchMode=yes"
    upstream = f"refs/remotes/{remote}/{rbranch}"
    received = 0
    for attempt in range(1, attempts + 1):
        try:
            repo.git.fetch("-q", remote, env=env, kill_after_timeout=timeout)
        except git.GitCommandError as exc:
            raise SyncError(
                "unreachable",
                f"cannot reach remote {remote!r} ({url}): {_stderr(exc)}\n{_KEPT}; "
                "run kws sync again when the remote is reachable",
            ) from exc
        try:
            repo.git.rev_parse("--verify", "-q", upstream)
            has_upstream = True
        except git.GitCommandError:
            has_upstream = False  # an empty remote, or a branch it does not have yet
        if has_upstream:
            behind = _count(repo, f"HEAD..{upstream}")
            if behind:
                try:
                    repo.git.rebase("-q", "--no-autostash", upstream, env=env)
                except git.GitCommandError as exc:
                    conflicts = repo.git.diff("--name-only", "--diff-filter=U").split()
                    try:
                        repo.git.rebase("--abort")
                    except git.GitCommandError:
                        pass
                    raise SyncError(
                        "conflict",
                        "your commits do not rebase cleanly onto the remote's"
                        + (f" (conflicting: {', '.join(conflicts)})" if conflicts else f": {_stderr(exc)}")
                        + f"; the rebase was aborted and {_KEPT}. Someone changed the same "
                        f"files: merge by hand (git -C {wt} pull --rebase) and sync again",
                    ) from exc
                received += behind
            ahead = _count(repo, f"{upstream}..HEAD")
        else:
            ahead = _count(repo, "HEAD")
        if ahead == 0:
            return SyncResult(remote, rbranch, received, 0, attempt)
        push_args = ["--porcelain", remote, f"HEAD:refs/heads/{rbranch}"]
        try:
            repo.git.push(*push_args, env=env, kill_after_timeout=timeout)
        except git.GitCommandError as exc:
            text = f"{exc.stdout or ''}\n{exc.stderr or ''}"
            if any(m in text for m in _RETRYABLE) and attempt < attempts:
                time.sleep(random.uniform(0.05, 0.25) * attempt)
                continue
            if any(m in text for m in _RETRYABLE):
                raise SyncError(
                    "gave-up",
                    f"the remote {remote!r} kept moving: {attempts} rounds of fetch, rebase "
                    f"and push were all rejected; {_KEPT}; run kws sync again",
                ) from exc
            raise SyncError(
                "push-failed",
                f"push to {remote!r} ({url}) failed: {_stderr(exc)}\n{_KEPT}",
            ) from exc
        if not has_upstream or not repo.config_reader().has_option(f'branch "{branch}"', "merge"):
            try:
                repo.git.branch("-q", f"--set-upstream-to={remote}/{rbranch}", branch)
            except git.GitCommandError:
                pass
        return SyncResult(remote, rbranch, received, ahead, attempt)
    raise SyncError("gave-up", f"sync did not finish in {attempts} rounds; {_KEPT}")
