"""The numerics checks on the sample tasks (each fault caught, clean controls pass) and on
small synthetic torch tasks written to tmp_path (reference mutation, nondeterminism,
internal bfloat16, a reference without a float64 path, fp32-only validation)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from tests.conftest import SAMPLE_QUEUE, write_task
from workstation.engine.report import dumps, to_json_dict
from workstation.engine.run import run_checks
from workstation.task.format import load_task

NUMERICS = ("tolerance-loose", "tolerance-tight", "precision-regime", "reference-suspect")
EXPECT_DIR = Path(__file__).parent / "sample_expectations.d"
CLEAN = sorted(p.stem for p in EXPECT_DIR.glob("*.toml")
               if tomllib.loads(p.read_text()).get("clean") and (SAMPLE_QUEUE / "tasks" / p.stem).is_dir())


@pytest.fixture(scope="module")
def report(runner):
    cache: dict[str, dict] = {}

    def get(task_dir: Path | str, key: str | None = None) -> dict:
        k = key or str(task_dir)
        if k not in cache:
            cache[k] = to_json_dict(run_checks(load_task(task_dir), runner, only=NUMERICS))
        return cache[k]

    return get


def sample(report, task_id: str) -> dict:
    return report(SAMPLE_QUEUE / "tasks" / task_id)


def findings(doc: dict, check: str, severity: str | None = None) -> list[dict]:
    return [f for f in doc["findings"] if f["check"] == check and (severity is None or f["severity"] == severity)]


def status(doc: dict, check: str) -> str:
    return next(c["status"] for c in doc["checks"] if c["check"] == check)


def test_every_numerics_finding_carries_a_derivation(report):
    for tid in ("softmax-loose-atol", "matmul-fp16-tight", "rmsnorm-fp32-only", "gelu-ref-imports-candidate"):
        doc = sample(report, tid)
        dumps(doc)  # strict JSON (no NaN literals, no numpy scalars)
        for f in doc["findings"]:
            if f["check"] in NUMERICS:
                assert f["evidence"].get("derivation"), (tid, f["summary"])


def test_softmax_loose_atol_accepts_zeros(report):
    doc = sample(report, "softmax-loose-atol")
    fails = findings(doc, "tolerance-loose", "fail")
    controls = {f["evidence"]["control"] for f in fails}
    assert {"zeros", "rolled", "permuted", "random"} <= controls
    zero = next(f for f in fails if f["evidence"]["control"] == "zeros")
    assert "all-zero output" in zero["summary"] and "atol = 0.01" in zero["summary"]
    assert zero["evidence"]["control_vs_oracle"]["max_err_over_budget"] > 1e3
    assert "--only tolerance-loose" in zero["repro"]
    # the tolerance is also far beyond the budget, and kws offers a tolerance
    assert findings(doc, "tolerance-loose", "warn")
    sug = [f for f in findings(doc, "tolerance-loose", "info") if "suggested" in f["evidence"]]
    assert sug and sug[0]["evidence"]["suggested"]["atol"] < 1e-6
    assert status(doc, "tolerance-tight") != "fail" and status(doc, "precision-regime") != "fail"
    assert status(doc, "reference-suspect") != "fail"


def test_matmul_fp16_tight_is_impossible(report):
    doc = sample(report, "matmul-fp16-tight")
    (f,) = findings(doc, "tolerance-tight", "fail")
    assert "no float16 output can meet" in f["summary"]
    ev = f["evidence"]
    assert ev["rounded_oracle_vs_oracle"]["mismatched"] > 0.9 * ev["rounded_oracle_vs_oracle"]["elements"]
    assert ev["suggested"]["atol"] >= 1e-4 and ev["suggested"]["rtol"] >= 9.7e-4  # at least 2u of fp16
    assert "2^-11" in ev["derivation"]
    for cid in ("tolerance-loose", "reference-suspect", "precision-regime"):
        assert status(doc, cid) != "fail", cid


def test_matmul_fp32_tf32_from_aot_ir(report):
    doc = sample(report, "matmul-fp32-tf32")
    (f,) = findings(doc, "precision-regime", "fail")
    ev = f["evidence"]
    assert ev["source"] == {"file": "candidate.py", "line": 50}
    assert any("tf32" in m for m in ev["mma"])
    assert ev["dot"]["input_precision"] == "tf32"
    assert "interpreter" in f["summary"] and "true fp32" in ev["derivation"]
    assert ev["comparison"]["mismatched"] > 0
    for cid in ("tolerance-loose", "tolerance-tight", "reference-suspect"):
        assert status(doc, cid) != "fail", cid


def test_rmsnorm_fp32_only_validation(report):
    doc = sample(report, "rmsnorm-fp32-only")
    warns = findings(doc, "precision-regime", "warn")
    assert any(f["summary"].startswith("fp32-only validation") for f in warns)
    fails = findings(doc, "precision-regime", "fail")
    fp16 = [f for f in fails if f["evidence"].get("dtype") == "float16"]
    assert fp16 and fp16[0]["evidence"]["zero_rows"] > 0
    assert fp16[0]["evidence"]["tolerance_source"] == "declared"
    # the IR names the fp16 accumulator line
    srcs = {(f["evidence"].get("source") or {}).get("line") for f in warns}
    assert 32 in srcs and 33 in srcs
    # bfloat16 under the interpreter: its own tl.sum is wrong, so no fail rests on it
    assert not [f for f in fails if f["evidence"].get("dtype") == "bfloat16"]


def test_layernorm_reference_accumulates_in_half(report):
    doc = sample(report, "layernorm-ref-half")
    (f,) = findings(doc, "reference-suspect", "fail")
    ev = f["evidence"]
    assert ev["reference_vs_oracle"]["max_err_over_budget"] > 100
    assert ev["candidate_budget_ratio"] is not None and ev["candidate_budget_ratio"] < 2
    assert status(doc, "tolerance-tight") != "fail" and status(doc, "precision-regime") != "fail"


def test_gelu_reference_imports_candidate(report):
    doc = sample(report, "gelu-ref-imports-candidate")
    (f,) = findings(doc, "reference-suspect", "fail")
    ev = f["evidence"]
    assert ev["static"] and ev["static"][0]["file"] == "reference.py"
    assert any(k.startswith("tanh:") for k in ev["dynamic_calls"])
    assert ev["source"]["file"] == "reference.py"
    for cid in ("tolerance-loose", "tolerance-tight", "precision-regime"):
        assert status(doc, cid) != "fail", cid


@pytest.mark.parametrize("task_id", CLEAN)
def test_clean_controls_get_no_fail(report, task_id):
    doc = sample(report, task_id)
    errors = {c["check"]: c["reason"] for c in doc["checks"] if c["status"] == "error"}
    assert not errors, errors
    bad = [f["summary"] for f in doc["findings"] if f["check"] in NUMERICS and f["severity"] == "fail"]
    assert not bad, bad
    # every clean task gets a suggested tolerance for each declared dtype
    declared = {c["dtype"] for c in load_task(SAMPLE_QUEUE / "tasks" / task_id).cases}
    offered = {f["evidence"]["dtype"] for f in findings(doc, "tolerance-loose", "info") if "suggested" in f["evidence"]}
    assert declared <= offered


# -- synthetic tasks ---------------------------------------------------------------------------


def _task(tmp_path: Path, name: str, reference: str, candidate: str = "def add(x, y):\n    return x + y\n",
          toml_extra: str = "") -> Path:
    d = write_task(tmp_path, task_id=name, candidate=candidate)
    (d / "reference.py").write_text(reference)
    if toml_extra:
        (d / "task.toml").write_text((d / "task.toml").read_text() + toml_extra)
    return d


def test_reference_that_mutates_its_input(tmp_path, report):
    d = _task(tmp_path, "mut", "def add(x, y):\n    out = x + y\n    x.zero_()\n    return out\n")
    doc = report(d)
    f = [f for f in findings(doc, "reference-suspect", "fail") if "writes to its input" in f["summary"]]
    assert f and f[0]["evidence"]["inputs"][0]["index"] == 0


def test_nondeterministic_reference(tmp_path, report):
    d = _task(tmp_path, "nondet", "import torch\n\ndef add(x, y):\n    return x + y + 1e-3 * torch.rand(())\n")
    doc = report(d)
    f = [f for f in findings(doc, "reference-suspect", "fail") if "nondeterministic" in f["summary"]]
    assert f and f[0]["evidence"]["budget_ratio"] > 1


def test_reference_computing_in_bfloat16(tmp_path, report):
    ref = "import torch\n\ndef add(x, y):\n    return (x.to(torch.bfloat16) + y.to(torch.bfloat16)).to(x.dtype)\n"
    doc = report(_task(tmp_path, "bf16ref", ref))
    f = [f for f in findings(doc, "reference-suspect", "fail") if "computes in bfloat16" in f["summary"]]
    assert f and f[0]["evidence"]["inputs_representable"] < 0.5


def test_reference_without_float64_path(tmp_path, report):
    ref = "import torch\n\ndef add(x, y):\n    return (x.float() + y.float())\n"
    doc = report(_task(tmp_path, "f32ref", ref))
    assert status(doc, "tolerance-tight") == "skip"
    assert any("for float64 inputs the reference returns float32" in f["summary"]
               for f in findings(doc, "reference-suspect", "warn"))


def test_fp32_only_validation_of_a_correct_kernel_is_a_warn(tmp_path, report):
    d = _task(tmp_path, "fp32only", "def add(x, y):\n    return x + y\n",
              toml_extra='\n[contract]\ndtypes = ["float16"]\n')
    doc = report(d)
    assert status(doc, "precision-regime") == "warn"
    assert any(f["summary"].startswith("fp32-only validation") for f in findings(doc, "precision-regime", "warn"))
    info = [f for f in findings(doc, "precision-regime", "info") if "derived runs" in f["summary"]]
    assert info and info[0]["evidence"]["passed"] == info[0]["evidence"]["runs"] > 0
    for cid in ("tolerance-loose", "tolerance-tight", "reference-suspect"):
        assert status(doc, cid) != "fail", cid
