"""Host launch arithmetic of a CUDA source: ``kernel<<<grid, block>>>`` as expressions of the
task's ``[params]``, and whether the grid covers the data at every legal size.

:func:`launch_sites` finds each ``name<<<grid, block, ...>>>`` (a bracket-balanced scan: the
triple-chevron launch is CUDA's, no C parser reads it) and resolves ``grid``/``block`` to one
expression per dimension: ``dim3 g(a, b)`` / ``dim3 g = dim3(a, b)`` / ``dim3 g{a, b}``
declarations, inline ``dim3(...)``, or a plain integer expression. Each expression is parsed
with pycparser (a C99 parser; ``static_cast<T>(x)`` is read as ``(x)``) and its identifiers
resolved through ``#define``s and local ``int``/``const``/``auto`` definitions in the source;
an identifier that names a task parameter (exactly, else case-insensitively) stays symbolic.

:func:`coverage` judges one grid dimension of the form ``E`` containing an integer division
``S' / D`` by a constant ``D``: the blocks ``E`` times the ``D`` elements each block covers
must reach ``S`` (``S'`` without its constant addends, e.g. ``n`` for ``(n + 255) / 256``)
at every legal value of the parameters in ``S``, enumerated near each end of its range and
around multiples of powers of two (:func:`legal_values`). The first size where
``E * D < S`` is the counterexample (``n / 256`` blocks at ``n = 257``: 256 of 257 covered).
C integer division truncates toward zero.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from workstation.task.model import ParamSpec

#: values tried per parameter near each end of its legal range.
EDGE = 600
#: parameter combinations tried at most for one grid expression.
MAX_COMBOS = 20000


class Unresolved(ValueError):
    """An identifier or construct the launch reading cannot evaluate."""


def _balanced(text: str, start: int, open_: str, close: str) -> int:
    """The index just past the ``close`` matching the ``open_`` at ``start``."""
    lvl = 0
    for k in range(start, len(text)):
        if text.startswith(open_, k):
            lvl += 1
        elif text.startswith(close, k):
            lvl -= 1
            if lvl == 0:
                return k + len(close)
    return len(text)


def split_top(s: str) -> list[str]:
    """The comma-separated parts of ``s`` at bracket depth 0, stripped (empty trailing part dropped)."""
    out, buf, lvl = [], "", 0
    for ch in s:
        if ch in "([{":
            lvl += 1
        elif ch in ")]}":
            lvl -= 1
        if ch == "," and lvl == 0:
            out.append(buf.strip())
            buf = ""
        else:
            buf += ch
    if buf.strip():
        out.append(buf.strip())
    return out


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def launch_sites(text: str) -> list[dict[str, Any]]:
    """Each ``<<<...>>>`` launch: ``kernel``, ``line`` (1-based), ``grid`` and ``block`` (the
    argument texts) and ``grid_dims``/``block_dims`` (one expression text per dimension)."""
    src = _strip_comments(text)
    out = []
    for m in re.finditer(r"([A-Za-z_]\w*)\s*(?:<[^<>;]*>)?\s*<<<", src):
        end = src.find(">>>", m.end())
        if end < 0:
            continue
        args = split_top(src[m.end():end])
        if len(args) < 2:
            continue
        before = src[:m.start()]
        out.append({"kernel": m.group(1), "line": before.count("\n") + 1, "grid": args[0], "block": args[1],
                    "grid_dims": _dims(args[0], before), "block_dims": _dims(args[1], before)})
    return out


def _dims(arg: str, before: str) -> list[str]:
    a = arg.strip()
    m = re.fullmatch(r"dim3\s*[({](.*)[)}]", a, re.S)
    if m:
        return split_top(m.group(1))
    if re.fullmatch(r"[A-Za-z_]\w*", a):
        decl = None
        for d in re.finditer(r"\bdim3\s+" + re.escape(a) + r"\s*(?:=\s*dim3\s*)?([({])", before):
            decl = d
        if decl is not None:
            close = ")" if decl.group(1) == "(" else "}"
            end = _balanced(before, decl.start(1), decl.group(1), close)
            return split_top(before[decl.start(1) + 1:end - 1])
    return [a]


def _definitions(text: str) -> dict[str, str]:
    src = _strip_comments(text)
    out: dict[str, str] = {}
    for m in re.finditer(r"^\s*#\s*define\s+(\w+)\s+([^\n]+)$", src, re.M):
        out[m.group(1)] = m.group(2).strip()
    typ = r"(?:const\s+|constexpr\s+|static\s+)*(?:unsigned\s+|signed\s+)?(?:int|long\s+long|long|size_t|int64_t|" \
          r"int32_t|uint32_t|uint64_t|unsigned|auto)"
    for m in re.finditer(rf"\b{typ}\s+([A-Za-z_]\w*)\s*=\s*([^;{{}}]+);", src):
        out.setdefault(m.group(1), m.group(2).strip())
    return out


def _cparse(expr: str) -> Any:
    from pycparser import c_parser

    e = re.sub(r"\bstatic_cast\s*<[^<>]*>", "", expr)
    e = re.sub(r"\bstd::", "", e)
    e = re.sub(r"(\d)(?:[uUlL]+)\b", r"\1", e)
    try:
        ast = c_parser.CParser().parse(f"int __kws(void) {{ return ({e}); }}")
    except Exception as ex:  # pycparser raises its own ParseError and AssertionErrors
        raise Unresolved(f"not a C expression: {expr!r} ({type(ex).__name__})") from ex
    return ast.ext[0].body.block_items[0].expr


class Expr:
    """One launch expression parsed, with its identifiers bound to definitions or parameters."""

    def __init__(self, text: str, defs: dict[str, str], params: dict[str, ParamSpec]):
        self.text = text
        self.defs = defs
        self.pmap = {}
        for p in params:
            self.pmap[p] = p
        for p in params:
            self.pmap.setdefault(p.lower(), p)
        self.ast = _cparse(text)
        self.used: set[str] = set()
        self._walk_ids(self.ast, 0)

    def _param(self, name: str) -> str | None:
        return self.pmap.get(name) or self.pmap.get(name.lower())

    def _walk_ids(self, node: Any, depth: int) -> None:
        from pycparser import c_ast

        if isinstance(node, c_ast.ID):
            p = self._param(node.name)
            if p is not None:
                self.used.add(p)
            elif node.name in self.defs and depth < 8:
                self._walk_ids(_cparse(self.defs[node.name]), depth + 1)
            else:
                raise Unresolved(f"{node.name!r} is neither a task parameter nor defined in the source")
            return
        if isinstance(node, c_ast.FuncCall):
            name = node.name.name if isinstance(node.name, c_ast.ID) else ""
            if name not in ("min", "max"):
                from pycparser import c_generator

                callee = c_generator.CGenerator().visit(node.name) or "?"
                raise Unresolved(f"a call to {callee}() in {self.text!r}")
            for a in node.args.exprs:
                self._walk_ids(a, depth)
            return
        for _, c in node.children():
            if not isinstance(c, c_ast.Typename):
                self._walk_ids(c, depth)

    def value(self, env: dict[str, int], node: Any = None, depth: int = 0) -> int:
        from pycparser import c_ast

        n = self.ast if node is None else node
        if isinstance(n, c_ast.Constant):
            v = n.value.rstrip("uUlL")
            return int(v, 0) if n.type in ("int", "unsigned int", "long int", "unsigned long int") or \
                v.isdigit() else int(float(v))
        if isinstance(n, c_ast.ID):
            p = self._param(n.name)
            if p is not None:
                return env[p]
            return self.value(env, _cparse(self.defs[n.name]), depth + 1)
        if isinstance(n, c_ast.Cast):
            return self.value(env, n.expr, depth)
        if isinstance(n, c_ast.UnaryOp):
            v = self.value(env, n.expr, depth)
            return {"-": -v, "+": v, "!": int(not v), "~": ~v}.get(n.op, v)
        if isinstance(n, c_ast.TernaryOp):
            return self.value(env, n.iftrue if self.value(env, n.cond) else n.iffalse, depth)
        if isinstance(n, c_ast.FuncCall):
            vals = [self.value(env, a, depth) for a in n.args.exprs]
            return min(vals) if n.name.name == "min" else max(vals)
        if isinstance(n, c_ast.BinaryOp):
            a, b = self.value(env, n.left, depth), self.value(env, n.right, depth)
            return _binop(n.op, a, b)
        raise Unresolved(f"{type(n).__name__} in {self.text!r}")

    def division(self) -> tuple[Any, int] | None:
        """The first integer division by a constant whose numerator uses a parameter:
        (numerator node, divisor)."""
        from pycparser import c_ast

        stack = [self.ast]
        while stack:
            n = stack.pop(0)
            if isinstance(n, c_ast.ID) and not self._param(n.name) and n.name in self.defs:
                stack.append(_cparse(self.defs[n.name]))
                continue
            if isinstance(n, c_ast.BinaryOp) and n.op == "/":
                try:
                    d = self.value({}, n.right)
                except (KeyError, Unresolved):
                    d = None
                if d and d > 0 and self._uses_param(n.left):
                    return n.left, d
            stack.extend(c for _, c in n.children())
        return None

    def _uses_param(self, node: Any, depth: int = 0) -> bool:
        from pycparser import c_ast

        if isinstance(node, c_ast.ID):
            if self._param(node.name):
                return True
            return node.name in self.defs and depth < 8 and self._uses_param(_cparse(self.defs[node.name]), depth + 1)
        return any(self._uses_param(c, depth) for _, c in node.children())

    def size_of(self, num: Any) -> Any:
        """``num`` without its top-level constant addends (module doc)."""
        from pycparser import c_ast

        if isinstance(num, c_ast.BinaryOp) and num.op in ("+", "-"):
            if not self._uses_param(num.right):
                return self.size_of(num.left)
            if num.op == "+" and not self._uses_param(num.left):
                return self.size_of(num.right)
        return num


def _binop(op: str, a: int, b: int) -> int:
    if op in ("/", "%"):
        if b == 0:
            raise ZeroDivisionError("division by zero in the launch expression")
        q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
        return q if op == "/" else a - q * b
    return {"+": a + b, "-": a - b, "*": a * b, "<<": a << b if b >= 0 else 0, ">>": a >> b if b >= 0 else 0,
            "&": a & b, "|": a | b, "^": a ^ b, "<": int(a < b), ">": int(a > b), "<=": int(a <= b),
            ">=": int(a >= b), "==": int(a == b), "!=": int(a != b), "&&": int(bool(a and b)),
            "||": int(bool(a or b))}[op]


def legal_values(spec: ParamSpec, edge: int = EDGE) -> list[int]:
    """Legal values of one parameter worth trying, ascending: every choice; else the first and
    last ``edge`` legal values of the range and the multiples of powers of two (up to 2**20)
    and their neighbours in it."""
    if spec.choices is not None:
        return sorted(c for c in spec.choices if isinstance(c, int) and not isinstance(c, bool))
    lo = spec.min if spec.min is not None else 1
    hi = spec.max if spec.max is not None else max(lo, 1) + 2 ** 20
    vals = set(range(lo, min(hi, lo + edge) + 1)) | set(range(max(lo, hi - edge), hi + 1))
    for j in range(4, 21):
        for k in (1, 2, 3, 5, 7):
            for d in (-1, 0, 1):
                v = k * 2 ** j + d
                if lo <= v <= hi:
                    vals.add(v)
    return sorted(v for v in vals if spec.allows(v))


def coverage(expr: Expr, params: dict[str, ParamSpec], fixed: dict[str, int]) -> dict[str, Any]:
    """Whether ``expr`` (one grid dimension) covers its size at every tried legal value
    (module doc). ``fixed`` holds a declared case's values for parameters outside the size.
    Returns ``{"form": ..., "divisor": D, "size": S text, "tried": n, "counterexample":
    {param: value, "blocks": E, "covered": E*D, "size": S} or None}``, or ``{"form": None}``
    when the expression has no division by a constant of a parameter expression."""
    from pycparser import c_generator

    div = expr.division()
    if div is None:
        return {"form": None}
    num, d = div
    size = expr.size_of(num)
    gen = c_generator.CGenerator()
    names = sorted(expr.used)
    per = [legal_values(params[n]) for n in names]
    if len(names) > 1:
        per = [v[:40] + v[-40:] if len(v) > 80 else v for v in per]
    tried = 0
    for combo in itertools.islice(itertools.product(*per), MAX_COMBOS):
        env = {**fixed, **dict(zip(names, combo, strict=True))}
        tried += 1
        try:
            blocks, need = expr.value(env), expr.value(env, size)
        except (ZeroDivisionError, KeyError):
            continue
        if blocks * d < need:
            return {"form": "division", "divisor": d, "size": gen.visit(size), "tried": tried,
                    "counterexample": {**dict(zip(names, combo, strict=True)), "blocks": blocks,
                                       "covered": blocks * d, "size": need}}
    return {"form": "division", "divisor": d, "size": gen.visit(size), "tried": tried, "counterexample": None}


def read_launches(texts: list[str], params: dict[str, ParamSpec], fixed: dict[str, int]) -> list[dict[str, Any]]:
    """Every launch site of ``texts`` (the CUDA and C++ sources) with each grid dimension's
    coverage, or why it was not read (``unresolved``)."""
    out = []
    for text in texts:
        defs = _definitions(text)
        for site in launch_sites(text):
            dims = []
            for k, g in enumerate(site["grid_dims"]):
                rec: dict[str, Any] = {"dim": "xyz"[k] if k < 3 else str(k), "expr": g}
                try:
                    e = Expr(g, defs, params)
                    rec["params"] = sorted(e.used)
                    rec.update(coverage(e, params, fixed) if e.used else {"form": "constant"})
                except (Unresolved, ImportError) as ex:
                    rec["unresolved"] = str(ex)
                dims.append(rec)
            out.append({**site, "dims": dims})
    return out
