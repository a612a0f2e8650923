"""Capture of Triton launches for an ahead-of-time compile: the ``triton_launch_records``
monitor.

While the monitored call runs, a :class:`LaunchRecorder` observes every launch
(:mod:`workstation.harness.launches`) and keeps one record per distinct launch
(:func:`launch_record`): the kernel's file, qualified name, argument names and Triton
signature types (pointer element dtype as ``*fp16``, ``i32``/``i64``, ``fp32``, ``i1``),
constexpr values and launch options (:data:`LAUNCH_OPTIONS`); the monitor's report is a
:class:`~workstation.protocol.extras.monitors.TritonLaunchRecordsReport` of
:class:`~workstation.protocol.extras.monitors.LaunchRecord`. The records are what
:mod:`workstation.harness.aot_compile` needs to compile the same kernel in another process.
On a GPU the launch compiles the kernel itself: the recorder then also keeps the IR of the
``CompiledKernel`` that ``JITFunction.run`` returns.
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import msgspec

from workstation.harness import monitor
from workstation.harness.aot_compile import LAUNCH_OPTIONS
from workstation.harness.core import INTERPRETER
from workstation.harness.launches import Launch, LaunchObserver, observing
from workstation.protocol.extras.monitors import LaunchRecord, TritonLaunchRecordsReport
from workstation.protocol.steps import TritonLaunchRecords

_TORCH_TO_TRITON = {
    "float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64",
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "bool": "i1",
    "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5", "float8_e4m3fnuz": "fp8e4b8",
    "float8_e5m2fnuz": "fp8e5b16",
}


def _is_constexpr_annotation(a: Any) -> bool:
    if a is inspect.Parameter.empty or a is None:
        return False
    if isinstance(a, str):
        return a.split(".")[-1] == "constexpr"
    try:
        import triton.language as tl

        return a is tl.constexpr or (isinstance(a, type) and issubclass(a, tl.constexpr))
    except ImportError:  # pragma: no cover
        return False


def _json_value(v: Any) -> Any:
    """A constexpr value as JSON (Triton dtypes as ``{"tl_dtype": "fp16"}``)."""
    if v is None or isinstance(v, bool | int | float | str):
        return v
    try:
        import triton.language as tl

        if isinstance(v, tl.dtype):
            return {"tl_dtype": str(v)}
        if isinstance(v, tl.constexpr):
            return _json_value(v.value)
    except ImportError:  # pragma: no cover
        pass
    return {"repr": repr(v)[:200]}


def _arg_type(v: Any) -> str | None:
    """The Triton signature type of a runtime argument, or None for a constexpr-like one."""
    import torch

    if isinstance(v, torch.Tensor):
        return "*" + _TORCH_TO_TRITON.get(str(v.dtype).removeprefix("torch."), "fp32")
    if isinstance(v, bool):
        return "i1"
    if isinstance(v, int):
        return "i32" if -(2**31) <= v < 2**31 else "i64"
    if isinstance(v, float):
        return "fp32"
    if hasattr(v, "data_ptr") and hasattr(v, "dtype"):
        return "*" + _TORCH_TO_TRITON.get(str(v.dtype).removeprefix("torch."), "fp32")
    return None


def launch_record(fn: Any, arg_names: list[str], args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
    """What a launch of the kernel function ``fn`` (the Python function under the jit
    wrapper) with ``args``/``kwargs`` needs for an AOT compile: file, qualname, signature,
    constexprs, options."""
    sig = inspect.signature(fn)
    params = sig.parameters
    bound: dict[str, Any] = {}
    for name, v in zip(arg_names, args, strict=False):
        bound[name] = v
    options = {}
    for k, v in kwargs.items():
        if k in arg_names:
            bound[k] = v
        elif k in LAUNCH_OPTIONS and isinstance(v, bool | int):
            options[k] = v
    for name in arg_names:
        if name not in bound and params[name].default is not inspect.Parameter.empty:
            bound[name] = params[name].default
    signature: dict[str, str] = {}
    constexprs: dict[str, Any] = {}
    for name in arg_names:
        v = bound.get(name)
        if _is_constexpr_annotation(params[name].annotation) or v is None:
            signature[name] = "constexpr"
            constexprs[name] = _json_value(v)
            continue
        t = _arg_type(v)
        if t is None:
            signature[name] = "constexpr"
            constexprs[name] = _json_value(v)
        else:
            signature[name] = t
    code = getattr(fn, "__code__", None)
    return {
        "file": os.path.realpath(code.co_filename) if code else "",
        "qualname": getattr(fn, "__qualname__", getattr(fn, "__name__", "?")),
        "name": getattr(fn, "__name__", "?"),
        "line": code.co_firstlineno if code else None,
        "signature": signature,
        "constexprs": constexprs,
        "options": options,
    }


def launch_key(rec: dict[str, Any]) -> str:
    """What makes two launch records the same compile: file, qualname, signature,
    constexprs, options (as JSON text)."""
    return json.dumps({k: rec[k] for k in ("file", "qualname", "signature", "constexprs", "options")},
                      sort_keys=True, default=str)


class LaunchRecorder(LaunchObserver):
    """Records every distinct launch (:func:`launch_record`, keyed by :func:`_launch_key`)
    in ``records``; on a GPU also the IR (``ttir``, ``ttgir``, ``ptx`` texts) of the
    ``CompiledKernel`` each launch returned, in ``compiled``. A launch whose record cannot
    be made is still launched; the error is kept in ``errors``."""

    def __init__(self, keep_ir: bool):
        self.keep_ir = keep_ir
        self.records: dict[str, dict[str, Any]] = {}
        self.compiled: dict[str, dict[str, str]] = {}
        self.errors: list[str] = []
        self._pending: dict[int, str] = {}  # id(launch) -> its key, between before and after

    def before(self, launch: Launch) -> None:
        try:
            rec = launch_record(launch.fn, launch.arg_names, launch.args, launch.kwargs)
        except Exception as e:  # noqa: BLE001  (never break the task's launch)
            self.errors.append(f"{type(e).__name__}: {e}")
            return
        key = launch_key(rec)
        self.records.setdefault(key, rec)
        self._pending[id(launch)] = key

    def after(self, launch: Launch, result: Any, error: BaseException | None) -> None:
        key = self._pending.pop(id(launch), None)
        if key is None or not self.keep_ir or result is None or not hasattr(result, "asm"):
            return
        try:
            self.compiled[key] = {k: v for k, v in result.asm.items()
                                  if k in ("ttir", "ttgir", "ptx") and isinstance(v, str)}
        except Exception:  # noqa: BLE001  (a compiled kernel without readable asm: its IR is just not kept)
            pass


@monitor(TritonLaunchRecords)
def launch_records_monitor(ctx: Any, spec: TritonLaunchRecords, report: TritonLaunchRecordsReport):
    """Record every Triton kernel launch (see :func:`launch_record`) into
    ``report.launches``; on a GPU also keep the compiled kernels' IR in
    ``ctx._kws_compiled`` (launch key -> ``asm`` texts) for the ``triton_aot`` step."""
    return _record_launches(ctx, report, keep_ir=not INTERPRETER)


@contextmanager
def _record_launches(ctx: Any, report: TritonLaunchRecordsReport, keep_ir: bool) -> Iterator[None]:
    recorder = LaunchRecorder(keep_ir)
    try:
        with observing(recorder):
            yield
    finally:
        report.errors = recorder.errors
        report.launches = [msgspec.convert(rec, type=LaunchRecord) for rec in recorder.records.values()]
        ctx._kws_compiled = recorder.compiled
