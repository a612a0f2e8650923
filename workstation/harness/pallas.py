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

The ``pallas_read`` step (:class:`~workstation.protocol.steps.PallasReadStep`) reads each
distinct ``pallas_call`` with ``jax.make_jaxpr`` on abstract arguments (nothing extra runs):
:func:`read_pallas_call` returns the grid, every block mapping (block shape, array shape
and dtype, the index map evaluated at every grid point), how the output blocks cover each
output, the input blocks that reach past their array (padding reads), the scratch
buffers, every ``dot_general`` (operand, ``preferred_element_type`` and result dtypes), the
reductions, and every read-modify-write accumulation into a ref or a loop carry with its
dtype, each with its task source line.

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
import math
import os
import sys
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from workstation.harness import StepOutput, call_hook, job_hook, monitor, step
from workstation.protocol.extras.monitors import (
    PallasCallsReport,
    PallasKernelCalls,
    PallasStrictReport,
    PallasStrictSettings,
    Site,
)
from workstation.protocol.steps import PallasCalls, PallasReadStep, PallasStrict

#: grid points beyond which the output cover is not computed (the index map is evaluated
#: at every point), and outputs larger than this (elements).
MAX_GRID_POINTS = 1 << 16
MAX_COVER_ELEMENTS = 1 << 24
HALF = ("float16", "bfloat16")

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


class Reader(PallasObserver):
    """Reads each distinct ``pallas_call`` (kernel name, argument shapes and dtypes) once."""

    def __init__(self, case_index: int) -> None:
        self.case_index = case_index
        self.readings: dict[str, dict[str, Any]] = {}

    def before(self, rec: Invocation) -> None:
        import jax

        avals = [jax.ShapeDtypeStruct(tuple(getattr(a, "shape", ())), getattr(a, "dtype", None))
                 for a in rec.call_args]
        key = f"{rec.name}|{[(tuple(a.shape), str(a.dtype)) for a in avals]}"
        if key in self.readings:
            return
        try:
            reading = read_pallas_call(rec, avals)
        except Exception as e:  # noqa: BLE001  (a reading failure is reported, never the task's)
            reading = {"error": f"{type(e).__name__}: {e}"[:2000]}
        reading.update(name=rec.name, site=rec.site, case=self.case_index,
                       args=[{"shape": list(a.shape), "dtype": str(a.dtype)} for a in avals])
        self.readings[key] = reading


@step(PallasReadStep)
def pallas_read_step(ctx: Any, spec: PallasReadStep) -> StepOutput:
    """Run the candidate on each case of ``spec.cases`` and read every distinct
    ``pallas_call`` (module doc). ``extra``:
    :class:`~workstation.protocol.extras.backends.PallasReadExtra`: ``kernels`` (one reading
    per distinct call: :func:`read_pallas_call`'s keys plus ``name``, ``site``, ``case``
    (index), ``args``), ``calls`` (invocations per case), ``case_errors`` (the candidate
    raised on a case), ``jax`` (whether JAX is loaded), ``seconds``."""
    import msgspec

    from workstation.harness.core import error_info, run_role
    from workstation.protocol.extras.backends import PallasReadExtra, PallasReading
    from workstation.protocol.results import Raised, kws_error

    t0 = time.perf_counter()
    if not install():
        return StepOutput(ok=False, error=kws_error("JAX is not installed for kws", phase="pallas_read",
                                                    type_="ImportError"), extra=PallasReadExtra(jax=False))
    kernels: dict[str, dict[str, Any]] = {}
    calls: list[int] = []
    case_errors: dict[str, Raised] = {}
    for ci, case in enumerate(spec.cases):
        reader = Reader(ci)
        counter = CallCounter()
        try:
            inputs = ctx.make_inputs(case, spec.seed)
            with observing(counter), observing(reader):
                run_role(ctx, "candidate", inputs)
        except BaseException as e:  # noqa: BLE001
            case_errors[str(ci)] = error_info(e, getattr(e, "_kws_phase", "call"))
        calls.append(sum(k.calls for k in counter.kernels.values()))
        for k, v in reader.readings.items():
            kernels.setdefault(k, v)
    # the readings are built as JSON-ready dicts (read_pallas_call); a key renamed there fails here
    readings = msgspec.convert(list(kernels.values()), type=list[PallasReading])
    return StepOutput(ok=True, extra=PallasReadExtra(kernels=readings, calls=calls, case_errors=case_errors, jax=True,
                                                     seconds=time.perf_counter() - t0))


def _loc(eqn: Any) -> dict[str, Any] | None:
    """The task source line of a jaxpr equation (``file`` relative to the task folder)."""
    from jax._src import source_info_util

    try:
        frames = list(source_info_util.user_frames(eqn.source_info.traceback))
    except Exception:  # noqa: BLE001  (no traceback kept: no line)
        return None
    for fr in frames:
        fn = fr.file_name
        if _task_dir and fn.startswith(_task_dir):
            line = getattr(fr, "start_line", None) or getattr(fr, "line_num", None)
            return {"file": os.path.relpath(fn, _task_dir), "line": line, "function": fr.function_name}
    return None


def _dt(aval: Any) -> str:
    inner = getattr(aval, "inner_aval", None)
    if inner is not None:
        aval = inner
    return str(getattr(aval, "dtype", ""))


def _shape(aval: Any) -> list[int]:
    inner = getattr(aval, "inner_aval", None)
    if inner is not None:
        aval = inner
    return [int(d) for d in getattr(aval, "shape", ())]


def read_pallas_call(rec: Invocation, avals: list[Any]) -> dict[str, Any]:
    """The static reading of one ``pallas_call`` (module doc), from ``jax.make_jaxpr`` of
    the kernel call on ``avals`` (``jax.ShapeDtypeStruct`` per argument).

    Returns ``grid`` (ints, or None for a dynamic grid), ``dimension_semantics``,
    ``inputs`` / ``outputs`` (per block mapping: ``block_shape``, ``array_shape``,
    ``dtype``, and ``cover`` (outputs: ``elements``, ``covered``, ``uncovered``,
    ``first_uncovered``, ``uncovered_box``, ``reach``: per dimension, the end of the
    furthest block, ``revisited``: elements written by more than
    one grid step) or ``padding`` (inputs: per dimension, how far the last block reaches
    past the array)), ``scratch`` (shape, dtype), ``dots``, ``reductions``,
    ``accumulations`` (``target`` (output j / scratch k / input j / loop carry),
    ``dtype``, ``line``), ``writes`` (per store to an output ref: ``target``, ``line`` and
    ``conds``, the source lines of the ``cond``s (``pl.when``) it lies under), and ``notes``
    (what could not be read)."""
    import jax

    closed = jax.make_jaxpr(rec.build(True))(*avals)
    eqns = [e for e in closed.jaxpr.eqns if e.primitive.name == "pallas_call"]
    if not eqns:
        return {"notes": ["no pallas_call equation in the traced jaxpr"]}
    eqn = eqns[0]
    gm = eqn.params["grid_mapping"]
    notes: list[str] = []
    grid = [int(g) if isinstance(g, int) else None for g in gm.grid]
    n_in, n_out = int(gm.num_inputs), int(gm.num_outputs)
    n_idx = int(getattr(gm, "num_index_operands", 0))
    cp = eqn.params.get("compiler_params")
    sem = None
    for v in (cp.values() if isinstance(cp, dict) else [cp]):
        s = getattr(v, "dimension_semantics", None)
        if s is not None:
            sem = [str(x).split(".")[-1].lower() for x in s]
    points = _grid_points(grid)
    if points is None:
        notes.append(f"grid {grid}: dynamic or more than {MAX_GRID_POINTS} points; block cover not computed")
    mappings = list(gm.block_mappings)
    ins: list[dict[str, Any]] = []
    outs: list[dict[str, Any]] = []
    for k, bm in enumerate(mappings):
        d = _block_mapping(bm, points, k >= n_in, notes)
        (outs if k >= n_in else ins).append(d)
    kj = eqn.params["jaxpr"]
    invars = list(kj.invars)
    roles: dict[Any, str] = {}
    for i, v in enumerate(invars):
        if i < n_idx:
            roles[v] = f"scalar prefetch {i}"
        elif i < n_idx + n_in:
            roles[v] = f"input {i - n_idx}"
        elif i < n_idx + n_in + n_out:
            roles[v] = f"output {i - n_idx - n_in}"
        else:
            roles[v] = f"scratch {i - n_idx - n_in - n_out}"
    scratch = [{"index": i - n_idx - n_in - n_out, "shape": _shape(v.aval), "dtype": _dt(v.aval),
                "memory": str(getattr(v.aval, "memory_space", ""))}
               for i, v in enumerate(invars) if i >= n_idx + n_in + n_out]
    body: dict[str, list[dict[str, Any]]] = {"dots": [], "reductions": [], "accumulations": []}
    _walk(kj, roles, body, {}, 0)
    return {"grid": grid, "dimension_semantics": sem, "inputs": ins, "outputs": outs, "scratch": scratch,
            **body, "notes": notes}


def _grid_points(grid: list[int | None]) -> np.ndarray | None:
    sizes = [g for g in grid if g is not None]
    if len(sizes) != len(grid):
        return None
    n = math.prod(sizes) if sizes else 1
    if n > MAX_GRID_POINTS:
        return None
    if not sizes:
        return np.zeros((1, 0), dtype=np.int32)
    mesh = np.meshgrid(*[np.arange(g, dtype=np.int32) for g in sizes], indexing="ij")
    return np.stack([m.ravel() for m in mesh], axis=1)


def _block_dims(bm: Any) -> list[tuple[str, int]] | None:
    """Per array dimension (kind, size): ``blocked`` (the index map gives a block index),
    ``squeezed`` (size 1, an element index); None for a kind kws does not read."""
    out = []
    for b in bm.block_shape:
        name = type(b).__name__
        if b is None or name == "Squeezed":
            out.append(("squeezed", 1))
        elif name == "Blocked":
            out.append(("blocked", int(b.block_size)))
        elif isinstance(b, int):
            out.append(("blocked", int(b)))
        else:
            return None
    return out


def _block_mapping(bm: Any, points: np.ndarray | None, is_out: bool, notes: list[str]) -> dict[str, Any]:
    import jax

    aval = bm.array_aval
    shape = [int(s) for s in aval.shape]
    dims = _block_dims(bm)
    d: dict[str, Any] = {"array_shape": shape, "dtype": str(aval.dtype),
                         "block_shape": [s for _, s in dims] if dims else [str(b) for b in bm.block_shape]}
    if dims is None or points is None or len(dims) != len(shape):
        if dims is None:
            notes.append(f"block shape {bm.block_shape}: a block kind kws does not read; cover not computed")
        return d
    imj = bm.index_map_jaxpr
    try:
        def f(*ix: Any) -> Any:
            return jax.core.eval_jaxpr(imj.jaxpr, imj.consts, *ix)

        cols = [points[:, i] for i in range(points.shape[1])]
        idx = jax.vmap(f)(*cols) if cols else f()
        idx = np.stack([np.asarray(x).reshape(-1) for x in idx], axis=1)
    except Exception as e:  # noqa: BLE001
        notes.append(f"index map of block {d['block_shape']} not evaluated: {type(e).__name__}: {e}"[:300])
        return d
    starts = np.stack([idx[:, i] * (s if kind == "blocked" else 1) for i, (kind, s) in enumerate(dims)], axis=1)
    sizes = [s for _, s in dims]
    if not is_out:
        reach = [int(starts[:, i].max()) + sizes[i] - shape[i] if len(starts) else 0 for i in range(len(shape))]
        d["padding"] = [max(0, r) for r in reach]
        return d
    numel = math.prod(shape)
    if numel > MAX_COVER_ELEMENTS:
        notes.append(f"output {shape}: more than {MAX_COVER_ELEMENTS} elements; cover not computed")
        return d
    count = np.zeros(shape, dtype=np.int32)
    for row in np.unique(starts, axis=0):
        sl = tuple(slice(max(0, int(a)), max(0, int(a) + s)) for a, s in zip(row, sizes, strict=True))
        count[sl] += 1
    # grid steps that map to the same block: revisits (accumulation over a grid axis)
    uniq, mult = np.unique(starts, axis=0, return_counts=True)
    revisit = np.zeros(shape, dtype=bool)
    for row, m in zip(uniq, mult, strict=True):
        if m > 1:
            sl = tuple(slice(max(0, int(a)), max(0, int(a) + s)) for a, s in zip(row, sizes, strict=True))
            revisit[sl] = True
    miss = count == 0
    reach = [int(min(shape[i], max(0, int(starts[:, i].max()) + sizes[i]))) for i in range(len(shape))]
    cover: dict[str, Any] = {"reach": reach, "elements": numel, "covered": int(numel - miss.sum()), "uncovered": int(miss.sum()),
                             "revisited": int(revisit.sum()), "grid_steps_per_block": int(mult.max()) if len(mult) else 0}
    if miss.any():
        where = np.argwhere(miss)
        cover["first_uncovered"] = [int(x) for x in where[0]]
        cover["uncovered_box"] = [[int(where[:, i].min()), int(where[:, i].max())] for i in range(where.shape[1])]
    d["cover"] = cover
    return d


_ACC_OPS = ("add", "sub", "max", "min", "add_any")
_REDUCE = ("reduce_sum", "reduce_max", "reduce_min", "cumsum", "reduce_prod", "argmax", "argmin")


def _subjaxprs(eqn: Any) -> list[Any]:
    out = []
    for p in eqn.params.values():
        for q in (p if isinstance(p, tuple | list) else [p]):
            j = getattr(q, "jaxpr", None)
            if j is not None and hasattr(j, "eqns"):
                out.append(j)
            elif hasattr(q, "eqns") and hasattr(q, "invars"):
                out.append(q)
    return out


def _walk(j: Any, roles: dict[Any, str], body: dict[str, list[dict[str, Any]]], reads: dict[Any, str],
          depth: int, conds: tuple = ()) -> None:
    """Collect dots, reductions, read-modify-write accumulations and output writes of one
    (sub-)jaxpr. ``reads`` maps a value to the ref it was read from (through elementwise
    ops); ``conds`` are the source lines of the ``cond`` equations (``pl.when``,
    ``lax.cond``) this jaxpr is a branch of."""
    if depth > 12:
        return
    for e in j.eqns:
        name = e.primitive.name
        if name in ("swap", "addupdate") and e.invars and roles.get(e.invars[0], "").startswith("output "):
            body.setdefault("writes", []).append({"target": roles[e.invars[0]], "op": name, "line": _loc(e),
                                                  "conds": list(conds)})
        if name == "get" and e.invars and e.invars[0] in roles:
            reads[e.outvars[0]] = roles[e.invars[0]]
        elif name in _ACC_OPS or name == "convert_element_type":
            src = next((reads[v] for v in e.invars if not _is_literal(v) and v in reads), None)
            if src is not None:
                reads[e.outvars[0]] = src
                if name in _ACC_OPS or ("acc", e.invars[0]) in reads:
                    reads[("acc", e.outvars[0])] = src
        if name == "dot_general":
            a, b = e.invars[:2]
            body["dots"].append({"lhs": _dt(a.aval), "rhs": _dt(b.aval),
                                 "preferred_element_type": str(e.params.get("preferred_element_type")),
                                 "out": _dt(e.outvars[0].aval), "shape": _shape(e.outvars[0].aval),
                                 "precision": str(e.params.get("precision")), "line": _loc(e)})
        elif name in _REDUCE:
            body["reductions"].append({"op": name, "dtype": _dt(e.invars[0].aval), "out": _dt(e.outvars[0].aval),
                                       "line": _loc(e)})
        elif name in ("swap", "addupdate") and e.invars and e.invars[0] in roles:
            target = roles[e.invars[0]]
            val = e.invars[1] if len(e.invars) > 1 else None
            if name == "addupdate" or (val is not None and not _is_literal(val) and reads.get(("acc", val)) == target):
                body["accumulations"].append({"target": target, "dtype": _dt(e.invars[0].aval), "op": name,
                                              "line": _loc(e)})
        elif name in ("scan", "while"):
            _carry_accumulations(e, body)
        for sub in _subjaxprs(e):
            # refs pass into sub-jaxprs (cond branches, loops, run_scoped) positionally
            sub_roles = dict(roles)
            ops = e.invars[1:] if name == "cond" else e.invars
            offs = len(sub.invars) - len(ops)
            for k, v in enumerate(ops):
                if not _is_literal(v) and v in roles and 0 <= k + offs < len(sub.invars):
                    sub_roles[sub.invars[k + offs]] = roles[v]
            if name == "run_scoped":
                for k, v in enumerate(sub.invars):
                    sub_roles.setdefault(v, f"scoped scratch {k}")
                    body.setdefault("scoped", []).append({"shape": _shape(v.aval), "dtype": _dt(v.aval)})
            _walk(sub, sub_roles, body, reads, depth + 1,
                  conds + ((_loc(e) or {"file": "?", "line": 0},) if name == "cond" else ()))


def _carry_accumulations(e: Any, body: dict[str, list[dict[str, Any]]]) -> None:
    """Loop carries of half dtype that the loop body updates with an add (a half-precision
    accumulator carried across iterations)."""
    subs = _subjaxprs(e)
    if not subs:
        return
    b = subs[-1]
    n_consts = int(e.params.get("num_consts", 0) or e.params.get("body_nconsts", 0) or 0)
    n_carry = int(e.params.get("num_carry", len(b.outvars)))
    carries = b.invars[n_consts:n_consts + n_carry]
    produced = {v: eq for eq in b.eqns for v in eq.outvars}
    for k, out in enumerate(b.outvars[:n_carry]):
        if k >= len(carries) or _is_literal(out):
            continue
        eq = produced.get(out)
        seen = 0
        while eq is not None and eq.primitive.name == "convert_element_type" and seen < 4:
            eq = produced.get(eq.invars[0])
            seen += 1
        if eq is not None and eq.primitive.name in ("add", "add_any") and carries[k] in eq.invars:
            body["accumulations"].append({"target": f"loop carry {k}", "dtype": _dt(carries[k].aval),
                                          "op": e.primitive.name, "line": _loc(eq)})


def _is_literal(v: Any) -> bool:
    return type(v).__name__ == "Literal"
