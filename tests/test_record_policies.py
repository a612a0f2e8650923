"""The queue owner's record policies (queue.toml ``[records]``: self_resolution,
overturned_verdicts), disputes and resolutions that reach the remote on write, the
"records not pushed" count, and two resolutions of one dispute told before the push."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.recordkit import (
    ALICE,
    BOB,
    CAROL,
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
from workstation.records.model import RecordError
from workstation.records.parse import load_records
from workstation.records.store import commit_dispute, commit_resolution
from workstation.records.sync import sync, unpushed_records


@pytest.fixture
def env(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    return tmp_path


def _as(who) -> dict[str, str]:
    return {"GIT_AUTHOR_NAME": who.name, "GIT_AUTHOR_EMAIL": who.email,
            "GIT_COMMITTER_NAME": who.name, "GIT_COMMITTER_EMAIL": who.email}


def _policy(repo, **keys: str) -> None:
    """Commit queue.toml's [records] table with ``keys`` (signatures stay off)."""
    extra = "".join(f'{k} = "{v}"\n' for k, v in keys.items())
    (Path(repo.working_tree_dir) / "queue.toml").write_text(QUEUE_TOML + extra)
    repo.git.commit("-q", "-am", "queue policy")


def _remote_files(bare: Path, folder: str) -> list[str]:
    out = subprocess.run(["git", "-C", str(bare), "ls-tree", "-r", "--name-only", "main", "--", folder],
                         capture_output=True, text=True, check=True).stdout
    return out.split()


# -------------------------------------------------------------------------------------------
# self_resolution


def test_a_verdicts_author_may_not_resolve_its_dispute_unless_the_queue_allows(env):
    repo = make_queue(env / "q")
    v = verdict(repo, "alpha", ALICE, "reject", correctness="incorrect")
    d = commit_dispute(repo, v, {"correctness": "correct"}, "it is correct", RUBRIC, identity=BOB)
    rs = load_records(repo)
    with pytest.raises(RecordError, match=r"self_resolution = 'refuse'"):
        commit_resolution(repo, rs, rs.dispute(d.dispute_id), "upheld", "mine stands", identity=ALICE)
    _policy(repo, self_resolution="allow")
    rs = load_records(repo)
    r = commit_resolution(repo, rs, rs.dispute(d.dispute_id), "upheld", "mine stands", identity=ALICE)
    assert load_records(repo).resolution_of(d.dispute_id) == r
    # the owners refuse it again: the self-resolution committed meanwhile no longer counts
    _policy(repo, self_resolution="refuse")
    rs = load_records(repo)
    assert rs.resolution_of(d.dispute_id) is None and rs.open_disputes("alpha")
    assert any(p.file == r.path and "their own verdict" in p.problem for p in diagnose(repo).problems)


# -------------------------------------------------------------------------------------------
# overturned_verdicts (calibration)


@pytest.mark.parametrize(("policy", "agree"), [(None, "1/1"), ("author", "0/1"), ("excluded", None)])
def test_calibration_counts_an_overturned_verdict_as_the_queue_says(env, policy, agree):
    repo = make_queue(env / "q")
    root = Path(repo.working_tree_dir)
    (root / "gold").mkdir()
    (root / "gold" / "alpha.toml").write_text('overall = "reject"\n')
    if policy:
        _policy(repo, overturned_verdicts=policy)
    v = verdict(repo, "alpha", ALICE, "accept")
    d = commit_dispute(repo, v, {"overall": "reject"}, "wrong at N=1025", RUBRIC, identity=BOB)
    rs = load_records(repo)
    commit_resolution(repo, rs, rs.dispute(d.dispute_id), "overturned", "the dispute is right", identity=CAROL)
    cal = calibrate(root, RUBRIC)
    rows = {(str(a.reviewer), a.field): f"{a.agree}/{a.total}" for a in cal.agreements}
    assert rows.get((str(ALICE), "overall")) == agree
    text = format_calibration(cal)
    if policy == "excluded":
        assert "1 verdict(s) changed by a resolution are not counted" in text
    if policy == "author":
        assert "overturned_verdicts = \"author\"" in text


# -------------------------------------------------------------------------------------------
# disputes and resolutions reach the remote; what has not is counted


def test_disputes_and_resolutions_are_pushed_on_write_and_unpushed_ones_counted(env):
    bare, (a, b) = make_remote(env, 2)
    set_repo_identity(a, ALICE)
    set_repo_identity(b, BOB)
    v = verdict(a, "alpha", ALICE, "reject", correctness="incorrect")
    sync(a)
    sync(b)
    cli, root = records_cli(), b.working_tree_dir
    r = CliRunner().invoke(cli, ["dispute", v.verdict_id[:8], "--queue", root, "--field", "correctness=correct",
                                 "--rationale", "it is correct", "--no-sync"])
    assert r.exit_code == 0, r.output
    assert unpushed_records(b) == 1 and _remote_files(bare, "disputes") == []
    assert "1 records not pushed" in r.output
    r = CliRunner().invoke(cli, ["history", "alpha", "--queue", root])
    assert "1 records not pushed" in r.output
    assert any("1 records not pushed" in n for n in diagnose(b).notes)
    r = CliRunner().invoke(cli, ["dispute", v.verdict_id[:8], "--queue", root, "--field", "overall=accept",
                                 "--rationale", "and it is fine"])
    assert r.exit_code == 0, r.output
    assert "sent 2" in r.output and unpushed_records(b) == 0 and len(_remote_files(bare, "disputes")) == 2
    did = load_records(b).disputes[0].dispute_id
    r = CliRunner().invoke(cli, ["resolve", did[:8], "--queue", root, "--outcome", "upheld", "--rationale", "x"],
                           env=_as(CAROL))
    assert r.exit_code == 0, r.output
    assert len(_remote_files(bare, "resolutions")) == 1 and unpushed_records(b) == 0
    assert unpushed_records(env / "nowhere") == 0


def test_a_second_resolution_is_told_before_it_is_pushed(env):
    bare, (a, b) = make_remote(env, 2)
    set_repo_identity(a, ALICE)
    set_repo_identity(b, BOB)
    v = verdict(a, "alpha", CAROL, "reject", correctness="incorrect")
    d = commit_dispute(a, v, {"correctness": "correct"}, "it is correct", RUBRIC, identity=CAROL)
    sync(a)
    sync(b)
    cli = records_cli()
    r = CliRunner().invoke(cli, ["resolve", d.dispute_id[:8], "--queue", a.working_tree_dir, "--outcome", "upheld",
                                 "--rationale", "the verdict stands"])
    assert r.exit_code == 0, r.output  # Alice's reaches the remote first
    r = CliRunner().invoke(cli, ["resolve", d.dispute_id[:8], "--queue", b.working_tree_dir, "--outcome",
                                 "overturned", "--rationale", "the dispute is right"])
    assert r.exit_code == 1
    out = " ".join(r.output.split())
    assert "your resolution was NOT pushed" in out and "upheld by alice@example.com" in out
    assert "resolution_conflict = 'open'" in out and "--supersede" in out
    assert len(_remote_files(bare, "resolutions")) == 1 and unpushed_records(b) == 1
    # the reviewer decides: a plain sync sends it, and the queue's rule decides for everyone
    res = sync(b)
    assert res.conflicts and len(_remote_files(bare, "resolutions")) == 2
    assert load_records(b).resolution_of(d.dispute_id) is None
