"""The GPU validation script's dry run on the CPU: every section runs in its own process,
writes its result, and the summary lists it (so the script cannot rot before a GPU box runs
it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_dry_run_writes_every_section_and_a_summary(tmp_path):
    out = tmp_path / "gpu"
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_validation.py"), "--dry-run", "--out", str(out),
                        "--tasks", "relu-unwritten", "--only", "correctness", "--parallel", "1"],
                       capture_output=True, text=True, timeout=1800)  # its limits stretch with the load
    assert r.returncode == 0, r.stderr[-2000:]
    docs = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}
    assert set(docs) == {"env", "sample_checks", "timing", "tf32_ir", "load_inline", "sanitizer", "sandbox", "profiles"}
    assert {n: d["status"] for n, d in docs.items() if d["status"] == "error"} == {}
    assert docs["load_inline"]["status"] == "skip" and "needs CUDA" in docs["load_inline"]["reason"]
    assert docs["env"]["result"]["device"].startswith("cpu")
    rows = docs["sample_checks"]["result"]["tasks"]
    assert [r["task"] for r in rows] == ["relu-unwritten"] and rows[0]["status"] == "exit 0"
    assert (out / "checks" / "relu-unwritten.json").is_file()
    assert docs["tf32_ir"]["result"]["tf32_mma_found"] is True  # sm_90 lowering of an fp32 tl.dot
    assert {o["op"] for o in docs["timing"]["result"]["ops"]} == {"vector-add", "softmax", "matmul-fp16"}
    assert all("timer_ms" in o and "kws_ms" in o for o in docs["timing"]["result"]["ops"])
    assert (out / "captures" / "torch_profiler_trace.json").is_file()
    summary = (out / "summary.md").read_text()
    assert "| tf32_ir | ok |" in summary and "relu-unwritten" in summary


def test_cpu_baseline_comparison_lists_findings_that_appear_or_vanish(tmp_path):
    base = tmp_path / "base"
    base.mkdir()
    (base / "rowsum-edge.json").write_text(json.dumps({"findings": [
        {"check": "correctness", "severity": "fail", "summary": "only on the CPU 1.5"}]}))
    out = tmp_path / "gpu"
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_validation.py"), "--dry-run", "--out", str(out),
                        "--sections", "sample_checks", "--tasks", "rowsum-edge", "--only", "correctness",
                        "--cpu-baseline", str(base)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    row = json.loads((out / "sample_checks.json").read_text())["result"]["tasks"][0]
    assert ["correctness", "fail", "only on the CPU #"] in row["vanish_on_gpu"]
    assert any(f[0] == "correctness" for f in row["appear_on_gpu"])
