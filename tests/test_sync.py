"""kws sync against a real bare remote and several clones: concurrent reviewers in parallel
processes lose no record; refusals say what is wrong and keep everything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import git
import pytest
from click.testing import CliRunner

from tests.recordkit import (
    ALICE,
    BOB,
    CAROL,
    RUBRIC,
    git_lines,
    isolate,
    make_remote,
    records_cli,
    set_repo_identity,
    values,
    verdict,
)
from workstation.records.drafts import Draft, load_draft, save_draft
from workstation.records.history import task_history
from workstation.records.parse import load_records
from workstation.records.store import (
    commit_dispute,
    commit_resolution,
    commit_verdict,
    reserve,
)
from workstation.records.sync import SyncError, sync, unsent
from workstation.repo.gitqueue import IdentityError

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def env(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    return tmp_path


@pytest.fixture
def cli():
    return records_cli()


def _remote_verdict_ids(bare: Path, tmp: Path) -> set[str]:
    check = git.Repo.clone_from(str(bare), tmp / f"check-{time.monotonic_ns()}")
    return {v.verdict_id for v in load_records(check.working_tree_dir).verdicts}


def test_two_clones_exchange_records(env):
    bare, (a, b) = make_remote(env, 2)
    set_repo_identity(a, ALICE)
    set_repo_identity(b, BOB)
    va = verdict(a, "alpha", ALICE, "reject")
    vb = verdict(b, "alpha", BOB, "accept")
    assert unsent(a) == 1
    r1 = sync(a)
    assert (r1.received, r1.sent, r1.attempts) == (0, 1, 1)
    assert unsent(a) == 0
    r2 = sync(b)  # the remote moved: b's commit is rebased onto a's, then pushed
    assert (r2.received, r2.sent) == (1, 1)
    r3 = sync(a)
    assert (r3.received, r3.sent) == (1, 0)
    assert str(sync(a)).startswith("up to date")
    for repo in (a, b):
        rs = load_records(repo.working_tree_dir)
        assert {v.verdict_id for v in rs.verdicts} == {va.verdict_id, vb.verdict_id}
        assert rs.problems == []
    assert a.head.commit.hexsha == b.head.commit.hexsha
    # b's verdict commit was rewritten by the rebase; its id (stored in the file) was not
    trailers = git_lines(b, "log", "--format=%(trailers:key=Kws-Record,valueonly)")
    assert f"verdict:{vb.verdict_id}" in trailers and f"verdict:{va.verdict_id}" in trailers
    # never a merge commit, never a force
    assert all(len(c.parents) <= 1 for c in a.iter_commits())


def test_rejected_push_is_rebased_and_retried(env, monkeypatch):
    bare, (a, b) = make_remote(env, 2)
    set_repo_identity(a, ALICE)
    set_repo_identity(b, BOB)
    verdict(a, "alpha", ALICE)
    verdict(b, "beta", BOB)
    sync(a)
    # b's first fetch sees nothing new (as if a pushed right after it), so its push is
    # rejected; the next round fetches, rebases and pushes
    import workstation.records.sync as sync_mod

    real = sync_mod.run_git
    skipped = []

    def flaky(repo, *args, **kwargs):
        if args[0] == "fetch" and not skipped:
            skipped.append(True)
            return b""
        return real(repo, *args, **kwargs)

    monkeypatch.setattr(sync_mod, "run_git", flaky)
    res = sync(b)
    assert skipped and res.attempts == 2 and res.sent == 1 and res.received == 1
    monkeypatch.undo()
    assert len(_remote_verdict_ids(bare, env)) == 2


WORKER = textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path
    import git
    from workstation.records.drafts import Draft, save_draft
    from workstation.repo.gitqueue import Identity
    from workstation.records.store import commit_verdict
    from workstation.rubric.model import find_rubric
    from workstation.records.sync import SyncError, sync

    clone, name, email, count, go = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
    who = Identity(name, email)
    repo = git.Repo(clone)
    rubric = find_rubric("kernel-review")
    while not os.path.exists(go):
        time.sleep(0.005)
    out = {"ids": [], "attempts": [], "gave_up": 0}
    for i in range(count):
        task = ("alpha", "beta")[i % 2]
        vals = dict(reference="legitimate", tolerance="appropriate", correctness="correct",
                    edge_coverage="covered", benchmark="not-applicable",
                    failure_report="not-applicable", overall="accept", rationale="")
        d = Draft(task=task, queue=clone, values=vals, rubric_id=rubric.id, rubric_version=rubric.version)
        save_draft(d)
        v = commit_verdict(repo, d, rubric, identity=who)
        out["ids"].append(v.verdict_id)
        try:
            out["attempts"].append(sync(repo, attempts=40, identity=who).attempts)
        except SyncError as exc:
            if exc.kind != "gave-up":
                raise
            out["gave_up"] += 1
    print(json.dumps(out))
    """
)


def test_concurrent_reviewers_lose_no_verdict(env):
    n_clones, per = 4, 4
    bare, clones = make_remote(env, n_clones)
    script = env / "worker.py"
    script.write_text(WORKER)
    go = env / "go"
    penv = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    procs = []
    for i, c in enumerate(clones):
        procs.append(
            subprocess.Popen(
                [sys.executable, str(script), c.working_tree_dir, f"Reviewer {i}", f"r{i}@example.com",
                 str(per), str(go)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=penv,
            )
        )
    time.sleep(0.5)
    go.write_text("")
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    made = {vid for r in results for vid in r["ids"]}
    assert len(made) == n_clones * per
    # a final round for anyone who gave up on a busy remote; then every clone has everything
    for c in clones:
        sync(c, identity=ALICE)
    for c in clones:
        sync(c, identity=ALICE)
        rs = load_records(c.working_tree_dir)
        assert {v.verdict_id for v in rs.verdicts} == made and rs.problems == []
        assert not c.is_dirty(untracked_files=True)
    assert _remote_verdict_ids(bare, env) == made
    # the processes really raced: somebody's push was rejected and retried
    attempts = [a for r in results for a in r["attempts"]]
    print(f"sync rounds per verdict: max {max(attempts)}, mean {sum(attempts) / len(attempts):.2f}; "
          f"gave up {sum(r['gave_up'] for r in results)}")
    assert max(attempts) >= 2


def test_review_dispute_resolve_concurrently_in_two_clones(env):
    bare, (a, b) = make_remote(env, 2)
    set_repo_identity(a, ALICE)
    set_repo_identity(b, BOB)
    va = verdict(a, "alpha", ALICE, "reject", correctness="incorrect")
    sync(a)
    sync(b)
    vb = verdict(b, "alpha", BOB, "accept")  # b reviews the same task meanwhile
    db = commit_dispute(b, load_records(b.working_tree_dir).verdict(va.verdict_id),
                        {"correctness": "correct", "overall": "accept"}, "the mismatch is the reference's", RUBRIC)
    ra = reserve(a, "beta", 1)  # a works on, unaware
    sync(b)
    sync(a)
    rs_a = load_records(a.working_tree_dir)
    res = commit_resolution(a, rs_a, rs_a.dispute(db.dispute_id), "amended", "needs work, not reject",
                            {"overall": "needs-work"}, RUBRIC, identity=CAROL)  # not the verdict's author
    sync(a)
    sync(b)
    ha, hb = task_history(a, "alpha"), task_history(b, "alpha")
    assert [e.record.id for e in ha.entries] == [e.record.id for e in hb.entries]
    assert {e.record.id for e in ha.entries} == {va.verdict_id, vb.verdict_id, db.dispute_id, res.resolution_id}
    rs_b = load_records(b.working_tree_dir)
    assert rs_b.effective_values(rs_b.verdict(va.verdict_id))["overall"] == "needs-work"
    assert rs_b.reservation("beta") == ra and rs_b.open_disputes() == []


@pytest.mark.parametrize("problem", ["dirty", "identity", "detached", "unreachable", "no-remote", "conflict"])
def test_sync_refusals_keep_commits_and_drafts(env, problem, cli):
    bare, (a, b) = make_remote(env, 2)
    set_repo_identity(a, ALICE)
    root = Path(a.working_tree_dir)
    v = verdict(a, "alpha", ALICE)
    draft = Draft(task="beta", queue=str(root), values=values("accept"), rubric_id=RUBRIC.id, rubric_version=RUBRIC.version)
    save_draft(draft)
    if problem == "dirty":  # an incoming change to a file with an uncommitted edit
        set_repo_identity(b, BOB)
        (Path(b.working_tree_dir) / "tasks" / "beta" / "spec.md").write_text("bob's spec\n")
        b.git.commit("-q", "-am", "bob edits beta")
        sync(b)
        (root / "tasks" / "beta" / "spec.md").write_text("edited\n")
    elif problem == "identity":
        set_repo_identity(a, None)
    elif problem == "detached":
        a.git.checkout("-q", "--detach")
    elif problem == "unreachable":
        a.git.remote("set-url", "origin", str(env / "gone.git"))
    elif problem == "no-remote":
        a.git.remote("remove", "origin")
    elif problem == "conflict":
        set_repo_identity(b, BOB)
        (Path(b.working_tree_dir) / "tasks" / "beta" / "spec.md").write_text("bob's spec\n")
        b.git.commit("-q", "-am", "bob edits beta")
        sync(b)
        (root / "tasks" / "beta" / "spec.md").write_text("alice's spec\n")
        a.git.commit("-q", "-am", "alice edits beta")
    head = a.head.commit.hexsha
    with pytest.raises((SyncError, IdentityError)) as ei:
        sync(a)
    msg = str(ei.value)
    expect = {
        "dirty": "uncommitted changes that the update would overwrite:\n  tasks/beta/spec.md",
        "identity": "no git identity",
        "detached": "HEAD is detached",
        "unreachable": "cannot reach remote 'origin'",
        "no-remote": "has no remote",
        "conflict": "conflicting: tasks/beta/spec.md",
    }[problem]
    assert expect in msg
    if problem != "identity":
        assert "nothing was lost" in msg
    # nothing lost: the branch and the verdict are where they were, the draft is kept
    if problem == "detached":
        assert a.git.rev_parse("main") == head
    else:
        assert a.head.commit.hexsha == head and a.active_branch.name == "main"
    assert not (Path(a.git_dir) / "rebase-merge").exists()
    assert load_records(root).verdict(v.verdict_id) == v
    assert load_draft(root, "beta").values == draft.values
    # the CLI says the same, with exit status 1
    r = CliRunner().invoke(cli, ["sync", "--queue", str(root)])
    assert r.exit_code == 1 and expect in r.output


def test_unreachable_then_back(env):
    bare, (a,) = make_remote(env, 1)
    set_repo_identity(a, ALICE)
    v = verdict(a, "alpha", ALICE)
    url = a.remote("origin").url
    a.git.remote("set-url", "origin", str(env / "gone.git"))
    with pytest.raises(SyncError) as ei:
        sync(a)
    assert ei.value.kind == "unreachable"
    a.git.remote("set-url", "origin", url)
    assert sync(a).sent == 1
    assert v.verdict_id in _remote_verdict_ids(bare, env)


def test_sync_to_an_empty_remote_sets_upstream(env):
    from tests.recordkit import make_queue

    q = make_queue(env / "q")
    bare = env / "empty.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    q.create_remote("origin", str(bare))
    v = verdict(q, "alpha", ALICE)
    res = sync(q)
    assert res.sent == 2 and res.received == 0
    assert q.active_branch.tracking_branch().name == "origin/main"
    assert v.verdict_id in _remote_verdict_ids(bare, env)


def test_reserve_race_after_sync_tells_the_loser(env, cli):
    bare, (a, b) = make_remote(env, 2)
    set_repo_identity(a, ALICE)
    set_repo_identity(b, BOB)
    run = CliRunner().invoke
    r = run(cli, ["reserve", "alpha", "--queue", a.working_tree_dir, "--no-sync"])
    assert r.exit_code == 0
    r = run(cli, ["reserve", "alpha", "--queue", b.working_tree_dir])  # b did not see a's yet
    assert r.exit_code == 0, r.output
    r = run(cli, ["sync", "--queue", a.working_tree_dir])
    assert r.exit_code == 0, r.output
    # b's reservation reached the shared history first (a's stayed local until this sync,
    # which replays it after b's): the history orders them, not the clocks, so b holds it
    rs = load_records(a.working_tree_dir)
    assert rs.reservation("alpha").reviewer == BOB
    r = run(cli, ["reserve", "alpha", "--queue", a.working_tree_dir])
    assert r.exit_code == 1 and "reserved by Bob Reviewer" in r.output
    # c, a third clone that has not fetched anything since: its reservation commits, and
    # the sync after it shows that b holds the task
    c = git.Repo.clone_from(str(bare), env / "clone-c")
    set_repo_identity(c, CAROL)
    run(cli, ["sync", "--queue", a.working_tree_dir])
    subprocess.run(["git", "-C", c.working_tree_dir, "reset", "-q", "--hard", "HEAD~2"], check=True)
    r = run(cli, ["reserve", "alpha", "--queue", c.working_tree_dir])
    assert r.exit_code == 1 and "reserved alpha first" in r.output and "yours does not hold" in r.output, r.output


def test_verdict_commit_failure_then_sync_keeps_draft(env):
    # a refused commit leaves the draft, a failing sync leaves the commit: both survive
    bare, (a,) = make_remote(env, 1)
    set_repo_identity(a, None)
    root = Path(a.working_tree_dir)
    d = Draft(task="alpha", queue=str(root), values=values("accept"), rubric_id=RUBRIC.id, rubric_version=RUBRIC.version)
    save_draft(d)
    with pytest.raises(IdentityError):
        commit_verdict(a, d, RUBRIC)
    assert load_draft(root, "alpha") is not None
    set_repo_identity(a, CAROL)
    v = commit_verdict(a, load_draft(root, "alpha"), RUBRIC)
    assert load_draft(root, "alpha") is None
    a.git.remote("set-url", "origin", str(env / "gone.git"))
    with pytest.raises(SyncError):
        sync(a)
    assert load_records(root).verdict(v.verdict_id).reviewer == CAROL
