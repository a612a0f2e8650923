"""Reading the records of a commit: :func:`load_records`.

Records are read from the tree of a commit (``HEAD``, or any revision), never from the
work tree: each ``<folder>/<task-id>/*.toml`` blob is parsed by
:func:`workstation.schema.toml.parse_toml_bytes` (UTF-8, at most
:data:`~workstation.records.format.MAX_RECORD_BYTES`, nesting depth guarded) and
validated by :func:`workstation.records.format.parse_record`. The queue files that decide
whether a record can be right are read from **the same tree**: ``queue.toml`` (its
``resolution_conflict`` rule) and the queue's own ``rubrics/<id>.toml`` (rubrics kws ships
or the ``rubric_path`` setting names are used for the ids the tree does not carry), so a
commit's records parse the same on every machine, whatever its work tree holds
(:func:`workstation.records.crosscheck.cross_check`). The record policy (signatures,
self-resolution) is the committed history's (:mod:`workstation.records.signing`).

A file that does not read, parse or validate is a
:class:`~workstation.schema.problem.Problem` (file relative to the queue root, dotted key,
problem) and is skipped; every other record still loads. A key no struct names is a
warning, never a reason to skip: records written by a later kws still load.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import git

from workstation.records.crosscheck import cross_check
from workstation.records.format import MAX_RECORD_BYTES, parse_record
from workstation.records.model import FOLDERS, KINDS, Record, record_file
from workstation.records.state import RecordSet
from workstation.repo.gitqueue import harden
from workstation.repo.plumbing import git_result, run_git
from workstation.repo.plumbing import rev as rev_id
from workstation.rubric.model import QUEUE_RUBRICS, Rubric, rubric_in_commit
from workstation.schema.problem import Problem
from workstation.schema.structs import convert
from workstation.schema.toml import MAX_BYTES, parse_toml_bytes
from workstation.task.format import TASK_ID_RE
from workstation.task.queue import QUEUE_TOML, QueueFile

__all__ = ["load_records", "record_commits"]



def _tree_entries(repo: git.Repo, rev: str, folders: list[str]) -> list[tuple[str, str, str, int, str]]:
    """``(mode, type, object id, size, path)`` of every entry under ``folders`` in the tree
    of ``rev`` (recursively; [] when ``rev`` does not exist, e.g. no commit yet)."""
    if rev_id(repo, rev) is None:
        return []
    out = run_git(repo, "ls-tree", "-r", "-z", "-l", "--full-tree", rev, "--", *folders)
    entries = []
    for item in out.split(b"\0"):
        if not item:
            continue
        meta, _, path = item.partition(b"\t")
        mode, typ, oid, size = meta.decode().split()
        entries.append((mode, typ, oid, int(size) if size.isdigit() else -1, path.decode("utf-8", "surrogateescape")))
    return entries


def _read_blobs(repo: git.Repo, oids: list[str]) -> tuple[dict[str, bytes], dict[str, str]]:
    """The contents of blobs ``oids``, read with one ``git cat-file --batch``, and for each
    blob that cannot be read (missing, or corrupt: git stops the batch at it) git's
    words. After a failed batch each blob is read on its own, so one corrupt object costs
    only its own record."""
    if not oids:
        return {}, {}
    proc = git_result(repo, "cat-file", "--batch", input=("\n".join(oids) + "\n").encode())
    blobs: dict[str, bytes] = {}
    bad: dict[str, str] = {}
    if proc.returncode == 0:
        out, pos = proc.stdout, 0
        for oid in oids:
            nl = out.index(b"\n", pos)
            header = out[pos:nl].decode().split()
            pos = nl + 1
            if len(header) < 3 or header[1] == "missing":
                bad[oid] = "missing from this clone"
                continue
            size = int(header[2])
            blobs[oid] = out[pos:pos + size]
            pos += size + 1
        return blobs, bad
    for oid in oids:
        one = git_result(repo, "cat-file", "blob", oid)
        if one.returncode == 0:
            blobs[oid] = one.stdout
        else:
            lines = [ln.strip() for ln in one.stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
            bad[oid] = (lines[-1] if lines else f"git cat-file exited {one.returncode}").removeprefix("fatal: ")
    return blobs, bad


def record_commits(repo: git.Repo, rev: str = "HEAD", folders: Iterable[str] = tuple(FOLDERS.values())
                   ) -> dict[str, tuple[int, str, datetime | None]]:
    """``{path: (place, commit id, committer date)}``: for each file under ``folders`` in the
    history of ``rev``, the commit that (last) added it, and that commit's place in the
    branch: 0 for the oldest, in first-parent order (a record that came in by a merge takes
    the merge's place). Empty when ``rev`` does not exist or its history cannot be read."""
    if rev_id(repo, rev) is None:
        return {}
    proc = git_result(repo, "-c", "core.quotePath=off", "log", "--first-parent", "--diff-merges=first-parent",
                      "--reverse", "--diff-filter=A", "--no-renames", "--name-only", "--format=%x00%H %cI",
                      rev, "--", *folders)
    if proc.returncode != 0:
        return {}
    out: dict[str, tuple[int, str, datetime | None]] = {}
    for place, chunk in enumerate(proc.stdout.decode("utf-8", "surrogateescape").split("\0")[1:]):
        head, _, names = chunk.partition("\n")
        commit, _, date = head.partition(" ")
        try:
            when: datetime | None = datetime.fromisoformat(date.strip()).astimezone(UTC)
        except ValueError:
            when = None
        for name in names.splitlines():
            if name.strip():
                out[name.strip()] = (place, commit, when)
    return out


def _record_entries(entries: list[tuple[str, str, str, int, str]], kind: str,
                    problems: list[Problem]) -> Iterator[tuple[Path, str, str, int]]:
    """``(path, task id, blob id, size)`` of each ``<folder>/<task-id>/*.toml`` of ``kind``
    in ``entries``, in path order; anything else under the folder goes to ``problems``
    (names starting with "." are passed over)."""
    folder = FOLDERS[kind]
    for mode, typ, oid, size, path in entries:
        parts = path.split("/")
        if parts[0] != folder:
            continue
        rel = Path(path)
        if any(p.startswith(".") for p in parts[1:]):
            continue
        if len(parts) != 3:
            problems.append(Problem(rel, "", f"not in a task folder ({folder}/<task-id>/<file>.toml)"))
            continue
        if not TASK_ID_RE.match(parts[1]):
            problems.append(Problem(rel, "", "folder name is not a task id"))
            continue
        if typ != "blob" or mode not in ("100644", "100755"):
            what = {"120000": "a symbolic link", "160000": "a submodule"}.get(mode, f"a {typ}")
            problems.append(Problem(rel, "", f"{what}, not a record file"))
            continue
        if not parts[2].endswith(".toml"):
            problems.append(Problem(rel, "", "not a .toml record file"))
            continue
        yield rel, parts[1], oid, size


def load_records(source: Path | str | git.Repo, kinds: Iterable[str] = KINDS, *, rev: str = "HEAD") -> RecordSet:
    """Read every record of ``kinds`` **committed** in the queue ``source`` (a repository,
    or the path of one): the files in the tree of ``rev`` (default ``HEAD``; e.g.
    ``refs/remotes/origin/main`` for the fetched remote), never the work tree. A file that
    was written but not committed (a killed ``kws verdict``, a hand-made file) is not a
    record; ``kws doctor`` reports it (:func:`workstation.records.doctor.stray_files`).
    The ``queue.toml`` and queue rubrics the records are judged against are those of the
    same tree (module doc).

    Skips and reports the malformed files in ``problems`` and the unknown keys of the
    others in ``warnings``. Only ``<folder>/<task-id>/*.toml`` files are records; any other
    entry under a record folder is a problem. Two files with the same record id: the one
    later in path order is reported and skipped. Never raises for a record's content; a
    path that is not a git repository gives an empty set with one problem.
    """
    rs = RecordSet()
    repo = _open(source, rs)
    if repo is None:
        return rs
    kinds = tuple(kinds)
    folders = [FOLDERS[k] for k in kinds]
    entries = _tree_entries(repo, rev, [*folders, QUEUE_TOML, QUEUE_RUBRICS])
    chosen = {kind: list(_within_limit(_record_entries(entries, kind, rs.problems), rs.problems)) for kind in kinds}
    blobs, unreadable = _read_blobs(repo, sorted({e[2] for items in chosen.values() for e in items}))
    batch = _Batch(rs, blobs, unreadable, record_commits(repo, rev, folders))
    for kind in kinds:
        out = [rec for e in chosen[kind] if (rec := batch.parse(kind, *e)) is not None]
        out.sort(key=rs.order_key)
        setattr(rs, FOLDERS[kind], out)
    _verify(repo, rs, kinds, rev)
    files = _TreeFiles(repo, _queue_files(entries))
    rs.resolution_rule = files.resolution_rule() or rs.resolution_rule
    cross_check(rs, kinds, files.rubric, datetime.now(UTC))
    return rs


def _open(source: Path | str | git.Repo, rs: RecordSet) -> git.Repo | None:
    """The hardened repository ``source`` names (None, with the problem added to ``rs``,
    when it is not a git repository)."""
    if isinstance(source, git.Repo):
        return harden(source)
    try:
        return harden(git.Repo(Path(source)))
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        rs.problems.append(Problem(Path(source), "", "not a git repository: records are read from its commits"))
        return None


def _within_limit(entries: Iterable[tuple[Path, str, str, int]],
                  problems: list[Problem]) -> Iterator[tuple[Path, str, str, int]]:
    """``entries`` (path, task, blob id, size) of at most :data:`MAX_RECORD_BYTES`; the
    larger ones go to ``problems`` unread."""
    for rel, task, oid, size in entries:
        if size > MAX_RECORD_BYTES:
            problems.append(Problem(rel, "", f"{size} bytes, larger than the {MAX_RECORD_BYTES}-byte limit for this file"))
            continue
        yield rel, task, oid, size


@dataclass
class _Batch:
    """The record blobs of one :func:`load_records` (read with one git command), where each
    file was added (:func:`record_commits`), and the record ids seen so far."""

    rs: RecordSet
    blobs: dict[str, bytes]
    unreadable: dict[str, str]
    added: dict[str, tuple[int, str, datetime | None]]
    seen: dict[str, Path] = field(default_factory=dict)

    def parse(self, kind: str, rel: Path, task: str, oid: str, _size: int) -> Record | None:
        """The record of ``kind`` in blob ``oid`` at ``rel`` (in the folder of ``task``),
        placed in the history; None when it does not read, parse or validate, or repeats a
        record id (the problem goes to the set's ``problems``)."""
        rs = self.rs
        placed = self.added.get(rel.as_posix())
        if oid in self.unreadable:
            where = f" (committed in {placed[1][:12]})" if placed else ""
            rs.problems.append(Problem(rel, "", f"its git object {oid[:12]}{where} cannot be read: "
                                       f"{self.unreadable[oid]}; the object is corrupt or missing in this clone: run "
                                       "git fsck, and restore it from another clone or the remote"))
            return None
        raw = self.blobs.get(oid)
        if raw is None:
            rs.problems.append(Problem(rel, "", "its blob is missing from this clone (run git fsck)"))
            return None
        found: list[Problem] = []
        try:
            rec = parse_record(kind, parse_toml_bytes(raw, rel, max_bytes=MAX_RECORD_BYTES), task, rel, found)
        except Problem as p:
            rs.problems.append(Problem(rel, p.key, p.problem))
            return None
        if rec.id in self.seen:
            rs.problems.append(Problem(rel, f"{kind}_id", f"duplicate id {rec.id} (also in {self.seen[rec.id]})"))
            return None
        self.seen[rec.id] = rel
        rs.warnings.extend(found)
        if placed is not None:
            rs.place[rec.id] = placed[0]
            _clock_warning(rs, rec, placed[2])
        return rec


def _queue_files(entries: list[tuple[str, str, str, int, str]]) -> dict[str, tuple[str, int]]:
    """``{path: (blob id, size)}`` of the regular files ``queue.toml`` and
    ``rubrics/<id>.toml`` among ``entries``."""
    out = {}
    for mode, typ, oid, size, path in entries:
        parts = path.split("/")
        wanted = path == QUEUE_TOML or (len(parts) == 2 and parts[0] == QUEUE_RUBRICS and path.endswith(".toml"))
        if wanted and typ == "blob" and mode in ("100644", "100755"):
            out[path] = (oid, size)
    return out


@dataclass
class _TreeFiles:
    """The queue files of the tree the records are read from that judging them needs:
    ``entries`` maps ``queue.toml`` and ``rubrics/<id>.toml`` to (blob id, size); each is
    read when first asked for, through the schema layer's guards."""

    repo: git.Repo
    entries: dict[str, tuple[str, int]]
    rubrics: dict[str, Rubric | None] = field(default_factory=dict)

    def blob(self, path: str) -> bytes | None:
        """The bytes of ``path`` (relative to the queue root) in the tree; None when the
        tree has no such regular file.

        Raises:
            Problem: it is larger than :data:`~workstation.schema.toml.MAX_BYTES` (not
                read), or its git object cannot be read.
        """
        if path not in self.entries:
            return None
        oid, size = self.entries[path]
        if size > MAX_BYTES:
            raise Problem(path, "", f"{size} bytes, larger than the {MAX_BYTES}-byte limit for this file")
        blobs, bad = _read_blobs(self.repo, [oid])
        if oid not in blobs:
            raise Problem(path, "", f"its git object {oid[:12]} cannot be read: {bad.get(oid, 'missing')}")
        return blobs[oid]

    def resolution_rule(self) -> str | None:
        """``resolution_conflict`` of the tree's ``queue.toml``; None for the default (no
        ``queue.toml``, or one that does not read: ``kws doctor`` reports its problem)."""
        try:
            raw = self.blob(QUEUE_TOML)
            if raw is None:
                return None
            return convert(parse_toml_bytes(raw, QUEUE_TOML), QueueFile, file=QUEUE_TOML).resolution_conflict
        except Problem:
            return None

    def rubric(self, rubric_id: str) -> Rubric | None:
        """The rubric ``rubric_id`` as the tree gives it (the queue's own
        ``rubrics/<id>.toml``, else an installed one:
        :func:`~workstation.rubric.model.rubric_in_commit`); None when there is none or it
        does not load (its records are then not checked against it)."""
        if rubric_id not in self.rubrics:
            try:
                self.rubrics[rubric_id] = rubric_in_commit(rubric_id, self.blob)
            except Problem:
                self.rubrics[rubric_id] = None
        return self.rubrics[rubric_id]


def _verify(repo: git.Repo, rs: RecordSet, kinds: tuple[str, ...], rev: str) -> None:
    """Move the records whose commits do not verify (:mod:`workstation.records.signing`)
    from ``rs``'s lists to ``rs.unverified``; set ``rs.policy``. A queue with
    ``signatures = "off"`` keeps every record."""
    from workstation.records.model import Unverified
    from workstation.records.signing import records_policy, verify_added

    rs.policy = policy = records_policy(repo, rev)
    rs.problems.extend(policy.problems)
    if policy.off:
        return
    lists = {k: getattr(rs, FOLDERS[k]) for k in kinds}
    pairs = [(r.path.as_posix(), r.reviewer.email) for recs in lists.values() for r in recs if r.path is not None]
    if not pairs:
        return
    checked = verify_added(repo, policy, pairs, rev)
    for kind, recs in lists.items():
        kept = []
        for r in recs:
            v = checked.get(r.path.as_posix()) if r.path is not None else None
            if v is None or v.ok:
                kept.append(r)
            else:
                rs.unverified.append(Unverified(r, v.commit, v.why))
        setattr(rs, FOLDERS[kind], kept)


#: How far a record's time may be after its commit's committer date before it is flagged.
COMMIT_ALLOWANCE = timedelta(hours=1)


def _clock_warning(rs: RecordSet, rec: Record, committed: datetime | None) -> None:
    """Warn about a record dated after the commit that added it (its writer's clock was
    ahead of the committer's, or the committer's behind)."""
    if committed is not None and rec.timestamp - committed > COMMIT_ALLOWANCE:
        hours = (rec.timestamp - committed).total_seconds() / 3600
        rs.warnings.append(Problem(record_file(rec), "timestamp", f"dated {rec.timestamp.isoformat()}, {hours:.1f} h after "
                                   f"the commit that added it ({committed.isoformat()}): a clock was off; its place "
                                   "in the history, not its time, decides which record is current"))


