"""Signed records: which records count, by git's SSH commit signatures and the queue's
allowed-signers file (docs/records.md, "Signed records").

A record counts only when the commit that added its file carries a good SSH signature
(``git log --format=%G?`` = ``G``) by a key that the queue's allowed-signers file (the
format of ``ssh-keygen``'s ``allowed_signers``, ALLOWED SIGNERS in ``ssh-keygen(1)``)
lists for a principal equal to the record's reviewer email. Anything else is
**unverified**: unsigned, signed by a key the file does not list, a bad signature, or a
good signature by somebody else than the reviewer the record names (a task submission
that adds a "Team Lead accept" is signed, if at all, by its submitter).

The policy comes from the **committed** queue.toml's ``[records]`` table (never the work
tree, which task code can write): ``signatures = "required"`` (default) or ``"off"`` (a
local-only queue: every record counts, and every report says so), and
``allowed_signers`` (default ``.kws/allowed_signers``). A change to that policy (the
table, or the allowed-signers file it names) is accepted only from a commit signed by a
key the previous allowed-signers file lists (:func:`records_policy` walks them in
first-parent order); an unsigned change is ignored and reported. The first policy the
history gives is trusted as it is (trust on first use).

Every git command runs through :func:`workstation.repo.gitqueue.run_git` /
``git_result``; the allowed-signers text is written to a private temporary file for
``gpg.ssh.allowedSignersFile``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import git

from workstation.records.model import FOLDERS
from workstation.repo.gitqueue import Identity, git_config_get, git_result, harden
from workstation.repo.plumbing import rev as rev_id
from workstation.schema.problem import Problem

__all__ = [
    "DEFAULT_SIGNERS",
    "OFF_NOTE",
    "RecordsPolicy",
    "SetupPlan",
    "Verification",
    "allowed_signers_line",
    "check_commit",
    "public_key",
    "records_policy",
    "setup_plan",
    "signing_key",
    "verify_added",
]

#: Where the allowed-signers file is when queue.toml does not say.
DEFAULT_SIGNERS = ".kws/allowed_signers"
#: What every history, report and calibration of a queue with ``signatures = "off"`` says.
OFF_NOTE = "records unsigned: signature checks are off for this queue"


@dataclass(frozen=True)
class RecordsPolicy:
    """The queue owner's record policy as the committed history gives it.

    ``signatures``: ``required`` or ``off``; ``allowed_signers``: the file's path in the
    queue; ``signers``: its trusted text (None: no such file committed);
    ``self_resolution``: ``refuse`` or ``allow``; ``overturned_verdicts``: ``final``,
    ``author`` or ``excluded``; ``problems``: policy changes that were ignored (unsigned
    by an allowed signer) or a committed queue.toml that does not read.
    """

    signatures: str = "required"
    allowed_signers: str = DEFAULT_SIGNERS
    signers: str | None = None
    self_resolution: str = "refuse"
    overturned_verdicts: str = "final"
    problems: tuple[Problem, ...] = ()

    @property
    def off(self) -> bool:
        return self.signatures == "off"

    @property
    def note(self) -> str | None:
        """The line every report prints about signatures (None: nothing to say: records
        are checked against an allowed-signers file)."""
        if self.off:
            return OFF_NOTE
        if self.signers is None:
            return (f"no record is verified: this queue has no committed allowed signers file ({self.allowed_signers}) "
                    "and does not opt out of signatures; its owners add one (kws signing setup prints your line) or "
                    "set [records] signatures = \"off\" in queue.toml for a local-only queue")
        return None

    def _state(self) -> tuple[str, str, str | None, str, str]:
        return (self.signatures, self.allowed_signers, self.signers, self.self_resolution, self.overturned_verdicts)


@dataclass(frozen=True)
class Verification:
    """One record's signature check: ``ok``; ``commit`` that added the file; ``why`` it is
    unverified (empty when ok); ``signer``: the principal git found (may be empty)."""

    ok: bool
    commit: str | None
    why: str = ""
    signer: str = ""


# --------------------------------------------------------------------------------------------
# reading the committed policy


def _blob(repo: git.Repo, commit: str, path: str) -> bytes | None:
    proc = git_result(repo, "cat-file", "blob", f"{commit}:{path}")
    return proc.stdout if proc.returncode == 0 else None


def _policy_at(repo: git.Repo, commit: str) -> RecordsPolicy:
    """The policy the tree of ``commit`` states on its own (no trust chain)."""
    from workstation.schema.structs import convert
    from workstation.schema.toml import parse_toml
    from workstation.task.queue import QueueFile

    raw = _blob(repo, commit, "queue.toml")
    problems: tuple[Problem, ...] = ()
    table = None
    if raw is not None:
        try:
            doc = convert(parse_toml(raw.decode("utf-8"), Path("queue.toml")), QueueFile, file=Path("queue.toml"))
            table = doc.records
        except (Problem, UnicodeDecodeError) as exc:
            problems = (Problem(Path("queue.toml"), getattr(exc, "key", ""),
                                f"the committed queue.toml does not read ({getattr(exc, 'problem', exc)}); "
                                "kws uses the default record policy (signatures required)"),)
    path = table.allowed_signers if table is not None else DEFAULT_SIGNERS
    path = path.strip().removeprefix("./")
    signers = None
    if table is None or table.signatures != "off":
        blob = _blob(repo, commit, path)
        signers = blob.decode("utf-8", "replace") if blob is not None else None
    if table is None:
        return RecordsPolicy(allowed_signers=path, signers=signers, problems=problems)
    return RecordsPolicy(table.signatures, path, signers, table.self_resolution, table.overturned_verdicts, problems)


@contextlib.contextmanager
def _signers_file(text: str) -> Iterator[str]:
    fd, path = tempfile.mkstemp(prefix="kws-allowed-signers-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text if text.endswith("\n") else text + "\n")
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _cache_path(signers: str) -> Path | None:
    """Where the checks of commits against ``signers`` are kept between commands: the
    user's kws state folder (like drafts; outside every queue, which task code can write),
    one file per allowed-signers text. None when there is no state folder."""
    try:
        from workstation.repo.gitqueue import state_dir

        return state_dir() / "signatures" / f"{hashlib.sha256(signers.encode()).hexdigest()[:32]}.json"
    except Problem:  # a settings problem (settings.current raises it): no cache, every check runs
        return None


def _signatures(repo: git.Repo, signers: str, commits: Iterable[str]) -> dict[str, tuple[str, str, str, str]]:
    """``{commit: (%G?, %GS, %GK, author)}`` for ``commits`` checked against ``signers``.

    A commit id names its content, signature included, so the answer for one allowed-
    signers text never changes: answers are kept in :func:`_cache_path` (git runs
    ``ssh-keygen`` twice per signed commit, ~10-50 ms each; a queue of thousands of
    records would wait minutes). ``E`` (could not check) is never kept."""
    commits = list(dict.fromkeys(commits))
    if not commits:
        return {}
    cache_file = _cache_path(signers)
    cache: dict[str, list[str]] = {}
    if cache_file is not None:
        with contextlib.suppress(OSError, ValueError):
            loaded = json.loads(cache_file.read_text(encoding="utf-8"))
            if isinstance(loaded, dict):
                cache = {k: v for k, v in loaded.items() if isinstance(v, list) and len(v) == 4}
    out = {c: (cache[c][0], cache[c][1], cache[c][2], cache[c][3]) for c in commits if c in cache}
    todo = [c for c in commits if c not in out]
    if todo:
        with _signers_file(signers) as path:
            proc = git_result(repo, "-c", f"gpg.ssh.allowedSignersFile={path}", "log", "--no-walk=unsorted",
                              "--stdin", "--format=%H%x00%G?%x00%GS%x00%GK%x00%an <%ae>%x01",
                              input=("\n".join(todo) + "\n").encode())
        fresh = {}
        for chunk in proc.stdout.decode("utf-8", "replace").split("\x01"):
            parts = chunk.strip("\n").split("\x00")
            if len(parts) == 5:
                out[parts[0]] = fresh[parts[0]] = (parts[1], parts[2], parts[3], parts[4])
        keep = {c: list(v) for c, v in fresh.items() if v[0] != "E"}
        if keep and cache_file is not None:
            cache.update(keep)
            with contextlib.suppress(OSError):
                cache_file.parent.mkdir(parents=True, exist_ok=True)
                tmp = cache_file.with_name(f"{cache_file.name}.{os.getpid()}.tmp")
                tmp.write_text(json.dumps(cache), encoding="utf-8")
                os.replace(tmp, cache_file)
    return out


def records_policy(repo: git.Repo, rev: str = "HEAD") -> RecordsPolicy:
    """The record policy of the history of ``rev`` (module doc): the first policy the
    history states, then each change made by a commit signed by a key the policy it
    replaces allows; changes without such a signature are ignored, each a Problem."""
    harden(repo)
    head = rev_id(repo, rev)
    if head is None:
        return RecordsPolicy()
    key = (str(repo.git_dir), head)
    if key not in _POLICIES:  # a commit id names its whole history: the answer never changes
        if len(_POLICIES) > 64:
            _POLICIES.clear()
        _POLICIES[key] = _policy_of_history(repo, head)
    return _POLICIES[key]


_POLICIES: dict[tuple[str, str], RecordsPolicy] = {}


def _policy_of_history(repo: git.Repo, head: str) -> RecordsPolicy:
    at_head = _policy_at(repo, head)
    paths = sorted({"queue.toml", DEFAULT_SIGNERS, at_head.allowed_signers})
    proc = git_result(repo, "log", "--first-parent", "--reverse", "--format=%H", head, "--", *paths)
    commits = proc.stdout.decode().split() if proc.returncode == 0 else []
    trusted = RecordsPolicy()
    problems: list[Problem] = []
    first = True
    for c in commits:
        st = _policy_at(repo, c)
        if first:
            trusted, first = st, False
            continue
        if st._state() == trusted._state():
            continue
        if trusted.signatures == "required" and trusted.signers is not None:
            status, signer, _key, author = _signatures(repo, trusted.signers, [c]).get(c, ("N", "", "", "?"))
            if status != "G":
                what = "queue.toml's [records] table" if st.signers == trusted.signers else \
                    f"the allowed signers ({st.allowed_signers})"
                problems.append(Problem(Path(st.allowed_signers if st.signers != trusted.signers else "queue.toml"),
                                        "", f"{what} changed by commit {c[:12]} ({author}), which is not signed by a "
                                        f"key the allowed signers before it list ({_why(status, signer, '')}): the "
                                        "change is ignored; an owner makes it again in a signed commit"))
                continue
        trusted = st
    return RecordsPolicy(*trusted._state(), problems=tuple(problems) + at_head.problems)


# --------------------------------------------------------------------------------------------
# verifying records


def _why(status: str, signer: str, key: str) -> str:
    return {
        "N": "not signed",
        "U": f"signed by a key the queue's allowed signers do not list{f' ({key})' if key else ''}",
        "B": "bad signature (the commit was changed after it was signed)",
        "E": "the signature could not be checked (is ssh-keygen installed? a GPG signature?)",
        "X": "the signature has expired",
        "Y": "signed by an expired key",
        "R": "signed by a revoked key",
    }.get(status, f"signature status {status!r}")


def _adding_commits(repo: git.Repo, rev: str) -> dict[str, str]:
    """``{path: commit}``: for each file under the record folders in the history of ``rev``
    (every parent followed), the newest commit that added it."""
    proc = git_result(repo, "-c", "core.quotePath=off", "log", "--diff-filter=A", "--no-renames", "--name-only",
                      "--format=%x00%H", rev, "--", *FOLDERS.values())
    out: dict[str, str] = {}
    if proc.returncode != 0:
        return out
    for chunk in proc.stdout.decode("utf-8", "surrogateescape").split("\0")[1:]:
        head, _, names = chunk.partition("\n")
        for name in names.splitlines():
            if name.strip():
                out.setdefault(name.strip(), head.strip())
    return out


def verify_added(repo: git.Repo, policy: RecordsPolicy, records: Iterable[tuple[str, str]],
                 rev: str = "HEAD") -> dict[str, Verification]:
    """``{path: Verification}`` for ``records`` (``(path, reviewer email)`` pairs, paths
    relative to the queue root) in the history of ``rev`` under ``policy`` (not ``off``)."""
    records = list(records)
    adding = _adding_commits(repo, rev)
    sigs = _signatures(repo, policy.signers, {adding[p] for p, _ in records if p in adding}) \
        if policy.signers is not None else {}
    out: dict[str, Verification] = {}
    for path, email in records:
        c = adding.get(path)
        if c is None:
            out[path] = Verification(False, None, "no commit in this history adds it")
            continue
        status, signer, key, author = sigs.get(c, ("N", "", "", ""))
        where = f"commit {c[:12]}" + (f" by {author}" if author else "")
        if policy.signers is None:
            out[path] = Verification(False, c, f"no allowed signers file ({policy.allowed_signers}) in this queue "
                                     f"to check {where} against")
            continue
        if status != "G":
            out[path] = Verification(False, c, f"{_why(status, signer, key)} ({where})", signer)
            continue
        principals = {p.strip().lower() for p in signer.split(",") if p.strip()}
        if email.strip().lower() not in principals:
            out[path] = Verification(False, c, f"signed by {signer}, but the record names {email} as its reviewer "
                                     f"({where})", signer)
            continue
        out[path] = Verification(True, c, "", signer)
    return out


def check_commit(repo: git.Repo, commit: str, email: str, rev: str = "HEAD",
                 policy: RecordsPolicy | None = None) -> Verification:
    """Whether ``commit`` (a record of reviewer ``email``) verifies under ``policy``
    (default: the policy of ``rev``): what its author is told right after writing it."""
    policy = policy if policy is not None else records_policy(repo, rev)
    if policy.off:
        return Verification(True, commit)
    if policy.signers is None:
        return Verification(False, commit, policy.note or "")
    status, signer, key, _ = _signatures(repo, policy.signers, [commit]).get(commit, ("N", "", "", ""))
    if status != "G":
        return Verification(False, commit, _why(status, signer, key), signer)
    if email.lower() not in {p.strip().lower() for p in signer.split(",")}:
        return Verification(False, commit, f"signed by {signer}, not {email}", signer)
    return Verification(True, commit, "", signer)


# --------------------------------------------------------------------------------------------
# the reviewer's side: signing, and setting it up once


def signing_key(repo: git.Repo | None) -> str | None:
    """The SSH key git signs commits with in ``repo`` (``user.signingkey`` with
    ``gpg.format = ssh``), or None when SSH signing is not set up."""
    if (git_config_get("gpg.format", repo) or "").lower() != "ssh":
        return None
    return git_config_get("user.signingkey", repo)


def public_key(key: str) -> str | None:
    """The public key line (``ssh-ed25519 AAAA... comment``) of ``key``: a literal
    ``key::...``, a ``.pub`` file, the ``.pub`` beside a private key file, or
    ``ssh-keygen -y`` of the private key (may ask for its passphrase). None when none."""
    if key.startswith("key::"):
        return key[5:].strip()
    if key.startswith(("ssh-", "ecdsa-", "sk-")):
        return key.strip()
    p = Path(key).expanduser()
    for cand in ((p,) if p.suffix == ".pub" else (Path(str(p) + ".pub"),)):
        with contextlib.suppress(OSError):
            return cand.read_text(encoding="utf-8").strip().splitlines()[0]
    try:
        proc = subprocess.run(["ssh-keygen", "-y", "-f", str(p)], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def allowed_signers_line(email: str, pub: str) -> str:
    """The allowed-signers line for reviewer ``email`` and public key ``pub`` (key type and
    base64; a trailing comment is dropped): ``email namespaces="git" ssh-ed25519 AAAA...``."""
    parts = pub.split()
    return f'{email.lower()} namespaces="git" {" ".join(parts[:2])}'


@dataclass
class SetupPlan:
    """What ``kws signing setup`` does: ``config`` (key, value) pairs for git, the
    ``line`` to add to the queue's allowed signers, ``problems`` that stop it."""

    key: str | None
    line: str | None
    config: list[tuple[str, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    listed: bool = False


_DEFAULT_KEYS = ("~/.ssh/id_ed25519", "~/.ssh/id_ecdsa", "~/.ssh/id_rsa")


def setup_plan(repo: git.Repo, who: Identity, key: str | None = None) -> SetupPlan:
    """The git configuration that makes ``who`` sign record commits with ``key`` (default:
    the configured ``user.signingkey``, else the first of ``~/.ssh/id_ed25519``,
    ``id_ecdsa``, ``id_rsa`` that exists) and the allowed-signers line its owners add."""
    key = key or signing_key(repo)
    if key is None:
        key = next((k for k in _DEFAULT_KEYS if Path(k).expanduser().exists()), None)
    if key is None:
        return SetupPlan(None, None, problems=["no SSH key found (~/.ssh/id_ed25519, id_ecdsa, id_rsa): make one "
                                               "with kws signing setup --new-key ~/.ssh/id_ed25519, or give --key"])
    if not key.startswith(("key::", "ssh-")):
        key = str(Path(key).expanduser().resolve())
    pub = public_key(key)
    if pub is None:
        return SetupPlan(key, None, problems=[f"cannot read the public key of {key} (give the .pub file, or a key "
                                              "without a passphrase prompt)"])
    line = allowed_signers_line(who.email, pub)
    policy = records_policy(repo)
    keyid = " ".join(pub.split()[:2])  # key type and base64, as the allowed signers list it
    listed = policy.signers is not None and any(
        who.email.lower() in ln.split(" ", 1)[0].lower().split(",") and keyid in ln
        for ln in policy.signers.splitlines())
    return SetupPlan(key, line, [("gpg.format", "ssh"), ("user.signingkey", key)], listed=listed)
