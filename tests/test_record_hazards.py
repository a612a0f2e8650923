"""Records when the machine or the team misbehaves: a read-only clone, a full disk, a
corrupt object, a damaged index or branch ref, skewed clocks, two reviewers resolving one
dispute at once, and malformed inputs. Each fault is real: a read-only bind mount
(bwrap), a tiny tmpfs (unshare), an overwritten object file, GIT_*_DATE skew, two clones."""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import git
import pytest
import tomli_w
from click.testing import CliRunner

from tests.recordkit import (
    ALICE,
    BOB,
    CAROL,
    RUBRIC,
    isolate,
    make_queue,
    make_remote,
    records_cli,
    set_repo_identity,
    verdict,
)
from workstation.records import store
from workstation.records.doctor import diagnose
from workstation.records.history import format_history, task_history
from workstation.records.parse import load_records
from workstation.records.store import commit_dispute, commit_resolution
from workstation.records.sync import SyncError, sync
from workstation.repo.gitqueue import detached_advice
from workstation.schema.problem import Problem
from workstation.task.format import load_task

FIELDS = ["--field", "reference=legitimate", "--field", "tolerance=appropriate", "--field", "correctness=correct",
          "--field", "edge_coverage=covered", "--field", "benchmark=not-applicable",
          "--field", "failure_report=not-applicable"]


@pytest.fixture
def env(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    return tmp_path


@pytest.fixture
def cli():
    return records_cli()


def _kws(*args: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """``kws ARGS`` in a child process (optionally under ``prefix``: bwrap, unshare)."""
    code = "import sys; from workstation.cli.main import main; sys.exit(main())"
    return subprocess.run([*prefix, sys.executable, "-c", code, *args], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1], timeout=120)


def _corrupt(repo: git.Repo, oid: str) -> None:
    """Overwrite the loose object ``oid`` with its first half (a truncated zlib stream)."""
    p = Path(repo.git_dir) / "objects" / oid[:2] / oid[2:]
    p.chmod(0o644)
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])


# -------------------------------------------------------------------------------------------
# a read-only clone


def _bwrap_ro(path: Path) -> tuple[str, ...]:
    if shutil.which("bwrap") is None:
        pytest.skip("bwrap is not installed")
    prefix = ("bwrap", "--bind", "/", "/", "--ro-bind", str(path), str(path), "--dev", "/dev", "--proc", "/proc")
    probe = subprocess.run([*prefix, "touch", str(path / "probe")], capture_output=True, text=True)
    if probe.returncode == 0 or "Read-only" not in probe.stderr:
        pytest.skip(f"bwrap cannot make a read-only bind mount here: {probe.stderr.strip()}")
    return prefix


def test_read_only_clone_reads_and_refuses_writes_plainly(env):
    bare, (a,) = make_remote(env, 1)
    set_repo_identity(a, ALICE)
    v = verdict(a, "alpha", ALICE, "reject")
    root = Path(a.working_tree_dir)
    shutil.rmtree(Path(a.git_dir) / "kws")  # as a fresh clone: kws's folder does not exist yet
    ro = _bwrap_ro(root)
    for args in (["history", "alpha"], ["report", "alpha"], ["doctor"]):
        r = _kws(*args, "--queue", str(root), prefix=ro)
        assert "Traceback" not in r.stderr, r.stderr
        assert "cannot be written here" in r.stderr + r.stdout
    assert v.verdict_id[:8] in _kws("history", "alpha", "--queue", str(root), prefix=ro).stdout
    for args in (["sync"], ["reserve", "alpha"], ["verdict", "beta", "--overall", "accept", *FIELDS]):
        r = _kws(*args, "--queue", str(root), prefix=ro)
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        assert "cannot be written here" in r.stderr and "nothing was changed" in r.stderr, r.stderr
    assert "your verdict is saved as a draft" in r.stderr  # the verdict's values are kept
    assert not (root / "verdicts" / "beta").exists()


# -------------------------------------------------------------------------------------------
# a full disk


def _tmpfs_script(env: Path, script: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed")
    probe = subprocess.run(["unshare", "-m", "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs {env}"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs in a mount namespace here: {probe.stderr.strip()}")
    return subprocess.run(["unshare", "-m", "bash", "-c", script], capture_output=True, text=True, timeout=300)


def test_full_disk_verdict_says_what_was_kept(env):
    bare, (a,) = make_remote(env, 1)
    set_repo_identity(a, ALICE)
    root = Path(a.working_tree_dir)
    head = a.head.commit.hexsha
    kws = f"{sys.executable} -c 'import sys; from workstation.cli.main import main; sys.exit(main())'"
    small = env / "small"
    small.mkdir()
    out = env / "out"
    out.mkdir()
    args = "verdict alpha --overall accept " + " ".join(FIELDS)
    fill = "dd if=/dev/zero of={0}/fill bs=1k count=$(( $(df -k --output=avail {0} | tail -1) - {1} )) 2>/dev/null"
    script = textwrap.dedent(f"""
        set -u
        cd {Path(__file__).resolve().parents[1]}
        mount -t tmpfs -o size=4m tmpfs {small}
        cp -a {root} {small}/q
        dd if=/dev/zero of={small}/fill bs=1k count=100000 2>/dev/null
        {kws} {args} --queue {small}/q > {out}/zero.out 2> {out}/zero.err; echo $? > {out}/zero.rc
        rm {small}/fill; {fill.format(small, 6)}
        {kws} {args} --queue {small}/q > {out}/few.out 2> {out}/few.err; echo $? > {out}/few.rc
        git -C {small}/q rev-parse HEAD > {out}/head
        rm {small}/fill
        mkdir -p {small}/state; {fill.format(small, 0)}
        cp -a {root} {out}/q2
        KWS_STATE_DIR={small}/state {kws} {args} --queue {out}/q2 > {out}/drafts.out 2> {out}/drafts.err
        echo $? > {out}/drafts.rc
    """)
    r = _tmpfs_script(env, script)
    assert r.returncode == 0, r.stderr
    for case in ("zero", "few"):
        err = (out / f"{case}.err").read_text()
        assert (out / f"{case}.rc").read_text().strip() == "1", err
        assert "Traceback" not in err and "is full" in err and "not committed" in err, err
        assert "your verdict is saved as a draft" in err, err
    assert (out / "head").read_text().strip() == head  # the branch did not move
    # the drafts folder is full, the queue is not: the verdict commits, and says the draft was not kept
    err = (out / "drafts.err").read_text()
    assert (out / "drafts.rc").read_text().strip() == "0", err
    assert "the draft could not be saved" in err and "Traceback" not in err, err
    assert len(load_records(out / "q2").verdicts) == 1


# -------------------------------------------------------------------------------------------
# corrupt objects, a damaged index, a damaged branch ref


def test_corrupt_record_blob_is_skipped_and_named_and_sync_blames_the_clone(env, cli):
    bare, (a,) = make_remote(env, 1)
    set_repo_identity(a, ALICE)
    bad = verdict(a, "alpha", ALICE, "reject")
    good = verdict(a, "beta", ALICE)
    commit = a.git.log("-1", "--format=%H", "--", str(bad.path))
    _corrupt(a, a.git.rev_parse(f"HEAD:{bad.path.as_posix()}"))
    rs = load_records(a)
    assert [v.verdict_id for v in rs.verdicts] == [good.verdict_id]
    (p,) = rs.problems
    assert p.file == bad.path and commit[:12] in p.problem and "corrupt or missing" in p.problem
    r = CliRunner().invoke(cli, ["history", "alpha", "--queue", a.working_tree_dir])
    assert r.exit_code == 0 and "cannot be read" in r.output, r.output
    r = CliRunner().invoke(cli, ["doctor", "--queue", a.working_tree_dir])
    assert str(bad.path) in r.output and "Traceback" not in r.output
    with pytest.raises(SyncError) as e:
        sync(a)
    assert e.value.kind == "local" and "in this clone, not at the remote" in str(e.value)
    assert "fsck" in str(e.value)


def test_damaged_index_and_empty_branch_ref(env, cli):
    repo = make_queue(env / "q")
    verdict(repo, "alpha", ALICE)
    root = Path(repo.working_tree_dir)
    (Path(repo.git_dir) / "index").write_bytes(b"garbage")
    r = CliRunner().invoke(cli, ["history", "alpha", "--queue", str(root)])
    assert r.exit_code == 0 and "read-tree HEAD" in r.output and "verdict" in r.output, r.output
    d = diagnose(repo)
    assert any("cannot read the index" in p.problem for p in d.problems)
    subprocess.run(["git", "-C", str(root), "read-tree", "HEAD"], check=True)
    head = repo.head.commit.hexsha
    (Path(repo.git_dir) / "refs" / "heads" / "main").write_text("")
    for args in (["history", "alpha"], ["sync"], ["doctor"]):
        r = CliRunner().invoke(cli, [*args, "--queue", str(root)])
        assert r.exit_code == 1 and r.exception is None or isinstance(r.exception, SystemExit), r.output
        assert "names no commit" in r.output and f"update-ref refs/heads/main {head}" in r.output, r.output


# -------------------------------------------------------------------------------------------
# clocks


def _skewed(monkeypatch, hours: float) -> None:
    """This process's clock, for kws and git, ``hours`` off."""
    when = datetime.now(UTC) + timedelta(hours=hours)
    monkeypatch.setattr(store, "_now", lambda: when)
    stamp = f"{int(when.timestamp())} +0000"
    monkeypatch.setenv("GIT_AUTHOR_DATE", stamp)
    monkeypatch.setenv("GIT_COMMITTER_DATE", stamp)


class _Caught(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def told():
    """What kws tells the reviewer (the ``workstation.records`` logger; the CLI prints it)."""
    h = _Caught()
    log = logging.getLogger("workstation.records")
    log.addHandler(h)
    old = log.level
    log.setLevel(logging.INFO)
    yield h.messages
    log.removeHandler(h)
    log.setLevel(old)


def test_history_order_not_the_clock_decides(env, monkeypatch, told):
    bare, (a, b) = make_remote(env, 2)
    set_repo_identity(a, ALICE)
    set_repo_identity(b, BOB)
    first = verdict(a, "alpha", ALICE, "reject")
    sync(a)
    sync(b)
    with monkeypatch.context() as m:  # Bob's clock is 20 h behind: his newer verdict is dated earlier
        _skewed(m, -20)
        told.clear()
        newer = verdict(b, "alpha", BOB, "accept")
    assert newer.timestamp < first.timestamp
    assert any("clock looks behind" in m for m in told), told  # its author is told
    sync(b)
    sync(a)
    rs = load_records(a)
    assert rs.current_verdict("alpha").verdict_id == newer.verdict_id  # the later commit, not the later time
    assert [e.record.id for e in task_history(a, "alpha", rs).entries] == [first.verdict_id, newer.verdict_id]
    with monkeypatch.context() as m:  # Alice's clock is 49 h ahead: the others keep her verdict
        _skewed(m, 49)
        ahead = verdict(a, "alpha", ALICE, "needs-work", rationale="r")
        sync(a)
    sync(b)
    rs = load_records(b)
    assert rs.current_verdict("alpha").verdict_id == ahead.verdict_id
    assert not rs.problems
    assert any(w.key == "timestamp" and "in the future" in w.problem for w in rs.warnings)
    with monkeypatch.context() as m:  # a GIT_AUTHOR_DATE far from the record's own time
        m.setenv("GIT_AUTHOR_DATE", "2001-01-01T00:00:00Z")
        told.clear()
        verdict(a, "beta", ALICE)
    assert any("author date" in m for m in told), told


# -------------------------------------------------------------------------------------------
# two reviewers resolve one dispute at once


def test_conflicting_resolutions_are_a_state_not_a_silent_override(env, cli):
    bare, (a, b) = make_remote(env, 2)
    set_repo_identity(a, ALICE)
    set_repo_identity(b, BOB)
    v = verdict(a, "alpha", CAROL, "reject", correctness="incorrect")  # neither resolver made it
    d = commit_dispute(a, v, {"correctness": "correct"}, "it is correct", RUBRIC, identity=CAROL)
    sync(a)
    sync(b)
    rs_a, rs_b = load_records(a), load_records(b)
    commit_resolution(a, rs_a, rs_a.dispute(d.dispute_id), "upheld", "the verdict stands", identity=ALICE)
    commit_resolution(b, rs_b, rs_b.dispute(d.dispute_id), "overturned", "the dispute is right", identity=BOB)
    assert not sync(a).conflicts
    res = sync(b)  # the later writer is told
    assert res.conflicts and "2 resolutions disagree" in res.conflicts[0] and "upheld" in res.conflicts[0]
    assert "2 resolutions disagree" in str(res)
    sync(a)
    for repo in (a, b):
        rs = load_records(repo)
        assert rs.resolution_of(d.dispute_id) is None  # default rule: open, neither counts
        assert rs.open_disputes("alpha") and rs.effective_values(rs.verdict(v.verdict_id))["correctness"] == "incorrect"
        assert "2 resolutions disagree" in format_history(task_history(repo, "alpha", rs), rs)
        assert any("2 resolutions disagree" in p.problem for p in diagnose(repo).problems)
    # the queue owner's rule decides (the committed queue.toml's: records are judged by their commit's tree)
    root = Path(a.working_tree_dir)
    base = a.head.commit.hexsha

    def rule(name: str) -> None:
        (root / "queue.toml").write_text(f'name = "q"\nrubric = "kernel-review"\nresolution_conflict = "{name}"\n'
                                         '\n[records]\nsignatures = "off"\n')
        subprocess.run(["git", "-C", str(root), "commit", "-q", "-m", f"rule {name}", "queue.toml"], check=True)

    rule("last")
    rs = load_records(a)
    assert rs.resolution_of(d.dispute_id).outcome == "overturned"
    rule("first")
    assert load_records(a).resolution_of(d.dispute_id).outcome == "upheld"
    subprocess.run(["git", "-C", str(root), "reset", "-q", "--hard", base], check=True)
    # a resolution without --supersede is refused; with it, it replaces both
    r = CliRunner().invoke(cli, ["resolve", d.dispute_id, "--outcome", "upheld", "--rationale", "x",
                                 "--queue", str(root)])
    assert r.exit_code == 1 and "2 resolutions already" in r.output, r.output
    r = CliRunner().invoke(cli, ["resolve", d.dispute_id, "--outcome", "upheld", "--rationale", "settled",
                                 "--supersede", "--queue", str(root)])
    assert r.exit_code == 0, r.output
    rs = load_records(a)
    assert rs.resolution_of(d.dispute_id).rationale == "settled" and not rs.resolution_conflicts()


# -------------------------------------------------------------------------------------------
# malformed inputs


def _commit(repo: git.Repo, rel: str, text: str, message: str = "by hand") -> None:
    p = Path(repo.working_tree_dir) / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    repo.git.add("-f", rel)
    repo.git.commit("-q", "--no-verify", "-m", message)


def test_report_to_a_missing_folder_and_queue_toml_folder(env, cli):
    repo = make_queue(env / "q")
    verdict(repo, "alpha", ALICE)
    root = Path(repo.working_tree_dir)
    r = CliRunner().invoke(cli, ["report", "alpha", "-o", str(env / "no/such/dir/r.md"), "--queue", str(root)])
    assert r.exit_code == 1 and "does not exist" in r.output and "nothing was written" in r.output, r.output
    (root / "queue.toml").unlink()
    (root / "queue.toml").mkdir()
    r = CliRunner().invoke(cli, ["verdict", "beta", "--overall", "accept", *FIELDS, "--queue", str(root)])
    assert r.exit_code == 1 and "queue.toml" in r.output and "not a file" in r.output, r.output
    assert len(load_records(repo).verdicts) == 1


def test_task_toml_choices_of_mixed_types(env):
    repo = make_queue(env / "q")
    toml = Path(repo.working_tree_dir) / "tasks" / "alpha" / "task.toml"
    (toml.parent / "inputs.py").write_text("def make_inputs(case, seed):\n    return []\n")
    toml.write_text(toml.read_text() + '\n[params.N]\nchoices = ["a", 64, 37]\n')
    with pytest.raises(Problem) as e:
        load_task(toml.parent)
    assert e.value.key == "params.N.choices[1]" and "all of one type" in e.value.problem


def test_doctor_checks_what_records_must_satisfy(env):
    repo = make_queue(env / "q")
    v = verdict(repo, "alpha", ALICE, "reject", correctness="incorrect")
    root = Path(repo.working_tree_dir)
    # a committed verdict edited in place
    p = root / v.path
    _commit(repo, v.path.as_posix(), p.read_text().replace("rejected: see the findings", "edited later"), "edit")
    edit = repo.head.commit.hexsha[:7]
    # a verdict of a task that does not exist
    ghost = tomli_w.dumps({**__import__("tomllib").loads(p.read_text()), "verdict_id": "0f0f0f0f-1", "task": "ghost"})
    _commit(repo, "verdicts/ghost/x.toml", ghost)
    # a dispute that names the value the verdict already has
    d = commit_dispute(repo, load_records(repo).verdict(v.verdict_id), {"correctness": "correct"}, "why", RUBRIC,
                       identity=BOB)
    text = (root / d.path).read_text().replace('correctness = "correct"', 'correctness = "incorrect"')
    _commit(repo, "disputes/alpha/same.toml", text.replace(d.dispute_id, "0e0e0e0e-1"))
    by = {(x.file.as_posix(), x.key): x.problem for x in diagnose(repo).problems}
    assert f"changed by commit {edit}" in by[(v.path.as_posix(), "")] and "append-only" in by[(v.path.as_posix(), "")]
    assert "not a task in HEAD" in by[("verdicts/ghost/x.toml", "task")]
    assert "what the verdict already says" in by[("disputes/alpha/same.toml", "fields.correctness")]


def test_detached_head_names_a_real_branch(env):
    repo = make_queue(env / "q")
    verdict(repo, "alpha", ALICE)
    subprocess.run(["git", "-C", repo.working_tree_dir, "checkout", "-q", "--detach", "HEAD"], check=True)
    text = detached_advice(repo)
    assert "switch main" in text and "(HEAD detached" not in text, text
