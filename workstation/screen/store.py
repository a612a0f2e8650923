"""Screening results in the queue's git repository: git notes on the task's tree object.

Two notes refs, both keyed by the git tree id of ``tasks/<id>`` (the object a note is
attached to), each note one JSON object per line:

- :data:`INDEX_REF` (``refs/notes/kws-screen``): one :class:`ScreenResult` per run, small,
  read for the whole queue at once (the queue screen, ``kws screen --summary``, the plan);
- :data:`REPORTS_REF` (``refs/notes/kws-screen-reports``): ``{"key": digest, "report": {...}}``,
  the full ``kws check --json`` report of that run, read for one task when it is opened.

Results are appended, never edited (a forced re-screen adds a line; readers take the latest
line per key), like git-appraise's review records in git notes: notes follow the objects
they annotate, so a task whose content returns to an earlier tree finds its results again.
Two clones that both screened merge with ``git notes merge -s cat_sort_uniq`` (the union of
the lines), which :func:`sync_notes` does on a fetch; nothing in a note names a path of the
machine that wrote it. Lines that do not decode (a later kws, a damaged note) are skipped and
counted in :attr:`ResultIndex.problems`.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import git
import msgspec

from workstation.repo.gitqueue import (
    FALLBACK_IDENTITY,
    TRANSPORT_FETCH,
    TRANSPORT_PUSH,
    Identity,
    IdentityError,
    git_env,
    git_result,
    git_text,
    reviewer_identity,
    run_git,
)

__all__ = [
    "INDEX_REF",
    "NOTES_REFS",
    "REPORTS_REF",
    "ResultIndex",
    "ScreenResult",
    "StoreError",
    "read_index",
    "read_report",
    "store_result",
    "sync_notes",
]

INDEX_REF = "refs/notes/kws-screen"
REPORTS_REF = "refs/notes/kws-screen-reports"
#: every ref ``kws sync`` must carry for screening results (records/sync.py fetches, merges
#: and pushes them through :func:`sync_notes`).
NOTES_REFS = (INDEX_REF, REPORTS_REF)
#: where :func:`sync_notes` fetches a remote's notes before merging them.
REMOTE_NOTES_PREFIX = "refs/notes/kws-remotes"

#: outcome of a task's screening: ``pass`` / ``fail`` / ``not-judged`` (a report; ``fail``: a
#: fail finding; ``not-judged``: none, but a check could not look, ``kws check``'s exit 4),
#: ``error`` (no report: the task does not load, or the run failed), ``timeout``.
OUTCOMES = ("pass", "fail", "not-judged", "error", "timeout")
#: worst first: how the queue sorts pre-screens (``not-judged``: no fail finding, but a check
#: that applies could not look, so the task is not "clean" whatever its other findings).
WORST_ORDER = ("fail", "timeout", "error", "not-judged", "warn", "info", "pass")


class StoreError(Exception):
    """A result could not be written or exchanged; the message says why."""


class ScreenResult(msgspec.Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=False):
    """One screening run of one task version: one line of the :data:`INDEX_REF` note.

    ``key`` is the :class:`~workstation.screen.keys.ScreenKey` digest and ``key_fields`` the
    key itself (``ScreenKey.as_dict()``). ``worst``: the worst finding's severity, ``pass``
    when none, ``not-judged`` when no finding fails but a check could not look, or the
    outcome for ``error`` / ``timeout``. ``failing`` / ``warning`` / ``errored`` /
    ``skipped``: check ids by status; ``not_judged``: the ids of the report's ``not_judged``
    (checks that could not look, wholly or in part; absent from lines of an older kws). ``timing``: ``"run"``, ``"none"`` (no
    timing check had work) or ``"not run: <why>"``. ``seconds``: wall time of the task's
    ``kws check`` runs on the worker; ``battery_seconds``: the engine's own time (the
    reports' ``seconds``). ``finished``: ISO 8601 UTC. ``host``: where it ran (host name, and
    the node's IP on a cluster); ``backend``: ``local`` or ``ray``. ``timeout_s``: the
    per-run limit it ran under. ``message``: why, for ``error`` and ``timeout``.
    """

    key: str
    task: str
    tree: str
    outcome: str
    worst: str
    finished: str
    key_fields: dict[str, Any] = {}
    failing: tuple[str, ...] = ()
    warning: tuple[str, ...] = ()
    errored: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    not_judged: tuple[str, ...] = ()
    checks: int = 0
    timing: str = "none"
    seconds: float = 0.0
    battery_seconds: float = 0.0
    device: str = ""
    kws: str = ""
    host: str = ""
    backend: str = ""
    attempts: int = 1
    timeout_s: float = 0.0
    message: str = ""
    v: int = 1

    @property
    def when(self) -> datetime | None:
        try:
            return datetime.fromisoformat(self.finished)
        except ValueError:
            return None

    @property
    def rank(self) -> int:
        """Position of :attr:`worst` in :data:`WORST_ORDER` (0: worst)."""
        return WORST_ORDER.index(self.worst) if self.worst in WORST_ORDER else len(WORST_ORDER)


def now_iso() -> str:
    """The current time as ISO 8601 UTC with seconds."""
    return datetime.now(UTC).replace(microsecond=0).isoformat()


@dataclass
class ResultIndex:
    """Every stored :class:`ScreenResult`, by tree id (oldest line first), and the count
    of lines that did not decode."""

    by_tree: dict[str, list[ScreenResult]] = field(default_factory=dict)
    problems: int = 0

    def keys(self) -> set[str]:
        return {r.key for rs in self.by_tree.values() for r in rs}

    def for_key(self, key: str, tree: str) -> ScreenResult | None:
        """The latest result with ``key`` on ``tree``."""
        hits = [r for r in self.by_tree.get(tree, ()) if r.key == key]
        return max(hits, key=lambda r: r.finished) if hits else None

    def latest(self, tree: str | None, kws: str | None = None) -> ScreenResult | None:
        """The latest result on ``tree`` (of kws version ``kws`` when one exists)."""
        rs = self.by_tree.get(tree or "", [])
        if kws is not None and any(r.kws == kws for r in rs):
            rs = [r for r in rs if r.kws == kws]
        return max(rs, key=lambda r: r.finished) if rs else None


_DECODER = msgspec.json.Decoder(ScreenResult)
_ENCODER = msgspec.json.Encoder()


def _notes_list(repo: git.Repo, ref: str) -> list[tuple[str, str]]:
    """``[(note blob, annotated object)]`` of notes ref ``ref`` (empty when it does not exist)."""
    if not _has_ref(repo, ref):
        return []
    out = git_text(repo, "notes", "--ref", ref, "list")
    pairs = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2:
            pairs.append((parts[0], parts[1]))
    return pairs


def _has_ref(repo: git.Repo, ref: str) -> bool:
    return git_result(repo, "rev-parse", "--verify", "-q", ref).returncode == 0


def _blob_texts(repo: git.Repo, shas: Iterable[str]) -> dict[str, str]:
    """``{blob id: its text}`` (UTF-8, undecodable bytes replaced) of ``shas``, read by one
    ``git cat-file --batch``; ids that name no blob are left out.

    Raises:
        git.GitCommandError: git refused the read.
    """
    wanted = list(dict.fromkeys(shas))
    if not wanted:
        return {}
    out = run_git(repo, "cat-file", "--batch", input="".join(f"{s}\n" for s in wanted).encode())
    texts: dict[str, str] = {}
    pos = 0
    for sha in wanted:
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        pos = end + 1
        if len(header) != 3:  # "<id> missing" / "<id> ambiguous"
            continue
        size = int(header[2])
        if header[1] == b"blob":
            texts[sha] = out[pos:pos + size].decode("utf-8", errors="replace")
        pos += size + 1  # the object, then a newline
    return texts


def read_index(repo: git.Repo, trees: Iterable[str] | None = None) -> ResultIndex:
    """The stored results (all, or only those on ``trees``): one ``git notes list`` and one
    ``git cat-file --batch`` reading every note blob wanted."""
    wanted = set(trees) if trees is not None else None
    idx = ResultIndex()
    notes = [(blob, obj) for blob, obj in _notes_list(repo, INDEX_REF) if wanted is None or obj in wanted]
    texts = _blob_texts(repo, [blob for blob, _obj in notes])
    for blob, obj in notes:
        rows: list[ScreenResult] = []
        for line in texts.get(blob, "").splitlines():
            if not line.strip():
                continue
            try:
                r = _DECODER.decode(line)
            except msgspec.DecodeError:
                idx.problems += 1
                continue
            if r.tree == obj:
                rows.append(r)
            else:
                idx.problems += 1  # a line copied onto another object: not this version's
        if rows:
            idx.by_tree[obj] = sorted(rows, key=lambda r: r.finished)
    return idx


def read_report(repo: git.Repo, tree: str, key: str) -> dict[str, Any] | None:
    """The full report stored for ``key`` on ``tree`` (the latest when several), or None."""
    try:
        text = git_text(repo, "notes", "--ref", REPORTS_REF, "show", tree)
    except git.GitCommandError:
        return None
    found = None
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            doc = msgspec.json.decode(line)
        except msgspec.DecodeError:
            continue
        if isinstance(doc, dict) and doc.get("key") == key and isinstance(doc.get("report"), dict):
            found = doc["report"]
    return found


def _identity(repo: git.Repo) -> Identity:
    try:
        return reviewer_identity(repo)
    except IdentityError:
        return FALLBACK_IDENTITY  # results are machine output; the line says where it ran


def _append(repo: git.Repo, ref: str, obj: str, line: str, env: Mapping[str, str], attempts: int = 5) -> None:
    fd, path = tempfile.mkstemp(prefix="kws-note-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(line + "\n")
        for i in range(attempts):
            try:
                run_git(repo, "notes", "--ref", ref, "append", "-F", path, obj, env=env)
                return
            except git.GitCommandError as e:
                # another kws updating the same notes ref at once: its ref lock; try again
                if i == attempts - 1 or "lock" not in str(e).lower():
                    raise StoreError(f"cannot store the screening result of {obj[:12]} in {ref}: "
                                     f"{(e.stderr or str(e)).strip()[-400:]}") from e
                time.sleep(0.05 * (i + 1))
    finally:
        os.unlink(path)


def store_result(repo: git.Repo, result: ScreenResult, report: Mapping[str, Any] | None) -> None:
    """Append ``result`` to the index note of its tree and ``report`` (when there is one)
    to the reports note: two notes commits, reports first (an index line never points at a
    report that is missing).

    Raises:
        StoreError: git refused the write.
    """
    env = git_env(_identity(repo))
    if report is not None:
        line = _ENCODER.encode({"key": result.key, "report": report}).decode()
        _append(repo, REPORTS_REF, result.tree, line, env)
    _append(repo, INDEX_REF, result.tree, _ENCODER.encode(result).decode(), env)


# --------------------------------------------------------------------------------------------
# exchange with a remote


def _stderr(exc: git.GitCommandError) -> str:
    err = exc.stderr if isinstance(exc.stderr, str) else str(exc)
    return " ".join(ln.strip() for ln in err.splitlines() if ln.strip())[-400:]


def sync_notes(repo: git.Repo, remote: str, *, env: Mapping[str, str] | None = None,
               timeout: float = 120.0, attempts: int = 4) -> dict[str, int]:
    """Exchange the screening notes refs with ``remote``: fetch each into
    ``refs/notes/kws-remotes/<remote>/<name>``, merge it into the local ref with git's
    ``cat_sort_uniq`` notes strategy (the union of the result lines: results are
    append-only, so no line is ever lost), push the local ref without force; a push the
    remote rejects because it moved meanwhile starts another round (up to ``attempts``).

    Returns ``{ref: notes received}`` (annotated objects whose note the merge changed). A ref
    the remote does not have yet is pushed as it is. ``env`` is the git environment of the
    caller's sync (identity, no prompts); by default the reviewer's identity.

    Raises:
        StoreError: the remote cannot be reached, or kept rejecting the push.
    """
    env = dict(env) if env is not None else git_env(_identity(repo))
    env.setdefault("GIT_TERMINAL_PROMPT", "0")
    received: dict[str, int] = {}
    for ref in NOTES_REFS:
        name = ref.rsplit("/", 1)[-1]
        fetched = f"{REMOTE_NOTES_PREFIX}/{remote}/{name}"
        received[ref] = 0
        for attempt in range(1, attempts + 1):
            try:
                run_git(repo, "fetch", "-q", *TRANSPORT_FETCH, "--no-tags", "--no-write-fetch-head", remote,
                        f"+{ref}:{fetched}", env=env, timeout=timeout)
                have_remote = True
            except git.GitCommandError as e:
                if "couldn't find remote ref" in _stderr(e).lower() or "no such ref" in _stderr(e).lower():
                    have_remote = False
                else:
                    raise StoreError(f"cannot fetch {ref} from {remote!r}: {_stderr(e)}") from e
            have_local = _has_ref(repo, ref)
            if have_remote:
                before = dict((o, b) for b, o in _notes_list(repo, ref))
                if not have_local:
                    run_git(repo, "update-ref", ref, fetched)
                else:
                    try:
                        run_git(repo, "notes", "--ref", ref, "merge", "-q", "-s", "cat_sort_uniq", fetched, env=env)
                    except git.GitCommandError as e:
                        raise StoreError(f"cannot merge {remote}'s {ref}: {_stderr(e)}") from e
                after = dict((o, b) for b, o in _notes_list(repo, ref))
                received[ref] = sum(1 for o, b in after.items() if before.get(o) != b)
            if not have_local and not have_remote:
                break
            try:
                run_git(repo, "push", "-q", "--porcelain", *TRANSPORT_PUSH, "--no-verify", remote, f"{ref}:{ref}",
                        env=env, timeout=timeout)
                break
            except git.GitCommandError as e:
                text = f"{e.stdout or ''} {e.stderr or ''}".lower()
                if attempt < attempts and any(m in text for m in ("rejected", "fetch first", "non-fast-forward", "lock")):
                    time.sleep(0.05 * attempt)
                    continue
                raise StoreError(f"cannot push {ref} to {remote!r}: {_stderr(e)}") from e
    return received
