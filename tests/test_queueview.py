"""The queue screen's model: fast index, cache, validation, filter, sort, next unreviewed."""

from __future__ import annotations

import pytest

from tests.conftest import SAMPLE_QUEUE
from tests.recordkit import ALICE, BOB, isolate, make_queue, use_identity, verdict
from tests.tuikit import build_fixture_queue
from workstation.records.parse import load_records
from workstation.records.store import reserve
from workstation.review.queueview import (
    QueueRow,
    TaskSummary,
    build_rows,
    cache_file,
    next_unreviewed,
    parse_filter,
    quick_summary,
    scan_queue,
    sort_rows,
    validate_index,
)


@pytest.fixture
def queue_copy(tmp_path, monkeypatch):
    monkeypatch.setenv("KWS_CACHE_DIR", str(tmp_path / "cache"))
    return build_fixture_queue(tmp_path / "q")


def test_quick_summary_reads_top_level_and_claims():
    text = (SAMPLE_QUEUE / "tasks" / "layernorm-debug" / "task.toml").read_text()
    s = quick_summary(text, "layernorm-debug", "/x")
    assert (s.id, s.kind, s.backend, s.claimed, s.failure_class) == (
        "layernorm-debug", "debugging", "triton", "fail", "mismatch")
    assert s.title.startswith("LayerNorm") and not s.validated


def test_quick_summary_ignores_keys_inside_tables():
    text = 'schema = 1\nid = "a"\n[entry]\nkind = "nope"\n[claims]\nstatus = "fail"\n[benchmark]\nstatus = "x"\n'
    s = quick_summary(text, "a", "/a")
    assert s.kind == "?" and s.claimed == "fail"


def test_scan_then_validate_lists_malformed_with_file_key_problem(queue_copy):
    ix = scan_queue(queue_copy)
    assert "broken-kind" in ix.tasks and not ix.tasks["broken-kind"].validated  # pass 1 cannot tell
    validate_index(ix)
    assert "broken-kind" not in ix.tasks
    err = ix.errors["broken-kind"]
    assert err.key == "kind" and "refactoring" in err.problem and err.file.name == "task.toml"
    assert all(s.validated for s in ix.tasks.values())
    assert ix.name == "kws test queue" and ix.rubric_id == "kernel-review"


def test_cache_reuses_validation_until_a_file_changes(queue_copy):
    validate_index(scan_queue(queue_copy))
    assert cache_file(queue_copy).is_file()
    ix = scan_queue(queue_copy)
    assert ix.pending == [] and "broken-kind" in ix.errors  # both results come from the cache
    # an edit to an entry file (not task.toml) invalidates that task only
    cand = queue_copy / "tasks" / "matmul-opt" / "candidate.py"
    cand.write_text(cand.read_text() + "\n# edited\n")
    ix = scan_queue(queue_copy)
    assert ix.pending == ["matmul-opt"]
    # deleting the callable makes it malformed on re-validation
    cand.write_text("x = 1\n")
    validate_index(ix)
    assert "matmul-opt" in ix.errors and "callable" in ix.errors["matmul-opt"].problem


def test_missing_task_toml_is_an_error_in_pass_one(queue_copy):
    (queue_copy / "tasks" / "empty-folder").mkdir()
    ix = scan_queue(queue_copy)
    assert ix.errors["empty-folder"].problem == "no task.toml in this task folder"


def _row(tid: str, kind="generation", backend="triton", claimed="pass", fclass="", **kw) -> QueueRow:
    return QueueRow(TaskSummary(tid, f"title {tid}", kind, backend, claimed, fclass, "/", True), **kw)


ROWS = [
    _row("a-gemm", kind="optimization"),
    _row("b-norm", kind="fusion", claimed="fail", fclass="mismatch", mine="reject"),
    _row("c-cuda", backend="cuda", reserved_by="Bob", open_disputes=2),
    _row("d-mine", reserved_by="Alice", reserved_by_me=True, mine="accept"),
]


@pytest.mark.parametrize("text, ids", [
    ("", ["a-gemm", "b-norm", "c-cuda", "d-mine"]),
    ("kind:fusion,optimization", ["a-gemm", "b-norm"]),
    ("backend:cuda", ["c-cuda"]),
    ("claimed:fail", ["b-norm"]),
    ("claimed:mismatch", ["b-norm"]),
    ("reserved:yes", ["c-cuda", "d-mine"]),
    ("reserved:no", ["a-gemm", "b-norm"]),
    ("reserved:me", ["d-mine"]),
    ("reserved:bob", ["c-cuda"]),
    ("disputed:yes", ["c-cuda"]),
    ("mine:no", ["a-gemm", "c-cuda"]),
    ("mine:reject", ["b-norm"]),
    ("norm", ["b-norm"]),
    ("kind:gen mine:no", ["c-cuda"]),
])
def test_filter(text, ids):
    f = parse_filter(text)
    assert not f.problems
    assert [r.id for r in ROWS if f.matches(r)] == ids


def test_filter_reports_unknown_keys():
    f = parse_filter("colour:red kind:")
    assert len(f.problems) == 2 and "colour" in f.problems[0]


def test_sort_keys_and_reverse():
    assert [r.id for r in sort_rows(ROWS, "disputed")][0] == "c-cuda"
    assert [r.id for r in sort_rows(ROWS, "mine")][:2] == ["a-gemm", "c-cuda"]  # unreviewed first
    assert [r.id for r in sort_rows(ROWS, "reserved")][:2] == ["d-mine", "c-cuda"]  # Alice, Bob
    assert [r.id for r in sort_rows(ROWS, "id", reverse=True)][0] == "d-mine"
    with pytest.raises(ValueError):
        sort_rows(ROWS, "colour")


def test_next_unreviewed_skips_reviewed_and_others_reservations_and_wraps():
    assert next_unreviewed(ROWS).id == "a-gemm"
    # c-cuda is reserved by Bob: skipped; b-norm and d-mine are mine: skipped; wraps to a-gemm
    assert next_unreviewed(ROWS, "a-gemm").id == "a-gemm"
    rows = ROWS + [_row("e-free")]
    assert next_unreviewed(rows, "a-gemm").id == "e-free"
    assert next_unreviewed([r for r in ROWS if r.mine]) is None


def test_build_rows_flags_from_records(tmp_path, monkeypatch):
    isolate(monkeypatch, tmp_path)
    monkeypatch.setenv("KWS_CACHE_DIR", str(tmp_path / "cache"))
    repo = make_queue(tmp_path / "q", tasks=("alpha", "beta", "gamma"))
    for t in ("alpha", "beta", "gamma"):  # recordkit's minimal tasks lack the inputs entry file
        (tmp_path / "q" / "tasks" / t / "inputs.py").write_text("def make_inputs(case, device, seed):\n    return ()\n")
    repo.git.add("--all")
    repo.git.commit("-q", "-m", "inputs")
    use_identity(monkeypatch, ALICE)
    verdict(repo, "alpha", ALICE, "reject")
    reserve(repo, "beta", identity=BOB)
    ix = validate_index(scan_queue(tmp_path / "q"))
    rows = {r.id: r for r in build_rows(ix, load_records(tmp_path / "q"), ALICE, drafts=["gamma"])}
    assert rows["alpha"].mine == "reject" and rows["alpha"].verdicts == 1
    assert rows["beta"].reserved_by == "Bob Reviewer" and not rows["beta"].reserved_by_me
    assert rows["gamma"].has_draft and rows["gamma"].mine is None
    assert next_unreviewed(list(rows.values())).id == "gamma"
