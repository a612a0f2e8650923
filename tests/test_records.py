"""Append-only records in a real git queue: verdicts, drafts, disputes, resolutions,
reservations, history, report, recheck and the CLI commands for them."""

from __future__ import annotations

import os
import sys
import tomllib
import types
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
    git_lines,
    isolate,
    make_queue,
    records_cli,
    set_repo_identity,
    use_identity,
    values,
    verdict,
)
from workstation.records.drafts import (
    Draft,
    delete_draft,
    draft_path,
    list_drafts,
    load_draft,
    save_draft,
)
from workstation.records.history import task_history
from workstation.records.model import RecordError
from workstation.records.parse import load_records
from workstation.records.report import render_report
from workstation.records.store import (
    commit_dispute,
    commit_resolution,
    commit_verdict,
    release,
    reserve,
)
from workstation.repo.gitqueue import (
    FALLBACK_IDENTITY,
    IdentityError,
    QueueError,
    ensure_default_queue,
    open_queue,
    reviewer_identity,
    task_version,
)


@pytest.fixture
def env(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    return tmp_path


@pytest.fixture
def queue(env):
    return make_queue(env / "q")


@pytest.fixture
def cli():
    return records_cli()


REPORT = {
    "task": "alpha",
    "device": "cpu (triton interpreter)",
    "complete": False,
    "versions": {"kws": "0.1.0", "torch": "2.13.0", "triton": None},
    "seeds": [0, 1, 2],
    "findings": [
        {
            "check": "edge-shapes",
            "severity": "fail",
            "summary": "mismatch at N=1025 (edge tile of BLOCK=1024)",
            "evidence": {
                "case": {"N": 1025, "dtype": "float32"},
                "seed": 0,
                "max_abs_err": 3.5,
                "worst_index": [1024],
                "expected": 0.25,
                "got": "nan",
                "note": None,
                "values": [1.0, None, float("inf")],
            },
            "repro": "kws check tasks/alpha --only edge-shapes --case N=1025 --seed 0",
        },
        {"check": "correctness", "severity": "info", "summary": "worst err/allowed 0.1", "evidence": {}, "repro": ""},
    ],
    "checks": [
        {"check": "correctness", "status": "pass", "seconds": 1.2, "reason": ""},
        {"check": "edge-shapes", "status": "fail", "seconds": 3.4, "reason": ""},
        {"check": "speedup-claim", "status": "skip", "seconds": 0.0,
         "reason": "the task makes no speedup claim ([claims] speedup = 0)"},
    ],
}


# ---------------------------------------------------------------------------------------------
# first run


def test_first_run_copies_sample_queue_once_with_fallback_identity(env):
    src = env / "sample"
    (src / "tasks" / "t1").mkdir(parents=True)
    (src / "tasks" / "t1" / "task.toml").write_text("schema = 1\n")
    (src / "tasks" / "t1" / "__pycache__").mkdir()
    (src / "tasks" / "t1" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    p = ensure_default_queue(source=src)
    assert p == env / "data" / "queue"
    repo = open_queue(p)
    commits = list(repo.iter_commits())
    assert len(commits) == 1
    assert (commits[0].author.name, commits[0].author.email) == (FALLBACK_IDENTITY.name, FALLBACK_IDENTITY.email)
    assert repo.active_branch.name == "main"
    assert not (p / "tasks" / "t1" / "__pycache__").exists()
    assert not repo.is_dirty(untracked_files=True)
    # reused afterwards, untouched
    (src / "tasks" / "t2").mkdir()
    assert ensure_default_queue(source=src) == p
    assert not (p / "tasks" / "t2").exists()
    assert len(list(repo.iter_commits())) == 1


def test_two_first_runs_at_once_make_one_queue(env):
    import subprocess

    src = env / "sample"
    (src / "tasks" / "t1").mkdir(parents=True)
    (src / "tasks" / "t1" / "task.toml").write_text("schema = 1\n")
    code = (
        "import sys; from workstation.repo.gitqueue import ensure_default_queue; "
        "print(ensure_default_queue(source=sys.argv[1]))"
    )
    penv = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    procs = [subprocess.Popen([sys.executable, "-c", code, str(src)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=penv) for _ in range(3)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    assert {o[0].strip() for o in outs} == {str(env / "data" / "queue")}
    assert len(list(open_queue(env / "data" / "queue").iter_commits())) == 1
    assert [p.name for p in (env / "data").iterdir()] == ["queue"]  # no temporary folder left


def test_first_run_uses_the_users_identity_and_the_bundled_sample(env, monkeypatch):
    use_identity(monkeypatch, CAROL)
    p = ensure_default_queue()  # the repository's own sample_queue/
    repo = open_queue(p)
    c = repo.head.commit
    assert (c.author.email, c.committer.email) == (CAROL.email, CAROL.email)
    assert (p / "queue.toml").is_file() and (p / "tasks").is_dir()


def test_open_queue_refusals(env):
    (env / "plain").mkdir()
    with pytest.raises(QueueError, match="not a git repository"):
        open_queue(env / "plain")
    repo = make_queue(env / "q")
    with pytest.raises(QueueError, match="not its root"):
        open_queue(Path(repo.working_tree_dir) / "tasks")
    with pytest.raises(QueueError, match="no such folder"):
        open_queue(env / "missing")
    (env / "data" / "queue").mkdir(parents=True)
    with pytest.raises(QueueError, match="not a git repository"):
        ensure_default_queue(source=env / "q")


def test_reviewer_identity_sources(env, queue, monkeypatch):
    assert reviewer_identity(queue) == ALICE  # repository config
    set_repo_identity(queue, None)
    with pytest.raises(IdentityError) as ei:
        reviewer_identity(queue)
    assert "user.name" in str(ei.value) and "user.email" in str(ei.value)
    use_identity(monkeypatch, BOB)
    assert reviewer_identity(queue) == BOB


def test_task_version_reports_tree_and_dirty(queue):
    root = Path(queue.working_tree_dir)
    tv = task_version(queue, "alpha")
    assert tv.tree == queue.head.commit.tree["tasks/alpha"].hexsha and not tv.dirty
    (root / "tasks" / "alpha" / "candidate.py").write_text("def run(x):\n    return x + 1\n")
    (root / "tasks" / "alpha" / "new.py").write_text("")
    tv = task_version(queue, "alpha")
    assert tv.dirty == ("tasks/alpha/candidate.py", "tasks/alpha/new.py")
    assert task_version(queue, "beta").dirty == ()
    queue.git.mv("tasks/beta/spec.md", "tasks/beta/spec2.md")  # a staged rename
    assert task_version(queue, "beta").dirty == ("tasks/beta/spec.md", "tasks/beta/spec2.md")
    assert task_version(queue, "nope").tree is None
    with pytest.raises(QueueError):
        task_version(queue, "../etc")


# ---------------------------------------------------------------------------------------------
# verdicts


def test_verdict_file_commit_and_trailers(queue):
    root = Path(queue.working_tree_dir)
    before = queue.head.commit.hexsha
    d = Draft(task="alpha", queue=str(root), values=values("reject", "edge tile at N=1025 unmasked"),
              rubric_id=RUBRIC.id, rubric_version=RUBRIC.version, report=REPORT)
    save_draft(d)
    v = commit_verdict(queue, d, RUBRIC)
    # the draft is gone only now
    assert load_draft(root, "alpha") is None
    # one commit, exactly one new file
    assert queue.head.commit.parents[0].hexsha == before
    changed = git_lines(queue, "show", "--name-status", "--format=", "HEAD")
    assert changed == [f"A\t{v.path.as_posix()}"]
    assert v.path.parts[:2] == ("verdicts", "alpha")
    assert v.path.name.startswith("alice-example.com--") and v.path.suffix == ".toml"
    data = tomllib.loads((root / v.path).read_text())
    assert data["schema"] == 1 and data["record"] == "verdict"
    assert data["verdict_id"] == v.verdict_id
    assert data["task_tree"] == queue.head.commit.tree["tasks/alpha"].hexsha
    assert data["reviewer"] == {"name": ALICE.name, "email": ALICE.email}
    assert data["rubric"] == {"id": "kernel-review", "version": 1}
    assert data["overall"] == "reject" and data["rationale"] == "edge tile at N=1025 unmasked"
    assert set(data["fields"]) == {"reference", "tolerance", "correctness", "edge_coverage", "benchmark", "failure_report"}
    assert data["device"] == "cpu (triton interpreter)" and data["kws_version"]
    # every check that applies was judged: a skip with nothing to look at keeps it complete
    assert data["checks_complete"] is True
    assert data["versions"] == {"kws": "0.1.0", "torch": "2.13.0"}
    assert isinstance(data["timestamp"], datetime) and data["timestamp"].utcoffset() == timedelta(0)
    f0 = data["findings"][0]
    assert (f0["check"], f0["severity"]) == ("edge-shapes", "fail")
    assert f0["evidence"]["got"] == "nan" and "note" not in f0["evidence"]
    assert f0["evidence"]["values"] == [1.0, "null", "inf"]
    assert f0["repro"].startswith("kws check")
    assert [c["check"] for c in data["checks"]] == ["correctness", "edge-shapes", "speedup-claim"]
    assert data["checks"][2]["reason"] == "the task makes no speedup claim ([claims] speedup = 0)"
    trailers = git_lines(queue, "log", "-1", "--format=%(trailers:only,unfold)")
    assert f"Kws-Record: verdict:{v.verdict_id}" in trailers
    assert "Kws-Task: alpha" in trailers and "Kws-Overall: reject" in trailers
    assert f"Kws-Reviewer: {ALICE.name} <{ALICE.email}>" in trailers
    assert queue.head.commit.author.email == ALICE.email
    # it reads back identically
    rs = load_records(root)
    assert rs.problems == [] and rs.verdicts == [v]


def test_verdict_commits_only_its_own_file(queue):
    root = Path(queue.working_tree_dir)
    (root / "notes.txt").write_text("staged, not mine\n")
    queue.git.add("notes.txt")
    v = verdict(queue, "alpha", ALICE)
    assert git_lines(queue, "show", "--name-only", "--format=", "HEAD") == [v.path.as_posix()]
    assert "notes.txt" in queue.git.diff("--cached", "--name-only")


@pytest.mark.parametrize("problem", ["identity", "detached", "dirty", "values", "stale", "missing-task"])
def test_refused_verdict_keeps_the_draft_and_commits_nothing(queue, problem, monkeypatch):
    root = Path(queue.working_tree_dir)
    vals = values("accept")
    tree = None
    task = "alpha"
    if problem == "identity":
        set_repo_identity(queue, None)
    elif problem == "detached":
        queue.git.checkout("-q", "--detach", "HEAD")
    elif problem == "dirty":
        (root / "tasks" / "alpha" / "candidate.py").write_text("def run(x):\n    return -x\n")
    elif problem == "values":
        vals = values("reject", rationale=" ")
        vals["rationale"] = " "
    elif problem == "stale":
        tree = "0" * 40
    elif problem == "missing-task":
        task = "gamma"
    d = Draft(task=task, queue=str(root), values=vals, rubric_id=RUBRIC.id, rubric_version=RUBRIC.version, task_tree=tree)
    path = save_draft(d)
    head = queue.head.commit.hexsha
    with pytest.raises((RecordError, IdentityError)) as ei:
        commit_verdict(queue, d, RUBRIC)
    msg = str(ei.value)
    expect = {
        "identity": "no git identity",
        "detached": "HEAD is detached",
        "dirty": "uncommitted changes",
        "values": "rationale: required when overall is reject",
        "stale": "changed since its checks ran",
        "missing-task": "not in HEAD",
    }[problem]
    assert expect in msg
    assert path.is_file() and load_draft(root, task).values == vals
    assert queue.head.commit.hexsha == head
    assert not (root / "verdicts").exists()
    assert "verdicts" not in queue.git.status("--porcelain")


def test_drafts_live_outside_the_queue_and_survive_corruption(env, queue):
    root = Path(queue.working_tree_dir)
    d = Draft(task="alpha", queue=str(root), values={"overall": "reject"}, report=REPORT)
    p = save_draft(d)
    assert env / "state" in p.parents and root not in p.parents
    got = load_draft(root, "alpha")
    assert got.values == {"overall": "reject"} and got.report["findings"][0]["evidence"]["note"] is None
    assert got.updated is not None and got.updated.tzinfo is not None
    save_draft(Draft(task="beta", queue=str(root), values={"overall": "accept"}))
    assert [x.task for x in list_drafts(root)] == ["alpha", "beta"]
    # another queue has its own drafts
    other = make_queue(env / "q2")
    assert load_draft(other.working_tree_dir, "alpha") is None
    p.write_text("{ not json")
    assert load_draft(root, "alpha") is None
    assert p.with_name("alpha.json.corrupt").is_file()
    assert delete_draft(root, "beta") and not delete_draft(root, "beta")


# ---------------------------------------------------------------------------------------------
# reading: malformed records, tie-break


def _write_record(root: Path, folder: str, task: str, name: str, data: dict) -> Path:
    p = root / folder / task / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(tomli_w.dumps(data))
    return p


def _commit_files(root: Path) -> None:
    """Commit whatever a test wrote under the record folders (records are read from
    commits only)."""
    repo = git.Repo(root)
    repo.git.add("-A", "-f", "--", *[f for f in ("verdicts", "disputes", "resolutions", "reservations")
                                      if (root / f).exists()])
    repo.git.commit("-q", "--no-verify", "-m", "test records")


def test_malformed_records_are_reported_and_skipped(queue):
    root = Path(queue.working_tree_dir)
    good = verdict(queue, "alpha", ALICE, "accept")
    good_data = tomllib.loads((root / good.path).read_text())
    broken = root / "verdicts" / "alpha" / "broken.toml"
    broken.write_text("schema = 1\nverdict_id = \n")

    def variant(name: str, **changes):
        d = dict(good_data)
        d["verdict_id"] = f"{len(name):08x}-aaaa-4aaa-8aaa-{abs(hash(name)) % 10**12:012d}"
        for k, val in changes.items():
            if val is None:
                d.pop(k)
            else:
                d[k] = val
        return _write_record(root, "verdicts", "alpha", name, d)

    variant("no-tree.toml", task_tree=None)
    variant("bad-overall.toml", overall="maybe")
    variant("reject-no-rationale.toml", overall="reject", rationale="")
    variant("naive-time.toml", timestamp=datetime(2025, 1, 1, 12, 0))
    variant("wrong-task.toml", task="beta")
    variant("bad-reviewer.toml", reviewer={"name": "x"})
    variant("future.toml", schema=7)
    _write_record(root, "verdicts", "alpha", "dup.toml", good_data)
    _write_record(root, "disputes", "alpha", "d.toml", {"schema": 1, "record": "dispute", "dispute_id": "12345678"})
    (root / "verdicts" / "stray.toml").write_text("")
    _commit_files(root)
    rs = load_records(root)
    assert [v.verdict_id for v in rs.verdicts] == [good.verdict_id]
    by_file = {p.file.name: p for p in rs.problems}
    assert by_file["broken.toml"].problem.startswith("not valid TOML")
    assert by_file["no-tree.toml"].key == "task_tree" and by_file["no-tree.toml"].problem == (
        "missing required key (a git tree id of 40 hex digits)"
    )
    assert by_file["bad-overall.toml"].key == "overall"
    assert by_file["reject-no-rationale.toml"].key == "rationale"
    assert by_file["naive-time.toml"].key == "timestamp" and "UTC offset" in by_file["naive-time.toml"].problem
    assert by_file["wrong-task.toml"].key == "task"
    assert by_file["bad-reviewer.toml"].key == "reviewer.email"
    assert by_file["future.toml"].key == "schema"
    assert by_file["dup.toml"].key == "verdict_id" and "duplicate" in by_file["dup.toml"].problem
    assert by_file["d.toml"].key == "fields" and by_file["d.toml"].problem.startswith("missing required key")
    assert by_file["stray.toml"].file == Path("verdicts/stray.toml")
    assert str(by_file["bad-overall.toml"]).startswith("verdicts/alpha/bad-overall.toml: overall: ")
    # history still works, and says what it skipped
    h = task_history(queue, "alpha")
    assert [e.record.id for e in h.entries] == [good.verdict_id]
    assert any(p.file.name == "broken.toml" for p in h.problems)


def test_unknown_keys_are_warnings_and_the_record_loads(queue):
    root = Path(queue.working_tree_dir)
    good = verdict(queue, "alpha", ALICE, "accept")
    data = tomllib.loads((root / good.path).read_text())
    data["verdict_id"] = "0123abcd-0001"
    data["confidence"] = "high"  # as a later kws might write
    data["reviewer"] = {**data["reviewer"], "team": "kernels"}
    _write_record(root, "verdicts", "alpha", "later.toml", data)
    _commit_files(root)
    rs = load_records(root)
    assert rs.problems == []
    assert sorted(v.verdict_id for v in rs.verdicts) == sorted([good.verdict_id, "0123abcd-0001"])
    assert sorted((p.file.as_posix(), p.key) for p in rs.warnings) == [
        ("verdicts/alpha/later.toml", "confidence"),
        ("verdicts/alpha/later.toml", "reviewer.team"),
    ]


def test_hostile_record_files_are_skipped_with_file_and_reason(queue):
    root = Path(queue.working_tree_dir)
    good = verdict(queue, "alpha", ALICE, "accept")
    data = tomllib.loads((root / good.path).read_text())
    folder = root / "verdicts" / "alpha"
    (folder / "deep.toml").write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    (folder / "latin1.toml").write_bytes(b"schema = 1\nrationale = 'caf\xe9'\n")
    (folder / "huge.toml").write_text("x = '" + "a" * (5 << 20) + "'\n")
    data["fields"] = {**data["fields"], "correctness": 5}
    data["verdict_id"] = "0123abcd-0002"
    _write_record(root, "verdicts", "alpha", "int-field.toml", data)
    _commit_files(root)
    rs = load_records(root)
    assert [v.verdict_id for v in rs.verdicts] == [good.verdict_id]
    by_file = {p.file.name: p for p in rs.problems}
    assert "nested 5000 levels deep (at most 32)" in by_file["deep.toml"].problem
    assert by_file["latin1.toml"].problem.startswith("not UTF-8 text (byte 0xe9")
    assert "larger than the 4194304-byte limit" in by_file["huge.toml"].problem
    assert (by_file["int-field.toml"].key, by_file["int-field.toml"].problem) == (
        "fields.correctness", "expected a string, got an integer 5"
    )
    assert all(p.file.parent == Path("verdicts/alpha") for p in rs.problems)


def test_current_state_tie_break_is_timestamp_then_id(queue):
    root = Path(queue.working_tree_dir)
    v = verdict(queue, "alpha", ALICE)
    base = tomllib.loads((root / v.path).read_text())
    ts = datetime.now(UTC) + timedelta(hours=1)  # after the verdict above, within the clock-skew allowance
    ids = ["cccccccc-0000-4000-8000-000000000000", "aaaaaaaa-0000-4000-8000-000000000000",
           "bbbbbbbb-0000-4000-8000-000000000000"]
    overalls = ["needs-work", "accept", "reject"]
    # file names sort in the opposite order of the ids: the file order must not matter
    for i, (vid, ov) in enumerate(zip(ids, overalls, strict=True)):
        d = dict(base, verdict_id=vid, timestamp=ts, overall=ov, rationale="r")
        d["reviewer"] = {"name": BOB.name, "email": BOB.email}
        _write_record(root, "verdicts", "alpha", f"z{9 - i}.toml", d)
    _commit_files(root)
    rs = load_records(root)
    assert [x.verdict_id for x in rs.verdicts_for("alpha")][1:] == sorted(ids)
    assert rs.current_verdict("alpha").verdict_id == ids[0]  # 'ccc...' is the largest id
    assert rs.current_verdict("alpha").overall == "needs-work"
    assert rs.latest_by_reviewer("alpha")[BOB.email].verdict_id == ids[0]
    assert rs.reviewed_by(ALICE)["alpha"].verdict_id == v.verdict_id
    flags = rs.flags("alpha", ALICE)
    assert flags.mine.verdict_id == v.verdict_id and flags.overall == "needs-work" and flags.verdicts == 4
    assert rs.flags("beta", ALICE).mine is None
    # a later timestamp beats any id
    d = dict(base, verdict_id="00000000-0000-4000-8000-000000000000", timestamp=ts + timedelta(microseconds=1))
    _write_record(root, "verdicts", "alpha", "a.toml", d)
    _commit_files(root)
    assert load_records(root).current_verdict("alpha").verdict_id.startswith("00000000")
    # prefix lookup
    assert rs.verdict("cccc").verdict_id == ids[0]
    with pytest.raises(RecordError, match="at least 4"):
        rs.verdict("cc")
    with pytest.raises(RecordError, match="no verdict"):
        rs.verdict("ffff")


def _rubric_allowing(value: str) -> str:
    """kernel-review's rubric file with ``value`` one more allowed correctness value."""
    data = tomllib.loads(Path(RUBRIC.path).read_text())
    field = next(f for f in data["fields"] if f["key"] == "correctness")
    field["values"].append({"value": value, "key": "~", "label": value})
    return tomli_w.dumps(data)


def _commit_queue_file(repo: git.Repo, rel: str, text: str) -> None:
    p = Path(repo.working_tree_dir) / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    repo.git.add("-f", rel)
    repo.git.commit("-q", "--no-verify", "-m", f"owner: {rel}")


def _outcome(rs) -> tuple:
    """What a load gives, comparable across loads."""
    return ([v.verdict_id for v in rs.verdicts], [(p.file.as_posix(), p.key, p.problem) for p in rs.problems],
            [(p.file.as_posix(), p.key, p.problem) for p in rs.warnings], rs.resolution_rule)


def test_records_are_judged_by_the_rubric_committed_with_them_not_the_work_trees(queue):
    """A commit's records parse against the queue rubric of that commit's tree: editing
    the work tree's rubric afterwards (uncommitted) changes nothing, either way."""
    root = Path(queue.working_tree_dir)
    v = verdict(queue, "alpha", ALICE)
    base = tomllib.loads((root / v.path).read_text())
    mostly = dict(base, verdict_id="0123abcd-0100", fields={**base["fields"], "correctness": "mostly"})
    _write_record(root, "verdicts", "alpha", "mostly.toml", mostly)
    _commit_files(root)
    # the bundled kernel-review does not allow 'mostly'; a work-tree rubric that does is not committed
    refused = _outcome(load_records(root))
    assert refused[0] == [v.verdict_id]
    assert any("unknown value 'mostly' for rubric kernel-review" in p[2] for p in refused[1])
    (root / "rubrics").mkdir()
    (root / "rubrics" / "kernel-review.toml").write_text(_rubric_allowing("mostly"))
    assert _outcome(load_records(root)) == refused
    # the queue's owner commits it: the record is valid under its own committed rubric ...
    _commit_queue_file(queue, "rubrics/kernel-review.toml", _rubric_allowing("mostly"))
    valid = _outcome(load_records(root))
    assert valid[0] == [v.verdict_id, "0123abcd-0100"] and not valid[1]
    # ... and stays so when the work tree's rubric is edited (or removed) since
    (root / "rubrics" / "kernel-review.toml").write_text(_rubric_allowing("partly"))
    assert _outcome(load_records(root)) == valid
    (root / "rubrics" / "kernel-review.toml").unlink()
    assert _outcome(load_records(root)) == valid
    # an earlier commit still parses against its own tree (the bundled rubric)
    assert _outcome(load_records(root, rev="HEAD~1")) == refused


def test_records_take_the_resolution_rule_of_the_committed_queue_toml(queue):
    """Two standing resolutions that disagree: the rule of the commit's queue.toml decides,
    whatever the work tree's queue.toml says (uncommitted), either way."""
    root = Path(queue.working_tree_dir)
    v = verdict(queue, "alpha", ALICE, "reject", correctness="incorrect")
    d = commit_dispute(queue, v, {"correctness": "correct"}, "it is correct", RUBRIC, identity=BOB)
    r = commit_resolution(queue, load_records(root), d, "upheld", "the verdict stands", rubric=RUBRIC, identity=CAROL)
    other = dict(tomllib.loads((root / r.path).read_text()), resolution_id="0123abcd-0200", outcome="overturned",
                 fields=dict(d.fields), rationale="the dispute is right")
    _write_record(root, "resolutions", "alpha", "other.toml", other)
    _commit_files(root)
    queue_toml = (root / "queue.toml").read_text()
    open_ = load_records(root)
    assert open_.resolution_rule == "open" and open_.resolution_of(d.dispute_id) is None
    (root / "queue.toml").write_text(queue_toml.replace("[records]", 'resolution_conflict = "last"\n\n[records]'))
    assert _outcome(load_records(root)) == _outcome(open_)
    assert load_records(root).resolution_of(d.dispute_id) is None
    queue.git.commit("-q", "--no-verify", "-m", "owner: last", "queue.toml")
    last = load_records(root)
    assert last.resolution_rule == "last" and last.resolution_of(d.dispute_id).outcome == "overturned"
    (root / "queue.toml").write_text(queue_toml)  # back to the default rule, not committed
    assert _outcome(load_records(root)) == _outcome(last)
    assert load_records(root).resolution_of(d.dispute_id).outcome == "overturned"
    assert load_records(root, rev="HEAD~1").resolution_of(d.dispute_id) is None


# ---------------------------------------------------------------------------------------------
# disputes, resolutions


def test_dispute_and_resolutions(queue):
    root = Path(queue.working_tree_dir)
    v = verdict(queue, "alpha", ALICE, "reject", correctness="incorrect")
    with pytest.raises(RecordError, match="already says"):
        commit_dispute(queue, v, {"correctness": "incorrect"}, "why", RUBRIC, identity=BOB)
    with pytest.raises(RecordError, match="is not one of"):
        commit_dispute(queue, v, {"correctness": "great"}, "why", RUBRIC, identity=BOB)
    with pytest.raises(RecordError, match="needs a rationale"):
        commit_dispute(queue, v, {"correctness": "correct"}, "  ", RUBRIC, identity=BOB)
    with pytest.raises(RecordError, match="rationale is text"):
        commit_dispute(queue, v, {"rationale": "other"}, "x", RUBRIC, identity=BOB)
    d = commit_dispute(queue, v, {"correctness": "correct", "overall": "accept"},
                       "the mismatch is in the reference, not the candidate", RUBRIC, identity=BOB)
    assert d.task_tree == v.task_tree and d.verdict_id == v.verdict_id
    trailers = git_lines(queue, "log", "-1", "--format=%(trailers:only,unfold)")
    assert f"Kws-Verdict: {v.verdict_id}" in trailers and f"Kws-Record: dispute:{d.dispute_id}" in trailers
    rs = load_records(root)
    assert rs.open_disputes("alpha") == [d] and rs.flags("alpha").disputed
    assert rs.open_disputes("beta") == []

    with pytest.raises(RecordError, match="takes no --field"):
        commit_resolution(queue, rs, d, "upheld", "x", {"overall": "accept"}, RUBRIC, identity=CAROL)
    with pytest.raises(RecordError, match="amended needs"):
        commit_resolution(queue, rs, d, "amended", "x", {}, RUBRIC, identity=CAROL)
    r1 = commit_resolution(queue, rs, d, "overturned", "the reference is wrong (float64 oracle)", rubric=RUBRIC, identity=CAROL)
    assert r1.fields == {"correctness": "correct", "overall": "accept"}
    assert r1.verdict_values == {"correctness": "incorrect", "overall": "reject"}
    assert r1.dispute_values == d.fields
    assert "Kws-Overall: accept" in git_lines(queue, "log", "-1", "--format=%(trailers:only,unfold)")
    rs = load_records(root)
    assert rs.open_disputes() == [] and not rs.flags("alpha").disputed
    eff = rs.effective_values(v)
    assert eff["overall"] == "accept" and eff["correctness"] == "correct"
    assert rs.flags("alpha").overall == "accept"
    assert v.overall == "reject"  # the verdict itself is never edited
    with pytest.raises(RecordError, match="already resolved"):
        commit_resolution(queue, rs, d, "upheld", "second thoughts", rubric=RUBRIC, identity=CAROL)
    r2 = commit_resolution(queue, rs, d, "amended", "partly: needs work", {"overall": "needs-work"},
                           RUBRIC, identity=CAROL, supersede=True)
    rs = load_records(root)
    assert rs.resolution_of(d.dispute_id) == r2
    eff = rs.effective_values(v)
    assert eff["overall"] == "needs-work" and eff["correctness"] == "incorrect"
    # a second dispute, upheld: the verdict's values stand
    d2 = commit_dispute(queue, v, {"tolerance": "wrong"}, "atol is 40x the fp16 budget", RUBRIC, identity=CAROL)
    rs = load_records(root)
    commit_resolution(queue, rs, d2, "upheld", "the budget at K=4096 allows it", rubric=RUBRIC, identity=BOB)
    rs = load_records(root)
    assert rs.effective_values(v)["tolerance"] == "appropriate"
    assert len(rs.disputes_of(v.verdict_id)) == 2 and rs.open_disputes() == []


# ---------------------------------------------------------------------------------------------
# reservations


def test_reservations_first_come_expiry_release(queue):
    root = Path(queue.working_tree_dir)
    r = reserve(queue, "alpha", 2, identity=ALICE)
    assert r.expires - r.timestamp == timedelta(hours=2)
    rs = load_records(root)
    assert rs.reservation("alpha").reviewer == ALICE
    assert rs.flags("alpha", BOB).reserved_by == ALICE
    with pytest.raises(RecordError, match="reserved by Alice"):
        reserve(queue, "alpha", 1, identity=BOB)
    with pytest.raises(RecordError, match="no reservation"):
        release(queue, "alpha", identity=BOB)
    # renewal by the holder
    r2 = reserve(queue, "alpha", 3, identity=ALICE)
    assert load_records(root).reservation("alpha") == r2
    # expiry: nobody holds it after the end
    assert load_records(root).reservation("alpha", now=r2.expires + timedelta(seconds=1)) is None
    release(queue, "alpha", identity=ALICE)
    assert load_records(root).reservation("alpha") is None
    with pytest.raises(RecordError, match="not in HEAD"):
        reserve(queue, "gamma", identity=ALICE)


def test_concurrent_reservations_earliest_holds(queue):
    root = Path(queue.working_tree_dir)
    t0 = datetime.now(UTC)

    def res(who, rid, at, hours=1.0):
        _write_record(root, "reservations", "beta", f"{rid}.toml", {
            "schema": 1, "record": "reservation", "reservation_id": rid, "task": "beta",
            "action": "reserve", "timestamp": at, "expires": at + timedelta(hours=hours),
            "reviewer": {"name": who.name, "email": who.email},
        })

    # Bob reserved a moment after Alice, without seeing hers (two clones, then a sync)
    res(BOB, "bbbbbbbb-1", t0 + timedelta(seconds=1))
    res(ALICE, "aaaaaaaa-1", t0)
    _commit_files(root)
    rs = load_records(root)
    assert rs.reservation("beta", now=t0 + timedelta(minutes=1)).reviewer == ALICE
    # after Alice's expires, Bob's does not come back to life: it lost when it was made
    assert rs.reservation("beta", now=t0 + timedelta(hours=1, seconds=2)) is None
    # a reserve made after Alice's expiry takes it
    res(BOB, "bbbbbbbb-2", t0 + timedelta(hours=2))
    _commit_files(root)
    assert load_records(root).reservation("beta", now=t0 + timedelta(hours=2, minutes=1)).reviewer == BOB


# ---------------------------------------------------------------------------------------------
# history, report


def test_history_names_versions_and_what_changed(queue):
    root = Path(queue.working_tree_dir)
    v1 = verdict(queue, "alpha", ALICE, "reject")
    (root / "tasks" / "alpha" / "candidate.py").write_text("def run(x):\n    return 1 * x\n")
    (root / "tasks" / "alpha" / "bench.py").write_text("")
    queue.git.add("--all", "tasks")
    queue.git.commit("-q", "-m", "alpha: fix the edge tile")
    h0 = task_history(queue, "alpha")
    assert h0.head_changes == ("A bench.py", "M candidate.py")
    d = commit_dispute(queue, v1, {"overall": "needs-work"}, "fixable", RUBRIC, identity=BOB)
    v2 = verdict(queue, "alpha", BOB, "accept")
    h = task_history(queue, "alpha")
    assert [e.record.id for e in h.entries] == [v1.verdict_id, d.dispute_id, v2.verdict_id]
    assert h.entries[1].task_tree == v1.task_tree
    assert h.entries[2].changed_from == v1.task_tree
    assert h.entries[2].changes == ("A bench.py", "M candidate.py")
    assert v1.task_tree != v2.task_tree and h.head_changes == ()


def test_report_markdown_has_fields_rationale_and_evidence(queue):
    root = Path(queue.working_tree_dir)
    d = Draft(task="alpha", queue=str(root), values=values("reject", "edge tile at N=1025: the | store mask uses BLOCK"),
              rubric_id=RUBRIC.id, rubric_version=RUBRIC.version, report=REPORT)
    v = commit_verdict(queue, d, RUBRIC, identity=ALICE)
    dd = commit_dispute(queue, v, {"edge_coverage": "untested"}, "N=1025 is outside [params]", RUBRIC, identity=BOB)
    rs = load_records(root)
    md = render_report(queue, rs, v, RUBRIC)
    assert md.startswith("# Review of `alpha`: Task alpha")
    assert "**Verdict: REJECT** by Alice Reviewer" in md
    assert f"`{v.verdict_id}`" in md and v.task_tree in md
    assert "| Edge coverage | covered | fails |" in md  # the value, and what kws suggested
    assert "> edge tile at N=1025: the | store mask uses BLOCK" in md
    assert "### fail: `edge-shapes`" in md and '"max_abs_err": 3.5' in md
    assert "kws check tasks/alpha --only edge-shapes" in md
    assert "| `speedup-claim` | skip | 0.00 | the task makes no speedup claim ([claims] speedup = 0) |" in md
    assert f"`{dd.dispute_id[:8]}` by Bob Reviewer" in md and "(open)" in md


# ---------------------------------------------------------------------------------------------
# CLI


def _fake_engine(monkeypatch, fn):
    mod = types.ModuleType("workstation.engine.run")
    mod.check_task = fn
    monkeypatch.setitem(sys.modules, "workstation.engine.run", mod)


def test_cli_verdict_history_dispute_resolve_report(queue, cli, tmp_path):
    root = str(queue.working_tree_dir)
    run = CliRunner().invoke
    r = run(cli, ["verdict", "alpha", "--queue", root, "--overall", "reject"])
    assert r.exit_code == 1
    assert "reference: required" in r.output and "rationale: required when overall is reject" in r.output
    assert "saved as a draft" in r.output and load_draft(root, "alpha") is not None
    r = run(cli, ["verdict", "alpha", "--queue", root, "--overall", "reject", "--rationale", "edge tile unmasked",
                  *sum((["--field", f"{k}={val}"] for k, val in values("reject").items()
                        if k not in ("overall", "rationale")), [])])
    assert r.exit_code == 0, r.output
    assert load_draft(root, "alpha") is None
    vid = r.stdout.split()[2]
    rs = load_records(root)
    assert rs.verdict(vid).overall == "reject" and rs.verdict(vid).device == "none (no checks run)"
    r = run(cli, ["verdict", "alpha", "--queue", root, "--overall", "accept", "--field", "colour=red"])
    assert r.exit_code == 2 and "not a field" in r.output

    r = run(cli, ["dispute", vid[:8], "--queue", root, "--field", "overall=accept", "--rationale", "fine at legal N"],
            env={"GIT_AUTHOR_NAME": BOB.name, "GIT_AUTHOR_EMAIL": BOB.email})
    assert r.exit_code == 0, r.output
    did = r.stdout.split()[2]
    r = run(cli, ["history", "alpha", "--queue", root])
    assert r.exit_code == 0, r.output
    assert "verdict" in r.output and "dispute" in r.output and "[open]" in r.output
    assert "rationale: edge tile unmasked" in r.output

    resolve = ["resolve", did[:6], "--queue", root, "--outcome", "amended", "--field", "overall=needs-work",
               "--rationale", "both partly right"]
    r = run(cli, resolve)  # the verdict's author does not resolve its dispute (queue policy, default)
    assert r.exit_code == 1 and "self_resolution = 'refuse'" in r.output and "you (alice@example.com) made" in r.output
    r = run(cli, resolve, env={"GIT_AUTHOR_NAME": CAROL.name, "GIT_AUTHOR_EMAIL": CAROL.email})
    assert r.exit_code == 0, r.output
    assert "verdict now: overall=needs-work" in r.output and "this queue has no remote" in r.output
    r = run(cli, ["history", "alpha", "--queue", root])
    assert "amended" in r.output and "after resolutions: overall=needs-work" in r.output

    out = tmp_path / "report.md"
    r = run(cli, ["report", "alpha", "--queue", root, "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "**Verdict: REJECT** (now **NEEDS-WORK** after resolution)" in out.read_text()
    r = run(cli, ["report", "beta", "--queue", root])
    assert r.exit_code == 1 and "no verdict on 'beta'" in r.output
    r = run(cli, ["history", "nope", "--queue", root])
    assert r.exit_code == 1 and "no task 'nope'" in r.output


def test_cli_reserve_release_without_remote(queue, cli):
    root = str(queue.working_tree_dir)
    run = CliRunner().invoke
    r = run(cli, ["reserve", "alpha", "--queue", root, "--hours", "1.5"])
    assert r.exit_code == 0, r.output
    assert "reserved alpha until" in r.output and "no remote" in r.output
    r = run(cli, ["reserve", "alpha", "--queue", root],
            env={"GIT_AUTHOR_NAME": BOB.name, "GIT_AUTHOR_EMAIL": BOB.email})
    assert r.exit_code == 1 and "reserved by Alice Reviewer" in r.output
    r = run(cli, ["release", "alpha", "--queue", root])
    assert r.exit_code == 0 and "released alpha" in r.output
    r = run(cli, ["release", "alpha", "--queue", root])
    assert r.exit_code == 1 and "you hold no reservation" in r.output


def test_cli_verdict_with_checks_records_findings(queue, cli, monkeypatch):
    root = Path(queue.working_tree_dir)
    seen = []

    def check_task(path):
        seen.append(Path(path))
        return REPORT

    _fake_engine(monkeypatch, check_task)
    args = ["verdict", "alpha", "--queue", str(root), "--overall", "reject", "--rationale", "edge tile",
            "--with-checks", "--accept-suggestions"]
    r = CliRunner().invoke(cli, args)
    # no suggestion where no informing check ran (reference, tolerance) or all were skipped
    # (failure_report: failure-mismatch absent); benchmark: not applicable, the task makes
    # no speedup claim (speedup-claim skipped) and has no benchmark
    assert r.exit_code == 1
    assert "reference: required" in r.output and "benchmark: required" not in r.output
    assert "benchmark = not-applicable (suggested" in r.output
    assert "correctness: required" not in r.output and "edge_coverage = fails (suggested: fail: edge-shapes" in r.output
    given = ["--field", "reference=legitimate", "--field", "tolerance=questionable",
             "--field", "benchmark=not-applicable", "--field", "failure_report=not-applicable",
             "--field", "correctness=doubtful"]
    r = CliRunner().invoke(cli, args + given)
    assert r.exit_code == 0, r.output
    assert seen == [root / "tasks" / "alpha"] * 2
    v = load_records(root).current_verdict("alpha")
    assert v.fields["edge_coverage"] == "fails"  # suggested
    assert v.fields["correctness"] == "doubtful"  # given beats suggested
    assert [f.check for f in v.findings] == ["edge-shapes", "correctness"]
    assert v.device == "cpu (triton interpreter)" and v.checks_complete is True  # skip: no claim


def test_cli_recheck_runs_on_the_judged_version(queue, cli, monkeypatch):
    root = Path(queue.working_tree_dir)
    v = verdict(queue, "alpha", ALICE, "reject", report=REPORT)
    # the task changes after the verdict, and the work tree is dirty on top
    (root / "tasks" / "alpha" / "candidate.py").write_text("def run(x):\n    return 2 * x\n")
    queue.git.commit("-q", "-am", "alpha: new candidate")
    (root / "tasks" / "alpha" / "candidate.py").write_text("garbage")

    def check_task(path):
        path = Path(path)
        assert path.name == "alpha" and (path / "task.toml").is_file()
        assert (path / "candidate.py").read_text() == "def run(x):\n    return x\n"
        return {
            "device": "cpu (triton interpreter)", "complete": True,
            "findings": [REPORT["findings"][1],
                         {"check": "noncontiguous", "severity": "warn", "summary": "transposed view", "evidence": {}}],
            "checks": [{"check": "correctness", "status": "pass"}, {"check": "edge-shapes", "status": "pass"},
                       {"check": "noncontiguous", "status": "warn"}],
        }

    _fake_engine(monkeypatch, check_task)
    r = CliRunner().invoke(cli, ["recheck", v.verdict_id, "--queue", str(root)])
    assert r.exit_code == 0, r.output
    assert "edge-shapes: fail -> pass" in r.output
    assert "speedup-claim: skip -> not run" in r.output
    assert "+ warn noncontiguous: transposed view" in r.output
    assert "- fail edge-shapes: mismatch at N=1025" in r.output
    assert "unchanged findings: 1" in r.output


def test_cli_recheck_same_results_and_info_noise(queue, cli, monkeypatch):
    root = Path(queue.working_tree_dir)
    v = verdict(queue, "alpha", ALICE, "reject", report=REPORT)
    today = dict(REPORT)
    today["findings"] = [REPORT["findings"][0],
                         {"check": "correctness", "severity": "info", "summary": "worst err/allowed 0.3"}]
    _fake_engine(monkeypatch, lambda path: today)
    r = CliRunner().invoke(cli, ["recheck", v.verdict_id[:6], "--queue", str(root)])
    assert r.exit_code == 0, r.output
    assert "info findings differ: 1 new, 1 not seen today" in r.output
    assert "same verdict-relevant results" in r.output and "worst err/allowed" not in r.output
    r = CliRunner().invoke(cli, ["recheck", v.verdict_id[:6], "--queue", str(root), "-v"])
    assert "+ info correctness: worst err/allowed 0.3" in r.output
    assert "- info correctness: worst err/allowed 0.1" in r.output


def test_cli_missing_identity_message(queue, cli):
    set_repo_identity(queue, None)
    root = str(queue.working_tree_dir)
    r = CliRunner().invoke(cli, ["verdict", "alpha", "--queue", root, "--overall", "accept",
                                 *sum((["--field", f"{k}={val}"] for k, val in values().items()
                                       if k not in ("overall", "rationale")), [])])
    assert r.exit_code == 1
    assert "no git identity" in r.output and "saved as a draft" in r.output
    assert load_draft(root, "alpha").values["overall"] == "accept"
    assert draft_path(root, "alpha").is_file()


def test_cli_default_queue_is_the_first_run_copy(env, cli, monkeypatch):
    use_identity(monkeypatch, ALICE)
    r = CliRunner().invoke(cli, ["calibrate"])
    assert r.exit_code == 0, r.output
    assert (env / "data" / "queue" / ".git").is_dir()
    assert "Krippendorff" in r.output


def test_records_survive_a_rebase_by_id_not_commit(queue):
    # ids live in the files: rewriting the commits (as sync's rebase does) keeps them
    root = Path(queue.working_tree_dir)
    v = verdict(queue, "alpha", ALICE)
    old_commit = queue.head.commit.hexsha
    queue.git.commit("-q", "--amend", "-m", "rewritten", env={"GIT_COMMITTER_DATE": "2031-01-01T00:00:00"})
    assert queue.head.commit.hexsha != old_commit
    assert load_records(root).verdict(v.verdict_id[:8]) == v


def test_open_queue_via_git_error_is_clean(cli, env):
    r = CliRunner().invoke(cli, ["history", "alpha", "--queue", str(env)])
    assert r.exit_code == 1 and "not a git repository" in r.output
