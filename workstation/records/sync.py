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

Steps 2 and 4 are :mod:`workstation.records.integrate` (where :class:`SyncError`, the one
error of a sync, is defined; import it from here). Refused up front, with a message that says what happened and what to do (nothing lost):
a detached HEAD, a merge or rebase in progress that is not kws's own, no git identity
(replayed commits are committed by the reviewer), no remote. An unreachable remote is
reported the same way; the local commits stay and a later sync sends them.
"""

from __future__ import annotations

import random
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import git

from workstation.records.integrate import (
    KEPT,
    RECORD_FOLDERS,
    SyncError,
    integrate,
    integrate_ref,
    stderr_of,
    text_of,
)
from workstation.records.model import FOLDERS
from workstation.repo.gitqueue import (
    TRANSPORT_FETCH,
    TRANSPORT_PUSH,
    Identity,
    detached_advice,
    git_env,
    harden,
    head_branch,
    reviewer_identity,
    work_tree,
)
from workstation.repo.lock import queue_lock
from workstation.repo.plumbing import (
    RefMoved,
    WorkTreeConflict,
    diff_trees,
    git_result,
    move_branch,
    rev,
    run_git,
    storage_advice,
    storage_fault_in,
    tree_of,
)

__all__ = ["SYNC_REFS", "SyncError", "SyncResult", "new_conflicts", "register_sync_ref", "sync", "sync_refs",
           "unpushed_records", "unsent"]

#: Extra refs every ``kws sync`` exchanges besides the branch (features add theirs with
#: :func:`register_sync_ref`; a queue adds more with ``sync_refs`` in queue.toml).
SYNC_REFS: list[str] = []
_REF_RE = re.compile(r"^refs/(?!heads/|remotes/|tags/|kws-remote/|notes/kws-remote/)[A-Za-z0-9._/-]+$")


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
    #: what is wrong with the remote itself (its HEAD names no branch: clones come out empty)
    notes: tuple[str, ...] = ()

    def __str__(self) -> str:
        extra = f"; exchanged {', '.join(self.refs)}" if self.refs else ""
        extra += "".join(f"\nwarning: {c}" for c in (*self.conflicts, *self.notes))
        if not self.received and not self.sent:
            return f"up to date with {self.remote}/{self.branch}{extra}"
        return (
            f"received {self.received} commit(s), sent {self.sent} to {self.remote}/{self.branch}"
            + (f" ({self.attempts} rounds: the remote moved meanwhile)" if self.attempts > 1 else "")
            + extra
        )


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
                + f"; {KEPT}",
            )
    if remote not in names:
        raise SyncError(
            "no-remote", f"branch {branch} tracks remote {remote!r}, which does not exist; {KEPT}"
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
    proc = git_result(repo, "rev-list", "--count", f"refs/heads/{branch}", *base, "--", *sorted(RECORD_FOLDERS))
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
# the remote


def _ls_remote(repo: git.Repo, remote: str, url: str, refs: list[str], env: dict[str, str],
               timeout: float) -> dict[str, str]:
    try:
        out = run_git(repo, "ls-remote", *TRANSPORT_FETCH, remote, *refs, env=env, timeout=timeout)
    except git.GitCommandError as exc:
        raise SyncError(
            "unreachable",
            f"cannot reach remote {remote!r} ({url}): {stderr_of(exc)}\n{KEPT}; "
            "run kws sync again when the remote is reachable",
        ) from exc
    except TimeoutError as exc:  # pragma: no cover - subprocess raises its own
        raise SyncError("unreachable", f"remote {remote!r} ({url}) did not answer in {timeout:.0f} s; {KEPT}") from exc
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
        return SyncError("local", f"{action} failed in this clone, not at the remote: {what}\n{KEPT}")
    return SyncError(
        "local",
        f"{action} failed in this clone, not at the remote: git could not read its own objects "
        f"({'; '.join(hits[-3:])[-600:]}). The remote was not changed. Find the damage with "
        f"git -C {wt} fsck, then restore the object from another clone or the remote (kws doctor names "
        f"the records it affects); {KEPT}",
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
    with queue_lock(repo):
        s = _Sync.begin(repo, identity, timeout, extra_refs)
        last = ""
        received = 0
        for attempt in range(1, attempts + 1):
            found = s.fetch()
            theirs = rev(repo, s.upstream) if s.remote_branch in found else None
            local = rev(repo, f"refs/heads/{s.branch}")
            target = integrate(repo, local, theirs, s.who)
            if target is not None and target != local and not s.move(local, target):
                continue  # the reviewer's own git committed meanwhile: integrate that too
            received = s.received(theirs, received)
            ahead = 0
            if target is not None and target != theirs:
                ahead = _count(repo, f"{theirs}..{target}" if theirs else target)
            ref_push = s.integrate_refs(found)
            pushes = ([f"{target}:{s.remote_branch}"] if ahead else []) + [f"{v}:{r}" for r, v in ref_push.items()]
            conflicts: tuple[str, ...] = ()
            if target is not None and target != theirs:
                conflicts = tuple(new_conflicts(repo, theirs, target))  # in the result's text
            if conflicts and hold_conflicts and ahead:
                raise SyncError("resolution-conflict", _held_back(conflicts))
            if not pushes:
                return SyncResult(s.remote, s.rbranch, received, 0, attempt, tuple(sorted(s.touched)), conflicts,
                                  s.remote_notes(found))
            if s.push(pushes, ahead, target, ref_push):
                return SyncResult(s.remote, s.rbranch, received, ahead, attempt, tuple(sorted(s.touched)), conflicts,
                                  s.remote_notes(found))
            last = s.rejection
            if attempt < attempts:
                time.sleep(random.uniform(0.05, 0.25) * attempt)
        raise SyncError(
            "gave-up",
            f"the remote {s.remote!r} kept moving: {attempts} rounds of fetch, integrate and push were all "
            f"rejected (last: {last}); {KEPT}; run kws sync again",
        )


def _held_back(conflicts: tuple[str, ...]) -> str:
    """The message of a sync that holds back a resolution disagreeing with the remote's."""
    return ("your resolution was NOT pushed: another reviewer resolved the same dispute differently and "
            "reached the remote first:\n  " + "\n  ".join(conflicts)
            + "\nto replace theirs with yours, resolve it again with --supersede (kws resolve DISPUTE "
            "--outcome ... --supersede); to send yours as it is and let the queue's rule decide, run kws sync. "
            f"{KEPT}")


@dataclass
class _Sync:
    """One :func:`sync` under the lock: the branch and its remote, the refs exchanged, the
    identity and environment git runs with, and what the rounds did (``touched``: extra
    refs updated; ``rejection``: the remote's words for the last rejected push)."""

    repo: git.Repo
    branch: str
    remote: str
    rbranch: str
    url: str
    refs: list[str]
    who: Identity
    env: dict[str, str]
    timeout: float
    start: str | None
    touched: set[str] = field(default_factory=set)
    rejection: str = ""

    @classmethod
    def begin(cls, repo: git.Repo, identity: Identity | None, timeout: float,
              extra_refs: list[str] | None) -> _Sync:
        """The sync of ``repo``'s branch, after the checks that refuse one up front.

        Raises:
            SyncError: ``detached``, ``busy`` (a rebase or merge kws did not start),
                ``no-remote``.
            IdentityError: no git identity.
        """
        wt = repo.working_tree_dir
        branch = head_branch(repo)
        if branch is None:
            raise SyncError("detached", f"{detached_advice(repo)}; {KEPT}")
        gd = Path(repo.git_dir)
        if (gd / "rebase-merge").exists() or (gd / "rebase-apply").exists() or (gd / "MERGE_HEAD").exists():
            raise SyncError(
                "busy",
                f"a rebase or merge that kws did not start is in progress in {wt}; finish it or abort it "
                f"(git -C {wt} rebase --abort / merge --abort), then sync again; {KEPT}",
            )
        who = identity or reviewer_identity(repo)
        remote, rbranch = _remote_for(repo, branch)
        url = repo.remote(remote).url
        refs = list(extra_refs) if extra_refs is not None else sync_refs(work_tree(repo))
        return cls(repo, branch, remote, rbranch, url, refs, who, dict(git_env(who)), timeout,
                   rev(repo, f"refs/heads/{branch}"))

    @property
    def upstream(self) -> str:
        """The remote branch's tracking ref."""
        return f"refs/remotes/{self.remote}/{self.rbranch}"

    @property
    def remote_branch(self) -> str:
        """The branch's name on the remote."""
        return f"refs/heads/{self.rbranch}"

    def fetch(self) -> dict[str, str]:
        """``{ref: id}`` of the branch and extra refs the remote has, fetched into their
        tracking refs.

        Raises:
            SyncError: ``unreachable``, or ``local`` (this clone's storage failed).
        """
        found = _ls_remote(self.repo, self.remote, self.url, [self.remote_branch, *self.refs, "HEAD"], self.env,
                           self.timeout)
        specs = [f"+{name}:{self.upstream if name == self.remote_branch else _tracking(self.remote, name)}"
                 for name in found if name != "HEAD"]
        if specs:
            try:
                run_git(self.repo, "fetch", "-q", *TRANSPORT_FETCH, "--no-tags", "--no-write-fetch-head", self.remote,
                        *specs, env=self.env, timeout=self.timeout)
            except git.GitCommandError as exc:
                local_fault = _local_fault(self.repo, text_of(exc.stderr), f"fetching from {self.remote!r}")
                if local_fault is not None:
                    raise local_fault from exc
                raise SyncError(
                    "unreachable",
                    f"fetching from {self.remote!r} ({self.url}) failed: {stderr_of(exc)}\n{KEPT}; run kws sync again",
                ) from exc
        return found

    def remote_notes(self, found: dict[str, str]) -> tuple[str, ...]:
        """What is wrong with the remote (``found``: its refs as listed this round): it has
        the branch but its HEAD names no branch that exists (a bare repository made with a
        plain ``git init --bare`` keeps HEAD on ``master``), so a ``git clone`` of it checks
        nothing out."""
        if self.remote_branch in found and "HEAD" not in found:
            return (f"the remote {self.remote!r} ({self.url}) has {self.rbranch} but its HEAD names no branch that "
                    "exists, so a git clone of it comes out empty; fix it once on the remote: git --git-dir "
                    f"{self.url} symbolic-ref HEAD refs/heads/{self.rbranch} (docs/records.md, \"A team's queue\")",)
        return ()

    def move(self, local: str | None, target: str) -> bool:
        """Move the branch from ``local`` to ``target``; False when it moved meanwhile.

        Raises:
            SyncError: ``dirty``: the change would overwrite an uncommitted edit.
        """
        try:
            move_branch(self.repo, self.branch, local, target, f"kws sync: integrate {self.remote}/{self.rbranch}")
        except RefMoved:
            return False
        except WorkTreeConflict as exc:
            raise SyncError("dirty", f"the remote's changes cannot be brought into {self.repo.working_tree_dir}: "
                            f"{exc}; {KEPT}") from exc
        return True

    def received(self, theirs: str | None, before: int) -> int:
        """Commits taken from the remote since the sync began (``before`` when the remote
        has no branch)."""
        if theirs is None:
            return before
        return _count(self.repo, f"{self.start}..{theirs}" if self.start is not None else theirs)

    def integrate_refs(self, found: dict[str, str]) -> dict[str, str]:
        """Integrate each extra ref with the remote's value; ``{ref: value}`` of those the
        remote lacks or holds at another value (to push)."""
        out = {}
        for ref in self.refs:
            before = rev(self.repo, ref)
            value = integrate_ref(self.repo, ref, _tracking(self.remote, ref), ref in found, self.who)
            if value != before:
                self.touched.add(ref)
            if value is not None and value != found.get(ref):
                out[ref] = value
        return out

    def push(self, pushes: list[str], ahead: int, target: str | None, ref_push: dict[str, str]) -> bool:
        """Push ``pushes`` (atomically when several); True when the remote took them (the
        tracking refs then follow), False when it refused because it moved meanwhile
        (``rejection`` says how).

        Raises:
            SyncError: ``local``, ``push-failed`` or ``rejected`` (a refusal another round
                cannot fix).
        """
        repo = self.repo
        atomic = ["--atomic"] if len(pushes) > 1 else []
        proc = git_result(repo, "push", "--porcelain", *TRANSPORT_PUSH, *atomic, "--no-verify", self.remote, *pushes,
                          env=self.env, timeout=self.timeout)
        if proc.returncode == 0:
            if ahead and target is not None:
                run_git(repo, "update-ref", self.upstream, target, check=False)
                if not repo.config_reader().has_option(f'branch "{self.branch}"', "merge"):
                    run_git(repo, "branch", "-q", f"--set-upstream-to={self.remote}/{self.rbranch}", self.branch,
                            check=False)
            for ref, value in ref_push.items():
                run_git(repo, "update-ref", _tracking(self.remote, ref), value, check=False)
                self.touched.add(ref)
            return True
        out, err = text_of(proc.stdout), text_of(proc.stderr)
        local_fault = _local_fault(repo, err, f"pushing to {self.remote!r}")
        if local_fault is not None:
            raise local_fault
        if not any(ln.startswith("!") for ln in out.splitlines()):
            raise SyncError(
                "push-failed",
                f"push to {self.remote!r} ({self.url}) failed: "
                f"{'; '.join(ln.strip() for ln in err.splitlines() if ln.strip())[-800:]}\n{KEPT}; run kws sync again",
            )
        retry, self.rejection = _push_outcome(out + "\n" + err)
        if not retry:
            raise SyncError(
                "rejected",
                f"the remote {self.remote!r} ({self.url}) refused the push: {self.rejection}\n{KEPT}; the commits "
                "stay here and a later sync sends them once the remote accepts them",
            )
        return False
