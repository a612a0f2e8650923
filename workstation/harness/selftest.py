"""Start-up self-test of the Triton interpreter under kws's fidelity layer
(:mod:`workstation.harness.fidelity`): run by the ``triton_aot`` step and by the
``interpreter_selftest`` step (:class:`~workstation.protocol.steps.InterpreterSelftestStep`),
whose result tells the checks which dtypes the interpreter computes right here."""

from __future__ import annotations

from typing import Any

from workstation.harness import StepOutput, step
from workstation.protocol.extras.triton import (
    FidelityReport,
    InterpreterSelftestExtra,
    ProbeResult,
    Selftest,
)
from workstation.protocol.steps import InterpreterSelftestStep

_SELFTEST_N = 1024


def interpreter_selftest() -> Selftest:
    """Per dtype (``float16``, ``bfloat16``, ``float32``, ``float8_e4m3fn``,
    ``float8_e5m2``): whether the interpreter computes it as compiled Triton does, with
    the probes that decide it; plus ``scalar_args`` (a Python float kernel argument is an
    fp32 scalar) and ``libdevice`` (``libdevice.tanh``/``exp`` evaluate).

    Probes: ``tl.sum`` of 1024 ones (exact in every format); for bf16 also ``x + y`` and
    ``x * y`` against torch's correctly rounded bf16 results on 1024 random pairs, the
    fp32 -> bf16 cast (round to nearest even), and ``tl.dot`` of 16x16 tiles against the
    fp32 product; for the fp8 formats the fp32 -> fp8 -> fp32 round trip against torch's
    (saturated to the format's largest finite value, as ``cvt.rn.satfinite``). Triton
    3.9's own interpreter fails the bf16 and fp8 probes (it computes on raw bits); a dtype
    that fails here under the fidelity layer is reported, and checks do not judge it."""
    import torch

    k = _kernels()
    out = Selftest()
    g = torch.Generator().manual_seed(0)
    for name in ("float16", "bfloat16", "float32", "float8_e4m3fn", "float8_e5m2"):
        out.dtypes[name] = _probe_dtype(name, k, g)
    out.scalar_args = _probe(lambda: _scalar_args_ok(k, g))
    out.libdevice = _probe(lambda: _libdevice_ok(g))
    return out


def _probe(fn: Any) -> ProbeResult:
    """``fn()``'s verdict as a probe result (one that raises fails, with the error)."""
    try:
        return ProbeResult(ok=bool(fn()))
    except Exception as e:  # noqa: BLE001  (a probe that raises fails, reported)
        return ProbeResult(ok=False, error=f"{type(e).__name__}: {str(e)[:200]}")


def _kernels() -> Any:
    """The probe kernels (defined here so that triton is imported only when the self-test
    runs)."""
    import types

    import triton
    import triton.language as tl

    @triton.jit
    def sum_kernel(x_ptr, y_ptr, N: tl.constexpr):
        x = tl.load(x_ptr + tl.arange(0, N))
        tl.store(y_ptr, tl.sum(x, axis=0).to(tl.float32))

    @triton.jit
    def arith(x_ptr, y_ptr, s_ptr, p_ptr, c_ptr, N: tl.constexpr):
        o = tl.arange(0, N)
        x = tl.load(x_ptr + o)
        y = tl.load(y_ptr + o)
        tl.store(s_ptr + o, x + y)
        tl.store(p_ptr + o, x * y)
        tl.store(c_ptr + o, (x.to(tl.float32) * 1.001).to(x_ptr.dtype.element_ty))

    @triton.jit
    def dot(a_ptr, b_ptr, c_ptr, N: tl.constexpr):
        o = tl.arange(0, N)
        a = tl.load(a_ptr + o[:, None] * N + o[None, :])
        b = tl.load(b_ptr + o[:, None] * N + o[None, :])
        tl.store(c_ptr + o[:, None] * N + o[None, :], tl.dot(a, b, input_precision="ieee"))

    @triton.jit
    def roundtrip(x_ptr, y_ptr, N: tl.constexpr, DT: tl.constexpr):
        o = tl.arange(0, N)
        tl.store(y_ptr + o, tl.load(x_ptr + o).to(DT).to(tl.float32))

    @triton.jit
    def scalar(x_ptr, y_ptr, s, N: tl.constexpr):
        o = tl.arange(0, N)
        tl.store(y_ptr + o, tl.load(x_ptr + o) * s.to(tl.float32))

    return types.SimpleNamespace(sum=sum_kernel, arith=arith, dot=dot, roundtrip=roundtrip, scalar=scalar, tl=tl)


def _probe_dtype(name: str, k: Any, g: Any) -> ProbeResult:
    """The probes of one dtype (:func:`interpreter_selftest`'s doc)."""
    import torch

    dt = getattr(torch, name)
    probes: dict[str, bool] = {}
    try:
        if name.startswith("float8"):
            tdt = {"float8_e4m3fn": k.tl.float8e4nv, "float8_e5m2": k.tl.float8e5}[name]
            x = torch.randn(_SELFTEST_N, generator=g) * 100
            y = torch.empty(_SELFTEST_N)
            k.roundtrip[(1,)](x, y, N=_SELFTEST_N, DT=tdt)
            m = torch.finfo(dt).max
            probes["fp32_roundtrip"] = bool(torch.equal(y, x.clamp(-m, m).to(dt).to(torch.float32)))
        else:
            ones = torch.ones(_SELFTEST_N, dtype=dt)
            y = torch.zeros(1, dtype=torch.float32)
            k.sum[(1,)](ones, y, N=_SELFTEST_N)
            probes["sum_of_ones"] = float(y.item()) == float(_SELFTEST_N)
            if name == "bfloat16":
                probes.update(_bf16_probes(k, g, dt))
    except Exception as e:  # noqa: BLE001  (a probe that raises fails its dtype, reported)
        return ProbeResult(ok=False, error=f"{type(e).__name__}: {str(e)[:200]}", probes=probes)
    return ProbeResult(ok=all(probes.values()), probes=probes)


def _bf16_probes(k: Any, g: Any, dt: Any) -> dict[str, bool]:
    """bf16's arithmetic, cast and dot against torch's correctly rounded results."""
    import torch

    a = torch.randn(_SELFTEST_N, generator=g).to(dt)
    b = torch.randn(_SELFTEST_N, generator=g).to(dt)
    s, p, c = (torch.empty(_SELFTEST_N, dtype=dt) for _ in range(3))
    k.arith[(1,)](a, b, s, p, c, N=_SELFTEST_N)
    out = {"add": bool(torch.equal(s, a + b)), "mul": bool(torch.equal(p, a * b)),
           "cast_rne": bool(torch.equal(c, (a.float() * 1.001).to(dt)))}
    A = torch.randn(16, 16, generator=g).to(dt)
    B = torch.randn(16, 16, generator=g).to(dt)
    C = torch.empty(16, 16)
    k.dot[(1,)](A, B, C, N=16)
    out["dot"] = bool(torch.allclose(C, A.float() @ B.float(), rtol=1e-5, atol=1e-5))
    return out


def _scalar_args_ok(k: Any, g: Any) -> bool:
    """A Python float kernel argument is an fp32 scalar."""
    import torch

    x = torch.randn(16, generator=g)
    y = torch.empty(16)
    k.scalar[(1,)](x, y, 2.5, N=16)
    return bool(torch.equal(y, x * 2.5))


def _libdevice_ok(g: Any) -> bool:
    """``libdevice.tanh`` evaluates (to fp32 accuracy)."""
    import torch

    tanh = _libdevice_kernel()
    x = torch.randn(64, generator=g)
    y = torch.empty(64)
    tanh[(1,)](x, y, N=64)
    return bool(torch.allclose(y, torch.tanh(x), rtol=2e-7, atol=1e-7))


def _libdevice_kernel() -> Any:
    """A kernel calling ``libdevice.tanh``, defined with the module globals the
    interpreter resolves names from (its rewriter reads ``fn.__globals__``)."""
    import triton
    import triton.language as tl
    from triton.language.extra import libdevice

    g = {"triton": triton, "tl": tl, "libdevice": libdevice}
    src = ("def _tanh(x_ptr, y_ptr, N: tl.constexpr):\n"
           "    o = tl.arange(0, N)\n"
           "    tl.store(y_ptr + o, libdevice.tanh(tl.load(x_ptr + o)))\n")
    import linecache

    name = "<kws-selftest-libdevice>"
    linecache.cache[name] = (len(src), None, src.splitlines(True), name)
    exec(compile(src, name, "exec"), g)  # kws's own fixed source
    return triton.jit(g["_tanh"])


def selftest_or_error() -> Selftest:
    """:func:`interpreter_selftest`, or a :class:`Selftest` with only ``error`` set when it
    raised."""
    try:
        return interpreter_selftest()
    except Exception as e:  # noqa: BLE001  (the self-test failing is reported, not the step)
        return Selftest(error=f"{type(e).__name__}: {e}")


@step(InterpreterSelftestStep)
def selftest_step(ctx: Any, spec: InterpreterSelftestStep) -> StepOutput:
    """``extra``: :class:`~workstation.protocol.extras.triton.InterpreterSelftestExtra`:
    ``interpreter``, ``selftest`` (:func:`interpreter_selftest`, under the interpreter
    only), ``fidelity`` (what the layer installed, its errors, the library launch wrappers
    it adapted, the device stand-in) and ``gaps`` (what it cannot make right)."""
    from workstation.harness import fidelity
    from workstation.harness.core import INTERPRETER

    rep = dict(getattr(ctx, "fidelity", {}))
    extra = InterpreterSelftestExtra(
        interpreter=INTERPRETER, gaps=list(fidelity.GAPS),
        fidelity=FidelityReport(installed=bool(rep.get("installed", False)), errors=[str(x) for x in rep.get("errors", [])],
                                device_stand_in=[str(x) for x in rep.get("device_stand_in", [])],
                                adapted=list(fidelity.ADAPTED), version=fidelity.FIDELITY_VERSION))
    if INTERPRETER:
        extra.selftest = selftest_or_error()
    return StepOutput(ok=True, extra=extra)
