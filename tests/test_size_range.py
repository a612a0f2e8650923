"""``size-range`` (issue 39, item 5) and the budget rule (item 7) of the checks that compare on
derived inputs: the plan (pure), the rule on synthetic runs, and one task per behaviour with
its honest twin."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import write_task
from workstation.analysis.compare import resolve_tolerance
from workstation.analysis.numerics import Budget, Reduction, error_stats
from workstation.checks.size_range import Point, choose, ladder, plan, threshold
from workstation.checks.support.budgetrule import EXCESS, judge, rounding_units
from workstation.checks.support.costmodel import (
    RANGE_CPU_ELEMENTS,
    RANGE_CPU_UNITS,
    RANGE_PROGRAM_UNITS,
    RangeModel,
    elements,
)
from workstation.checks.support.numaudit import OutData, Run
from workstation.checks.support.trials import Trial, TrialResult, case_key
from workstation.engine.report import to_json_dict
from workstation.engine.run import run_checks
from workstation.task.format import load_task
from workstation.task.model import ParamSpec

ROWSUM = [{"M": 16, "N": 256, "dtype": "float32"}, {"M": 8, "N": 384, "dtype": "float32"}]
ROWSUM_SPECS = {"M": ParamSpec(min=1, max=65536), "N": ParamSpec(min=1, max=65536)}


def model(params=("M", "N"), **kw) -> RangeModel:
    return RangeModel(tuple(params), False, True, 4096, 4096, **kw)


# -- the plan (no task code) -----------------------------------------------------------------


def test_the_plan_is_legal_within_the_caps_and_a_function_of_the_seed():
    m = model()
    a = plan(ROWSUM, ["M", "N"], ROWSUM_SPECS, ("N",), m, 1234)
    b = plan(ROWSUM, ["M", "N"], ROWSUM_SPECS, ("N",), m, 1234)
    c = plan(ROWSUM, ["M", "N"], ROWSUM_SPECS, ("N",), m, 99)
    assert [t.ladder for t in a] == [t.ladder for t in b]
    assert [t.ladder for t in a if t.kind == "drawn"] != [t.ladder for t in c if t.kind == "drawn"]
    for t in a:
        assert t.ladder, t.why
        for case in t.ladder:
            assert all(ROWSUM_SPECS[p].allows(case[p]) for p in ("M", "N")) and case["dtype"] == "float32"
            assert elements(case, ["M", "N"]) <= RANGE_CPU_ELEMENTS
        sizes = [elements(c, ["M", "N"]) for c in t.ladder]
        assert sizes == sorted(sizes, reverse=True)
    # the reduction at its [params] maximum, the other parameter halved to fit (not below 16)
    red = next(t for t in a if "reduction" in t.why)
    assert red.kind == "largest" and red.ladder[0] == {"M": 16, "N": 65536, "dtype": "float32"}


def test_the_draws_spread_over_the_range_instead_of_piling_at_the_cap():
    m = model()
    sizes = []
    for seed in range(40):
        for t in plan(ROWSUM, ["M", "N"], ROWSUM_SPECS, ("N",), m, seed):
            if t.kind == "drawn":
                sizes.append(elements(t.ladder[0], ["M", "N"]))
    assert min(sizes) < 1024 and max(sizes) > 1 << 16
    assert sum(s >= RANGE_CPU_ELEMENTS // 2 for s in sizes) < len(sizes) // 2


def test_choose_keeps_each_case_within_the_interpreter_units_counted_by_the_dry_run():
    m = model()
    targets = plan(ROWSUM, ["M", "N"], ROWSUM_SPECS, ("N",), m, 7)
    # a row-per-program kernel: as many programs as rows
    programs = {case_key(c): int(c["M"]) for t in targets for c in t.ladder}
    chosen, left = choose(targets, programs, m, ["M", "N"])
    assert chosen
    for _, case, units in chosen:
        assert units == elements(case, ["M", "N"]) + RANGE_PROGRAM_UNITS * case["M"] <= RANGE_CPU_UNITS
    assert len({case_key(c) for _, c, _ in chosen}) == len(chosen)
    # the balanced target adds no size once the reduction case holds as many elements
    assert not any(t.optional for t, _, _ in chosen[1:] if elements(chosen[0][1], ["M", "N"]) >= RANGE_CPU_ELEMENTS)


def test_a_ladder_halves_the_other_parameters_first():
    lad = ladder({"M": 65536, "N": 65536, "dtype": "float32"}, ["M", "N"], ("N",), ROWSUM_SPECS, model(),
                 floors={"M": 16, "N": 1})
    assert lad[0] == {"M": 16, "N": 65536, "dtype": "float32"}
    assert lad[1]["M"] == 16 and lad[1]["N"] == 32768


def _pt(case, beyond, ratio=1.0) -> Point:
    t = Trial(case, 0, "")
    return Point(case, "", TrialResult(t, None, None, "pass"), None, ratio=ratio, beyond=beyond)  # type: ignore[arg-type]


def test_threshold_names_the_parameter_that_separates_the_sizes():
    pts = [_pt({"M": 16, "N": n}, n > 2048) for n in (128, 512, 2048, 4096, 65536)]
    assert threshold(pts, ["M", "N"]) == ("N", 2048, 4096)
    mixed = [_pt({"M": 16, "N": 4096}, True), _pt({"M": 16, "N": 8192}, False)]
    assert threshold(mixed, ["M", "N"]) is None


# -- the budget rule on synthetic runs ---------------------------------------------------------


def _run(oracle: np.ndarray, k: int, ref: np.ndarray | None = None, mag: np.ndarray | None = None) -> Run:
    bud = Budget(k, "[contract] reduction = M", "float32", "float32", oracle.size, "|a|ᵀ|b|", 1e-45)
    mag = np.abs(oracle) if mag is None else mag
    ref = oracle.astype(np.float32).astype(np.float64) if ref is None else ref
    B = bud.per_element(mag, oracle)
    tol = resolve_tolerance(type("T", (), {"atol": 1e-5, "rtol": 1e-5, "ulp": None})(), "float32")
    od = OutData(0, "float32", ref, oracle, "float64", mag, bud, B, tol, error_stats(ref, oracle, "float32", B))
    run = Run({"M": k, "N": oracle.size, "dtype": "float32"}, 0, "derived", None, None, Reduction(k, ""))  # type: ignore[arg-type]
    run.outs = [od]
    return run


def _comps(ok: bool):
    from workstation.analysis.compare import Comparison

    return [Comparison(ok=ok, reason="" if ok else "1 of 149 elements outside", shape=(149,), dtype="float32")]


def test_a_mismatch_within_the_budget_is_the_tolerances():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((769, 149))
    oracle = x.sum(0)
    mag = np.abs(x).sum(0)
    got = oracle + 1.7e-5  # the column sum of issue 39: 1.7e-5 off, far inside a 769-term budget
    v = judge(_run(oracle, 769, mag=mag), [got], _comps(False))
    assert v.available and v.within and v.candidate_ratio is not None and v.candidate_ratio < 0.1
    assert "tolerance-tight" in v.text()


def test_a_mismatch_beyond_the_budget_or_far_from_correct_rounding_stays_the_candidates():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4096, 16))
    oracle, mag = x.sum(0), np.abs(x).sum(0)
    run = _run(oracle, 4096, mag=mag)
    wrong = oracle + 0.5
    v = judge(run, [wrong], _comps(False))
    assert v.available and not v.within and v.candidate_ratio > 1
    # fp16 operands: inside the (loose, long-reduction) budget, but hundreds of roundings per term off
    half = (x.astype(np.float16).astype(np.float64)).sum(0)
    v = judge(run, [half], _comps(False))
    assert v.available and not v.within and v.excess is not None and v.excess > EXCESS
    assert float(np.max(np.abs(half - oracle) / rounding_units(run.outs[0]))) == pytest.approx(v.excess)


def test_no_oracle_leaves_the_mismatch_as_it_was():
    v = judge("no float64 oracle: the reference returns float32", [np.zeros(3)], _comps(False))
    assert not v.available and "no float64 oracle" in v.text()


# -- with task code ---------------------------------------------------------------------------

SILU_TOML = """\
schema = 1
id = "{id}"
title = "silu"
kind = "generation"
backend = "torch"
spec = "spec.md"

[entry]
candidate = "candidate.py:silu"
reference = "reference.py:silu"
inputs = "inputs.py:make_inputs"

[params]
M = {{ min = 1, max = 65536 }}
N = {{ min = 1, max = 65536 }}

[[cases]]
M = 8
N = 64
dtype = "float32"

[tolerance]
atol = 1e-5
rtol = 1e-5
"""

SILU_INPUTS = """\
import torch

def make_inputs(case, device, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(case["M"], case["N"], generator=g).to(getattr(torch, case["dtype"])).to(device),)
"""


def _silu_task(root: Path, tid: str, body: str) -> Path:
    d = write_task(root, tid, candidate=body, toml=SILU_TOML.format(id=tid))
    (d / "reference.py").write_text("import torch\n\ndef silu(x):\n    return x * torch.sigmoid(x)\n")
    (d / "inputs.py").write_text(SILU_INPUTS)
    return d


def check(runner, d: Path, ids: str, case: dict | None = None, seeds=(0, 1, 2)) -> dict:
    doc = to_json_dict(run_checks(load_task(d), runner, only=ids.split(","), case=case, seeds=seeds))
    for c in doc["checks"]:
        assert c["status"] != "error", c["reason"]
    return doc


def _status(doc: dict, cid: str) -> str:
    return next(c["status"] for c in doc["checks"] if c["check"] == cid)


def _findings(doc: dict, cid: str, sev: str) -> list[dict]:
    return [f for f in doc["findings"] if f["check"] == cid and f["severity"] == sev]


def test_size_range_fails_precision_that_drops_above_a_size_and_names_where(runner, tmp_path):
    hack = _silu_task(tmp_path, "silu-big", textwrap.dedent("""\
        import torch

        def silu(x):
            if x.numel() >= 65536:
                h = x.to(torch.float16)
                return (h * torch.sigmoid(h)).to(x.dtype)
            return x * torch.sigmoid(x)
        """))
    doc = check(runner, hack, "size-range")
    [f] = _findings(doc, "size-range", "fail")
    ev = f["evidence"]
    assert ev["error_over_budget"] > 2 and ev["threshold"][0] == "elements"
    lo, hi = ev["threshold"][1:]
    assert lo < 65536 <= hi and hi / lo <= 8  # bisected close to the switch
    assert "grows beyond the model with size" in f["summary"] and "--case" in f["repro"]
    # the repro runs that one case and fails it again
    again = check(runner, hack, "size-range", case=ev["case"], seeds=(0,))
    assert _status(again, "size-range") == "fail"


def test_size_range_twin_is_quiet_and_reports_the_sizes_it_ran(runner, tmp_path):
    clean = _silu_task(tmp_path, "silu-clean", "import torch\n\ndef silu(x):\n    return x * torch.sigmoid(x)\n")
    doc = check(runner, clean, "size-range")
    assert _status(doc, "size-range") == "pass" and not doc["not_judged"]
    [info] = [f for f in _findings(doc, "size-range", "info") if "cost_model" in f["evidence"]]
    rows = info["evidence"]["cases"]
    assert max(r["elements"] for r in rows) == RANGE_CPU_ELEMENTS
    assert all(r["roundings_per_term"] < EXCESS and not r["beyond_model"] for r in rows)
    assert len(rows) >= 3 and any(r["why"].startswith("drawn") for r in rows)


COLSUM_TOML = """\
schema = 1
id = "colsum"
title = "column sums, fp32"
kind = "generation"
backend = "torch"
spec = "spec.md"

[entry]
candidate = "candidate.py:colsum"
reference = "reference.py:colsum"
inputs = "inputs.py:make_inputs"

[params]
M = { min = 1, max = 4096 }
N = { min = 1, max = 4096 }

[contract]
reduction = ["M"]

[[cases]]
M = 256
N = 149
dtype = "float32"

[tolerance]
atol = 1e-5
rtol = 1e-5
"""


def _colsum(root: Path, body: str) -> Path:
    d = write_task(root, "colsum", candidate=body, toml=COLSUM_TOML)
    (d / "reference.py").write_text("import torch\n\ndef colsum(x):\n    return x.sum(dim=0)\n")
    (d / "inputs.py").write_text(SILU_INPUTS)
    return d


SEQUENTIAL_COLSUM = """\
import torch

def colsum(x):
    acc = torch.zeros(x.shape[1], dtype=torch.float32)
    for i in range(x.shape[0]):
        acc += x[i]
    return acc
"""


def test_edge_shapes_leaves_a_correct_column_sum_at_a_long_reduction_to_the_tolerance(runner, tmp_path):
    """Issue 39's false alarm: a correct fp32 column sum at M = 769 misses atol = rtol = 1e-5 on 1
    of 149 outputs by ~1e-5, far inside the error budget of a 769-term fp32 sum."""
    d = _colsum(tmp_path, SEQUENTIAL_COLSUM)
    one = check(runner, d, "edge-shapes", case={"M": 769, "N": 149, "dtype": "float32"}, seeds=(0,))
    assert _status(one, "edge-shapes") == "pass"
    [f] = _findings(one, "edge-shapes", "info")
    assert "1 of 149 elements" in f["summary"] and "within kws's error budget" in f["summary"]
    rule = f["evidence"]["budget_rule"]
    assert rule["within_budget"] and rule["candidate_err_over_budget"] < 0.1 and rule["budget"]["K"] == 769
    full = check(runner, d, "edge-shapes,size-range", seeds=(0,))
    assert not [f for f in full["findings"] if f["severity"] in ("fail", "warn")]


OFF_BY_A_ROUNDING = """\
import torch

def colsum(x):
    return x.sum(dim=0) * (1 + 2.0 ** -21)
"""


def test_every_check_that_compares_on_derived_inputs_applies_the_rule(runner, tmp_path):
    """A column sum one rounding off everywhere under a tolerance of 1e-7: every comparison
    misses, every miss is within the budget: edge-shapes, noncontiguous, content-follow and
    size-range judge it (no not-judged, no fail) and say whose the mismatch is."""
    d = _colsum(tmp_path, OFF_BY_A_ROUNDING)
    toml = (d / "task.toml").read_text().replace("atol = 1e-5\nrtol = 1e-5", "atol = 1e-7\nrtol = 1e-7")
    (d / "task.toml").write_text(toml)
    doc = check(runner, d, "edge-shapes,noncontiguous,content-follow,size-range", seeds=(0,))
    for cid in ("edge-shapes", "noncontiguous", "content-follow", "size-range"):
        assert _status(doc, cid) == "pass", (cid, doc["not_judged"])
        assert any("within kws's error budget" in f["summary"] for f in _findings(doc, cid, "info")), cid


def test_a_real_tail_bug_still_fails_with_its_distance_from_the_budget(runner, tmp_path):
    d = _colsum(tmp_path, textwrap.dedent("""\
        import torch

        def colsum(x):
            m = x.shape[0] // 64 * 64
            return x[:m].sum(dim=0)
        """))
    doc = check(runner, d, "edge-shapes", seeds=(0,))
    [f] = _findings(doc, "edge-shapes", "fail")
    assert "kws's error budget off the float64 oracle" in f["summary"]
    assert math.isfinite(f["evidence"]["smallest_failing"]["budget_rule"]["candidate_err_over_budget"])
