"""A Triton kernel's memory accesses as Z3 formulas, read from its TTIR text (the
``bounds-proof`` check's encoder).

:func:`parse_ttir` reads the text MLIR of one ``tt.func`` into an op tree (one op per line,
nested regions of ``scf.for``, ``scf.if`` and reductions kept as children).
:class:`Encoder` evaluates that tree symbolically, lane by lane: a tensor value of shape
``(d0, d1, ...)`` is a function from lane indices ``(l0, l1, ...)`` (``0 <= lk < dk``) to a
Z3 integer or Boolean term over the kernel's scalar arguments, the program ids and the
trip counters of the loops around it. ``tt.make_range``, ``tt.splat``, ``tt.expand_dims``,
``tt.broadcast``, ``tt.addptr``, the integer ``arith`` ops, ``arith.cmpi``, ``arith.select``,
``tt.get_program_id`` and ``tt.get_num_programs`` are followed exactly (integers are
mathematical: the i32 wrap-around is not modelled). Each ``tt.load`` / ``tt.store`` becomes
an :class:`Access`: its pointer's base argument, its element offset, its mask and the
guards of the ``scf.if`` branches and loops around it.

What the encoder does not follow it names (:class:`Unsupported`): an address that depends on
loaded data (gathers, indirect pointers), on a value carried around a loop other than a
constant-step induction (``p += BLOCK * stride``), on an op it does not model (``tt.reshape``,
``tt.trans`` of pointers, ``tt.join``...); atomics (``tt.atomic_rmw``, ``tt.atomic_cas``),
block pointers (``tt.make_tensor_ptr``, ``tt.advance``), tensor descriptors, calls
(``tt.call``). Loaded values and floating-point results are opaque: a mask that depends on
them (``x > 0``) becomes an uninterpreted Boolean function of the program ids, lanes and
loop counters, so the OOB question asks "for some data" and the coverage question asks
"is there data that leaves an element unwritten".
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any

import z3

_ARG = re.compile(r"%([\w.$-]+)\s*:\s*(!tt\.ptr<[^>]+>|i\d+|f\d+|bf16|f8\w*)")
_RES = re.compile(r"^(%[\w.$-]+(?::\d+)?(?:\s*,\s*%[\w.$-]+)*)\s*=\s*(.*)$")
_TENSOR = re.compile(r"tensor<((?:\d+x)*)([^>]+)>")
_INT_T = re.compile(r"^i(\d+)$")

#: ops whose every use in an address makes the access unsupported, with the construct's name.
UNSUPPORTED_OPS = {
    "tt.atomic_rmw": "atomics (tt.atomic_rmw)", "tt.atomic_cas": "atomics (tt.atomic_cas)",
    "tt.make_tensor_ptr": "block pointers (tt.make_tensor_ptr)", "tt.advance": "block pointers (tt.advance)",
    "tt.call": "a call to a non-inlined function (tt.call)", "tt.descriptor_load": "tensor descriptors",
    "tt.descriptor_store": "tensor descriptors", "tt.make_tensor_descriptor": "tensor descriptors",
    "tt.experimental_descriptor_load": "tensor descriptors", "tt.experimental_descriptor_store": "tensor descriptors",
    "tt.gather": "gathers (tt.gather)", "tt.scatter": "scatters",
}


class Unsupported(Exception):
    """A construct the encoder does not follow (message: which, and the source line)."""


def strip_loc(text: str) -> str:
    """``text`` without its MLIR ``loc(...)`` annotations (balanced parentheses)."""
    out, i = [], 0
    while True:
        j = text.find("loc(", i)
        if j < 0 or (j > 0 and (text[j - 1].isalnum() or text[j - 1] == "_")):
            if j < 0:
                out.append(text[i:])
                break
            out.append(text[i:j + 4])
            i = j + 4
            continue
        out.append(text[i:j])
        depth, k = 0, j + 3
        while k < len(text):
            if text[k] == "(":
                depth += 1
            elif text[k] == ")":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        i = k + 1
    return "".join(out).rstrip()


@dataclass
class Op:
    """One TTIR operation: its text (locations stripped), the source line it names, its
    nested regions."""

    text: str
    line: int | None = None
    regions: list[list[Op]] = field(default_factory=list)
    tail: str = ""

    @property
    def results(self) -> list[str]:
        m = _RES.match(self.text)
        if not m:
            return []
        names = [r.strip() for r in m.group(1).split(",")]
        if len(names) == 1 and ":" in names[0]:
            base, n = names[0].split(":")
            return [f"{base}#{i}" for i in range(int(n))]
        return names

    @property
    def body(self) -> str:
        m = _RES.match(self.text)
        return m.group(2) if m else self.text

    @property
    def name(self) -> str:
        b = self.body.strip()
        if b.startswith('"'):
            return b[1:].split('"', 1)[0]
        return b.split()[0] if b else ""


@dataclass
class Kernel:
    """A parsed ``tt.func``: its arguments (name, type) in order and its body."""

    name: str
    args: list[tuple[str, str]]
    body: list[Op]


def _src_line(raw: str, locs: dict[str, str]) -> int | None:
    m = re.search(r"loc\((#loc\d*)\)\s*$", raw.strip())
    seen = 0
    ref = m.group(1) if m else None
    while ref and seen < 20:
        d = locs.get(ref, "")
        m2 = re.search(r'"[^"]+":(\d+):\d+', d)
        if m2:
            return int(m2.group(1))
        m3 = re.search(r"#loc\d*", d)
        ref = m3.group(0) if m3 else None
        seen += 1
    m4 = re.search(r'loc\("[^"]+":(\d+):\d+\)', raw)
    return int(m4.group(1)) if m4 else None


def parse_ttir(text: str) -> Kernel:
    """The first public ``tt.func`` of a TTIR module text.

    Raises:
        Unsupported: no ``tt.func`` in the text.
    """
    lines = text.splitlines()
    locs = {}
    for ln in lines:
        m = re.match(r"^(#loc\d*)\s*=\s*loc\((.*)\)\s*$", ln.strip())
        if m:
            locs[m.group(1)] = m.group(2)
    start = next((i for i, ln in enumerate(lines) if ln.strip().startswith("tt.func")), None)
    if start is None:
        raise Unsupported("no tt.func in the TTIR")
    head = lines[start]
    name = re.search(r"@([\w$.]+)", head)
    args = [(m.group(1), m.group(2)) for m in _ARG.finditer(strip_loc(head.split("attributes")[0]))]
    pos = [start + 1]

    def block() -> list[Op]:
        ops: list[Op] = []
        while pos[0] < len(lines):
            raw = lines[pos[0]]
            s = strip_loc(raw.strip())
            if s.startswith("}"):
                return ops
            pos[0] += 1
            if not s or s.startswith("^bb"):
                continue
            op = Op(s, _src_line(raw, locs))
            if s.endswith("{"):
                while True:
                    op.regions.append(block())
                    if pos[0] >= len(lines):
                        break
                    close = strip_loc(lines[pos[0]].strip())
                    pos[0] += 1
                    if close.endswith("{"):  # } else {
                        continue
                    op.tail = close
                    break
            ops.append(op)
        return ops

    return Kernel(name.group(1) if name else "?", args, block())


def _shape(type_text: str) -> tuple[int, ...]:
    m = _TENSOR.search(type_text)
    if not m:
        return ()
    return tuple(int(d) for d in m.group(1).split("x") if d)


def _int_attr(pattern: str, body: str, op_name: str) -> int:
    """The integer the one group of ``pattern`` finds in an op's text."""
    m = re.search(pattern, body)
    if m is None:
        raise Unsupported(f"a {op_name} whose attribute kws cannot read")
    return int(m.group(1))


def _result_type(op: Op) -> str:
    b = op.body
    if "->" in b:
        return b.rsplit("->", 1)[1]
    if " : " in b:
        return b.rsplit(" : ", 1)[1]
    return ""


@dataclass
class Val:
    """A symbolic TTIR value: ``kind`` int / bool / ptr / data (opaque) / bad (cannot be
    followed: ``why``); ``fn(lanes)`` its term at lane indices ``lanes``; ``base`` the
    pointer argument of a ptr."""

    kind: str
    shape: tuple[int, ...]
    fn: Any = None
    base: str | None = None
    why: str = ""

    def at(self, lanes: list[Any]) -> Any:
        return self.fn(lanes)


@dataclass
class Access:
    """One ``tt.load`` (``kind`` load) or ``tt.store`` (store) of the kernel."""

    kind: str
    base: str
    shape: tuple[int, ...]
    offset: Any  # lanes -> Int
    mask: Any  # lanes -> Bool, or None
    guards: list[Any]  # Bools over the loop counters and scalars
    loops: list[tuple[Any, Any]]  # (counter, trip count)
    line: int | None
    text: str


class Encoder:
    """Evaluates a :class:`Kernel` symbolically (module doc). ``scalars``: the kernel's
    integer arguments by name (Z3 terms); ``grid``: the three grid sizes (Z3 terms).
    After :meth:`run`, ``accesses`` holds every load and store and ``unsupported`` the
    constructs that stopped an access from being followed (message, source line)."""

    def __init__(self, kernel: Kernel, scalars: dict[str, Any], grid: list[Any]):
        self.kernel = kernel
        self.pids = [z3.Int(f"pid_{a}") for a in "xyz"]
        self.grid = grid
        self.env: dict[str, Val] = {}
        for name, t in kernel.args:
            if t.startswith("!tt.ptr"):
                self.env[f"%{name}"] = Val("ptr", (), lambda _l: z3.IntVal(0), base=name)
            elif name in scalars:
                v = scalars[name]
                self.env[f"%{name}"] = Val("int", (), lambda _l, v=v: v)
            else:
                self.env[f"%{name}"] = Val("data", (), why=f"argument {name} of type {t}")
        self.accesses: list[Access] = []
        self.unsupported: list[str] = []
        self._guards: list[Any] = []
        self._loops: list[tuple[Any, Any]] = []
        self._record = True
        self._n = itertools.count()

    # -- helpers ------------------------------------------------------------------------

    def _ctx_vars(self) -> list[Any]:
        return [*self.pids, *(t for t, _ in self._loops)]

    def _databool(self, shape: tuple[int, ...], why: str) -> Val:
        k = next(self._n)
        ctx = self._ctx_vars()
        f = z3.Function(f"data{k}", *([z3.IntSort()] * (len(ctx) + len(shape))), z3.BoolSort())
        if not ctx and not shape:
            b = z3.Bool(f"data{k}")
            return Val("bool", shape, lambda _l: b, why=why)
        return Val("bool", shape, lambda lanes: f(*ctx, *lanes), why=why)

    def _operands(self, op: Op) -> list[str]:
        b = op.body
        b = b.split(" : ", 1)[0] if " : " in b else b
        return re.findall(r"%[\w.$-]+(?:#\d+)?", b)

    def _get(self, name: str) -> Val:
        if name not in self.env:
            return Val("bad", (), why=f"value {name} defined where the encoder could not see it")
        return self.env[name]

    def _set(self, op: Op, val: Val) -> None:
        for r in op.results:
            self.env[r] = val

    # -- evaluation ---------------------------------------------------------------------

    def run(self) -> Encoder:
        self._block(self.kernel.body)
        return self

    def _block(self, ops: list[Op]) -> None:
        for op in ops:
            try:
                self._op(op)
            except Unsupported as e:
                for r in op.results:
                    self.env[r] = Val("bad", (), why=str(e))
                if self._record and op.name in ("tt.load", "tt.store"):
                    self.unsupported.append(f"{e} (line {op.line})")

    def _op(self, op: Op) -> None:  # one dispatch on the op name
        name = op.name
        b = op.body
        ops = self._operands(op)
        shape = _shape(_result_type(op))
        if name in UNSUPPORTED_OPS:
            if self._record:
                self.unsupported.append(f"{UNSUPPORTED_OPS[name]} (line {op.line})")
            self._set(op, Val("bad", shape, why=UNSUPPORTED_OPS[name]))
            return
        if name == "arith.constant":
            m = re.search(r"(?:dense<)?(-?\d+|true|false)>?\s*:\s*(\S+)", b)
            if m and (_INT_T.match(m.group(2)) or re.search(r"x?i\d+>$", m.group(2))):
                v = m.group(1)
                if v in ("true", "false"):
                    c = z3.BoolVal(v == "true")
                    self._set(op, Val("bool", shape, lambda _l: c))
                else:
                    c = z3.IntVal(int(v))
                    bw = re.search(r"i(\d+)>?$", m.group(2))
                    if bw and bw.group(1) == "1":
                        cb = z3.BoolVal(int(v) != 0)
                        self._set(op, Val("bool", shape, lambda _l: cb))
                    else:
                        self._set(op, Val("int", shape, lambda _l: c))
            else:
                self._set(op, Val("data", shape, why="a floating-point constant"))
            return
        if name == "tt.get_program_id":
            ax = "xyz".index(b.split()[1])
            p = self.pids[ax]
            self._set(op, Val("int", (), lambda _l: p))
            return
        if name == "tt.get_num_programs":
            ax = "xyz".index(b.split()[1])
            g = self.grid[ax]
            self._set(op, Val("int", (), lambda _l: g))
            return
        if name == "tt.make_range":
            s = _int_attr(r"start\s*=\s*(-?\d+)", b, name)
            self._set(op, Val("int", shape, lambda lanes: lanes[0] + s))
            return
        if name == "tt.splat":
            src = self._get(ops[0])
            self._set(op, Val(src.kind, shape, lambda _l: src.at([]) if src.fn else None, base=src.base,
                              why=src.why))
            return
        if name == "tt.expand_dims":
            src = self._get(ops[0])
            ax = _int_attr(r"axis\s*=\s*(\d+)", b, name)
            self._set(op, Val(src.kind, shape, lambda lanes: src.at(lanes[:ax] + lanes[ax + 1:]) if src.fn else None,
                              base=src.base, why=src.why))
            return
        if name == "tt.broadcast":
            src = self._get(ops[0])
            sshape = _shape(b.split(" : ", 1)[1].split("->")[0])
            self._set(op, Val(src.kind, shape,
                              lambda lanes: src.at([z3.IntVal(0) if d == 1 else x for d, x in zip(sshape, lanes,
                                                                                                   strict=True)])
                              if src.fn else None, base=src.base, why=src.why))
            return
        if name == "tt.addptr":
            p, o = self._get(ops[0]), self._get(ops[1])
            if p.kind != "ptr":
                raise Unsupported(p.why or "a pointer the encoder could not follow")
            if o.kind != "int":
                raise Unsupported(self._why_index(o))
            self._set(op, Val("ptr", shape, lambda lanes: p.at(lanes) + o.at(lanes), base=p.base))
            return
        if name in ("arith.extsi", "arith.extui", "arith.trunci", "arith.index_cast", "arith.bitcast",
                    "tt.bitcast", "tt.int_to_ptr", "tt.ptr_to_int"):
            src = self._get(ops[0])
            kind = src.kind
            if name == "arith.trunci" and re.search(r"to\s+(?:tensor<[\dx]*)?i1\b", b):
                kind = "bad" if src.kind == "int" else src.kind
            if name in ("tt.int_to_ptr",):
                raise Unsupported("integer-to-pointer casts (tt.int_to_ptr)")
            self._set(op, Val(kind, shape or src.shape, src.fn, base=src.base, why=src.why))
            return
        if name == "arith.cmpi":
            pred = b.split()[1].rstrip(",")
            x, y = self._get(ops[0]), self._get(ops[1])
            if x.kind == "int" and y.kind == "int":
                f = {"slt": lambda a, c: a < c, "sle": lambda a, c: a <= c, "sgt": lambda a, c: a > c,
                     "sge": lambda a, c: a >= c, "ult": lambda a, c: a < c, "ule": lambda a, c: a <= c,
                     "ugt": lambda a, c: a > c, "uge": lambda a, c: a >= c, "eq": lambda a, c: a == c,
                     "ne": lambda a, c: a != c}[pred]
                self._set(op, Val("bool", shape, lambda lanes: f(x.at(lanes), y.at(lanes))))
            else:
                self._set(op, self._databool(shape, "a comparison of loaded or opaque values"))
            return
        if name == "arith.cmpf":
            self._set(op, self._databool(shape, "a floating-point comparison"))
            return
        if name in ("arith.andi", "arith.ori", "arith.xori"):
            x, y = self._get(ops[0]), self._get(ops[1])
            if x.kind == "bool" and y.kind == "bool":
                f = {"arith.andi": z3.And, "arith.ori": z3.Or, "arith.xori": z3.Xor}[name]
                self._set(op, Val("bool", shape, lambda lanes: f(x.at(lanes), y.at(lanes))))
            elif "bad" in (x.kind, y.kind):
                self._set(op, Val("bad", shape, why=x.why or y.why))
            else:
                self._set(op, Val("data", shape, why=f"bitwise {name} on integers"))
            return
        if name in ("arith.addi", "arith.subi", "arith.muli", "arith.divsi", "arith.divui", "arith.remsi",
                    "arith.remui", "arith.minsi", "arith.maxsi", "arith.minui", "arith.maxui", "arith.ceildivsi",
                    "arith.floordivsi"):
            x, y = self._get(ops[0]), self._get(ops[1])
            if x.kind == "int" and y.kind == "int":
                f = {"arith.addi": lambda a, c: a + c, "arith.subi": lambda a, c: a - c,
                     "arith.muli": lambda a, c: a * c, "arith.divsi": lambda a, c: a / c,
                     "arith.divui": lambda a, c: a / c, "arith.floordivsi": lambda a, c: a / c,
                     "arith.ceildivsi": lambda a, c: (a + c - 1) / c,
                     "arith.remsi": lambda a, c: a % c, "arith.remui": lambda a, c: a % c,
                     "arith.minsi": lambda a, c: z3.If(a < c, a, c), "arith.minui": lambda a, c: z3.If(a < c, a, c),
                     "arith.maxsi": lambda a, c: z3.If(a > c, a, c),
                     "arith.maxui": lambda a, c: z3.If(a > c, a, c)}[name]
                self._set(op, Val("int", shape, lambda lanes: f(x.at(lanes), y.at(lanes))))
            elif "bad" in (x.kind, y.kind):
                self._set(op, Val("bad", shape, why=x.why or y.why))
            else:
                self._set(op, Val("data", shape, why=(x.why if x.kind == "data" else y.why)))
            return
        if name == "arith.select":
            c, x, y = (self._get(o) for o in ops[:3])
            if c.kind == "bool" and x.kind == y.kind and x.kind in ("int", "bool") or (
                    c.kind == "bool" and x.kind == "ptr" and y.kind == "ptr" and x.base == y.base):
                self._set(op, Val(x.kind, shape, lambda lanes: z3.If(c.at(lanes), x.at(lanes), y.at(lanes)),
                                  base=x.base))
            elif "ptr" in (x.kind, y.kind):
                self._set(op, Val("bad", shape, why="a select between pointers of different buffers"))
            else:
                self._set(op, Val("data", shape, why="a select of opaque values"))
            return
        if name == "tt.load":
            self._access("load", op, ops)
            rt = _result_type(op)
            if "!tt.ptr" in rt:
                self._set(op, Val("bad", shape, why="indirect pointers (pointers loaded from memory)"))
            else:
                self._set(op, Val("data", shape, why=f"data-dependent indices (values loaded at line {op.line})"))
            return
        if name == "tt.store":
            self._access("store", op, ops)
            return
        if name == "scf.for":
            self._for(op)
            return
        if name == "scf.if":
            self._if(op)
            return
        if name in ("scf.yield", "tt.return", "tt.reduce.return", "tt.scan.return"):
            return
        # anything else (float math, tt.dot, reductions, reshapes...): opaque
        for r in op.results:
            self.env[r] = Val("data", shape, why=f"values computed by {name} (line {op.line})")
        if op.regions and name not in ("tt.reduce", "tt.scan"):
            for reg in op.regions:
                self._scan_region(reg, name)

    def _scan_region(self, ops: list[Op], name: str) -> None:
        """Memory ops inside a region the encoder does not model: unsupported."""
        for o in ops:
            if o.name in ("tt.load", "tt.store") and self._record:
                self.unsupported.append(f"a {o.name} inside {name} (line {o.line})")
            for reg in o.regions:
                self._scan_region(reg, name)

    def _why_index(self, o: Val) -> str:
        if o.kind == "data":
            return o.why if o.why.startswith("data-dependent") else f"an index computed from {o.why}"
        return o.why or "an index the encoder could not follow"

    def _access(self, kind: str, op: Op, ops: list[str]) -> None:
        p = self._get(ops[0])
        if p.kind != "ptr":
            raise Unsupported(p.why or "a pointer the encoder could not follow")
        shape = p.shape
        mask = None
        midx = 1 if kind == "load" else 2
        if len(ops) > midx:
            m = self._get(ops[midx])
            if m.kind != "bool":
                raise Unsupported(m.why or "a mask the encoder could not follow")
            mask = m.fn
        if self._record:
            self.accesses.append(Access(kind, p.base or "?", shape, p.fn, mask, list(self._guards),
                                        list(self._loops), op.line, op.text[:160]))

    def _for(self, op: Op) -> None:
        m = re.search(r"scf\.for\s+(%[\w.$-]+)\s*=\s*(%[\w.$-]+)\s+to\s+(%[\w.$-]+)\s+step\s+(%[\w.$-]+)", op.body)
        if not m:
            raise Unsupported("a loop the encoder could not read")
        iv, lb, ub, st = m.group(1), self._get(m.group(2)), self._get(m.group(3)), self._get(m.group(4))
        inits = re.findall(r"(%[\w.$-]+)\s*=\s*(%[\w.$-]+)", op.body.split("iter_args", 1)[1]) if "iter_args" in op.body \
            else []
        body = op.regions[0]
        results = op.results
        if not all(v.kind == "int" for v in (lb, ub, st)):
            # trip count unknown: accesses in the body depend on it
            for a, _ in inits:
                self.env[a] = Val("data", (), why="a loop with a data-dependent trip count")
            self.env[iv] = Val("bad", (), why="a loop with a data-dependent trip count")
            self._block_guarded(body, [])
            for r in results:
                self.env[r] = Val("data", (), why="a loop with a data-dependent trip count")
            return
        k = next(self._n)
        t = z3.Int(f"t{k}")
        lbv, ubv, stv = lb.at([]), ub.at([]), st.at([])
        trip = z3.If(ubv > lbv, (ubv - lbv + stv - 1) / stv, 0)
        yields = next((o for o in reversed(body) if o.name == "scf.yield"), None)
        yops = self._operands(yields) if yields else []
        # pass 1: iter args opaque, to find constant-step inductions
        saved, self._record = self._record, False
        for a, init in inits:
            self.env[a] = Val("data", self._get(init).shape, why="a value carried around a loop")
        self._loops.append((t, trip))
        self.env[iv] = Val("int", (), lambda _l: lbv + t * stv)
        self._block(body)
        steps: dict[str, Val | None] = {}
        defs = {r: o for o in body for r in o.results}
        for (a, _init), y in zip(inits, yops, strict=False):
            steps[a] = None
            if y == a:
                steps[a] = Val("int", (), lambda _l: z3.IntVal(0))
                continue
            d = defs.get(y)
            if d is None or d.name not in ("tt.addptr", "arith.addi"):
                continue
            xs = self._operands(d)
            if len(xs) != 2 or a not in xs:
                continue
            step = self._get(xs[1] if xs[0] == a else xs[0])
            if step.kind == "int" and not _mentions(step, t, d):
                steps[a] = step
        self._record = saved
        # pass 2: inductions in closed form
        for a, init in inits:
            iv0, inc = self._get(init), steps.get(a)
            if inc is not None and iv0.kind in ("int", "ptr"):
                self.env[a] = Val(iv0.kind, iv0.shape, lambda lanes, i0=iv0, s=inc: i0.at(lanes) + t * s.at(lanes),
                                  base=iv0.base)
            else:
                self.env[a] = Val("data", iv0.shape, why="a value carried around a loop that is not a constant-step "
                                                         "induction")
        self._block(body)
        self._loops.pop()
        for r, (a, init) in zip(results, inits, strict=False):
            iv0, inc = self._get(init), steps.get(a)
            if inc is not None and iv0.kind in ("int", "ptr"):
                self.env[r] = Val(iv0.kind, iv0.shape, lambda lanes, i0=iv0, s=inc: i0.at(lanes) + trip * s.at(lanes),
                                  base=iv0.base)
            else:
                self.env[r] = Val("data", iv0.shape, why="a loop result")

    def _block_guarded(self, body: list[Op], guards: list[Any]) -> None:
        self._guards.extend(guards)
        try:
            self._block(body)
        finally:
            del self._guards[len(self._guards) - len(guards):]

    def _if(self, op: Op) -> None:
        c = self._get(self._operands(op)[0])
        if c.kind == "bool" and not c.shape:
            cond = c.at([])
        else:
            cond = self._databool((), "a data-dependent branch").at([])
        self._block_guarded(op.regions[0], [cond])
        if len(op.regions) > 1:
            self._block_guarded(op.regions[1], [z3.Not(cond)])
        for r in op.results:
            self.env[r] = Val("data", (), why=f"a result of scf.if (line {op.line})")


def _mentions(v: Val, t: Any, op: Op) -> bool:
    """Does the step ``v`` of a loop induction depend on the loop counter ``t``?"""
    lanes = [z3.Int(f"_chk{i}") for i in range(len(_shape(_result_type(op))) or 0)]
    try:
        term = v.at(lanes)
    except Exception:  # noqa: BLE001  (a step the encoder cannot evaluate per lane: assumed to depend on t, the safe side)
        return True
    return any(z3.eq(x, t) for x in _vars(term))


def _vars(term: Any) -> list[Any]:
    out, seen, stack = [], set(), [term]
    while stack:
        e = stack.pop()
        if e.get_id() in seen:
            continue
        seen.add(e.get_id())
        if z3.is_const(e) and e.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            out.append(e)
        stack.extend(e.children())
    return out


def lane_vars(shape: tuple[int, ...], tag: str) -> tuple[list[Any], list[Any]]:
    """Fresh lane indices for ``shape`` and their range constraints."""
    lanes = [z3.Int(f"{tag}_l{i}") for i in range(len(shape))]
    return lanes, [z3.And(x >= 0, x < d) for x, d in zip(lanes, shape, strict=True)]


def fresh_access(a: Access, enc: Encoder, tag: str) -> tuple[dict[str, Any], list[Any]]:
    """An access instantiated on fresh lanes, program ids and loop counters: ``(terms,
    constraints)``; ``terms`` has ``offset``, ``mask`` (True when unmasked), ``vars`` (the
    fresh variables, for a universal quantifier)."""
    lanes, cons = lane_vars(a.shape, tag)
    pids = [z3.Int(f"{tag}_pid{i}") for i in range(3)]
    loops = [(z3.Int(f"{tag}_t{i}"), trip) for i, (_, trip) in enumerate(a.loops)]
    sub = [(p, q) for p, q in zip(enc.pids, pids, strict=True)] + [(o, n) for (o, _), (n, _) in
                                                                    zip(a.loops, loops, strict=True)]
    off = z3.substitute(a.offset(lanes), *sub) if sub else a.offset(lanes)
    mask = z3.substitute(a.mask(lanes), *sub) if a.mask else z3.BoolVal(True)
    cons = list(cons)
    cons += [z3.And(p >= 0, p < g) for p, g in zip(pids, enc.grid, strict=True)]
    # a loop's trip count may itself mention outer loop counters
    cons += [z3.And(t >= 0, t < z3.substitute(trip, *sub) if sub else trip) for t, trip in loops]
    cons += [z3.substitute(g, *sub) if sub else g for g in a.guards]
    return {"offset": off, "mask": mask, "vars": [*lanes, *pids, *(t for t, _ in loops)]}, cons
