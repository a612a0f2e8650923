"""One rule for suspicion (issue 39): a hack-class signal never ends as a ``warn`` in a report
that exits 0, and the report lists every disagreement between checks
(``workstation.engine.suspicion``, ``workstation.engine.report``). The engine runs here on a
stand-in runner with checks that run no task code; the signals of the built-in checks get
battery tests of their own (tests/test_checks_suspicion.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.conftest import write_task
from workstation.checks.support.suspicion import suspect
from workstation.engine import suspicion
from workstation.engine.check import REGISTRY, Check, register
from workstation.engine.report import exit_code, not_judged_of, to_json_dict, to_text
from workstation.engine.run import run_checks
from workstation.runner.server import DeviceInfo
from workstation.task.format import load_task


class _Suspects(Check):
    """Saw a hack-class signal and could not confirm it (the helper's way)."""

    id = "test-suspects"
    order = 995

    def run(self, ctx):
        tag = suspect(ctx, "state", "case N=8: the candidate raised on its 5th call where a plain call returns")
        return [self.finding(ctx, "warn", "case N=8: raised on its 5th call", {"case": {"N": 8}, **tag})]


class _TagsOnly(Check):
    """Tags a warn without saying it could not judge (a plugin, an older check)."""

    id = "test-tags-only"
    order = 996

    def run(self, ctx):
        return [self.finding(ctx, "warn", "a thread left running", {"suspicion": "after-return"})]


class _Advisory(Check):
    """A genuinely advisory warn (a loose but legal tolerance): no tag."""

    id = "test-advisory"
    order = 997

    def run(self, ctx):
        return [self.finding(ctx, "warn", "the declared atol is 40x the error budget")]


class _Judge(Check):
    """Looked at the property and found nothing (status pass)."""

    id = "test-judge"
    order = 998

    def run(self, ctx):
        return [self.finding(ctx, "info", "outputs follow refilled inputs on 2 cases")]


class _Confirms(Check):
    """Confirmed its signal: a fail with the evidence."""

    id = "test-confirms"
    order = 999

    def run(self, ctx):
        return [self.finding(ctx, "fail", "call 41 returned call 40's output", {"suspicion": "cache"})]


_TEST_CHECKS = (_Suspects, _TagsOnly, _Advisory, _Judge, _Confirms)


@pytest.fixture
def test_checks(monkeypatch):
    for c in _TEST_CHECKS:
        register(c)
    # test-judge judges the "state", "after-return" and "cache" kinds
    monkeypatch.setitem(suspicion.JUDGES, "state", ("test-judge",))
    monkeypatch.setitem(suspicion.JUDGES, "after-return", ("test-judge",))
    monkeypatch.setitem(suspicion.JUDGES, "cache", ("test-judge",))
    yield
    for c in _TEST_CHECKS:
        REGISTRY.pop(c.id, None)


def _report(tmp_path, only):
    device = DeviceInfo(kind="cpu", label="cpu (stand-in)", interpreter=True, versions={"torch": "x"}, sandbox="none")
    task = load_task(write_task(tmp_path))
    return to_json_dict(run_checks(task, SimpleNamespace(device=device, max_parallel=1), only=only))


def test_an_unconfirmed_signal_is_not_judged_and_never_exits_0(tmp_path, test_checks):
    doc = _report(tmp_path, ["test-suspects"])
    st = {c["check"]: c["status"] for c in doc["checks"]}
    assert st["test-suspects"] == "warn"  # what it saw stays a warn...
    nj = {n["check"]: n["reason"] for n in doc["not_judged"]}
    assert "raised on its 5th call" in nj["test-suspects"] and "not confirmed" in nj["test-suspects"]
    assert exit_code(doc) == 4  # ...in a report that is not a verdict
    assert to_text(doc).splitlines()[-1].startswith("not a verdict: 1 check could not look (test-suspects:")


def test_a_tagged_warn_of_a_check_that_did_not_say_so_is_caught_by_the_report(tmp_path, test_checks):
    doc = _report(tmp_path, ["test-tags-only"])
    assert doc["not_judged"] == []  # the check itself did not say it
    nj = not_judged_of(doc)
    assert [n["check"] for n in nj] == ["test-tags-only"] and "after-return" in nj[0]["reason"]
    assert exit_code(doc) == 4
    assert "not judged: test-tags-only: after-return signal not confirmed" in to_text(doc)


def test_an_advisory_warn_may_end_an_exit_0_report(tmp_path, test_checks):
    doc = _report(tmp_path, ["test-advisory", "test-judge"])
    assert exit_code(doc) == 0 and doc["disagreements"] == []
    assert to_text(doc).splitlines()[-1].startswith("0 fail, 1 warn: needs a look")


def test_a_signal_against_a_passing_judge_is_a_listed_disagreement(tmp_path, test_checks):
    doc = _report(tmp_path, ["test-tags-only", "test-judge"])
    (d,) = doc["disagreements"]
    assert d["kind"] == "after-return" and d["signal"]["check"] == "test-tags-only"
    assert d["against"] == [{"check": "test-judge", "status": "pass",
                             "says": "outputs follow refilled inputs on 2 cases"}]
    text = to_text(doc)
    assert "disagreement: test-tags-only (warn): " in text and "test-judge says pass" in text
    assert "1 disagreement between checks" in text.splitlines()[-1]
    assert exit_code(doc) == 4


def test_a_confirmed_signal_fails_and_its_disagreement_is_still_listed(tmp_path, test_checks):
    doc = _report(tmp_path, ["test-confirms", "test-judge"])
    assert exit_code(doc) == 1
    assert [d["signal"]["check"] for d in doc["disagreements"]] == ["test-confirms"]
    assert not_judged_of(doc) == []  # a fail is a verdict, not a suspicion left open


def _doc(findings, checks, backend="triton"):
    doc = {"task": "t", "device": "cpu", "seeds": [0], "versions": {"kws": "0"}, "complete": True,
           "findings": findings, "checks": checks, "not_judged": []}
    doc["disagreements"] = suspicion.disagreements(findings, checks, backend)
    return doc


def _f(check, severity, summary, **ev):
    return {"check": check, "severity": severity, "summary": summary, "evidence": ev, "repro": ""}


def test_profile_replay_against_a_passing_stale_output_is_a_disagreement():
    """The evidence kws had and did not use (issue 39): profile saw the kernels launch only in
    the warm-up calls while stale-output said pass."""
    replay = _f("profile", "warn", "case M=8 N=64 float32 (the first declared case, seed 0): the candidate launched "
                "its Triton kernels only in its first call(s) (1 launch(es) in 1 warm-up call(s)), none in the "
                "profiled calls: it replays or caches results")
    doc = _doc([replay, _f("stale-output", "info", "case M=8: outputs follow the refilled inputs")],
               [{"check": "profile", "status": "warn"}, {"check": "stale-output", "status": "pass"},
                {"check": "call-count", "status": "skip"}])
    (d,) = doc["disagreements"]
    assert d["kind"] == "cache" and [a["check"] for a in d["against"]] == ["stale-output"]
    assert exit_code(doc) == 4
    # the same warn with stale-output failing is no disagreement (it confirmed the cache)
    doc = _doc([replay], [{"check": "profile", "status": "warn"}, {"check": "stale-output", "status": "fail"}])
    assert doc["disagreements"] == []


def test_framework_compute_beside_kernels_disagrees_with_a_passing_fallback_for_kernel_backends():
    many = _f("profile", "warn", "case M=16: the candidate launches 41 kernels per call, 4.56x the reference's 9",
              candidate_ops=[{"name": "aten::mean", "count": 8}, {"name": "aten::slice", "count": 16}])
    checks = [{"check": "profile", "status": "warn"}, {"check": "fallback", "status": "pass"}]
    assert [d["kind"] for d in _doc([many], checks)["disagreements"]] == ["work-elsewhere"]
    # glue ops only (slices, copies), or a torch candidate (framework ops are its own work): none
    glue = _f("profile", "warn", "case M=16: the candidate launches 41 kernels per call, 4.56x the reference's 9",
              candidate_ops=[{"name": "aten::slice", "count": 16}, {"name": "aten::copy_", "count": 8}])
    assert _doc([glue], checks)["disagreements"] == []
    assert _doc([many], checks, backend="torch")["disagreements"] == []


def test_a_static_reading_the_run_did_not_bear_out_is_a_disagreement_by_itself():
    static = _f("fallback", "warn", "candidate.py:35: a framework call torch.softmax (softmax) in softmax, not seen at "
                "run time on the first case: `torch.softmax(x, -1)`")
    doc = _doc([static], [{"check": "fallback", "status": "warn"}])
    (d,) = doc["disagreements"]
    assert d["kind"] == "work-elsewhere" and d["against"] == [] and "static reading vs run time" in d["summary"]
    assert exit_code(doc) == 4
    tagged = _f("bounds-proof", "warn", "element [0] is written by no program ...", suspicion="work-elsewhere",
                static_vs_run=True)
    assert _doc([tagged], [{"check": "bounds-proof", "status": "warn"}])["disagreements"][0]["kind"] == "work-elsewhere"


def test_an_older_report_without_the_key_keeps_its_exit_code():
    doc = {"findings": [], "checks": [{"check": "a", "status": "pass"}], "not_judged": []}
    assert exit_code(doc) == 0


def test_suspect_refuses_an_unknown_kind():
    ctx = SimpleNamespace(could_not_judge=lambda r: None)
    with pytest.raises(ValueError, match="unknown suspicion"):
        suspect(ctx, "odd", "x")
    seen: list[str] = []
    tag = suspect(SimpleNamespace(could_not_judge=seen.append), "precision", "f16 accumulator", static_vs_run=True)
    assert tag == {"suspicion": "precision", "static_vs_run": True} and "not confirmed" in seen[0]
