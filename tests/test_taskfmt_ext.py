"""kws extensions of task.toml and queue.toml (docs/task-format.md, "kws extensions"):
structured inputs, delegation, per-case and reduction-scaled tolerances, the queue's
shared helper folder; and the claim scope failure-mismatch reads."""

from __future__ import annotations

import pytest

from tests.conftest import TASK_TOML, write_task
from workstation.checks.failure_mismatch import claim_scope, within_claim
from workstation.schema.problem import Problem
from workstation.task.format import load_task
from workstation.task.helpers import queue_helpers_dir
from workstation.task.queue import load_queue, read_queue_config

BASE = TASK_TOML.format(id="add", status="pass", failure_class="")


def _task(tmp_path, extra: str):
    return load_task(write_task(tmp_path, toml=BASE + extra))


def test_extensions_parse_and_scale_the_tolerance(tmp_path):
    t = _task(tmp_path, """
[inputs]
keep_structure = [1]

[delegation]
ops = ["aten::mm", "matmul"]

[tolerance_rule]
atol_scale = ["N"]

[[case_tolerance]]
match = { N = 100 }
rtol = 1e-3
""")
    ext = t.extensions
    assert ext.keep_structure == (1,) and ext.delegates == ("aten::mm", "matmul") and ext.atol_scale == ("N",)
    assert not t.warnings  # the new tables are known keys
    a = t.tolerance_for_case({"N": 64, "dtype": "float32"})
    assert a.atol == pytest.approx(64e-6) and a.rtol == 1e-6
    b = t.tolerance_for_case({"N": 100, "dtype": "float32"})
    assert b.atol == pytest.approx(100e-6) and b.rtol == 1e-3  # case_tolerance, then the rule
    # a derived case (edge-shapes) gets the rule at its own size
    assert t.tolerance_for_case({"N": 1000, "dtype": "float32"}).atol == pytest.approx(1e-3)


@pytest.mark.parametrize(("extra", "key", "problem"), [
    ('[tolerance_rule]\natol_scale = ["K"]\n', "tolerance_rule.atol_scale", "'K' is not a parameter of any case"),
    ("[[case_tolerance]]\nmatch = { N = 7 }\natol = 1.0\n", "case_tolerance[0].match", "matches no declared case"),
    ("[[case_tolerance]]\nmatch = { N = 64 }\n", "case_tolerance[0]", "gives none of atol, rtol, ulp"),
    ("[inputs]\nkeep_structure = [-1]\n", "inputs.keep_structure[0]", ""),
    ('[delegation]\nops = [""]\n', "delegation.ops[0]", ""),
])
def test_malformed_extensions_name_the_key(tmp_path, extra, key, problem):
    with pytest.raises(Problem) as ei:
        _task(tmp_path, extra)
    assert ei.value.key == key and problem in ei.value.problem


def test_queue_helpers_folder_is_on_the_task(tmp_path):
    (tmp_path / "queue.toml").write_text('name = "q"\nhelpers = "shared"\n')
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "h.py").write_text("X = 1\n")
    d = write_task(tmp_path)
    assert queue_helpers_dir(tmp_path) == (tmp_path / "shared").resolve()
    assert load_task(d).helper_dirs == ((tmp_path / "shared").resolve(),)
    assert read_queue_config(tmp_path).name == "q"


@pytest.mark.parametrize(("value", "problem"), [
    ('"../out"', "without '..'"), ('"/abs"', "without '..'"), ('"nope"', "does not exist"), ('"tasks"', "of its own"),
    ("3", "expected a folder name"),
])
def test_bad_helpers_folder_is_a_queue_problem(tmp_path, value, problem):
    (tmp_path / "queue.toml").write_text(f"helpers = {value}\n")
    (tmp_path / "tasks").mkdir()
    with pytest.raises(Problem) as ei:
        read_queue_config(tmp_path)
    assert ei.value.key == "helpers" and problem in ei.value.problem
    # loading the queue lists the problem and goes on with the defaults (nothing is lost)
    (err,) = [e for e in load_queue(tmp_path).errors if e.key == "helpers"]
    assert problem in err.problem


@pytest.mark.parametrize(("make", "value", "problem"), [
    (lambda r: (r / "gold").mkdir(), '"gold"', "reserved folder 'gold'"),
    (lambda r: (r / ".git").mkdir(), '".git"', "reserved folder '.git'"),
    (lambda r: (r / "verdicts" / "x").mkdir(parents=True), '"verdicts/x"', "reserved folder 'verdicts'"),
    (lambda r: ((r / "gold").mkdir(), (r / "h").symlink_to(r / "gold")), '"h"', "symbolic link 'h'"),
    (lambda r: ((r / "h").mkdir(), (r / "h" / "gold").mkdir()), '"h"', "reserved name 'gold'"),
    (lambda r: ((r / "h" / "sub" / ".git").mkdir(parents=True)), '"h"', "reserved name 'sub/.git'"),
    (lambda r: ((r / "h").mkdir(), (r / "h" / "up").symlink_to(r)), '"h"', "'up', a link that leads outside"),
    (lambda r: ((r / "h").mkdir(), (r / "h" / "k").symlink_to("/etc/hostname")), '"h"', "leads outside"),
])
def test_helpers_never_reach_gold_records_git_or_outside(tmp_path, make, value, problem):
    """The queue repo is untrusted: its helpers key cannot smuggle gold answers, records,
    .git (the remote URL and its token) or a path outside into every job."""
    make(tmp_path)
    (tmp_path / "queue.toml").write_text(f"helpers = {value}\n")
    with pytest.raises(Problem) as ei:
        queue_helpers_dir(tmp_path)
    assert ei.value.key == "helpers" and ei.value.file.name == "queue.toml" and problem in ei.value.problem
    d = write_task(tmp_path)
    assert load_task(d).helper_dirs == ()  # nothing of it reaches a job


def test_helper_link_inside_the_folder_is_fine_and_reserved_names_cover_the_records(tmp_path):
    from workstation.records.model import FOLDERS
    from workstation.task.helpers import RESERVED

    assert set(FOLDERS.values()) | {"gold", ".git", "tasks"} <= RESERVED
    (tmp_path / "h" / "sub").mkdir(parents=True)
    (tmp_path / "h" / "sub" / "m.py").write_text("X = 1\n")
    (tmp_path / "h" / "alias.py").symlink_to(tmp_path / "h" / "sub" / "m.py")
    (tmp_path / "queue.toml").write_text('helpers = "h"\n')
    assert queue_helpers_dir(tmp_path) == (tmp_path / "h").resolve()


def test_claim_scope_reads_dtypes_and_conditions():
    s = claim_scope("float16 outputs mismatch for N >= 4096; bf16 is fine")
    assert s["dtypes"] == ["bfloat16", "float16"] and s["conditions"] == [("N", ">=", 4096)]
    scope = claim_scope("fp16 mismatch for N >= 4096")
    inside = {"case": {"N": 8192, "dtype": "float16"}, "class": "mismatch"}
    assert within_claim(inside, "mismatch", scope) == []
    assert within_claim({"case": {"N": 8192, "dtype": "float16"}, "class": "nan"}, "mismatch", scope) == []
    out = within_claim({"case": {"N": 1024, "dtype": "bfloat16"}, "class": "compile-error"}, "mismatch", scope)
    assert len(out) == 3 and any("compile-error" in w for w in out) and any("N = 1024" in w for w in out)
