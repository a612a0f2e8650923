"""The one check registry: ids declared once, report order from classes, duplicates refused,
rubrics validated against it, third-party checks through the ``kws.checks`` entry points,
and ``after`` checks that see every other result."""

from __future__ import annotations

import json
import os
import re
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



@pytest.mark.parametrize("attrs, match", [
    ({"applies_to": classmethod(lambda cls, task: True)}, r"unknown hook 'applies_to'.*applies\(task\)"),
    ({"judge": lambda self, ctx: []}, "unknown hook 'judge'"),
    ({"applies": lambda self, task: ""}, "applies: must be a classmethod, not a method"),
    ({"skip_reason": staticmethod(lambda task: "")}, "must be a classmethod, not a staticmethod"),
    ({"run": lambda self, context: []}, r"run\('context',\): the hook takes \(ctx\)"),
    ({"after_all": lambda self, ctx, extra: []}, "the hook takes"),
    ({"finding": lambda self, *a: None}, "overrides the base class's helper 'finding'"),
])
def test_a_check_with_an_unknown_hook_or_a_hook_of_another_signature_is_refused(attrs, match):
    """pluggy's _verify_hook for checks: a misspelt or mis-declared hook is an error naming
    it at registration, never a hook the engine silently does not call."""
    with pytest.raises(RegistryError, match=match):
        register(type("Misdeclared", (Check,), {"id": "team-misdeclared", "__module__": "team", **attrs}))
    assert "team-misdeclared" not in REGISTRY
    ok = type("Declared", (Check,), {"id": "team-declared", "__module__": "team",
                                     "run": lambda self, ctx: [], "applies": classmethod(lambda cls, task: ""),
                                     "helper_constant": 3})
    try:
        assert register(ok) is ok
    finally:
        REGISTRY.pop("team-declared", None)


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


BROKEN_PLUGIN = '''\
"""A team's plugin that cannot load: it registers a check, then its import fails."""
from workstation.engine.check import Check, register


@register
class HalfLoaded(Check):
    """Registered before the import fails: must not stay in the battery."""

    id = "team-half-loaded"
    title = "half loaded"
    order = 901

    def run(self, ctx):
        return []


import team_missing_dependency  # noqa: F401  (not installed: ImportError)
'''


def _install_plugin(site: Path, module: str, text: str, dist: str, version: str, ep: str) -> None:
    """A module on ``site`` and a dist-info declaring it as a ``kws.checks`` entry point."""
    (site / f"{module}.py").write_text(text)
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[kws.checks]\n{ep} = {module}\n")


def test_a_check_from_another_package_runs_through_kws_check_only(tmp_path):
    """One new module outside the package plus an entry point is all a new check needs; a
    plugin whose import fails is named in the text report and the JSON, and the rest runs."""
    site = tmp_path / "site"
    site.mkdir()
    _install_plugin(site, "team_checks", PLUGIN, "team-checks", "1.0", "team")
    _install_plugin(site, "team_broken", BROKEN_PLUGIN, "team-broken", "0.3", "broken")
    task = write_task(tmp_path / "q")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    base = [sys.executable, "-m", "workstation.cli.main", "check", str(task)]
    cmd = [*base, "--only", "correctness,team-after-all"]
    r = subprocess.run([*cmd, "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    assert [c["check"] for c in doc["checks"]] == ["correctness", "team-after-all"]
    mine = [f for f in doc["findings"] if f["check"] == "team-after-all"]
    assert mine and mine[0]["evidence"]["seen"] == ["correctness"]
    assert doc["plugins"] == [{"entry_point": "team", "value": "team_checks", "distribution": "team-checks",
                               "version": "1.0", "checks": ["team-after-all"]}]
    [err] = doc["plugin_errors"]
    assert {k: err[k] for k in ("entry_point", "value", "distribution", "version")} == {
        "entry_point": "broken", "value": "team_broken", "distribution": "team-broken", "version": "0.3"}
    assert err["error"].startswith("ModuleNotFoundError: No module named 'team_missing_dependency'")

    r = subprocess.run([*base, "--only", "team-half-loaded"], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 2 and "team-half-loaded" in r.stdout + r.stderr  # taken out with its plugin

    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    head = r.stdout.split("\n\n")[0]  # the header, above the check table
    assert ("plugin error: entry point 'broken' (team_broken) of team-broken 0.3 failed to load: "
            "ModuleNotFoundError: No module named 'team_missing_dependency'") in head
    assert "plugin: entry point 'team' (team_checks) of team-checks 1.0: team-after-all" in head
    assert re.search(r"^  pass +correctness ", r.stdout, re.M)


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


# ---- the manifest, docs/checks.md and the support package, generated or checked from the classes


def _generator():
    import importlib.util

    if "gen_checks_doc" in sys.modules:
        return sys.modules["gen_checks_doc"]
    spec = importlib.util.spec_from_file_location("gen_checks_doc", REPO / "scripts" / "gen_checks_doc.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def test_the_committed_manifest_and_checks_md_are_what_the_classes_generate():
    """Run ``python scripts/gen_checks_doc.py`` after changing a check's id, title, order,
    phase, kinds or docstring."""
    gen = _generator()
    for path, text in gen.outputs().items():
        assert path.read_text(encoding="utf-8") == text, (
            f"{path.relative_to(REPO)} is stale: run python scripts/gen_checks_doc.py")


def test_every_builtin_check_has_its_section_and_the_manifest_lists_exactly_the_registry():
    from workstation.engine.check import BUILTIN_CHECKS, builtin_manifest, live_manifest

    builtin = [i for i in check_ids() if check_class(i).__module__.startswith(BUILTIN_CHECKS + ".")]
    assert [c["id"] for c in builtin_manifest()] == builtin == [c["id"] for c in live_manifest()]
    text = (REPO / "docs" / "checks.md").read_text(encoding="utf-8")
    assert [m for m in re.findall(r"^## (\S+)$", text, re.M) if m in REGISTRY] == builtin
    assert "## correctness\n" in text


def test_a_docstring_without_its_sections_is_refused_by_the_generator():
    gen = _generator()
    bare = type("Bare", (Check,), {"id": "bare", "__doc__": "Summary.\n\nCatches:\n    something.\n"})
    with pytest.raises(gen.DocError, match="missing section"):
        gen.parse_docstring(bare)
    stray = type("Stray", (Check,), {"id": "stray", "__doc__": "Summary.\n\nUnindented text.\n"})
    with pytest.raises(gen.DocError, match="text outside a section"):
        gen.parse_docstring(stray)
    doc = check_class("correctness").__doc__.replace("| finding | severity |", "| what | how bad |")
    with pytest.raises(gen.DocError, match=r"\| finding \| severity \|"):
        gen.parse_docstring(type("NoTable", (Check,), {"id": "nt", "__doc__": doc}))


def test_known_check_ids_reads_the_manifest_without_importing_a_check_module():
    code = ("import sys\nfrom workstation.engine.check import known_check_ids\nids = known_check_ids()\n"
            "print(sorted(ids)); print(sorted(m for m in sys.modules if m.startswith('workstation.checks.')))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60, cwd=REPO)
    assert r.returncode == 0, r.stderr
    ids, modules = (eval(line) for line in r.stdout.splitlines())  # our own repr
    from importlib.metadata import entry_points

    if not entry_points(group="kws.checks"):  # else the plugins load the battery, as documented
        assert modules == []
    assert set(ids) >= set(check_ids()) - {p for p in REGISTRY if not REGISTRY[p].__module__.startswith("workstation.")}


def test_the_support_package_docstring_names_every_module():
    import pkgutil

    import workstation.checks.support as support

    named = set(re.findall(r":mod:`\.(\w+)`", support.__doc__ or ""))
    modules = {m.name for m in pkgutil.iter_modules(support.__path__) if not m.name.startswith("_")}
    assert named == modules, f"missing: {sorted(modules - named)}; stale: {sorted(named - modules)}"


def test_the_review_session_names_a_broken_plugin_from_the_report():
    from workstation.review.session import ReviewSession
    from workstation.rubric.model import load_rubric

    rubric = load_rubric(REPO / "rubrics" / sorted(p.name for p in (REPO / "rubrics").glob("*.toml"))[0])
    s = ReviewSession("t", REPO, rubric)
    s.apply_event("done", {"report": {"checks": [], "findings": [], "plugin_errors": [
        {"entry_point": "broken", "value": "team_broken", "distribution": "team-broken", "version": "0.3",
         "error": "ModuleNotFoundError: No module named 'x'"}]}})
    assert s.plugin_notice() == ("⚠ check plugin failed to load: 'broken' (team-broken 0.3): "
                                 "ModuleNotFoundError: No module named 'x'")
    s.apply_event("done", {"report": {"checks": [], "findings": [], "plugin_errors": []}})
    assert s.plugin_notice() == ""
