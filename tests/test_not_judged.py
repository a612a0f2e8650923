"""Fail-closed reporting (issue 25 B): a check that could not look is listed under
``not_judged`` and is never ``pass``; ``kws check``'s exit code 4; the text report's last
line; precision-regime not judged when its IR step fails; dropped-by-limit trials. The
engine runs here on a stand-in runner with checks that run no task code."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.conftest import write_task
from workstation.engine.check import REGISTRY, Check, NotJudged, Skip, register, status_of
from workstation.engine.context import CallOutcome
from workstation.engine.report import exit_code, to_json_dict, to_text
from workstation.engine.run import run_checks
from workstation.protocol.results import Raised
from workstation.protocol.steps import CallStep
from workstation.runner.server import DeviceInfo
from workstation.task.format import load_task


class _Partly(Check):
    """Judged one part (an info finding), could not judge another."""

    id = "test-partly"
    order = 990

    def run(self, ctx):
        ctx.could_not_judge("the IR step was killed at the step limit (30 s)")
        return [self.finding(ctx, "info", "the numerics part matched")]


class _PartlyWarn(Check):
    """Could not judge one part, and warns on another: status warn, still not judged."""

    id = "test-partly-warn"
    order = 991

    def run(self, ctx):
        ctx.could_not_judge("a tool is missing")
        return [self.finding(ctx, "warn", "something to look at")]


class _Unjudged(Check):
    """Could not look at all."""

    id = "test-unjudged"
    order = 992

    def run(self, ctx):
        raise NotJudged("needs a GPU")


class _Nothing(Check):
    """Nothing to look at (not a limit of the run)."""

    id = "test-nothing"
    order = 993

    def run(self, ctx):
        raise Skip("no bench")


class _Clean(Check):
    """Looked and found nothing."""

    id = "test-clean"
    order = 994

    def run(self, ctx):
        return []


_TEST_CHECKS = (_Partly, _PartlyWarn, _Unjudged, _Nothing, _Clean)


@pytest.fixture
def test_checks():
    for c in _TEST_CHECKS:
        register(c)
    yield
    for c in _TEST_CHECKS:
        REGISTRY.pop(c.id, None)


def _runner():
    device = DeviceInfo(kind="cpu", label="cpu (stand-in)", interpreter=True, versions={"torch": "x"}, sandbox="none")
    return SimpleNamespace(device=device, max_parallel=1)


def _report(tmp_path, only):
    task = load_task(write_task(tmp_path))
    return to_json_dict(run_checks(task, _runner(), only=only))


def test_status_of_never_passes_what_was_not_judged():
    assert status_of([]) == "pass"
    assert status_of([], not_judged="killed") == "skip"
    warn = [_PartlyWarn().finding(SimpleNamespace(repro=lambda *a: ""), "warn", "w")]
    assert status_of(warn, not_judged="killed") == "warn"


def test_a_partly_judged_check_is_listed_and_never_pass(tmp_path, test_checks):
    doc = _report(tmp_path, ["test-partly", "test-partly-warn", "test-unjudged", "test-nothing", "test-clean"])
    st = {c["check"]: (c["status"], c["reason"]) for c in doc["checks"]}
    assert st["test-partly"] == ("skip", "the IR step was killed at the step limit (30 s)")
    assert st["test-partly-warn"][0] == "warn"
    assert st["test-unjudged"] == ("skip", "needs a GPU")
    assert st["test-nothing"] == ("skip", "no bench")
    assert st["test-clean"] == ("pass", "")
    nj = {n["check"]: n["reason"] for n in doc["not_judged"]}
    assert nj == {"test-partly": "the IR step was killed at the step limit (30 s)",
                  "test-partly-warn": "a tool is missing", "test-unjudged": "needs a GPU"}
    # the observed findings of a partly judged check are kept
    assert [f["summary"] for f in doc["findings"] if f["check"] == "test-partly"] == ["the numerics part matched"]
    assert doc["complete"] is False
    assert exit_code(doc) == 4
    last = to_text(doc).splitlines()[-1]
    assert last.startswith("not a verdict: 3 checks could not look (")
    assert "test-partly: the IR step was killed" in last and "test-unjudged: needs a GPU" in last
    assert "test-nothing" not in last


def test_nothing_to_look_at_is_not_a_limit(tmp_path, test_checks):
    doc = _report(tmp_path, ["test-nothing", "test-clean"])
    assert doc["not_judged"] == [] and exit_code(doc) == 0
    assert not to_text(doc).splitlines()[-1].startswith("not a verdict")


def test_exit_codes_keep_their_order():
    base = {"findings": [], "checks": [{"check": "a", "status": "pass"}], "not_judged": []}
    assert exit_code(base) == 0
    assert exit_code({**base, "checks": [{"check": "a", "status": "error", "reason": "KeyError: x"}]}) == 4
    nj = {**base, "not_judged": [{"check": "a", "reason": "killed"}]}
    assert exit_code(nj) == 4
    assert exit_code({**nj, "runner_failed": True}) == 3
    assert exit_code({**nj, "findings": [{"severity": "fail"}]}) == 1
    # an error is named on the last line even by a report without not_judged (an older kws)
    doc = {"task": "t", "device": "cpu", "seeds": [0], "versions": {"kws": "0"}, "complete": False,
           "findings": [], "checks": [{"check": "a", "status": "error", "seconds": 0.1, "reason": "KeyError: x\ntb"}]}
    assert to_text(doc).splitlines()[-1] == "not a verdict: 1 check could not look (a: kws error: KeyError: x)"


def _ir_ctx():
    reasons: list[str] = []
    return SimpleNamespace(task=SimpleNamespace(backend="triton"), repro=lambda *a, **k: "", unjudged=reasons,
                           could_not_judge=reasons.append)


@pytest.mark.parametrize("box", [
    {"err": "RuntimeError: ptxas not found"},
    {"out": CallOutcome(spec=CallStep(role="candidate", case={"N": 8}, seed=0), step=None,
                        death="was killed at the step limit (30 s)", death_status="timeout")},
    {},
])
def test_precision_regime_is_not_judged_when_its_ir_step_fails(box):
    from workstation.checks.precision_regime import PrecisionRegime

    chk = PrecisionRegime()
    ctx = _ir_ctx()
    findings = chk._ir(ctx, None, [], box)
    assert [f.severity for f in findings] == ["info"]  # what it saw is kept as evidence
    assert ctx.unjudged and ctx.unjudged[0].startswith("the Triton IR was not examined")
    assert status_of(findings, not_judged="; ".join(ctx.unjudged)) == "skip"  # never pass


def test_precision_regime_other_backends_are_not_a_limit_of_the_run():
    from workstation.checks.precision_regime import PrecisionRegime

    chk = PrecisionRegime()
    ctx = _ir_ctx()
    ctx.task.backend = "torch"
    assert [f.severity for f in chk._ir(ctx, None, [], {})] == ["info"] and ctx.unjudged == []


def test_trials_dropped_at_a_limit_are_unjudged_and_contract_drops_are_not():
    from workstation.checks.support.trials import _classify

    t = SimpleNamespace(case={"N": 8}, seed=0)
    spec = CallStep(role="reference", case={"N": 8}, seed=0)
    died = CallOutcome(spec=spec, step=None, death="died from SIGKILL", death_status="signal")
    assert _classify(None, t, died, None, False).unjudged
    raised = CallOutcome(spec=spec, step=SimpleNamespace(ok=False, error=Raised(phase="call", type="ValueError",
                                                                                message="N too small")))
    r = _classify(None, t, raised, None, False)
    assert r.status == "dropped" and not r.unjudged


def test_screen_merges_not_judged_and_marks_the_task(tmp_path):
    """A screened task whose checks could not look is 'not-judged', never clean: the merged
    report lists them (with timing checks a run never reached), the queue cell says N/J."""
    from workstation.screen.run import merge_reports
    from workstation.screen.summary import PrescreenBadge
    from workstation.tui.widgets.queue_table import _screen_cells

    tp = SimpleNamespace(checks=["correctness", "precision-regime", "speedup-claim"], timing_not_run="",
                         outcomes={"main": SimpleNamespace(status="ok"),
                                   "timing": SimpleNamespace(status="timeout", message="timeout after 600 s")})
    main = {"task": "t", "checks": [{"check": "correctness", "status": "pass"},
                                    {"check": "precision-regime", "status": "skip", "reason": "IR killed"}],
            "findings": [], "not_judged": [{"check": "precision-regime", "reason": "IR killed"}], "seconds": 1.0}
    merged = merge_reports(tp, [main])
    assert [n["check"] for n in merged["not_judged"]] == ["precision-regime", "speedup-claim"]
    assert merged["complete"] is False and exit_code(merged) == 4
    badge = PrescreenBadge(worst="not-judged", not_judged=("precision-regime", "speedup-claim"))
    cells = _screen_cells(badge)
    assert cells["screen"] == "N/J" and cells["failing"] == "nj:precision-regime,speedup-claim"


def test_a_device_stand_in_limit_is_not_judged_and_its_calls_reach_the_report(tmp_path):
    """A role whose code needs more of a GPU than kws's CPU device stand-in gives (harness
    ``device_standin_limit``: a tensor on ``cuda``, a launching driver call) is not judged,
    and later jobs of that role are refused with the reason; the probes each step reports
    become the report's ``device_standin`` key (target, its figures, calls per probe and
    the roles that made them)."""
    from workstation.engine.context import CheckContext
    from workstation.engine.payloads import take_notes
    from workstation.protocol.extras.calls import CallExtra
    from workstation.protocol.results import DeviceStandinLimit, Raised, StandinCalls
    from workstation.protocol.wire import StepResult

    ctx = CheckContext(load_task(write_task(tmp_path)), runner=None)
    step = CallStep(role="candidate", case={"N": 8, "dtype": "float32"}, seed=0)
    limit = ("the code asked for a CUDA device (AssertionError: Torch not compiled with CUDA enabled); kws's CPU "
             "stand-in answers device queries but cannot place tensors, streams or events on a GPU")
    err = Raised(type="AssertionError", message="Torch not compiled with CUDA enabled", phase="import",
                 origin="task", causes=[DeviceStandinLimit(why=limit)])
    failed = StepResult(index=0, ok=False, error=err, outputs=[], extra=CallExtra(), arrays={}, seconds=0.0)
    with pytest.raises(NotJudged, match="beyond what kws's CPU device stand-in answers"):
        ctx._task_problem([CallOutcome(spec=step, step=failed)])
    assert "stand-in" in (ctx.refused("candidate") or "")

    note = StandinCalls(target="H200", calls={"torch.cuda.get_device_name": 2,
                                              "triton.runtime.driver.active.get_current_target": 1})
    ok = StepResult(index=0, ok=True, error=None, outputs=[], extra=CallExtra(), arrays={}, seconds=0.0, notes=[note])
    take_notes(ctx, [step], [ok])
    take_notes(ctx, [CallStep(role="reference", case={"N": 8, "dtype": "float32"})], [ok])
    st = ctx.extensions["device_standin"]
    assert st["target"] == "H200" and st["answers"]["name"] == "NVIDIA H200"
    assert st["called"]["torch.cuda.get_device_name"] == {"calls": 4, "by": ["candidate", "reference"]}
    text = to_text({"task": "t", "device": "cpu", "seeds": [0], "versions": {}, "findings": [], "checks": [],
                    "complete": True, "device_standin": st})
    assert "device stand-in: answered as H200 (NVIDIA H200): torch.cuda.get_device_name x4" in text
