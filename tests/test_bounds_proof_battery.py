"""``bounds-proof`` on sample tasks (battery: the launches are recorded under the Triton
interpreter, counterexamples run in the guarded run): a rounded-up store extent refuted
with a counterexample the run confirms, a clean element-wise kernel proved, a reduction
loop that drops the tail tile refuted by read coverage and confirmed by a mismatch."""

from __future__ import annotations

from tests.conftest import REPO
from tests.hostile import findings, result
from workstation.engine.run import run_checks
from workstation.task.format import load_task

TASKS = REPO / "sample_queue" / "tasks"


def test_rounded_up_store_is_refuted_and_the_guarded_run_confirms(runner):
    res = run_checks(load_task(TASKS / "copy-cast-oob"), runner, only=["bounds-proof"], seeds=[0])
    (fail,) = findings(res, "bounds-proof", "fail")
    ev = fail.evidence
    assert ev["question"] == "in-bounds" and ev["access"] == "store y_ptr"
    n = ev["counterexample"]["params"]["n"]
    assert n % 8 != 0  # the defect: the store extent rounds n up to whole 8-element vectors
    assert ev["counterexample"]["offset"] >= n
    assert "guard element(s) written after" in ev["confirmation"][0]
    (proved,) = findings(res, "bounds-proof", "info")
    assert proved.evidence["launch_model"][0]["ints"]["n_store"] == "cdiv(n, 8)*8"
    assert {(p["question"], p["access"]) for p in proved.evidence["proved"]} == {
        ("in-bounds", "load x_ptr"), ("coverage", "output 0 through y_ptr"), ("read-coverage", "input x_ptr")}


def test_clean_elementwise_kernel_is_proved_over_its_params(runner):
    res = run_checks(load_task(TASKS / "bias-gelu-fusion"), runner, only=["bounds-proof"], seeds=[0])
    r = result(res, "bounds-proof")
    assert r.status == "pass", [f.summary for f in r.findings]
    (info,) = findings(res, "bounds-proof", "info")
    assert not any(f.severity in ("fail", "warn") for f in r.findings)
    qs = [p["question"] for p in info.evidence["proved"]]
    assert qs.count("in-bounds") == info.evidence["accesses"] and "coverage" in qs


def test_dropped_tail_tile_is_an_unread_input_the_reference_confirms(runner):
    res = run_checks(load_task(TASKS / "rowsum-edge"), runner, only=["bounds-proof"], seeds=[0])
    (fail,) = findings(res, "bounds-proof", "fail")
    ev = fail.evidence
    assert ev["question"] == "read-coverage" and ev["argument"] == "x_ptr"
    k = ev["counterexample"]["params"]["K"]
    assert k % 128 != 0  # the loop runs K // 128 tiles: a ragged tail is never read
    assert ev["counterexample"]["element"][1] >= k // 128 * 128
    assert "outside" in ev["confirmation"][0]
