"""Child-side support of the numerics checks (tolerance-loose, tolerance-tight,
precision-regime, reference-suspect).

Registers:

- step ``num_oracle`` (:class:`~workstation.protocol.steps.NumOracleStep`): the float64
  oracle of one case/seed, i.e. the reference on inputs upcast to float64, plus the probes
  the parent's error budget needs, each run of the reference on a variant of the upcast
  inputs (spec fields):

  - ``scale``: for every floating tensor input ``i``, the reference with input ``i``
    doubled (``scale<i>_<j>``): the parent checks homogeneity of degree 1 (multilinearity);
  - ``abs``: the reference on ``|inputs|`` (``|a|ᵀ|b|`` for a multilinear op), arrays
    ``abs<j>``; skipped when an earlier ``scale`` probe of the same job found the op not
    homogeneous (the parent then uses ``|y|`` anyway);
  - ``bump``: the reference with the largest element of the largest floating input changed
    by a relative 2^-20 (``bump_<j>``): the parent counts the outputs that moved (fan-out);
  - ``skip``: input indices the probes leave alone (out_args: the callable overwrites them).

  ``outputs`` are the oracle's outputs; ``extra`` is a
  :class:`~workstation.protocol.extras.numerics.NumOracleExtra`: ``inputs`` describes the
  case's own (not upcast) inputs, ``probe_errors`` lists probes the reference raised on.
- transforms ``num_fresh`` (a copy of the inputs: a second, separately memoised run) and
  ``num_tf32`` (fp32 tensors rounded to TF32's 10 explicit mantissa bits, as a TF32 MMA
  reads its operands; ``mode``: ``"rna"`` (cvt.rna.tf32.f32, ties away from zero) or
  ``"trunc"`` (the low 13 bits dropped)).
- monitor ``num_callers``: traces Python calls into a task file (``spec.file``) while
  the role runs (``sys.setprofile``/``threading.setprofile``); reports a
  :class:`~workstation.protocol.extras.monitors.NumCallersReport` (``calls``:
  ``"name:line"`` -> n, ``total``, ``file``).
- monitors ``keep_float64`` (:class:`~workstation.protocol.extras.monitors.KeepFloat64Report`)
  and ``poison_masked_loads``
  (:class:`~workstation.protocol.extras.monitors.PoisonMaskedLoadsReport`).

The Triton launch capture and ahead-of-time compilation live in
:mod:`workstation.harness.aot` (the ``triton_aot`` step).
"""

from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager
from typing import Any

import torch

from workstation.harness import StepOutput, monitor, step, transform
from workstation.harness.core import (
    JobContext,
    _tag,
    apply_transforms,
    call_context,
    describe_inputs,
    encode_tensor,
    error_info,
    run_role,
)
from workstation.protocol.extras import extra_as
from workstation.protocol.extras.calls import CallExtra
from workstation.protocol.extras.monitors import (
    KeepFloat64Report,
    NumCallersReport,
    PoisonMaskedLoadsReport,
)
from workstation.protocol.extras.numerics import Bump, NumOracleExtra, OracleInput
from workstation.protocol.steps import (
    KeepFloat64,
    NumCallers,
    NumFresh,
    NumOracleStep,
    NumTf32,
    PoisonMaskedLoads,
    Upcast,
)

BUMP_REL = 2.0 ** -20


def _float_tensor(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.is_floating_point()


@transform(NumFresh)
def _fresh(ctx: JobContext, inputs: tuple, spec: NumFresh) -> tuple:
    """A copy of every tensor input (same values, same strides): the call runs again."""
    return tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in inputs)


def tf32_round(x: torch.Tensor, mode: str = "rna") -> torch.Tensor:
    """fp32 ``x`` with 10 explicit mantissa bits (TF32), as fp32. ``rna``: round to
    nearest, ties away from zero (PTX ``cvt.rna.tf32.f32``); ``trunc``: drop the low 13
    bits (what a TF32 MMA does with fp32 registers it was given unconverted)."""
    bits = x.contiguous().view(torch.int32)
    if mode == "rna":
        finite = torch.isfinite(x)
        rounded = (bits + 0x1000) & ~0x1FFF
        bits = torch.where(finite, rounded, bits)
    else:
        bits = bits & ~0x1FFF
    return bits.view(torch.float32).reshape(x.shape)


@transform(NumTf32)
def _tf32(ctx: JobContext, inputs: tuple, spec: NumTf32) -> tuple:
    """Round fp32 tensor inputs to TF32 (see :func:`tf32_round`), keeping their layout."""
    mode = spec.mode
    skip = set(spec.skip)
    out = []
    for i, x in enumerate(inputs):
        if i not in skip and isinstance(x, torch.Tensor) and x.dtype == torch.float32:
            y = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device)
            y.copy_(tf32_round(x, mode))
            out.append(y)
        else:
            out.append(x)
    return tuple(out)


@monitor(NumCallers)
def _callers(ctx: JobContext, spec: NumCallers, report: NumCallersReport):
    """Record Python-level calls of functions defined in the task file ``spec.file``
    (matched by the code object's file name, so a copy loaded by path under another module
    name counts too)."""
    target = os.path.realpath(str(ctx.task_dir / spec.file))
    counts: dict[str, int] = {}
    seen: dict[str, bool] = {}

    def is_target(fname: str) -> bool:
        r = seen.get(fname)
        if r is None:
            r = seen[fname] = os.path.realpath(fname) == target if fname and not fname.startswith("<") else False
        return r

    def prof(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            if is_target(code.co_filename):
                key = f"{code.co_name}:{code.co_firstlineno}"
                counts[key] = counts.get(key, 0) + 1

    @contextmanager
    def cm():
        old, old_t = sys.getprofile(), threading.getprofile() if hasattr(threading, "getprofile") else None
        sys.setprofile(prof)
        threading.setprofile(prof)
        try:
            yield
        finally:
            sys.setprofile(old)
            threading.setprofile(old_t)
            report.calls = dict(counts)
            report.total = sum(counts.values())
            report.file = spec.file

    return cm()


def _outputs(ctx: JobContext, result: Any, inputs: tuple) -> list[torch.Tensor]:
    return ctx.outputs_of(result, inputs)


def _call_ref(ctx: JobContext, inputs: tuple) -> list[torch.Tensor]:
    fn = ctx.callable("reference")
    try:
        with call_context(inputs):
            res = fn(*inputs)
            ctx.sync()
    except BaseException as e:  # noqa: BLE001  (re-raised, tagged with its phase)
        raise _tag(e, "call") from None
    return _outputs(ctx, res, inputs)


def _upcast(x: Any) -> Any:
    return x.to(torch.float64) if _float_tensor(x) else x


@step(NumOracleStep)
def oracle_step(ctx: JobContext, spec: NumOracleStep) -> StepOutput:
    """The float64 oracle of one case/seed and the budget probes (module doc)."""
    try:
        native = ctx.make_inputs(spec.case, spec.seed)
        described = describe_inputs(native)
        try:
            up = apply_transforms(ctx, native, [Upcast(dtype="float64")])
        except BaseException as e:  # noqa: BLE001  (re-raised, tagged with its phase)
            raise _tag(e, "transform") from None
        pristine = tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in up)
        res = run_role(ctx, "reference", up)
    except BaseException as e:  # noqa: BLE001  (what the reference or make_inputs raised is the step's error)
        return StepOutput(ok=False, error=error_info(e, getattr(e, "_kws_phase", "call")),
                          extra=NumOracleExtra(device_name=ctx.device_name))
    call = extra_as(res.extra, CallExtra)
    skip = set(spec.skip)
    floats = [i for i, x in enumerate(pristine) if _float_tensor(x) and i not in skip]
    extra = NumOracleExtra(inputs=described, monitors=call.monitors, calls=call.calls, device_name=call.device_name,
                           oracle_inputs=[OracleInput(index=d.index, dtype=d.dtype or None) for d in describe_inputs(up)],
                           float_inputs=floats)
    res.extra = extra
    extra.input_representable = _representable(native, floats)
    probes = _Probes(ctx, pristine, res)
    if spec.scale:
        # later steps of this job skip the |inputs| run of an op that is not multilinear (the
        # parent re-derives the verdict from the arrays; this only saves work)
        ctx.homogeneous = probes.scale(floats)
    if spec.abs and ctx.homogeneous is not False:
        probes.absolute(floats)
    if spec.bump and floats:
        extra.bump = probes.bump(floats)
    extra.probe_errors = probes.errors
    return res


def _representable(native: tuple, floats: list[int]) -> dict[str, dict[str, float]]:
    """Per float input (by index), the share of its finite non-zero values each narrower
    format holds exactly: the parent tells a reference that quantises internally from an op
    that only selects input values."""
    frac: dict[str, dict[str, float]] = {}
    for i in floats:
        x = native[i].detach()
        nz = torch.isfinite(x) & (x != 0)
        n = int(nz.sum())
        if n and x.dtype in (torch.float64, torch.float32, torch.float16):
            frac[str(i)] = {name: float((x[nz].to(dt).to(x.dtype) == x[nz]).sum()) / n
                            for name, dt in (("float32", torch.float32), ("float16", torch.float16),
                                             ("bfloat16", torch.bfloat16)) if dt != x.dtype}
    return frac


class _Probes:
    """The budget probes of the float64 oracle: the reference on variants of the upcast
    inputs (scaled, absolute, one element bumped), their outputs sent as arrays."""

    def __init__(self, ctx: JobContext, pristine: tuple, res: StepOutput) -> None:
        self.ctx, self.pristine, self.res = ctx, pristine, res
        #: probe name -> why the reference refused it.
        self.errors: dict[str, str] = {}

    def run(self, name: str, variant: tuple) -> list[torch.Tensor] | None:
        try:
            return _call_ref(self.ctx, variant)
        except BaseException as e:  # noqa: BLE001  (a probe the op does not admit)
            self.errors[name] = f"{type(e).__name__}: {str(e)[:300]}"
            return None

    def fresh(self, i_change: int | None = None, fn: Any = None) -> tuple:
        """The upcast inputs again (the reference may have written to out_args), input
        ``i_change`` through ``fn``."""
        base = [x.clone() if isinstance(x, torch.Tensor) else x for x in self.pristine]
        if i_change is not None:
            base[i_change] = fn(base[i_change])
        return tuple(base)

    def scale(self, floats: list[int]) -> bool:
        """Each float input doubled (arrays ``scale<i>_<j>``); whether every output doubled
        exactly (the op is homogeneous of degree 1 in each input)."""
        homogeneous = True
        for i in floats:
            outs = self.run(f"scale{i}", self.fresh(i, lambda x: x * 2.0))
            if outs is None:
                homogeneous = False
            for j, t in enumerate(outs or []):
                self.res.arrays[f"scale{i}_{j}"] = encode_tensor(t)[1]
                o = self.res.outputs[j] if j < len(self.res.outputs) else None
                homogeneous &= (o is not None and t.shape == o.shape
                                and bool(torch.equal(torch.nan_to_num(t), torch.nan_to_num(2.0 * o))))
        return homogeneous and bool(floats)

    def absolute(self, floats: list[int]) -> None:
        """The float inputs' absolute values (arrays ``abs<j>``)."""
        v = list(self.fresh())
        for i in floats:
            v[i] = v[i].abs()
        for j, t in enumerate(self.run("abs", tuple(v)) or []):
            self.res.arrays[f"abs{j}"] = encode_tensor(t)[1]

    def bump(self, floats: list[int]) -> Bump | None:
        """The largest element of the largest float input moved by :data:`BUMP_REL`
        (arrays ``bump_<j>``): a positive value moves the output of every op that passes it
        through (relu, max, gelu), whatever the sign convention."""
        i = max(floats, key=lambda k: (self.pristine[k].numel(), -k))
        x0 = self.pristine[i]
        if not x0.numel():
            return None
        finite = torch.where(torch.isfinite(x0), x0, torch.zeros_like(x0))
        flat_index = int(torch.argmax(finite.reshape(-1)))

        def bump(x: torch.Tensor) -> torch.Tensor:
            y = x.clone(memory_format=torch.contiguous_format)
            flat = y.view(-1)
            v0 = float(flat[flat_index])
            flat[flat_index] = v0 * (1 + BUMP_REL) if v0 != 0 else BUMP_REL
            return y

        outs = self.run("bump", self.fresh(i, bump))
        for j, t in enumerate(outs or []):
            self.res.arrays[f"bump_{j}"] = encode_tensor(t)[1]
        return Bump(input=i, flat_index=flat_index, rel=BUMP_REL)


_NARROW_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


@monitor(KeepFloat64)
def _keep_float64(ctx: JobContext, spec: KeepFloat64, report: KeepFloat64Report) -> Any:
    """A ``TorchDispatchMode`` that turns every requested narrower float dtype into float64
    (the :class:`~workstation.protocol.steps.KeepFloat64` monitor)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    kept: dict[str, int] = {}

    class _Keep(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
            kwargs = dict(kwargs or {})
            dt = kwargs.get("dtype")
            if dt in _NARROW_FLOATS:
                src = next((a for a in args if isinstance(a, torch.Tensor)), None)
                if src is None or src.dtype == torch.float64:
                    kwargs["dtype"] = torch.float64
                    name = str(func.overloadpacket.__name__)
                    kept[name] = kept.get(name, 0) + 1
            return func(*args, **kwargs)

    @contextmanager
    def cm() -> Any:
        with _Keep():
            try:
                yield
            finally:
                report.kept = dict(kept)
                report.total = sum(kept.values())

    return cm()


@monitor(PoisonMaskedLoads)
def _poison_masked_loads(ctx: JobContext, spec: PoisonMaskedLoads, report: PoisonMaskedLoadsReport) -> Any:
    """Masked loads without ``other=`` read poison while the role runs (interpreter only);
    ``report.poisoned_lanes`` counts the lanes that did."""
    from workstation.harness import fidelity

    @contextmanager
    def cm() -> Any:
        report.active = bool(fidelity._state["installed"])
        if not report.active:
            report.why = "not under the Triton interpreter (a GPU's own undefined lanes apply)"
            yield
            return
        with fidelity.poisoned_masked_loads(report):
            yield

    return cm()
