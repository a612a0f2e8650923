"""Child-side steps of ``input-mutation``, ``stale-output`` and ``nondeterminism``.

- ``inputs_only``: make the inputs of a case and seed (after ``transforms``) and send them
  as ``in<j>`` arrays, without calling anything: the pristine inputs a mutation is
  measured against.
- ``repeat_call``: call a role ``n`` times, each time on a fresh clone of the same inputs,
  and send every call's outputs (``r<k>_<j>``): equal inputs, separate calls.
- ``hashseed_call``: one plain ``call`` step in a fresh Python interpreter started with
  ``PYTHONHASHSEED=<hashseed>`` (forked children share the fork server's hash seed, so
  str/bytes hashing, and every set or dict order built on it, is the same in all of them).
- ``stale_call``: call with the inputs of ``seed_a``, copy the values of ``seed_b`` into
  the *same* input tensors in place, call again; send the second outputs, the first
  outputs as they were before and after the second call, and aliasing facts (storage,
  stride 0, tensor type, device), plus (CUDA) the second outputs read before a
  device-wide synchronize.
"""

from __future__ import annotations

import os
import time
from typing import Any

import torch

from workstation.harness import StepOutput, step
from workstation.harness.core import (
    _tag,
    describe_inputs,
    encode_tensor,
    error_info,
    prepared_inputs,
)
from workstation.protocol.extras import Extra
from workstation.protocol.extras.probes import (
    HashseedCallExtra,
    InputsOnlyExtra,
    OutputFacts,
    RepeatCallExtra,
    RepeatRun,
    StaleCallExtra,
)
from workstation.protocol.results import ResultFormatError, decode_doc, kws_error
from workstation.protocol.steps import (
    CallSeriesStep,
    CallStep,
    HashseedCallStep,
    InputsOnlyStep,
    RepeatCallStep,
    StaleCallStep,
)


def _inputs(ctx: Any, spec: InputsOnlyStep | RepeatCallStep | StaleCallStep | CallSeriesStep, seed: int) -> tuple:
    return prepared_inputs(ctx, spec.case, seed, spec.transforms)


def _clone(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        y = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device) \
            if not any(st == 0 and s > 1 for s, st in zip(x.shape, x.stride(), strict=True)) else None
        if y is None:  # expanded input: clone its base values and expand again
            return x.clone()
        y.copy_(x)
        return y
    return x


def _failed(ctx: Any, e: BaseException, extra: Extra) -> StepOutput:
    """A failed step: ``e`` (tagged with its phase, ``call`` when none) and the kind's
    payload ``extra`` as far as it was filled."""
    return StepOutput(ok=False, error=error_info(e, getattr(e, "_kws_phase", "call")), extra=extra)


@step(InputsOnlyStep)
def inputs_only_step(ctx: Any, spec: InputsOnlyStep) -> StepOutput:
    """The inputs of ``spec.case``/``spec.seed`` as arrays ``in<j>`` (no call)."""
    try:
        inputs = _inputs(ctx, spec, spec.seed)
    except BaseException as e:  # noqa: BLE001  (task code's error, sent as the step's)
        return _failed(ctx, e, InputsOnlyExtra(device_name=ctx.device_name))
    res = StepOutput(ok=True, extra=InputsOnlyExtra(inputs=describe_inputs(inputs), device_name=ctx.device_name))
    for j, x in enumerate(inputs):
        if isinstance(x, torch.Tensor):
            meta, arr = encode_tensor(x)
            res.arrays[f"in{j}"] = arr
    return res


@step(RepeatCallStep)
def repeat_call_step(ctx: Any, spec: RepeatCallStep) -> StepOutput:
    """Call ``spec.role`` ``spec.n`` times on fresh clones of one set of inputs;
    ``arrays["r<k>_<j>"]`` is output ``j`` of call ``k`` (encoded as outputs are),
    ``extra.runs[k]`` its metadata and wall seconds (:class:`RepeatCallExtra`)."""
    n = spec.n
    try:
        pristine = _inputs(ctx, spec, spec.seed)
        fn = ctx.callable(spec.role)
        res = StepOutput(ok=True)
        runs: list[RepeatRun] = []
        for k in range(n):
            inputs = tuple(_clone(x) for x in pristine)
            r, sec = ctx.timed_call(fn, inputs)
            outs = ctx.outputs_of(r, inputs)
            metas = []
            for j, o in enumerate(outs):
                meta, arr = encode_tensor(o)
                res.arrays[f"r{k}_{j}"] = arr
                metas.append(meta)
            runs.append(RepeatRun(outputs=metas, seconds=sec))
            res.seconds += sec
    except BaseException as e:  # noqa: BLE001  (task code's error, sent as the step's)
        return _failed(ctx, e, RepeatCallExtra(device_name=ctx.device_name))
    res.extra = RepeatCallExtra(runs=runs, pid=os.getpid(), device_name=ctx.device_name)
    return res


@step(HashseedCallStep)
def hashseed_call_step(ctx: Any, spec: HashseedCallStep) -> StepOutput:
    """One plain ``call`` step in a fresh interpreter with ``PYTHONHASHSEED=spec.hashseed``;
    its outputs come back as ``h<j>`` arrays with metadata in ``extra.outputs``
    (:class:`HashseedCallExtra`)."""
    from workstation.harness.guards import run_subjob

    sub = CallStep(role=spec.role, case=spec.case, seed=spec.seed, transforms=spec.transforms)
    t0 = time.perf_counter()
    r = run_subjob(ctx, [sub], env={"PYTHONHASHSEED": str(spec.hashseed)}, timeout=spec.timeout)
    got = r["steps"][0] if r["steps"] else {"doc": None, "arrays": {}}
    extra = HashseedCallExtra(hashseed=spec.hashseed, returncode=r["returncode"], stderr_tail=r["stderr"][-2000:],
                              wall_seconds=time.perf_counter() - t0)
    if got["doc"] is None:
        return StepOutput(ok=False, error=kws_error("the fresh interpreter wrote no result "
                                                    f"(exit {r['returncode']}): {r['stderr'][-1500:]}"), extra=extra)
    try:
        doc = decode_doc(got["doc"])
    except ResultFormatError as e:
        return StepOutput(ok=False, error=kws_error(f"the fresh interpreter's result: {e}"), extra=extra)
    if not doc.ok:
        return StepOutput(ok=False, error=doc.error, extra=extra)
    res = StepOutput(ok=True, seconds=float(doc.seconds or 0.0))
    for j in range(len(doc.outputs)):
        res.arrays[f"h{j}"] = got["arrays"][f"out{j}"]
    extra.outputs = list(doc.outputs)
    res.extra = extra
    return res


def _range(t: torch.Tensor) -> tuple[int, int, int] | None:
    """(storage data_ptr, first byte, end byte) of the memory ``t`` can touch, or None."""
    try:
        base = t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return None
    if t.numel() == 0:
        return None
    es = t.element_size()
    start = int(t.storage_offset()) * es
    span = 1 + sum((int(s) - 1) * abs(int(st)) for s, st in zip(t.shape, t.stride(), strict=True))
    return base, start, start + span * es


def _overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    ra, rb = _range(a), _range(b)
    if ra is None or rb is None or a.device != b.device or ra[0] != rb[0]:
        return False
    return ra[1] < rb[2] and rb[1] < ra[2]


def _facts(o: Any, inputs: tuple, firsts: list[Any]) -> OutputFacts:
    """What the parent needs to judge one output of the second call."""
    if not isinstance(o, torch.Tensor):
        return OutputFacts(type=type(o).__name__)
    return OutputFacts(
        type=f"{type(o).__module__}.{type(o).__qualname__}",
        plain_tensor=type(o) is torch.Tensor,
        # a subclass's own __torch_function__/__torch_dispatch__ decides what readers see (lazy
        # values computed on first read, comparisons that always agree)
        overrides=[n for n in ("__torch_function__", "__torch_dispatch__")
                   if getattr(type(o), n, None) is not None
                   and getattr(getattr(type(o), n), "__func__", getattr(type(o), n))
                   is not getattr(getattr(torch.Tensor, n), "__func__", getattr(torch.Tensor, n))],
        device=str(o.device),
        is_meta=o.device.type == "meta" or bool(getattr(o, "is_meta", False)),
        fake=type(o).__name__ in ("FakeTensor", "FunctionalTensor") or "fake" in type(o).__module__,
        shape=list(o.shape), stride=list(o.stride()),
        zero_stride_dims=[i for i, (s, st) in enumerate(zip(o.shape, o.stride(), strict=True)) if st == 0 and s > 1],
        aliases_inputs=[i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor) and _overlaps(o, x)],
        aliases_first_outputs=[j for j, f in enumerate(firsts) if isinstance(f, torch.Tensor) and _overlaps(o, f)],
        same_object_as_first=[j for j, f in enumerate(firsts) if f is o],
    )


@step(StaleCallStep)
def stale_call_step(ctx: Any, spec: StaleCallStep) -> StepOutput:
    """The in-place refill protocol (module doc). ``outputs``: the second call's outputs.
    ``arrays``: ``first<j>`` (first outputs right after the first call), ``firstafter<j>``
    (the same tensors after the second call), ``early<j>`` (CUDA: second outputs copied on
    the current stream before ``torch.cuda.synchronize``). ``extra.facts[j]``: aliasing
    and materialisation facts of second output ``j``; ``extra.refill``: how each
    input got its seed-B values (:class:`StaleCallExtra`)."""
    a, b = spec.seed_a, spec.seed_b
    try:
        inputs = list(_inputs(ctx, spec, a))
        fresh = _inputs(ctx, spec, b)
        fn = ctx.callable(spec.role)
        r1, s1 = ctx.timed_call(fn, tuple(inputs))
        outs1 = ctx.outputs_of(r1, tuple(inputs))
        res = StepOutput(ok=True)
        for j, o in enumerate(outs1):
            res.arrays[f"first{j}"] = encode_tensor(o)[1]
        refill: list[str] = []
        for i, (x, y) in enumerate(zip(inputs, fresh, strict=True)):
            if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.shape == y.shape and x.dtype == y.dtype:
                x.copy_(y)
                refill.append("copied in place")
            else:
                inputs[i] = y
                refill.append("replaced (not a tensor of the same shape and dtype)")
        ctx.sync()
        t0 = time.perf_counter()
        try:
            r2 = fn(*inputs)
            early = None
            if ctx.device.type == "cuda":
                outs_e = ctx.outputs_of(r2, tuple(inputs))
                early = [o.detach().to("cpu") for o in outs_e]  # ordered on the current stream only
            ctx.sync()
        except BaseException as e:  # noqa: BLE001  (re-raised, tagged with its phase)
            raise _tag(e, "call") from None
        s2 = time.perf_counter() - t0
        outs2 = ctx.outputs_of(r2, tuple(inputs))
    except BaseException as e:  # noqa: BLE001  (task code's error, sent as the step's)
        return _failed(ctx, e, StaleCallExtra(seed_a=a, seed_b=b, device_name=ctx.device_name))
    for j, o in enumerate(outs1):
        res.arrays[f"firstafter{j}"] = encode_tensor(o)[1]
    if early is not None:
        for j, x in enumerate(early):
            res.arrays[f"early{j}"] = encode_tensor(x)[1]
    res.outputs = outs2
    res.seconds = s1 + s2
    res.extra = StaleCallExtra(
        facts=[_facts(o, tuple(inputs), outs1) for o in outs2],
        refill=refill, seed_a=a, seed_b=b, calls=[s1, s2],
        sync_checked=early is not None, device_name=ctx.device_name,
        written_args=sorted(set(ctx.out_args) | set(ctx.inout_args)),
    )
    return res
