"""Child side of ``benchmark-bias``: run the author's ``bench`` entry and record what it did.

The ``author_bench`` step calls ``run(case, device)`` (task format: returns
``{"candidate_ms", "baseline_ms"}``) under a :func:`sys.setprofile` tracer that records,
in order and with ``time.perf_counter_ns`` stamps:

- every call of the candidate's and the baseline's (or reference's) entry function,
  found by its code's file and name, however the bench imported it (``importlib`` by
  path, ``import candidate``...): its duration and, for the first calls, the shapes,
  dtypes, strides and devices of its tensor arguments;
- every read of a host clock (``time.perf_counter``, ``perf_counter_ns``, ``time.time``,
  ``monotonic``, ``process_time``) with the bench line it was read from;
- the C functions the bench file itself calls (``Tensor.clone``, ``torch.randn``...),
  so the parent can tell what else ran between a start and a stop clock read;
- ``torch.cuda.synchronize`` and ``triton.testing.do_bench`` calls.

On the CPU the step sets the same allocator behaviour as kws's own timing
(:func:`workstation.harness.timing.steady_allocator`), so both measure the same thing.
The parent (``benchmark-bias``) pairs clock reads into the author's timed intervals and
decomposes the author's numbers. The tracer is not free: Python calls a profile function
on every call and C call, also inside the sides (a per-row Python loop makes thousands
per call; the tracer ignores them, but the callback still runs), so a Python-heavy side
runs slower traced. The parent therefore runs the bench twice, untraced for the numbers
it compares with kws's, traced for the decomposition, which compares the traced run's
numbers only with its own trace.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any, Literal

import torch

from workstation.harness import StepOutput, step
from workstation.harness.core import JobContext, error_info
from workstation.harness.timing import steady_allocator, timing_priority
from workstation.protocol.extras.timing import (
    AuthorBenchExtra,
    BenchArg,
    BenchCCall,
    BenchEvent,
    ClockRead,
    DoBenchCall,
    SideCall,
    SyncCall,
)
from workstation.protocol.steps import AuthorBenchStep

MAX_EVENTS = 20000
#: the sides a traced call can be of, as the payload types them.
_SIDES: dict[str, Literal["candidate", "baseline"]] = {"candidate": "candidate", "baseline": "baseline"}
MAX_ARG_RECORDS = 4


def _clock_fns() -> dict[int, str]:
    import timeit

    fns = {"perf_counter": time.perf_counter, "perf_counter_ns": time.perf_counter_ns, "time": time.time,
           "time_ns": time.time_ns, "monotonic": time.monotonic, "monotonic_ns": time.monotonic_ns,
           "process_time": time.process_time, "process_time_ns": time.process_time_ns}
    out = {id(f): n for n, f in fns.items()}
    out.setdefault(id(timeit.default_timer), "default_timer")
    return out


def describe_arg(x: Any) -> BenchArg:
    """Shape/dtype/stride/device of a tensor argument; the value of a scalar; the type name
    of anything else."""
    if isinstance(x, torch.Tensor):
        return BenchArg(shape=list(x.shape), dtype=str(x.dtype).removeprefix("torch."), stride=list(x.stride()),
                        device=str(x.device), contiguous=bool(x.is_contiguous()))
    if isinstance(x, int | float | bool | str) or x is None:
        return BenchArg(value=x)
    return BenchArg(type=type(x).__name__)


class BenchTracer:
    """A :func:`sys.setprofile` function recording side calls, clock reads and the bench
    file's own C calls (see module doc). ``events``: the trace in order, ``t`` in ns
    (:data:`~workstation.protocol.extras.timing.BenchEvent`)."""

    def __init__(self, targets: dict[tuple[str, str], str], bench_file: str):
        self.targets = targets
        self.bench_file = bench_file
        self.clocks = _clock_fns()
        self.events: list[BenchEvent] = []
        self.dropped = 0
        self._code_side: dict[Any, str | None] = {}
        self._open: dict[int, tuple[str, int, int]] = {}  # frame id -> (side, t0, call index)
        self._depth = 0  # side calls in progress
        self._arg_records: dict[str, int] = {}
        self._real: dict[str, str] = {}

    def _real_path(self, f: str) -> str:
        r = self._real.get(f)
        if r is None:
            r = self._real[f] = os.path.realpath(f)
        return r

    def _side(self, code: Any) -> str | None:
        s = self._code_side.get(code, "?")
        if s == "?":
            s = self.targets.get((self._real_path(code.co_filename), code.co_name))
            if s is None and code.co_name in ("synchronize", "do_bench"):
                fn = code.co_filename.replace("\\", "/")
                if code.co_name == "synchronize" and "/torch/cuda/" in fn:
                    s = "sync"
                elif code.co_name == "do_bench" and "/triton/" in fn:
                    s = "do_bench"
            self._code_side[code] = s
        return s

    def _add(self, ev: BenchEvent) -> int:
        if len(self.events) >= MAX_EVENTS:
            self.dropped += 1
            return -1
        self.events.append(ev)
        return len(self.events) - 1

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        # hot path first: inside a side's call nothing but its own return matters (a
        # Python loop in a baseline makes thousands of C calls per call)
        if self._depth:
            if event == "return" and id(frame) in self._open:
                self._close(frame)
            return
        t = time.perf_counter_ns()
        if event == "call":
            side = self._side(frame.f_code)
            if side is None:
                return
            line = frame.f_back.f_lineno if frame.f_back else 0
            ev: BenchEvent
            if side in _SIDES:
                ev = SideCall(side=_SIDES[side], t=t, line=line)
                if self._arg_records.get(side, 0) < MAX_ARG_RECORDS:
                    self._arg_records[side] = self._arg_records.get(side, 0) + 1
                    code = frame.f_code
                    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
                    ev.args = [describe_arg(frame.f_locals.get(n)) for n in names]
            elif side == "sync":
                ev = SyncCall(t=t, line=line)
            else:
                ev = DoBenchCall(t=t, line=line)
            idx = self._add(ev)
            self._open[id(frame)] = (side, t, idx)
            if side in ("candidate", "baseline"):
                self._depth += 1
        elif event == "return":
            if id(frame) in self._open:
                self._close(frame)
        elif event == "c_call":
            name = self.clocks.get(id(arg))
            if name is not None:
                self._add(ClockRead(clock=name, t=t, line=frame.f_lineno,
                                    in_bench=self._real_path(frame.f_code.co_filename) == self.bench_file))
            elif self._real_path(frame.f_code.co_filename) == self.bench_file:
                q = getattr(arg, "__qualname__", None) or getattr(arg, "__name__", "?")
                self._add(BenchCCall(name=str(q), t=t, line=frame.f_lineno))

    def _close(self, frame: Any) -> None:
        t = time.perf_counter_ns()
        side, _, idx = self._open.pop(id(frame))
        if idx >= 0:
            ev = self.events[idx]
            if not isinstance(ev, ClockRead | BenchCCall):
                ev.t_end = t
        if side in ("candidate", "baseline"):
            self._depth = max(0, self._depth - 1)


@step(AuthorBenchStep)
def author_bench_step(ctx: JobContext, spec: AuthorBenchStep) -> StepOutput:
    """Run the author's ``run(case, device)`` on ``spec.case``, traced when
    ``spec.trace``. ``extra``: :class:`~workstation.protocol.extras.timing.AuthorBenchExtra`:
    ``result`` (what run returned), ``events`` (the trace), ``targets``, ``bench_file``,
    ``seconds``."""
    case = dict(spec.case)
    roles = {"candidate": "candidate", spec.baseline_role: "baseline"}
    targets: dict[tuple[str, str], str] = {}
    for role, side in roles.items():
        ep = ctx.entry.get(role)
        if ep:
            file, _, name = ep.rpartition(":")
            targets[(os.path.realpath(ctx.task_dir / file), name)] = side
    bench_ep = ctx.entry.get("bench", "")
    bench_file = os.path.realpath(ctx.task_dir / bench_ep.rpartition(":")[0]) if bench_ep else ""
    tracer = BenchTracer(targets, bench_file)
    allocator = steady_allocator() if ctx.device.type == "cpu" else {}
    extra = AuthorBenchExtra(allocator=allocator, priority=timing_priority(), case=case,
                             targets={f"{Path(f).name}:{n}": s for (f, n), s in targets.items()},
                             bench_file=Path(bench_file).name, device_name=ctx.device_name)
    t0 = time.perf_counter()
    try:
        fn = ctx.callable("bench")
        if spec.trace:
            sys.setprofile(tracer)
        try:
            result = fn(case, ctx.device)
        finally:
            sys.setprofile(None)
        ctx.sync()
    except BaseException as e:  # noqa: BLE001  (what the author's bench raised is the step's result)
        extra.events = tracer.events
        return StepOutput(ok=False, error=error_info(e, getattr(e, "_kws_phase", "bench")), extra=extra)
    extra.seconds = time.perf_counter() - t0
    extra.events = tracer.events
    extra.dropped_events = tracer.dropped
    if isinstance(result, dict):
        extra.result = {str(k): (float(v) if isinstance(v, int | float) else repr(v)[:200])
                        for k, v in result.items()}
    else:
        extra.result = {"_type": type(result).__name__, "_repr": repr(result)[:200]}
    return StepOutput(ok=True, extra=extra, seconds=extra.seconds)
