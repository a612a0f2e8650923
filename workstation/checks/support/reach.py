"""A legal case that reaches a line of the candidate: the branch conditions that guard it,
read from the source, and a search of legal cases that satisfy them (``fallback``'s framework
calls read in the source but not seen at run time).

*Guards* (:func:`guards`): the conditions under which a line of a function runs, read from
its AST: the tests of the ``if``/``while`` statements and conditional expressions around it
(true in their body, false in their ``else``), and of the ``if`` statements before it in the
same block whose body returns or raises (false: the line runs only when they do not). A line
of a helper function is reached through a call of it in the entry function: the call's own
guards join, and the helper's parameters are bound to the call's arguments.

*Evaluation* (:func:`evaluate`): three-valued (true, false, :data:`UNKNOWN`) over what a
case's inputs look like: each tensor input's shape, dtype, strides, ``numel``, ``ndim``,
``size(i)``, ``stride(i)``, ``is_contiguous()``, ``is_cuda`` (false: the CPU), the same
tensor through ``contiguous()``, ``clone()``, ``detach()`` and casts (``float()``, ``to(dtype)``), non-tensor
inputs' values, the function's simple assignments before the line (``M, N = x.shape``,
``n = x.numel()``), module-level constants, integer arithmetic, comparisons, ``in`` over
literal tuples, ``torch.float16``-style dtypes, ``min``/``max``/``len``/``abs``,
``triton.cdiv``, ``triton.next_power_of_2``. Anything else is unknown, and ``False and x``
is false whatever ``x`` is: a guard that is false with every input unknown is dead code.

*Inputs of a case* (:func:`predict_inputs`): fitted from the declared cases' inputs (an
``inputs_only`` run of each): per tensor dimension, the parameter it equals in every declared
case (else a product of two, else a constant); its dtype the case's ``dtype`` where every
declared case had it so; contiguous strides where they were contiguous.

*Search* (:func:`search`): from the cheapest declared case of each dtype, one or two integer
parameters moved to values around the integer constants of the guard (``c - 1``, ``c``,
``c + 1``, ``2c``, ``c / 2``, ``c + m`` with ``multiple_of = m``), the ragged value and the
``[params]`` minimum, snapped to legal values; the dtype to each of the task's dtypes; the
cases that satisfy every guard, cheapest first (cost units), within the CPU cap.

Nothing here runs task code. Private to the battery.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from workstation.checks.support.costmodel import cost_units
from workstation.checks.support.legal import UNLISTED, int_params, snap
from workstation.checks.support.ragged import ragged_value
from workstation.protocol.extras.calls import InputDesc
from workstation.task.sources import SourceFile

#: the third truth value (and any value that cannot be read from the source).
UNKNOWN: Any = type("Unknown", (), {"__repr__": lambda self: "UNKNOWN"})()
#: torch dtype aliases.
_DTYPE_ALIASES = {"half": "float16", "float": "float32", "double": "float64", "bfloat16": "bfloat16",
                  "long": "int64", "int": "int32", "short": "int16", "bool": "bool"}
#: tensor methods that cast: method -> dtype.
_CASTS = {"float": "float32", "half": "float16", "double": "float64", "bfloat16": "bfloat16", "int": "int32",
          "long": "int64", "bool": "bool"}
#: helper calls followed from the entry to the line.
MAX_DEPTH = 2
#: candidates kept by :func:`search`.
MAX_FOUND = 3


@dataclass(frozen=True)
class Dtype:
    """A torch dtype as the guards see it (``torch.float16`` -> ``Dtype("float16")``)."""

    name: str

    @property
    def is_floating_point(self) -> bool:
        return self.name.startswith(("float", "bfloat"))

    @property
    def itemsize(self) -> int:
        from workstation.protocol.sentinels import ELEMENT_SIZE

        return ELEMENT_SIZE.get(self.name, UNKNOWN)


@dataclass(frozen=True)
class TensorView:
    """What a guard may read of a tensor input: shape, dtype, strides (None: unknown)."""

    shape: tuple[Any, ...]
    dtype: Dtype | Any
    stride: tuple[Any, ...] | None = None

    def numel(self) -> Any:
        n = 1
        for s in self.shape:
            if s is UNKNOWN:
                return UNKNOWN
            n *= s
        return n


@dataclass
class Guard:
    """The conditions under which a line runs: ``conds`` are (test, value it must have, the
    function whose scope it is read in); ``binds`` maps a helper function's name to the call
    of it the line is reached through; ``dead``: a statement before it always leaves."""

    conds: list[tuple[ast.expr, bool, ast.FunctionDef]] = field(default_factory=list)
    calls: list[tuple[ast.FunctionDef, ast.Call, ast.FunctionDef]] = field(default_factory=list)

    def text(self, mod: SourceFile) -> str:
        parts = [("" if want else "not ") + f"({mod.text(t, 80)})" for t, want, _f in self.conds]
        return " and ".join(parts) or "always"


# ----------------------------------------------------------------------------- guards


def _within(node: ast.AST, line: int) -> bool:
    first = int(getattr(node, "lineno", 0))
    return first <= line <= int(getattr(node, "end_lineno", None) or first)


def _in_block(stmts: list[ast.stmt], line: int) -> bool:
    return any(_within(s, line) for s in stmts)


def _leaves(stmts: list[ast.stmt]) -> bool:
    return bool(stmts) and isinstance(stmts[-1], ast.Return | ast.Raise)


def _block_conds(stmts: list[ast.stmt], line: int, text: str | None = None,
                 mod: SourceFile | None = None) -> list[tuple[ast.expr, bool]] | None:
    """The conditions on the way to ``line`` in ``stmts`` (None: the line is not in them)."""
    conds: list[tuple[ast.expr, bool]] = []
    for st in stmts:
        if _within(st, line):
            if isinstance(st, ast.If | ast.While):
                if _in_block(st.body, line):
                    inner = _block_conds(st.body, line, text, mod)
                    return None if inner is None else [*conds, (st.test, True), *inner]
                if _in_block(st.orelse, line):
                    inner = _block_conds(st.orelse, line, text, mod)
                    return None if inner is None else [*conds, (st.test, False), *inner]
                return conds + _expr_conds(st.test, line, text, mod)
            if isinstance(st, ast.For | ast.With | ast.AsyncWith | ast.AsyncFor):
                orelse: list[ast.stmt] = getattr(st, "orelse", [])
                inner = _block_conds(st.body, line, text, mod) if _in_block(st.body, line) else (
                    _block_conds(orelse, line, text, mod) if _in_block(orelse, line) else [])
                return None if inner is None else conds + inner
            if isinstance(st, ast.Try):
                for blk in (st.body, st.orelse, st.finalbody):
                    if _in_block(blk, line):
                        inner = _block_conds(blk, line, text, mod)
                        return None if inner is None else conds + inner
                return None  # an except handler: the fault injection's domain
            return conds + _expr_conds(st, line, text, mod)
        if isinstance(st, ast.If):
            if _leaves(st.body) and not (st.orelse and _leaves(st.orelse)):
                conds.append((st.test, False))
            elif st.orelse and _leaves(st.orelse) and not _leaves(st.body):
                conds.append((st.test, True))
    return None


def _pos(n: ast.AST) -> tuple[tuple[int, int], tuple[int, int]]:
    line, col = int(getattr(n, "lineno", 0)), int(getattr(n, "col_offset", 0))
    return (line, col), (int(getattr(n, "end_lineno", None) or line), int(getattr(n, "end_col_offset", None) or 0))


def _contains(outer: ast.AST, inner: ast.AST) -> bool:
    (a0, a1), (b0, b1) = _pos(outer), _pos(inner)
    return a0 <= b0 and b1 <= a1


def _expr_conds(node: ast.AST, line: int, text: str | None = None,
                mod: SourceFile | None = None) -> list[tuple[ast.expr, bool]]:
    """Conditional expressions (``a if c else b``) whose branch holds the call at ``line``
    (the one whose source is ``text`` where given: a line may hold both branches)."""
    target: ast.AST | None = None
    if text is not None and mod is not None:
        target = next((c for c in ast.walk(node) if isinstance(c, ast.Call | ast.BinOp) and c.lineno == line
                       and mod.text(c) == text), None)
    out: list[tuple[ast.expr, bool]] = []
    for sub in ast.walk(node):
        if not isinstance(sub, ast.IfExp):
            continue
        if target is not None:
            if _contains(sub.body, target):
                out.append((sub.test, True))
            elif _contains(sub.orelse, target):
                out.append((sub.test, False))
        elif not _within(sub.test, line):
            if _within(sub.body, line) and not _within(sub.orelse, line):
                out.append((sub.test, True))
            elif _within(sub.orelse, line) and not _within(sub.body, line):
                out.append((sub.test, False))
    return out


def guards(mod: SourceFile, entry: str, function: str, line: int, text: str | None = None,
           depth: int = 0) -> Guard | None:
    """The guard of ``line`` in ``function`` reached from ``entry`` (module doc), or None when
    the line is not reached that way (an except handler, a function not called from the
    entry by name, a helper more than :data:`MAX_DEPTH` calls deep)."""
    defs = mod.top_level_defs()
    fn = defs.get(function)
    if not isinstance(fn, ast.FunctionDef):
        return None
    conds = _block_conds(fn.body, line, text, mod)
    if conds is None:
        return None
    g = Guard([(t, want, fn) for t, want in conds])
    if function == entry:
        return g
    for caller_name in [entry, *[n for n in defs if n not in (entry, function)]][:8]:
        caller = defs.get(caller_name)
        if not isinstance(caller, ast.FunctionDef):
            continue
        for sub in ast.walk(caller):
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id == function:
                if caller_name != entry and depth >= MAX_DEPTH:
                    continue
                outer = guards(mod, entry, caller_name, sub.lineno, depth=depth + 1) if caller_name != entry else Guard(
                    [(t, w, caller) for t, w in (_block_conds(caller.body, sub.lineno) or [])])
                if outer is None:
                    continue
                return Guard(outer.conds + g.conds, [*outer.calls, (fn, sub, caller)])
    return None


# ----------------------------------------------------------------------------- evaluation


def _dtype_of(dotted: str | None) -> Dtype | None:
    if not dotted or not dotted.startswith("torch."):
        return None
    name = dotted.removeprefix("torch.")
    name = _DTYPE_ALIASES.get(name, name)
    from workstation.protocol.sentinels import ELEMENT_SIZE

    return Dtype(name) if name in ELEMENT_SIZE or name == "bool" else None


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _npow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


_FUNCS = {"min": min, "max": max, "len": len, "abs": abs, "int": int, "bool": bool,
          "triton.cdiv": _cdiv, "triton.next_power_of_2": _npow2, "math.ceil": math.ceil,
          "math.prod": math.prod, "math.log2": math.log2}


class _Eval:
    """Three-valued evaluation of guard expressions in one function's scope."""

    def __init__(self, mod: SourceFile, env: dict[str, Any]):
        self.mod = mod
        self.env = env

    def __call__(self, node: ast.AST) -> Any:
        try:
            return self._eval(node)
        except (ArithmeticError, TypeError, ValueError, IndexError, KeyError, AttributeError, RecursionError):
            return UNKNOWN

    def _eval(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in self.env:
                return self.env[node.id]
            return _dtype_of(self.mod.aliases.get(node.id)) or UNKNOWN
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            return tuple(self(e) for e in node.elts)
        if isinstance(node, ast.Attribute):
            dt = _dtype_of(self.mod.dotted(node))
            if dt is not None:
                return dt
            base = self(node.value)
            if isinstance(base, TensorView):
                return {"shape": base.shape, "dtype": base.dtype, "ndim": len(base.shape), "is_cuda": False,
                        "T": UNKNOWN}.get(node.attr, UNKNOWN)
            if isinstance(base, Dtype) and node.attr in ("is_floating_point", "itemsize"):
                return getattr(base, node.attr)
            return UNKNOWN
        if isinstance(node, ast.Subscript):
            base, idx = self(node.value), self(node.slice)
            if base is UNKNOWN or idx is UNKNOWN or not isinstance(base, tuple):
                return UNKNOWN
            return base[idx] if isinstance(idx, int) else UNKNOWN
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.BoolOp):
            vals = [self(v) for v in node.values]
            if isinstance(node.op, ast.And):
                if any(v is not UNKNOWN and not v for v in vals):
                    return False
                return UNKNOWN if any(v is UNKNOWN for v in vals) else vals[-1]
            if any(v is not UNKNOWN and v for v in vals):
                return True
            return UNKNOWN if any(v is UNKNOWN for v in vals) else vals[-1]
        if isinstance(node, ast.UnaryOp):
            v = self(node.operand)
            if v is UNKNOWN:
                return UNKNOWN
            return {ast.Not: lambda x: not x, ast.USub: lambda x: -x, ast.UAdd: lambda x: +x,
                    ast.Invert: lambda x: ~x}[type(node.op)](v)
        if isinstance(node, ast.BinOp):
            a, b = self(node.left), self(node.right)
            if a is UNKNOWN or b is UNKNOWN or isinstance(a, TensorView | Dtype) or isinstance(b, TensorView | Dtype):
                return UNKNOWN
            ops = {ast.Add: lambda x, y: x + y, ast.Sub: lambda x, y: x - y, ast.Mult: lambda x, y: x * y,
                   ast.FloorDiv: lambda x, y: x // y, ast.Mod: lambda x, y: x % y, ast.Div: lambda x, y: x / y,
                   ast.Pow: lambda x, y: x ** y if abs(y) < 64 else UNKNOWN, ast.BitAnd: lambda x, y: x & y,
                   ast.BitOr: lambda x, y: x | y, ast.LShift: lambda x, y: x << y if y < 64 else UNKNOWN,
                   ast.RShift: lambda x, y: x >> y}
            binop = ops.get(type(node.op))
            return binop(a, b) if binop is not None else UNKNOWN
        if isinstance(node, ast.Compare):
            left = self(node.left)
            result: Any = True
            for op, right_node in zip(node.ops, node.comparators, strict=True):
                right = self(right_node)
                r = self._compare(op, left, right)
                if r is False:
                    return False
                if r is UNKNOWN:
                    result = UNKNOWN
                left = right
            return result
        if isinstance(node, ast.IfExp):
            t = self(node.test)
            return UNKNOWN if t is UNKNOWN else (self(node.body) if t else self(node.orelse))
        return UNKNOWN

    @staticmethod
    def _compare(op: ast.cmpop, a: Any, b: Any) -> Any:
        if isinstance(op, ast.Is | ast.IsNot):
            if a is None or b is None:
                if a is UNKNOWN or b is UNKNOWN:
                    return UNKNOWN
                return (a is b) == isinstance(op, ast.Is)
            return UNKNOWN
        if a is UNKNOWN or b is UNKNOWN:
            return UNKNOWN
        if isinstance(op, ast.In | ast.NotIn):
            if not isinstance(b, tuple) or UNKNOWN in b:
                return UNKNOWN
            return (a in b) == isinstance(op, ast.In)
        if isinstance(a, TensorView) or isinstance(b, TensorView):
            return UNKNOWN
        fn = {ast.Eq: lambda x, y: x == y, ast.NotEq: lambda x, y: x != y, ast.Lt: lambda x, y: x < y,
              ast.LtE: lambda x, y: x <= y, ast.Gt: lambda x, y: x > y, ast.GtE: lambda x, y: x >= y}.get(type(op))
        return bool(fn(a, b)) if fn is not None else UNKNOWN

    def _call(self, node: ast.Call) -> Any:
        if isinstance(node.func, ast.Attribute):
            recv = self(node.func.value)
            args = [self(a) for a in node.args]
            if isinstance(recv, TensorView):
                m = node.func.attr
                if m == "numel":
                    return recv.numel()
                if m == "dim":
                    return len(recv.shape)
                if m == "size":
                    return recv.shape if not args else (recv.shape[args[0]] if isinstance(args[0], int) else UNKNOWN)
                if m == "stride":
                    if recv.stride is None:
                        return UNKNOWN
                    return recv.stride if not args else (recv.stride[args[0]] if isinstance(args[0], int)
                                                         else UNKNOWN)
                if m == "is_contiguous" and not args and recv.stride is not None:
                    return recv.stride == _contiguous(recv.shape)
                if m == "element_size" and isinstance(recv.dtype, Dtype):
                    return recv.dtype.itemsize
                if m == "is_floating_point" and isinstance(recv.dtype, Dtype):
                    return recv.dtype.is_floating_point
                if m in ("contiguous", "clone", "detach", "cpu", "cuda", "requires_grad_") and not node.keywords:
                    return recv if m != "contiguous" else TensorView(recv.shape, recv.dtype, _contiguous(recv.shape))
                if m in _CASTS and not args:
                    return TensorView(recv.shape, Dtype(_CASTS[m]), recv.stride)
                if m == "to" and args and all(isinstance(a, Dtype) for a in args[:1]):
                    return TensorView(recv.shape, args[0], recv.stride)
                return UNKNOWN
        name = self.mod.dotted(node.func)
        fn: Any = _FUNCS.get(name or "")
        if fn is None or node.keywords:
            return UNKNOWN
        args = [self(a) for a in node.args]
        if any(a is UNKNOWN or isinstance(a, TensorView) for a in args):
            return UNKNOWN
        if name in ("min", "max") and len(args) == 1 and isinstance(args[0], tuple) and UNKNOWN in args[0]:
            return UNKNOWN
        return fn(*args)


def _contiguous(shape: tuple[Any, ...]) -> tuple[Any, ...] | None:
    if any(s is UNKNOWN for s in shape):
        return None
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= max(int(s), 1)
    return tuple(reversed(out))


def _module_constants(mod: SourceFile) -> dict[str, Any]:
    env: dict[str, Any] = {}
    for st in mod.tree.body:
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            v = _Eval(mod, env)(st.value)
            if v is not UNKNOWN and isinstance(v, int | float | bool | str | Dtype):
                env[st.targets[0].id] = v
        elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None:
            v = _Eval(mod, env)(st.value)
            if v is not UNKNOWN and isinstance(v, int | float | bool | str | Dtype):
                env[st.target.id] = v
    return env


def _bind(targets: list[ast.expr], value: Any, env: dict[str, Any]) -> None:
    for t in targets:
        if isinstance(t, ast.Name):
            env[t.id] = value
        elif isinstance(t, ast.Tuple | ast.List):
            vals = value if isinstance(value, tuple) and len(value) == len(t.elts) else [UNKNOWN] * len(t.elts)
            for sub, v in zip(t.elts, vals, strict=True):
                _bind([sub], v, env)


def _scope(mod: SourceFile, fn: ast.FunctionDef, line: int, args: dict[str, Any]) -> dict[str, Any]:
    """The names of ``fn`` at ``line``: its arguments, then its simple assignments before the
    line in source order; an assignment that does not always run on the way to the line (in a
    branch off its path), or of another form, leaves its names unknown."""
    env = {**_module_constants(mod), **args}
    path = [id(t) for t, _w in (_block_conds(fn.body, line) or [])]
    stmts = sorted((st for st in ast.walk(fn) if isinstance(st, ast.stmt) and st is not fn and st.lineno < line),
                   key=lambda st: (st.lineno, st.col_offset))
    for st in stmts:
        if isinstance(st, ast.Assign | ast.AugAssign | ast.AnnAssign):
            mine = [id(t) for t, _w in (_block_conds(fn.body, st.lineno) or [])]
            sure = mine == path[:len(mine)] and not isinstance(st, ast.AugAssign)
            value = getattr(st, "value", None)
            val = _Eval(mod, env)(value) if sure and value is not None else UNKNOWN
            _bind(st.targets if isinstance(st, ast.Assign) else [st.target], val, env)
        elif isinstance(st, ast.For | ast.AsyncFor | ast.With | ast.AsyncWith):
            for t in ast.walk(st.target if isinstance(st, ast.For | ast.AsyncFor) else st):
                if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store):
                    env[t.id] = UNKNOWN
    return env


def _params(fn: ast.FunctionDef) -> list[str]:
    return [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]


def evaluate(mod: SourceFile, guard: Guard, entry: ast.FunctionDef, inputs: list[Any]) -> Any:
    """Whether ``guard`` holds for a call of ``entry`` on ``inputs`` (``TensorView`` or
    values; :data:`UNKNOWN` where unknown): True, False or :data:`UNKNOWN`."""
    names = _params(entry)
    scopes: dict[int, dict[str, Any]] = {}
    args: dict[int, dict[str, Any]] = {id(entry): {n: (inputs[i] if i < len(inputs) else UNKNOWN)
                                                    for i, n in enumerate(names)}}
    for helper, call, caller in guard.calls:
        env = _scope(mod, caller, call.lineno, args.get(id(caller), {}))
        ev = _Eval(mod, env)
        bound = {n: UNKNOWN for n in _params(helper)}
        for n, a in zip(_params(helper), call.args, strict=False):
            bound[n] = ev(a)
        for kw in call.keywords:
            if kw.arg in bound:
                bound[kw.arg] = ev(kw.value)
        args[id(helper)] = bound
    result: Any = True
    for test, want, fn in guard.conds:
        key = id(fn) * 100003 + test.lineno
        if key not in scopes:
            scopes[key] = _scope(mod, fn, test.lineno, args.get(id(fn), {}))
        env = scopes[key]
        v = _Eval(mod, env)(test)
        if v is UNKNOWN:
            result = UNKNOWN
            continue
        if bool(v) != want:
            return False
    return result


def is_dead(mod: SourceFile, guard: Guard, entry: ast.FunctionDef) -> bool:
    """The guard is false whatever the inputs are (``if ... and False``)."""
    return evaluate(mod, guard, entry, []) is False


def never_for_dtypes(mod: SourceFile, guard: Guard, entry: ast.FunctionDef, model: InputModel,
                     dtypes: list[str]) -> bool:
    """The guard is false for inputs of every dtype of ``dtypes`` whatever their sizes (a
    branch for a dtype the task does not take)."""
    if not dtypes:
        return False
    for d in dtypes:
        inputs = []
        for rule in model.inputs:
            if rule[0] == "tensor":
                inputs.append(TensorView(tuple(UNKNOWN for _ in rule[1]), Dtype(d) if rule[2] == "case"
                                         else Dtype(rule[2])))
            else:
                inputs.append(UNKNOWN)
        if evaluate(mod, guard, entry, inputs) is not False:
            return False
    return True


def constants(guard: Guard, mod: SourceFile) -> set[int]:
    """The positive integer constants in the guard's tests (module constants resolved)."""
    out: set[int] = set()
    consts = _module_constants(mod)
    for test, _w, _f in guard.conds:
        for sub in ast.walk(test):
            v = sub.value if isinstance(sub, ast.Constant) else (consts.get(sub.id) if isinstance(sub, ast.Name)
                                                                 else None)
            if isinstance(v, int) and not isinstance(v, bool) and 0 < v < 1 << 40:
                out.add(v)
    return out


def dtypes_named(guard: Guard, mod: SourceFile) -> set[str]:
    """The torch dtypes the guard's tests name (``torch.float16`` -> ``"float16"``)."""
    out = set()
    for test, _w, _f in guard.conds:
        for sub in ast.walk(test):
            if isinstance(sub, ast.Attribute | ast.Name):
                d = _dtype_of(mod.dotted(sub))
                if d is not None:
                    out.add(d.name)
    return out


# ----------------------------------------------------------------------------- inputs of a case


@dataclass
class InputModel:
    """How each input of the declared cases follows the case (:func:`predict_inputs`)."""

    inputs: list[Any]  # per input: ("tensor", dims, dtype rule, contiguous) or ("value", rule)


def fit_inputs(cases: list[dict[str, Any]], described: list[list[InputDesc]]) -> InputModel | None:
    """Fit how the inputs follow the case from the declared cases and their inputs (module
    doc), or None when they do not line up (another number of inputs, another rank)."""
    if not described or any(len(d) != len(described[0]) for d in described):
        return None
    params = int_params(cases)
    model: list[Any] = []
    for j, first in enumerate(described[0]):
        col = [d[j] for d in described]
        if first.kind == "tensor":
            if any(c.kind != "tensor" or len(c.shape) != len(first.shape) for c in col):
                return None
            dims = [_fit_dim([int(c.shape[k]) for c in col], cases, params) for k in range(len(first.shape))]
            follows = all(c.dtype == str(cs.get("dtype")) for c, cs in zip(col, cases, strict=True))
            contiguous = all(c.contiguous for c in col)
            model.append(("tensor", dims, "case" if follows else first.dtype, contiguous))
        else:
            vals = [_literal(c.value) for c in col]
            p = next((p for p in params if all(v == cs[p] for v, cs in zip(vals, cases, strict=True))), None)
            model.append(("value", ("param", p) if p else ("const", vals[0] if len(set(map(repr, vals))) == 1
                                                           else UNKNOWN)))
    return InputModel(model)


def _literal(text: str | None) -> Any:
    try:
        return ast.literal_eval(text) if text else UNKNOWN
    except (ValueError, SyntaxError):
        return UNKNOWN


def _fit_dim(vals: list[int], cases: list[dict[str, Any]], params: list[str]) -> Any:
    for p in params:
        if all(v == int(c[p]) for v, c in zip(vals, cases, strict=True)):
            return ("param", p)
    for p, q in combinations(params, 2):
        if all(v == int(c[p]) * int(c[q]) for v, c in zip(vals, cases, strict=True)):
            return ("prod", p, q)
    if len(set(vals)) == 1:
        return ("const", vals[0])
    return ("unknown",)


def predict_inputs(model: InputModel, case: dict[str, Any]) -> list[Any]:
    """The inputs ``case`` would have, as :class:`TensorView` and values (:data:`UNKNOWN`
    where the fit does not say)."""
    out: list[Any] = []
    for rule in model.inputs:
        if rule[0] == "tensor":
            _t, dims, dtype, contiguous = rule
            shape = tuple(int(case[d[1]]) if d[0] == "param" else int(case[d[1]]) * int(case[d[2]]) if d[0] == "prod"
                          else d[1] if d[0] == "const" else UNKNOWN for d in dims)
            dt = Dtype(str(case.get("dtype"))) if dtype == "case" else Dtype(dtype)
            out.append(TensorView(shape, dt, _contiguous(shape) if contiguous else None))
        else:
            kind, v = rule[1]
            out.append(case.get(v, UNKNOWN) if kind == "param" else v)
    return out


# ----------------------------------------------------------------------------- search


def _values(spec: Any, consts: set[int], declared: int) -> list[int]:
    m = spec.multiple_of or 1
    raw: set[int] = set()
    for c in consts:
        raw |= {c - 1, c, c + 1, 2 * c, c // 2, c + m, max(c - m, 1), 3 * c // 2}
    r = ragged_value(declared + 1, spec)
    if r is not None:
        raw.add(r)
    raw |= {spec.min if spec.min is not None else 1, 1}
    out = set()
    for v in raw:
        for d in ("up", "down"):
            s = snap(max(v, 0), spec, d)
            if s is not None and spec.allows(s):
                out.add(s)
    return sorted(out)


def search(mod: SourceFile, guard: Guard, entry: ast.FunctionDef, task: Any, model: InputModel,
           bases: list[dict[str, Any]], cap_units: int) -> list[dict[str, Any]]:
    """Legal cases that satisfy ``guard`` (module doc), cheapest first, at most
    :data:`MAX_FOUND`; cases whose guard is unknown are left out."""
    params = int_params(bases)
    consts = constants(guard, mod)
    specs = {p: task.params.get(p, UNLISTED) for p in params}
    dtypes = list(dict.fromkeys([*(str(b.get("dtype")) for b in bases if "dtype" in b),
                                 *task.contract.dtypes]))
    named = dtypes_named(guard, mod)
    tries: list[dict[str, Any]] = []
    for base in bases:
        per = {p: _values(specs[p], consts, int(base[p])) for p in params}
        variants = [dict(base)]
        for p in params:
            variants += [{**base, p: v} for v in per[p]]
        for p, q in combinations(params, 2):
            variants += [{**base, p: v, q: w} for v in per[p] for w in per[q]]
        if "dtype" in base:
            for d in dtypes:
                if d != base["dtype"] and (d in named or not named):
                    variants += [{**v, "dtype": d} for v in variants[: 1 + sum(len(per[p]) for p in params)]]
        tries += variants
    seen: set[str] = set()
    found: list[tuple[int, dict[str, Any]]] = []
    for c in tries:
        key = repr(sorted(c.items()))
        if key in seen:
            continue
        seen.add(key)
        units = cost_units(c, params)
        if units > cap_units:
            continue
        if evaluate(mod, guard, entry, predict_inputs(model, c)) is True:
            found.append((units, c))
    found.sort(key=lambda uc: (uc[0], repr(sorted(uc[1].items()))))
    return [c for _u, c in found[:MAX_FOUND]]
