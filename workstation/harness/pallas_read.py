"""Child side of the ``pallas_read`` step: a static reading of every distinct ``pallas_call``
a Pallas candidate makes.

The ``pallas_read`` step (:class:`~workstation.protocol.steps.PallasReadStep`) reads each
distinct ``pallas_call`` with ``jax.make_jaxpr`` on abstract arguments (nothing extra runs):
:func:`read_pallas_call` returns the grid, every block mapping (block shape, array shape
and dtype, the index map evaluated at every grid point), how the output blocks cover each
output, the input blocks that reach past their array (padding reads), the scratch
buffers, every ``dot_general`` (operand, ``preferred_element_type`` and result dtypes), the
reductions, and every read-modify-write accumulation into a ref or a loop carry with its
dtype, each with its task source line.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

import numpy as np

from workstation.harness import StepOutput, pallas, step
from workstation.harness.pallas import CallCounter, Invocation, PallasObserver, install, observing
from workstation.protocol.steps import PallasReadStep

#: grid points beyond which the output cover is not computed (the index map is evaluated
#: at every point), and outputs larger than this (elements).
MAX_GRID_POINTS = 1 << 16
MAX_COVER_ELEMENTS = 1 << 24
HALF = ("float16", "bfloat16")


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
        task_dir = pallas.task_dir()
        if task_dir and fn.startswith(task_dir):
            line = getattr(fr, "start_line", None) or getattr(fr, "line_num", None)
            return {"file": os.path.relpath(fn, task_dir), "line": line, "function": fr.function_name}
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
