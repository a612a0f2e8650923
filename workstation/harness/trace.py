"""Child side of ``fallback``: which framework ops and which Triton kernels a call ran.

Monitors (for the ``call`` step's ``monitors`` list):

- ``aten_ops``: a ``TorchDispatchMode`` that counts every aten op the call dispatches,
  with the largest tensor (elements) among its arguments and results and the first
  task-code line that issued it (``report["ops"][name] = {"count", "max_numel", "site"}``).
  Ops issued inside other ops are not seen (a dispatch mode sees the outermost call of
  each op), which is what "the framework op the candidate called" means.
- ``triton_launches``: counts launches of ``@triton.jit`` kernels (compiled:
  ``JITFunction.run``; interpreter: ``InterpretedFunction.run``; autotuned and heuristics
  kernels end in one of these), per kernel name: ``report["launches"]`` /
  ``report["kernels"]`` those that returned, ``report["failed_launches"]`` /
  ``report["failed"]`` / ``report["errors"]`` those that raised (a compile error). Launches through a ``CompiledKernel`` made with
  ``triton.compile`` directly are not seen.

Step ``fault_call``: one call with a fault injected where the candidate's kernels start:
``fault="triton_launch"`` makes every Triton launch raise
:class:`KwsInjectedLaunchFailure`; ``"extension_build"`` makes
``torch.utils.cpp_extension.load``/``load_inline`` raise it (the role's module is
imported under the fault). A candidate that still returns has a silent fallback.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from workstation.harness import StepOutput, monitor, step
from workstation.harness.core import apply_transforms, describe_inputs, error_info
from workstation.harness.guards import task_site
from workstation.protocol.steps import AtenOps, FaultCallStep, TritonLaunches


class KwsInjectedLaunchFailure(RuntimeError):
    """Raised by kws in place of a kernel launch or an extension build (fault injection)."""


def _numel(x: Any) -> int:
    if isinstance(x, torch.Tensor):
        return int(x.numel())
    if isinstance(x, list | tuple):
        return max((_numel(y) for y in x), default=0)
    return 0


class OpTraceMode(TorchDispatchMode):
    """Counts aten ops (see module doc)."""

    def __init__(self, task_dir: Any):
        super().__init__()
        self.task_dir = task_dir
        self.ops: dict[str, dict[str, Any]] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = str(func.overloadpacket).removeprefix("aten.")
        rec = self.ops.get(name)
        n = max(_numel(args), _numel(list((kwargs or {}).values())), _numel(out))
        if rec is None:
            rec = self.ops[name] = {"count": 0, "max_numel": 0, "site": task_site(self.task_dir, 1)}
        rec["count"] += 1
        rec["max_numel"] = max(rec["max_numel"], n)
        return out


@monitor(AtenOps)
def aten_ops_monitor(ctx: Any, spec: AtenOps, report: dict[str, Any]):
    """Trace aten ops of the call into ``report["ops"]``."""
    return _aten_ops(ctx, report)


@contextlib.contextmanager
def _aten_ops(ctx: Any, report: dict[str, Any]) -> Iterator[None]:
    mode = OpTraceMode(ctx.task_dir)
    try:
        with mode:
            yield
    finally:
        report["ops"] = mode.ops


def _launch_classes() -> list[type]:
    classes = []
    try:
        from triton.runtime.jit import JITFunction

        classes.append(JITFunction)
    except ImportError:
        pass
    try:
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    except ImportError:
        pass
    return classes


def _kernel_name(obj: Any) -> str:
    fn = getattr(obj, "fn", None)
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(obj)[:80]


@contextlib.contextmanager
def patched_launches(on_launch: Any, on_done: Any = None) -> Iterator[None]:
    """Wrap ``run`` of every Triton launch class: ``on_launch(kernel_name, warmup)`` is
    called first (it may raise); the original ``run`` follows; then
    ``on_done(kernel_name, warmup, error)`` with the exception it raised (or None)."""
    saved = []
    for cls in _launch_classes():
        orig = cls.__dict__.get("run")
        if orig is None:
            continue

        def run(self: Any, *args: Any, _orig: Any = orig, **kwargs: Any) -> Any:
            name, warm = _kernel_name(self), bool(kwargs.get("warmup", False))
            on_launch(name, warm)
            try:
                r = _orig(self, *args, **kwargs)
            except BaseException as e:
                if on_done is not None:
                    on_done(name, warm, e)
                raise
            if on_done is not None:
                on_done(name, warm, None)
            return r

        saved.append((cls, orig))
        cls.run = run  # type: ignore[method-assign]
    try:
        yield
    finally:
        for cls, orig in saved:
            cls.run = orig  # type: ignore[method-assign]


@monitor(TritonLaunches)
def triton_launches_monitor(ctx: Any, spec: TritonLaunches, report: dict[str, Any]):
    """Count Triton launches of the call into ``report``."""
    return _count_launches(report)


@contextlib.contextmanager
def _count_launches(report: dict[str, Any]) -> Iterator[None]:
    kernels: dict[str, int] = {}
    failed: dict[str, int] = {}
    errors: list[str] = []
    warmups = {"n": 0}

    def on_launch(name: str, warmup: bool) -> None:
        pass

    def on_done(name: str, warmup: bool, error: BaseException | None) -> None:
        if warmup:
            warmups["n"] += 1
        elif error is None:
            kernels[name] = kernels.get(name, 0) + 1
        else:
            failed[name] = failed.get(name, 0) + 1
            if len(errors) < 4:
                errors.append(f"{name}: {type(error).__name__}: {str(error)[:300]}")

    try:
        with patched_launches(on_launch, on_done):
            yield
    finally:
        report["kernels"] = kernels
        report["launches"] = sum(kernels.values())
        report["failed"] = failed
        report["failed_launches"] = sum(failed.values())
        report["errors"] = errors
        report["warmups"] = warmups["n"]
        report["hooked"] = [c.__name__ for c in _launch_classes()]


@contextlib.contextmanager
def _fail_builds(attempts: dict[str, Any]) -> Iterator[None]:
    import torch.utils.cpp_extension as ext

    saved = {name: getattr(ext, name) for name in ("load", "load_inline")}

    def fail(*args: Any, **kwargs: Any) -> Any:
        attempts["n"] += 1
        raise KwsInjectedLaunchFailure("kws fault injection: this extension build fails")

    for name in saved:
        setattr(ext, name, fail)
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(ext, name, fn)


@step(FaultCallStep)
def fault_call_step(ctx: Any, spec: FaultCallStep) -> StepOutput:
    """One call of ``spec.role`` with ``spec.fault`` injected (module doc), traced
    with ``aten_ops``. ``extra``: ``attempted`` (launches or builds that hit the fault),
    ``ops``; ``ok`` is False when the call raised (the expected outcome)."""
    fault = spec.fault
    attempts: dict[str, Any] = {"n": 0, "kernels": {}}

    def on_launch(name: str, warmup: bool) -> None:
        attempts["n"] += 1
        attempts["kernels"][name] = attempts["kernels"].get(name, 0) + 1
        raise KwsInjectedLaunchFailure(f"kws fault injection: the launch of {name} fails")

    report: dict[str, Any] = {}
    extra: dict[str, Any] = {"fault": fault, "device_name": ctx.device_name}
    try:
        inputs = ctx.make_inputs(spec.case, spec.seed)
        inputs = apply_transforms(ctx, inputs, spec.transforms)
        extra["inputs"] = describe_inputs(inputs)
        patch = patched_launches(on_launch) if fault == "triton_launch" else _fail_builds(attempts)
        with patch, _aten_ops(ctx, report):
            result, seconds = ctx.timed_call(ctx.callable(spec.role), inputs)
        outputs = ctx.outputs_of(result, inputs)
    except BaseException as e:  # noqa: BLE001
        extra.update(attempted=attempts["n"], kernels=attempts["kernels"], ops=report.get("ops", {}))
        return StepOutput(ok=False, error=error_info(e, getattr(e, "_kws_phase", "call")), extra=extra)
    extra.update(attempted=attempts["n"], kernels=attempts["kernels"], ops=report.get("ops", {}))
    return StepOutput(ok=True, outputs=outputs, extra=extra, seconds=seconds)
