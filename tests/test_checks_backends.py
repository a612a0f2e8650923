"""Pallas (JAX on the CPU, interpret mode) and CUDA (nvcc, no GPU) candidates through the
runner: the backend gate, the pallas-kernel readings and strict pass, JAX's x64 mode for
float64 calls, the cuda-build compile-and-read path. Skipped with the reason where JAX or
nvcc is not installed."""

from __future__ import annotations

import importlib.util
import shutil

import pytest

from tests.hostile import findings, make_task, result
from workstation.engine.run import run_checks
from workstation.protocol.steps import CallStep, Upcast
from workstation.task.format import load_task

HAS_JAX = importlib.util.find_spec("jax") is not None
needs_jax = pytest.mark.skipif(not HAS_JAX, reason="JAX is not installed: pip install 'kws[pallas]'")
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None and not shutil.os.path.exists("/usr/local/cuda/bin/nvcc"),
                                reason="nvcc not found: install a CUDA toolkit or nvidia-cuda-nvcc")

PALLAS_HEAD = """\
import jax
import jax.numpy as jnp
import torch
from jax.experimental import pallas as pl

"""

OOB = PALLAS_HEAD + """\
def _kernel(x_ref, o_ref):
    i = pl.program_id(0)
    o_ref[...] = x_ref[pl.ds(i * 48, 32)] * 2    # step 1 reads x[48:80] of a 64-element block


def add(x, y):
    xj = jnp.from_dlpack(x.contiguous())
    out = pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct((64,), xj.dtype), grid=(2,),
                         in_specs=[pl.BlockSpec((64,), lambda i: (0,))],
                         out_specs=pl.BlockSpec((32,), lambda i: (i,)))(xj)
    return torch.from_dlpack(out) - x[:64] * 2 + x + y
"""

HALF_ACC = PALLAS_HEAD + """\
def _kernel(x_ref, y_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(0) == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)
    acc_ref[...] += x_ref[...] + y_ref[...]
    o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def add(x, y):
    from jax.experimental.pallas import tpu as pltpu
    n = x.shape[0]
    xj, yj = jnp.from_dlpack(x.contiguous()), jnp.from_dlpack(y.contiguous())
    out = pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct((n,), xj.dtype),
                         grid_spec=pltpu.PrefetchScalarGridSpec(
                             num_scalar_prefetch=0, grid=(1,),
                             in_specs=[pl.BlockSpec((n,), lambda i: (0,)), pl.BlockSpec((n,), lambda i: (0,))],
                             out_specs=pl.BlockSpec((n,), lambda i: (0,)),
                             scratch_shapes=[pltpu.VMEM((n,), jnp.float16)]))(xj, yj)
    return torch.from_dlpack(out)
"""

NO_KERNEL = PALLAS_HEAD + """\
def add(x, y):
    return torch.from_dlpack(jnp.from_dlpack(x.contiguous()) + jnp.from_dlpack(y.contiguous()))
"""

X64 = PALLAS_HEAD + """\
def add(x, y):
    return torch.from_dlpack(jnp.from_dlpack(x.contiguous()) + jnp.from_dlpack(y.contiguous()))
"""


def _pallas(tmp_path, task_id, candidate, cases=None):
    d = make_task(tmp_path, task_id, candidate, backend="pallas", cases=cases or [{"N": 64, "dtype": "float32"}])
    return load_task(d)


@needs_jax
def test_pallas_out_of_bounds_read_is_caught_by_the_strict_pass(tmp_path, runner):
    t = _pallas(tmp_path, "pl-oob", OOB)
    res = run_checks(t, runner, only=["pallas-kernel"])
    fails = findings(res, "pallas-kernel", "fail")
    assert any("strict interpreter" in f.summary and "out-of-bounds" in f.summary for f in fails), \
        [f.summary for f in res.findings]


@needs_jax
def test_pallas_half_scratch_accumulator_and_no_kernel(tmp_path, runner):
    t = _pallas(tmp_path, "pl-half", HALF_ACC, cases=[{"N": 64, "dtype": "float16"}])
    res = run_checks(t, runner, only=["pallas-kernel"])
    warns = findings(res, "pallas-kernel", "warn")
    acc = [f for f in warns if "float16 accumulator" in f.summary]
    assert acc and acc[0].evidence["accumulation"]["target"] == "scratch 0"
    assert acc[0].evidence["source"]["file"] == "candidate.py"
    info = findings(res, "pallas-kernel", "info")
    reading = next(f for f in info if f.summary.startswith("read "))
    assert reading.evidence["kernels"][0]["scratch"][0]["dtype"] == "float16"

    t2 = _pallas(tmp_path, "pl-none", NO_KERNEL)
    (f,) = findings(run_checks(t2, runner, only=["pallas-kernel"]), "pallas-kernel", "fail")
    assert "made no pallas_call" in f.summary


@needs_jax
def test_float64_calls_run_in_jax_x64_mode(tmp_path, runner):
    t = _pallas(tmp_path, "pl-x64", X64)
    from workstation.engine.context import CheckContext

    ctx = CheckContext(t, runner)
    plain, up = ctx.run_steps([CallStep(role="candidate", case={"N": 64, "dtype": "float32"}),
                               CallStep(role="candidate", case={"N": 64, "dtype": "float32"},
                                        transforms=[Upcast(dtype="float64")])])
    assert plain.ok and plain.outputs[0].dtype == "float32"
    assert up.ok and up.outputs[0].dtype == "float64"  # without x64 JAX would return float32


def test_backend_gate_skips_run_time_checks_with_the_reason(tmp_path, runner):
    cand = "from torch.utils.cpp_extension import load_inline\n\ndef add(x, y):\n    return x + y\n"
    t = load_task(make_task(tmp_path, "cu-gate", cand, backend="cuda"))
    res = run_checks(t, runner, only=["correctness", "tolerance-tight"])
    if runner.device.kind == "cuda":
        pytest.skip("a GPU is present: the CUDA candidate runs")
    r = result(res, "correctness")
    assert r.status == "skip" and "runs only on a CUDA GPU" in r.reason
    assert result(res, "tolerance-tight").status != "skip"  # reference-only checks still run


CUDA_HEAD = """\
from torch.utils.cpp_extension import load_inline

CUDA = r'''
{src}
'''


def add(x, y):
    ext = load_inline("kws_test_{name}", cpp_sources="", cuda_sources=CUDA, functions=[],
                      extra_cuda_cflags={flags}, no_implicit_headers=True)
    return ext.add(x, y)
"""

UNGUARDED = """\
extern "C" __global__ void add_kernel(const float* x, const float* y, float* z) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    z[i] = x[i] + y[i];
}
"""
BROKEN = """\
extern "C" __global__ void add_kernel(const float* x, const float* y, float* z, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) z[i] = x[i] + undefined_name[i];
}
"""
SPILLY = """\
extern "C" __global__ void __launch_bounds__(1024, 2) add_kernel(const float* x, float* z, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v[64];
#pragma unroll
    for (int k = 0; k < 64; ++k) v[k] = x[(i + 97 * k) % n];
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < 64; ++k) s += v[k] * v[(k * 7) % 64];
    z[i] = s;
}
"""


def _cuda(tmp_path, name, src, flags="[]", claims=""):
    d = make_task(tmp_path, name, CUDA_HEAD.format(src=src, name=name.replace("-", "_"), flags=flags), backend="cuda")
    if claims:
        p = d / "task.toml"
        p.write_text(p.read_text().replace('[claims]\nstatus = "pass"\n', f"[claims]\n{claims}\n"))
    return load_task(d)


@needs_nvcc
def test_cuda_compile_error_is_the_actual_failure(tmp_path, runner):
    res = run_checks(_cuda(tmp_path, "cu-broken", BROKEN), runner, only=["cuda-build"])
    (f,) = findings(res, "cuda-build", "fail")
    assert "does not compile for sm_90" in f.summary and "undefined_name" in f.summary
    assert f.evidence["failure_class"] == "compile-error"
    rep = _cuda(tmp_path, "cu-broken-reported", BROKEN,
                claims='status = "fail"\nfailure = "nvcc fails"\nfailure_class = "compile-error"')
    res2 = run_checks(rep, runner, only=["cuda-build"])
    assert not findings(res2, "cuda-build", "fail")
    assert any("the compile error the task reports" in f.summary for f in findings(res2, "cuda-build", "info"))


@needs_nvcc
def test_cuda_unguarded_accesses_and_spills(tmp_path, runner):
    res = run_checks(_cuda(tmp_path, "cu-unguarded", UNGUARDED), runner, only=["cuda-build"])
    warns = findings(res, "cuda-build", "warn")
    assert any("no comparison of the index" in f.summary and "add_kernel" in f.summary for f in warns), \
        [f.summary for f in res.findings]
    res2 = run_checks(_cuda(tmp_path, "cu-spill", SPILLY), runner, only=["cuda-build"])
    spills = [f for f in findings(res2, "cuda-build", "warn") if "register spills" in f.summary]
    assert spills, [f.summary for f in res2.findings]
    occ = [f for f in findings(res2, "cuda-build") if "occupancy" in f.summary]
    assert occ and occ[0].evidence["block_threads"] == 1024  # from __launch_bounds__ (.maxntid)
    assert not any("no comparison of the index" in f.summary for f in res2.findings)
