"""Records under faults: planted hooks and programs, interrupted commands, stale locks, a
rebase left by an older kws, a remote that refuses, extra refs, machine-local data."""

from __future__ import annotations

import os
import stat
import subprocess
import time
from pathlib import Path

import git
import pytest
from click.testing import CliRunner

from tests.recordkit import (
    ALICE,
    BOB,
    RUBRIC,
    isolate,
    make_queue,
    make_remote,
    records_cli,
    set_repo_identity,
    values,
    verdict,
)
from workstation.records.doctor import diagnose, stray_files
from workstation.records.drafts import Draft, load_draft, save_draft
from workstation.records.history import task_history
from workstation.records.parse import load_records
from workstation.records.store import commit_verdict
from workstation.records.sync import SyncError, sync
from workstation.repo import lock as lockmod
from workstation.repo import plumbing
from workstation.repo.gitqueue import safe_environment


@pytest.fixture
def env(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    return tmp_path


@pytest.fixture
def cli():
    return records_cli()


def _marker_script(path: Path, marker: Path) -> Path:
    path.write_text(f"#!/bin/sh\necho \"ran $0 $* $(cat /proc/$PPID/cmdline | tr \"\\\\0\" \" \")\" >> {marker}\ncat\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_planted_hooks_and_repository_programs_never_run(env, cli):
    bare, (a, b) = make_remote(env, 2)
    set_repo_identity(a, ALICE)
    set_repo_identity(b, BOB)
    marker = env / "RAN"
    gd = Path(a.git_dir)
    for hook in ("pre-commit", "commit-msg", "post-commit", "reference-transaction", "post-checkout",
                 "pre-push", "post-rewrite", "post-index-change", "post-merge"):
        _marker_script(gd / "hooks" / hook, marker)
    prog = _marker_script(env / "prog.sh", marker)
    with a.config_writer() as cw:
        cw.set_value("core", "fsmonitor", str(prog))
        cw.set_value('filter "evil"', "clean", str(prog))
        cw.set_value('filter "evil"', "smudge", str(prog))
        cw.set_value('filter "evil"', "required", "true")
        cw.set_value('diff "evil"', "textconv", str(prog))
        cw.set_value('remote "origin"', "uploadpack", f"echo ran >> {marker}; git-upload-pack")
        cw.set_value('remote "origin"', "receivepack", f"echo ran >> {marker}; git-receive-pack")
        cw.set_value("core", "sshCommand", str(prog))
    # the remote brings a .gitattributes that routes every file through the filter
    root_b = Path(b.working_tree_dir)
    (root_b / ".gitattributes").write_text("* filter=evil diff=evil\n")
    b.git.add(".gitattributes")
    b.git.commit("-q", "-m", "attributes")
    b.git.push("-q", "origin", "main")
    v = verdict(a, "alpha", ALICE)
    res = sync(a)  # fetch (upload-pack), integrate (the attributes file comes in), push
    assert res.sent == 1 and res.received == 1
    verdict(a, "beta", ALICE)
    r = CliRunner().invoke(cli, ["sync", "--queue", a.working_tree_dir])
    assert r.exit_code == 0, r.output
    task_history(a, "alpha")
    diagnose(a)
    assert not marker.exists(), marker.read_text()
    assert v.verdict_id in {x.verdict_id for x in load_records(a).verdicts}
    # the same planted programs do run for plain git: the test plants real ones
    subprocess.run(["git", "-C", a.working_tree_dir, "commit", "-q", "--allow-empty", "-m", "plain"], check=True)
    assert marker.exists()


def test_safe_environment_overrides_only_what_the_repository_configures(env):
    repo = make_queue(env / "q")
    plain = safe_environment(repo.git_dir)
    keys = {plain[k] for k in plain if k.startswith("GIT_CONFIG_KEY_")}
    assert {"core.hooksPath", "core.fsmonitor", "protocol.ext.allow"} <= keys
    assert plain["GIT_OPTIONAL_LOCKS"] == "0" and plain["GIT_TERMINAL_PROMPT"] == "0"
    with repo.config_writer() as cw:
        cw.set_value('filter "lfs"', "process", "git-lfs filter-process")
        cw.set_value("credential", "helper", "store --file /tmp/x")
    env2 = safe_environment(repo.git_dir)
    pairs = {(env2[f"GIT_CONFIG_KEY_{i}"], env2[f"GIT_CONFIG_VALUE_{i}"]) for i in range(int(env2["GIT_CONFIG_COUNT"]))}
    assert ("filter.lfs.process", "") in pairs and ("credential.helper", "") in pairs


# -------------------------------------------------------------------------------------------
# interrupted commands


def _draft(repo, task="alpha"):
    d = Draft(task=task, queue=repo.working_tree_dir, values=values("accept"), rubric_id=RUBRIC.id,
              rubric_version=RUBRIC.version)
    save_draft(d)
    return d


def test_interrupted_before_the_ref_moves_commits_nothing(env, monkeypatch):
    repo = make_queue(env / "q")
    head = repo.head.commit.hexsha
    real = plumbing.run_git

    def boom(r, *args, **kw):
        if args[0] == "update-ref":
            raise KeyboardInterrupt  # SIGINT at the worst moment
        return real(r, *args, **kw)

    monkeypatch.setattr(plumbing, "run_git", boom)
    with pytest.raises(KeyboardInterrupt):
        commit_verdict(repo, _draft(repo), RUBRIC, identity=ALICE)
    monkeypatch.setattr(plumbing, "run_git", real)
    assert plumbing.read_journal(repo) is not None  # what a kill -9 leaves
    rs = load_records(repo)
    assert rs.verdicts == [] and repo.head.commit.hexsha == head
    assert load_draft(repo.working_tree_dir, "alpha") is not None
    assert stray_files(repo) == [] and not repo.is_dirty(untracked_files=True)
    v = commit_verdict(repo, load_draft(repo.working_tree_dir, "alpha"), RUBRIC, identity=ALICE)  # recovers
    assert plumbing.read_journal(repo) is None
    assert [x.verdict_id for x in load_records(repo).verdicts] == [v.verdict_id]


def test_interrupted_after_the_ref_moved_is_finished_by_the_next_command(env, monkeypatch, cli):
    repo = make_queue(env / "q")
    real = plumbing._apply
    monkeypatch.setattr(plumbing, "_apply", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        commit_verdict(repo, _draft(repo), RUBRIC, identity=ALICE)
    monkeypatch.setattr(plumbing, "_apply", real)
    # committed (the ref moved), but the index and work tree lag: not dirty for kws's readers
    assert len(load_records(repo).verdicts) == 1
    assert {p.problem.split(";")[0] for p in stray_files(repo)} == {"committed, but removed from the index"}
    r = CliRunner().invoke(cli, ["history", "alpha", "--queue", repo.working_tree_dir])
    assert r.exit_code == 0, r.output
    assert "recovered: finished an interrupted kws update of main" in r.output
    assert stray_files(repo) == [] and not repo.is_dirty(untracked_files=True)
    assert "finished an interrupted kws update" in (Path(repo.git_dir) / "kws" / "recovery.log").read_text()


def test_uncommitted_and_staged_record_files_never_count_and_do_not_block_sync(env, cli):
    bare, (a, b) = make_remote(env, 2)
    set_repo_identity(a, ALICE)
    set_repo_identity(b, BOB)
    v = verdict(a, "alpha", ALICE)
    data = (Path(a.working_tree_dir) / v.path).read_text().replace(v.verdict_id, "0badc0de-0000-4000-8000-000000000001")
    ghost = Path(a.working_tree_dir) / "verdicts" / "alpha" / "ghost.toml"
    ghost.write_text(data.replace("accept", "reject"))  # what an older kws left after a kill
    staged = Path(a.working_tree_dir) / "verdicts" / "beta" / "staged.toml"
    staged.parent.mkdir(parents=True)
    staged.write_text(data.replace("alpha", "beta").replace("0badc0de-0000-4000-8000-000000000001",
                                                            "0badc0de-0000-4000-8000-000000000002"))
    a.git.add(str(staged))  # a staged ghost, as after a full disk
    rs = load_records(a)
    assert [x.verdict_id for x in rs.verdicts] == [v.verdict_id]
    h = task_history(a, "alpha")
    assert [e.record.id for e in h.entries] == [v.verdict_id]
    assert {p.file.name for p in stray_files(a)} == {"ghost.toml", "staged.toml"}
    r = CliRunner().invoke(cli, ["doctor", "--queue", a.working_tree_dir])
    assert r.exit_code == 1 and "ghost.toml: not committed, so not a record" in r.output
    assert "staged.toml: staged but not committed" in r.output
    verdict(b, "beta", BOB)
    sync(b)
    res = sync(a)  # neither the ghost nor the staged file is in the way
    assert res.sent == 1 and res.received == 1
    assert ghost.exists() and "verdicts/beta/staged.toml" in a.git.diff("--cached", "--name-only")


def test_stale_git_locks_are_removed_and_logged_live_ones_kept(env, cli, monkeypatch):
    bare, (a,) = make_remote(env, 1)
    set_repo_identity(a, ALICE)
    verdict(a, "alpha", ALICE)
    gd = Path(a.git_dir)
    (gd / "index.lock").write_text("")
    (gd / "refs" / "heads" / "main.lock").write_text("")
    r = CliRunner().invoke(cli, ["sync", "--queue", a.working_tree_dir])
    assert r.exit_code == 0, r.output
    assert "recovered: removed the stale git lock" in r.output and "index.lock" in r.output
    assert not (gd / "index.lock").exists() and not (gd / "refs" / "heads" / "main.lock").exists()
    # a git process works in the repository: its lock is not touched
    (gd / "index.lock").write_text("")
    holder = subprocess.Popen(["sh", "-c", "sleep 30 | git cat-file --batch"], cwd=a.working_tree_dir)
    try:
        deadline = time.monotonic() + 10
        while not lockmod.git_processes(a) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lockmod.git_processes(a)
        monkeypatch.setattr(lockmod, "GIT_WAIT", 0.2)
        with lockmod.queue_lock(a):
            pass
        assert (gd / "index.lock").exists()
    finally:
        holder.kill()
        subprocess.run(["pkill", "-P", str(holder.pid)], check=False)
        holder.wait()
    (gd / "index.lock").unlink()


def _stopped_rebase(repo: git.Repo) -> None:
    """Start a rebase of the branch onto its upstream that stops after one commit (as an
    older kws sync left it when killed)."""
    subprocess.run(["git", "-C", repo.working_tree_dir, "rebase", "-q", "--exec", "false", "origin/main"],
                   capture_output=True, env={**os.environ, "GIT_EDITOR": "true"})
    assert (Path(repo.git_dir) / "rebase-merge").is_dir()


def test_a_rebase_left_by_an_older_kws_is_aborted_and_the_records_sent(env, cli):
    bare, (a, b) = make_remote(env, 2)
    set_repo_identity(a, ALICE)
    set_repo_identity(b, BOB)
    va = [verdict(a, "alpha", ALICE).verdict_id, verdict(a, "beta", ALICE).verdict_id]
    verdict(b, "beta", BOB)
    sync(b)
    a.git.fetch("-q", "origin")
    _stopped_rebase(a)
    r = CliRunner().invoke(cli, ["sync", "--queue", a.working_tree_dir])
    assert r.exit_code == 0, r.output
    assert "aborted a rebase of refs/heads/main left by an interrupted (older) kws sync" in r.output
    assert not (Path(a.git_dir) / "rebase-merge").exists() and a.active_branch.name == "main"
    sync(b)
    assert set(va) <= {v.verdict_id for v in load_records(b).verdicts}


def test_someone_elses_rebase_is_left_alone_with_what_to_do(env, cli):
    bare, (a, b) = make_remote(env, 2)
    set_repo_identity(a, ALICE)
    set_repo_identity(b, BOB)
    (Path(a.working_tree_dir) / "tasks" / "alpha" / "spec.md").write_text("alice\n")
    a.git.commit("-q", "-am", "alice edits alpha")
    verdict(b, "beta", BOB)
    sync(b)
    a.git.fetch("-q", "origin")
    _stopped_rebase(a)
    r = CliRunner().invoke(cli, ["sync", "--queue", a.working_tree_dir])
    assert r.exit_code == 1
    assert "because a rebase of main is in progress" in r.output and "not started by kws" in r.output
    assert "git switch main" not in r.output
    assert (Path(a.git_dir) / "rebase-merge").is_dir()


# -------------------------------------------------------------------------------------------
# the remote


def test_a_remote_hook_rejection_is_reported_in_the_remotes_words(env, cli):
    bare, (a,) = make_remote(env, 1)
    set_repo_identity(a, ALICE)
    hook = bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'policy: records need a ticket id' >&2\nexit 1\n")
    hook.chmod(0o755)
    verdict(a, "alpha", ALICE)
    with pytest.raises(SyncError) as ei:
        sync(a)
    assert ei.value.kind == "rejected"
    msg = str(ei.value)
    assert "pre-receive hook declined" in msg and "policy: records need a ticket id" in msg
    assert "kept moving" not in msg and "nothing was lost" in msg
    run = CliRunner().invoke
    r = run(cli, ["sync", "--queue", a.working_tree_dir])
    assert r.exit_code == 1 and "policy: records need a ticket id" in r.output
    for args in (["reserve", "beta"], ["release", "beta"]):
        r = run(cli, [*args, "--queue", a.working_tree_dir])
        assert r.exit_code == 1, r.output
        assert "NOT shared" in r.output and "pre-receive hook declined" in r.output
    r = run(cli, ["reserve", "alpha", "--no-sync", "--queue", a.working_tree_dir])
    assert r.exit_code == 0  # it promised nothing about the remote


def test_an_unrelated_uncommitted_edit_does_not_stop_a_sync(env):
    bare, (a, b) = make_remote(env, 2)
    set_repo_identity(a, ALICE)
    set_repo_identity(b, BOB)
    root = Path(a.working_tree_dir)
    (root / "tasks" / "alpha" / "spec.md").write_text("work in progress\n")
    verdict(a, "beta", ALICE)
    (Path(b.working_tree_dir) / "tasks" / "beta" / "spec.md").write_text("bob\n")
    b.git.commit("-q", "-am", "bob edits beta")
    sync(b)
    res = sync(a)
    assert res.received == 1 and res.sent == 1
    assert (root / "tasks" / "alpha" / "spec.md").read_text() == "work in progress\n"
    assert (root / "tasks" / "beta" / "spec.md").read_text() == "bob\n"
    assert a.git.status("--porcelain").strip() == "M tasks/alpha/spec.md"


def test_a_users_own_commit_is_rebased_outside_the_work_tree(env):
    bare, (a, b) = make_remote(env, 2)
    set_repo_identity(a, ALICE)
    set_repo_identity(b, BOB)
    root = Path(a.working_tree_dir)
    (root / "tasks" / "alpha" / "spec.md").write_text("alice\n")
    a.git.commit("-q", "-am", "alice edits alpha")
    va = verdict(a, "alpha", ALICE)
    verdict(b, "beta", BOB)
    sync(b)
    res = sync(a)
    assert res.sent == 2 and res.received == 1
    assert not list((Path(a.git_dir) / "kws").glob("wt-*")) and "kws" not in a.git.worktree("list")
    assert all(len(c.parents) <= 1 for c in a.iter_commits())
    assert va.verdict_id in {v.verdict_id for v in load_records(a).verdicts}


def test_extra_refs_are_fetched_merged_and_pushed(env):
    bare, (a, b) = make_remote(env, 2)
    set_repo_identity(a, ALICE)
    set_repo_identity(b, BOB)
    ref = "refs/notes/kws-test"
    (Path(a.working_tree_dir) / "queue.toml").write_text(
        'name = "test queue"\nrubric = "kernel-review"\nsync_refs = ["refs/notes/kws-test"]\n'
        '\n[records]\nsignatures = "off"\n')
    a.git.commit("-q", "-am", "sync the test notes")
    sync(a)
    sync(b)
    base = a.head.commit.hexsha
    a.git.notes(f"--ref={ref}", "add", "-m", "screened by a", base)
    res = sync(a)
    assert ref in res.refs
    t = b.git.rev_parse("HEAD~1")
    b.git.notes(f"--ref={ref}", "add", "-m", "screened by b", t)
    res_b = sync(b)  # diverged notes: merged, then pushed
    assert ref in res_b.refs
    sync(a)
    for repo in (a, b):
        assert repo.git.notes(f"--ref={ref}", "show", base) == "screened by a"
        assert repo.git.notes(f"--ref={ref}", "show", t) == "screened by b"
    remote_ref = subprocess.run(["git", "--git-dir", str(bare), "rev-parse", ref], capture_output=True, text=True)
    assert remote_ref.stdout.strip() == a.git.rev_parse(ref)
    with pytest.raises(ValueError):
        from workstation.records.sync import register_sync_ref

        register_sync_ref("refs/heads/main")


# -------------------------------------------------------------------------------------------
# what goes into a record


def test_records_hold_no_machine_local_paths_or_credentials(env):
    repo = make_queue(env / "q")
    root = Path(repo.working_tree_dir)
    home = os.path.expanduser("~")
    token = "ghp_" + "A1b2C3d4E5" * 4
    report = {
        "device": "cpu", "complete": True, "sandbox": "bwrap",
        "findings": [{
            "check": "correctness", "severity": "fail",
            "summary": f"raised at {root}/tasks/alpha/candidate.py:3",
            "repro": f"kws check {root}/tasks/alpha --only correctness --seeds 0",
            "evidence": {"traceback": f'File "{home}/venvs/x/lib/python3.11/site-packages/torch/a.py"\n'
                                      f"GITHUB_TOKEN={token} OPENAI_API_KEY=sk-{'x' * 30}",
                         "env": ["AWS_SECRET_ACCESS_KEY: abc123def", "AKIAIOSFODNN7EXAMPLE"],
                         "key": "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----"},
        }],
        "checks": [{"check": "correctness", "status": "fail", "seconds": 1.0, "reason": f"see {home}/notes"}],
    }
    d = Draft(task="alpha", queue=str(root), values=values("reject", rationale=f"token {token} leaked"),
              rubric_id=RUBRIC.id, rubric_version=RUBRIC.version, report=report,
              unfinished_checks=["timing"], suggested={"correctness": "from-incomplete-run"})
    v = commit_verdict(repo, d, RUBRIC, identity=ALICE)
    text = (root / v.path).read_text()
    for leak in (token, "sk-xxxx", "abc123def", "AKIAIOSFODNN7EXAMPLE", "MIIE", str(root), home):
        assert leak not in text, leak
    f = v.findings[0]
    assert f.repro == "kws check tasks/alpha --only correctness --seeds 0"
    assert f.summary == "raised at <queue>/tasks/alpha/candidate.py:3"
    assert "GITHUB_TOKEN=<redacted>" in f.evidence["traceback"] and '"~/venvs' in f.evidence["traceback"]
    assert v.rationale == "token <redacted token> leaked"
    assert (v.sandbox, v.unfinished_checks, dict(v.suggested)) == ("bwrap", ("timing",),
                                                                    {"correctness": "from-incomplete-run"})
    assert load_records(repo).verdict(v.verdict_id) == v


def test_doctor_lists_every_ignored_entry_of_the_user_keymap(env, cli, monkeypatch):
    """kws doctor names the user keymap's bad entries (file, key, problem) as warnings:
    the app ignores each of them and keeps the rest."""
    bare, (a,) = make_remote(env, 1)
    monkeypatch.setenv("KWS_CONFIG_DIR", str(env / "config"))
    (env / "config").mkdir()
    keymap = env / "config" / "keymap.toml"
    keymap.write_text('base = "vim"\n[keys]\n"review.comit" = "ctrl+s"\n"queue.down" = "ctrl+nothing"\n')
    r = CliRunner().invoke(cli, ["doctor", "--queue", a.working_tree_dir])
    assert f"{keymap}: keys.review.comit: unknown binding id 'review.comit'" in r.output, r.output
    assert f"{keymap}: keys.queue.down: 'ctrl+nothing'" in r.output


def test_ctrl_c_during_git_leaves_no_watchdog_keeping_kws_alive(tmp_path):
    """GitPython's timeout watchdog (a non-daemon ``threading.Timer``) is cancelled when
    ctrl+c interrupts a git call: before, a ctrl+c'd ``kws verdict`` waited at exit for the
    whole 300 s git timeout (the chaos test's 'hung' commands)."""
    import signal
    import threading

    from workstation.repo.gitqueue import git_result

    def interrupt() -> None:
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGINT)

    # a shell's background job starts with SIGINT ignored, and Python then installs no
    # handler: make ctrl+c raise KeyboardInterrupt here however the suite was started
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    sender = threading.Thread(target=interrupt)
    sender.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            git_result(None, "-c", "alias.slow=!sleep 20", "slow", cwd=tmp_path, timeout=300)
    finally:
        sender.join()
        signal.signal(signal.SIGINT, old)
    timers = [t for t in threading.enumerate() if isinstance(t, threading.Timer)]
    for t in timers:
        t.join(10)  # a cancelled timer's thread ends at once
    assert not [t for t in timers if t.is_alive()], "a git watchdog timer outlived the interrupted call"
