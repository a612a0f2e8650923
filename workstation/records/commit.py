"""Committing a record file: one new file, one commit of its own, by git plumbing under
kws's lock, never edited afterwards (:func:`commit_record`); what a record's author is
told right after (an unverified signature, a clock that looks wrong).

:mod:`workstation.records.store` decides what each record kind holds and calls
:func:`commit_record`; this module owns how the file becomes a commit: the read-back check
(the record as :func:`~workstation.records.parse.load_records` will read it), the commit
built in a temporary index (``commit-tree``, signed where the queue's committed policy and
the reviewer's git set-up say so), and the journaled branch move
(:func:`~workstation.repo.plumbing.move_branch`). No hook runs; nothing the reviewer has
staged is touched.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import git
import tomli_w

from workstation.records.format import MAX_RECORD_BYTES, parse_record
from workstation.records.model import RecordError
from workstation.repo.gitqueue import Identity, detached_advice, git_env, harden, head_branch
from workstation.repo.lock import queue_lock
from workstation.repo.plumbing import (
    RefMoved,
    StorageError,
    WorkTreeConflict,
    commit_tree,
    move_branch,
    rev,
    run_git,
    storage_advice,
    storage_fault,
    temp_index,
    tree_of,
)
from workstation.schema.problem import Problem
from workstation.schema.text import safe_tree
from workstation.schema.toml import parse_toml_bytes

__all__ = ["CLOCK_ALLOWANCE", "check_branch", "clock_warnings", "commit_record", "rfc3339"]

#: How far a new record's time may be from its commit's dates, and before the commit it
#: follows or the newest commit fetched from a remote, before its author is warned.
CLOCK_ALLOWANCE = timedelta(hours=1)

log = logging.getLogger("workstation.records")


def rfc3339(ts: datetime) -> str:
    """``ts`` in UTC as RFC 3339 with a ``Z`` (``2025-01-31T12:00:00.123456Z``)."""
    return ts.astimezone(UTC).isoformat().replace("+00:00", "Z")


def check_branch(repo: git.Repo, what: str) -> str:
    """The branch HEAD is on, where a record (``what``: its kind) is committed.

    Raises:
        RecordError: HEAD is detached, or a merge is in progress.
    """
    harden(repo)
    branch = head_branch(repo)
    if branch is None:
        raise RecordError(f"{what} not committed: {detached_advice(repo)}")
    git_dir = Path(repo.git_dir)
    if (git_dir / "MERGE_HEAD").exists():
        raise RecordError(
            f"{what} not committed: a merge is in progress in {repo.working_tree_dir} (git merge left "
            f"MERGE_HEAD); finish it (git -C {repo.working_tree_dir} commit) or undo it "
            f"(git -C {repo.working_tree_dir} merge --abort) and try again")
    return branch


_MOVE_ATTEMPTS = 20


def commit_record(
    repo: git.Repo, kind: str, task: str, rel: Path, data: Mapping[str, Any], message: str, who: Identity
) -> Any:
    """Commit ``data`` as a new TOML file at ``rel`` (must not exist) and return the record
    as every reader will see it.

    The file is read back first, as :func:`~workstation.records.parse.load_records` reads
    it (size, depth, schema): a record kws could not read is a RecordError and never
    committed. The commit is built with plumbing in a temporary index (the blob, a tree of
    HEAD's tree plus that file, ``commit-tree``), then the branch is moved by
    :func:`~workstation.repo.plumbing.move_branch` under kws's lock: killed before that the
    queue is unchanged; after it the commit exists and the next kws command finishes
    writing the file to the index and work tree. Nothing the reviewer has staged is
    touched or committed. No hook runs.
    """
    # a record stores task-derived text (evidence, exception texts, titles): control
    # characters and escape sequences escaped (schema.text), never raw in the queue
    payload = tomli_w.dumps(safe_tree(dict(data), None)).encode("utf-8")
    if len(payload) > MAX_RECORD_BYTES:
        raise RecordError(f"{kind} not committed: {len(payload)} bytes, over the {MAX_RECORD_BYTES}-byte record limit")
    try:
        record = parse_record(kind, parse_toml_bytes(payload, rel, max_bytes=MAX_RECORD_BYTES), task, rel)
    except Problem as p:
        raise RecordError(f"{kind} not committed: it would not read back ({p})") from None
    posix = rel.as_posix()
    env = git_env(who)
    sign, policy = _signing(repo, kind)
    with queue_lock(repo):
        branch = check_branch(repo, kind)
        commit: str | None = None
        try:
            for _ in range(_MOVE_ATTEMPTS):
                old = rev(repo, f"refs/heads/{branch}")
                commit = _build_commit(repo, kind, posix, payload, old, message, env, sign)
                try:
                    move_branch(repo, branch, old, commit, f"kws {kind}: {task}")
                except RefMoved:
                    continue  # the reviewer's own git committed meanwhile: build on the new tip
                except WorkTreeConflict as exc:
                    raise RecordError(f"{kind} not committed: {exc}") from exc
                _warn_clock(repo, record, commit)
                _warn_unverified(repo, record, commit, sign, policy)
                return record
        except (OSError, git.GitCommandError) as exc:
            fault = storage_fault(exc)
            if fault is None:
                raise
            where = repo.working_tree_dir or repo.git_dir
            if commit is not None and rev(repo, f"refs/heads/{branch}") == commit:
                log.warning("warning: the %s is committed (%s) but %s could not be brought into the work tree: %s; "
                            "the next kws command finishes that once it can write", kind, commit[:12], posix,
                            storage_advice(fault, where))
                return record
            raise StorageError(fault, f"{kind} not committed (the branch is unchanged): "
                               f"{storage_advice(fault, where)} [{_short(exc)}]") from exc
    raise RecordError(f"{kind} not committed: {branch} kept moving ({_MOVE_ATTEMPTS} tries); try again")


def _build_commit(repo: git.Repo, kind: str, posix: str, payload: bytes, old: str | None, message: str,
                  env: Mapping[str, str], sign: bool) -> str:
    """A commit (not on any branch yet) of ``old``'s tree plus the file ``posix`` holding
    ``payload``, built in a temporary index; its id.

    Raises:
        RecordError: ``posix`` already exists in ``old``, or git could not sign the commit.
        git.GitCommandError: any other git failure (a storage fault among them).
    """
    blob = run_git(repo, "hash-object", "-w", "--stdin", input=payload).decode().strip()
    with temp_index(repo, tree_of(repo, old) if old else None) as ienv:
        if run_git(repo, "ls-files", "-z", "--", posix, env=ienv):
            raise RecordError(f"{kind} not committed: {posix} already exists in HEAD")
        run_git(repo, "update-index", "--add", "--cacheinfo", f"100644,{blob},{posix}", env=ienv)
        tree = run_git(repo, "write-tree", env=ienv).decode().strip()
    try:
        return commit_tree(repo, tree, [old] if old else [], message, env, sign=sign)
    except git.GitCommandError as exc:
        if not sign or storage_fault(exc) is not None:
            raise
        raise RecordError(f"{kind} not committed: git could not sign the commit ({_short(exc)}); check "
                          "your signing key (kws signing setup)") from exc


def _signing(repo: git.Repo, kind: str) -> tuple[bool, Any]:
    """Whether a record commit is signed, and the queue's committed policy
    (:func:`~workstation.records.signing.records_policy`): signed whenever the reviewer set
    up SSH signing, also in a queue that does not check signatures (``kws signing setup``
    says so: the records are ready for a queue that turns the checks on). Refused
    (RecordError, nothing committed) when the queue has an allowed-signers file, so only a
    signed record counts, but the reviewer cannot sign."""
    from workstation.records.signing import records_policy, signing_key

    policy = records_policy(repo)
    if signing_key(repo) is not None:
        return True, policy
    if policy.off:
        return False, policy
    if policy.signers is not None:
        raise RecordError(f"{kind} not committed: this queue counts only signed records (its allowed signers are "
                          f"{policy.allowed_signers}) and git has no SSH signing key set up here; set it up once "
                          "with: kws signing setup --apply (it prints the line an owner adds to the allowed signers)")
    return False, policy


def _warn_unverified(repo: git.Repo, record: Any, commit: str, signed: bool, policy: Any) -> None:
    """Tell the author at once when the record just committed will not count."""
    from workstation.records.signing import check_commit

    v = check_commit(repo, commit, record.reviewer.email, policy=policy)
    if not v.ok:
        log.warning("warning: %s %s is committed but unverified, so it is not counted: %s%s", record.kind,
                    record.id[:8], v.why, "" if signed else "; set up signing with kws signing setup")


def _short(exc: BaseException) -> str:
    """The last line of ``exc``'s text (git's stderr for a git error)."""
    text = exc.stderr if isinstance(exc, git.GitCommandError) else str(exc)
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    lines = [ln.strip().strip("'") for ln in str(text).replace("stderr:", "").splitlines() if ln.strip().strip("'")]
    return lines[-1][:300] if lines else type(exc).__name__


def _iso(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.strip()).astimezone(UTC)
    except ValueError:
        return None


def clock_warnings(repo: git.Repo, when: datetime, commit: str) -> list[str]:
    """Why the time ``when`` of a record committed as ``commit`` looks wrong: more than
    :data:`CLOCK_ALLOWANCE` from the commit's author or committer date (a
    ``GIT_AUTHOR_DATE`` / ``GIT_COMMITTER_DATE`` in the environment), or before the commit
    it follows or the newest commit fetched from a remote (this machine's clock is behind).
    Empty when nothing looks wrong. A record's place in the history, not its time, decides
    which record is current, so a wrong clock misleads only the times shown."""
    out: list[str] = []
    lines = run_git(repo, "log", "-2", "--format=%aI %cI %h %an", commit).decode("utf-8", "replace").splitlines()
    if not lines:
        return out
    author, committer = (_iso(x) for x in lines[0].split(" ", 2)[:2])
    for label, t in (("author", author), ("committer", committer)):
        if t is not None and abs(t - when) > CLOCK_ALLOWANCE:
            out.append(f"the record is dated {rfc3339(when)} but its commit's {label} date is {rfc3339(t)} "
                       f"({abs(t - when).total_seconds() / 3600:.1f} h apart; is GIT_{label.upper()}_DATE set?)")
    refs = []
    if len(lines) > 1:
        parts = lines[1].split(" ", 3)
        refs.append((_iso(parts[1]), f"the commit it follows ({parts[2]} by {parts[3] if len(parts) > 3 else '?'})"))
    newest = run_git(repo, "for-each-ref", "--sort=-committerdate", "--count=1",
                     "--format=%(committerdate:iso-strict) %(refname:short)", "refs/remotes").decode().split()
    if newest:
        refs.append((_iso(newest[0]), f"the newest commit fetched from the remote ({newest[1] if len(newest) > 1 else ''})"))
    for t, what in refs:
        if t is not None and when < t - CLOCK_ALLOWANCE:
            out.append(f"the record is dated {rfc3339(when)}, {(t - when).total_seconds() / 3600:.1f} h before "
                       f"{what}: this machine's clock looks behind")
            break
    return out


def _warn_clock(repo: git.Repo, record: Any, commit: str) -> None:
    for w in clock_warnings(repo, record.timestamp, commit):
        log.warning("warning: %s %s: %s. Its place in the history, not its time, decides which record is "
                    "current; fix the clock (NTP) so that the times shown are right", record.kind, record.id[:8], w)
