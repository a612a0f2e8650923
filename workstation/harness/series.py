"""Child-side ``call_series`` step: many calls of one role, watched after each returns
(``late-write``, ``call-count``, ``thread-census``).

Serial phase: call ``k`` (0-based) gets fresh copies of the inputs of ``seed_a`` (new
storage, so a cache keyed on the input pointer misses and must compute). Around each call:

- a thread census before the call and right after it returns: the Python threads
  (``threading.enumerate``: ident, name, daemon, target, whether alive, the stack that
  started it, recorded by wrapping ``threading.Thread.start`` during the call, and the frames
  it is running) and the process's OS threads (``/proc/self/task`` entries: native threads
  too, C++ or CUDA runtime ones);
- a fingerprint (BLAKE2b of the output bytes) right after the call returns (on CUDA after
  a copy to the host on the current stream: ordered after the current stream's work, not
  another stream's), then again after ``torch.cuda.synchronize()``, a wait of ``settle_s``
  seconds and a second synchronize, with the census once more;
- each output's exact type (``type(o) is torch.Tensor``: SOL-ExecBench's rule).

Loop phase (GPU MODE's timed loop, SOL-ExecBench's audit call): ``loop`` calls back to
back without a synchronize in between, call ``i`` on fresh copies of the inputs of
``seed_a`` (even ``i``) or ``seed_b`` (odd ``i``), the copies of a call dropped before the
next (so the allocator may hand a later call the same addresses with other values). One
call, chosen by ``random.SystemRandom`` in the child (not predictable from the job), is the
audit: its outputs are fingerprinted right after return and kept; so are the last call's.
After the loop: one synchronize, the settle wait, the audit and last outputs read.

Sent back: ``arrays["s<k>_<j>"]`` (serial call ``k``'s output ``j`` after the settle, only
for a fingerprint not sent before: ``extra.serial[k].arrays`` names the array of each
output), ``arrays["e<k>_<j>"]`` (the value right after return, only where it differs),
``audit<j>``, ``audit_early<j>`` (where it differs), ``last<j>``; ``extra.serial`` and
``extra.loop`` hold fingerprints, types and the census
(:class:`~workstation.protocol.extras.series.CallSeriesExtra`).
"""

from __future__ import annotations

import hashlib
import os
import random
import sys
import threading
import time
import traceback
from typing import Any

import torch

from workstation.harness import StepOutput, step
from workstation.harness.core import _tag, call_context, encode_tensor
from workstation.harness.probes import _clone, _failed, _inputs
from workstation.protocol.extras.series import (
    CallSeriesExtra,
    Frame,
    SerialCall,
    SeriesLoop,
    SeriesThread,
)
from workstation.protocol.steps import CallSeriesStep

#: frames kept from a thread's creation or current stack.
STACK_FRAMES = 8


def fingerprint(t: Any) -> str:
    """BLAKE2b (16-byte digest, hex) of ``t``'s dtype, shape and bytes in logical order,
    read on the host; a non-tensor or an unreadable tensor gives ``"unreadable: <why>"``."""
    if not isinstance(t, torch.Tensor):
        return f"unreadable: {type(t).__name__} is not a tensor"
    try:
        c = t.detach()
        c = c.to("cpu") if c.device.type != "cpu" else c
        h = hashlib.blake2b(f"{c.dtype}{tuple(c.shape)}".encode(), digest_size=16)
        if c.numel():
            h.update(c.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
        return h.hexdigest()
    except Exception as e:  # noqa: BLE001  (a lazy or fake tensor that cannot be read)
        return f"unreadable: {type(e).__name__}: {str(e)[:200]}"


def _type_name(o: Any) -> str:
    return f"{type(o).__module__}.{type(o).__qualname__}"


def _dtype(o: Any) -> str:
    return str(getattr(o, "dtype", "")).removeprefix("torch.")


def os_threads() -> int:
    """The number of OS threads of this process (``/proc/self/task``), -1 where unreadable."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return -1


def _frames(frames: list[traceback.FrameSummary]) -> list[Frame]:
    return [Frame(file=f.filename, line=f.lineno, function=f.name) for f in frames[-STACK_FRAMES:]]


class _StartRecorder:
    """Wraps ``threading.Thread.start`` while active: the stack of each start, by thread."""

    def __init__(self) -> None:
        self.sites: dict[int, list[Frame]] = {}
        self._orig = threading.Thread.start

    def __enter__(self) -> _StartRecorder:
        orig, sites = self._orig, self.sites

        def start(th: threading.Thread, *a: Any, **kw: Any) -> Any:
            where = _frames(traceback.extract_stack()[:-1])
            r = orig(th, *a, **kw)
            sites[id(th)] = where
            return r

        threading.Thread.start = start  # type: ignore[method-assign,assignment]
        return self

    def __exit__(self, *exc: Any) -> None:
        threading.Thread.start = self._orig  # type: ignore[method-assign]


def _census(before: set[int], rec: _StartRecorder, task_dir: str) -> list[SeriesThread]:
    """The Python threads alive now that were not alive in ``before`` (idents);
    ``task_code``: a task file (under ``task_dir``) called ``start`` itself (not through a
    library), holds its target, or is on the stack it is running."""
    frames = sys._current_frames()
    out = []
    for t in threading.enumerate():
        if t.ident in before or not t.is_alive():
            continue
        target = getattr(t, "_target", None)
        fr = frames.get(t.ident) if t.ident is not None else None
        started = rec.sites.get(id(t), [])
        running = _frames(traceback.extract_stack(fr)) if fr is not None else []
        code = getattr(target, "__code__", None)
        starter = [f.file for f in started if not f.file.endswith("threading.py")][-1:]
        files = starter + [f.file for f in running] + ([code.co_filename] if code is not None else [])
        out.append(SeriesThread(
            ident=t.ident, name=t.name, daemon=t.daemon, cls=_type_name(t),
            target=(f"{getattr(target, '__module__', '')}.{getattr(target, '__qualname__', repr(target))}"
                    if target is not None else None),
            started_at=started, running=running,
            task_code=any(str(f).startswith(task_dir) for f in files),
        ))
    return out


def _settle(ctx: Any, seconds: float) -> None:
    ctx.sync()
    time.sleep(seconds)
    ctx.sync()


def _early(outs: list[Any]) -> list[Any]:
    """Host copies of ``outs`` right after return (on CUDA ordered on the current stream only)."""
    res = []
    for o in outs:
        try:
            res.append(o.detach().to("cpu", copy=True) if isinstance(o, torch.Tensor) else o)
        except Exception:  # noqa: BLE001
            res.append(None)
    return res


@step(CallSeriesStep)
def call_series_step(ctx: Any, spec: CallSeriesStep) -> StepOutput:
    """The serial and loop phases of the module doc."""
    res = StepOutput(ok=True)
    serial: list[SerialCall] = []
    sent: dict[str, str] = {}
    try:
        pristine_a = _inputs(ctx, spec, spec.seed_a)
        pristine_b = _inputs(ctx, spec, spec.seed_b)
        fn = ctx.callable(spec.role)
        tdir = str(ctx.task_dir).rstrip("/") + "/"
        ctx.sync()
        for k in range(spec.serial):
            inputs = tuple(_clone(x) for x in pristine_a)
            ctx.sync()
            py_before = {t.ident for t in threading.enumerate() if t.ident is not None}
            os_before = os_threads()
            t0 = time.perf_counter()
            with _StartRecorder() as rec:
                try:
                    with call_context(inputs):
                        r = fn(*inputs)
                except BaseException as e:  # noqa: BLE001  (re-raised, tagged with its phase)
                    raise _tag(e, "call") from None
                seconds = time.perf_counter() - t0
                outs = ctx.outputs_of(r, inputs)
                early = _early(outs)
                new_after_return = _census(py_before, rec, tdir)
                os_after_return = os_threads()
                _settle(ctx, spec.settle_s)
                new_after_settle = _census(py_before, rec, tdir)
            os_after_settle = os_threads()
            row = SerialCall(call=k, seconds=seconds, types=[_type_name(o) for o in outs],
                             dtypes=[_dtype(o) for o in outs], exact_tensor=[type(o) is torch.Tensor for o in outs],
                             early=[], late=[], arrays=[], early_arrays=[],
                             threads_after_return=new_after_return, threads_after_settle=new_after_settle,
                             os_threads=[os_before, os_after_return, os_after_settle])
            for j, (o, x) in enumerate(zip(outs, early, strict=True)):
                he = fingerprint(x) if x is not None else "unreadable: the host copy failed"
                hl = fingerprint(o)
                row.early.append(he)
                row.late.append(hl)
                key = sent.get(hl)
                if key is None and not hl.startswith("unreadable"):
                    key = sent[hl] = f"s{k}_{j}"
                    res.arrays[key] = encode_tensor(o)[1]
                row.arrays.append(key)
                ek = None
                if he != hl and x is not None and isinstance(x, torch.Tensor):
                    ek = f"e{k}_{j}"
                    try:
                        res.arrays[ek] = encode_tensor(x)[1]
                    except Exception:  # noqa: BLE001  (an early copy that cannot be encoded: judged from its fingerprint)
                        ek = None
                row.early_arrays.append(ek)
            serial.append(row)
            res.seconds += seconds
            del inputs, outs, r, early
        loop = _loop(ctx, spec, fn, pristine_a, pristine_b, res)
    except BaseException as e:  # noqa: BLE001  (task code's error, sent with the serial calls that completed)
        return _failed(ctx, e, CallSeriesExtra(serial=serial, settle_s=spec.settle_s, device_name=ctx.device_name))
    res.extra = CallSeriesExtra(serial=serial, loop=loop, settle_s=spec.settle_s, device_name=ctx.device_name,
                                pid=os.getpid())
    return res


def _loop(ctx: Any, spec: CallSeriesStep, fn: Any, pa: tuple, pb: tuple, res: StepOutput) -> SeriesLoop:
    """The loop phase (module doc); writes ``audit*``/``last*`` arrays into ``res``."""
    n = spec.loop
    if n <= 0:
        return SeriesLoop(n=0)
    audit = random.SystemRandom().randrange(n - 1) if n > 1 else 0
    kept: dict[str, tuple[Any, list[Any]]] = {}
    audit_early: list[str] = []
    early_vals: list[Any] = []
    ctx.sync()
    t0 = time.perf_counter()
    for i in range(n):
        inputs = tuple(_clone(x) for x in (pa if i % 2 == 0 else pb))
        try:
            with call_context(inputs):
                r = fn(*inputs)
        except BaseException as e:  # noqa: BLE001  (re-raised, tagged with its phase)
            raise _tag(e, "call") from None
        outs = ctx.outputs_of(r, inputs)
        if i == audit:
            early_vals = _early(outs)
            audit_early = [fingerprint(e) if e is not None else "unreadable" for e in early_vals]
            kept["audit"] = (inputs, outs)
        if i == n - 1:
            kept["last"] = (inputs, outs)
        del inputs, outs, r
    _settle(ctx, spec.settle_s)
    res.seconds += time.perf_counter() - t0
    out = SeriesLoop(n=n, audit=audit, audit_seed=spec.seed_a if audit % 2 == 0 else spec.seed_b,
                     last_seed=spec.seed_a if (n - 1) % 2 == 0 else spec.seed_b, audit_early=audit_early)
    for name, (_inp, outs) in kept.items():
        types, dtypes = [_type_name(o) for o in outs], [_dtype(o) for o in outs]
        exact, late = [type(o) is torch.Tensor for o in outs], [fingerprint(o) for o in outs]
        if name == "audit":
            out.audit_types, out.audit_dtypes, out.audit_exact_tensor, out.audit_late = types, dtypes, exact, late
        else:
            out.last_types, out.last_dtypes, out.last_exact_tensor, out.last_late = types, dtypes, exact, late
        for j, o in enumerate(outs):
            try:
                res.arrays[f"{name}{j}"] = encode_tensor(o)[1]
            except Exception:  # noqa: BLE001  (unreadable: judged from the fingerprint's text)
                pass
    for j, (he, hl) in enumerate(zip(audit_early, out.audit_late, strict=False)):
        if he != hl and isinstance(early_vals[j], torch.Tensor):
            res.arrays[f"audit_early{j}"] = encode_tensor(early_vals[j])[1]
    return out
