"""The isolated runner: hostile candidates become findings; kws survives."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.hostile import marked_processes, wait_until
from workstation.engine.run import run_checks
from workstation.runner import Runner
from workstation.task.format import load_task

HOSTILE = {
    "abort": ("import os\ndef add(x, y):\n    os.abort()\n", "crash", "SIGABRT"),
    "segfault": ("import ctypes\ndef add(x, y):\n    return ctypes.string_at(0)\n", "crash", "SIGSEGV"),
    "sys_exit": ("import sys\ndef add(x, y):\n    sys.exit(3)\n", "runtime-error", "sys.exit"),
    "os_exit": ("import os\ndef add(x, y):\n    os._exit(7)\n", "crash", "status 7"),
    "hang": ("def add(x, y):\n    while True:\n        pass\n", "timeout", "limit"),
    "raises": ("def add(x, y):\n    raise RuntimeError('boom')\n", "runtime-error", "boom"),
    "import_error": ("raise ImportError('no module')\ndef add(x, y):\n    return x\n", "runtime-error", "no module"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_candidate_becomes_a_finding(name, task_factory, runner, monkeypatch):
    src, cls, text = HOSTILE[name]
    monkeypatch.setenv("KWS_STEP_TIMEOUT", "3")
    task = load_task(task_factory(src))
    res = run_checks(task, runner, only=["correctness"], seeds=[0])
    (r,) = res.results
    assert r.status == "fail", r
    f = r.findings[0]
    assert f.evidence["failure_class"] == cls
    assert text in json.dumps(f.evidence) + f.summary
    assert f.repro.startswith("kws check ")


def test_huge_output_is_cut_off_and_reported(task_factory, runner, monkeypatch):
    monkeypatch.setattr("workstation.runner.limits.STDIO_LIMIT_BYTES", 4 * 1024 * 1024)
    src = "import sys\ndef add(x, y):\n    while True:\n        sys.stdout.write('x' * 65536)\n"
    task = load_task(task_factory(src))
    res = run_checks(task, runner, only=["correctness"], seeds=[0])
    f = res.results[0].findings[0]
    assert f.evidence["failure_class"] == "crash"
    assert f.evidence["signal"] == "SIGXFSZ"
    assert "MiB to stdout/stderr" in f.summary


def test_child_environment_is_scrubbed_and_task_is_a_copy(task_factory, runner, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "secret-token")
    monkeypatch.setenv("SSH_AUTH_SOCK", "/tmp/agent.sock")
    src = (
        "import os, torch\n"
        "def add(x, y):\n"
        "    open('candidate.py', 'a').write('# tampered\\n')\n"
        "    leaked = [k for k in os.environ if 'TOKEN' in k or k == 'SSH_AUTH_SOCK']\n"
        "    assert not leaked, leaked\n"
        "    return x + y\n"
    )
    d = task_factory(src)
    before = (d / "candidate.py").read_text()
    with Runner() as fresh:  # a server started after the variables were set
        res = run_checks(load_task(d), fresh, only=["correctness"], seeds=[0])
    assert res.results[0].status == "pass", res.results[0].findings
    assert (d / "candidate.py").read_text() == before


def test_process_group_is_killed_at_the_limit(task_factory, runner, monkeypatch):
    import uuid

    marker = f"kws-grandchild-{uuid.uuid4().hex}"
    src = (
        "import subprocess, sys, time\n"
        "def add(x, y):\n"
        f"    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', {marker!r}])\n"
        "    while True:\n"
        "        pass\n"
    )
    monkeypatch.setenv("KWS_STEP_TIMEOUT", "2")
    res = run_checks(load_task(task_factory(src)), runner, only=["correctness"], seeds=[0])
    f = res.results[0].findings[0]
    assert f.evidence["failure_class"] == "timeout", f
    assert "did not finish within 4 CPU s (2 x its 2 CPU s budget" in f.summary
    if not wait_until(lambda: not marked_processes(marker)):
        pytest.fail("the candidate's grandchild survived the kill")


def test_a_call_that_waits_without_computing_hangs_at_its_wait_budget(task_factory, runner, monkeypatch):
    """A sleep burns no CPU, and is not waiting to run either: its blocked seconds pass the
    wait budget (here the 1 s step budget) and the candidate hangs, a fail; its grandchild
    dies with the job."""
    import uuid

    marker = f"kws-sleeper-{uuid.uuid4().hex}"
    src = (
        "import subprocess, sys, time\n"
        "def add(x, y):\n"
        f"    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', {marker!r}])\n"
        "    time.sleep(600)\n"
    )
    monkeypatch.setenv("KWS_STEP_TIMEOUT", "1")
    res = run_checks(load_task(task_factory(src)), runner, only=["correctness"], seeds=[0])
    (r,) = res.results
    assert r.status == "fail", r
    f = r.findings[0]
    assert f.evidence["failure_class"] == "timeout", f
    assert "was blocked for" in f.summary and "over its wait budget of 1 s" in f.summary, f.summary
    if not wait_until(lambda: not marked_processes(marker)):
        pytest.fail("the candidate's grandchild survived the kill")


def test_step_budget_is_cpu_time_and_imports_are_budgeted_apart(task_factory, runner, monkeypatch):
    """A step whose wall time passes its CPU budget because the machine is busy (the
    simulated load of ``KWS_TEST_STRETCH``: a 0.6 s call stretched to 3 s) passes, as does
    a call blocked for less than its wait budget (the same call unstretched); an import that
    burns CPU is charged to the import budget, reported in the ``imports``
    extension, and past that budget makes the check not judged, never a fail."""
    monkeypatch.setenv("KWS_STEP_TIMEOUT", "1.5")
    slow_call = "import time\ndef add(x, y):\n    time.sleep(0.6)\n    return x + y\n"
    monkeypatch.setenv("KWS_TEST_STRETCH", "5")
    with Runner() as stretched:  # the hook reaches a fork server through its environment
        res = run_checks(load_task(task_factory(slow_call)), stretched, only=["correctness"], seeds=[0])
    assert res.results[0].status == "pass", res.results[0]
    monkeypatch.delenv("KWS_TEST_STRETCH")
    res = run_checks(load_task(task_factory(slow_call)), runner, only=["correctness"], seeds=[0])
    assert res.results[0].status == "pass", res.results[0]
    burn = ("import time\nt = time.process_time()\nwhile time.process_time() - t < 2.5:\n    pass\n"
            "def add(x, y):\n    return x + y\n")
    res = run_checks(load_task(task_factory(burn)), runner, only=["correctness"], seeds=[0])
    assert res.results[0].status == "pass", res.results[0]  # 2.5 CPU s of import, 1.5 CPU s step budget
    assert res.extensions["imports"]["candidate.py"]["cpu_s"] >= 2.0, res.extensions["imports"]
    monkeypatch.setenv("KWS_IMPORT_BUDGET", "1")
    res = run_checks(load_task(task_factory(burn)), runner, only=["correctness"], seeds=[0])
    (r,) = res.results
    assert r.status == "skip" and not r.findings, r
    assert "the import of candidate.py did not finish within the job's 1 CPU s import budget" in r.not_judged


def test_device_is_reported(runner):
    d = runner.device
    assert d.kind in ("cpu", "cuda")
    if d.kind == "cpu":
        assert d.label == "cpu (triton interpreter)" and d.interpreter


def test_parent_never_imports_torch():
    code = (
        "import sys; from workstation.runner import Runner; from workstation.engine.run import run_checks;"
        "from workstation.task.format import load_task; import workstation.cli.main;"
        "t = load_task(sys.argv[1]);\n"
        "with Runner() as r: run_checks(t, r, only=['correctness'], seeds=[0])\n"
        "assert 'torch' not in sys.modules and 'triton' not in sys.modules, 'parent imported torch'"
    )
    task = REPO / "sample_queue" / "tasks" / "softmax-gen"
    subprocess.run([sys.executable, "-c", code, str(task)], check=True, cwd=REPO)


def test_the_input_budget_setting_reaches_the_job_child(task_factory, monkeypatch):
    """The child cannot read kws's settings: the runner passes the resolved input budget
    (workstation.protocol.childenv), so a case over it is refused in the child."""
    monkeypatch.setenv("KWS_INPUT_BUDGET", "256")  # the cases' two fp32 inputs need 512 and 800 bytes
    task = load_task(task_factory())
    with Runner() as r:
        res = run_checks(task, r, only=["correctness"], seeds=[0])
    (result,) = res.results
    assert result.status == "skip", result
    assert "over the input budget of" in result.reason and "KWS_INPUT_BUDGET" in result.reason
