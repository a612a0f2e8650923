"""Child side of the ``profile`` step: which kernels and framework ops one role's calls ran.

:class:`~workstation.protocol.steps.ProfileStep`: make the inputs, call the role
``warmup`` times with Triton launches counted (compilation and autotuning happen there,
outside the profile), then ``calls`` times under ``torch.profiler.profile`` (activities:
the CPU, and CUDA on a GPU), each call inside ``record_function("kws#call")`` and followed
by a device synchronize, with Triton launches counted again through
:mod:`workstation.harness.launches` and each launch wrapped in a ``kws#launch:<kernel>``
annotation (:class:`AnnotateLaunches`). The Chrome trace is exported, and its events that
the parent reads (``kernel``, ``gpu_memcpy``, ``gpu_memset``, ``cpu_op``,
``cuda_runtime``, ``cuda_driver``, ``user_annotation``; ``args`` cut to the ids and byte
counts) are sent back with ``deviceProperties`` as ``extra.trace``, device events
first when there are more than ``max_events``.

``extra`` (:class:`~workstation.protocol.extras.timing.ProfileExtra`): ``trace``, ``trace_events`` (events in the exported trace), ``truncated``,
``launches`` (the profiled calls' Triton launches: ``kernels`` per name, ``launches``,
``failed``...), ``warmup_launches`` (the same for the warm-up calls), ``calls``,
``interpreter`` (Triton ran in the interpreter: its kernels are Python, not profiler
events), ``profiler_error`` (when torch.profiler could not run: the calls then ran
unprofiled, launches still counted), ``workload`` (bytes and flops of the case, as the
timing step measures them), ``device_name``, ``inputs``.

Under ``TRITON_INTERPRET=1`` Triton kernels are not profiler events: the kernel list on the
CPU comes from launch tracing, and host op times include no kernel time.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from workstation.harness import StepOutput, step
from workstation.harness.core import INTERPRETER, describe_inputs, error_info, prepared_inputs
from workstation.harness.launches import Launch, LaunchObserver, observing
from workstation.harness.timing import workload
from workstation.harness.trace import LaunchCounter
from workstation.protocol.extras.monitors import TritonLaunchesReport
from workstation.protocol.extras.timing import ProfileExtra, ProfileTrace
from workstation.protocol.steps import ProfileStep

#: trace event categories the parent reads (:mod:`workstation.profiles.torchtrace`).
KEPT_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "user_annotation", "cpu_op")
_KEPT_ARGS = ("External id", "correlation", "bytes", "device", "stream")
_DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


def _slim(e: dict[str, Any]) -> dict[str, Any]:
    got = e.get("args")
    args: dict[str, Any] = got if isinstance(got, dict) else {}
    return {"ph": "X", "cat": e.get("cat"), "name": e.get("name"), "ts": e.get("ts"), "dur": e.get("dur"),
            "pid": e.get("pid"), "tid": e.get("tid"), "args": {k: args[k] for k in _KEPT_ARGS if k in args}}


def slim_trace(doc: dict[str, Any], max_events: int) -> tuple[ProfileTrace, int, bool]:
    """The parts of an exported Chrome trace the parent reads: (trace, events in the
    original, truncated)."""
    events = [e for e in doc.get("traceEvents") or [] if isinstance(e, dict) and e.get("ph") == "X"
              and e.get("cat") in KEPT_CATEGORIES]
    events.sort(key=lambda e: (e.get("cat") not in _DEVICE_CATEGORIES, e.get("cat") != "user_annotation"))
    total = len(events)
    kept = [_slim(e) for e in events[:max_events]]
    props = [p for p in doc.get("deviceProperties") or [] if isinstance(p, dict)]
    return ProfileTrace(events=kept, device_properties=props), total, total > max_events


class AnnotateLaunches(LaunchObserver):
    """Wraps each Triton launch in ``record_function("kws#launch:<kernel>")``: under the
    interpreter the host ops a launch issues (argument copies) are the interpreter's, not
    the candidate's, and the parent drops the ops inside these spans."""

    def __init__(self) -> None:
        self._open: list[Any] = []

    def before(self, launch: Launch) -> None:
        from torch.profiler import record_function

        rf = record_function(f"kws#launch:{launch.name}")
        rf.__enter__()
        self._open.append(rf)

    def after(self, launch: Launch, result: Any, error: BaseException | None) -> None:
        if self._open:
            self._open.pop().__exit__(None, None, None)


def _profiled_calls(ctx: Any, fn: Any, inputs: tuple, calls: int) -> tuple[Any, dict[str, Any] | None, str, float]:
    """``calls`` calls under torch.profiler: (last result, exported trace or None, the
    profiler's error or "", seconds)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    acts = [ProfilerActivity.CPU]
    if ctx.device.type == "cuda":
        acts.append(ProfilerActivity.CUDA)
    result, total = None, 0.0
    try:
        prof = profile(activities=acts)
        prof.__enter__()
    except Exception as e:  # noqa: BLE001  (e.g. a profiler already running: calls still run, unprofiled)
        for _ in range(calls):
            result, s = ctx.timed_call(fn, inputs)
            total += s
        return result, None, f"{type(e).__name__}: {str(e)[:300]}", total
    try:
        with observing(AnnotateLaunches()):
            for _ in range(calls):
                with record_function("kws#call"):
                    result, s = ctx.timed_call(fn, inputs)
                total += s
    finally:
        prof.__exit__(None, None, None)
    fd, path = tempfile.mkstemp(prefix="kws-trace-", suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except Exception as e:  # noqa: BLE001
        return result, None, f"exporting the trace failed: {type(e).__name__}: {str(e)[:300]}", total
    finally:
        os.unlink(path)
    return result, doc, "", total


@step(ProfileStep)
def profile_step(ctx: Any, spec: ProfileStep) -> StepOutput:
    """Profile ``spec.role`` (module doc)."""
    extra = ProfileExtra(device_name=ctx.device_name, interpreter=INTERPRETER, calls=spec.calls)
    try:
        inputs = prepared_inputs(ctx, spec.case, spec.seed)
        extra.inputs = describe_inputs(inputs)
        fn = ctx.callable(spec.role)
        warm = LaunchCounter()
        result = None
        with observing(warm):
            for _ in range(spec.warmup):
                result, _ = ctx.timed_call(fn, inputs)
        counter = LaunchCounter()
        with observing(counter):
            result, doc, perr, seconds = _profiled_calls(ctx, fn, inputs, max(1, spec.calls))
        outputs = ctx.outputs_of(result, inputs)
    except BaseException as e:  # noqa: BLE001  (what the role raised is the step's result)
        return StepOutput(ok=False, error=error_info(e, getattr(e, "_kws_phase", "call")), extra=extra)
    extra.warmup_launches = TritonLaunchesReport(**warm.report())
    extra.launches = TritonLaunchesReport(**counter.report())
    extra.profiler_error = perr
    if doc is not None:
        extra.trace, extra.trace_events, extra.truncated = slim_trace(doc, spec.max_events)
    if spec.workload:
        extra.workload = workload(ctx, inputs, outputs)
    return StepOutput(ok=True, outputs=outputs, extra=extra, seconds=seconds)
