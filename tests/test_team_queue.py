"""A team's queue (issue 41): the queue is where the reviewer stands (the clone holding the
current folder, as git finds a repository), every command that writes a record says where
and as whom, ``kws queue init`` starts a shared queue others can clone, signing does what
its text says, a record that does not count is named as such, and ids and paths that name
nothing say what is near."""

from __future__ import annotations

import subprocess
from pathlib import Path

import git
import pytest
from click.testing import CliRunner

from tests.recordkit import (
    ALICE,
    BOB,
    CAROL,
    isolate,
    make_queue,
    make_remote,
    set_repo_identity,
    values,
    verdict,
)
from tests.test_signing import keygen, line, require_signatures, use_key
from workstation.cli.main import main as kws
from workstation.records.parse import load_records
from workstation.records.signing import records_policy
from workstation.repo.gitqueue import QueueError, default_queue_path
from workstation.repo.locate import find_queue


@pytest.fixture
def env(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    return tmp_path


def invoke(*args: str):
    """``kws ARGS`` in this process (click's runner: stdout and stderr apart)."""
    return CliRunner().invoke(kws, list(args))


def verdict_args(task: str = "alpha", overall: str = "reject") -> list[str]:
    v = values(overall)
    return ["verdict", task, "--overall", overall, "--rationale", v["rationale"],
            *sum((["--field", f"{k}={x}"] for k, x in v.items() if k not in ("overall", "rationale")), [])]


def git_log(repo: git.Repo, fmt: str, *args: str) -> list[str]:
    return repo.git.log(f"--format={fmt}", *args).splitlines()


# -- where the queue is ---------------------------------------------------------------------


def test_the_queue_is_the_clone_you_stand_in_then_the_setting_then_the_sample(env, monkeypatch):
    q = make_queue(env / "q")
    (env / "q" / "tasks" / "alpha" / "deep").mkdir()
    monkeypatch.chdir(env / "q" / "tasks" / "alpha" / "deep")
    got = find_queue()
    assert got.root == env / "q" and got.how == "the clone you are in" and not got.sample
    assert find_queue(env / "q").how == "--queue"
    monkeypatch.chdir(env)  # no queue's clone here: the setting, else the sample
    monkeypatch.setenv("KWS_QUEUE", str(env / "q"))
    got = find_queue()
    assert got.root == env / "q" and "environment KWS_QUEUE" in got.how
    monkeypatch.delenv("KWS_QUEUE")
    got = find_queue(make=False)
    assert got.sample and got.root == default_queue_path() and not got.root.exists()
    with pytest.raises(QueueError, match=r"--queue .*/qq: no such folder; did you mean .*/q\?"):
        find_queue(env / "qq")
    q.close()


def test_a_dispute_from_a_second_clone_without_queue_lands_there_and_says_where(env, monkeypatch):
    bare, (a, b) = make_remote(env, 2)
    set_repo_identity(a, ALICE)
    set_repo_identity(b, BOB)
    monkeypatch.chdir(a.working_tree_dir)
    r = invoke(*verdict_args())
    assert r.exit_code == 0, r.output
    assert (f"kws: verdict -> queue {a.working_tree_dir} (the clone you are in), branch main, as {ALICE}, unsigned "
            "(this queue does not check signatures)") in r.stderr
    vid = r.stdout.split()[2]
    assert invoke("sync").exit_code == 0
    monkeypatch.chdir(Path(b.working_tree_dir) / "tasks")  # a subfolder of the clone
    assert invoke("sync").exit_code == 0
    r = invoke("dispute", vid[:8], "--field", "overall=needs-work", "--rationale", "one mask fixes it")
    assert r.exit_code == 0, r.output
    assert f"kws: dispute -> queue {b.working_tree_dir} (the clone you are in), branch main, as {BOB}" in r.stderr
    assert "sample queue" not in r.stderr
    rs = load_records(b.working_tree_dir)
    (d,) = rs.disputes
    assert d.reviewer.email == BOB.email and d.verdict_id == vid
    assert git_log(git.Repo(bare), "%s", "main")[0].startswith("kws dispute: alpha")  # pushed on write
    assert not default_queue_path().exists()  # nothing went to the per-user sample queue
    # kws doctor reports the clone it stands in, and says why that one
    r = invoke("doctor")
    assert f"note: queue {b.working_tree_dir}: the clone you are in" in r.stdout


def test_a_write_outside_any_queue_says_it_goes_to_the_sample_queue(env, monkeypatch):
    monkeypatch.setenv("GIT_AUTHOR_NAME", CAROL.name)
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", CAROL.email)
    monkeypatch.chdir(env)
    r = invoke("reserve", "relu-unwritten", "--no-sync")
    assert r.exit_code == 0, r.output
    assert f"queue {default_queue_path()} (the per-user sample queue)" in r.stderr
    assert "you are not inside a queue's clone and gave no --queue, so this reservation goes to the per-user sample " \
           "queue" in r.stderr


def test_the_queue_given_to_kws_itself_reaches_the_sub_command(env, monkeypatch):
    q = make_queue(env / "q")
    monkeypatch.chdir(env)
    r = invoke("--queue", str(env / "q"), "history", "alpha")
    assert r.exit_code == 0, r.output
    assert "history of alpha" in r.stdout
    r = invoke("--queue", str(env / "nowhere"), "doctor")
    assert r.exit_code == 1 and "nowhere: no such folder" in r.output and "not a kws queue" not in r.output
    q.close()


# -- ids and paths that name nothing ---------------------------------------------------------


def test_typos_in_task_ids_and_folders_say_what_is_near(env, monkeypatch):
    q = make_queue(env / "q", tasks=("alpha", "beta", "relu-unwritten"))
    monkeypatch.chdir(env / "q")
    r = invoke("report", "relu-unwrittn")
    assert r.exit_code == 1 and "no task 'relu-unwrittn'" in r.output and "did you mean relu-unwritten?" in r.output
    r = invoke("report", "alpha")
    assert r.exit_code == 1 and "no verdict on 'alpha'" in r.output and "did you mean" not in r.output
    r = invoke("history", "bet")
    assert "did you mean beta?" in r.output
    # kws check: a task id resolves in the queue you stand in; a typo names the nearest (it
    # stops before any task code runs)
    r = invoke("check", "relu-unwriten")
    assert r.exit_code == 2 and "no task 'relu-unwriten' in the queue" in r.stderr and "did you mean relu-unwritten" in r.stderr
    r = invoke("check", str(env / "q" / "tasks" / "alpah"))
    assert r.exit_code == 2 and "alpah: no such folder" in r.stderr and "did you mean" in r.stderr
    r = invoke("check", "--json", "nothing-like-it")
    assert r.exit_code == 2 and '"key": "TASK_DIR"' in r.stdout
    q.close()


# -- kws queue init: a queue others can clone ------------------------------------------------


def test_queue_init_makes_a_remote_that_clones_with_signed_allowed_signers(env, monkeypatch):
    keys = {who.email: keygen(env, who.email.split("@")[0]) for who in (ALICE, BOB, CAROL)}
    monkeypatch.setenv("GIT_AUTHOR_NAME", ALICE.name)
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", ALICE.email)
    subprocess.run(["git", "config", "--global", "gpg.format", "ssh"], check=True)
    subprocess.run(["git", "config", "--global", "user.signingkey", str(keys[ALICE.email])], check=True)
    seed = make_queue(env / "seed")
    r = invoke("queue", "init", str(env / "team"), "--remote", str(env / "shared.git"), "--tasks", str(env / "seed"),
               "--signer", line(BOB, keys[BOB.email]), "--signer", line(CAROL, keys[CAROL.email]))
    assert r.exit_code == 0, r.output
    assert "first commit signed; allowed signers: alice@example.com, bob@example.com, carol@example.com" in r.stdout
    assert "git clone" in r.stdout and "kws signing setup --apply --local" in r.stdout
    bare = git.Repo(env / "shared.git")
    assert bare.bare and bare.git.symbolic_ref("HEAD") == "refs/heads/main"
    clone = git.Repo.clone_from(str(env / "shared.git"), env / "bob")  # the plain way: it checks main out
    assert (env / "bob" / "tasks" / "alpha" / "task.toml").is_file()
    policy = records_policy(clone)
    assert not policy.off and policy.signers is not None and len(policy.signers.splitlines()) == 3
    with open(env / "signers", "w") as f:
        f.write(policy.signers)
    status = clone.git.execute(["git", "-c", f"gpg.ssh.allowedSignersFile={env / 'signers'}", "log", "-1",
                                "--format=%G?"])
    assert status == "G"
    assert records_policy(clone).problems == ()
    # a second init into a bare repository made the obvious way (HEAD on master) points it at main
    subprocess.run(["git", "init", "-q", "--bare", "-b", "master", str(env / "old.git")], check=True)
    r = invoke("queue", "init", str(env / "team2"), "--remote", str(env / "old.git"), "--signatures", "off")
    assert r.exit_code == 0, r.output
    assert "HEAD now names main" in r.stdout and "records are not signed" in r.stdout
    assert git.Repo(env / "old.git").git.symbolic_ref("HEAD") == "refs/heads/main"
    r = invoke("queue", "init", str(env / "team2"))
    assert r.exit_code == 1 and "exists and is not an empty folder" in r.output
    seed.close()


def test_queue_init_without_a_signing_key_refuses_before_making_anything(env, monkeypatch):
    monkeypatch.setenv("GIT_AUTHOR_NAME", ALICE.name)
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", ALICE.email)
    r = invoke("queue", "init", str(env / "team"))
    assert r.exit_code == 1 and "kws signing setup --apply first" in r.output
    assert not (env / "team").exists()


def test_signing_add_commits_a_signed_change_that_counts(env):
    repo = make_queue(env / "q")
    alice = keygen(env, "alice")
    use_key(repo, alice)
    require_signatures(repo, line(ALICE, alice))
    # require_signatures' own commit is unsigned: the first policy is trusted as it is
    bob = keygen(env, "bob")
    r = invoke("signing", "add", line(BOB, bob), "--queue", repo.working_tree_dir)
    assert r.exit_code == 0, r.output
    assert "the allowed signers now also list bob@example.com" in r.stdout
    assert "allowed-signers change -> queue" in r.stderr
    policy = records_policy(repo)
    assert policy.problems == () and "bob@example.com" in (policy.signers or "")
    r = invoke("signing", "add", line(BOB, bob), "--queue", repo.working_tree_dir)
    assert r.exit_code == 0 and "nothing committed" in r.stdout
    r = invoke("signing", "add", "not a line", "--queue", repo.working_tree_dir)
    assert r.exit_code == 1 and "is not an allowed-signers line" in r.output


# -- signing: the text and what happens agree ------------------------------------------------


def test_a_queue_without_signature_checks_still_gets_signed_records_once_a_key_is_set(env):
    repo = make_queue(env / "q")  # signatures = "off"
    key = keygen(env, "alice")
    r = invoke("signing", "setup", "--key", str(key), "--apply", "--local", "--queue", repo.working_tree_dir)
    assert r.exit_code == 0, r.output
    assert "kws signs your record commits all the same (with" in r.stdout
    verdict(repo, "alpha", ALICE, "accept")
    with open(env / "signers", "w") as f:
        f.write(line(ALICE, key) + "\n")
    status = repo.git.execute(["git", "-c", f"gpg.ssh.allowedSignersFile={env / 'signers'}", "log", "-1",
                               "--format=%G?"])
    assert status == "G"  # what the setup said: signed all the same


def test_disputing_an_unverified_verdict_says_it_does_not_count(env):
    repo = make_queue(env / "q")
    alice = keygen(env, "alice")
    require_signatures(repo, line(ALICE, alice))
    use_key(repo, keygen(env, "alice-laptop"))  # a key the queue does not list: committed, unverified
    v = verdict(repo, "alpha", ALICE, "reject", correctness="incorrect")
    set_repo_identity(repo, BOB)
    r = invoke("dispute", v.verdict_id[:8], "--field", "overall=accept", "--rationale", "x",
               "--queue", repo.working_tree_dir)
    assert r.exit_code == 1
    assert f"verdict {v.verdict_id[:8]} on alpha" in r.output and "is unverified, so it does not count" in r.output
    assert "signed by a key the queue's allowed signers do not list" in r.output and "kws sync" not in r.output
    r = invoke("report", "alpha", "--queue", repo.working_tree_dir)
    assert r.exit_code == 1 and "1 unverified, so not counted" in r.output


def test_a_resolution_citing_an_unknown_value_names_its_key(env):
    repo = make_queue(env / "q")
    v = verdict(repo, "alpha", ALICE, "accept")
    from workstation.records.store import commit_dispute

    d = commit_dispute(repo, v, {"overall": "reject"}, "no", None, identity=BOB)
    root = Path(repo.working_tree_dir)
    import tomli_w

    rel = Path("resolutions") / "alpha" / "carol-example.com--20250101T000000.000000Z--abcdef.toml"
    (root / rel).parent.mkdir(parents=True)
    (root / rel).write_text(tomli_w.dumps({
        "schema": 1, "record": "resolution", "resolution_id": "c1d2e3f4-a5b6-4c7d-8e9f-0a1b2c3d4e5f",
        "dispute_id": d.dispute_id, "verdict_id": v.verdict_id, "task": "alpha",
        "timestamp": v.timestamp, "outcome": "upheld", "rationale": "stands",
        "reviewer": {"name": CAROL.name, "email": CAROL.email},
        "verdict_values": {"overall": "maybe"}, "dispute_values": {"overall": "reject"}, "fields": {}}))
    repo.git.add(str(rel))
    repo.git.commit("-q", "-m", "by hand")
    r = invoke("doctor", "--queue", repo.working_tree_dir)
    assert r.exit_code == 1
    assert f"{rel}: verdict_values.overall: unknown value 'maybe'" in r.stdout


def test_sync_warns_when_the_remote_head_names_no_branch(env):
    """The obvious way (git init --bare, then push main) leaves HEAD on master: clones of it
    come out empty. kws sync says so, with the one command that fixes it."""
    seed = make_queue(env / "seed")
    bare = env / "shared.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "master", str(bare)], check=True)
    seed.git.push("-q", str(bare), "main:main")
    clone = git.Repo.clone_from(str(bare), env / "a", branch="main")
    set_repo_identity(clone, ALICE)
    r = invoke("sync", "--queue", clone.working_tree_dir)
    assert r.exit_code == 0, r.output
    assert "its HEAD names no branch that exists, so a git clone of it comes out empty" in r.stdout
    assert "symbolic-ref HEAD refs/heads/main" in r.stdout
    subprocess.run(["git", "--git-dir", str(bare), "symbolic-ref", "HEAD", "refs/heads/main"], check=True)
    r = invoke("sync", "--queue", clone.working_tree_dir)
    assert r.exit_code == 0 and "warning" not in r.stdout, r.output
    seed.close()
