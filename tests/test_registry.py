"""The one check registry: ids declared once, report order from classes, duplicates refused,
rubrics validated against it, third-party checks through the ``kws.checks`` entry points,
and ``after`` checks that see every other result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import write_task
from workstation.engine.check import (
    REGISTRY,
    Check,
    RegistryError,
    check_class,
    check_ids,
    register,
)

REPO = Path(__file__).resolve().parent.parent

#: the contract's check-id table (shared/spec/task-format.md), in its order.
CONTRACT_IDS = [
    "correctness", "out-of-bounds", "edge-shapes", "noncontiguous", "special-values",
    "unwritten-output", "input-mutation", "stale-output", "nondeterminism",
    "degenerate-inputs", "tolerance-loose", "tolerance-tight", "precision-regime",
    "reference-suspect", "fallback", "tampering", "test-gap", "benchmark-bias",
    "speedup-claim", "autotune", "failure-mismatch",
]


def test_report_order_keeps_the_contract_table_order():
    ids = check_ids()
    assert [i for i in ids if i in CONTRACT_IDS] == CONTRACT_IDS
    orders = [check_class(i).order for i in ids]
    assert orders == sorted(orders)


def test_every_rubric_informed_by_id_is_registered():
    registered = set(check_ids())
    for path in sorted((REPO / "rubrics").glob("*.toml")):
        doc = tomllib.loads(path.read_text())
        for f in doc["fields"]:
            missing = set(f.get("informed_by", [])) - registered
            assert not missing, f"{path.name}: field {f['key']} names unregistered checks {missing}"


def test_a_different_class_taking_an_id_is_an_error_at_import():
    taken = check_ids()[0]
    with pytest.raises(RegistryError, match=f"check id '{taken}' is taken by"):
        register(type("Impostor", (Check,), {"id": taken, "__module__": "elsewhere"}))
    assert REGISTRY[taken].__module__.startswith("workstation.checks.")


def test_re_registering_the_same_class_is_not_an_error():
    cls = check_class("correctness")
    twin = type(cls.__name__, (Check,), {"id": cls.id, "order": cls.order, "__module__": cls.__module__,
                                         "__qualname__": cls.__qualname__})
    try:
        assert register(twin) is twin
    finally:
        REGISTRY[cls.id] = cls


def test_a_check_without_id_or_with_an_unknown_phase_is_refused():
    with pytest.raises(RegistryError, match="has no id"):
        register(type("NoId", (Check,), {}))
    with pytest.raises(RegistryError, match="unknown phase"):
        register(type("Odd", (Check,), {"id": "odd-phase", "phase": "sometimes"}))


PLUGIN = '''\
"""A team's own check, shipped outside kws."""
from workstation.engine.check import Check, register


@register
class SeesEverything(Check):
    """Reports which other checks finished before it (it runs after all of them)."""

    id = "team-after-all"
    title = "after all"
    order = 900
    phase = "after"

    def run(self, ctx):
        seen = sorted(ctx.results)
        return [self.finding(ctx, "info", "saw " + ",".join(seen), {"seen": seen})]
'''


def test_a_check_from_another_package_runs_through_kws_check_only(tmp_path):
    """One new module outside the package plus an entry point is all a new check needs."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "team_checks.py").write_text(PLUGIN)
    dist = site / "team_checks-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: team-checks\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[kws.checks]\nteam = team_checks\n")
    task = write_task(tmp_path / "q")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    r = subprocess.run([sys.executable, "-m", "workstation.cli.main", "check", str(task), "--json",
                        "--only", "correctness,team-after-all"], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    assert [c["check"] for c in doc["checks"]] == ["correctness", "team-after-all"]
    mine = [f for f in doc["findings"] if f["check"] == "team-after-all"]
    assert mine and mine[0]["evidence"]["seen"] == ["correctness"]


def test_a_check_that_does_not_apply_is_left_out_of_the_battery_but_skips_when_asked(tmp_path):
    from workstation.engine.run import select_checks
    from workstation.task.format import load_task

    task = load_task(write_task(tmp_path / "q"))  # a generation task with no [[profiles]]
    attached = check_class("profile-attached")
    assert attached.applies(task).startswith("the task attaches no profile")
    assert "profile-attached" not in select_checks(None, task)
    assert select_checks(["profile-attached"], task) == ["profile-attached"]
    kinded = type("OnlyFusion", (Check,), {"id": "x", "kinds": ("fusion",)})
    assert kinded.applies(task) == "only for fusion tasks; this one is generation"
