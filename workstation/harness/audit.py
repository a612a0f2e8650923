"""Child side of the invariant audit (``audit_series``): properties every honest kernel keeps
whatever its caller does, which any cache, counter, observer test or late writer must break.

One job, one role, one case. The child builds *variants* of the case's inputs: those of
each of the step's seeds (every element new), and edits of the first seed's inputs at places
it draws at run time (one element, one row, the last element of an editable input, each
set to the value another seed's inputs hold there). It then calls the role many times in an
order it draws with :class:`random.SystemRandom` (nothing in the job file predicts it):

- each call gets one variant through one *write path* (new tensors; the previous call's
  tensors rewritten by ``copy_``, through ``.data``, through a numpy view or by a raw
  storage copy, the last three without bumping the tensor's version counter; new tensors
  allocated right after the previous ones were freed, often at the same address; the
  previous call's values at a new address);
- each call comes from one *context* (plain; under a pass-through ``TorchDispatchMode`` or
  ``TorchFunctionMode``; under ``torch.profiler``; with a Python profile hook; from a caller
  frame named like a benchmark; right after the previous call; after a pause; as the last of
  a run of back-to-back calls; with the clocks of :mod:`time` reading an hour later);
- halfway, a long run of plain calls on fresh copies (more calls than any other loop of the
  run makes), then the second half of the mixed calls;
- the outputs of a few early calls are held and read again at the end, after a settle wait;
- a process census (``/proc`` of the job's pid namespace) runs around every call.

Every call's outputs are fingerprinted and sent (once per distinct fingerprint); the parent
compares each with the reference on the same variant (the edits travel back as
:class:`~workstation.protocol.steps.Splice` transforms), calls on one variant with each
other, and the held outputs with themselves. What comes back: :class:`AuditExtra`.

Edits are made only on float inputs without structure an edit would break (sorted along the
last dimension, symmetric, rows summing to one, integer-valued): a task's ``make_inputs``
that always produces such structure keeps it.
"""

from __future__ import annotations

import contextlib
import os
import random
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.utils._python_dispatch

from workstation.harness import StepOutput, step, transform
from workstation.harness.core import (
    JobContext,
    _tag,
    call_context,
    encode_tensor,
    error_info,
    prepared_inputs,
)
from workstation.harness.series import fingerprint
from workstation.protocol.extras.audit import AuditCall, AuditExtra, Edit, Held, Proc, Variant
from workstation.protocol.steps import AuditSeriesStep, Splice

#: names a benchmark's caller frame may have (the ``frame`` context draws one).
FRAME_NAMES = ("benchmark", "bench_fn", "timed_run", "warmup", "do_bench", "time_kernel", "profile_step",
               "run_benchmark", "measure")
#: back-to-back calls of the ``loop`` context (the last is audited).
LOOP_CALLS = 6
#: the ``pause`` context's wait before the call (s).
PAUSE_S = 0.02
#: how far the ``clock`` context moves the clocks of :mod:`time` (s).
CLOCK_SKEW_S = 3600.0
#: the kinds of edit of the first seed's inputs.
EDITS = ("one element", "one row", "the last element")

_perf = time.perf_counter  # kws's own clock (the ``clock`` context moves the module's)


# ----------------------------------------------------------------------------- the splice transform


@transform(Splice)
def _splice(ctx: JobContext, inputs: tuple, spec: Splice) -> tuple:
    """Set ``spec.indices`` (flat, logical order) of input ``spec.input`` to ``spec.values``."""
    out = list(inputs)
    x = out[spec.input]
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"splice: input {spec.input} is a {type(x).__name__}, not a tensor")
    y = _clone(x)
    at = torch.unravel_index(torch.tensor(spec.indices, dtype=torch.long), tuple(y.shape))
    y[at] = torch.tensor(spec.values, dtype=torch.float64).to(dtype=y.dtype, device=y.device)
    out[spec.input] = y
    return tuple(out)


# ----------------------------------------------------------------------------- variants


def _editable(inputs: tuple) -> list[int]:
    """Indices of the float tensor inputs an edit may change: at least two elements and none
    of the structure an edit would break (sorted along the last dimension, square and
    symmetric, non-negative rows summing to one, every value an integer)."""
    out = []
    for i, x in enumerate(inputs):
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() < 2:
            continue
        v = x.detach().to("cpu", torch.float64)
        if not torch.isfinite(v).all():
            continue
        if v.dim() >= 1 and v.shape[-1] > 1 and bool((v.diff(dim=-1) >= 0).all() or (v.diff(dim=-1) <= 0).all()):
            continue
        if v.dim() == 2 and v.shape[0] == v.shape[1] and torch.equal(v, v.T):
            continue
        if v.dim() >= 1 and bool((v >= 0).all()) and torch.allclose(v.sum(-1), torch.ones((), dtype=v.dtype),
                                                                    atol=1e-3):
            continue
        if torch.equal(v, v.round()):
            continue
        out.append(i)
    return out


def _edit(rng: random.SystemRandom, what: str, x: torch.Tensor, other: torch.Tensor, i: int) -> Edit:
    """An edit of input ``i`` (``x``): the values ``other`` (another seed's same input) holds
    at the drawn places."""
    n = x.numel()
    if what == "one row" and x.dim() >= 2:
        width = x.shape[-1]
        r = rng.randrange(n // width)
        idx = list(range(r * width, (r + 1) * width))
    elif what == "the last element":
        idx = [n - 1]
    else:
        idx = [rng.randrange(n)]
    src = other.detach().reshape(-1).to("cpu", torch.float64)
    cur = x.detach().reshape(-1).to("cpu", torch.float64)
    vals = [float(src[k]) for k in idx]
    if all(v == float(cur[k]) for v, k in zip(vals, idx, strict=True)):  # the same value: nudge it
        vals = [v + (abs(v) or 1.0) * 0.5 for v in vals]
    return Edit(input=i, indices=idx, values=vals, what=what if what != "one row" or x.dim() >= 2 else "one element")


def _variants(ctx: JobContext, spec: AuditSeriesStep, rng: random.SystemRandom) -> tuple[list[Variant], list[tuple],
                                                                                         list[int]]:
    """The variants (and their input tuples): one per seed, and edits of the first."""
    bases = [prepared_inputs(ctx, spec.case, s) for s in spec.seeds]
    variants = [Variant(seed=s) for s in spec.seeds]
    values = list(bases)
    editable = _editable(bases[0])
    if editable and len(bases) > 1:
        for what in EDITS:
            i = rng.choice(editable)
            e = _edit(rng, what, bases[0][i], bases[1][i], i)
            variants.append(Variant(seed=spec.seeds[0], edit=e))
            values.append(_splice(ctx, bases[0], Splice(input=e.input, indices=e.indices, values=e.values)))
    return variants, values, editable


# ----------------------------------------------------------------------------- write paths


def _clone(x: Any) -> Any:
    if not isinstance(x, torch.Tensor):
        return x
    if any(st == 0 and s > 1 for s, st in zip(x.shape, x.stride(), strict=True)):
        return x.clone()
    y = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device)
    y.copy_(x)
    return y


def _writable(cur: tuple | None, vals: tuple) -> bool:
    """Whether ``vals`` can be written into ``cur``'s tensors in place (same layout, dense,
    no stride-0 dimension)."""
    if cur is None or len(cur) != len(vals):
        return False
    for c, v in zip(cur, vals, strict=True):
        if isinstance(v, torch.Tensor) != isinstance(c, torch.Tensor):
            return False
        if isinstance(v, torch.Tensor):
            if c.shape != v.shape or c.dtype != v.dtype or c.stride() != v.stride() or c.device != v.device:
                return False
            if any(st == 0 and s > 1 for s, st in zip(c.shape, c.stride(), strict=True)):
                return False
    return True


def _raw_copy(dst: torch.Tensor, src: torch.Tensor) -> None:
    """Copy ``src``'s storage bytes into ``dst``'s (equal layouts, from :func:`_clone`)
    without going through the tensor (no version bump). Storages of equal size are copied
    whole (any device); a view of a larger storage (``randperm(V)[:L]``, a strided slice) gets
    exactly its own elements, written through a second tensor on the same storage.

    Raises:
        ValueError: the layouts differ.
    """
    ds, ss = dst.untyped_storage(), src.untyped_storage()
    if ds.nbytes() == ss.nbytes() and dst.storage_offset() == src.storage_offset():
        ds.copy_(ss)
        return
    if dst.shape != src.shape or dst.stride() != src.stride() or dst.dtype != src.dtype or dst.device != src.device:
        raise ValueError("layouts differ")
    # a second tensor on dst's storage (Tensor.set_: its own version counter, not a view of
    # dst's base) writes exactly dst's elements, the gaps between them untouched
    alias = torch.empty(0, dtype=dst.dtype, device=dst.device)
    alias.set_(ds, dst.storage_offset(), dst.shape, dst.stride())
    alias.copy_(src)


def _numpy_ok(t: torch.Tensor) -> bool:
    return t.device.type == "cpu" and t.dtype not in (torch.bfloat16,) and "float8" not in str(t.dtype)


def _deliver(path: str, held: list[tuple | None], vals: tuple) -> tuple[tuple, str, str]:
    """The inputs of the next call (``vals``' values) through ``path``; ``held[0]`` is the
    previous call's inputs (dropped first for ``recycled``, so their memory can be reused).
    Returns (inputs, the path taken, a note of what it observed)."""
    cur = held[0]
    if path in ("inplace", "data", "numpy", "storage") and not _writable(cur, vals):
        path, why = "fresh", f"{path}: the previous tensors cannot take these values in place; "
    else:
        why = ""
    if path in ("fresh", "clone"):
        return tuple(_clone(v) for v in vals), path, why + "new tensors"
    if path == "recycled":
        layout = [(v.shape, v.stride(), v.dtype, v.device) if isinstance(v, torch.Tensor) else None for v in vals]
        old = [c.data_ptr() for c in cur or () if isinstance(c, torch.Tensor)]
        held[0] = cur = None
        out = []
        for v, lay in zip(vals, layout, strict=True):
            if lay is None:
                out.append(v)
                continue
            y = torch.empty_strided(lay[0], lay[1], dtype=lay[2], device=lay[3])
            y.copy_(v)
            out.append(y)
        new = [y.data_ptr() for y in out if isinstance(y, torch.Tensor)]
        same = sum(a == b for a, b in zip(old, new, strict=False))
        return tuple(out), path, f"new tensors, {same} of {len(new)} at the freed address"
    assert cur is not None
    bumped, kept = 0, 0
    for c, v in zip(cur, vals, strict=True):
        if not isinstance(c, torch.Tensor):
            continue
        before = c._version
        if path == "inplace":
            c.copy_(v)
        elif path == "data":
            c.data.copy_(v)
        elif path == "numpy" and _numpy_ok(c):
            c.numpy()[...] = v.numpy()
        else:
            _raw_copy(c, v)
        bumped += c._version != before
        kept += 1
    inputs = tuple(c if isinstance(c, torch.Tensor) else v for c, v in zip(cur, vals, strict=True))
    return inputs, path, f"same tensors and addresses, version counter bumped on {bumped} of {kept}"


# ----------------------------------------------------------------------------- contexts


class _PassDispatch(torch.utils._python_dispatch.TorchDispatchMode):
    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        return func(*args, **(kwargs or {}))


class _PassFunction(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def _profile_hook() -> Iterator[None]:
    old, old_t = sys.getprofile(), getattr(threading, "getprofile", lambda: None)()
    hook = lambda *a: None  # noqa: E731
    sys.setprofile(hook)
    threading.setprofile(hook)
    try:
        yield
    finally:
        sys.setprofile(old)
        threading.setprofile(old_t)


@contextlib.contextmanager
def _late_clock() -> Iterator[None]:
    """The clocks of :mod:`time` read :data:`CLOCK_SKEW_S` later (kws's own are saved)."""
    names = ("time", "monotonic", "perf_counter", "time_ns", "monotonic_ns", "perf_counter_ns")
    saved = {n: getattr(time, n) for n in names}
    for n in names:
        f = saved[n]
        skew = int(CLOCK_SKEW_S * 1e9) if n.endswith("_ns") else CLOCK_SKEW_S
        setattr(time, n, (lambda f=f, skew=skew: f() + skew))
    try:
        yield
    finally:
        for n, f in saved.items():
            setattr(time, n, f)


def _named_caller(name: str) -> Callable[[Any, tuple], Any]:
    """A function named ``name`` that calls ``fn(*inputs)`` (the caller frame task code sees)."""
    def trampoline(fn: Any, inputs: tuple) -> Any:
        return fn(*inputs)

    code = trampoline.__code__.replace(co_name=name, co_qualname=name)
    return types.FunctionType(code, trampoline.__globals__, name)


def _context(context: str, device: torch.device) -> contextlib.AbstractContextManager[Any]:
    if context == "dispatch":
        return _PassDispatch()
    if context == "function_mode":
        return _PassFunction()
    if context == "profiler":
        acts = [torch.profiler.ProfilerActivity.CPU]
        if device.type == "cuda":
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        return torch.profiler.profile(activities=acts)
    if context == "setprofile":
        return _profile_hook()
    if context == "clock":
        return _late_clock()
    return contextlib.nullcontext()


# ----------------------------------------------------------------------------- census


class _ProcStarts:
    """Records, while active, the Python stack of every process start through Python's API
    (``os.fork``, ``os.forkpty``, ``os.posix_spawn``/``posix_spawnp``, ``subprocess.Popen``),
    by pid."""

    def __init__(self) -> None:
        self.stacks: dict[int, list[str]] = {}
        self._saved: list[tuple[Any, str, Any]] = []

    def _stack(self) -> list[str]:
        import traceback

        return [f"{f.filename}:{f.lineno} {f.name}" for f in traceback.extract_stack()[:-2]][-12:]

    def __enter__(self) -> _ProcStarts:
        import subprocess

        def wrap_pid(owner: Any, name: str) -> None:
            orig = getattr(owner, name, None)
            if orig is None:
                return

            def starter(*a: Any, **kw: Any) -> Any:
                stack = self._stack()
                r = orig(*a, **kw)
                pid = r[0] if isinstance(r, tuple) else r
                if isinstance(pid, int) and pid > 0:
                    self.stacks[pid] = stack
                return r

            self._saved.append((owner, name, orig))
            setattr(owner, name, starter)

        for n in ("fork", "forkpty", "posix_spawn", "posix_spawnp"):
            wrap_pid(os, n)
        popen_init = subprocess.Popen.__init__

        def init(popen: Any, *a: Any, **kw: Any) -> None:
            stack = self._stack()
            popen_init(popen, *a, **kw)
            if getattr(popen, "pid", None):
                self.stacks[popen.pid] = stack

        self._saved.append((subprocess.Popen, "__init__", popen_init))
        subprocess.Popen.__init__ = init  # type: ignore[method-assign,assignment]
        return self

    def __exit__(self, *exc: Any) -> None:
        for owner, name, orig in reversed(self._saved):
            setattr(owner, name, orig)
        self._saved.clear()


def _procs() -> dict[int, Proc]:
    """The live processes of the job's pid namespace (zombies left out)."""
    out: dict[int, Proc] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        head, _, rest = text.rpartition(")")
        fields = rest.split()
        if len(fields) < 2 or fields[0] == "Z":
            continue
        out[int(name)] = Proc(pid=int(name), ppid=int(fields[1]), state=fields[0], comm=head.partition("(")[2][:64])
    return out


def _attributed(p: Proc, starts: _ProcStarts, task_dir: str) -> Proc:
    """``p`` with the stack that started it (its own or its nearest recorded ancestor's)."""
    stack = starts.stacks.get(p.pid) or starts.stacks.get(p.ppid) or []
    p.started_at = stack
    p.task_code = any(f.startswith(task_dir) for f in stack)
    return p


# ----------------------------------------------------------------------------- the step


class _Recorder:
    """Fingerprints outputs, sends each distinct one once, keeps the calls."""

    def __init__(self, res: StepOutput):
        self.res = res
        self.sent: dict[str, str] = {}
        self.calls: list[AuditCall] = []

    def arrays(self, outs: list[Any], tag: str) -> tuple[list[str | None], list[str]]:
        names: list[str | None] = []
        fps = []
        for j, o in enumerate(outs):
            fp = fingerprint(o)
            fps.append(fp)
            key = self.sent.get(fp)
            if key is None and not fp.startswith("unreadable"):
                try:
                    self.res.arrays[f"{tag}_{j}"] = encode_tensor(o)[1]
                    key = self.sent[fp] = f"{tag}_{j}"
                except (TypeError, RuntimeError, ValueError):
                    key = None
            names.append(key)
        return names, fps


def _plan(rng: random.SystemRandom, spec: AuditSeriesStep, n_variants: int) -> list[tuple[int, str, str, str]]:
    """(variant, path, context, phase) of every call: the mixed calls in two shuffled halves
    around the long run. Each variant is called from at least two contexts; ``clone`` takes
    the previous call's variant."""
    half = max(1, spec.calls // 2)
    plan: list[tuple[int, str, str, str]] = []
    for phase, n in (("first", half), ("second", max(1, spec.calls - half))):
        contexts = list(spec.contexts)
        rng.shuffle(contexts)
        slots = [(rng.randrange(n_variants) if k >= n_variants else k, contexts[k % len(contexts)]) for k in range(n)]
        rng.shuffle(slots)
        for v, c in slots:
            plan.append((v, rng.choice(list(spec.paths)), c, phase))
        if phase == "first":
            plan += [(k % min(2, n_variants), "fresh", "plain", "long") for k in range(spec.long_run)]
    return plan


@step(AuditSeriesStep)
def audit_series_step(ctx: JobContext, spec: AuditSeriesStep) -> StepOutput:
    """The audit (module doc)."""
    res = StepOutput(ok=True)
    rng = random.SystemRandom()
    try:
        variants, values, editable = _variants(ctx, spec, rng)
        fn = ctx.callable(spec.role)
    except BaseException as e:  # noqa: BLE001  (make_inputs or the import failed: the step's error)
        return StepOutput(ok=False, error=error_info(e, getattr(e, "_kws_phase", "call")),
                          extra=AuditExtra(device_name=ctx.device_name))
    rec = _Recorder(res)
    try:
        census = "" if os.path.isdir("/proc/self") else "no /proc"
        _procs()
    except OSError as e:
        census = f"/proc unreadable: {e.strerror}"
    plan = _plan(rng, spec, len(variants))
    starts = _ProcStarts()
    tdir = str(ctx.task_dir).rstrip("/") + "/"
    hold_at = set(rng.sample([k for k, p in enumerate(plan) if p[3] == "first"], min(spec.keep, spec.calls // 2)))
    held: list[tuple[int, list[Any], list[str]]] = []
    cur: list[tuple | None] = [None]
    pending: list[tuple[AuditCall, list[Any]]] = []  # calls whose snapshots wait for a quick call to go first
    prev_variant = 0
    for k, (v, path, context, phase) in enumerate(plan):
        v = prev_variant if path == "clone" else v
        inputs, taken, note = _deliver(path, cur, values[v])
        cur[0] = inputs
        before = _procs() if not census and context != "quick" else {}
        frame = rng.choice(FRAME_NAMES) if context == "frame" else ""
        call = AuditCall(index=k, variant=v, path=taken, path_note=note, context=context, frame=frame, phase=phase)
        prev_variant = v
        try:
            with starts:
                outs, call.seconds = _call(ctx, fn, inputs, context, frame, values[v])
        except BaseException as e:  # noqa: BLE001  (a call that raised is recorded; the audit goes on)
            call.error = error_info(_tag(e, "call"), "call")
            rec.calls.append(call)
            cur[0] = None
            continue
        snaps = [o.detach().clone() if isinstance(o, torch.Tensor) else o for o in outs]  # the values at return
        if before:
            call.new_processes = [_attributed(p, starts, tdir) for pid, p in _procs().items()
                                  if pid not in before and pid != os.getpid()]
        pending.append((call, snaps))
        if k + 1 >= len(plan) or plan[k + 1][2] != "quick":
            for c, sn in pending:
                c.arrays, c.fingerprints = rec.arrays(sn, f"c{c.index}")
                c.dtypes = [str(getattr(x, "dtype", "")).removeprefix("torch.") for x in sn]
                rec.calls.append(c)
            pending.clear()
        if k in hold_at:
            held.append((k, outs, [fingerprint(x) for x in snaps]))
            cur[0] = None  # the held outputs' buffers (out_args) are not rewritten by a later call
        res.seconds += call.seconds
        del outs, snaps
    time.sleep(spec.settle_s)
    ctx.sync()
    rec.calls.sort(key=lambda c: c.index)
    res.extra = AuditExtra(variants=variants, calls=rec.calls, held=_reread(held, res), long_run=spec.long_run,
                           census=census, editable=editable, device_name=ctx.device_name)
    return res


def _call(ctx: JobContext, fn: Any, inputs: tuple, context: str, frame: str,
          values: tuple) -> tuple[list[Any], float]:
    """One audited call from ``context``; returns its outputs and wall seconds. In the
    ``loop`` context the inputs the role writes in place (``inout_args``) get ``values``
    back before every call, as a benchmark of an in-place op restores them."""
    if context == "pause":
        time.sleep(PAUSE_S)
    t0 = _perf()
    with call_context(inputs), _context(context, ctx.device):
        if context == "frame":
            r = _named_caller(frame)(fn, inputs)
        elif context == "loop":
            for _ in range(LOOP_CALLS):
                for i in ctx.inout_args:
                    if isinstance(inputs[i], torch.Tensor):
                        inputs[i].copy_(values[i])
                r = fn(*inputs)
        else:
            r = fn(*inputs)
    ctx.sync()
    return ctx.outputs_of(r, inputs), _perf() - t0


def _reread(held: list[tuple[int, list[Any], list[str]]], res: StepOutput) -> list[Held]:
    """The held outputs read again at the end (their values sent only when they changed)."""
    out = []
    for k, outs, fps in held:
        for j, (o, fp) in enumerate(zip(outs, fps, strict=True)):
            now = fingerprint(o)
            name = None
            if now != fp and not now.startswith("unreadable"):
                name = f"held{k}_{j}"
                res.arrays[name] = encode_tensor(o)[1]
            out.append(Held(call=k, output=j, at_return=fp, at_end=now, array_end=name))
    return out
