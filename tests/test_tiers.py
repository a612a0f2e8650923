"""The test tiers of tests/conftest.py: every module has one, every per-test entry names a
real test, every selected test carries exactly one tier marker, and the fast tier's guard
recognises task code, also in a child process."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

from tests import conftest
from tests.tierguard import sitecustomize as tierguard
from workstation.runner import Runner

TESTS = Path(__file__).resolve().parent


def _test_functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
            and n.name.startswith("test")}


def test_every_module_has_a_tier_and_every_test_entry_names_a_test():
    modules = {p.stem for p in TESTS.glob("test_*.py")}
    assert modules == set(conftest.MODULE_TIER), "MODULE_TIER out of date"
    assert set(conftest.MODULE_TIER.values()) <= set(conftest.TIERS)
    for key, tier in conftest.TEST_TIER.items():
        module, func = key.split("::")
        assert tier in conftest.TIERS, key
        assert func in _test_functions(TESTS / f"{module}.py"), f"TEST_TIER names no test: {key}"
    for key in conftest.SLOW_TESTS:
        module, func = key.split("[")[0].split("::")
        assert func in _test_functions(TESTS / f"{module}.py"), f"SLOW_TESTS names no test: {key}"


def test_every_selected_test_has_exactly_one_tier(request):
    for item in request.session.items:
        tiers = [t for t in conftest.TIERS if item.get_closest_marker(t)]
        assert len(tiers) == 1, (item.nodeid, tiers)


def test_the_guard_recognises_what_starts_task_code(tmp_path):
    r = Runner(sandbox="none")  # its command line only: nothing is started
    try:
        server_argv = r.server.command()[0]
    finally:
        r.close()
    py = sys.executable
    assert tierguard.task_code_in(server_argv) == "a fork server (workstation.runner.Runner)"
    assert tierguard.task_code_in(["bwrap", "--die-with-parent", "--", *server_argv]).startswith("a fork server")
    assert tierguard.task_code_in([py, "-m", "workstation.engine.server"]).startswith("the check server")
    assert tierguard.task_code_in([py, "-m", "workstation.cli.main", "check", "t", "--json"]) == "kws check"
    assert tierguard.task_code_in(["/venv/bin/kws", "--queue", "q", "recheck"]) == "kws recheck"
    assert tierguard.task_code_in([py, "-m", "workstation.screen.supervise", "--timeout", "5", "--module",
                                   "workstation.cli.main", "--", "check", "t"]) == "kws check"
    # no task code: git, other kws commands, a supervisor of a shell script
    assert tierguard.task_code_in(["git", "status"]) is None
    assert tierguard.task_code_in([py, "-m", "workstation.cli.main", "queue", "--queue", "q"]) is None
    assert tierguard.task_code_in(f"{py} -m workstation.screen.supervise --timeout 5 -- sh -c 'sleep 1'") is None


def test_the_guard_refuses_in_a_child_process_and_logs_the_test(tmp_path):
    log = tmp_path / "refused.txt"
    code = ("import subprocess, sys\n"
            "try:\n"
            "    subprocess.Popen([sys.executable, '-m', 'workstation.engine.server'])\n"
            "except Exception as e:\n"
            "    print(type(e).__name__)\n")
    env = {**os.environ, tierguard.ENV: str(log), "PYTEST_CURRENT_TEST": "tests/test_x.py::test_y (call)",
           "PYTHONPATH": os.pathsep.join([str(tierguard.HERE), str(TESTS.parent)])}
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert p.stdout.strip() == "StartsTaskCode", p.stderr
    assert log.read_text().splitlines() == [
        "tests/test_x.py::test_y: this test starts task code (the check server (python -m "
        "workstation.engine.server)); its module belongs in the battery tier (tests/conftest.py: "
        "MODULE_TIER, or TEST_TIER for one test)"]
    env.pop(tierguard.ENV)  # without the variable the module does nothing
    p = subprocess.run([sys.executable, "-c", "import subprocess, sys; print(subprocess.Popen.__init__.__name__)"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert p.stdout.strip() == "__init__", p.stderr


def test_the_guard_refuses_a_runner_in_this_process(tmp_path):
    log = tmp_path / "refused.txt"
    r = Runner(sandbox="none")
    init = tierguard.install(log, current=lambda: "tests/test_x.py::test_y (setup)")
    try:
        r.start()
        raise AssertionError(f"a fork server started: pid {r.server_pid}")
    except tierguard.StartsTaskCode as e:
        assert str(e).startswith("tests/test_x.py::test_y: this test starts task code (a fork server")
    finally:
        subprocess.Popen.__init__ = init  # type: ignore[method-assign]
        r.close()
    assert len(log.read_text().splitlines()) == 1
