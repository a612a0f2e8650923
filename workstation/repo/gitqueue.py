"""The queue as a git repository: opening it, task versions, identities, first-run setup.

A queue (task format v1, "A queue") is a git repository whose root holds ``tasks/``.
kws names the version of a task it judged by the **git tree id** of ``tasks/<id>`` in
``HEAD``: content-addressed, so it survives the rebases that ``kws sync`` does (commit ids
do not).

Which queue: :func:`find_queue` (``--queue``, else the clone holding the current folder,
else the ``queue`` setting, else the first-run queue).

First run: with no ``--queue`` outside any queue, kws uses ``<data dir>/queue``, where the data dir is
``$KWS_DATA_DIR`` or ``platformdirs.user_data_dir("kws")``. If that folder does not exist,
kws copies the bundled ``sample_queue/`` there and makes it a git repository with one
initial commit, using the user's git identity or, where none is set, the fallback identity
``kws <kws@localhost>`` (:data:`FALLBACK_IDENTITY`). Later runs reuse it unchanged.

Records (verdicts, disputes, ...) are committed with the **reviewer's** identity
(:func:`reviewer_identity`), never the fallback: a verdict must say who made it.

**Every git command kws runs goes through** :func:`run_git` (or :func:`git_result`, the
same command with its exit status and stderr), which applies :func:`harden`: the
repository's own hooks and the programs its configuration names never run.
``tests/test_git_one_way.py`` fails when any other module runs git another way. A queue's ``.git/`` can be written by
anyone who could write the work tree (task code runs as the reviewer's user), so its
configuration is not trusted: see :func:`safe_environment` for the list. The user's own
environment and global configuration are trusted (their SSH command, credential helpers).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import git

import workstation
from workstation import settings

__all__ = [
    "EMPTY_HOOKS",
    "FALLBACK_IDENTITY",
    "TRANSPORT_FETCH",
    "TRANSPORT_PUSH",
    "Identity",
    "IdentityError",
    "QueueError",
    "TaskVersion",
    "data_dir",
    "default_queue_path",
    "ensure_default_queue",
    "git_config_get",
    "git_env",
    "git_result",
    "git_text",
    "harden",
    "detached_advice",
    "head_branch",
    "missing_folder",
    "near_names",
    "open_queue",
    "reviewer_identity",
    "run_git",
    "safe_environment",
    "sample_queue_source",
    "state_dir",
    "task_version",
]

_TASK_ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


class QueueError(Exception):
    """The queue cannot be used as asked; the message says why and what to do."""


class IdentityError(QueueError):
    """No git identity (user.name / user.email) for the reviewer."""


@dataclass(frozen=True)
class Identity:
    """A git identity: ``name`` and ``email`` as git uses them for author and committer."""

    name: str
    email: str

    def __str__(self) -> str:
        return f"{self.name} <{self.email}>"


#: The identity of the first-run sample-queue commit when the user has none configured.
FALLBACK_IDENTITY = Identity("kws", "kws@localhost")


@dataclass(frozen=True)
class TaskVersion:
    """The version of ``tasks/<task>`` in a queue.

    ``tree`` is the git tree id (40 hex) of the folder in ``HEAD``, or None where HEAD has
    no such folder (no commit yet, or the task is not committed). ``dirty`` lists the
    paths under the folder (relative to the repository root) where the work tree differs
    from HEAD: modified, staged, deleted or untracked (ignored files excluded). A dirty task
    is not the version ``tree`` names.
    """

    task: str
    tree: str | None
    dirty: tuple[str, ...] = field(default_factory=tuple)

    @property
    def is_dirty(self) -> bool:
        return bool(self.dirty)


# --------------------------------------------------------------------------------------------
# folders


def data_dir() -> Path:
    """Per-user data folder: the ``data_dir`` setting (``$KWS_DATA_DIR`` or
    ``platformdirs.user_data_dir("kws")``)."""
    return settings.current().data_dir


def state_dir() -> Path:
    """Per-user state folder (drafts): ``$KWS_STATE_DIR`` or ``user_state_dir("kws")``."""
    return settings.current().state_dir


def default_queue_path() -> Path:
    """Where the first-run copy of the sample queue lives: ``<data dir>/queue``."""
    return data_dir() / "queue"


def sample_queue_source() -> Path:
    """The bundled sample queue to copy on first run.

    Looks for ``sample_queue/`` next to the ``workstation`` package (a source checkout or an
    editable install), then ``workstation/data/sample_queue`` (package data of a wheel).
    Raises :class:`QueueError` when neither exists.
    """
    pkg = Path(workstation.__file__).resolve().parent
    candidates = [pkg.parent / "sample_queue", pkg / "data" / "sample_queue"]
    for c in candidates:
        if (c / "tasks").is_dir():
            return c
    raise QueueError(
        "this kws install ships no sample queue (looked in "
        + ", ".join(str(c) for c in candidates)
        + "); open a queue with --queue PATH"
    )


# --------------------------------------------------------------------------------------------
# identities


def git_config_get(key: str, repo: git.Repo | None) -> str | None:
    """``git config --get key`` in ``repo`` (None: the user's global and system
    configuration), stripped; None when unset, empty or git fails."""
    try:
        val = git_text(repo, "config", "--get", key)
    except git.GitCommandError:
        return None
    return val.strip() or None


def _identity_or_none(repo: git.Repo | None) -> Identity | None:
    # git's own precedence for an author: GIT_AUTHOR_NAME / GIT_AUTHOR_EMAIL, then the
    # configuration (repository, then global, then system), then $EMAIL for the address.
    name = os.environ.get("GIT_AUTHOR_NAME") or git_config_get("user.name", repo)
    email = (
        os.environ.get("GIT_AUTHOR_EMAIL")
        or git_config_get("user.email", repo)
        or os.environ.get("EMAIL")
    )
    if name and email:
        return Identity(name.strip(), email.strip())
    return None


def reviewer_identity(repo: git.Repo | None = None) -> Identity:
    """The reviewer's git identity, as git would use it to author a commit in ``repo``.

    Reads ``GIT_AUTHOR_NAME``/``GIT_AUTHOR_EMAIL``, then ``git config user.name`` /
    ``user.email`` (repository, global, system), then ``$EMAIL``. git's guess from the
    host name is never used. Raises :class:`IdentityError` with the commands to set it.
    """
    ident = _identity_or_none(repo)
    if ident is None:
        where = f"git -C {repo.working_tree_dir} config" if repo is not None else "git config --global"
        raise IdentityError(
            "no git identity: kws records who made each verdict. Set it with\n"
            f"  {where} user.name 'Your Name'\n"
            f"  {where} user.email you@example.com\n"
            "(or the GIT_AUTHOR_NAME / GIT_AUTHOR_EMAIL environment variables)"
        )
    return ident


def git_env(identity: Identity) -> dict[str, str]:
    """Environment for a git command that commits or rebases as ``identity``.

    Sets author and committer to ``identity`` unless the caller's environment already
    names a committer (``GIT_COMMITTER_NAME``/``_EMAIL``), which git then keeps.
    """
    env = {"GIT_AUTHOR_NAME": identity.name, "GIT_AUTHOR_EMAIL": identity.email}
    if not os.environ.get("GIT_COMMITTER_NAME"):
        env["GIT_COMMITTER_NAME"] = identity.name
    if not os.environ.get("GIT_COMMITTER_EMAIL"):
        env["GIT_COMMITTER_EMAIL"] = identity.email
    return env


# --------------------------------------------------------------------------------------------
# the git environment of every command kws runs

#: ``core.hooksPath`` for every kws git command: a path that can hold no hook (git looks up
#: ``<hooksPath>/<hook name>``, which never exists below ``/dev/null``). Safer than an
#: empty directory, which another process of the same user could fill.
EMPTY_HOOKS = os.devnull

# Keys of the repository's own configuration (``git config --local``, includes followed)
# that name a program git would run, and what kws sets instead ("" disables a filter's
# clean/smudge/process; "cat" is the identity textconv; a merge driver "false" makes a
# content merge a conflict, never a silent resolution).
_PROGRAM_KEYS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^filter\..+\.(clean|smudge|process)$"), ""),
    (re.compile(r"^filter\..+\.required$"), "false"),
    (re.compile(r"^diff\..+\.textconv$"), "cat"),
    (re.compile(r"^diff\..+\.command$"), ""),
    (re.compile(r"^merge\..+\.driver$"), "false"),
    (re.compile(r"^core\.(alternaterefscommand|gitproxy|askpass)$"), ""),
    (re.compile(r"^diff\.external$"), ""),
)
_GLOBAL_FALLBACK = ("gpg.program", "gpg.openpgp.program", "gpg.x509.program", "gpg.ssh.program",
                    "gpg.ssh.defaultkeycommand")
_GPG_DEFAULTS = {"gpg.program": "gpg", "gpg.openpgp.program": "gpg", "gpg.x509.program": "gpgsm",
                 "gpg.ssh.program": "ssh-keygen", "gpg.ssh.defaultkeycommand": ""}


def _config_list(args: list[str], cwd: str | None = None) -> list[tuple[str, str]]:
    """``git config <args> --null --list`` as (key, value) pairs, without the command-line
    settings of the caller's environment (``GIT_CONFIG_COUNT`` / ``GIT_CONFIG_PARAMETERS``
    emptied); [] when git refuses."""
    try:
        out = run_git(None, "config", *args, "--null", "--list", cwd=cwd, check=False, timeout=30,
                      env={"GIT_CONFIG_COUNT": "0", "GIT_CONFIG_PARAMETERS": ""})
    except git.CommandError:  # no git at all
        return []
    pairs = []
    for item in out.decode("utf-8", "replace").split("\0"):
        if item:
            key, _, value = item.partition("\n")
            pairs.append((key.lower(), value))
    return pairs


#: Options of every kws ``git fetch`` / ``git ls-remote``: the program run on the other end
#: is git's own, whatever ``remote.<name>.uploadpack`` says (for a local remote it runs on
#: this machine).
TRANSPORT_FETCH = ("--upload-pack=git-upload-pack",)
#: Options of every kws ``git push`` (``remote.<name>.receivepack`` ignored likewise).
TRANSPORT_PUSH = ("--receive-pack=git-receive-pack",)


def safe_environment(git_dir: str | os.PathLike[str]) -> dict[str, str]:
    """Environment variables that make git ignore what the repository at ``git_dir``
    configures to run, for every command kws runs in it.

    Always: ``core.hooksPath`` = :data:`EMPTY_HOOKS` (no hook runs: pre-commit,
    reference-transaction, post-checkout, pre-push, ...), ``core.fsmonitor=false``,
    ``protocol.ext.allow=never`` (a remote URL ``ext::<command>`` runs a program),
    ``GIT_EDITOR`` / ``GIT_SEQUENCE_EDITOR`` ``true`` and ``GIT_PAGER`` ``cat`` (kws never
    edits or pages), ``GIT_TERMINAL_PROMPT=0`` (nothing waits on a password prompt),
    ``GIT_OPTIONAL_LOCKS=0`` (``git status`` never takes the index lock).

    From the repository's own configuration (``--local``, includes followed), each key that
    names a program is overridden: filters' ``clean`` / ``smudge`` / ``process`` (from
    ``.gitattributes``), diff ``textconv`` / ``command`` and ``diff.external``, merge
    drivers, ``core.askPass``,
    ``core.gitProxy``, ``core.alternateRefsCommand``, the gpg programs (set back to the
    global or system value, else git's default), and credential helpers (the list reset,
    then the global and system helpers again). ``GIT_SSH_COMMAND`` (which wins over
    ``core.sshCommand``) is the caller's own, else the global or system
    ``core.sshCommand``, else ``ssh -o BatchMode=yes`` (no password prompt).

    ``remote.<name>.uploadpack`` / ``receivepack`` cannot be overridden this way (git uses
    the *first* value given): every kws command that reaches a remote passes
    :data:`TRANSPORT_FETCH` / :data:`TRANSPORT_PUSH` on its command line instead.

    The overrides are ``GIT_CONFIG_COUNT`` / ``GIT_CONFIG_KEY_<n>`` / ``GIT_CONFIG_VALUE_<n>``
    (git >= 2.31; command-line scope, which wins over every file), appended after any the
    caller's environment already sets.
    """
    git_dir = os.fspath(git_dir)
    pairs: list[tuple[str, str]] = [
        ("core.hooksPath", EMPTY_HOOKS),
        ("core.fsmonitor", "false"),
        ("protocol.ext.allow", "never"),
    ]
    local = _config_list(["--file", str(Path(git_dir) / "config"), "--includes"])
    glob: list[tuple[str, str]] | None = None

    def global_values() -> list[tuple[str, str]]:
        nonlocal glob
        if glob is None:
            glob = _config_list(["--global"]) + _config_list(["--system"])
        return glob

    pairs += _program_overrides(local, global_values)
    env = _config_env(pairs)
    env.update({"GIT_EDITOR": "true", "GIT_SEQUENCE_EDITOR": "true", "GIT_PAGER": "cat",
                "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0"})
    if "GIT_SSH_COMMAND" not in os.environ and "GIT_SSH" not in os.environ:
        ssh = [v for k, v in global_values() if k == "core.sshcommand"]
        env["GIT_SSH_COMMAND"] = ssh[-1] if ssh else "ssh -o BatchMode=yes"
    return env


def _program_overrides(local: list[tuple[str, str]],
                       global_values: Callable[[], list[tuple[str, str]]]) -> list[tuple[str, str]]:
    """The ``(key, value)`` overrides of the repository's own keys (``local``) that name a
    program (:func:`safe_environment`), a gpg program set back to ``global_values()``'s
    (global, then system) or git's default, and the credential helpers reset to the
    global and system ones."""
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    for key, _value in local:
        if key in seen:
            continue
        seen.add(key)
        replacement = next((r for pattern, r in _PROGRAM_KEYS if pattern.match(key)), None)
        if replacement is not None:
            pairs.append((key, replacement))
        elif key in _GLOBAL_FALLBACK:
            theirs = [v for k, v in global_values() if k == key]
            pairs.append((key, theirs[-1] if theirs else _GPG_DEFAULTS.get(key, "")))
    if any(k == "credential.helper" or (k.startswith("credential.") and k.endswith(".helper")) for k in seen):
        pairs.append(("credential.helper", ""))
        pairs.extend(("credential.helper", v) for k, v in global_values() if k == "credential.helper")
    return pairs


def _config_env(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """``GIT_CONFIG_COUNT`` / ``GIT_CONFIG_KEY_<n>`` / ``GIT_CONFIG_VALUE_<n>`` for ``pairs``,
    numbered after any the caller's environment already sets."""
    env: dict[str, str] = {}
    try:
        base = int(os.environ.get("GIT_CONFIG_COUNT", "0") or 0)
    except ValueError:
        base = 0
    for i, (key, value) in enumerate(pairs, start=base):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    env["GIT_CONFIG_COUNT"] = str(base + len(pairs))
    return env


def harden(repo: git.Repo) -> git.Repo:
    """Apply :func:`safe_environment` to every later command of ``repo.git`` (GitPython's
    persistent environment, merged under each call's own ``env``), once; returns ``repo``.

    Called by :func:`open_queue` and at the start of every records function that receives
    a repository, so a ``git.Repo`` made elsewhere is hardened before kws runs git in it.
    """
    if repo.git.environment().get("KWS_GIT_HARDENED") != repo.git_dir:
        repo.git.update_environment(**safe_environment(repo.git_dir), KWS_GIT_HARDENED=repo.git_dir)
    return repo


# --------------------------------------------------------------------------------------------
# the one way kws runs git


def git_result(
    repo: git.Repo | None,
    *args: str,
    input: bytes | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = 300.0,
    cwd: str | os.PathLike[str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``git <args>`` and return the completed process (exit status, stdout and stderr
    as bytes) whatever the exit status. The one place kws starts git.

    In ``repo`` (its work tree; its git dir for a bare one), through GitPython's
    ``Git.execute`` with the hardened environment (:func:`harden`: the caller's environment,
    ``LC_ALL=C``, :func:`safe_environment`, then ``env``). ``repo`` None: outside any
    repository kws opened (``git init``, the user's global and system configuration), in
    ``cwd`` (default: the current folder) with the caller's environment and ``env``.

    ``input`` is written to git's stdin (from a temporary file: GitPython passes stdin to
    ``Popen`` as a file). A git still running after ``timeout`` seconds (None: no limit) is
    killed with its children (``SIGKILL``); its exit status is then negative and stderr
    says ``Timeout: ... did not complete in <timeout> secs``.

    Raises:
        git.GitCommandNotFound: there is no ``git`` executable.
    """
    runner = harden(repo).git if repo is not None else git.Git(cwd)
    cmd = [runner.GIT_PYTHON_GIT_EXECUTABLE or "git", *args]
    with contextlib.ExitStack() as stack:
        stdin = None
        if input is not None:
            stdin = stack.enter_context(tempfile.TemporaryFile())
            stdin.write(input)
            stdin.seek(0)
        before = set(threading.enumerate())
        try:
            status, out, err = runner.execute(
                cmd, istream=stdin, env=dict(env) if env else None, with_extended_output=True,
                with_exceptions=False, stdout_as_string=False, strip_newline_in_stdout=False,
                kill_after_timeout=timeout)
        except BaseException:
            _cancel_watchdogs(before)
            raise
    return subprocess.CompletedProcess(cmd, status, out or b"", os.fsencode(err))


def _cancel_watchdogs(before: set[threading.Thread]) -> None:
    """Cancel the ``kill_after_timeout`` watchdog GitPython started for a call that an
    exception (``KeyboardInterrupt`` on ctrl+c, ``SystemExit``) left mid-``communicate``.

    GitPython's ``Git.execute`` starts a non-daemon ``threading.Timer`` and cancels it only
    when ``communicate`` returns; interrupted, the timer lives on and the interpreter waits
    for it at exit: a ctrl+c'd ``kws verdict`` or ``kws sync`` lingered for the whole git
    timeout (300 s) before it exited. The timers started during the call (not alive
    ``before`` it) whose function is GitPython's ``kill_process`` are cancelled.
    """
    for t in threading.enumerate():
        if t not in before and isinstance(t, threading.Timer) and \
                getattr(t.function, "__qualname__", "").endswith("kill_process"):
            t.cancel()


def run_git(
    repo: git.Repo | None,
    *args: str,
    input: bytes | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    timeout: float | None = 300.0,
    cwd: str | os.PathLike[str] | None = None,
) -> bytes:
    """Run ``git <args>`` like :func:`git_result` (hardened, in ``repo``); returns stdout.

    Raises:
        git.GitCommandError: git exited non-zero (with ``check``; ``stderr`` and ``stdout``
            are kept on the exception), or did not finish in ``timeout`` seconds (it was
            killed; the exit status is negative).
        git.GitCommandNotFound: there is no ``git`` executable.
    """
    proc = git_result(repo, *args, input=input, env=env, timeout=timeout, cwd=cwd)
    if check and proc.returncode != 0:
        raise git.GitCommandError(proc.args, proc.returncode, proc.stderr, proc.stdout)
    return proc.stdout


def git_text(repo: git.Repo | None, *args: str, env: Mapping[str, str] | None = None,
             timeout: float | None = 300.0) -> str:
    """:func:`run_git`'s stdout as text (UTF-8; undecodable bytes kept as surrogates, as
    :func:`os.fsdecode` does), one trailing newline removed.

    Raises:
        git.GitCommandError: as :func:`run_git`.
    """
    out = run_git(repo, *args, env=env, timeout=timeout).decode("utf-8", "surrogateescape")
    return out[:-1] if out.endswith("\n") else out


# --------------------------------------------------------------------------------------------
# opening a queue


def open_queue(path: Path | str) -> git.Repo:
    """Open the queue at ``path`` as a git repository.

    ``path`` must be the repository's root (a queue *is* a repository: its records live at
    ``verdicts/``, ``disputes/``, ... next to ``tasks/``). Raises :class:`QueueError` when
    the folder does not exist, is not a git repository, or is a subfolder of one.
    """
    p = Path(path).expanduser()
    if not p.exists():
        raise QueueError(missing_folder(p))
    if not p.is_dir():
        raise QueueError(f"{p}: not a folder; a queue is a git repository's folder")
    try:
        repo = git.Repo(p, search_parent_directories=True)
    except git.InvalidGitRepositoryError as exc:
        raise QueueError(
            f"{p}: not a git repository; a queue is one (create it with: git -C {p} init)"
        ) from exc
    except git.NoSuchPathError as exc:
        raise QueueError(f"{p}: no such folder") from exc
    if repo.bare or repo.working_tree_dir is None:
        raise QueueError(f"{p}: a bare repository has no work tree; clone it to review")
    root = Path(repo.working_tree_dir).resolve()
    if root != p.resolve():
        raise QueueError(
            f"{p}: inside the git repository {root} but not its root; a queue is a git "
            "repository of its own (task format v1)"
        )
    return harden(repo)


def work_tree(repo: git.Repo) -> Path:
    """The root folder of ``repo``'s work tree (a queue always has one: :func:`open_queue`
    refuses a bare repository).

    Raises:
        QueueError: ``repo`` is bare.
    """
    if repo.working_tree_dir is None:
        raise QueueError(f"{repo.git_dir}: a bare repository has no work tree; clone it to review")
    return Path(repo.working_tree_dir)


def near_names(name: str, folder: Path, limit: int = 3) -> list[str]:
    """Up to ``limit`` entries of ``folder`` whose names are close to ``name``
    (:func:`difflib.get_close_matches`); [] when the folder cannot be listed."""
    import difflib

    try:
        names = [p.name for p in folder.iterdir()]
    except OSError:
        return []
    return difflib.get_close_matches(name, names, n=limit, cutoff=0.6)


def missing_folder(p: Path) -> str:
    """``"<p>: no such folder"``, with the nearest names in its parent folder when there
    are some (``did you mean ...``) or the first part of the path that does not exist."""
    parent = p.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if parent != p.parent:
        return f"{p}: no such folder ({parent} has no {p.relative_to(parent).parts[0]})"
    near = near_names(p.name, parent)
    return f"{p}: no such folder" + (f"; did you mean {', '.join(str(parent / n) for n in near)}?" if near else "")


def head_branch(repo: git.Repo) -> str | None:
    """The checked-out branch name, or None on a detached HEAD."""
    try:
        return repo.active_branch.name
    except TypeError:  # gitpython: "HEAD is a detached symbolic reference"
        return None


def detached_advice(repo: git.Repo) -> str:
    """What a detached HEAD in ``repo`` is and what to do, in one sentence or two: the
    commit it is at, a rebase or merge in progress (which detaches HEAD), and the branches
    that contain the commit (or how to keep it on a new one)."""
    harden(repo)
    wt = repo.working_tree_dir
    gd = Path(repo.git_dir)
    try:
        head = git_text(repo, "log", "-1", "--format=%h %s").strip()
    except git.GitCommandError:
        head = "an unknown commit"
    for name in ("rebase-merge", "rebase-apply"):
        state = gd / name
        if state.is_dir():
            try:
                branch = (state / "head-name").read_text().strip().removeprefix("refs/heads/")
            except OSError:
                branch = "a branch"
            return (f"HEAD is detached at {head} because a rebase of {branch} is in progress in {wt} "
                    f"(not started by kws); finish it (git -C {wt} rebase --continue) or undo it "
                    f"(git -C {wt} rebase --abort), then run the command again")
    try:
        # for-each-ref, not `git branch --contains`: that lists the detached HEAD itself as
        # "(HEAD detached at ...)", which is no branch name
        branches = [b.strip() for b in git_text(repo, "for-each-ref", "--contains", "HEAD", "--format=%(refname:short)",
                                                "refs/heads").splitlines() if b.strip()]
    except git.GitCommandError:
        branches = []
    if branches:
        return (f"HEAD is detached at {head} in {wt} (someone ran git checkout of a commit); it is on "
                f"{', '.join(branches[:5])}: check out that branch (git -C {wt} switch {branches[0]}) and run "
                "the command again")
    return (f"HEAD is detached at {head} in {wt} and no branch contains that commit; keep it on a branch "
            f"(git -C {wt} switch -c NAME) or go back to yours (git -C {wt} switch BRANCH), then run the "
            "command again")


def task_version(repo: git.Repo, task_id: str) -> TaskVersion:
    """The git tree id of ``tasks/<task_id>`` in HEAD and whether the work tree differs.

    Raises:
        QueueError: ``task_id`` is not a task id, or git cannot compare the work tree
            with HEAD (a damaged index: the message says how to rebuild it).
    """
    if not _TASK_ID_RE.match(task_id):
        raise QueueError(f"{task_id!r} is not a task id ([a-z0-9][a-z0-9._-]*)")
    harden(repo)
    rel = f"tasks/{task_id}"
    tree: str | None = None
    try:
        head_tree = repo.head.commit.tree
    except ValueError:  # no commit yet
        head_tree = None
    if head_tree is not None:
        try:
            obj = head_tree / rel
        except KeyError:
            obj = None
        if obj is not None and obj.type == "tree":
            tree = obj.hexsha
    try:
        status = git_text(repo, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--", rel)
    except git.GitCommandError as exc:
        err = exc.stderr if isinstance(exc.stderr, str) else bytes(exc.stderr or b"").decode("utf-8", "replace")
        why = [ln.strip().strip("'") for ln in err.replace("stderr:", "").splitlines() if ln.strip().strip("'")]
        wt = repo.working_tree_dir
        raise QueueError(f"git cannot compare tasks/{task_id} with HEAD in {wt} ({why[-1] if why else exc}); if the "
                         f"index is damaged, rebuild it from HEAD: git -C {wt} read-tree HEAD (work-tree files stay "
                         "as they are)") from exc
    paths: set[str] = set()
    tokens = iter(status.split("\0"))
    for entry in tokens:
        if len(entry) < 4:
            continue
        paths.add(entry[3:])
        if "R" in entry[:2] or "C" in entry[:2]:
            paths.add(next(tokens, ""))  # -z: a rename's source path follows as its own field
    paths.discard("")
    return TaskVersion(task=task_id, tree=tree, dirty=tuple(sorted(paths)))


# --------------------------------------------------------------------------------------------
# first run


_QUEUE_GITIGNORE = "__pycache__/\n*.pyc\n"


def ensure_default_queue(
    source: Path | str | None = None, dest: Path | str | None = None
) -> Path:
    """Return the first-run queue, creating it from the sample queue if it does not exist.

    ``dest`` defaults to :func:`default_queue_path`, ``source`` to
    :func:`sample_queue_source`. The copy is built in a temporary sibling folder (without
    ``__pycache__``), made a git repository on branch ``main`` with one commit
    ("kws: sample queue"), then renamed into place, so a crash never leaves a half-made
    queue and two first runs at once end with one queue. The commit's author and
    committer are the user's git identity, else :data:`FALLBACK_IDENTITY`.

    An existing ``dest`` is reused as is; one that is not a git repository raises
    :class:`QueueError` (kws does not overwrite a folder it did not make).
    """
    dest = Path(dest) if dest is not None else default_queue_path()
    if dest.exists():
        open_queue(dest)  # raises QueueError when it is not a queue
        return dest
    src = Path(source) if source is not None else sample_queue_source()
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".queue-", dir=dest.parent))
    try:
        work = tmp / "queue"
        shutil.copytree(src, work, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        if not (work / ".gitignore").exists():
            (work / ".gitignore").write_text(_QUEUE_GITIGNORE, encoding="utf-8")
        run_git(None, "init", "-q", "--initial-branch=main", str(work))
        repo = git.Repo(work)
        ident = _identity_or_none(repo) or FALLBACK_IDENTITY
        run_git(repo, "add", "--all", ".")
        run_git(repo, "commit", "-q", "--no-verify", "-m", f"kws: sample queue\n\nCopied from {src} on first run.",
                env=git_env(ident))
        repo.close()
        try:
            os.rename(work, dest)
        except OSError:
            if not dest.exists():
                raise
            # another kws made it first: use theirs
        open_queue(dest)
        return dest
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
