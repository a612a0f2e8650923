"""Blame the right file: a broken ``make_inputs``, a reference that raises or returns
non-finite values on a declared case, and a library that is not installed are not judged
(``not_judged`` naming the file and the problem), never a fail of the candidate; a dead
import does not decide a role's backend (task.toml does)."""

from __future__ import annotations

import pytest

from tests.conftest import write_task
from workstation.engine.run import run_checks
from workstation.task.format import load_task

INPUTS_HEAD = "import sys\nimport torch\n\ndef make_inputs(case, device, seed):\n"

BROKEN_INPUTS = {
    "none": ("    return None\n", "returned None"),
    "dict": ("    x = torch.ones(case['N'])\n    return {'x': x, 'y': x}\n", "returned a dict"),
    "generator": ("    return (torch.ones(case['N']) for _ in range(2))\n", "returned a generator"),
    "scalar": ("    return 3\n", "returned a int"),
    "raises": ("    raise ValueError('no inputs for you')\n", "raised ValueError: no inputs for you"),
    "exit": ("    sys.exit(3)\n", "the task code called sys.exit"),
    "meta": ("    x = torch.ones(case['N'], device='meta')\n    return x, x\n", "on 'meta'"),
    "int64": ("    x = torch.arange(case['N'])\n    return x, x\n", "no tensor of the case's dtype float32"),
}


def _judge(task_dir, runner, only=("correctness",)):
    res = run_checks(load_task(task_dir), runner, only=list(only), seeds=[0])
    return {c.check: c for c in res.results}, res.findings


@pytest.mark.parametrize("name", sorted(BROKEN_INPUTS))
def test_broken_make_inputs_is_a_task_problem_naming_inputs_py(tmp_path, runner, name):
    body, words = BROKEN_INPUTS[name]
    d = write_task(tmp_path, task_id=f"inputs-{name}")
    (d / "inputs.py").write_text(INPUTS_HEAD + body)
    checks, findings = _judge(d, runner)
    c = checks["correctness"]
    assert c.status == "skip" and c.not_judged, (name, c)
    assert "inputs.py:make_inputs" in c.not_judged and words in c.not_judged, (name, c.not_judged)
    assert "reference" not in c.not_judged.split("inputs.py:make_inputs", 1)[0]
    assert not findings  # never charged to the candidate (nor blamed on the reference)


@pytest.mark.parametrize(("body", "words"), [
    ("def add(x, y):\n    raise RuntimeError('reference broke')\n", "raised RuntimeError: reference broke"),
    ("import torch\n\ndef add(x, y):\n    return torch.full_like(x, float('nan'))\n", "non-finite value(s)"),
])
def test_a_broken_reference_is_not_judged_and_reference_suspect_says_so(tmp_path, runner, body, words):
    d = write_task(tmp_path, task_id="ref-broken")
    (d / "reference.py").write_text(body)
    checks, findings = _judge(d, runner, only=("correctness", "reference-suspect"))
    c = checks["correctness"]
    assert c.status == "skip" and "reference.py:add" in c.not_judged and words in c.not_judged, c
    assert not [f for f in findings if f.check == "correctness"]
    rs = checks["reference-suspect"]
    assert rs.status == "fail" and words in rs.findings[0].summary, rs


def test_a_library_not_installed_is_not_judged_with_the_hint(tmp_path, runner):
    d = write_task(tmp_path, task_id="nolib",
                   candidate="import kws_no_such_lib_here\n\ndef add(x, y):\n    return x + y\n")
    checks, findings = _judge(d, runner, only=("correctness", "reference-suspect"))
    c = checks["correctness"]
    assert c.status == "skip", c
    assert "kws_no_such_lib_here is not installed here" in c.not_judged and "candidate.py" in c.not_judged
    assert "pip install kws-no-such-lib-here" in c.not_judged
    assert not findings or all(f.check != "correctness" for f in findings)
    assert checks["reference-suspect"].status != "skip"  # the reference does not need it: judged


def test_a_missing_submodule_of_an_installed_library_stays_the_candidates_failure(tmp_path, runner):
    d = write_task(tmp_path, task_id="badsub",
                   candidate="import torch.no_such_submodule_kws\n\ndef add(x, y):\n    return x + y\n")
    checks, findings = _judge(d, runner)
    assert checks["correctness"].status == "fail" and "ModuleNotFoundError" in findings[0].summary


def test_a_dead_import_does_not_make_the_reference_nki(tmp_path, runner):
    d = write_task(tmp_path, task_id="deadimport")
    (d / "reference.py").write_text("if False:\n    import neuronxcc\n\ndef add(x, y):\n    return x + y\n")
    res = run_checks(load_task(d), runner, only=["correctness"], seeds=[0])
    (c,) = res.results
    assert c.status == "pass" and not c.not_judged, c
    assert "suggest nki" in res.extensions["backend_notes"]["reference"]


@pytest.mark.parametrize(("source", "line", "words"), [
    ("import torch\nfrom torch import no_such_name_kws\n\ndef make_inputs(case, device, seed):\n    return 1\n",
     2, "ImportError: cannot import name 'no_such_name_kws'"),
    ("import torch\n\ndef make_inputs(case, device, seed):\n    return torch.ones(case['N']),\n\nraise KeyError('kws')\n",
     6, "KeyError"),
])
def test_an_inputs_file_that_does_not_import_is_a_task_problem_naming_it_and_the_line(tmp_path, runner, source, line,
                                                                                    words):
    """The task loads (the file parses), but importing it in the child fails: inputs.py is
    named with the line, never the reference whose step happened to import it first."""
    d = write_task(tmp_path, task_id="inputs-import")
    (d / "inputs.py").write_text(source)
    checks, findings = _judge(d, runner)
    c = checks["correctness"]
    assert c.status == "skip" and "inputs.py:make_inputs" in c.not_judged, c
    assert f"importing inputs.py failed at line {line}" in c.not_judged and words in c.not_judged, c.not_judged
    assert "reference.py" not in c.not_judged and not findings


def test_keep_structure_beyond_the_inputs_is_a_task_problem_naming_task_toml(tmp_path, runner):
    d = write_task(tmp_path, task_id="keep-beyond")
    (d / "task.toml").write_text((d / "task.toml").read_text() + "\n[inputs]\nkeep_structure = [99]\n")
    checks, findings = _judge(d, runner, only=("special-values", "degenerate-inputs"))
    for cid in ("special-values", "degenerate-inputs"):
        c = checks[cid]
        assert c.status == "skip" and "task.toml" in c.not_judged, c
        assert "[inputs] keep_structure = [99]: index 99 is beyond the 2 input(s)" in c.not_judged, c.not_judged
    assert not findings
