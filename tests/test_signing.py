"""Signed records (docs/records.md, "Signed records"): a record counts only when the commit
that added it is signed by a key the queue's committed allowed-signers file lists for the
reviewer the record names. Real ssh-keygen keys, made in each test's tmp_path."""

from __future__ import annotations

import json
import logging
import subprocess
import tomllib
import uuid
from pathlib import Path

import pytest
import tomli_w
from click.testing import CliRunner

from tests.recordkit import (
    ALICE,
    BOB,
    QUEUE_TOML,
    RUBRIC,
    isolate,
    make_queue,
    make_remote,
    records_cli,
    set_repo_identity,
    verdict,
)
from workstation.records.calibration import calibrate, format_calibration
from workstation.records.doctor import diagnose
from workstation.records.history import format_history, task_history
from workstation.records.model import RecordError
from workstation.records.parse import load_records
from workstation.records.report import render_report
from workstation.records.signing import OFF_NOTE, allowed_signers_line, records_policy
from workstation.records.sync import sync
from workstation.repo.gitqueue import Identity

LEAD = Identity("Team Lead", "lead@example.com")
SIGNED_QUEUE_TOML = 'name = "test queue"\nrubric = "kernel-review"\n'


@pytest.fixture
def env(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    return tmp_path


def keygen(tmp: Path, name: str) -> Path:
    """A new ed25519 key without a passphrase at ``tmp/keys/name`` (and ``.pub``)."""
    path = tmp / "keys" / name
    path.parent.mkdir(exist_ok=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(path)], check=True)
    return path


def use_key(repo, key: Path | None) -> None:
    """The reviewer of ``repo`` signs with ``key`` (git's SSH signing, in the clone's config)."""
    with repo.config_writer() as cw:
        cw.set_value("gpg", "format", "ssh")
        cw.set_value("user", "signingkey", str(key))


def line(who: Identity, key: Path) -> str:
    return allowed_signers_line(who.email, Path(str(key) + ".pub").read_text())


def require_signatures(repo, *lines: str) -> None:
    """Commit a queue.toml that keeps signatures required and the allowed signers file."""
    root = Path(repo.working_tree_dir)
    (root / "queue.toml").write_text(SIGNED_QUEUE_TOML)
    (root / ".kws").mkdir(exist_ok=True)
    (root / ".kws" / "allowed_signers").write_text("".join(f"{ln}\n" for ln in lines))
    repo.git.add("queue.toml", ".kws/allowed_signers")
    repo.git.commit("-q", "-m", "records are signed")


def forge(repo, genuine, who: Identity, overall: str = "accept", *, extra_task: str | None = "gamma",
          sign_with: Path | None = None, also: dict[str, str] | None = None) -> Path:
    """A task-submission commit that also adds a verdict file claiming ``who`` (copied from
    the ``genuine`` verdict with a new id), optionally signed with ``sign_with``."""
    root = Path(repo.working_tree_dir)
    data = tomllib.loads((root / genuine.path).read_text())
    data.update({"verdict_id": str(uuid.uuid4()), "overall": overall, "reviewer": {"name": who.name, "email": who.email}})
    rel = Path("verdicts") / genuine.task / f"{who.email.replace('@', '-')}--20250101T000000.000000Z--abcdef.toml"
    (root / rel).write_text(tomli_w.dumps(data))
    paths = [str(rel)]
    if extra_task:
        (root / "tasks" / extra_task).mkdir(parents=True)
        (root / "tasks" / extra_task / "spec.md").write_text("# a new task\n")
        paths.append(f"tasks/{extra_task}")
    for name, text in (also or {}).items():
        (root / name).write_text(text)
        paths.append(name)
    repo.git.add(*paths)
    sign = ["-c", "gpg.format=ssh", "-c", f"user.signingkey={sign_with}"] if sign_with else []
    repo.git.execute(["git", *sign, "commit", "-q", *(["-S"] if sign_with else []), "-m", "add task gamma"])
    return rel


@pytest.fixture
def signed(env):
    """A queue whose records must be signed; Alice signs with a listed key."""
    repo = make_queue(env / "q")
    key = keygen(env, "alice")
    use_key(repo, key)
    require_signatures(repo, line(ALICE, key))
    return repo, key


def test_a_signed_record_counts_and_a_forged_one_in_a_task_submission_does_not(signed, env):
    repo, _key = signed
    v = verdict(repo, "alpha", ALICE, "reject", correctness="incorrect")
    rs = load_records(repo)
    assert rs.verdicts == [v] and rs.unverified == [] and rs.signature_note is None
    (kept,) = (env / "state" / "signatures").glob("*.json")  # checks are kept per allowed-signers text
    assert json.loads(kept.read_text())[repo.head.commit.hexsha][:2] == ["G", "alice@example.com"]
    rel = forge(repo, v, LEAD, "accept")
    rs = load_records(repo)
    assert rs.current_verdict("alpha") == v  # the forged "Team Lead accept" is not counted
    (u,) = rs.unverified
    assert u.path == rel and u.record.reviewer == LEAD and "not signed" in u.why
    assert u.commit == repo.head.commit.hexsha
    text = format_history(task_history(repo, "alpha", rs), rs)
    assert "1 unverified (not counted)" in text and "UNVERIFIED, not counted: not signed" in text
    assert "lead@example.com" in text
    md = render_report(repo, rs, v, RUBRIC)
    assert "## Unverified records (not counted)" in md and "**Verdict: REJECT**" in md
    problems = [p for p in diagnose(repo).problems if p.file == rel]
    assert problems and repo.head.commit.hexsha[:12] in problems[0].problem and "not signed" in problems[0].problem
    (root := Path(repo.working_tree_dir) / "gold").mkdir()
    (root / "alpha.toml").write_text('overall = "reject"\n')
    cal = calibrate(repo.working_tree_dir, RUBRIC)
    assert [str(r) for r in cal.reviewers] == [str(ALICE)]
    assert "1 unverified verdict(s)" in format_calibration(cal)
    r = CliRunner().invoke(records_cli(), ["doctor", "--queue", repo.working_tree_dir])
    assert r.exit_code == 1 and "unverified verdict by Team Lead" in r.output and str(rel) in r.output


@pytest.mark.parametrize("how", ["unlisted key", "listed key of another reviewer"])
def test_a_forged_record_signed_with_the_wrong_key_is_unverified(signed, env, how):
    repo, alice_key = signed
    v = verdict(repo, "alpha", ALICE, "reject", correctness="incorrect")
    key = keygen(env, "mallory") if how == "unlisted key" else alice_key
    forge(repo, v, LEAD, sign_with=key)
    rs = load_records(repo)
    assert rs.current_verdict("alpha") == v
    (u,) = rs.unverified
    if how == "unlisted key":
        assert "signed by a key the queue's allowed signers do not list" in u.why
    else:
        assert "signed by alice@example.com, but the record names lead@example.com" in u.why


class _Caught(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_a_reviewer_signing_with_an_unlisted_key_is_told_and_not_counted(signed, env):
    repo, _ = signed
    use_key(repo, keygen(env, "alice-laptop"))
    told, log = _Caught(), logging.getLogger("workstation.records")
    log.addHandler(told)
    try:
        v = verdict(repo, "alpha", ALICE)
    finally:
        log.removeHandler(told)
    assert any("unverified, so it is not counted" in m for m in told.messages), told.messages
    rs = load_records(repo)
    assert rs.verdicts == [] and rs.unverified[0].record == v
    assert "do not list" in rs.unverified[0].why


def test_a_reviewer_without_a_signing_key_is_refused_on_a_signed_queue(signed):
    repo, _ = signed
    with repo.config_writer() as cw:
        cw.remove_option("user", "signingkey")
    with pytest.raises(RecordError, match="kws signing setup"):
        verdict(repo, "alpha", ALICE)
    assert load_records(repo).verdicts == []


def test_an_unsigned_change_to_the_allowed_signers_is_ignored(signed, env):
    repo, alice_key = signed
    v = verdict(repo, "alpha", ALICE, "reject", correctness="incorrect")
    mallory = keygen(env, "mallory")
    signers = (Path(repo.working_tree_dir) / ".kws" / "allowed_signers").read_text()
    # the submitter lists their own key for the lead and signs the forged record with it
    forge(repo, v, LEAD, sign_with=mallory, also={".kws/allowed_signers": signers + line(LEAD, mallory) + "\n"})
    policy = records_policy(repo)
    assert "lead@example.com" not in (policy.signers or "")
    assert any("not signed by a key the allowed signers before it list" in p.problem for p in policy.problems)
    rs = load_records(repo)
    assert rs.current_verdict("alpha") == v and len(rs.unverified) == 1
    assert any("allowed signers" in p.problem and "ignored" in p.problem for p in diagnose(repo).problems)
    # an owner's signed change is accepted: Bob's key joins, and his records count
    bob_key = keygen(env, "bob")
    root = Path(repo.working_tree_dir)
    (root / ".kws" / "allowed_signers").write_text(signers + line(BOB, bob_key) + "\n")
    repo.git.add(".kws/allowed_signers")
    repo.git.execute(["git", "commit", "-q", "-S", "-m", "bob reviews here"])  # signed with alice's key (config)
    use_key(repo, bob_key)
    vb = verdict(repo, "beta", BOB)
    rs = load_records(repo)
    assert vb in rs.verdicts and "bob@example.com" in records_policy(repo).signers


def test_an_opted_out_queue_says_records_are_unsigned(env):
    repo = make_queue(env / "q")
    v = verdict(repo, "alpha", ALICE, "reject", correctness="incorrect")
    rs = load_records(repo)
    assert rs.verdicts == [v] and rs.signature_note == OFF_NOTE
    assert OFF_NOTE in format_history(task_history(repo, "alpha", rs), rs)
    assert OFF_NOTE in render_report(repo, rs, v, RUBRIC)
    assert OFF_NOTE in format_calibration(calibrate(repo.working_tree_dir, RUBRIC))
    assert OFF_NOTE in diagnose(repo).format()


def test_a_queue_with_no_signers_and_no_opt_out_counts_nothing(env):
    repo = make_queue(env / "q")
    v = verdict(repo, "alpha", ALICE)
    (Path(repo.working_tree_dir) / "queue.toml").write_text(SIGNED_QUEUE_TOML)
    repo.git.commit("-q", "-am", "signatures required, no allowed signers yet")
    rs = load_records(repo)
    assert rs.verdicts == [] and rs.unverified[0].record == v
    assert "no allowed signers file" in rs.unverified[0].why and "no record is verified" in rs.signature_note
    assert QUEUE_TOML != SIGNED_QUEUE_TOML


def test_records_stay_verified_through_a_sync_that_replays_them(env):
    bare, (a, b) = make_remote(env, 2)
    set_repo_identity(a, ALICE)
    set_repo_identity(b, BOB)
    ka, kb = keygen(env, "alice"), keygen(env, "bob")
    use_key(a, ka)
    use_key(b, kb)
    require_signatures(a, line(ALICE, ka), line(BOB, kb))
    sync(a)
    sync(b)
    va = verdict(a, "alpha", ALICE)
    vb = verdict(b, "beta", BOB)  # concurrent: b's sync replays its commit onto a's
    sync(a)
    sync(b)
    sync(a)
    for repo in (a, b):
        rs = load_records(repo)
        assert {v.verdict_id for v in rs.verdicts} == {va.verdict_id, vb.verdict_id} and rs.unverified == []


def test_signing_setup_prints_and_applies_the_configuration(env):
    repo = make_queue(env / "q")
    key = keygen(env, "alice")
    cli = records_cli()
    r = CliRunner().invoke(cli, ["signing", "setup", "--key", str(key), "--queue", repo.working_tree_dir])
    assert r.exit_code == 0, r.output
    assert "run: git config --global gpg.format ssh" in r.output
    assert line(ALICE, key) in r.output and "signatures = \"off\"" in r.output
    r = CliRunner().invoke(cli, ["signing", "setup", "--key", str(key), "--apply", "--local", "--queue",
                                 repo.working_tree_dir])
    assert r.exit_code == 0, r.output
    assert repo.git.config("--get", "gpg.format") == "ssh" and repo.git.config("--get", "user.signingkey") == str(key)
    require_signatures(repo, line(ALICE, key))
    r = CliRunner().invoke(cli, ["signing", "setup", "--queue", repo.working_tree_dir])
    assert r.exit_code == 0 and "already in this queue's allowed signers" in r.output
    v = verdict(repo, "alpha", ALICE)
    assert load_records(repo).verdicts == [v]
