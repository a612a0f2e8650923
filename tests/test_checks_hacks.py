"""The checks for published kernel hacks (issue 27): late-write, call-count, thread-census,
input-distributions, forbidden-ops, each on a defective and a clean synthetic candidate
(CPU; a 1-D ``add`` of N = 64, see tests/hostile.py)."""

from __future__ import annotations

import pytest

from tests.hostile import findings, make_task, result
from workstation.engine.run import run_checks
from workstation.task.format import load_task

SERIES = ["late-write", "call-count", "thread-census"]

CLEAN = """\
def add(x, y):
    return x + y
"""

#: fills its output from a thread 5 ms after returning.
LATE = """\
import threading, time
import torch

def add(x, y):
    out = torch.zeros_like(x)

    def fill():
        time.sleep(0.005)
        torch.add(x, y, out=out)

    threading.Thread(target=fill, name="late-fill", daemon=True).start()
    return out
"""

#: honest for its first 3 calls (a plain correctness run makes fewer), then skips the work.
COUNTING = """\
_calls = [0]

def add(x, y):
    _calls[0] += 1
    if _calls[0] <= 3:
        return x + y
    return x.clone()
"""


@pytest.fixture(scope="module")
def series_reports(runner, tmp_path_factory):
    root = tmp_path_factory.mktemp("hacks")
    out = {}
    for name, src in (("clean", CLEAN), ("late", LATE), ("counting", COUNTING)):
        out[name] = run_checks(load_task(make_task(root, f"series-{name}", src)), runner, only=SERIES)
    return out


def test_series_checks_are_quiet_on_a_clean_candidate(series_reports):
    res = series_reports["clean"]
    for cid in SERIES:
        assert result(res, cid).status == "pass", (cid, [f.summary for f in findings(res, cid)])


def test_late_write_catches_a_thread_that_fills_the_output_after_return(series_reports):
    res = series_reports["late"]
    (f,) = findings(res, "late-write", "fail")
    assert "written after the call returns" in f.summary
    lw = f.evidence["late_writes"][0]
    assert lw["changed"] > 0 and lw["fingerprint_after_return"] != lw["fingerprint_after_sync"]


def test_thread_census_names_the_candidates_thread(series_reports):
    res = series_reports["late"]
    (f,) = findings(res, "thread-census", "fail")
    assert "late-fill" in f.summary and "candidate.py" in f.summary
    assert f.evidence["threads"][0]["task_code"] is True


def test_call_count_catches_a_candidate_that_switches_after_three_calls(series_reports):
    res = series_reports["counting"]
    fails = findings(res, "call-count", "fail")
    serial = next(f for f in fails if "serial call(s)" in f.summary)
    assert serial.evidence["matching_calls"][:2] == [1, 2]
    assert 4 not in serial.evidence["matching_calls"]
    assert result(res, "late-write").status == "pass"


#: right only at the magnitudes normal inputs reach: clamps at 5.
CLAMPING = """\
import torch

def add(x, y):
    return torch.clamp(x, -5, 5) + torch.clamp(y, -5, 5)
"""


def test_input_distributions_catches_a_kernel_right_only_on_normal_inputs(runner, tmp_path):
    res = run_checks(load_task(make_task(tmp_path, "dist-clamp", CLAMPING)), runner, only=["input-distributions"])
    fails = findings(res, "input-distributions", "fail")
    assert fails and any("heavy" in f.summary or "x 64" in f.summary for f in fails)
    assert all(f.evidence["inputs_varied"] == [0, 1] for f in fails)
    clean = run_checks(load_task(make_task(tmp_path, "dist-clean", CLEAN)), runner, only=["input-distributions"])
    assert result(clean, "input-distributions").status == "pass"
    (info,) = findings(clean, "input-distributions", "info")
    assert "x 64" in info.summary and "heavy" in info.summary


MATMUL_INPUTS = """\
import torch

def make_inputs(case, device, seed):
    g = torch.Generator().manual_seed(seed)
    n = case["N"]
    return torch.randn(n, n, generator=g).to(device), torch.randn(n, n, generator=g).to(device)
"""

MATMUL_REFERENCE = """\
def mm(a, b):
    return a @ b
"""

#: the same product without torch.mm / matmul (a broadcast multiply and a sum).
MATMUL_NO_MM = """\
def mm(a, b):
    return (a[:, :, None] * b[None, :, :]).sum(1)
"""


def test_forbidden_ops_fails_a_candidate_calling_a_forbidden_op(runner, tmp_path):
    for name, cand in (("forbid-mm", MATMUL_REFERENCE), ("forbid-clean", MATMUL_NO_MM)):
        make_task(tmp_path, name, cand, reference=MATMUL_REFERENCE, inputs=MATMUL_INPUTS, entry="mm",
                  cases=[{"N": 8, "dtype": "float32"}], atol=1e-4, rtol=1e-4)
    for name in ("forbid-mm", "forbid-clean"):
        toml = tmp_path / "tasks" / name / "task.toml"
        toml.write_text(toml.read_text().replace("[contract]\n", "[contract]\nforbidden_ops = [\"aten::mm\"]\n"))
    bad = run_checks(load_task(tmp_path / "tasks" / "forbid-mm"), runner, only=["forbidden-ops"])
    (f,) = findings(bad, "forbidden-ops", "fail")
    assert "mm x1" in f.summary and f.evidence["source"]["file"] == "candidate.py"
    assert f.evidence["source"]["line"] == 2
    ok = run_checks(load_task(tmp_path / "tasks" / "forbid-clean"), runner, only=["forbidden-ops"])
    assert result(ok, "forbidden-ops").status == "pass"


def test_forbidden_ops_is_not_scheduled_without_a_declaration(tmp_path):
    from workstation.checks.forbidden_ops import ForbiddenOps, op_names

    task = load_task(make_task(tmp_path, "no-forbid", CLEAN))
    assert "forbidden_ops" in ForbiddenOps.applies(task)
    assert op_names(("aten::mm", "torch.addmm", "aten.bmm.default")) == {"mm", "addmm", "bmm"}
