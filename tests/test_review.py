"""The review-session model: live check rows, suggestions, one-key picks, undo, drafts,
evidence, timing, commit."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from tests.recordkit import ALICE, isolate, use_identity
from tests.tuikit import build_fixture_queue
from workstation.engine.events import normalise_event
from workstation.records.drafts import Draft, load_draft
from workstation.records.model import RecordError
from workstation.records.parse import load_records
from workstation.repo.gitqueue import ensure_default_queue
from workstation.review.autosave import DraftSaver
from workstation.review.evidence import evidence_lines, finding_source, rationale_from_findings
from workstation.review.session import ReviewSession
from workstation.review.sources import ReplayCheckSource
from workstation.review.timing import TimingView, histogram, histogram_blocks, timing_views
from workstation.rubric.model import find_rubric

FIXTURES = Path(__file__).parent / "fixtures"
EVENTS = FIXTURES / "events"
RUBRIC = find_rubric("kernel-review")


def stream(task: str) -> list:
    return json.loads((EVENTS / f"{task}.json").read_text())["events"]


def session_after(task: str, upto: str | None = None, **kw) -> ReviewSession:
    s = ReviewSession(task, "/nowhere", RUBRIC, **kw)
    s.begin_run()
    for kind, data in stream(task):
        s.apply_event(kind, data)
        if upto is not None and kind == "check_finished" and data["result"]["check"] == upto:
            break
    return s


def test_rows_fill_in_live_and_report_is_partial_until_done():
    s = ReviewSession("layernorm-debug", "/q", RUBRIC)
    s.begin_run()
    events = stream("layernorm-debug")
    kind, data = events[0]
    assert kind == "start"
    s.apply_event(kind, data)
    assert [r.status for r in s.rows.values()] == ["queued"] * len(data["checks"])
    assert s.running and not s.report()["complete"]
    first_finished = next(i for i, (k, _) in enumerate(events) if k == "check_finished")
    for k, d in events[1:first_finished + 1]:
        s.apply_event(k, d)
    assert s.running
    assert len(s.report()["checks"]) == 1
    for k, d in events[first_finished + 1:]:
        s.apply_event(k, d)
    assert not s.running and s.final_report is not None
    rep = s.report()
    assert {c["check"] for c in rep["checks"]} == set(data["checks"])
    assert rep["device"].startswith("cpu")


def test_suggestions_follow_findings():
    s = session_after("layernorm-debug")
    sg = s.suggestions()
    assert sg["correctness"].value == "incorrect"  # correctness fails (the kernel raises)
    assert sg["overall"].value == "reject"
    assert sg["failure_report"].value == "wrong"  # reported mismatch, observed compile error
    assert any(f["check"] == "correctness" for f in sg["correctness"].findings)


def test_pick_by_key_accept_undo_redo():
    s = session_after("layernorm-debug")
    changes = []
    s.on_change = lambda sess: changes.append(dict(sess.values))
    assert s.pick_by_key("correctness", "c") == [("correctness", None, "correct")]
    assert s.pick_by_key("correctness", "z") == []  # no value on that key
    assert s.accept_suggestion("correctness") == [("correctness", "correct", "incorrect")]
    step = s.accept_all_suggestions()
    assert {k for k, _, _ in step} >= {"overall", "failure_report"}
    assert "correctness" not in {k for k, _, _ in step}  # already set: not overwritten
    assert s.undo() == step and "overall" not in s.values
    assert s.values["correctness"] == "incorrect"
    s.undo()
    assert s.values["correctness"] == "correct"
    s.redo()
    assert s.values["correctness"] == "incorrect"
    assert len(changes) == 6  # pick, accept, accept all, undo, undo, redo
    with pytest.raises(KeyError):
        s.set_value("correctness", "maybe")


def test_rationale_prefill_and_validation():
    s = session_after("layernorm-debug")
    s.accept_all_suggestions()
    probs = s.problems()
    assert any(p.startswith("rationale: required when overall is reject") for p in probs)
    fails = [f for f in s.findings if f["severity"] == "fail"]
    s.prefill_rationale(fails)
    assert s.rationale.startswith("- correctness (fail): ")
    assert "case M=16 N=1000 float32" in s.rationale
    assert s.prefill_rationale(fails) == []  # the same lines are not added twice
    assert s.problems() == [p for p in probs if not p.startswith("rationale")]
    s.undo()
    assert s.rationale == ""


def test_evidence_lines_for_an_exception_and_a_mismatch():
    s = session_after("layernorm-debug")
    exc = next(f for f in s.findings if f["check"] == "correctness" and f["severity"] == "fail")
    lines = dict(evidence_lines(exc))
    assert lines["case"] == "M=16 N=1000 float32" and lines["seed"] == "0"
    assert "InterpreterError" in lines["exception"] and "power of 2" in lines["message"]
    assert lines["repro"].startswith("kws check tasks/layernorm-debug --only correctness")
    assert finding_source(exc) == ("candidate.py", 51)
    info = next(f for f in s.findings if f["check"] == "correctness" and f["severity"] == "info")
    il = dict(evidence_lines(info))
    assert "expected" in il and "got" in il and "worst at" in il and "max abs err" in il


def test_timing_view_from_real_speedup_claim_evidence():
    s = session_after("bench-honest")
    views = timing_views(s.findings)
    assert views, "bench-honest records speedup-claim timing evidence"
    tv = views[0]
    assert tv.representative and tv.ratio and tv.ratio_ci and tv.claimed == 50.0
    assert {sd.name for sd in tv.sides} >= {"candidate", "baseline"}
    assert all(sd.samples_ms and sd.median_ms for sd in tv.sides)
    lo, hi = tv.ratio_ci
    assert "claimed 50×" in tv.speedup_line()
    assert ("claim within" in tv.speedup_line()) == (lo <= 50.0 <= hi)


def test_session_takes_the_timing_checks_from_the_start_event():
    start = stream("bench-honest")[0][1]
    s = session_after("bench-honest")
    assert s.timing_checks == start["timing_checks"] and s.timing_checks
    assert s.timing_evidence_checks == start["timing_evidence_checks"] and s.timing_evidence_checks
    assert s.timing_findings() and all(f["check"] in s.timing_evidence_checks for f in s.timing_findings())
    assert timing_views(s.timing_findings()) == timing_views(s.findings)
    # a re-run of one check names only that check: the full run's timing checks stay
    s.begin_run(["correctness"])
    s.apply_event("start", {"checks": ["correctness"], "device": "cpu", "timing_checks": [],
                            "timing_evidence_checks": []})
    assert s.timing_checks == start["timing_checks"]
    # a full run says anew
    s.begin_run()
    s.apply_event("start", {"checks": ["correctness"], "device": "cpu", "timing_checks": [],
                            "timing_evidence_checks": []})
    assert s.timing_checks == [] and s.timing_evidence_checks == [] and s.timing_findings() == []


def test_timing_view_not_representative():
    f = {"check": "speedup-claim", "severity": "info", "summary": "s", "evidence": {"timing": {
        "device": "cpu (triton interpreter)", "protocol": "p", "representative": False,
        "reason": "Triton ran in the interpreter", "sides": {"candidate": {"samples_ms": [1.0, 2.0], "n": 2}},
        "ratio": "nan", "ratio_ci": ["nan", "nan"], "ci_level": 0.95, "claimed": 1.3, "case": {"N": 8}}}}
    tv = TimingView.from_finding(f)
    assert tv is not None and not tv.representative and tv.ratio is None and tv.ratio_ci is None
    assert tv.speedup_line() == "speedup: not measured"


def test_histogram_and_blocks():
    assert histogram([0, 1, 2, 3, 4], 0, 4, 4) == [1, 1, 1, 2]
    assert histogram([5, 5, 5], 5, 5, 5) == [0, 0, 3, 0, 0]
    assert histogram_blocks([0, 1, 8]) == " ▁█"
    assert histogram_blocks([0, 0]) == "  "


def test_rationale_from_findings_orders_worst_first():
    fs = [{"check": "a", "severity": "info", "summary": "x", "evidence": {}},
          {"check": "b", "severity": "fail", "summary": "y", "evidence": {"case": {"N": 3, "dtype": "float16"}, "seed": 1}}]
    assert rationale_from_findings(fs) == "- b (fail): y [case N=3 float16, seed 1]\n- a (info): x"


def test_normalise_event_turns_nonfinite_into_strings():
    from workstation.engine.check import CheckResult, Finding

    r = CheckResult("x", "fail", 1.0, "", [Finding("x", "fail", "s", {"v": float("nan")})])
    kind, data = normalise_event("check_finished", {"result": r})
    assert data["result"]["findings"][0]["evidence"]["v"] == "nan"
    json.dumps(data, allow_nan=False)


def test_replay_source_only_filters_and_gate_blocks_results():
    src = ReplayCheckSource(EVENTS, gate=threading.Event())
    seen: list = []
    t = threading.Thread(target=lambda: src.run(Path("tasks/matmul-opt"), ["correctness"],
                                                lambda k, d: seen.append((k, d))))
    t.start()
    deadline = time.monotonic() + 30  # the worker's first events, however loaded the machine
    while len(seen) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [k for k, _ in seen] == ["start", "check_started"]  # waiting on the gate
    src.gate.set()
    t.join(5)
    kinds = [k for k, _ in seen]
    assert kinds == ["start", "check_started", "check_finished", "done"]
    assert seen[0][1]["checks"] == ["correctness"]
    assert [c["check"] for c in seen[-1][1]["report"]["checks"]] == ["correctness"]


def test_draft_saver_newest_wins_and_flush(tmp_path, monkeypatch):
    monkeypatch.setenv("KWS_STATE_DIR", str(tmp_path / "state"))
    saved = []
    gate = threading.Event()

    def slow_save(d: Draft):
        gate.wait(5)
        saved.append(dict(d.values))

    sv = DraftSaver(save=slow_save)
    for i in range(5):
        sv.submit(Draft(task="t", queue=str(tmp_path), values={"n": str(i)}))
    gate.set()
    assert sv.flush(5)
    assert saved[-1] == {"n": "4"} and len(saved) <= 2
    sv.close()


def test_session_draft_roundtrip_and_commit(tmp_path, monkeypatch):
    isolate(monkeypatch, tmp_path)
    use_identity(monkeypatch, ALICE)
    root = ensure_default_queue(source=build_fixture_queue(tmp_path / "fixture-src"), dest=tmp_path / "queue")
    import git

    repo = git.Repo(root)
    from workstation.records.drafts import save_draft
    from workstation.repo.gitqueue import task_version

    s = session_after("layernorm-debug")
    s.queue_root = root
    s.task_tree = task_version(repo, "layernorm-debug").tree
    s.on_change = lambda sess: save_draft(sess.draft())
    s.accept_all_suggestions()
    s.set_value("reference", "legitimate")
    s.set_value("tolerance", "appropriate")
    s.set_value("edge_coverage", "fails")
    s.set_value("benchmark", "not-applicable")
    with pytest.raises(RecordError, match="rationale"):
        s.commit(repo)
    s.prefill_rationale([f for f in s.findings if f["severity"] == "fail"])
    d = load_draft(root, "layernorm-debug")
    assert d is not None and d.values == s.values and d.report["checks"]
    restored = ReviewSession("layernorm-debug", root, RUBRIC, draft=d)
    assert restored.values == s.values and restored.task_tree == s.task_tree
    v = s.commit(repo)
    assert v.overall == "reject" and v.task_tree == s.task_tree
    assert load_draft(root, "layernorm-debug") is None  # removed after the commit
    assert repo.head.commit.message.startswith("kws verdict: reject layernorm-debug")
    rs = load_records(root)
    assert rs.verdict(v.verdict_id).fields["correctness"] == "incorrect"
    assert {f.check for f in rs.verdict(v.verdict_id).findings} >= {"correctness", "failure-mismatch"}


# ---- provenance of suggestions, re-flags, commit warnings -----------------------------------


def _upto_before(task: str, check: str) -> tuple[ReviewSession, list]:
    """A session with every event of ``task``'s stream applied up to (not including) the
    result of ``check``; returns it and the events left."""
    s = ReviewSession(task, "/nowhere", RUBRIC)
    s.begin_run()
    events = stream(task)
    for i, (kind, data) in enumerate(events):
        if kind == "check_finished" and data["result"]["check"] == check:
            return s, events[i:]
        s.apply_event(kind, data)
    raise AssertionError(f"{check} never finishes in the {task} stream")


def test_accepting_while_an_informing_check_runs_is_from_an_incomplete_run_until_it_finishes():
    s, rest = _upto_before("relu-unwritten", "edge-shapes")
    assert s.rows["edge-shapes"].status == "running"
    assert s.provenance("edge_coverage") == "from-incomplete-run"
    assert s.provenance("reference") == "from-complete-run"  # its informing checks are all done
    s.accept_all_suggestions()
    assert s.suggested["edge_coverage"] == "from-incomplete-run"
    assert s.values["edge_coverage"] == "covered"
    warn = s.commit_warnings()
    assert any("not finished" in w and "edge-shapes" in w for w in warn), warn
    d = s.draft()
    assert "edge-shapes" in d.unfinished_checks and d.suggested["edge_coverage"] == "from-incomplete-run"
    for kind, data in rest:
        s.apply_event(kind, data)
    # edge-shapes passed: the complete run suggests what was taken, so it is now from the complete run
    assert not s.running and not s.reflagged
    assert s.suggested["edge_coverage"] == "from-complete-run"
    assert s.commit_warnings() == [] and s.draft().unfinished_checks == []


def test_a_finding_that_changes_after_acceptance_reflags_the_field():
    s, rest = _upto_before("relu-unwritten", "edge-shapes")
    s.accept_suggestion("edge_coverage")
    kind, data = rest[0]
    failed = json.loads(json.dumps(data))
    failed["result"]["status"] = "fail"
    failed["result"]["findings"] = [{"check": "edge-shapes", "severity": "fail", "summary": "case M=1 N=1: wrong",
                                     "evidence": {}, "repro": ""}]
    s.apply_event("check_finished", failed)
    assert s.suggestions()["edge_coverage"].value == "fails"
    assert "now fails" in s.reflagged["edge_coverage"]
    assert s.suggested["edge_coverage"] == "from-incomplete-run"  # not confirmed by the finished run
    assert any(w.startswith("Edge coverage:") for w in s.commit_warnings())
    # Enter on the field: the reviewer looked again and keeps the value; the flag goes
    assert s.confirm_field("edge_coverage") == [] and "edge_coverage" not in s.reflagged
    # a new finding behind the same value re-flags too
    s.accept_suggestion("edge_coverage")  # now "fails"
    more = json.loads(json.dumps(failed))
    more["result"]["findings"].append({"check": "edge-shapes", "severity": "fail", "summary": "case M=3: wrong",
                                       "evidence": {}, "repro": ""})
    s.apply_event("check_finished", more)
    assert "findings behind fails changed" in s.reflagged["edge_coverage"]
    # the reviewer's own pick is not a suggestion: no provenance, no flag
    s.set_value("edge_coverage", "untested")
    assert "edge_coverage" not in s.suggested and "edge_coverage" not in s.reflagged


def test_errored_checks_and_prescreens_are_not_a_complete_run():
    s = session_after("relu-unwritten")
    report = s.report()
    err = next(c for c in report["checks"] if c["check"] == "noncontiguous")
    err["status"], err["reason"] = "error", "RuntimeError: a kws bug"
    p = ReviewSession("relu-unwritten", "/nowhere", RUBRIC)
    p.load_prescreen(report)
    assert p.source == "prescreen" and p.provenance("edge_coverage") == "from-prescreen"
    p.accept_suggestion("correctness")
    assert p.suggested == {"correctness": "from-prescreen"}
    assert any("pre-screen" in w for w in p.commit_warnings())
    assert any("ended in error: noncontiguous" in w for w in p.commit_warnings())
    p.begin_run()  # a live run replaces the stored findings
    assert p.source == "run" and p.provenance("correctness") == "from-incomplete-run"


def test_picks_by_number_confirm_and_undo_keep_the_provenance_straight():
    s = session_after("layernorm-debug")
    assert s.pick_nth("overall", 1) == [("overall", None, "reject")]
    assert s.pick_nth("overall", 9) == [] and s.values["overall"] == "reject"
    assert "overall" not in s.suggested
    assert s.confirm_field("correctness") == [("correctness", None, "incorrect")]  # empty: kws's suggestion
    assert s.suggested["correctness"] == "from-complete-run"
    s.undo()
    assert "correctness" not in s.values and "correctness" not in s.suggested
    s.redo()
    assert s.suggested["correctness"] == "from-complete-run"


def test_a_session_saves_nothing_until_the_reviewer_changes_something():
    saved = []
    s = ReviewSession("layernorm-debug", "/nowhere", RUBRIC, on_change=lambda sess: saved.append(sess.draft()))
    s.begin_run()
    for kind, data in stream("layernorm-debug"):
        s.apply_event(kind, data)
    assert not s.touched and saved == []
    s.pick_nth("reference", 3)
    assert s.touched and len(saved) == 1
    s.mark_committed()
    assert not s.touched


def test_commit_records_unfinished_checks_and_suggested(tmp_path, monkeypatch):
    isolate(monkeypatch, tmp_path)
    use_identity(monkeypatch, ALICE)
    root = ensure_default_queue(source=build_fixture_queue(tmp_path / "fixture-src"), dest=tmp_path / "queue")
    import git

    from workstation.repo.gitqueue import task_version

    repo = git.Repo(root)
    s, _rest = _upto_before("relu-unwritten", "edge-shapes")
    s.queue_root = root
    s.task_tree = task_version(repo, "relu-unwritten").tree
    s.accept_all_suggestions()
    for f in s.rubric.choice_fields:
        if not s.values.get(f.key):
            s.pick_nth(f.key, len(f.values))
    assert s.suggested["overall"] == "from-incomplete-run"
    s.set_value("overall", "needs-work")  # the reviewer's own pick replaces kws's reject
    s.set_rationale("unwritten output")
    v = s.commit(repo)
    got = load_records(root).verdict(v.verdict_id)
    assert "edge-shapes" in got.unfinished_checks
    assert got.suggested["edge_coverage"] == "from-incomplete-run"
    assert got.suggested["reference"] == "from-complete-run"
    assert "overall" not in got.suggested and got.overall == "needs-work"  # picked by the reviewer
