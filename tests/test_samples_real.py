"""The real-kernel sample queue (``sample_queue_real/``): library kernels run as they are,
and every fail kws reports is one a kernel engineer agrees with.

Its candidates import Liger-Kernel 0.8.5, FlagGems 5.0.2, flash-linear-attention 0.6.0
(``fla-core``) and Cut Cross-Entropy 25.1.1 as installed (the
``realkernels`` extra, installed by ``.ci/run`` with ``--no-deps``); the module skips when
they are not importable. Expectations live in ``tests/sample_expectations.d/real/<task>.toml``
(never in the queue): ``fail`` lists checks that must fail, ``not_fail`` checks that must
not, ``clean = true`` admits no fail at all, ``only`` (optional) limits the run to those
checks (CI time: each task runs once, every test of it reads that one report), ``requires``
(optional) modules the task needs beyond those (``jax``: skipped without the pallas extra),
``why`` says for each expected fail why it is true.
"""

from __future__ import annotations

import importlib.util
import json
import tomllib
from pathlib import Path

import pytest

from tests.prefetch import prefetching
from workstation.engine.report import to_json_dict
from workstation.engine.run import run_checks
from workstation.task.format import load_task

ROOT = Path(__file__).resolve().parent.parent
REAL_QUEUE = ROOT / "sample_queue_real"
EXPECT_DIR = Path(__file__).parent / "sample_expectations.d" / "real"
EXPECTATIONS = {p.stem: tomllib.loads(p.read_text()) for p in sorted(EXPECT_DIR.glob("*.toml"))}
LIBS = ("liger_kernel", "flag_gems", "sqlalchemy", "fla", "einops", "cut_cross_entropy")
missing = [m for m in LIBS if importlib.util.find_spec(m) is None]
pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    bool(missing), reason=f"the realkernels extra is not installed ({', '.join(missing)}): "
    "run scripts/install_realkernels.py")]


def test_every_real_task_has_expectations_and_vice_versa():
    tasks = {p.name for p in (REAL_QUEUE / "tasks").iterdir() if p.is_dir()}
    assert tasks == set(EXPECTATIONS)


def test_no_interpreter_shim_in_the_queue():
    """No file of the queue (tasks or the shared helpers) patches Triton's interpreter,
    torch.cuda or a library's launch wrapper: kws's fidelity layer does that."""
    needles = ("interpreter", "TRITON_INTERPRET", "libentry", "torch.cuda.", "_implicit_cvt", "GEMS_VENDOR",
               "extern_elementwise", "InterpretedFunction")
    for p in REAL_QUEUE.rglob("*.py"):
        text = p.read_text()
        hits = [n for n in needles if n in text]
        assert not hits, f"{p.relative_to(ROOT)} mentions {hits}"


def test_real_queue_has_ten_library_tasks_three_backward():
    lib = [t for t in EXPECTATIONS if t.startswith(("liger-", "flaggems-"))]
    assert len(lib) >= 10
    assert sum(t.endswith("-bwd") for t in lib) >= 3
    for t in lib:
        text = (REAL_QUEUE / "tasks" / t / "candidate.py").read_text()
        assert "from liger_kernel" in text or "from flag_gems" in text, t


@pytest.fixture(scope="module")
def reports(runner):
    def make(task_id: str) -> dict:
        task = load_task(REAL_QUEUE / "tasks" / task_id)
        return to_json_dict(run_checks(task, runner, only=EXPECTATIONS[task_id].get("only")))

    # the next task's battery runs beside the current one's (tests/prefetch.py)
    with prefetching(sorted(EXPECTATIONS), make) as get:
        yield get


@pytest.mark.parametrize("task_id", sorted(EXPECTATIONS))
def test_real_task_outcome(task_id, reports):
    exp = EXPECTATIONS[task_id]
    absent = [m for m in exp.get("requires", []) if importlib.util.find_spec(m) is None]
    if absent:
        pytest.skip(f"{task_id} needs {', '.join(absent)} (the pallas extra)")
    doc = reports(task_id)
    failing = {f["check"] for f in doc["findings"] if f["severity"] == "fail"}
    errors = {c["check"]: c["reason"] for c in doc["checks"] if c["status"] == "error"}
    assert not errors, f"checks broke (kws bugs): {errors}"
    detail = json.dumps([f["summary"] for f in doc["findings"] if f["severity"] == "fail"], indent=1)
    if exp.get("clean"):
        assert not failing, f"clean task {task_id} got fail findings: {detail}"
    for cid in exp.get("fail", []):
        assert cid in failing, f"{task_id}: expected a fail from {cid}; fails were {sorted(failing)}: {detail}"
    for cid in exp.get("not_fail", []):
        assert cid not in failing, f"{task_id}: {cid} must not fail: {detail}"
    unexpected = failing - set(exp.get("fail", []))
    assert not unexpected, f"{task_id}: fails no expectation explains: {sorted(unexpected)}: {detail}"
    for lib in exp.get("versions", []):
        assert lib in doc["versions"], f"{task_id}: report versions lack {lib}: {doc['versions']}"


def test_device_probing_library_runs_on_the_stand_in(reports):
    """flash-linear-attention asks Triton's active driver for its target at import (without
    a GPU: "0 active drivers", and fla falls back to 'cpu'); the job's device stand-in
    answers as the declared target (an H100 by default) and the report lists what the
    candidate asked."""
    doc = reports("fla-l2norm")
    st = doc["device_standin"]
    assert st["target"] == "H100" and st["answers"]["triton_target"] == ["cuda", 90, 32]
    called = st["called"]
    assert "candidate" in called["triton.runtime.driver.active.get_current_target"]["by"]
    assert called["torch.cuda.get_device_capability"]["calls"] > 0
    assert not [n for n in doc["not_judged"] if "stand-in" in n["reason"]]


def test_a_shipped_gpu_pallas_kernel_is_read_and_its_limits_said(reports):
    """JAX's own layer_norm (pallas.ops.gpu): no fail; the strict TPU interpreter cannot run
    its masked loads, so that pass is not judged with the error named (it used to be a fail
    blamed on the candidate); special-values calls its shift-100 error ill-conditioning."""
    if importlib.util.find_spec("jax") is None:
        pytest.skip("needs jax (the pallas extra)")
    doc = reports("jax-pallas-layernorm")
    pk = next(c for c in doc["checks"] if c["check"] == "pallas-kernel")
    assert pk["status"] == "skip" and "strict interpreter could not run it" in pk["reason"], pk
    sv = [f for f in doc["findings"] if f["check"] == "special-values" and "ill-conditioned" in f["summary"]]
    assert sv and sv[0]["severity"] == "info", [f["summary"] for f in doc["findings"] if f["check"] == "special-values"]
