"""Child side of ``tampering``: snapshots of process-global state around import and call.

Step ``state_probe`` (:class:`~workstation.protocol.steps.StateProbeStep`) makes the
inputs first (so ``inputs.py`` is not charged), then takes a snapshot, imports the role's
module, takes another, calls the role once, and takes a third. A snapshot
(:func:`snapshot`) is JSON data:

- ``flags``: numerics and execution flags as strings: TF32 (``allow_tf32`` of cuBLAS and
  cuDNN, the ``fp32_precision`` knobs), ``torch.get_float32_matmul_precision()``,
  reduced-precision reductions for fp16/bf16 GEMMs, deterministic-algorithm flags, cuDNN
  benchmark/deterministic, CPU flush-to-zero (probed: ``2**-130 * 1`` flushes to 0),
  default dtype and device, grad/inference mode, intra/inter-op threads, SDPA backends,
  the torch RNG's initial seed, numpy's error state, ``sys.gettrace``/``getprofile``,
  signal handlers;
- ``functions``: for every callable in a list of namespaces (builtins, time, math, numpy,
  numpy.testing, torch, torch.nn.functional, torch.testing, torch.linalg, torch.special,
  torch.cuda, triton, triton.testing, and the methods of torch.Tensor, torch.nn.Module,
  torch.cuda.Event, torch.cuda.Stream as resolved through the class's MRO) a token
  ``<owner>:<id>:<id of __code__>``: replacing or re-coding any of them changes it;
- ``threads``: the live Python threads (name, ident, daemon, target);
- ``env``: the environment;
- ``cuda``: the current stream (CUDA only).

During the call (CUDA) a monitor counts ``torch.cuda.Stream`` objects created and
``torch.cuda.set_stream`` calls. ``extra.details`` describes each callable whose
token changed (its new qualified name, file and line): evidence only; the parent judges
from the tokens. The payload is :class:`~workstation.protocol.extras.state.StateProbeExtra`.
"""

from __future__ import annotations

import importlib
import inspect
import os
import signal
import sys
import threading
import time
import types
from typing import Any

import numpy as np
import torch

from workstation.harness import StepOutput, step
from workstation.harness.core import _tag, error_info
from workstation.protocol.extras.series import Frame
from workstation.protocol.extras.state import (
    CallableInfo,
    CudaState,
    Snapshot,
    StateProbeExtra,
    StreamCreated,
    StreamWatch,
    ThreadInfo,
)
from workstation.protocol.steps import StateProbeStep

#: module namespaces whose callables are snapshotted.
MODULES = (
    "builtins", "time", "math", "numpy", "numpy.testing", "torch", "torch.nn.functional",
    "torch.testing", "torch.linalg", "torch.special", "torch.cuda", "triton", "triton.testing",
)
#: classes whose attributes (through the MRO) are snapshotted.
CLASSES = ("torch.Tensor", "torch.nn.Module", "torch.cuda.Event", "torch.cuda.Stream")


def _get(path: str) -> Any:
    mod, _, attr = path.rpartition(".")
    return getattr(importlib.import_module(mod), attr)


def _flag(fn: Any) -> str | None:
    try:
        return repr(fn())
    except Exception:  # noqa: BLE001  (a flag this torch build does not have)
        return None


def _ftz() -> bool:
    """True when the CPU flushes float32 subnormals to zero (set_flush_denormal(True))."""
    x = torch.tensor([2.0 ** -130], dtype=torch.float32)
    return bool((x * 1.0).item() == 0.0)


FLAGS: dict[str, Any] = {
    "torch.backends.cuda.matmul.allow_tf32": lambda: torch.backends.cuda.matmul.allow_tf32,
    "torch.backends.cudnn.allow_tf32": lambda: torch.backends.cudnn.allow_tf32,
    "torch.backends.cuda.matmul.fp32_precision": lambda: torch.backends.cuda.matmul.fp32_precision,
    "torch.backends.cudnn.conv.fp32_precision": lambda: torch.backends.cudnn.conv.fp32_precision,  # type: ignore[attr-defined]  # set at run time by torch's flags module
    "torch.backends.mkldnn.matmul.fp32_precision": lambda: torch.backends.mkldnn.matmul.fp32_precision,  # type: ignore[attr-defined]  # likewise
    "torch.get_float32_matmul_precision()": lambda: torch.get_float32_matmul_precision(),
    "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction":
        lambda: torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
    "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction":
        lambda: torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
    "torch.backends.cuda.matmul.allow_fp16_accumulation": lambda: torch.backends.cuda.matmul.allow_fp16_accumulation,
    "torch.are_deterministic_algorithms_enabled()": lambda: torch.are_deterministic_algorithms_enabled(),
    "torch.is_deterministic_algorithms_warn_only_enabled()":
        lambda: torch.is_deterministic_algorithms_warn_only_enabled(),
    "torch.backends.cudnn.deterministic": lambda: torch.backends.cudnn.deterministic,
    "torch.backends.cudnn.benchmark": lambda: torch.backends.cudnn.benchmark,
    "torch.backends.cudnn.enabled": lambda: torch.backends.cudnn.enabled,
    "flush_denormal (CPU FTZ/DAZ)": _ftz,
    "torch.get_default_dtype()": lambda: torch.get_default_dtype(),
    "torch.get_default_device()": lambda: torch.get_default_device(),
    "torch.is_grad_enabled()": lambda: torch.is_grad_enabled(),
    "torch.is_inference_mode_enabled()": lambda: torch.is_inference_mode_enabled(),
    "torch.is_anomaly_enabled()": lambda: torch.is_anomaly_enabled(),
    "torch.get_num_threads()": lambda: torch.get_num_threads(),
    "torch.get_num_interop_threads()": lambda: torch.get_num_interop_threads(),
    "torch.backends.cuda.flash_sdp_enabled()": lambda: torch.backends.cuda.flash_sdp_enabled(),
    "torch.backends.cuda.mem_efficient_sdp_enabled()": lambda: torch.backends.cuda.mem_efficient_sdp_enabled(),
    "torch.backends.cuda.math_sdp_enabled()": lambda: torch.backends.cuda.math_sdp_enabled(),
    "torch.initial_seed()": lambda: torch.initial_seed(),
    "numpy.geterr()": lambda: sorted(np.geterr().items()),
    "sys.gettrace()": lambda: sys.gettrace(),
    "sys.getprofile()": lambda: sys.getprofile(),
    "signal handlers": lambda: {s.name: repr(signal.getsignal(s)) for s in
                                (signal.SIGINT, signal.SIGTERM, signal.SIGALRM, signal.SIGUSR1)},
}


def _token(owner: str, v: Any) -> str:
    code = getattr(v, "__code__", None)
    if code is None:
        code = getattr(getattr(v, "__func__", None), "__code__", None)
    return f"{owner}:{id(v)}:{id(code) if code is not None else ''}"


def _callables() -> dict[str, str]:
    out: dict[str, str] = {}
    for name in MODULES:
        mod = sys.modules.get(name)
        if mod is None:
            try:
                mod = importlib.import_module(name)
            except ImportError:
                continue
        for k, v in list(vars(mod).items()):
            if k.startswith("__") or isinstance(v, types.ModuleType):
                continue
            if callable(v):
                out[f"{name}.{k}"] = _token(name, v)
    for path in CLASSES:
        try:
            cls = _get(path)
        except (ImportError, AttributeError):
            continue
        for k in dir(cls):
            if k.startswith("__") and k not in ("__eq__", "__matmul__", "__call__", "__init__", "__new__"):
                continue
            for c in cls.__mro__:
                if k in c.__dict__:
                    v = c.__dict__[k]
                    out[f"{path}.{k}"] = _token(f"{c.__module__}.{c.__qualname__}", v)
                    break
    return out


def _threads() -> list[ThreadInfo]:
    out = []
    for t in threading.enumerate():
        target = getattr(t, "_target", None)
        out.append(ThreadInfo(
            name=t.name, ident=t.ident, daemon=t.daemon, alive=t.is_alive(),
            cls=f"{type(t).__module__}.{type(t).__qualname__}",
            target=f"{getattr(target, '__module__', '')}.{getattr(target, '__qualname__', '')}" if target else "",
        ))
    return out


def snapshot(cuda: bool) -> Snapshot:
    """One snapshot of global state (module doc)."""
    flags = {k: _flag(fn) for k, fn in FLAGS.items()}
    snap = Snapshot(flags={k: v for k, v in flags.items() if v is not None}, functions=_callables(),
                    threads=_threads(), env=dict(os.environ))
    if cuda:
        s = torch.cuda.current_stream()
        snap.cuda = CudaState(current_stream=int(s.cuda_stream), device=torch.cuda.current_device())
    return snap


def describe_callable(v: Any, task_dir: Any = None) -> CallableInfo:
    """Where a callable comes from: qualified name, module, file and first line
    (``task_file``: the file relative to the task folder when it lies there)."""
    d = CallableInfo(qualname=str(getattr(v, "__qualname__", type(v).__qualname__)),
                     module=str(getattr(v, "__module__", None) or ""))
    try:
        f = inspect.unwrap(v) if callable(v) else v
        d.file = inspect.getsourcefile(f)
        d.line = inspect.getsourcelines(f)[1]
    except (TypeError, OSError, ValueError):
        pass
    root = str(task_dir) if task_dir is not None else None
    if root and isinstance(d.file, str) and d.file and d.file.startswith(root):
        d.task_file = os.path.relpath(d.file, root)
    return d


def _resolve(key: str) -> Any:
    for path in CLASSES + MODULES:
        if key.startswith(path + ".") and "." not in key[len(path) + 1:]:
            try:
                obj = _get(path) if path in CLASSES else importlib.import_module(path)
                return getattr(obj, key[len(path) + 1:])
            except (ImportError, AttributeError):
                return None
    return None


_ABSENT = object()


class _StreamWatch:
    """Counts CUDA streams created and set_stream calls while active (CUDA only)."""

    def __init__(self, task_dir: Any):
        self.task_dir = task_dir
        self.created: list[StreamCreated] = []
        self.set_calls = 0
        self._saved: list[tuple[Any, str, Any]] = []

    def __enter__(self) -> _StreamWatch:
        from workstation.harness.guards import task_site

        watch = self
        orig_new = torch.cuda.Stream.__new__

        def new(cls: Any, *args: Any, **kwargs: Any) -> Any:
            site = task_site(watch.task_dir, 1)
            watch.created.append(StreamCreated(site=Frame(**site) if site is not None else None))
            return orig_new(cls, *args, **kwargs)

        orig_set = torch.cuda.set_stream

        def set_stream(s: Any) -> Any:
            watch.set_calls += 1
            return orig_set(s)

        # restore the raw class-dict entries on exit (a staticmethod stays a staticmethod),
        # so the snapshot after the call sees exactly the objects it saw before
        self._saved = [(torch.cuda.Stream, "__new__", torch.cuda.Stream.__dict__.get("__new__", _ABSENT)),
                       (torch.cuda, "set_stream", vars(torch.cuda).get("set_stream", _ABSENT))]
        torch.cuda.Stream.__new__ = new  # type: ignore[method-assign]
        torch.cuda.set_stream = set_stream  # type: ignore[assignment]  # the recorder takes any stream-like argument
        return self

    def __exit__(self, *exc: object) -> None:
        for obj, name, v in self._saved:
            if v is _ABSENT:
                delattr(obj, name)
            else:
                setattr(obj, name, v)


@step(StateProbeStep)
def state_probe_step(ctx: Any, spec: StateProbeStep) -> StepOutput:
    """Snapshots before import, after import and after one call of ``spec.role``
    (``extra.before``, ``extra.after_import``, ``extra.after_call``), plus
    ``extra.streams`` (CUDA) and ``extra.details`` (see module doc)."""
    cuda = ctx.device.type == "cuda"
    extra = StateProbeExtra(device_name=ctx.device_name)
    try:
        inputs = ctx.make_inputs(spec.case, spec.seed)
        extra.before = before = snapshot(cuda)
        fn = ctx.callable(spec.role)
        extra.after_import = after_import = snapshot(cuda)
        watch = _StreamWatch(ctx.task_dir) if cuda else None
        t0 = time.perf_counter()
        try:
            if watch is not None:
                with watch:
                    fn(*inputs)
                    ctx.sync()
            else:
                fn(*inputs)
        except BaseException as e:  # noqa: BLE001  (re-raised, tagged with its phase)
            raise _tag(e, "call") from None
        seconds = time.perf_counter() - t0
        extra.after_call = after_call = snapshot(cuda)
        if watch is not None:
            extra.streams = StreamWatch(created=watch.created, set_stream_calls=watch.set_calls)
    except BaseException as e:  # noqa: BLE001  (task code's error, sent with the snapshots taken)
        return StepOutput(ok=False, error=error_info(e, getattr(e, "_kws_phase", "call")), extra=extra)
    details: dict[str, CallableInfo] = {}
    for snap in (after_import, after_call):
        for k, tok in snap.functions.items():
            if before.functions.get(k) != tok and k not in details:
                details[k] = describe_callable(_resolve(k), ctx.task_dir)
    extra.details = details
    return StepOutput(ok=True, extra=extra, seconds=seconds)
