"""``kws sync``: exchange records with the queue's shared remote without losing any, and
without ever leaving the clone in a state the next kws command cannot recover from.

One round, under kws's lock (:func:`workstation.repo.lock.queue_lock`, whose recovery
first repairs whatever an interrupted command left):

1. ``git ls-remote`` of the branch and the extra refs (:func:`sync_refs`), then
   ``git fetch`` of those that exist into their tracking refs;
2. **integrate** the local commits with the fetched branch, in plumbing only (nothing
   interactive, no rebase in the user's work tree): a fast-forward when one side contains
   the other; otherwise each local commit that only adds files under the record folders
   (every commit kws makes) is replayed onto the fetched tip in a temporary index (its
   files added to the tip's tree, its author and message kept; a file the tip already
   has with the same content is not added twice); a local commit of anything else (a
   reviewer's own task edit) is rebased in a temporary work tree in ``.git/kws``, never
   in the user's. A conflict there aborts that temporary rebase and names the files;
3. the branch is moved to the result by
   :func:`~workstation.repo.plumbing.move_branch` (journaled compare-and-swap; the index
   and work tree follow path by path, refusing only where an incoming change would
   overwrite an uncommitted edit);
4. each extra ref is integrated the same way (fast-forward; diverged notes refs are
   merged with ``git notes merge -s cat_sort_uniq``);
5. ``git push --atomic`` of the branch and the extra refs, without force. A push the
   remote rejects because it moved meanwhile starts another round, up to ``attempts``
   rounds with a short randomised back-off; any other rejection (a hook, permissions, a
   protected branch) stops with the remote's own message.

Refused up front, with a message that says what happened and what to do (nothing lost):
a detached HEAD, a merge or rebase in progress that is not kws's own, no git identity
(replayed commits are committed by the reviewer), no remote. An unreachable remote is
reported the same way; the local commits stay and a later sync sends them.
"""

from __future__ import annotations

import os
import random
import re
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import git

from workstation.records.model import FOLDERS
from workstation.repo.gitqueue import (
    TRANSPORT_FETCH,
    TRANSPORT_PUSH,
    Identity,
    QueueError,
    detached_advice,
    git_env,
    harden,
    head_branch,
    reviewer_identity,
)
from workstation.repo.lock import queue_lock
from workstation.repo.plumbing import (
    RefMoved,
    WorkTreeConflict,
    commit_tree,
    diff_trees,
    git_result,
    is_ancestor,
    kws_dir,
    move_branch,
    rev,
    run_git,
    storage_advice,
    storage_fault_in,
    temp_index,
    tree_of,
)

__all__ = ["SYNC_REFS", "SyncError", "SyncResult", "new_conflicts", "register_sync_ref", "sync", "sync_refs",
           "unpushed_records", "unsent"]

#: Extra refs every ``kws sync`` exchanges besides the branch (features add theirs with
#: :func:`register_sync_ref`; a queue adds more with ``sync_refs`` in queue.toml).
SYNC_REFS: list[str] = []
_REF_RE = re.compile(r"^refs/(?!heads/|remotes/|tags/|kws-remote/|notes/kws-remote/)[A-Za-z0-9._/-]+$")
_RECORD_FOLDERS = frozenset(FOLDERS.values())


def register_sync_ref(ref: str) -> None:
    """Make every later sync exchange ``ref`` too (e.g. ``refs/notes/kws-screen``).

    Raises:
        ValueError: ``ref`` is not a full ref name outside ``refs/heads``, ``refs/remotes``
            and ``refs/tags``.
    """
    if not _REF_RE.match(ref) or ".." in ref or ref.endswith((".lock", "/")):
        raise ValueError(f"{ref!r} cannot be synced: give a full ref such as refs/notes/NAME")
    if ref not in SYNC_REFS:
        SYNC_REFS.append(ref)


def sync_refs(root: Path | str) -> list[str]:
    """The extra refs a sync of the queue at ``root`` exchanges: :data:`SYNC_REFS`, then
    queue.toml's ``sync_refs`` (an unreadable queue.toml adds none)."""
    from workstation.schema.problem import Problem
    from workstation.task.queue import read_queue_config

    refs = list(SYNC_REFS)
    try:
        extra = read_queue_config(root).sync_refs
    except Problem:
        extra = ()
    for r in extra:
        if r not in refs:
            refs.append(r)
    return refs


_RETRY_REJECT = ("fetch first", "non-fast-forward", "stale info", "failed to update ref", "cannot lock ref",
                 "incorrect old value", "failed to lock", "atomic push failure", "atomic transaction failed")


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


@dataclass(frozen=True)
class SyncResult:
    """``received``: commits taken from the remote; ``sent``: local commits pushed;
    ``attempts``: rounds used (1 when nothing raced); ``refs``: extra refs updated
    (fetched or pushed); ``conflicts``: resolutions this sync brought together that
    disagree with one another (:func:`new_conflicts`), each as a sentence."""

    remote: str
    branch: str
    received: int
    sent: int
    attempts: int
    refs: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()

    def __str__(self) -> str:
        extra = f"; exchanged {', '.join(self.refs)}" if self.refs else ""
        extra += "".join(f"\nwarning: {c}" for c in self.conflicts)
        if not self.received and not self.sent:
            return f"up to date with {self.remote}/{self.branch}{extra}"
        return (
            f"received {self.received} commit(s), sent {self.sent} to {self.remote}/{self.branch}"
            + (f" ({self.attempts} rounds: the remote moved meanwhile)" if self.attempts > 1 else "")
            + extra
        )


_KEPT = "nothing was lost: your commits and drafts are kept"


def _text(b: bytes | str | None) -> str:
    if isinstance(b, bytes):
        return b.decode("utf-8", "replace")
    return b or ""


def _stderr(exc: git.GitCommandError) -> str:
    err = _text(exc.stderr) or str(exc)
    lines = [ln.strip().strip("'").strip() for ln in err.replace("stderr:", "").splitlines()]
    return "; ".join(ln for ln in lines if ln)[-800:]


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
    return int(run_git(repo, "rev-list", "--count", rng).decode().strip() or 0)


def unsent(repo: git.Repo) -> int | None:
    """Local commits not on the last-fetched remote branch (no network); None when the
    branch has no remote branch yet or HEAD is detached."""
    harden(repo)
    branch = head_branch(repo)
    if branch is None:
        return None
    try:
        remote, rbranch = _remote_for(repo, branch)
    except SyncError:
        return None
    ref = f"refs/remotes/{remote}/{rbranch}"
    if rev(repo, ref) is None:
        return None
    return _count(repo, f"{ref}..HEAD")


def unpushed_records(queue: git.Repo | Path | str) -> int:
    """How many commits on the local branch that touch the record folders (verdicts,
    disputes, resolutions, reservations) are not on its remote branch as last fetched (no
    network): what a status bar shows as "N records not pushed". 0 for a queue without a
    remote (nothing to push to), a detached HEAD, or a path that is not a repository.
    Without a fetched remote branch, commits on no remote-tracking branch count."""
    if isinstance(queue, git.Repo):
        repo = harden(queue)
    else:
        try:
            repo = harden(git.Repo(Path(queue)))
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            return 0
    branch = head_branch(repo)
    if branch is None or not repo.remotes:
        return 0
    try:
        remote, rbranch = _remote_for(repo, branch)
    except SyncError:
        return 0
    ref = f"refs/remotes/{remote}/{rbranch}"
    base = [f"^{ref}"] if rev(repo, ref) is not None else ["--not", f"--remotes={remote}"]
    proc = git_result(repo, "rev-list", "--count", f"refs/heads/{branch}", *base, "--", *sorted(_RECORD_FOLDERS))
    try:
        return int(proc.stdout.decode().strip() or 0) if proc.returncode == 0 else 0
    except ValueError:
        return 0


def _tracking(remote: str, ref: str) -> str:
    """Where the remote's value of extra ref ``ref`` is fetched to (notes refs stay under
    refs/notes/, which ``git notes merge`` requires)."""
    rest = ref.removeprefix("refs/")
    if ref.startswith("refs/notes/"):
        return f"refs/notes/kws-remote/{remote}/{rest.removeprefix('notes/')}"
    return f"refs/kws-remote/{remote}/{rest}"


# --------------------------------------------------------------------------------------------
# integrating local commits with the fetched branch


def _is_record_commit(repo: git.Repo, commit: str) -> list | None:
    """The changes of ``commit`` when it only adds files under the record folders (a kws
    record commit), else None."""
    parents = run_git(repo, "rev-list", "--parents", "-n", "1", commit).decode().split()[1:]
    if len(parents) > 1:
        return None
    changes = diff_trees(repo, parents[0] if parents else None, commit)
    if changes and all(c.old_blob is None and c.path.split("/", 1)[0] in _RECORD_FOLDERS for c in changes):
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
    commits they are): the queue's policy does not turn signatures off and the reviewer
    set up SSH signing (docs/records.md, "Signed records")."""
    from workstation.records.signing import records_policy, signing_key

    return signing_key(repo) is not None and not records_policy(repo).off


def _replay_records(repo: git.Repo, commits: list[tuple[str, list]], onto: str, who: Identity) -> str:
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
                    f"edited: someone changed one by hand); {_KEPT}. Compare them with git log -p -- PATH")
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
            conflicts = _text(run_git(repo, "-C", str(wt), "diff", "--name-only", "--diff-filter=U",
                                      check=False)).split()
            run_git(repo, "-C", str(wt), "rebase", "--abort", check=False)
            raise SyncError(
                "conflict",
                "your own commits do not apply cleanly onto the remote's"
                + (f" (conflicting: {', '.join(conflicts)})" if conflicts else f": {_stderr(exc)}")
                + f"; {_KEPT} (kws tried in a temporary work tree; yours is untouched). Someone changed "
                f"the same files: merge by hand (git -C {repo.working_tree_dir} pull --rebase) and sync again",
            ) from exc
        return run_git(repo, "-C", str(wt), "rev-parse", "HEAD").decode().strip()
    finally:
        run_git(repo, "worktree", "remove", "--force", str(wt), check=False)
        shutil.rmtree(wt, ignore_errors=True)
        run_git(repo, "worktree", "prune", check=False)


def _integrate(repo: git.Repo, local: str | None, remote: str | None, who: Identity) -> str | None:
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


def _integrate_ref(repo: git.Repo, ref: str, tracking: str, present: bool, who: Identity) -> str | None:
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
            raise SyncError("conflict", f"merging the remote's {ref} failed: {_stderr(exc)}; {_KEPT}") from exc
        return rev(repo, ref)
    raise SyncError(
        "conflict",
        f"{ref} has commits here and on the remote that neither contains; kws merges only notes refs. "
        f"Merge it by hand ({tracking} holds the remote's), then sync again; {_KEPT}")


# --------------------------------------------------------------------------------------------
# the remote


def _ls_remote(repo: git.Repo, remote: str, url: str, refs: list[str], env: dict[str, str],
               timeout: float) -> dict[str, str]:
    try:
        out = run_git(repo, "ls-remote", *TRANSPORT_FETCH, remote, *refs, env=env, timeout=timeout)
    except git.GitCommandError as exc:
        raise SyncError(
            "unreachable",
            f"cannot reach remote {remote!r} ({url}): {_stderr(exc)}\n{_KEPT}; "
            "run kws sync again when the remote is reachable",
        ) from exc
    except TimeoutError as exc:  # pragma: no cover - subprocess raises its own
        raise SyncError("unreachable", f"remote {remote!r} ({url}) did not answer in {timeout:.0f} s; {_KEPT}") from exc
    found = {}
    for line in out.decode().splitlines():
        sha, _, name = line.partition("\t")
        if name in refs:
            found[name] = sha
    return found


#: git's words for a fault in this clone (not the remote's refusal) while packing a push.
_LOCAL_FAULT = ("pack-objects died", "unable to read", "is corrupt", "inflate:", "unable to unpack", "bad object",
                "missing blob", "missing tree", "did not send all necessary objects", "unable to stream")


def _local_fault(repo: git.Repo, text: str, action: str) -> SyncError | None:
    """A ``local`` SyncError when git's ``text`` says ``action`` failed in this clone
    (a corrupt or missing object, a full or read-only disk) rather than at the remote."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    hits = [ln for ln in lines if any(w in ln for w in _LOCAL_FAULT)]
    fault = storage_fault_in(text)
    if not hits and fault is None:
        return None
    wt = repo.working_tree_dir
    if fault is not None and not hits:
        what = storage_advice(fault, wt or repo.git_dir)
        return SyncError("local", f"{action} failed in this clone, not at the remote: {what}\n{_KEPT}")
    return SyncError(
        "local",
        f"{action} failed in this clone, not at the remote: git could not read its own objects "
        f"({'; '.join(hits[-3:])[-600:]}). The remote was not changed. Find the damage with "
        f"git -C {wt} fsck, then restore the object from another clone or the remote (kws doctor names "
        f"the records it affects); {_KEPT}",
    )


def new_conflicts(repo: git.Repo, before: str | None, after: str) -> list[str]:
    """Conflicting resolutions (:meth:`~workstation.records.state.RecordSet.resolution_conflicts`)
    in the records of commit ``after`` that the records of ``before`` (None: none) did
    not have, each as a sentence naming the dispute, both sides and what the queue's rule
    makes of them."""
    from workstation.records.history import conflict_text
    from workstation.records.parse import load_records

    changed = diff_trees(repo, tree_of(repo, before) if before else None, tree_of(repo, after))
    if not any(c.path.startswith(FOLDERS["resolution"] + "/") for c in changed):
        return []
    kinds = ("verdict", "dispute", "resolution")
    now = load_records(repo, kinds, rev=after)
    then = load_records(repo, kinds, rev=before).resolution_conflicts() if before else {}
    out = []
    for did, clash in now.resolution_conflicts().items():
        if did in then and len(then[did]) == len(clash):
            continue
        out.append(f"dispute {did[:8]} on {clash[0].task}: {conflict_text(clash, now.resolution_rule)} "
                   f"(kws history {clash[0].task})")
    return out


def _push_outcome(text: str) -> tuple[bool, str]:
    """(a rejection worth another round, the remote's words) from a rejected
    ``git push --porcelain``'s output."""
    rejected = [ln for ln in text.splitlines() if ln.startswith("!")]
    remote_lines = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("remote:")]
    reasons = []
    for ln in rejected:
        parts = ln.split("\t")
        reasons.append(parts[-1].strip() if len(parts) >= 3 else ln.strip())
    primary = [r for r in reasons if "atomic push failure" not in r] or reasons
    retry = all(any(m in r for m in _RETRY_REJECT) for r in primary)
    words = "; ".join(primary)
    if remote_lines:
        words += "\n  " + "\n  ".join(remote_lines[-20:])
    return retry, words


def sync(
    repo: git.Repo,
    *,
    attempts: int = 6,
    identity: Identity | None = None,
    timeout: float = 120.0,
    extra_refs: list[str] | None = None,
    hold_conflicts: bool = False,
) -> SyncResult:
    """Fetch, integrate, push; retry pushes rejected because the remote moved. See the
    module docstring.

    ``extra_refs``: the extra refs to exchange (default: :func:`sync_refs`).
    ``hold_conflicts``: when the local commits bring a resolution that disagrees with one
    the remote already has (:func:`new_conflicts`), push nothing and raise
    ``SyncError("resolution-conflict", ...)`` naming the other resolution and the queue's
    rule, so the writer decides before it goes out (``kws resolve`` and the app pass it;
    a plain ``kws sync`` sends it with a warning). The branch then holds the remote's
    records and the local ones; nothing is lost.

    Raises:
        SyncError: with a message naming the problem and the fix; in every case the local
            branch holds all the commits it held before.
        IdentityError: no git identity.
        QueueBusy: another kws process holds the queue.
    """
    harden(repo)
    wt = repo.working_tree_dir
    with queue_lock(repo):
        branch = head_branch(repo)
        if branch is None:
            raise SyncError("detached", f"{detached_advice(repo)}; {_KEPT}")
        gd = Path(repo.git_dir)
        if (gd / "rebase-merge").exists() or (gd / "rebase-apply").exists() or (gd / "MERGE_HEAD").exists():
            raise SyncError(
                "busy",
                f"a rebase or merge that kws did not start is in progress in {wt}; finish it or abort it "
                f"(git -C {wt} rebase --abort / merge --abort), then sync again; {_KEPT}",
            )
        who = identity or reviewer_identity(repo)
        remote, rbranch = _remote_for(repo, branch)
        url = repo.remote(remote).url
        refs = list(extra_refs) if extra_refs is not None else sync_refs(wt)
        env = dict(git_env(who))
        upstream = f"refs/remotes/{remote}/{rbranch}"
        remote_branch = f"refs/heads/{rbranch}"
        start = rev(repo, f"refs/heads/{branch}")
        last = ""
        touched: set[str] = set()
        received = 0
        for attempt in range(1, attempts + 1):
            found = _ls_remote(repo, remote, url, [remote_branch, *refs], env, timeout)
            specs = [f"+{name}:{upstream if name == remote_branch else _tracking(remote, name)}" for name in found]
            if specs:
                try:
                    run_git(repo, "fetch", "-q", *TRANSPORT_FETCH, "--no-tags", "--no-write-fetch-head", remote, *specs,
                            env=env, timeout=timeout)
                except git.GitCommandError as exc:
                    local_fault = _local_fault(repo, _text(exc.stderr), f"fetching from {remote!r}")
                    if local_fault is not None:
                        raise local_fault from exc
                    raise SyncError(
                        "unreachable",
                        f"fetching from {remote!r} ({url}) failed: {_stderr(exc)}\n{_KEPT}; run kws sync again",
                    ) from exc
            theirs = rev(repo, upstream) if remote_branch in found else None
            local = rev(repo, f"refs/heads/{branch}")
            target = _integrate(repo, local, theirs, who)
            if target is not None and target != local:
                try:
                    move_branch(repo, branch, local, target, f"kws sync: integrate {remote}/{rbranch}")
                except RefMoved:
                    continue  # the reviewer's own git committed meanwhile: integrate that too
                except WorkTreeConflict as exc:
                    raise SyncError("dirty", f"the remote's changes cannot be brought into {wt}: {exc}; {_KEPT}") from exc
            if theirs is not None and start is not None:
                received = _count(repo, f"{start}..{theirs}")
            elif theirs is not None:
                received = _count(repo, theirs)
            pushes: list[str] = []
            ahead = 0
            if target is not None and target != theirs:
                ahead = _count(repo, f"{theirs}..{target}" if theirs else target)
                if ahead:
                    pushes.append(f"{target}:{remote_branch}")
            ref_push: dict[str, str] = {}
            for ref in refs:
                before = rev(repo, ref)
                value = _integrate_ref(repo, ref, _tracking(remote, ref), ref in found, who)
                if value != before:
                    touched.add(ref)
                if value is not None and value != found.get(ref):
                    pushes.append(f"{value}:{ref}")
                    ref_push[ref] = value
            conflicts: tuple[str, ...] = ()
            if target is not None and target != theirs:
                conflicts = tuple(new_conflicts(repo, theirs, target))  # in the result's text
            if conflicts and hold_conflicts and ahead:
                raise SyncError(
                    "resolution-conflict",
                    "your resolution was NOT pushed: another reviewer resolved the same dispute differently and "
                    "reached the remote first:\n  " + "\n  ".join(conflicts)
                    + "\nto replace theirs with yours, resolve it again with --supersede (kws resolve DISPUTE "
                    "--outcome ... --supersede); to send yours as it is and let the queue's rule decide, run kws sync. "
                    f"{_KEPT}")
            if not pushes:
                return SyncResult(remote, rbranch, received, 0, attempt, tuple(sorted(touched)), conflicts)
            atomic = ["--atomic"] if len(pushes) > 1 else []
            proc = git_result(repo, "push", "--porcelain", *TRANSPORT_PUSH, *atomic, "--no-verify", remote, *pushes,
                              env=env, timeout=timeout)
            if proc.returncode == 0:
                if ahead and target is not None:
                    run_git(repo, "update-ref", upstream, target, check=False)
                    if not repo.config_reader().has_option(f'branch "{branch}"', "merge"):
                        run_git(repo, "branch", "-q", f"--set-upstream-to={remote}/{rbranch}", branch, check=False)
                for ref, value in ref_push.items():
                    run_git(repo, "update-ref", _tracking(remote, ref), value, check=False)
                    touched.add(ref)
                return SyncResult(remote, rbranch, received, ahead, attempt, tuple(sorted(touched)), conflicts)
            out, err = _text(proc.stdout), _text(proc.stderr)
            local_fault = _local_fault(repo, err, f"pushing to {remote!r}")
            if local_fault is not None:
                raise local_fault
            if not any(ln.startswith("!") for ln in out.splitlines()):
                raise SyncError(
                    "push-failed",
                    f"push to {remote!r} ({url}) failed: {'; '.join(ln.strip() for ln in err.splitlines() if ln.strip())[-800:]}"
                    f"\n{_KEPT}; run kws sync again",
                )
            retry, words = _push_outcome(out + "\n" + err)
            last = words
            if not retry:
                raise SyncError(
                    "rejected",
                    f"the remote {remote!r} ({url}) refused the push: {words}\n{_KEPT}; the commits stay "
                    "here and a later sync sends them once the remote accepts them",
                )
            if attempt < attempts:
                time.sleep(random.uniform(0.05, 0.25) * attempt)
        raise SyncError(
            "gave-up",
            f"the remote {remote!r} kept moving: {attempts} rounds of fetch, integrate and push were all "
            f"rejected (last: {last}); {_KEPT}; run kws sync again",
        )
