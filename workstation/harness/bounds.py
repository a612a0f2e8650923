"""The ``triton_bounds`` step: what the ``bounds-proof`` check needs to prove a Triton
candidate's loads and stores in bounds: per case, the sequence of launches with their
concrete launch facts, and per distinct launch the kernel's TTIR.

In the job child (under the interpreter) the candidate's wrapper runs once per case of
``spec.cases`` while a :class:`BoundsRecorder` observes its launches
(:mod:`workstation.harness.launches`) and skips them: no kernel runs (a kernel that writes
out of bounds cannot corrupt the child, and a shape costs only its inputs), so a wrapper
that reads a kernel's results to decide its next launch is recorded on unwritten
memory. Per launch it keeps:

- ``key``: the index of its distinct compile (:func:`~workstation.harness.aot_capture.launch_record`,
  file, qualname, signature, constexprs, options) in ``launches``;
- ``grid``: the three grid sizes (a callable grid evaluated on the bound arguments, as
  the interpreter does);
- ``args``: per kernel argument, an :class:`~workstation.protocol.extras.triton.IntArg`
  for an integer, a :class:`~workstation.protocol.extras.triton.TensorArg` with ``dtype``,
  ``shape``, ``strides`` (elements), ``footprint`` (elements from the data pointer to one
  past the furthest element the view reaches: ``1 + sum((size-1) * stride)``, 0 for an
  empty view; negative strides are reported as such), ``ptr`` (the data pointer, to tell
  aliases), ``output`` (index of the call's output sharing that data pointer, else None);
  an :class:`~workstation.protocol.extras.triton.OtherArg` (its type name) otherwise.

After the calls, the distinct launches are lowered to TTIR for sm_90 in the AOT compile
child (``python -m workstation.harness.aot_compile`` with ``ttir_only``: no PTX, no GPU),
one TTIR text per distinct launch: ``ttir`` list (or ``ttir_error``).

``extra``: :class:`~workstation.protocol.extras.triton.TritonBoundsExtra`: ``cases`` (per
case: ``launches`` list or ``error``), ``launches`` (the distinct launch records, with
``ttir``/``ttir_error``), ``seconds``.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import msgspec

from workstation.harness import StepOutput, step
from workstation.harness.aot_capture import launch_key, launch_record
from workstation.harness.aot_compile import run_child, task_relative
from workstation.harness.core import error_info
from workstation.harness.launches import SKIP, Launch, LaunchObserver, observing
from workstation.protocol.extras.triton import (
    BoundsArg,
    BoundsCall,
    BoundsCase,
    BoundsLaunch,
    IntArg,
    OtherArg,
    TensorArg,
    TritonBoundsExtra,
)
from workstation.protocol.steps import TritonBoundsStep

#: seconds the TTIR lowering child may take for all the distinct launches together.
TTIR_TIMEOUT_S = 120.0


def _tensor_facts(t: Any) -> TensorArg:
    shape = [int(s) for s in t.shape]
    strides = [int(s) for s in t.stride()]
    if any(s == 0 for s in shape):
        footprint = 0
    else:
        footprint = 1 + sum((s - 1) * st for s, st in zip(shape, strides, strict=True))
    return TensorArg(dtype=str(t.dtype).removeprefix("torch."), shape=shape, strides=strides,
                     footprint=int(footprint), ptr=int(t.data_ptr()), output=None)


def _arg_facts(v: Any) -> BoundsArg:
    import torch

    if isinstance(v, torch.Tensor):
        return _tensor_facts(v)
    if isinstance(v, bool | int):
        return IntArg(value=int(v))
    return OtherArg(type=type(v).__name__)


class BoundsRecorder(LaunchObserver):
    """Keeps every launch's facts (module doc) in ``calls`` and the distinct launch
    records in ``records`` (keyed by :func:`launch_key`)."""

    def __init__(self, records: dict[str, dict[str, Any]]):
        self.records = records
        self.calls: list[BoundsCall] = []
        self.errors: list[str] = []

    def before(self, launch: Launch) -> Any:
        if launch.warmup:
            return SKIP
        try:
            rec = launch_record(launch.fn, launch.arg_names, launch.args, launch.kwargs)
            key = launch_key(rec)
            if key not in self.records:
                self.records[key] = dict(rec, index=len(self.records))
            bound = dict(zip(launch.arg_names, launch.args, strict=False))
            bound.update({k: v for k, v in launch.kwargs.items() if k in launch.arg_names})
            for name, cv in rec["constexprs"].items():
                bound.setdefault(name, cv)
            grid = launch.kwargs.get("grid")
            if callable(grid):
                grid = grid(bound)
            dims = tuple(int(g) for g in (grid if grid is not None else ()))
            grid = dims + (1,) * (3 - len(dims))
            self.calls.append(BoundsCall(key=self.records[key]["index"], qualname=rec["qualname"], grid=list(grid),
                                         args={n: _arg_facts(bound.get(n)) for n in launch.arg_names
                                               if rec["signature"].get(n) != "constexpr"}))
        except Exception as e:  # noqa: BLE001  (never break the task's launch)
            self.errors.append(f"{type(e).__name__}: {e}")
        return SKIP


def _mark_outputs(calls: list[BoundsCall], outputs: list[Any]) -> None:
    ptrs: dict[int, int] = {}
    for j, o in enumerate(outputs):
        if hasattr(o, "data_ptr"):
            ptrs.setdefault(int(o.data_ptr()), j)
    for c in calls:
        for a in c.args.values():
            if isinstance(a, TensorArg):
                a.output = ptrs.get(a.ptr)


def _lower(task_dir: Path, recs: list[dict[str, Any]]) -> None:
    """TTIR of each record, in place (``ttir`` or ``ttir_error``)."""
    req = {"task_dir": str(task_dir), "launches": recs, "targets": [["cuda", 90, 32]], "ttir_only": True}
    try:
        got = run_child(task_dir, req, TTIR_TIMEOUT_S)
    except (subprocess.TimeoutExpired, ValueError, KeyError, TypeError) as e:
        for r in recs:
            r["ttir_error"] = f"the TTIR lowering child failed: {type(e).__name__}: {str(e)[:300]}"
        return
    for k in got:
        r = recs[k["launch"]]
        if "ttir" in k:
            r["ttir"] = k["ttir"]
        else:
            r["ttir_error"] = k.get("error", "no TTIR")


@step(TritonBoundsStep)
def bounds_step(ctx: Any, spec: TritonBoundsStep) -> StepOutput:
    """Record the launches of the candidate on each case and lower each distinct launch to
    TTIR (module doc)."""
    t0 = time.perf_counter()
    task_dir = Path(ctx.task_dir)
    records: dict[str, dict[str, Any]] = {}
    cases: list[BoundsCase] = []
    fn = None
    for case in spec.cases:
        rec = BoundsRecorder(records)
        try:
            inputs = ctx.make_inputs(case, spec.seed)
            fn = fn or ctx.callable("candidate")
            with observing(rec):
                result, _ = ctx.timed_call(fn, inputs)
            _mark_outputs(rec.calls, ctx.outputs_of(result, inputs))
        except BaseException as e:  # noqa: BLE001
            cases.append(BoundsCase(error=error_info(e, getattr(e, "_kws_phase", "call"))))
            continue
        cases.append(BoundsCase(launches=rec.calls, errors=rec.errors))
    recs = sorted(records.values(), key=lambda r: r["index"])
    if recs and spec.lower:
        _lower(task_dir, recs)
    for r in recs:
        r["file"] = task_relative(r["file"], task_dir)
    return StepOutput(ok=True, extra=TritonBoundsExtra(cases=cases, launches=msgspec.convert(recs, type=list[BoundsLaunch]),
                                                       seconds=time.perf_counter() - t0))
