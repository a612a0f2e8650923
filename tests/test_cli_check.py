"""`kws check`: the contract's JSON, exit codes 0/1/2, load errors with file/key/problem."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO, TASK_TOML, write_task

KWS = [sys.executable, "-m", "workstation.cli.main"]


def kws(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*KWS, *args], capture_output=True, text=True, cwd=REPO, timeout=600)


def test_json_shape_and_exit_0(tmp_path):
    d = write_task(tmp_path)
    p = kws("check", str(d), "--json", "--only", "correctness,failure-mismatch")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert set(doc) >= {"task", "task_tree", "device", "complete", "versions", "seeds", "findings", "checks"}
    assert doc["task"] == "add" and doc["seeds"] == [0, 1, 2]
    assert doc["versions"]["kws"] and doc["versions"]["torch"]
    statuses = {c["check"]: c["status"] for c in doc["checks"]}
    assert statuses == {"correctness": "pass", "failure-mismatch": "skip"}
    assert doc["complete"] is False  # a skip makes the run incomplete (contract)
    assert all(set(f) == {"check", "severity", "summary", "evidence", "repro"} for f in doc["findings"])


def test_exit_1_on_fail_and_nonfinite_as_strings(tmp_path):
    d = write_task(tmp_path, candidate="import torch\ndef add(x, y):\n    return (x + y) * float('nan')\n")
    p = kws("check", str(d), "--json", "--only", "correctness")
    assert p.returncode == 1
    def reject(name):
        raise AssertionError(f"non-standard JSON constant {name}")

    doc = json.loads(p.stdout, parse_constant=reject)  # strict JSON: no NaN/Infinity literals
    f = doc["findings"][0]
    assert f["severity"] == "fail" and f["evidence"]["per_seed"][0]["worst"]["got"] == "nan"


def test_exit_2_on_malformed_task_names_file_key_problem(tmp_path):
    d = write_task(tmp_path, toml=TASK_TOML.format(id="add", status="pass", failure_class="").replace(
        'backend = "torch"', 'backend = "fortran"'))
    p = kws("check", str(d), "--json")
    assert p.returncode == 2
    err = json.loads(p.stdout)["error"]
    assert err["file"].endswith("task.toml") and err["key"] == "backend" and "fortran" in err["problem"]
    assert "task.toml: backend: unknown backend" in p.stderr


def test_text_report_is_readable(tmp_path):
    d = write_task(tmp_path, candidate="def add(x, y):\n    return x - y\n")
    p = kws("check", str(d), "--only", "correctness")
    assert p.returncode == 1
    assert "FAIL" in p.stdout and "repro: kws check" in p.stdout and "device: cpu" in p.stdout
