"""Integrating the local branch and extra refs with the remote's (steps 2 and 4 of
``kws sync``, :mod:`workstation.records.sync`), and :class:`SyncError`, the one error a
sync raises.

The local commits are combined with the fetched branch in plumbing only: a fast-forward
when one side contains the other; otherwise each local commit that only adds files under
the record folders (every commit kws makes) is replayed onto the fetched tip in a
temporary index (its files added to the tip's tree, its author and message kept; a file
the tip already has with the same content is not added twice), and a history with any
other commit (a reviewer's own task edit) is rebased in a temporary work tree in
``.git/kws``, never in the user's. An extra ref is fast-forwarded; diverged notes refs are
merged with ``git notes merge -s cat_sort_uniq``.
"""

from __future__ import annotations

import os
import secrets
import shutil

import git

from workstation.records.model import FOLDERS
from workstation.repo.gitqueue import Identity, QueueError, git_env
from workstation.repo.plumbing import (
    Change,
    commit_tree,
    diff_trees,
    is_ancestor,
    kws_dir,
    rev,
    run_git,
    temp_index,
    tree_of,
)

__all__ = ["KEPT", "RECORD_FOLDERS", "SyncError", "integrate", "integrate_ref", "stderr_of", "text_of"]

#: The record folders: a commit that only adds files under them is a kws record commit.
RECORD_FOLDERS = frozenset(FOLDERS.values())


class SyncError(QueueError):
    """Sync stopped; ``kind`` is one of ``detached``, ``busy``, ``dirty``, ``no-remote``,
    ``unreachable``, ``conflict``, ``rejected``, ``push-failed``, ``gave-up``, ``local``
    (this clone's own storage or objects failed: corrupt, read-only, full),
    ``resolution-conflict`` (held back: ``sync(hold_conflicts=True)``). Nothing was
    lost: the message says so, what happened (git's own words where git refused) and what
    to do."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)



KEPT = "nothing was lost: your commits and drafts are kept"


def text_of(b: bytes | str | None) -> str:
    """git's output ``b`` as text (bytes decoded as UTF-8, bad bytes replaced; None: "")."""
    if isinstance(b, bytes):
        return b.decode("utf-8", "replace")
    return b or ""


def stderr_of(exc: git.GitCommandError) -> str:
    """git's own words in ``exc`` on one line (at most its last 800 characters)."""
    err = text_of(exc.stderr) or str(exc)
    lines = [ln.strip().strip("'").strip() for ln in err.replace("stderr:", "").splitlines()]
    return "; ".join(ln for ln in lines if ln)[-800:]


def _is_record_commit(repo: git.Repo, commit: str) -> list[Change] | None:
    """The changes of ``commit`` when it only adds files under the record folders (a kws
    record commit), else None."""
    parents = run_git(repo, "rev-list", "--parents", "-n", "1", commit).decode().split()[1:]
    if len(parents) > 1:
        return None
    changes = diff_trees(repo, parents[0] if parents else None, commit)
    if changes and all(c.old_blob is None and c.path.split("/", 1)[0] in RECORD_FOLDERS for c in changes):
        return changes
    return None


def _author_env(repo: git.Repo, commit: str, who: Identity) -> tuple[dict[str, str], str]:
    raw = run_git(repo, "log", "-1", "--format=%an%x00%ae%x00%aI%x00%B", commit).decode("utf-8", "replace")
    name, email, date, message = raw.split("\x00", 3)
    env = dict(git_env(who))
    env.update({"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": date})
    return env, message.rstrip("\n") + "\n"


def _signs(repo: git.Repo) -> bool:
    """Whether commits replayed by a sync are signed (by the syncing reviewer, whose own
    commits they are): whenever the reviewer set up SSH signing, as their record commits
    are (docs/records.md, "Signed records")."""
    from workstation.records.signing import signing_key

    return signing_key(repo) is not None


def _replay_records(repo: git.Repo, commits: list[tuple[str, list[Change]]], onto: str, who: Identity) -> str:
    """Replay record commits (with their changes) onto ``onto``; returns the new tip."""
    tip = onto
    sign = _signs(repo)
    with temp_index(repo, tree_of(repo, onto)) as ienv:
        for commit, changes in commits:
            listing = run_git(repo, "ls-files", "-s", "-z", "--", *[c.path for c in changes], env=ienv)
            have = {}
            for item in listing.split(b"\0"):
                if item:
                    meta, _, path = item.partition(b"\t")
                    have[path.decode("utf-8", "surrogateescape")] = meta.decode().split(" ")[1]
            clash = [c.path for c in changes if c.path in have and have[c.path] != c.new_blob]
            if clash:
                raise SyncError(
                    "conflict",
                    f"the remote already has different files at {', '.join(clash)} (records are never "
                    f"edited: someone changed one by hand); {KEPT}. Compare them with git log -p -- PATH")
            adds = [c for c in changes if c.path not in have]
            if not adds:
                continue  # the remote has these records already (sent by an interrupted sync)
            info = b"".join(f"{c.new_mode} {c.new_blob}\t".encode() + c.path.encode("utf-8", "surrogateescape")
                            + b"\0" for c in adds)
            run_git(repo, "update-index", "-z", "--index-info", input=info, env=ienv)
            tree = run_git(repo, "write-tree", env=ienv).decode().strip()
            env, message = _author_env(repo, commit, who)
            tip = commit_tree(repo, tree, [tip], message, env, sign=sign)
    return tip


def _rebase_elsewhere(repo: git.Repo, local: str, onto: str, who: Identity) -> str:
    """Rebase ``local`` onto ``onto`` in a temporary work tree under ``.git/kws`` (so the
    user's work tree never holds a rebase); returns the new tip.

    Raises:
        SyncError: ``conflict``, naming the files (the temporary rebase is aborted).
    """
    wt = kws_dir(repo) / f"wt-{os.getpid()}-{secrets.token_hex(3)}"
    env = git_env(who)
    run_git(repo, "worktree", "add", "--detach", "-q", str(wt), local)
    try:
        try:
            run_git(repo, "-C", str(wt), "rebase", "-q", "--no-autostash", *(["--gpg-sign"] if _signs(repo) else []),
                    onto, env=env)
        except git.GitCommandError as exc:
            conflicts = text_of(run_git(repo, "-C", str(wt), "diff", "--name-only", "--diff-filter=U",
                                      check=False)).split()
            run_git(repo, "-C", str(wt), "rebase", "--abort", check=False)
            raise SyncError(
                "conflict",
                "your own commits do not apply cleanly onto the remote's"
                + (f" (conflicting: {', '.join(conflicts)})" if conflicts else f": {stderr_of(exc)}")
                + f"; {KEPT} (kws tried in a temporary work tree; yours is untouched). Someone changed "
                f"the same files: merge by hand (git -C {repo.working_tree_dir} pull --rebase) and sync again",
            ) from exc
        return run_git(repo, "-C", str(wt), "rev-parse", "HEAD").decode().strip()
    finally:
        run_git(repo, "worktree", "remove", "--force", str(wt), check=False)
        shutil.rmtree(wt, ignore_errors=True)
        run_git(repo, "worktree", "prune", check=False)


def integrate(repo: git.Repo, local: str | None, remote: str | None, who: Identity) -> str | None:
    """The commit the branch should hold: ``local`` and ``remote`` combined (module doc)."""
    if remote is None or local == remote:
        return local
    if local is None or is_ancestor(repo, local, remote):
        return remote
    if is_ancestor(repo, remote, local):
        return local
    ids = run_git(repo, "rev-list", "--reverse", "--topo-order", f"{remote}..{local}").decode().split()
    records = []
    for c in ids:
        changes = _is_record_commit(repo, c)
        if changes is None:
            return _rebase_elsewhere(repo, local, remote, who)
        records.append((c, changes))
    return _replay_records(repo, records, remote, who)


def integrate_ref(repo: git.Repo, ref: str, tracking: str, present: bool, who: Identity) -> str | None:
    """The local value of extra ref ``ref`` after taking the remote's (``tracking``)."""
    mine = rev(repo, ref)
    theirs = rev(repo, tracking) if present else None
    if theirs is None or mine == theirs:
        return mine
    if mine is None or is_ancestor(repo, mine, theirs):
        run_git(repo, "update-ref", "-m", "kws sync", ref, theirs, mine or "0" * 40)
        return theirs
    if is_ancestor(repo, theirs, mine):
        return mine
    if ref.startswith("refs/notes/"):
        try:
            run_git(repo, "notes", f"--ref={ref}", "merge", "-q", "-s", "cat_sort_uniq", tracking, env=git_env(who))
        except git.GitCommandError as exc:
            raise SyncError("conflict", f"merging the remote's {ref} failed: {stderr_of(exc)}; {KEPT}") from exc
        return rev(repo, ref)
    raise SyncError(
        "conflict",
        f"{ref} has commits here and on the remote that neither contains; kws merges only notes refs. "
        f"Merge it by hand ({tracking} holds the remote's), then sync again; {KEPT}")
