"""Child side of ``fallback``: which framework ops and which Triton kernels a call ran.

Monitors (for the ``call`` step's ``monitors`` list):

- ``aten_ops`` (report: :class:`~workstation.protocol.extras.monitors.AtenOpsReport`): a
  ``TorchDispatchMode`` that counts every aten op the call dispatches, with the largest
  tensor (elements) among its arguments and results and the first task-code line that
  issued it (``report.ops[name]``: ``count``, ``max_numel``, ``site``).
  Ops issued inside other ops are not seen (a dispatch mode sees the outermost call of
  each op), which is what "the framework op the candidate called" means. Task code can
  step outside a dispatch mode (``torch._C._disable_current_modes()``), so the call also
  runs under an independent recorder, the autograd profiler (``RecordFunction``
  callbacks in the dispatcher: they see every aten op whatever the Python dispatch modes
  do): ``report.profiler`` (``ops``: name -> ``count``, ``max_numel``; ``events``,
  ``stopped``, ``marker``, ``mode_removed``) lists the top-level aten ops it saw, whether
  the profiler was still running when the call returned (``stopped``: task code turned it
  off), whether kws's opening marker is in its events (``marker`` False: the session was
  replaced), and whether the dispatch mode was taken off the mode stack.
- ``triton_launches`` (report:
  :class:`~workstation.protocol.extras.monitors.TritonLaunchesReport`): counts launches of
  ``@triton.jit`` kernels (seen through :mod:`workstation.harness.launches`), per kernel
  name: ``launches`` / ``kernels`` those that returned, ``failed_launches`` / ``failed`` /
  ``errors`` those that raised (a compile error), ``warmups`` compile-only warm-up
  launches.

Step ``fault_call``: one call with a fault injected where the candidate's kernels start:
``fault="triton_launch"`` makes every Triton launch raise
:class:`KwsInjectedLaunchFailure`; ``"extension_build"`` makes
``torch.utils.cpp_extension.load``/``load_inline`` raise it (the role's module is
imported under the fault). A candidate that still returns has a silent fallback. Its
``extra`` is a :class:`~workstation.protocol.extras.calls.FaultCallExtra`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import msgspec
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from workstation.harness import StepOutput, monitor, step
from workstation.harness.core import describe_inputs, error_info, prepared_inputs
from workstation.harness.guards import task_site
from workstation.harness.launches import Launch, LaunchObserver, launch_classes, observing
from workstation.protocol.extras.calls import FaultCallExtra
from workstation.protocol.extras.monitors import (
    AtenOpCount,
    AtenOpsReport,
    AtenProfile,
    ProfiledOpCount,
    Site,
    TritonLaunchesReport,
)
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
        self.ops: dict[str, AtenOpCount] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = str(func.overloadpacket).removeprefix("aten.")
        rec = self.ops.get(name)
        n = max(_numel(args), _numel(list((kwargs or {}).values())), _numel(out))
        if rec is None:
            site = task_site(self.task_dir, 1)
            rec = self.ops[name] = AtenOpCount(count=0, max_numel=0, site=Site(**site) if site else None)
        rec.count += 1
        rec.max_numel = max(rec.max_numel, n)
        return out


@monitor(AtenOps)
def aten_ops_monitor(ctx: Any, spec: AtenOps, report: AtenOpsReport):
    """Trace aten ops of the call into ``report.ops`` and ``report.profiler``."""
    return _aten_ops(ctx, report)


#: the name of the profiler event kws opens its recording session with.
PROFILER_MARKER = "kws::aten_ops_open"


def _profiler_ops(events: Any) -> dict[str, ProfiledOpCount]:
    """Top-level aten events (no aten parent) by name: count and largest input (elements)."""
    out: dict[str, ProfiledOpCount] = {}
    for e in events:
        name = getattr(e, "name", "")
        if not name.startswith("aten::"):
            continue
        parent = getattr(e, "cpu_parent", None)
        while parent is not None and not parent.name.startswith("aten::"):
            parent = parent.cpu_parent
        if parent is not None:
            continue
        n = 0
        for shape in getattr(e, "input_shapes", None) or []:
            if isinstance(shape, list | tuple) and all(isinstance(d, int) for d in shape):
                k = 1
                for d in shape:
                    k *= d
                n = max(n, k if shape else 0)
        rec = out.setdefault(name.removeprefix("aten::"), ProfiledOpCount(count=0, max_numel=0))
        rec.count += 1
        rec.max_numel = max(rec.max_numel, n)
    return out


@contextlib.contextmanager
def _aten_ops(ctx: Any, report: AtenOpsReport) -> Iterator[None]:
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    mode = OpTraceMode(ctx.task_dir)
    prof = torch.autograd.profiler.profile(use_kineto=False, record_shapes=True)
    prof.__enter__()
    with torch.autograd.profiler.record_function(PROFILER_MARKER):
        pass
    mode_removed = False
    try:
        with mode:
            try:
                yield
            finally:
                mode_removed = mode not in _get_current_dispatch_mode_stack()
    finally:
        report.ops = mode.ops
        stopped = not torch.autograd._profiler_enabled()
        error = ""
        try:
            prof.__exit__(None, None, None)
            events = list(prof.function_events or [])
        except Exception as e:  # noqa: BLE001  (task code broke the session: evidence)
            events = []
            error = f"{type(e).__name__}: {str(e)[:200]}"
        report.profiler = AtenProfile(
            mode_removed=mode_removed, stopped=stopped, error=error,
            marker=any(getattr(e, "name", "") == PROFILER_MARKER for e in events), events=len(events),
            ops=_profiler_ops(events))


class LaunchCounter(LaunchObserver):
    """Counts launches per kernel name: ``kernels`` those that returned, ``failed`` those
    that raised (with the first ``errors``), ``warmups`` the warm-up (compile-only) ones."""

    def __init__(self) -> None:
        self.kernels: dict[str, int] = {}
        self.failed: dict[str, int] = {}
        self.errors: list[str] = []
        self.warmups = 0

    def after(self, launch: Launch, result: Any, error: BaseException | None) -> None:
        name = launch.name
        if launch.warmup:
            self.warmups += 1
        elif error is None:
            self.kernels[name] = self.kernels.get(name, 0) + 1
        else:
            self.failed[name] = self.failed.get(name, 0) + 1
            if len(self.errors) < 4:
                self.errors.append(f"{name}: {type(error).__name__}: {str(error)[:300]}")

    def fill(self, report: TritonLaunchesReport) -> None:
        """Set ``report`` (the ``triton_launches`` report, module doc) to what was counted."""
        report.kernels = self.kernels
        report.launches = sum(self.kernels.values())
        report.failed = self.failed
        report.failed_launches = sum(self.failed.values())
        report.errors = self.errors
        report.warmups = self.warmups
        report.hooked = [c.__name__ for c in launch_classes()]

    def report(self) -> dict[str, Any]:
        """The ``triton_launches`` report as its JSON object (the ``profile`` step's
        ``launches`` and ``warmup_launches``)."""
        rep = TritonLaunchesReport()
        self.fill(rep)
        return msgspec.to_builtins(rep)


class FailLaunches(LaunchObserver):
    """Fault injection: every launch raises :class:`KwsInjectedLaunchFailure` instead of
    running; ``attempts`` counts them, ``kernels`` per kernel name."""

    def __init__(self) -> None:
        self.attempts = 0
        self.kernels: dict[str, int] = {}

    def before(self, launch: Launch) -> None:
        name = launch.name
        self.attempts += 1
        self.kernels[name] = self.kernels.get(name, 0) + 1
        raise KwsInjectedLaunchFailure(f"kws fault injection: the launch of {name} fails")


@monitor(TritonLaunches)
def triton_launches_monitor(ctx: Any, spec: TritonLaunches, report: TritonLaunchesReport):
    """Count Triton launches of the call into ``report``."""
    return _count_launches(report)


@contextlib.contextmanager
def _count_launches(report: TritonLaunchesReport) -> Iterator[None]:
    counter = LaunchCounter()
    try:
        with observing(counter):
            yield
    finally:
        counter.fill(report)


@contextlib.contextmanager
def _fail_builds(faults: FailLaunches) -> Iterator[None]:
    """Make ``torch.utils.cpp_extension.load``/``load_inline`` raise, counted in ``faults.attempts``."""
    import torch.utils.cpp_extension as ext

    saved = {name: getattr(ext, name) for name in ("load", "load_inline")}

    def fail(*args: Any, **kwargs: Any) -> Any:
        faults.attempts += 1
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
    with ``aten_ops``. ``extra`` (a :class:`~workstation.protocol.extras.calls.FaultCallExtra`):
    ``attempted`` (launches or builds that hit the fault), ``kernels``, ``ops``, ``profiler``;
    ``ok`` is False when the call raised (the expected outcome)."""
    faults = FailLaunches()
    report = AtenOpsReport()
    extra = FaultCallExtra(fault=spec.fault, device_name=ctx.device_name)
    try:
        inputs = prepared_inputs(ctx, spec.case, spec.seed, spec.transforms)
        extra.inputs = describe_inputs(inputs)
        patch = observing(faults) if spec.fault == "triton_launch" else _fail_builds(faults)
        with patch, _aten_ops(ctx, report):
            result, seconds = ctx.timed_call(ctx.callable(spec.role), inputs)
        outputs = ctx.outputs_of(result, inputs)
    except BaseException as e:  # noqa: BLE001  (the injected fault's exception is the expected outcome)
        _fill_fault(extra, faults, report)
        return StepOutput(ok=False, error=error_info(e, getattr(e, "_kws_phase", "call")), extra=extra)
    _fill_fault(extra, faults, report)
    return StepOutput(ok=True, outputs=outputs, extra=extra, seconds=seconds)


def _fill_fault(extra: FaultCallExtra, faults: FailLaunches, report: AtenOpsReport) -> None:
    """``extra``'s fault counts and trace from ``faults`` and the aten trace ``report``."""
    extra.attempted = faults.attempts
    extra.kernels = faults.kernels
    extra.ops = report.ops
    extra.profiler = report.profiler
