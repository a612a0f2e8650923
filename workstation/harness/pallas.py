"""Child side of Pallas candidates: interpret mode, call observation, strict interpretation,
the jaxpr reading, and JAX's x64 mode for float64 runs.

A Pallas candidate is a Python callable taking and returning torch tensors (task format
v1) that converts to and from JAX arrays itself (``jax.dlpack.from_dlpack`` /
``torch.from_dlpack``: zero-copy on the CPU) and calls ``pl.pallas_call(kernel, ...)``.
kws never imports JAX in the parent; in a job child :func:`install` (run when the task's
files import JAX, or when the fork server preloaded it) replaces
``jax.experimental.pallas.pallas_call`` by :func:`_pallas_call`, which

- decides the execution mode at each invocation: where JAX's default backend is the CPU the
  kernel runs in interpret mode (``interpret=True``, whatever the candidate passed: a kernel
  written for a GPU or TPU runs here as Pallas's interpreter executes it: outputs and
  out-of-bounds block padding start as NaN, so an output block the grid never writes and a
  read of padding show up in every comparison); where JAX finds a GPU or TPU the
  candidate's own choice stands (native);
- under the ``pallas_strict`` monitor, runs it in Pallas's TPU interpret mode,
  ``pltpu.InterpretParams(out_of_bounds_reads="raise", uninitialized_memory="nan",
  detect_races=True, num_cores_or_threads=cores)``: an in-kernel dynamic slice out of
  bounds raises (plain interpret mode clamps it), uninitialised scratch and output reads
  are NaN, and two simulated cores writing the same block is a race. A kernel that states
  no TPU dimension semantics runs with every grid dimension ``parallel``: the GPU's model,
  where every grid step is an independent program. GPU compiler params (Triton's
  ``num_warps``/``num_stages``, Mosaic GPU's) are set aside for the strict call (the TPU
  interpreter asserts on them; no interpreter uses them) and named in the report
  (``params_set_aside``). JAX's caches are cleared around the strict call so that a
  ``jax.jit`` of the candidate retraces;
- reports each invocation to the active :class:`PallasObserver` objects (the
  ``pallas_calls`` monitor, the ``pallas_read`` step).

Under ``jax.jit`` a wrapped ``pallas_call`` is seen when it is traced (the first call of a
shape), not at every cached execution.

The ``pallas_read`` step reads each distinct ``pallas_call`` statically
(:mod:`workstation.harness.pallas_read`).

Float64 runs: JAX turns float64 into float32 unless x64 is enabled, so a call whose tensor
inputs include a float64 tensor (the float64 oracle) runs inside ``jax.enable_x64(True)``
(:func:`x64_for_float64_inputs`, entered around every role call by
:func:`workstation.harness.core.call_context`).

The fork server may import JAX but never creates a JAX array before forking (children
deadlocked when it did).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from workstation.harness import call_hook, job_hook, monitor
from workstation.protocol.extras.monitors import (
    PallasCallsReport,
    PallasKernelCalls,
    PallasStrictReport,
    PallasStrictSettings,
    Site,
)
from workstation.protocol.steps import PallasCalls, PallasStrict

_orig: Any = None
_observers: list[PallasObserver] = []
#: the strict settings while a ``pallas_strict`` monitor is active (``{"cores": n}``).
_strict: dict[str, Any] | None = None
_task_dir: str = ""


def jax_wanted(task_dir: str | Path) -> bool:
    """True when a Python file of the task folder (top level or one folder down) mentions
    ``jax`` in an import (a text scan: task code is never run to find out)."""
    root = Path(task_dir)
    try:
        files = list(root.glob("*.py")) + list(root.glob("*/*.py"))
    except OSError:
        return False
    for p in files[:200]:
        try:
            text = p.read_bytes()[:1 << 20]
        except OSError:
            continue
        if b"import jax" in text or b"from jax" in text:
            return True
    return False


def install() -> bool:
    """Import JAX and Pallas (CPU platform unless ``JAX_PLATFORMS`` says otherwise; on a GPU
    without XLA's memory preallocation, which would starve torch) and wrap ``pallas_call``
    (idempotent). False when JAX is not installed. Creates no array."""
    global _orig
    if _orig is not None:
        return True
    if os.environ.get("TRITON_INTERPRET") == "1":  # kws chose the CPU
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    else:  # a GPU shared with torch: JAX must not take 75% of its memory up front
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    try:
        import jax  # noqa: F401
        import jax.experimental.pallas as pl
        from jax._src.pallas import pallas_call as impl
    except ImportError:
        return False
    _orig = impl.pallas_call
    wrapped = functools.wraps(_orig)(_pallas_call)
    pl.pallas_call = wrapped
    impl.pallas_call = wrapped
    return True


@job_hook
def _job_start(job: Any) -> None:
    """At the start of a job: wrap ``pallas_call`` when JAX is loaded or the task uses it."""
    global _task_dir
    _task_dir = str(job.task_dir)
    if "jax" in sys.modules or jax_wanted(job.task_dir):
        install()


@call_hook
def x64_for_float64_inputs(inputs: tuple) -> contextlib.AbstractContextManager[Any]:
    """``jax.enable_x64(True)`` around a call whose tensor inputs include a float64 tensor
    (JAX loaded only); otherwise nothing."""
    if "jax" not in sys.modules:
        return contextlib.nullcontext()
    import torch

    if not any(isinstance(x, torch.Tensor) and x.dtype == torch.float64 for x in inputs):
        return contextlib.nullcontext()
    import jax

    return jax.enable_x64(True)


class PallasObserver:
    """Base of the observers of ``pallas_call`` invocations."""

    def before(self, rec: Invocation) -> None:
        """Called before the kernel runs (or is traced)."""

    def after(self, rec: Invocation, error: BaseException | None) -> None:
        """Called after it returned (``error`` None) or raised."""


@contextlib.contextmanager
def observing(obs: PallasObserver) -> Iterator[PallasObserver]:
    _observers.append(obs)
    try:
        yield obs
    finally:
        _observers.remove(obs)


class Invocation:
    """One invocation of a wrapped ``pallas_call``: the kernel, the construction keyword
    arguments, the call's arguments, where the task called it, and how it ran."""

    def __init__(self, kernel: Any, args: tuple, kwargs: dict[str, Any], call_args: tuple, site: dict | None):
        self.kernel = kernel
        self.args = args
        self.kwargs = kwargs
        self.call_args = call_args
        self.site = site
        self.mode = ""
        self.races: bool | None = None
        #: the type name of GPU compiler params set aside for the strict (TPU) interpreter
        self.replaced_params = ""

    @property
    def name(self) -> str:
        k = self.kernel
        while isinstance(k, functools.partial):
            k = k.func
        return str(self.kwargs.get("name") or getattr(k, "__qualname__", None) or getattr(k, "__name__", None)
                   or repr(k)[:80])

    def build(self, interpret: Any) -> Any:
        """The original ``pallas_call`` with ``interpret`` (and, for the strict mode, TPU
        dimension semantics) substituted."""
        kw = dict(self.kwargs)
        kw["interpret"] = interpret
        if _strict is not None:
            from jax.experimental.pallas import tpu as pltpu

            cp = kw.get("compiler_params")
            gpu_dict = isinstance(cp, dict) and not ({"mosaic", "mosaic_tpu"} & set(cp))
            if cp is not None and (gpu_dict or not isinstance(cp, pltpu.CompilerParams | dict)):
                # GPU compiler params (Triton's num_warps/num_stages, Mosaic GPU's) mean
                # nothing to an interpreter, and the TPU interpreter asserts on them
                self.replaced_params = ", ".join(sorted(cp)) if isinstance(cp, dict) else type(cp).__name__
                kw["compiler_params"] = cp = None
            if not _has_dimension_semantics(cp):
                n = len(_grid_of(kw))
                if n:
                    parallel: list[Any] = ["parallel"] * n
                    kw["compiler_params"] = pltpu.CompilerParams(dimension_semantics=parallel)
        return _orig(self.kernel, *self.args, **kw)


def _has_dimension_semantics(cp: Any) -> bool:
    if cp is None:
        return False
    if isinstance(cp, dict):
        return any(_has_dimension_semantics(v) for v in cp.values())
    return getattr(cp, "dimension_semantics", None) is not None


def _grid_of(kw: dict[str, Any]) -> tuple:
    g = kw.get("grid")
    if g is None and kw.get("grid_spec") is not None:
        g = getattr(kw["grid_spec"], "grid", None)
    if g is None:
        return ()
    return tuple(g) if isinstance(g, tuple | list) else (g,)


def task_dir() -> str:
    """The running job's task folder ("" outside a job): task source lines are named
    relative to it."""
    return _task_dir


def _native() -> bool:
    import jax

    try:
        return jax.default_backend() in ("gpu", "cuda", "rocm", "tpu")
    except RuntimeError:
        return False


def _site() -> dict[str, Any] | None:
    if not _task_dir:
        return None
    f: types.FrameType | None = sys._getframe(2)
    while f is not None:
        fn = f.f_code.co_filename
        if fn.startswith(_task_dir):
            return {"file": os.path.relpath(fn, _task_dir), "line": f.f_lineno, "function": f.f_code.co_name}
        f = f.f_back
    return None


def _pallas_call(kernel: Any, *args: Any, **kwargs: Any) -> Any:
    """The wrapped ``pallas_call`` (module doc): a callable that builds the kernel call in
    the mode of the moment at each invocation."""
    site = _site()
    own = kwargs.get("interpret", False)

    def call(*call_args: Any, **call_kwargs: Any) -> Any:
        rec = Invocation(kernel, args, kwargs, call_args, site)
        if _strict is not None:
            from jax.experimental.pallas import tpu as pltpu

            mode: Any = pltpu.InterpretParams(out_of_bounds_reads="raise", uninitialized_memory="nan",
                                              detect_races=True, num_cores_or_threads=int(_strict["cores"]))
            rec.mode = "strict-interpret"
        elif _native():
            mode, rec.mode = own, ("native" if not own else "interpret (the candidate's choice)")
        else:
            mode, rec.mode = True, "interpret"
        for o in list(_observers):
            o.before(rec)
        try:
            out = rec.build(mode)(*call_args, **call_kwargs)
            if _strict is not None:
                import jax

                jax.block_until_ready(out)
                rec.races = _races_found()
        except BaseException as e:
            for o in reversed(list(_observers)):
                o.after(rec, e)
            raise
        for o in reversed(list(_observers)):
            o.after(rec, None)
        return out

    return call


def _races_found() -> bool | None:
    """Whether the last strict call detected a race (Pallas's TPU interpreter state)."""
    try:
        from jax._src.pallas.mosaic.interpret import interpret_pallas_call as ipc
    except ImportError:
        return None
    races = getattr(ipc, "races", None)
    return None if races is None else bool(getattr(races, "races_found", False))


# ----------------------------------------------------------------------------- monitors


class CallCounter(PallasObserver):
    """Counts invocations per kernel name and how they ran; with ``strict`` the races."""

    def __init__(self) -> None:
        self.kernels: dict[str, PallasKernelCalls] = {}
        self.errors: list[str] = []

    def after(self, rec: Invocation, error: BaseException | None) -> None:
        k = self.kernels.get(rec.name)
        if k is None:
            site = Site(**rec.site) if rec.site else None
            k = self.kernels[rec.name] = PallasKernelCalls(calls=0, failed=0, modes=[], site=site, races=False)
        k.calls += 1
        if rec.mode not in k.modes:
            k.modes.append(rec.mode)
        if error is not None:
            k.failed += 1
            if len(self.errors) < 4:
                self.errors.append(f"{rec.name}: {type(error).__name__}: {str(error)[:600]}")
        if rec.races:
            k.races = True
        if rec.replaced_params:
            k.params_set_aside = rec.replaced_params

    def fill(self, report: PallasCallsReport | PallasStrictReport) -> None:
        """Set ``report`` (a ``pallas_calls`` or ``pallas_strict`` report) to what was counted."""
        report.kernels = self.kernels
        report.calls = sum(k.calls for k in self.kernels.values())
        report.errors = self.errors
        report.jax = "jax" in sys.modules
        report.installed = _orig is not None


@monitor(PallasCalls)
def pallas_calls_monitor(ctx: Any, spec: PallasCalls, report: PallasCallsReport):
    """Count the call's ``pallas_call`` invocations into ``report`` (``kernels``: per name
    ``calls``, ``failed``, ``modes``, ``site``, ``races``; ``calls``; ``errors``)."""
    return _counting(report)


@contextlib.contextmanager
def _counting(report: PallasCallsReport | PallasStrictReport) -> Iterator[None]:
    counter = CallCounter()
    try:
        with observing(counter):
            yield
    finally:
        counter.fill(report)


@monitor(PallasStrict)
def pallas_strict_monitor(ctx: Any, spec: PallasStrict, report: PallasStrictReport):
    """Run the call's ``pallas_call`` invocations strictly (module doc); ``report`` as for
    ``pallas_calls`` plus ``strict`` (the settings, ``cores`` among them)."""
    return _strict_mode(spec, report)


@contextlib.contextmanager
def _strict_mode(spec: PallasStrict, report: PallasStrictReport) -> Iterator[None]:
    global _strict
    install()
    import jax

    report.strict = PallasStrictSettings(cores=spec.cores, out_of_bounds_reads="raise", uninitialized_memory="nan",
                                         detect_races=True)
    jax.clear_caches()
    _strict = {"cores": spec.cores}
    try:
        with _counting(report):
            yield
    finally:
        _strict = None
        jax.clear_caches()


# ----------------------------------------------------------------------------- the jaxpr reading
