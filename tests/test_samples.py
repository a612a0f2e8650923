"""Every sample task gets its expected outcome from the full battery.

The expectations live in ``tests/sample_expectations.d/<task-id>.toml`` (never in the
queue, so the review screen cannot show them): ``fail`` lists the checks that must report
a ``fail`` finding, ``not_fail`` checks that must not, and a clean task (``clean = true``)
must get no ``fail`` at all. ``needs_jax`` lists checks whose expectation needs JAX (the
``kws[pallas]`` extra: a Pallas candidate or source): where the fork server reports no JAX
they must be ``skip`` with the install hint instead.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from tests.conftest import SAMPLE_QUEUE
from tests.prefetch import prefetching
from tests.timingkit import QUIET_MS, inject_quiet_timings
from workstation.engine.report import to_json_dict
from workstation.engine.run import run_checks
from workstation.task.format import load_task

EXPECT_DIR = Path(__file__).parent / "sample_expectations.d"
EXPECTATIONS = {p.stem: tomllib.loads(p.read_text()) for p in sorted(EXPECT_DIR.glob("*.toml"))}


def test_every_sample_task_has_expectations_and_vice_versa():
    tasks = {p.name for p in (SAMPLE_QUEUE / "tasks").iterdir() if p.is_dir()}
    assert tasks == set(EXPECTATIONS)


@pytest.fixture(scope="module")
def reports(runner):
    def make(task_id: str) -> dict:
        task = load_task(SAMPLE_QUEUE / "tasks" / task_id)
        with pytest.MonkeyPatch.context() as mp:
            if task_id in QUIET_MS:  # a timed task: judged on steady injected timings (made alone)
                inject_quiet_timings(mp, QUIET_MS[task_id])
            return to_json_dict(run_checks(task, runner))

    # the next task's battery runs beside the current one's (tests/prefetch.py)
    with prefetching(sorted(EXPECTATIONS), make, alone=lambda t: t in QUIET_MS) as get:
        yield get


@pytest.mark.parametrize("task_id", sorted(EXPECTATIONS))
def test_sample_task_outcome(task_id, reports, runner):
    exp = EXPECTATIONS[task_id]
    doc = reports(task_id)
    failing = {f["check"] for f in doc["findings"] if f["severity"] == "fail"}
    errors = {c["check"]: c["reason"] for c in doc["checks"] if c["status"] == "error"}
    assert not errors, f"checks broke (kws bugs): {errors}"
    # where the time went (kws check --timings): every check measured, wait = wall less CPU
    for c in doc["checks"]:
        t = c["timings"]
        assert t["cpu_s"] >= t["parent_cpu_s"] >= 0 and t["jobs"] >= 0, (task_id, c)
        assert abs(t["wait_s"] - max(0.0, c["seconds"] - t["cpu_s"])) < 0.01, (task_id, c)
    assert sum(c["timings"]["jobs"] for c in doc["checks"]) >= 1, task_id  # shared steps: charged to one check
    detail = json.dumps([f["summary"] for f in doc["findings"] if f["severity"] == "fail"], indent=1)
    if exp.get("clean"):
        assert not failing, f"clean task {task_id} got fail findings: {detail}"
    expect_fail = list(exp.get("fail", []))
    if "jax" not in runner.device.versions:
        status = {c["check"]: c for c in doc["checks"]}
        for cid in exp.get("needs_jax", []):
            assert status[cid]["status"] == "skip" and "kws[pallas]" in status[cid]["reason"], (task_id, status[cid])
            expect_fail = [c for c in expect_fail if c != cid]
    for cid in expect_fail:
        assert cid in failing, f"{task_id}: expected a fail from {cid}; fails were {sorted(failing)}: {detail}"
    for cid in exp.get("not_fail", []):
        assert cid not in failing, f"{task_id}: {cid} must not fail: {detail}"
