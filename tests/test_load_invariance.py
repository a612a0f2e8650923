"""A loaded machine slows a run but changes no verdict.

Step budgets are CPU seconds (docs/architecture.md, "Isolation"), so a run whose every step
and import sleeps three times its own wall time on top (``KWS_TEST_STRETCH=4``: the runner's
test hook, a loaded machine simulated without burning CPU) must report the same (check,
severity) pairs as a quiet run, or differ only by checks moved to ``not_judged``: never a
pass where the quiet run fails, never a new fail. Nothing here asserts wall-clock time.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import SAMPLE_QUEUE
from workstation.engine.report import to_json_dict
from workstation.engine.run import run_checks
from workstation.runner import Runner
from workstation.task.format import load_task

STRETCH = "4"
#: a candidate whose import burns 3 CPU s: over a 2 CPU s step budget, within the import budget.
HEAVY_IMPORT = (
    "import time\n"
    "_t = time.process_time()\n"
    "while time.process_time() - _t < 3.0:\n"
    "    pass\n"
    "def add(x, y):\n"
    "    return x + y\n"
)


def _report(task_dir: Any, monkeypatch: pytest.MonkeyPatch, stretch: str | None, **kw: Any) -> dict[str, Any]:
    if stretch:
        monkeypatch.setenv("KWS_TEST_STRETCH", stretch)
    else:
        monkeypatch.delenv("KWS_TEST_STRETCH", raising=False)
    with Runner() as runner:  # a fresh fork server: the hook reaches it through its environment
        return to_json_dict(run_checks(load_task(task_dir), runner, **kw))


def _assert_same_verdicts(quiet: dict[str, Any], loaded: dict[str, Any]) -> None:
    moved = {n["check"] for n in loaded["not_judged"]} - {n["check"] for n in quiet["not_judged"]}
    q = {(f["check"], f["severity"]) for f in quiet["findings"]}
    s = {(f["check"], f["severity"]) for f in loaded["findings"]}
    assert {x for x in s if x[0] not in moved} == {x for x in q if x[0] not in moved}, (sorted(q ^ s), moved)
    assert not {x for x in s if x[1] == "fail"} - q, "a new fail under load"
    qs = {c["check"]: c["status"] for c in quiet["checks"]}
    ls = {c["check"]: c["status"] for c in loaded["checks"]}
    for check, status in qs.items():
        if check in moved:
            assert ls[check] != "pass", (check, status, ls[check])
        else:
            assert ls[check] == status, (check, status, ls[check], loaded["not_judged"])


@pytest.mark.parametrize(("task", "fails"), [("matmul-fp32-tf32", {"precision-regime"}), ("softmax-gen", set())])
def test_sample_verdicts_do_not_depend_on_load(task, fails, monkeypatch):
    quiet = _report(SAMPLE_QUEUE / "tasks" / task, monkeypatch, None)
    assert {c["check"] for c in quiet["checks"] if c["status"] == "fail"} == fails, quiet["checks"]
    loaded = _report(SAMPLE_QUEUE / "tasks" / task, monkeypatch, STRETCH)
    _assert_same_verdicts(quiet, loaded)


def test_a_heavy_import_is_no_hang_of_a_fast_call(task_factory, monkeypatch):
    monkeypatch.setenv("KWS_STEP_TIMEOUT", "2")
    d = task_factory(HEAVY_IMPORT)
    kw = {"only": ["correctness", "nondeterminism"], "seeds": [0]}
    quiet = _report(d, monkeypatch, None, **kw)
    assert [c["status"] for c in quiet["checks"]] == ["pass", "pass"], quiet["checks"]
    assert quiet["imports"]["candidate.py"]["cpu_s"] >= 2.5, quiet["imports"]
    loaded = _report(d, monkeypatch, STRETCH, **kw)
    _assert_same_verdicts(quiet, loaded)
    assert loaded["imports"]["candidate.py"]["wall_s"] > loaded["imports"]["candidate.py"]["cpu_s"]
