"""Child-side harness: runs task code for one job and writes results as data.

This package is imported only inside job children (forked from the fork server, which
has torch and triton loaded); the parent never imports it.

A job (:class:`workstation.protocol.steps.Job`) is a list of typed *steps*. Each step type
has one handler registered with :func:`step`; the built-in ``call`` step
(:mod:`workstation.harness.core`) makes inputs, applies the step's input *transforms*
(:func:`transform`), runs one role's callable inside its *monitors* (:func:`monitor`,
context managers that observe the call: traced ops, Triton launches, global state) and
returns the outputs. Registries are keyed by the spec's Struct type. Modules of this
package register their handlers at import; every module is imported at start-up
(:func:`load_plugins`, preloaded by the fork server).

Of kws, harness modules import only :mod:`workstation.protocol` and this package (an
import-linter contract); beyond the standard library: numpy, torch, triton, msgspec, scipy
(the fidelity layer's libdevice stand-ins), and a backend's own packages where a task uses
it (jax for Pallas, nki for NKI, the ``nvidia`` wheels' CUDA tools).

For every step ``i`` the harness writes ``step-<i>.start`` first and ``step-<i>.json`` /
``step-<i>.npz`` when the step ends (see :mod:`workstation.protocol.wire`), so the parent
can tell which step a crash or a timeout hit; then it hands the step to the fork server
(:func:`checkpoint`): the server checks the process from outside
(:mod:`workstation.harness.watch`) and records the hashes of the two files, and the parent
uses only files with those hashes.

Besides what its handler returns, a step's JSON holds ``cpu_s`` (CPU seconds, user +
system, of the job process and the children it reaped during the step:
``resource.getrusage`` deltas; what the runner compares a candidate's budget with) and
``imports`` (per task file imported during the step, ``{"cpu_s", "wall_s"}``): imports are
marked on the channel (:func:`import_phase`) so that the runner charges them to the job's
import budget, not to the step's CPU budget.

Test hook: with ``KWS_TEST_STRETCH`` = *f* > 1 in the environment
(:data:`workstation.protocol.childenv.STRETCH`, the ``test_stretch`` setting) every step and
every import sleeps *f* - 1 times its own wall time before it ends: a loaded machine
simulated without burning CPU.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import io
import json
import os
import resource
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from workstation.protocol import childenv
from workstation.protocol.extras import EXTRAS, Extra
from workstation.protocol.results import (
    CudaEmulationBuilds,
    EmulatedBuild,
    ImportTime,
    Note,
    Raised,
    StandinCalls,
    StepDoc,
    encodable,
    kws_error,
)
from workstation.protocol.steps import Job, kind_of

#: step Struct type -> handler ``fn(ctx: JobContext, spec) -> StepOutput``.
STEPS: dict[type, Callable[..., StepOutput]] = {}
#: transform Struct type -> ``fn(ctx, inputs: tuple, spec) -> tuple``.
TRANSFORMS: dict[type, Callable[..., Any]] = {}
#: monitor Struct type -> ``fn(ctx, spec, report)`` returning a context manager; ``report`` is
#: the monitor's empty report Struct (:data:`workstation.protocol.extras.monitors.REPORTS`).
MONITORS: dict[type, Callable[..., Any]] = {}
#: ``fn(job)`` run at the start of every job, before any task file is imported (a backend
#: sets itself up: e.g. Pallas wraps ``pallas_call`` when the task uses JAX).
JOB_HOOKS: list[Callable[[Job], None]] = []
#: ``fn(inputs) -> context manager`` entered around every role call
#: (:func:`workstation.harness.core.call_context`; e.g. JAX's x64 mode for float64 inputs).
CALL_HOOKS: list[Callable[[tuple], Any]] = []
#: (write fd, read fd) of the job's channel to the fork server (None outside a job).
CHANNEL: tuple[int, int] | None = None
#: the job's output folder (None outside a job).
OUT_DIR: Path | None = None


@dataclass
class StepOutput:
    """What a step handler returns. ``outputs``: torch tensors to send as ``out<j>``;
    ``arrays``: extra named numpy arrays; ``extra``: the step kind's payload
    (:mod:`workstation.protocol.extras`; None: the kind's Struct with every field at its
    default); ``error``: what was raised (``ok`` False); ``seconds``: wall time of the task
    call(s) inside the step."""

    ok: bool = True
    error: Raised | None = None
    outputs: list[Any] = field(default_factory=list)
    extra: Extra | None = None
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    seconds: float = 0.0


def step(spec_type: type) -> Callable:
    """Register the handler of steps of ``spec_type`` (a step Struct of
    :mod:`workstation.protocol.steps`): ``fn(ctx: JobContext, spec) -> StepOutput``."""

    def deco(fn: Callable) -> Callable:
        STEPS[spec_type] = fn
        return fn

    return deco


def transform(spec_type: type) -> Callable:
    """Register the input transform of ``spec_type``: ``fn(ctx, inputs: tuple, spec) -> tuple``."""

    def deco(fn: Callable) -> Callable:
        TRANSFORMS[spec_type] = fn
        return fn

    return deco


def monitor(spec_type: type) -> Callable:
    """Register the monitor of ``spec_type`` (a monitor Struct of
    :mod:`workstation.protocol.steps`): ``fn(ctx, spec, report)`` returning a context manager
    entered around the task call. ``report`` is an empty instance of the monitor's report
    Struct (:data:`workstation.protocol.extras.monitors.REPORTS`, keyed by the monitor's
    tag: an :class:`~workstation.protocol.extras.monitors.AtenOpsReport` for ``aten_ops``);
    the monitor sets its attributes to what it observed, by the time its context exits
    (sent as the field of the monitor's tag in the call's ``extra.monitors``, a
    :class:`~workstation.protocol.extras.monitors.MonitorReports`)."""

    def deco(fn: Callable) -> Callable:
        MONITORS[spec_type] = fn
        return fn

    return deco


def job_hook(fn: Callable[[Job], None]) -> Callable[[Job], None]:
    """Register ``fn(job)`` to run at the start of every job (:data:`JOB_HOOKS`)."""
    if fn not in JOB_HOOKS:
        JOB_HOOKS.append(fn)
    return fn


def call_hook(fn: Callable[[tuple], Any]) -> Callable[[tuple], Any]:
    """Register ``fn(inputs)`` returning a context manager entered around every role call
    (:data:`CALL_HOOKS`)."""
    if fn not in CALL_HOOKS:
        CALL_HOOKS.append(fn)
    return fn


def load_plugins() -> None:
    """Import every module of this package (they register steps, transforms, monitors)."""
    import pkgutil

    for info in pkgutil.iter_modules(__path__):
        if info.name != "forkserver":
            importlib.import_module(f"{__name__}.{info.name}")


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def stretch_factor() -> float:
    """The test hook's factor (module doc): ``KWS_TEST_STRETCH`` as a number >= 1, else 1."""
    try:
        f = float(os.environ.get(childenv.STRETCH, "") or 1.0)
    except ValueError:
        return 1.0
    return f if f > 1.0 else 1.0


def stretch(wall_s: float) -> None:
    """Sleep (factor - 1) x ``wall_s`` under the test hook (module doc); nothing without it.
    The sleep is marked on the channel (``W 1`` / ``W 0``): it simulates a machine too busy
    to run the job, which the fork server does not count as the job's blocked time."""
    f = stretch_factor()
    if f > 1.0 and wall_s > 0:
        _mark(b"W 1\n")
        try:
            time.sleep((f - 1.0) * wall_s)
        finally:
            _mark(b"W 0\n")


def cpu_seconds() -> float:
    """CPU seconds (user + system) of this process and of the children it has reaped."""
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def _mark(text: bytes) -> None:
    if CHANNEL is not None:
        with contextlib.suppress(OSError):
            os.write(CHANNEL[0], text)


@contextlib.contextmanager
def import_phase(name: str, record: dict[str, dict[str, float]]) -> Iterator[None]:
    """Mark the import of task file ``name`` for the fork server (``I 1`` / ``I 0``: the
    runner charges its CPU to the job's import budget) and put its ``{"cpu_s", "wall_s"}``
    into ``record[name]``. The file's name is written to ``importing.txt`` in the job's
    output folder first, so the runner can name an import that ran out of its budget."""
    if OUT_DIR is not None:
        with contextlib.suppress(OSError):
            _write_atomic(OUT_DIR / "importing.txt", name.encode()[:500])
    _mark(b"I 1\n")
    c0, t0 = cpu_seconds(), time.perf_counter()
    try:
        yield
    finally:
        stretch(time.perf_counter() - t0)
        record[name] = {"cpu_s": round(cpu_seconds() - c0, 4), "wall_s": round(time.perf_counter() - t0, 4)}
        _mark(b"I 0\n")


def run_job(job: Job) -> None:
    """Run every step of ``job`` in order and write its results to ``job.out_dir``."""
    from workstation.harness.core import JobContext, encode_tensor, error_info

    load_plugins()
    out = Path(job.out_dir)
    global OUT_DIR
    OUT_DIR = out
    for hook in JOB_HOOKS:
        hook(job)
    ctx = JobContext(job)
    for i, spec in enumerate(job.steps):
        (out / f"step-{i}.start").touch()
        handler = STEPS.get(type(spec))
        ctx.imports = {}
        c0 = cpu_seconds()
        t0 = time.perf_counter()
        if handler is None:
            res = StepOutput(ok=False, error=kws_error(f"unknown step kind {kind_of(spec)!r}"))
        else:
            try:
                res = handler(ctx, spec)
            except BaseException as e:  # noqa: BLE001  (SystemExit from task code is a finding)
                res = StepOutput(ok=False, error=error_info(e, getattr(e, "_kws_phase", "step")))
        imported_wall = sum(v["wall_s"] for v in ctx.imports.values())
        stretch(time.perf_counter() - t0 - imported_wall)
        arrays = dict(res.arrays)
        metas = []
        for j, t in enumerate(res.outputs):
            meta, arr = encode_tensor(t)
            metas.append(meta)
            arrays[f"out{j}"] = arr
        doc = StepDoc(ok=res.ok, kind=kind_of(spec), error=res.error, outputs=metas,
                      extra=encodable(res.extra if res.extra is not None else EXTRAS[kind_of(spec)]()),
                      seconds=res.seconds, step_seconds=time.perf_counter() - t0,
                      cpu_s=round(cpu_seconds() - c0, 4),
                      imports={k: ImportTime(cpu_s=v["cpu_s"], wall_s=v["wall_s"]) for k, v in ctx.imports.items()},
                      notes=_notes())
        npz = b""
        if arrays:
            buf = io.BytesIO()
            np.savez(buf, **arrays)  # type: ignore[arg-type]  # numpy's stub types **kwds as allow_pickle
            npz = buf.getvalue()
            _write_atomic(out / f"step-{i}.npz", npz)
        blob = json.dumps(encodable(doc), default=_json_default).encode()
        _write_atomic(out / f"step-{i}.json", blob)
        checkpoint(hashlib.sha256(blob).hexdigest(), hashlib.sha256(npz).hexdigest() if npz else "-")


def _notes() -> list[Note]:
    """What the backend layers observed in the step that just ended (and forget it): the
    device stand-in's probes task code called, the CUDA extensions built under emulation."""
    from workstation.harness.cuda_emu import builds as cuda_emu_builds
    from workstation.harness.fidelity import take_standin_calls

    notes: list[Note] = []
    standin = take_standin_calls()
    if standin is not None:
        notes.append(StandinCalls(target=str(standin["target"]), calls=dict(standin["calls"])))
    emu = cuda_emu_builds()
    if emu:
        notes.append(CudaEmulationBuilds(builds=[_emulated(b) for b in emu]))
    return notes


def _emulated(rec: dict[str, Any]) -> EmulatedBuild:
    import msgspec

    return msgspec.convert({k: v for k, v in rec.items() if k in EmulatedBuild.__struct_fields__},
                           type=EmulatedBuild)


def checkpoint(json_sha256: str, npz_sha256: str) -> None:
    """Hand the step that just ended to the fork server: ``V <sha256 of step-<i>.json>
    <sha256 of step-<i>.npz, or ->`` on the channel, then wait for its answer. The server
    counts the steps itself (the message names none), stops every process of the job,
    checks this process from outside (:mod:`workstation.harness.watch`), hashes the two
    files as they are on disk and compares them with what this harness wrote; the parent
    accepts only files with the hashes the server recorded (custody:
    :mod:`workstation.protocol.control`). Without a channel (a fresh interpreter) it does
    nothing; a broken channel is the parent's finding (the step has no custody)."""
    if CHANNEL is None:
        return
    w, r = CHANNEL
    try:
        os.write(w, f"V {json_sha256} {npz_sha256}\n".encode())
        os.read(r, 1)
    except OSError:
        pass


def _json_default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, tuple | set):
        return list(o)
    return repr(o)
