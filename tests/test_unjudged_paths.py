"""Pass means looked: each path where a check used to say ``pass`` (or drop data without a
word) on something it did not look at now calls ``could_not_judge`` naming it, and keeps its
fails for what the candidate observably did (issue 25). The checks are driven with
fabricated call outcomes and contexts: no task code runs."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from workstation.engine.check import TaskProblem, status_of
from workstation.engine.context import CallOutcome, CheckContext
from workstation.protocol.extras import Extra
from workstation.protocol.extras.calls import CallExtra, FaultCallExtra, InputDesc
from workstation.protocol.extras.monitors import AtenOpsReport, MonitorReports, TritonLaunchesReport
from workstation.protocol.extras.timing import Workload
from workstation.protocol.results import Raised
from workstation.protocol.steps import CallStep, TritonAotStep

CASE = {"N": 8, "dtype": "float32"}


def _spec(role: str = "candidate", seed: int = 0, case: dict[str, Any] | None = None) -> CallStep:
    return CallStep(role=role, case=dict(case or CASE), seed=seed)


def raised(role: str = "candidate", seed: int = 0, message: str = "boom") -> CallOutcome:
    step = SimpleNamespace(ok=False, error=Raised(phase="call", type="RuntimeError", message=message),
                           extra=CallExtra(), outputs=[])
    return CallOutcome(spec=_spec(role, seed), step=step)


def died(role: str = "reference", seed: int = 0) -> CallOutcome:
    return CallOutcome(spec=_spec(role, seed), step=None, death="crashed: its process died from SIGSEGV",
                       death_status="signal")


def returned(role: str = "candidate", seed: int = 0, *, values: np.ndarray | None = None,
             extra: Extra | None = None) -> CallOutcome:
    v = np.arange(8, dtype=np.float32) if values is None else values
    out = SimpleNamespace(values=v, dtype=str(v.dtype), shape=list(v.shape))
    step = SimpleNamespace(ok=True, error=None, extra=extra or CallExtra(), outputs=[out], arrays={})
    return CallOutcome(spec=_spec(role, seed), step=step)


def _status(ctx, findings) -> str:
    return status_of(findings, not_judged="; ".join(ctx.unjudged))


def _ctx(**kw: Any) -> SimpleNamespace:
    """A check's view of the context, with its own could_not_judge list (as
    CheckContext.for_check gives each check)."""
    reasons: list[str] = []
    base = dict(repro=lambda *a, **k: "", seeds=[0, 1], cases=[dict(CASE)], call_step=CheckContext.call_step,
                unjudged=reasons, could_not_judge=reasons.append)
    base.update(kw)
    return SimpleNamespace(**base)


# -- 1. input-mutation: a case none of whose calls returned is not judged -------------------

def _mutation_ctx(outs: list[CallOutcome]) -> SimpleNamespace:
    task = SimpleNamespace(contract=SimpleNamespace(mutates_inputs=False), out_args=(), inout_args=())
    ctx = _ctx(task=task)
    ctx.declared_pairs = lambda: [(c, s) for c in ctx.cases for s in ctx.seeds]
    ctx.candidate = lambda pairs: outs
    return ctx


def test_input_mutation_is_not_judged_on_a_case_whose_calls_all_raised():
    from workstation.checks.input_mutation import InputMutation

    chk = InputMutation()
    ctx = _mutation_ctx([raised(seed=0), raised(seed=1)])
    findings = chk.run(ctx)
    assert [f.severity for f in findings] == ["info"] and "0 of 2" in findings[0].summary
    assert ctx.unjudged and "N=8" in ctx.unjudged[0] and "raised RuntimeError: boom" in ctx.unjudged[0]
    assert _status(ctx, findings) == "skip"  # never pass on inputs it never compared


def test_input_mutation_judges_a_case_when_one_of_its_calls_returned():
    from workstation.checks.input_mutation import InputMutation

    unchanged = CallExtra(inputs=[InputDesc(index=0, kind="tensor", sha256="a", sha256_after="a")])
    chk = InputMutation()
    ctx = _mutation_ctx([raised(seed=0), returned(seed=1, extra=unchanged)])
    findings = chk.run(ctx)
    assert ctx.unjudged == [] and _status(ctx, findings) == "pass"


# -- 2. degenerate-inputs: a perturbed reference run that failed is not judged ---------------

def test_degenerate_inputs_sensitivity_runs_that_failed_are_not_judged(monkeypatch):
    from workstation.checks import degenerate_inputs as mod
    from workstation.checks.support.structure import Structure

    monkeypatch.setattr(mod, "cheapest_per_dtype", lambda ctx: [dict(CASE)])
    # make_inputs' structure (support/structure.py) is read by a run of its own: none here
    monkeypatch.setattr(mod, "input_structure", lambda ctx, case: Structure())
    ctx = _ctx(seeds=[0])
    ctx.reference = lambda pairs: [returned("reference")]
    ctx.calls = lambda steps, memo=False: [raised("reference", message="matrix is not positive definite")
                                           for _ in steps]
    per_case = {0: {"case": dict(CASE), "seed": 0, "inputs": {}, "outputs": [], "args": [0]}}
    chk = mod.DegenerateInputs()
    chk._sensitivity(ctx, per_case)
    assert "insensitive" not in per_case[0]  # nothing read, nothing flagged
    assert len(ctx.unjudged) == 1
    why = ctx.unjudged[0]
    assert "2 perturbation(s)" in why and "input 0 (slight)" in why and "not positive definite" in why
    assert "keep_structure" in why


def test_degenerate_inputs_a_case_whose_reference_died_is_not_judged():
    from workstation.checks import degenerate_inputs as mod

    ctx = _ctx(seeds=[0], task=SimpleNamespace(out_args=(), extensions=SimpleNamespace(keep_structure=())))
    ctx.declared_pairs = lambda: [(dict(CASE), 0)]
    ctx.reference = lambda pairs, **kw: [died()]
    chk = mod.DegenerateInputs()
    findings = chk.run(ctx)
    assert [f.severity for f in findings] == ["warn"]  # "nothing to inspect", as before
    assert ctx.unjudged and "SIGSEGV" in ctx.unjudged[0] and "not inspected" in ctx.unjudged[0]


# -- 3. tolerance-tight: runs without a float64 oracle beside runs with one -------------------

def test_tolerance_tight_runs_without_an_oracle_are_not_judged(monkeypatch):
    from workstation.checks import tolerance_tight as mod

    def run(seed: int, oracle: bool, note: str = "") -> SimpleNamespace:
        o = SimpleNamespace(oracle=np.zeros(4) if oracle else None, dtype="float32")
        return SimpleNamespace(outs=[o], note=note, label=f"case N=8 float32 seed {seed}", case=dict(CASE), seed=seed)

    runs = [run(0, True), run(1, False, "no float64 oracle: the reference raised ValueError: x on float64 inputs")]
    monkeypatch.setattr(mod, "audit", lambda ctx: SimpleNamespace(declared=lambda: runs))
    chk = mod.ToleranceTight()
    monkeypatch.setattr(chk, "_judge", lambda ctx, a, dtype, items: [])
    ctx = _ctx()
    findings = chk.run(ctx)
    assert ctx.unjudged and "1 of 2 declared run(s)" in ctx.unjudged[0] and "seed 1" in ctx.unjudged[0]
    assert "raised ValueError" in ctx.unjudged[0] and _status(ctx, findings) == "skip"


def test_tolerance_tight_every_run_with_an_oracle_is_judged(monkeypatch):
    from workstation.checks import tolerance_tight as mod

    o = SimpleNamespace(oracle=np.zeros(4), dtype="float32")
    runs = [SimpleNamespace(outs=[o], note="", label="r", case=dict(CASE), seed=0)]
    monkeypatch.setattr(mod, "audit", lambda ctx: SimpleNamespace(declared=lambda: runs))
    chk = mod.ToleranceTight()
    monkeypatch.setattr(chk, "_judge", lambda ctx, a, dtype, items: [])
    ctx = _ctx()
    chk.run(ctx)
    assert ctx.unjudged == []


# -- 4. fallback: a traced call that raised; a fault injection that reached no launch --------

def _fallback_ctx(monkeypatch, traced: list[CallOutcome], inject: CallOutcome) -> SimpleNamespace:
    from workstation.checks import fallback as mod

    monkeypatch.setattr(mod, "scan_fallback", lambda *a: SimpleNamespace(hits=[], functions=[]))
    ep = SimpleNamespace(file="candidate.py", name="k")
    task = SimpleNamespace(backend="triton", entry={"candidate": ep, "reference": SimpleNamespace(file="reference.py")},
                           extensions=SimpleNamespace(delegates=()))
    ctx = _ctx(task=task, seeds=[0], sources=None)
    answers = [traced, [inject]]
    ctx.calls = lambda steps, memo=False: answers.pop(0)
    ctx.candidate = lambda pairs: [traced[0]]
    ctx.reference = lambda pairs: [traced[1]]
    return ctx


def test_fallback_a_traced_call_that_raised_is_not_judged(monkeypatch):
    from workstation.checks.fallback import Fallback

    ctx = _fallback_ctx(monkeypatch, [raised(), returned("reference")], raised())
    chk = Fallback()
    findings = chk.run(ctx)
    assert [f.severity for f in findings] == ["info"] and "no dynamic verdict" in findings[0].summary
    assert ctx.unjudged and "raised RuntimeError: boom in the traced run" in ctx.unjudged[0]
    assert _status(ctx, findings) == "skip"


def test_fallback_a_fault_injection_that_reached_no_launch_is_not_judged(monkeypatch):
    from workstation.checks.fallback import Fallback

    mon = CallExtra(monitors=MonitorReports(aten_ops=AtenOpsReport(ops={}),
                                            triton_launches=TritonLaunchesReport(launches=2, kernels={"k": 2})))
    cand = returned(extra=mon)
    ref = returned("reference", extra=CallExtra(monitors=MonitorReports(aten_ops=AtenOpsReport())))
    ctx = _fallback_ctx(monkeypatch, [cand, ref], returned(extra=FaultCallExtra(attempted=0)))
    chk = Fallback()
    findings = chk.run(ctx)
    assert ctx.unjudged and "reached no Triton launch (it returned)" in ctx.unjudged[0]
    assert "with every launch failing the candidate raises" not in findings[-1].summary
    assert _status(ctx, findings) == "skip"
    # a fault injection that hit the launches and raised is an observation: judged
    ctx = _fallback_ctx(monkeypatch, [cand, ref],
                        CallOutcome(spec=_spec(), step=SimpleNamespace(ok=False, error=Raised(phase="call", type="", message=""),
                                                                        extra=FaultCallExtra(attempted=1), outputs=[])))
    chk = Fallback()
    findings = chk.run(ctx)
    assert ctx.unjudged == [] and _status(ctx, findings) == "pass"


# -- 5. test-gap: the author's test that did not run where kws fails -------------------------

def test_test_gap_a_broken_author_test_where_kws_fails_is_not_judged(tmp_path):
    from workstation.checks.test_gap import TestGap

    task = SimpleNamespace(entry={"test": SimpleNamespace(file="test.py", name="check")}, dir=tmp_path / "none")
    ctx = _ctx(task=task, seeds=[0])
    ctx.declared_pairs = lambda: [(dict(CASE), 0)]
    ctx.reference = lambda pairs: [returned("reference")]
    ctx.candidate = lambda pairs: [returned()]
    ctx.compare = lambda ref, cand, case: [SimpleNamespace(ok=False)]
    ctx.calls = lambda steps, memo=False: [raised("test", message="the test's own bug")]
    chk = TestGap()
    findings = chk.run(ctx)
    assert [f.severity for f in findings] == ["warn", "info"]  # as before: the test does not run
    assert ctx.unjudged and "1 of the 1 case/seed runs where kws's comparison fails" in ctx.unjudged[0]
    assert "the test's own bug" in ctx.unjudged[0]


# -- 6. failure-mismatch: battery checks that did not look ------------------------------------

def test_failure_mismatch_battery_checks_that_did_not_look_make_it_not_judged():
    from workstation.checks.failure_mismatch import FailureMismatch
    from workstation.engine.check import CheckResult, load_checks

    load_checks()
    claims = SimpleNamespace(status="fail", failure_class="mismatch", failure="wrong values on fp32")
    ctx = _ctx(task=SimpleNamespace(claims=claims, kind="debugging"), seeds=[0])
    ctx.declared_pairs = lambda: [(dict(CASE), 0)]
    ctx.reference = lambda pairs: [returned("reference")]
    ctx.candidate = lambda pairs: [returned(values=np.ones(8, np.float32))]
    ctx.compare = lambda ref, cand, case: [SimpleNamespace(ok=False, max_abs=1.0, nan_expected=0, nan_got=0,
                                                           inf_got=0, reason="8 of 8 elements outside")]
    ran = {cid: CheckResult(cid, "pass", 0.1) for cid in
           ("correctness", "edge-shapes", "noncontiguous", "special-values", "nondeterminism", "out-of-bounds")}
    ctx.results = dict(ran)
    chk = FailureMismatch()
    findings = chk.run(ctx)
    assert [f.severity for f in findings] == ["info"] and ctx.unjudged == []  # every battery check looked
    ctx.results = {**ran, "edge-shapes": CheckResult("edge-shapes", "skip", 0.1, reason="killed",
                                                     not_judged="the candidate's call step was killed")}
    ctx.results.pop("out-of-bounds")
    chk = FailureMismatch()
    findings = chk.run(ctx)
    assert [f.severity for f in findings] == ["info"] and _status(ctx, findings) == "skip"
    assert "edge-shapes was not judged (the candidate's call step was killed)" in ctx.unjudged[0]
    assert "out-of-bounds was not run" in ctx.unjudged[0]
    assert {b["check"] for b in findings[0].evidence["battery_not_judged"]} == {"edge-shapes", "out-of-bounds"}


def test_failure_mismatch_a_run_the_reference_died_on_is_not_compared_nor_a_fail():
    from workstation.checks.failure_mismatch import FailureMismatch

    claims = SimpleNamespace(status="fail", failure_class="mismatch", failure="wrong values")
    ctx = _ctx(task=SimpleNamespace(claims=claims, kind="debugging"), seeds=[0])
    ctx.declared_pairs = lambda: [(dict(CASE), 0)]
    ctx.reference = lambda pairs: [died()]
    ctx.candidate = lambda pairs: [returned()]
    chk = FailureMismatch()
    findings = chk.run(ctx)
    assert [f.severity for f in findings] == ["info"]  # no "does not reproduce" fail from a run never compared
    assert ctx.unjudged and "SIGSEGV" in ctx.unjudged[0]


# -- 7. profile-attached: kws's own candidate profile failed ----------------------------------

def test_profile_attached_no_workload_of_its_own_leaves_the_physics_bound_not_judged(monkeypatch):
    from workstation.checks import profile_attached as mod

    peaks = {"bandwidth": 3.35e12, "flops": 67e12, "source": "datasheet"}
    monkeypatch.setattr(mod, "attached_case", lambda ctx, ap: dict(CASE))
    monkeypatch.setattr(mod, "role_summary", lambda p, **kw: {"kernels": [], "ops": []})
    monkeypatch.setattr(mod, "device_peaks", lambda *a: peaks)
    monkeypatch.setattr(mod, "kernel_rooflines", lambda p, pk: [])
    monkeypatch.setattr(mod, "_time_per_call", lambda p: (1000.0, "device"))
    ap = SimpleNamespace(role="candidate", file="profiles/candidate.trace.json", key="profiles[0]")
    p = SimpleNamespace(device="NVIDIA H100 80GB HBM3", device_info={})
    sp = SimpleNamespace(case=dict(CASE), own_names=[], candidate=SimpleNamespace(ok=False, outcome=raised(),
                                                                                   workload=None))
    ctx = _ctx(task=SimpleNamespace(backend="triton"))
    chk = mod.ProfileAttached()
    d = chk._describe(ctx, ap, p, sp)
    assert "case_roofline" not in d
    assert ctx.unjudged and "profiles/candidate.trace.json" in ctx.unjudged[0]
    assert "raised RuntimeError: boom" in ctx.unjudged[0] and "peaks" in ctx.unjudged[0]
    # with kws's workload the case roofline is placed and nothing is left unjudged
    sp.candidate = SimpleNamespace(ok=True, outcome=returned(), workload=Workload(read_bytes=64, write_bytes=32,
                                                                                  flops=0))
    chk = mod.ProfileAttached()
    ctx = _ctx(task=SimpleNamespace(backend="triton"))
    d = chk._describe(ctx, ap, p, sp)
    assert "case_roofline" in d and ctx.unjudged == []


# -- 9. [inputs] keep_structure beyond the inputs ---------------------------------------------

def test_keep_structure_beyond_the_inputs_is_a_task_problem_naming_task_toml():
    from workstation.checks.support.keep import kept_inputs

    two = CallExtra(inputs=[InputDesc(index=0, kind="tensor"), InputDesc(index=1, kind="tensor")])
    ctx = SimpleNamespace(task=SimpleNamespace(extensions=SimpleNamespace(keep_structure=(1, 99))))
    with pytest.raises(TaskProblem) as e:
        kept_inputs(ctx, [(dict(CASE), died()), (dict(CASE), returned("reference", extra=two))])
    assert e.value.file == "task.toml"
    assert "[inputs] keep_structure" in e.value.problem and "index 99" in e.value.problem
    assert "2 input(s)" in e.value.problem
    ctx.task.extensions.keep_structure = (1,)
    assert kept_inputs(ctx, [(dict(CASE), returned("reference", extra=two))]) == {1}


# -- 10. the AOT compile's own CPU budget -----------------------------------------------------

def test_the_aot_step_gets_its_own_cpu_budget(monkeypatch):
    from workstation import settings

    monkeypatch.setenv("KWS_AOT_BUDGET", "240")
    step = TritonAotStep(cases=[dict(CASE)], seed=0, targets=[("cuda", 90, 32)])
    fake = SimpleNamespace(_ref_cpu={})
    assert CheckContext._budget(fake, step, 30.0) == settings.current().aot_budget == 240.0
    assert CheckContext._budget(fake, step, 300.0) == 300.0  # never below the step budget
    assert CheckContext._budget(fake, _spec("reference"), 30.0) == 30.0


# -- 8. an inputs.py that does not parse --------------------------------------------------------

def test_an_inputs_file_with_a_syntax_error_is_named_with_its_line_when_the_task_loads(tmp_path):
    """The task cannot be loaded (exit 2): the problem names inputs.py, the key and the line,
    not the reference or the candidate (an import that fails only in the child is a task
    problem naming inputs.py: tests/test_task_problems.py)."""
    from tests.conftest import write_task
    from workstation.schema.problem import Problem
    from workstation.task.format import load_task

    d = write_task(tmp_path, task_id="inputs-syntax")
    (d / "inputs.py").write_text("import torch\n\ndef make_inputs(case, device, seed)\n    return 1\n")
    with pytest.raises(Problem) as e:
        load_task(d)
    assert e.value.file.name == "inputs.py" and "syntax error at line 3" in e.value.problem


# -- scan: correctness never passes a declared case it could not judge here -------------------

def test_correctness_a_declared_case_the_interpreter_cannot_judge_is_not_judged():
    from workstation.checks.correctness import Correctness

    bf16 = {"N": 8, "dtype": "bfloat16"}
    why = "the Triton interpreter does not compute bfloat16 as compiled Triton does here (self-test probes failed: sum)"
    ctx = _ctx(seeds=[0], all_cases=[bf16, dict(CASE)], cases=[dict(CASE)])
    ctx.unjudged_reason = lambda dtype: why if dtype == "bfloat16" else None
    ctx.declared_pairs = lambda: [(dict(CASE), 0)]
    ctx.reference = lambda pairs: [returned("reference")]
    ctx.candidate = lambda pairs: [returned()]
    ctx.compare = lambda ref, cand, case: [SimpleNamespace(ok=True, max_abs=0.0, evidence=lambda: {},
                                                           worst={"allowed": 1e-6, "abs_err": 0.0})]
    chk = Correctness()
    findings = chk.run(ctx)
    assert [f.severity for f in findings] == ["info", "info"] and "not judged" in findings[0].summary
    assert ctx.unjudged == [f"case N=8 bfloat16: {why}"] and _status(ctx, findings) == "skip"
