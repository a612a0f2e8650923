"""The checks for published kernel hacks (issue 27): late-write, call-count, thread-census,
input-distributions, each on a defective and a clean synthetic candidate (CPU; a 1-D
``add`` of N = 64, see tests/hostile.py)."""

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

