"""The interpreter fidelity layer: Triton's interpreter (``TRITON_INTERPRET=1``) made to
compute what compiled Triton computes, where kws can, and to say where it cannot.

Triton 3.9's interpreter (``triton/runtime/interpreter.py``) differs from compiled Triton
in ways that make correct kernels fail and real library kernels not run at all:

- a Python ``float`` kernel argument stays a Python float (compiled Triton types it as an
  ``fp32`` scalar, ``triton.runtime.jit.mangle_type``), so ``eps.to(tl.float32)`` raises;
- ``libdevice`` (``triton.language.extra.libdevice`` and the CUDA backend's
  ``triton.language.extra.cuda.libdevice``) and ``extern_elementwise`` are unsupported
  (the stub module returns ``None``, the backend module raises);
- bfloat16 values are stored as ``uint16`` and every arithmetic op, comparison, reduction,
  scan, ``tl.dot`` and int<->bf16 cast computes on the raw bits (garbage); fp32->bf16 casts
  truncate instead of rounding to nearest even, and a rounding carry into the exponent is
  OR-ed instead of added;
- fp8 values are stored as ``uint8`` with the same raw-bit arithmetic;
- a masked ``tl.load`` without ``other=`` returns 0 in masked lanes, which on a GPU are
  undefined (``tl.load``'s documentation), so kernels that consume them pass on the CPU.

:func:`install` patches the interpreter (once per process, in the fork server before its
snapshot of the watched modules, so jobs inherit it as the baseline):

- float scalar arguments become fp32 scalars (``_implicit_cvt``);
- every ``libdevice`` symbol (``__nv_<name>[f]``) is evaluated with numpy in float64 and
  rounded to the symbol's return dtype (fp32 for the ``f`` variants): correctly rounded,
  where CUDA's libdevice is within its documented ulp bounds (CUDA C Programming Guide,
  "Mathematical Functions", e.g. ``tanhf`` 2 ulp): the emulation is at least as accurate;
- bfloat16 and fp8 operands are decoded to float32 before every arithmetic op and the
  result is rounded back to nearest even (bf16: exactly the correctly rounded result, since
  fp32 carries more than 2·8+2 bits, Figueroa 1995; fp8 conversions saturate to the largest
  finite value, as PTX ``cvt.rn.satfinite`` does on sm_89+); ``tl.dot`` of bf16/fp8 takes
  exact products and accumulates in the accumulator's dtype (fp32), as tensor cores do;
  bf16 ``tl.sum`` adds pairwise and rounds to bf16 at each level (a tree reduction in
  bf16: the GPU's order is a tree too, but not this one);
- under :func:`poisoned_masked_loads`, masked lanes of a load without ``other=`` read NaN
  (floats) or the ``0x5A`` integer sentinel (:mod:`workstation.protocol.sentinels`);
- ``@triton.jit`` functions are also ``JITFunction`` objects, and library launch wrappers
  (FlagGems' ``LibEntry``) are adapted at import.

:func:`device_stand_in` answers the device queries that packages make at import and at
launch on a machine without CUDA, with the values of the task's declared target
(``[target] device``, :mod:`workstation.protocol.devices`; an H100, sm_90, by default):
``torch.cuda`` (device name, properties, capability, count, current device),
``torch.accelerator`` (available, the current accelerator ``cuda``, count) and Triton's
active driver (:class:`StandInDriver`: ``get_current_target()`` is the target's
``GPUTarget("cuda", 90, 32)``, ``utils.get_device_properties`` its figures; FlagGems asks
``torch.cuda.get_device_name``, flash-linear-attention the driver's target, gemlite the
SM count). ``torch.cuda.is_available()`` stays False and no tensor is ever placed on a CUDA
device: what needs one raises, and :func:`limit_of` tells the harness it is the stand-in's
limit, not a defect (the parent then does not judge). Each step reports the probes task code
called (:func:`take_standin_calls`; the report's ``device_standin``).

What stays out of reach (:data:`GAPS`): inline PTX (``tl.inline_asm_elementwise``), the
GPU's reduction order and fp16 accumulation order, TF32 rounding of fp32 ``tl.dot`` (the
interpreter multiplies in true fp32; ``precision-regime`` reads the TTGIR instead), the
values of undefined lanes (kws makes them NaN, a GPU may give anything), and concurrency
(the interpreter runs programs one at a time).

The layer's modules: :mod:`~workstation.harness.lowprec` (bf16/fp8 storage and rounding),
:mod:`~workstation.harness.libdevice` (libdevice symbols in numpy),
:mod:`~workstation.harness.interp_ops` (the interpreter's ops, reductions, kernel arguments,
masked-load poison), :mod:`~workstation.harness.libwrappers` (``JITFunction`` and library
launch wrappers), :mod:`~workstation.harness.standin` (the device stand-in). This module
installs them and keeps the names the rest of the harness calls.
"""

from __future__ import annotations

import os
from typing import Any

from workstation.harness import standin
from workstation.harness.interp_ops import (
    poisoned_masked_loads,
    wrap_builder,
    wrap_reductions,
    wrap_scalar_args,
    wrap_tensor_likes,
)
from workstation.harness.libdevice import wrap_libdevice
from workstation.harness.libwrappers import ADAPTED, install_post_import, wrap_jit_class
from workstation.harness.standin import (
    DeviceStandInLimit,
    device_stand_in,
    limit_of,
    take_standin_calls,
)

__all__ = ["ADAPTED", "FIDELITY_VERSION", "GAPS", "DeviceStandInLimit", "device_stand_in", "install", "limit_of",
           "poisoned_masked_loads", "take_standin_calls"]

FIDELITY_VERSION = 1

#: what the layer does not make right (sent with the self-test; checks quote it).
GAPS = (
    "inline PTX (tl.inline_asm_elementwise) is not run",
    "reduction and scan order differs from the GPU's (results differ in the last bits)",
    "fp32 tl.dot multiplies in true fp32 (a GPU lowers it to TF32 unless input_precision='ieee')",
    "undefined lanes (masked loads without other=) read NaN under poison, zero otherwise",
    "programs run one at a time (races and atomics contention are not reproduced)",
)

#: whether :func:`install` ran in this process, and the parts that failed to install
#: (mutated, never rebound: kws's module namespaces are watched).
_state: dict[str, Any] = {"installed": False, "errors": []}


def _errors() -> list[str]:
    return [*_state["errors"], *standin.errors()]


def install() -> dict[str, Any]:
    """Patch the Triton interpreter (module doc). Idempotent; a no-op unless
    ``TRITON_INTERPRET=1``. Returns what was installed (``{"installed": bool, "errors":
    [...]}``: the parts of this layer and of the device stand-in that failed); a part that
    fails to install is listed in ``errors`` and the rest still is."""
    if _state["installed"] or os.environ.get("TRITON_INTERPRET") != "1":
        return {"installed": _state["installed"], "errors": _errors()}
    try:
        from triton.runtime import interpreter as I
    except ImportError as e:
        _state["errors"].append(f"triton interpreter not importable: {e}")
        return {"installed": False, "errors": _errors()}
    parts = (("wrap_builder", lambda: wrap_builder(I.InterpreterBuilder)), ("wrap_reductions", wrap_reductions),
             ("wrap_scalar_args", wrap_scalar_args), ("wrap_libdevice", wrap_libdevice),
             ("wrap_jit_class", wrap_jit_class), ("wrap_tensor_likes", wrap_tensor_likes),
             ("install_post_import", install_post_import))
    for name, part in parts:
        try:
            part()
        except Exception as e:  # noqa: BLE001  (a Triton whose internals moved: said, not hidden)
            _state["errors"].append(f"{name}: {type(e).__name__}: {e}")
    _state["installed"] = True
    return {"installed": True, "errors": _errors()}


def _register_job_hook() -> None:
    try:
        from workstation.harness import job_hook
    except ImportError:  # pragma: no cover  (the AOT child imports this module alone)
        return
    job_hook(standin.job_target)


_register_job_hook()
