"""NKI kernels read statically from their Python source (never imported).

An NKI (Neuron Kernel Interface) kernel is a Python function decorated with ``@nki.jit``
(``neuronxcc.nki.jit``, also ``nki.baremetal`` / ``nki.benchmark``) written against
``nki.language`` (``nl``) and ``nki.isa`` (``nisa``). :func:`read_nki` walks a task file's
AST (:class:`~workstation.task.sources.SourceFile`) and returns per kernel:

- ``tiles``: every on-chip buffer it allocates (``nl.zeros`` / ``nl.ndarray`` / ``nl.full``
  / ``nl.empty_like``, ``buffer=nl.psum`` or ``nl.sbuf``) with its dtype and line;
- ``loops``: every tile loop (``nl.affine_range`` / ``nl.sequential_range`` / ``range``)
  and its trip count's form: ``ceil`` (``math.ceil(a / b)``, ``(a + b - 1) // b``,
  ``cdiv``: the last tile can be partial), ``floor`` (``a // b``: a tail of ``a % b`` is
  never visited), or ``other``;
- ``accesses``: every ``nl.load`` / ``nl.store`` / ``nisa.dma_copy`` with whether it passes
  ``mask=`` and the loops it sits in;
- ``accumulations``: ``t += ...`` / ``t = t + ...`` / ``t[...] += ...`` on an allocated
  tile, with the tile's dtype and buffer;
- ``matmuls``: ``nl.matmul`` / ``nisa.nc_matmul`` calls with any operand cast
  (``.astype(dtype)``, ``dtype=``) they show;
- ``reductions``: ``nl.sum`` / ``nl.max`` / ``nl.mean`` ... with an explicit ``dtype=``;
- ``asserts``: ``assert`` statements (e.g. ``assert N % 128 == 0``, which makes a floor
  loop exact).

Where a dtype or a size is a variable kws does not resolve it: the reading is about the
source's form (the Neuron docs' rules: PSUM accumulates in fp32; loads and stores of a
partial tile need a mask; ``nl.tile_size.pmax`` = 128 partitions), not its values.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from workstation.task.sources import SourceFile

HALF = ("bfloat16", "float16", "float8_e4m3", "float8_e5m2", "float8_e4m3fn", "tfloat32")
_ALLOC = ("zeros", "ndarray", "full", "empty_like", "zeros_like", "ones")
_RANGES = ("affine_range", "sequential_range", "static_range", "range")
_ACCESS = ("load", "store", "dma_copy", "load_transpose2d")
_MATMUL = ("matmul", "nc_matmul")
_REDUCE = ("sum", "max", "min", "mean", "prod", "all", "any", "tensor_reduce")


@dataclass
class NkiKernel:
    """What :func:`read_nki` found in one kernel (module doc)."""

    name: str
    file: str
    line: int
    tiles: dict[str, dict[str, Any]] = field(default_factory=dict)
    loops: list[dict[str, Any]] = field(default_factory=list)
    accesses: list[dict[str, Any]] = field(default_factory=list)
    accumulations: list[dict[str, Any]] = field(default_factory=list)
    matmuls: list[dict[str, Any]] = field(default_factory=list)
    reductions: list[dict[str, Any]] = field(default_factory=list)
    asserts: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _tail(name: str | None) -> str:
    return (name or "").rsplit(".", 1)[-1]


def is_nki_kernel(sf: SourceFile, node: ast.AST) -> bool:
    """A function decorated with ``nki.jit`` (any alias resolving into ``nki`` /
    ``neuronxcc``), ``nki.baremetal`` or ``nki.benchmark``."""
    for d in getattr(node, "decorator_list", []):
        target = d.func if isinstance(d, ast.Call) else d
        name = sf.dotted(target) or ""
        if (name.startswith(("nki.", "neuronxcc.")) or ".nki." in name) and _tail(name) in ("jit", "baremetal",
                                                                                             "benchmark", "trace"):
            return True
    return False


def _dtype_text(sf: SourceFile, node: ast.AST | None) -> str:
    if node is None:
        return ""
    name = sf.dotted(node)
    if name:
        return _tail(name) if ("nki" in name or name.startswith(("nl.", "np.", "numpy."))) else name
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return sf.text(node, 60)


def _kw(call: ast.Call, name: str) -> ast.AST | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _trip_form(sf: SourceFile, node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        fn = _tail(sf.dotted(node.func))
        if fn in ("ceil", "cdiv", "div_ceil", "ceildiv"):
            return "ceil"
        if fn == "int" and node.args:
            return _trip_form(sf, node.args[0])
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv):
        left = node.left
        if isinstance(left, ast.BinOp) and isinstance(left.op, ast.Sub | ast.Add):
            return "ceil"  # (a + b - 1) // b
        return "floor"
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return "ceil"  # -(-a // b)
    return "other"


def read_nki(sf: SourceFile) -> list[NkiKernel]:
    """Every NKI kernel of ``sf`` (module doc)."""
    out = []
    for node in ast.walk(sf.tree):
        if isinstance(node, ast.FunctionDef) and is_nki_kernel(sf, node):
            k = NkiKernel(node.name, sf.rel, node.lineno)
            _visit(sf, k, node.body, [])
            out.append(k)
    return out


def _visit(sf: SourceFile, k: NkiKernel, body: list[ast.stmt], loops: list[int]) -> None:
    for st in body:
        if isinstance(st, ast.For) and isinstance(st.iter, ast.Call) and _tail(sf.dotted(st.iter.func)) in _RANGES:
            arg = st.iter.args[-1] if st.iter.args else None
            if len(st.iter.args) >= 2:
                arg = st.iter.args[1]
            form = _trip_form(sf, arg) if arg is not None else "other"
            k.loops.append({"line": st.lineno, "range": _tail(sf.dotted(st.iter.func)), "trip": sf.text(st.iter, 100),
                            "form": form, "var": sf.text(st.target, 30)})
            _visit(sf, k, st.body, [*loops, len(k.loops) - 1])
            continue
        if isinstance(st, ast.Assert):
            k.asserts.append(sf.text(st.test, 120))
        for sub in ast.walk(st) if not isinstance(st, ast.For | ast.While | ast.If | ast.With) else [st]:
            if isinstance(sub, ast.Call):
                _call(sf, k, sub, loops)
        if isinstance(st, ast.Assign) and isinstance(st.value, ast.Call):
            fn = _tail(sf.dotted(st.value.func))
            root = (sf.dotted(st.value.func) or "").split(".")[0]
            if fn in _ALLOC and (root in ("nl", "nki", "neuronxcc") or "nki" in sf.aliases.get(root, "")):
                dt = _kw(st.value, "dtype")
                if dt is None and len(st.value.args) >= 2:
                    dt = st.value.args[1]
                buf = _kw(st.value, "buffer")
                for t in st.targets:
                    if isinstance(t, ast.Name):
                        k.tiles[t.id] = {"line": st.lineno, "dtype": _dtype_text(sf, dt), "buffer":
                                         _tail(sf.dotted(buf)) if buf is not None else "", "alloc": fn}
        if isinstance(st, ast.AugAssign) and isinstance(st.op, ast.Add):
            name = st.target.id if isinstance(st.target, ast.Name) else (
                st.target.value.id if isinstance(st.target, ast.Subscript) and isinstance(st.target.value, ast.Name)
                else None)
            if name in k.tiles:
                k.accumulations.append({"tile": name, "line": st.lineno, "dtype": k.tiles[name]["dtype"],
                                        "buffer": k.tiles[name]["buffer"], "in_loops": list(loops),
                                        "text": sf.text(st, 120)})
        elif isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.value, ast.BinOp) \
                and isinstance(st.value.op, ast.Add):
            t = st.targets[0]
            name = t.id if isinstance(t, ast.Name) else None
            if name in k.tiles and any(isinstance(x, ast.Name) and x.id == name for x in (st.value.left, st.value.right)):
                k.accumulations.append({"tile": name, "line": st.lineno, "dtype": k.tiles[name]["dtype"],
                                        "buffer": k.tiles[name]["buffer"], "in_loops": list(loops),
                                        "text": sf.text(st, 120)})
        for child in ("body", "orelse", "finalbody"):
            if isinstance(st, ast.If | ast.With | ast.While | ast.Try) and getattr(st, child, None):
                _visit(sf, k, getattr(st, child), loops)


def _call(sf: SourceFile, k: NkiKernel, call: ast.Call, loops: list[int]) -> None:
    fn = _tail(sf.dotted(call.func))
    if fn in _ACCESS:
        k.accesses.append({"op": fn, "line": call.lineno, "mask": _kw(call, "mask") is not None,
                           "in_loops": list(loops), "text": sf.text(call, 120)})
    elif fn in _MATMUL:
        casts = []
        for a in [*call.args, *[kw.value for kw in call.keywords]]:
            for sub in ast.walk(a):
                if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == "astype" \
                        and sub.args:
                    casts.append(_dtype_text(sf, sub.args[0]))
        dt = _kw(call, "dtype")
        k.matmuls.append({"op": fn, "line": call.lineno, "casts": casts, "dtype": _dtype_text(sf, dt),
                          "in_loops": list(loops), "text": sf.text(call, 120)})
    elif fn in _REDUCE and _kw(call, "dtype") is not None and ("nki" in (sf.dotted(call.func) or "")
                                                               or (sf.dotted(call.func) or "").startswith(("nl.", "nisa."))):
        k.reductions.append({"op": fn, "line": call.lineno, "dtype": _dtype_text(sf, _kw(call, "dtype")),
                             "text": sf.text(call, 120)})
