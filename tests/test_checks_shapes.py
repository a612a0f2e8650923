"""``edge-shapes`` and ``noncontiguous``: derivation rules, layouts, and the sample tasks."""

from __future__ import annotations

import pytest

from tests.conftest import SAMPLE_QUEUE, TASK_TOML, write_task
from workstation.analysis.compare import Comparison
from workstation.checks.edge_shapes import _patterns
from workstation.checks.noncontiguous import expand_eligible
from workstation.checks.support.costmodel import CostModel, cost_units, elements
from workstation.checks.support.legal import int_params, shrink_values, snap, value_plan
from workstation.checks.support.trials import region_phrase
from workstation.engine.report import to_json_dict
from workstation.engine.run import run_checks
from workstation.protocol.extras.calls import InputDesc
from workstation.protocol.layouts import KINDS, applies
from workstation.task.format import load_task
from workstation.task.model import ParamSpec


def check(runner, task_dir, cid: str) -> dict:
    """Run one check; return (status, findings of that check) from the JSON report."""
    doc = to_json_dict(run_checks(load_task(task_dir), runner, only=[cid]))
    st = next(c for c in doc["checks"] if c["check"] == cid)
    assert st["status"] != "error", st["reason"]
    return {"status": st["status"], "reason": st["reason"], "findings": [f for f in doc["findings"] if f["check"] == cid]}


def fails(res: dict) -> list[dict]:
    return [f for f in res["findings"] if f["severity"] == "fail"]


# -- derivation rules (no task code) ------------------------------------------------------------


def test_snap_respects_min_max_multiple_and_choices():
    s = ParamSpec(min=8, max=1024, multiple_of=8)
    assert snap(1, s, "up") == 8
    assert snap(127, s, "down") == 120 and snap(129, s, "up") == 136
    assert snap(2000, s, "up") is None and snap(2000, s, "nearest") == 1024
    assert snap(3, ParamSpec(min=1), "down") == 3
    c = ParamSpec(choices=(32, 64, 128))
    assert snap(100, c, "up") == 128 and snap(100, c, "down") == 64 and snap(16, c, "down") is None


@pytest.mark.parametrize("spec", [ParamSpec(min=1, max=65536), ParamSpec(min=8, max=4096, multiple_of=8),
                                  ParamSpec(min=100, max=300), ParamSpec(choices=(64, 128, 256, 1000))])
def test_value_plan_is_legal_new_and_has_the_edge_classes(spec):
    declared = [128, 256] if spec.choices is None or 128 in spec.choices else [64]
    plan = value_plan(declared, spec)
    values = [v.value for v in plan]
    assert values and all(spec.allows(v) for v in values)
    assert not set(values) & set(declared) and len(values) == len(set(values))
    if spec == ParamSpec(min=1, max=65536):
        assert {1, 127, 129, 255, 257}.issubset(values) and any(v.why == "a small prime" for v in plan)
        assert 384 in values  # an odd block multiple: tells "% 128" from "% 256"
        assert values[0] in (257, 255, 129, 127)  # a just-past-a-power-of-two size comes first
    if spec.multiple_of:
        assert all(v % 8 == 0 for v in values) and 8 in values
    if spec.min == 100:
        assert min(values) >= 100 and max(values) <= 300


def test_int_params_ignore_non_integers():
    cases = [{"M": 4, "N": 8, "causal": True, "scale": 0.5, "mode": "x", "dtype": "float16"}]
    assert int_params(cases) == ["M", "N"]
    assert elements({"M": 4, "N": 8}, ["M", "N"]) == 32


def test_shrink_values_are_smaller_legal_and_simplest_first():
    assert shrink_values(1000, ParamSpec(min=1)) == [1, 2, 3, 500, 999]
    assert shrink_values(96, ParamSpec(min=8, max=1024, multiple_of=8)) == [8, 48, 88]
    assert shrink_values(1, ParamSpec(min=1)) == []


def test_cost_model_is_predicted_from_the_parameters_not_measured():
    declared = [{"M": 64, "K": 1024, "dtype": "float32"}, {"M": 32, "K": 512, "dtype": "float32"}]
    m = CostModel.plan(declared, ["M", "K"], on_gpu=False)
    assert m.declared_max == 64 * 1024 and m.case_cap == 2 * 64 * 1024 and m.budget == 24 * 64 * 1024
    assert m.fits({"M": 64, "K": 2048}) and not m.fits({"M": 64, "K": 2049})  # 2049 rounds up to 2064
    assert cost_units({"M": 1, "N": 17}, ["M", "N"]) == 16 * 32  # whole 16-wide tiles
    assert m.max_cases == 24 and m.shrink_trials == 16
    assert CostModel.plan(declared, ["M", "K"], on_gpu=False) == m  # nothing measured: the same model every time
    tuned = CostModel.plan(declared, ["M", "K"], on_gpu=False, autotune_configs=4)  # re-tunes at each shape
    assert tuned.max_cases == 6 and tuned.shrink_trials == 4 and tuned.case_cap == m.case_cap
    gpu = CostModel.plan(declared, ["M", "K"], on_gpu=True)
    assert gpu.fits({"M": 1 << 10, "K": 1 << 17}) and not gpu.fits({"M": 1 << 10, "K": 1 << 18})
    assert gpu.max_cases == 48 and gpu.shrink_trials is None


def test_edge_shapes_plan_depends_only_on_the_task_and_the_derivation_seed():
    from types import SimpleNamespace

    from workstation.checks.edge_shapes import EdgeShapes
    from workstation.checks.support.legal import int_params
    from workstation.task.format import load_task

    task = load_task(SAMPLE_QUEUE / "tasks" / "rowsum-edge")

    def plan(seed: int):
        ctx = SimpleNamespace(task=task, cases=[dict(c) for c in task.cases], seeds=(0, 1, 2), on_gpu=False,
                              derivation_seed=seed)
        params = int_params(ctx.cases)
        params.sort(key=lambda p: p not in task.contract.reduction)
        trials, left = EdgeShapes()._derive(ctx, params, CostModel.plan(ctx.cases, params, False))
        return [(t.case, t.seed, t.label) for t in trials], [t.case for t in left]

    a, b = plan(1234), plan(1234)
    assert a == b and len(a[0]) == 24 and a[1]  # the count cap, then the rest left out
    assert {seed for _c, seed, _w in a[0]} == {1234}  # derived inputs come from the derivation seed
    assert [c for c, _s, _w in plan(99)[0]] == [c for c, _s, _w in a[0]]  # the cases are the task's own
    cap = 2 * max(cost_units(c, ["K", "M"]) for c in task.cases)
    assert all(cost_units(c, ["K", "M"]) <= cap for c, _s, _w in a[0])


def test_derivation_seed_follows_the_task_version_and_the_kws_version(tmp_path):
    import shutil
    import subprocess

    from workstation.engine.derivation import derivation_for, derivation_seed, folder_tree_id

    src = SAMPLE_QUEUE / "tasks" / "rowsum-edge"
    head = subprocess.run(["git", "rev-parse", f"HEAD:{src.relative_to(SAMPLE_QUEUE.parent)}"],
                          cwd=SAMPLE_QUEUE.parent, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--", str(src)], cwd=SAMPLE_QUEUE.parent,
                           capture_output=True, text=True).stdout.strip()
    copy = tmp_path / "rowsum-edge"
    shutil.copytree(src, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "__pycache__").mkdir()
    (copy / "__pycache__" / "x.pyc").write_bytes(b"ignored")
    if head.returncode == 0 and not dirty:  # a checkout: the content hash is git's tree id
        assert folder_tree_id(copy) == head.stdout.strip()
    d = derivation_for(copy)
    assert d.source == "content hash" and d.version == folder_tree_id(src)
    assert d == derivation_for(copy) and d.seed == derivation_seed(d.version, d.kws)
    assert derivation_seed(d.version, "9.9.9") != d.seed  # a new kws explores other inputs
    assert derivation_for(copy, tree=d.version).seed == d.seed  # the tree id of the same files: the same seed
    (copy / "candidate.py").write_text((copy / "candidate.py").read_text() + "\n# edited\n")
    assert derivation_for(copy).seed != d.seed  # another version


def test_divisibility_pattern_from_results():
    from workstation.checks.support.trials import Trial, TrialResult

    def r(k, status):
        return TrialResult(Trial({"M": 8, "K": k, "dtype": "float32"}, 0), None, None, status)  # type: ignore[arg-type]

    res = [r(k, "mismatch") for k in (1, 127, 129, 192)] + [r(k, "pass") for k in (128, 256, 384, 1024)]
    p = _patterns(res, ["M", "K"], [{"M": 8, "K": 1024, "dtype": "float32"}])
    assert p["rules"] == {"K": 128} and "K % 128 != 0" in p["text"]


def test_region_phrase_names_the_ragged_tile():
    c = Comparison(ok=False, reason="", shape=(4, 1030), dtype="float32", numel=4120, n_bad=24,
                   bad_region={"dim0": [0, 3], "dim1": [1024, 1029]})
    assert region_phrase(c) == "all 4 rows, cols 1024..1029 of 1030 (the ragged last tile past 1024)"
    c1 = Comparison(ok=False, reason="", shape=(1,), dtype="float32", numel=1, n_bad=1, bad_region={"dim0": [0, 0]})
    assert region_phrase(c1) == "the only element"


# -- layouts ----------------------------------------------------------------------------------


def test_layout_kinds_apply_where_they_change_strides():
    assert all(applies(k, (4, 8)) for k in KINDS)
    assert not applies("transposed", (8,)) and not applies("padded-rows", (8,))
    assert applies("column-slice", (8,)) and applies("misaligned", (8,))
    assert not applies("row-step", (1, 8)) and not any(applies(k, ()) for k in KINDS)


def test_relayout_keeps_values_and_changes_strides():
    torch = pytest.importorskip("torch")
    from workstation.harness.layouts import relayout

    x = torch.randn(6, 10)
    want = {"padded-rows": (128, 1), "column-slice": (30, 1), "row-step": (20, 1), "col-step": (20, 2),
            "transposed": (1, 6), "misaligned": (10, 1)}
    for kind, stride in want.items():
        y = relayout(x, kind)
        assert torch.equal(y, x) and y.stride() == stride, kind
    assert relayout(x, "misaligned").data_ptr() % 16 != 0
    assert relayout(x, "column-slice").storage_offset() == 10
    e = relayout(x, "expand")
    assert e.stride(0) == 0 and torch.equal(e, x[:1].expand(6, 10))
    # padding outside the view is NaN, so a kernel reading it shows
    base = relayout(x, "padded-rows")
    assert torch.isnan(torch.as_strided(base, (1, 1), (1, 1), base.storage_offset() + 10)).all()


def test_expand_rule_only_broadcast_operands():
    reads = [InputDesc(index=0, kind="tensor", dtype="float16", shape=[64, 128]),
             InputDesc(index=1, kind="tensor", dtype="float16", shape=[128]),
             InputDesc(index=2, kind="tensor", dtype="int64", shape=[64]),
             InputDesc(index=3, kind="tensor", dtype="float32", shape=[1])]
    assert expand_eligible(reads) == [1]


# -- the checks on tasks ------------------------------------------------------------------------

DROP_TAIL = """\
def add(x, y):
    out = x + y
    n = x.shape[0] // 4 * 4
    out[n:] = 0  # drops the ragged tail
    return out
"""

AS_STRIDED = """\
import torch

def add(x, y):
    # assumes unit stride: wrong for strided views
    return torch.as_strided(x, x.shape, (1,)) + y
"""


def test_edge_shapes_shrinks_a_synthetic_tail_bug(runner, tmp_path):
    d = write_task(tmp_path, candidate=DROP_TAIL)
    res = check(runner, d, "edge-shapes")
    [f] = [f for f in fails(res) if f["evidence"]["class"] == "mismatch"]
    ev = f["evidence"]
    assert ev["case"]["N"] == 1 and ev["class"] == "mismatch"  # shrunk to the smallest failing size
    assert "N % 4 != 0" in f["summary"] and "--case" in f["repro"]
    assert ev["smallest_failing"]["outputs"][0]["mismatched"] == 1


def test_edge_shapes_rowsum_edge_fails_with_the_tail_pattern(runner):
    res = check(runner, SAMPLE_QUEUE / "tasks" / "rowsum-edge", "edge-shapes")
    [f] = [f for f in fails(res) if f["evidence"]["class"] == "mismatch"]
    ev = f["evidence"]
    assert ev["case"]["K"] % 128 and ev["case"]["M"] == 1
    assert "K % 128 != 0" in f["summary"]
    assert ev["smallest_failing"]["outputs"][0]["worst"]["got"] == 0.0
    info = next(x for x in res["findings"] if x["severity"] == "info")
    derived = info["evidence"]["derived"]
    planned = [c for c in derived if "block that divides" not in c["why"]]  # not the refinement probes
    assert len(planned) <= 24 and all(1 <= c["case"]["K"] <= 65536 for c in derived)
    assert info["evidence"]["seed"] == info["evidence"]["derivation"]["seed"] == f["evidence"]["seed"]
    assert f"--seeds {f['evidence']['seed']}" in f["repro"]  # the repro runs the derived inputs exactly
    assert info["evidence"]["cost_model"]["case_cap_units"] == 2 * 32768
    assert any(c["case"]["K"] == 384 and c["status"] == "pass" for c in derived)  # tells % 128 from % 256


def test_edge_shapes_clean_task_has_no_fail(runner):
    res = check(runner, SAMPLE_QUEUE / "tasks" / "softmax-gen", "edge-shapes")
    assert not fails(res) and res["status"] == "pass"


def test_noncontiguous_scale_rows_reports_layout_and_strides(runner):
    res = check(runner, SAMPLE_QUEUE / "tasks" / "scale-rows-noncontig", "noncontiguous")
    by_layout = {f["evidence"]["layout"]: f for f in fails(res)}
    assert {"column-slice", "transposed", "padded-rows"} <= set(by_layout)
    f = by_layout["column-slice"]
    assert f["evidence"]["inputs_at_fault"] == [0]  # x, not the scale vector s
    ins = {d["index"]: d for d in f["evidence"]["failing"]["candidate_inputs"]}
    assert ins[0]["storage_offset"] > 0 and ins[0]["stride"][0] == 3 * ins[0]["shape"][1]
    assert "stride" in f["summary"] and "read outside the view" in f["summary"]
    assert "expand" not in by_layout  # s honours its own stride, stride 0 included


def test_noncontiguous_synthetic_unit_stride_assumption(runner, tmp_path):
    d = write_task(tmp_path, candidate=AS_STRIDED)
    res = check(runner, d, "noncontiguous")
    kinds = {f["evidence"]["layout"] for f in fails(res)}
    assert "row-step" in kinds and "column-slice" not in kinds


def test_noncontiguous_clean_task_and_contiguous_only_skip(runner, tmp_path):
    assert not fails(check(runner, SAMPLE_QUEUE / "tasks" / "softmax-gen", "noncontiguous"))
    toml = TASK_TOML.format(id="add", status="pass", failure_class="") + "\n[contract]\ncontiguous_only = true\n"
    d = write_task(tmp_path, toml=toml)
    res = check(runner, d, "noncontiguous")
    assert res["status"] == "skip" and "contiguous_only = true" in res["reason"]


def test_generic_shrinker_moves_to_the_simplest_same_failure_within_budget():
    from workstation.checks.support.shrink import shrink

    # "fails" when n is odd; simpler = smaller; candidates: n-2, n//2, 1
    calls = []

    def run(xs):
        calls.append(list(xs))
        return [(x, x % 2 == 1) for x in xs]

    got = shrink((99, True), candidates=lambda r: [x for x in (r[0] - 2, r[0] // 2, 1) if 0 < x < r[0]],
                 run=run, keeps_failure=lambda r: r[1], size=lambda r: r[0], cost=lambda r: 1.0)
    assert got.best == (1, True) and got.path[0] == (99, True)
    assert got.spent == sum(len(c) for c in calls) and got.rounds == len(calls)
    capped = shrink((99, True), candidates=lambda r: [r[0] - 2] if r[0] > 2 else [], run=run,
                    keeps_failure=lambda r: r[1], size=lambda r: r[0], cost=lambda r: 1.0, budget=2.0)
    assert capped.best == (95, True) and capped.spent == 2.0
