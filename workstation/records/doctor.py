"""``kws doctor``: what in a queue clone needs attention, without changing anything kws
did not break itself.

Records are read from commits only (:func:`workstation.records.parse.load_records`), so a
file under a record folder that is not committed as it is never counts; :func:`stray_files`
lists them: untracked files (a killed ``kws verdict`` of an older kws, a hand-made file),
record files changed or deleted in the work tree, and record paths staged differently from
HEAD. :func:`diagnose` adds everything else a reviewer should know: records and tasks that
were skipped and why, warnings (unknown keys, a clock that looks off), what the records
must satisfy (docs/records.md): append-only (:func:`edited_records`: a later commit that
changed or deleted a record file), a task that exists for every verdict, dispute and
resolution, resolutions of one dispute that disagree; the git state (a rebase or merge
in progress, git locks, an unfinished kws update, an unreadable index), commits not
yet sent, and records that are unverified (unsigned or wrongly signed: file, commit, why).

Running it takes kws's lock like any kws command, so the recovery of
:mod:`workstation.repo.lock` runs first (and is logged); on a clone that cannot be
written it reads without the lock and says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import git

from workstation.records.model import FOLDERS, Dispute, Resolution, Verdict, record_file
from workstation.records.parse import load_records
from workstation.repo.gitqueue import harden, head_branch, work_tree
from workstation.repo.lock import damaged_branch, queue_lock, stale_git_locks
from workstation.repo.plumbing import git_result, read_journal, rev, run_git
from workstation.schema.problem import Problem

__all__ = ["Diagnosis", "committed_tasks", "diagnose", "edited_records", "stray_files"]


def _z(out: bytes) -> list[str]:
    return [p.decode("utf-8", "surrogateescape") for p in out.split(b"\0") if p]


def stray_files(repo: git.Repo) -> list[Problem]:
    """Files under the record folders whose work-tree or index state differs from HEAD:
    each a :class:`Problem` (path relative to the queue root, ``""``, what it is). These
    are never read as records."""
    harden(repo)
    folders = [f for f in FOLDERS.values()]
    out: list[Problem] = []
    if repo.working_tree_dir is None:
        return out
    for path in _z(run_git(repo, "ls-files", "-z", "--others", "--", *folders)):
        out.append(Problem(Path(path), "", "not committed, so not a record (a killed kws command, or a file "
                                           "made by hand); remove it, or commit it if it is a real record"))
    if rev(repo, "HEAD") is not None:
        raw = _z(run_git(repo, "diff-index", "-z", "--cached", "--name-status", "--no-renames", "HEAD", "--",
                         *folders))
        for status, path in zip(raw[::2], raw[1::2], strict=False):
            what = {"A": "staged but not committed", "D": "committed, but removed from the index",
                    "M": "a committed record, changed in the index (records are never edited)"}.get(status, "staged")
            out.append(Problem(Path(path), "", f"{what}; records count as committed"))
    raw = _z(run_git(repo, "diff-files", "-z", "--name-status", "--", *folders))
    for status, path in zip(raw[::2], raw[1::2], strict=False):
        what = {"D": "a committed record, deleted from the work tree",
                "M": "a committed record, edited in the work tree (records are never edited)"}.get(status, "changed")
        out.append(Problem(Path(path), "", f"{what}; the committed version still counts"))
    return sorted(out, key=lambda p: (p.file.as_posix(), p.problem))


@dataclass
class Diagnosis:
    """What :func:`diagnose` found. ``problems`` need attention (``kws doctor`` exits 1
    when there are any); ``warnings`` and ``notes`` are for information."""

    root: Path
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def format(self) -> str:
        lines = [f"kws doctor: {self.root}"]
        if not self.problems and not self.warnings:
            lines.append("  no problems found")
        for p in self.problems:
            lines.append(f"  problem: {p}")
        for w in self.warnings:
            lines.append(f"  warning: {w}")
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)


def gd_path(repo: git.Repo) -> Path:
    return Path(repo.git_dir)


def _last(exc: git.GitCommandError) -> str:
    err = exc.stderr if isinstance(exc.stderr, str) else bytes(exc.stderr or b"").decode("utf-8", "replace")
    lines = [ln.strip().strip("'") for ln in err.replace("stderr:", "").splitlines() if ln.strip().strip("'")]
    return lines[-1] if lines else f"exit status {exc.status}"


def committed_tasks(repo: git.Repo, rev_: str = "HEAD") -> list[str]:
    """The task ids with a folder under ``tasks/`` in the tree of ``rev_``."""
    if rev(repo, rev_) is None:
        return []
    out = run_git(repo, "ls-tree", "-z", "--name-only", "-d", f"{rev_}:tasks", check=False)
    return _z(out)


def edited_records(repo: git.Repo, rev_: str = "HEAD") -> list[Problem]:
    """Record files that a commit in the history of ``rev_`` changed or deleted after they
    were added (records are append-only): each a Problem naming the file and the commit."""
    if rev(repo, rev_) is None:
        return []
    proc = git_result(repo, "-c", "core.quotePath=off", "log", "--diff-filter=MDT", "--no-renames", "--name-status",
                      "--format=%x00%h %an", rev_, "--", *FOLDERS.values())
    out: list[Problem] = []
    seen: set[str] = set()
    for chunk in proc.stdout.decode("utf-8", "surrogateescape").split("\0")[1:]:
        head, _, rows = chunk.partition("\n")
        for row in rows.splitlines():
            status, _, path = row.partition("\t")
            if not path or path in seen or not path.endswith(".toml"):
                continue
            seen.add(path)
            what = "deleted" if status.startswith("D") else "changed"
            out.append(Problem(Path(path), "", f"{what} by commit {head} after it was committed: records are "
                               "append-only (a new record replaces an old one; history keeps both); revert that "
                               "commit's change to the file"))
    return out


def diagnose(repo: git.Repo) -> Diagnosis:
    """Everything :mod:`the module <workstation.records.doctor>` describes, for ``repo``."""
    harden(repo)
    root = work_tree(repo)
    d = Diagnosis(root)
    damage = damaged_branch(repo)
    if damage is not None:  # nothing else can be read from a branch that names no commit
        d.problems.append(Problem(root, "", damage))
        return d
    with queue_lock(repo, write=False) as locked:
        if not locked:
            d.notes.append("this clone cannot be written here (read-only, or its disk is full): kws's recovery "
                           "did not run; reading works, writing records does not")
        _check_records(repo, d)
        _check_git_state(repo, d)
    return d


def _check_records(repo: git.Repo, d: Diagnosis) -> None:
    """Add to ``d`` the stray record files, the records skipped, warned about, unverified
    or edited after they were committed, the queue's task problems, the records of tasks
    that do not exist and the resolutions that disagree."""
    from workstation.records.history import conflict_text
    from workstation.task.queue import load_queue

    try:
        d.problems += stray_files(repo)
    except git.GitCommandError as exc:
        d.problems.append(Problem(gd_path(repo) / "index", "", f"git cannot read the index: {_last(exc)}; "
                                  f"rebuild it with: git -C {d.root} read-tree HEAD (keeps the work tree)"))
    rs = load_records(repo)
    d.problems += rs.problems
    d.warnings += rs.warnings
    d.problems += [Problem(record_file(u.record), "", f"unverified {u.kind} by {u.record.reviewer}, not counted: "
                           f"{u.why}") for u in rs.unverified]  # file, commit, why
    if rs.signature_note:
        d.notes.append(rs.signature_note)
    d.problems += edited_records(repo)
    tasks: set[str] | None = None
    try:
        q = load_queue(d.root)
        d.problems += q.errors
        d.warnings += q.warnings
        tasks = set(committed_tasks(repo))
    except Problem as p:
        d.problems.append(p)
    if tasks is not None:
        records: list[Verdict | Dispute | Resolution] = [*rs.verdicts, *rs.disputes, *rs.resolutions]
        d.problems += [Problem(record_file(r), "task", f"{r.task!r} is not a task in HEAD (no tasks/{r.task}/ "
                               "committed): a record of a task that does not exist") for r in records
                       if r.task not in tasks]
    for did, clash in rs.resolution_conflicts().items():
        d.problems.append(Problem(record_file(clash[-1]), "dispute_id", f"dispute {did[:8]}: "
                                  + conflict_text(clash, rs.resolution_rule)))


def _check_git_state(repo: git.Repo, d: Diagnosis) -> None:
    """Add to ``d`` what git holds in progress (a rebase or merge, locks, an unfinished kws
    update), a detached HEAD or the commits not sent yet, and what kws recovered earlier."""
    from workstation.records.sync import unpushed_records, unsent

    gd = Path(repo.git_dir)
    for name, what in (("rebase-merge", "a rebase"), ("rebase-apply", "a rebase or git am"),
                       ("MERGE_HEAD", "a merge")):
        if (gd / name).exists():
            d.problems.append(Problem(gd / name, "", f"{what} is in progress (not kws's); finish or abort it"))
    for lock in stale_git_locks(repo):
        d.problems.append(Problem(lock, "", "a git lock held by a running git process (or left by one that "
                                            "kws could not tell had ended)"))
    if read_journal(repo) is not None:
        d.problems.append(Problem(gd / "kws" / "journal.json", "", "an interrupted kws update kws could not finish"))
    if head_branch(repo) is None:
        d.problems.append(Problem(d.root, "", "HEAD is detached: kws commits records only on a branch"))
    else:
        n = unsent(repo)
        if n:
            k = unpushed_records(repo)
            d.notes.append(f"{n} local commit(s) not on the remote yet"
                           + (f" ({k} records not pushed)" if k else "") + ": run kws sync")
    log = gd / "kws" / "recovery.log"
    if log.is_file():
        tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-5:]
        d.notes += [f"recovered earlier: {t}" for t in tail]
