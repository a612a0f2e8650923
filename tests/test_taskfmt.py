"""Task loading: every malformed-task class is reported with file, key and problem."""

from __future__ import annotations

import pytest

from tests.conftest import SAMPLE_QUEUE, TASK_TOML, write_task
from workstation.schema.problem import Problem
from workstation.task.format import load_task
from workstation.task.queue import load_queue


def _toml(**kw) -> str:
    return TASK_TOML.format(id=kw.pop("id", "add"), status="pass", failure_class="")


def test_valid_task_loads(tmp_path):
    t = load_task(write_task(tmp_path))
    assert t.id == "add" and t.backend == "torch" and t.kind == "generation"
    assert str(t.entry["candidate"]) == "candidate.py:add"
    assert t.cases == [{"N": 64, "dtype": "float32"}, {"N": 100, "dtype": "float32"}]
    assert t.tolerance.atol == 1e-6 and t.params["N"].max == 4096
    assert t.contract.deterministic is True  # default


@pytest.mark.parametrize(
    ("mutate", "key", "problem"),
    [
        (lambda s: s + "\n[[[bad toml", "", "not valid TOML"),
        (lambda s: s.replace('title = "elementwise add"\n', ""), "title", "missing required key"),
        (lambda s: s.replace('title = "elementwise add"', "title = 3"), "title", "expected a one-line title, got an integer"),
        (lambda s: s.replace('kind = "generation"', 'kind = "rewrite"'), "kind", "unknown kind 'rewrite'"),
        (lambda s: s.replace('backend = "torch"', 'backend = "opencl"'), "backend", "unknown backend 'opencl'"),
        (lambda s: s.replace('candidate = "candidate.py:add"', 'candidate = "missing.py:add"'), "entry.candidate", "does not exist"),
        (lambda s: s.replace('candidate = "candidate.py:add"', 'candidate = "candidate.py:sub"'), "entry.candidate", "callable 'sub' is not defined"),
        (lambda s: s.replace('candidate = "candidate.py:add"', 'candidate = "../x.py:add"'), "entry.candidate", "without '..'"),
        (lambda s: s.replace('candidate = "candidate.py:add"', 'candidate = "candidate.py"'), "entry.candidate", "expected 'file.py:callable'"),
        (lambda s: s.replace('id = "add"', 'id = "other"'), "id", "does not match the folder name"),
        (lambda s: s.replace("N = 100\n", "N = 5000\n"), "cases[1].N", "outside [params]"),
        (lambda s: s.replace('N = 100\ndtype = "float32"', 'N = 100\ndtype = "float33"'), "cases[1].dtype", "unknown dtype"),
        (lambda s: s.replace("atol = 1e-6", "atol = -1.0"), "tolerance.atol", "must be >= 0"),
        (lambda s: s.replace('status = "pass"', 'status = "maybe"'), "claims.status", "expected 'pass' or 'fail'"),
        (lambda s: s.replace("schema = 1", "schema = 2"), "schema", "unsupported schema 2"),
    ],
)
def test_malformed_task_names_file_key_problem(tmp_path, mutate, key, problem):
    d = write_task(tmp_path, toml=mutate(_toml()))
    with pytest.raises(Problem) as ei:
        load_task(d)
    e = ei.value
    assert e.file.name == "task.toml"
    assert e.key == key
    assert problem in e.problem
    assert str(e).startswith(str(d / "task.toml"))


def test_missing_task_toml(tmp_path):
    d = tmp_path / "tasks" / "empty"
    d.mkdir(parents=True)
    with pytest.raises(Problem, match="no task.toml"):
        load_task(d)


def test_syntax_error_in_entry_file_names_that_file(tmp_path):
    d = write_task(tmp_path, candidate="def add(x, y)\n    return x\n")
    with pytest.raises(Problem) as ei:
        load_task(d)
    assert ei.value.file.name == "candidate.py" and "syntax error" in ei.value.problem


def test_queue_loads_the_rest_when_one_task_is_malformed(tmp_path):
    write_task(tmp_path, "good")
    write_task(tmp_path, "bad", toml=_toml(id="bad").replace('kind = "generation"', 'kind = "nope"'))
    q = load_queue(tmp_path)
    assert [t.id for t in q.tasks] == ["good"]
    assert len(q.errors) == 1 and q.errors[0].key == "kind" and "bad" in str(q.errors[0].file)


def test_unknown_keys_are_warnings_not_errors(tmp_path):
    d = write_task(tmp_path, toml=_toml() + '\n[review_notes]\nby = "x"\n')
    t = load_task(d)
    assert [w.key for w in t.warnings] == ["review_notes"]


def test_per_dtype_tolerance_overrides(tmp_path):
    d = write_task(tmp_path, toml=_toml() + "\n[tolerance.float16]\nrtol = 1e-3\n")
    t = load_task(d)
    tol = t.tolerance_for("float16")
    assert tol.rtol == 1e-3 and tol.atol == 1e-6
    assert t.tolerance_for("float32").rtol == 1e-6


def test_sample_queue_loads_without_errors():
    q = load_queue(SAMPLE_QUEUE)
    assert q.errors == []
    assert len(q.tasks) >= 6
    assert {t.kind for t in q.tasks} >= {"generation", "translation", "migration", "debugging", "optimization", "fusion"}
