"""Starting a shared queue (``kws queue init``) and adding reviewers' keys to it (``kws
signing add``): docs/records.md, "A team's queue".

:func:`init_queue` makes, in one step, what a team of reviewers needs: a queue repository
on branch ``main`` (``queue.toml``, ``tasks/``, ``.gitignore`` and, where signatures are
required, ``.kws/allowed_signers`` listing the owner's key and the keys given), committed
in one commit signed by the owner, and a shared remote others can clone: a new bare
repository whose ``HEAD`` names ``main`` (a bare repository made with a plain ``git init
--bare`` keeps ``HEAD`` on ``master`` on many systems, and a clone of it comes out empty
while kws pushes ``main``), or an existing one whose ``HEAD`` kws points at ``main`` when it
is a local folder. :func:`add_signers` commits more allowed-signers lines, signed.

Every git command runs through :func:`workstation.repo.gitqueue.run_git`.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import git

from workstation.records.model import RecordError
from workstation.records.signing import DEFAULT_SIGNERS, records_policy, setup_plan, signing_key
from workstation.repo.gitqueue import (
    TRANSPORT_PUSH,
    Identity,
    git_env,
    harden,
    head_branch,
    run_git,
)
from workstation.repo.lock import queue_lock
from workstation.repo.plumbing import commit_tree, move_branch, rev, temp_index, tree_of

__all__ = ["BRANCH", "InitResult", "add_signers", "init_queue", "is_local_remote", "signer_line"]

#: the branch a new queue is on (and the one its remote's HEAD names).
BRANCH = "main"

_SIGNER_RE = re.compile(r"^\S+@\S+\s+(namespaces=\"git\"\s+)?(ssh-[a-z0-9-]+|ecdsa-[a-z0-9-]+|sk-[a-z0-9@.-]+)\s+"
                        r"[A-Za-z0-9+/=]+(\s.*)?$")

_GITIGNORE = "__pycache__/\n*.pyc\n"
_TASKS_README = ("Each task is a folder here: tasks/<task-id>/ with task.toml, the spec, the candidate and the "
                 "reference (docs/task-format.md in kws).\n")


def signer_line(text: str, where: str) -> str:
    """``text`` as one allowed-signers line (``email namespaces="git" ssh-ed25519 AAAA...``,
    what ``kws signing setup`` prints), stripped.

    Raises:
        RecordError: it is not such a line (``where`` names where it came from).
    """
    line = " ".join(text.split())
    if not _SIGNER_RE.match(line):
        raise RecordError(f"{where}: {text.strip()[:120]!r} is not an allowed-signers line (EMAIL "
                          "namespaces=\"git\" ssh-ed25519 AAAA...: what kws signing setup prints)")
    return line


def is_local_remote(remote: str) -> bool:
    """Whether ``remote`` names a folder on this machine (a path or ``file://``), not a URL
    (``ssh://``, ``https://``) or an scp-like ``host:path``."""
    if remote.startswith("file://"):
        return True
    if "://" in remote:
        return False
    head = remote.split("/", 1)[0]
    return ":" not in head


@dataclass
class InitResult:
    """What :func:`init_queue` made: the queue's folder, its remote (None: none), the
    allowed-signers lines committed, whether the first commit is signed, and ``notes``
    for the owner (a remote whose HEAD kws could not set, ...)."""

    root: Path
    remote: str | None
    signers: list[str]
    signed: bool
    notes: list[str] = field(default_factory=list)

    def reviewer_steps(self) -> list[str]:
        """What each reviewer runs to join (one command per line)."""
        src = self.remote or str(self.root)
        steps = [f"git clone {src} {self.root.name}", f"cd {self.root.name}",
                 "git config user.name 'Your Name'; git config user.email you@example.com   (once, if not set)"]
        if self.signers:
            steps.append("kws signing setup --apply --local   (prints your allowed-signers line: send it to the "
                         "owner, who runs kws signing add 'LINE' in their clone)")
        steps.append("kws   (the review app on this clone: no --queue needed inside it; kws verdict, dispute, "
                     "resolve and sync likewise)")
        return steps


def init_queue(dest: Path, who: Identity, *, name: str | None = None, remote: str | None = None,
               signatures: str = "required", signers: list[str] | None = None,
               tasks_from: Path | None = None, rubric: str = "kernel-review") -> InitResult:
    """Make a shared queue at ``dest`` (a folder that does not exist, or an empty one).

    ``signatures``: ``required`` (the default: ``.kws/allowed_signers`` lists the owner's
    key, from git's ``user.signingkey``, and each of ``signers``; the first commit is signed
    with it) or ``off`` (a queue whose records are not signed). ``tasks_from``: a folder whose
    task folders (each with ``task.toml``) are copied into ``tasks/``. ``remote``: a shared
    remote to push ``main`` to: a local folder that does not exist becomes a bare repository
    whose ``HEAD`` names ``main``; an existing local bare repository gets its ``HEAD``
    pointed at ``main``; a URL is pushed to as it is (the owner is told to check its
    ``HEAD``). The clone's ``main`` then tracks ``origin/main``.

    Raises:
        RecordError: ``dest`` holds files, ``signatures`` is required but git has no SSH
            signing key (or its public key cannot be read), a ``signers`` line is not an
            allowed-signers line, ``tasks_from`` holds no task folder, or the remote exists
            and already has commits on ``main`` or is not a git repository.
        git.GitCommandError: git failed (the push's own words in its ``stderr``).
    """
    if signatures not in ("required", "off"):
        raise RecordError(f"signatures: {signatures!r}; expected required or off")
    dest = dest.expanduser()
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise RecordError(f"{dest}: exists and is not an empty folder; kws queue init makes a new queue")
    lines = [signer_line(s, "--signer") for s in signers or []]
    key = None
    if signatures == "required":
        key = signing_key(None)
        if key is None:
            raise RecordError("this queue will count only signed records, and git has no SSH signing key set up "
                              "here: run kws signing setup --apply first (or --signatures off for a queue whose "
                              "records are not signed)")
    task_dirs = _task_dirs(tasks_from) if tasks_from is not None else []
    dest.mkdir(parents=True, exist_ok=True)
    made = not any(dest.iterdir())
    try:
        run_git(None, "init", "-q", f"--initial-branch={BRANCH}", str(dest))
        repo = harden(git.Repo(dest))
        if key is not None:
            plan = setup_plan(repo, who, key)
            if plan.line is None:
                raise RecordError("; ".join(plan.problems) or f"cannot read the public key of {key}")
            lines = [plan.line, *(ln for ln in lines if ln != plan.line)]
        _write_files(dest, name or dest.name, rubric, signatures, lines, task_dirs)
        run_git(repo, "add", "--all", ".")
        args = ["commit", "-q", "--no-verify", *(["-S"] if key is not None else []), "-m",
                f"kws: new queue {name or dest.name}\n\n"
                + ("Allowed signers: " + ", ".join(ln.split(" ", 1)[0] for ln in lines) if lines
                   else "Records are not signed in this queue.")]
        run_git(repo, *args, env=git_env(who))
    except BaseException:
        if made:
            shutil.rmtree(dest / ".git", ignore_errors=True)
        raise
    result = InitResult(dest, remote, lines, key is not None)
    if remote is not None:
        _share(repo, remote, result)
    repo.close()
    return result


def _task_dirs(folder: Path) -> list[Path]:
    """The task folders of ``folder`` (``folder`` itself when it is one, else its
    sub-folders with a ``task.toml``; a queue's ``tasks/`` when given its root).

    Raises:
        RecordError: no task folder there.
    """
    folder = folder.expanduser()
    if (folder / "tasks").is_dir():
        folder = folder / "tasks"
    if (folder / "task.toml").is_file():
        return [folder]
    found = sorted(p for p in folder.iterdir() if (p / "task.toml").is_file()) if folder.is_dir() else []
    if not found:
        raise RecordError(f"--tasks {folder}: no task folder (a folder with task.toml) there")
    return found


def _write_files(dest: Path, name: str, rubric: str, signatures: str, lines: list[str],
                 task_dirs: list[Path]) -> None:
    import tomli_w

    table: dict[str, object] = {"name": name, "rubric": rubric,
                                "records": {"signatures": signatures, **(
                                    {"allowed_signers": DEFAULT_SIGNERS} if signatures == "required" else {})}}
    (dest / "queue.toml").write_text("# a shared kws queue (docs/records.md, \"A team's queue\")\n"
                                     + tomli_w.dumps(table), encoding="utf-8")
    (dest / ".gitignore").write_text(_GITIGNORE, encoding="utf-8")
    tasks = dest / "tasks"
    tasks.mkdir()
    (tasks / "README.md").write_text(_TASKS_README, encoding="utf-8")
    for d in task_dirs:
        shutil.copytree(d, tasks / d.name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    if signatures == "required":
        f = dest / DEFAULT_SIGNERS
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("".join(f"{ln}\n" for ln in lines), encoding="utf-8")


def _share(repo: git.Repo, remote: str, result: InitResult) -> None:
    """Make or prepare the remote, add it as ``origin``, push ``main`` and track it."""
    if is_local_remote(remote):
        path = Path(remote.removeprefix("file://")).expanduser()
        if not path.exists():
            run_git(None, "init", "-q", "--bare", f"--initial-branch={BRANCH}", str(path))
        else:
            try:
                bare = harden(git.Repo(path))
            except (git.InvalidGitRepositoryError, git.NoSuchPathError) as exc:
                raise RecordError(f"--remote {path}: exists and is not a git repository") from exc
            with bare:
                if not bare.bare:
                    raise RecordError(f"--remote {path}: a clone with a work tree; the shared remote is a bare "
                                      f"repository (git init --bare), or a new folder kws makes one in")
                if rev(bare, f"refs/heads/{BRANCH}") is not None:
                    raise RecordError(f"--remote {path}: already has a {BRANCH} branch; clone it instead")
                run_git(bare, "symbolic-ref", "HEAD", f"refs/heads/{BRANCH}")
                result.notes.append(f"{path}: HEAD now names {BRANCH}, the branch kws pushes (clones of it check it "
                                    "out)")
    else:
        result.notes.append(f"{remote}: check that the server's HEAD names {BRANCH} (a clone of a repository whose "
                            f"HEAD names another branch comes out empty); on the server: git symbolic-ref HEAD "
                            f"refs/heads/{BRANCH}")
    run_git(repo, "remote", "add", "origin", remote)
    run_git(repo, "push", "-q", *TRANSPORT_PUSH, "--no-verify", "origin", f"{BRANCH}:refs/heads/{BRANCH}")
    run_git(repo, "branch", "-q", f"--set-upstream-to=origin/{BRANCH}", BRANCH)


def add_signers(repo: git.Repo, who: Identity, lines: list[str]) -> tuple[str | None, list[str]]:
    """Commit ``lines`` (allowed-signers lines) into the queue's allowed-signers file, in a
    commit signed by ``who``'s key; the lines the file already held are left out. Returns
    (the commit, or None when there was nothing to add; the lines added).

    A change to the allowed signers counts only when a key the file already lists signed it
    (docs/records.md), so the owner (or any listed reviewer) runs this in their clone, then
    ``kws sync``.

    Raises:
        RecordError: a line is not an allowed-signers line, the queue does not sign records
            (``signatures = "off"``), git has no signing key, HEAD is detached, or the
            allowed-signers file has uncommitted changes.
    """
    harden(repo)
    new = [signer_line(s, "signer") for s in lines]
    policy = records_policy(repo)
    if policy.off:
        raise RecordError("this queue does not check signatures ([records] signatures = \"off\" in queue.toml); "
                          "there is no allowed-signers file to add to")
    if signing_key(repo) is None:
        raise RecordError("a change to the allowed signers counts only when it is signed by a key they list, and git "
                          "has no SSH signing key set up here (kws signing setup --apply)")
    rel = policy.allowed_signers
    have = (policy.signers or "").splitlines()
    keyed = {" ".join(h.split()) for h in have}
    add = [ln for ln in dict.fromkeys(new) if ln not in keyed]
    if not add:
        return None, []
    text = "".join(f"{h}\n" for h in have if h.strip()) + "".join(f"{ln}\n" for ln in add)
    wt = Path(repo.working_tree_dir or ".")
    if run_git(repo, "status", "--porcelain", "--", rel).strip():
        raise RecordError(f"{rel} has uncommitted changes in {wt}; commit or drop them first")
    blob = run_git(repo, "hash-object", "-w", "--stdin", input=text.encode()).decode().strip()
    message = ("kws signing add: " + ", ".join(ln.split(" ", 1)[0] for ln in add)
               + "\n\nAdds to the allowed signers:\n" + "\n".join(add) + "\n")
    with queue_lock(repo):
        branch = head_branch(repo)
        if branch is None:
            raise RecordError("signers not added: HEAD is detached; check out the queue's branch first")
        old = rev(repo, f"refs/heads/{branch}")
        with temp_index(repo, tree_of(repo, old) if old else None) as ienv:
            run_git(repo, "update-index", "--add", "--cacheinfo", f"100644,{blob},{rel}", env=ienv)
            tree = run_git(repo, "write-tree", env=ienv).decode().strip()
        commit = commit_tree(repo, tree, [old] if old else [], message, git_env(who), sign=True)
        move_branch(repo, branch, old, commit, "kws signing add")
    return commit, add
