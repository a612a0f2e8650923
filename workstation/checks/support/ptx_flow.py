"""Reading one PTX kernel as a program: instructions, source lines, data flow, control flow.

``cuda-build`` gets each kernel's PTX (compiled with ``-lineinfo``, so ``.loc`` directives
name the CUDA source line of every instruction) and asks four questions of it:

- :func:`bounds_guards`: does every global load/store whose address is derived from the
  thread index (``%tid``/``%ctaid``/``%laneid``) lie behind a comparison of a thread-derived
  value against a kernel-parameter-derived one (``setp.lt/le/gt/ge/lo/ls/hi/hs`` with one
  operand derived from ``%tid``/``%ctaid`` and the other from ``ld.param`` only)? Data flow
  is flow-insensitive taint over the PTX registers; control flow is the kernel's basic
  blocks: an access is guarded when no path from the entry reaches it without taking the
  in-bounds edge of such a comparison (or the access is predicated on one). A branch on
  ``setp.eq``/``setp.ne`` (the 32/64-bit split nvcc emits for ``i % n``) is not a guard.
- :func:`shared_races`: a ``st.shared`` to a per-thread address (derived from the thread
  index) followed, in program order with no barrier between (``bar``/``barrier``,
  ``bar.warp.sync``, ``mbarrier`` waits), by an ``ld.shared`` of a different address: the
  load reads a slot another thread writes, with nothing ordering the two (compute-sanitizer
  ``racecheck``'s read-after-write hazard). Program order is the PTX's linear order with
  each loop body scanned twice (the wrap from one iteration to the next).
- :func:`approx_ops`: instructions with ``.approx`` (``ex2``, ``lg2``, ``sin``, ``cos``,
  ``rcp``, ``rsqrt``, ``sqrt``, ``div``, ``tanh``) and ``.ftz`` arithmetic.
- :func:`accumulation_loops`: for instructions inside a loop (a backward branch), the loop's
  exit comparison, the induction step and the bound's kernel parameter: how many times one
  thread goes round.

A reading of the PTX, not of what ptxas makes of it; pure text processing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from workstation.checks.support.cuda_launch import split_top

INDEX_REGS = ("%tid.", "%ctaid.", "%laneid")
_ORDER = {"lt", "le", "gt", "ge", "lo", "ls", "hi", "hs", "ltu", "leu", "gtu", "geu"}
#: comparisons whose true side is "index below the bound" when the index is the first operand.
_BELOW = {"lt", "le", "lo", "ls", "ltu", "leu"}
_REG = re.compile(r"%[\w.]+")
_LOC = re.compile(r"^\.loc\s+(\d+)\s+(\d+)\s+\d+(?:.*inlined_at\s+(\d+)\s+(\d+))?")
_LABEL = re.compile(r"^(\$?[\w$]+):")
_FILE = re.compile(r'^\.file\s+(\d+)\s+"([^"]+)"')


@dataclass
class PInstr:
    """One PTX instruction: index, guard predicate (``%p1``, ``!%p1`` or ``""``), opcode with
    its suffixes, operands, the CUDA source line (0 when unknown) and the text."""

    idx: int
    pred: str
    op: str
    args: list[str]
    line: int
    text: str

    @property
    def base(self) -> str:
        return self.op.split(".")[0]

    def dest(self) -> list[str]:
        if self.base in ("st", "bar", "barrier", "bra", "ret", "exit", "red", "prefetch", "cp", "membar", "fence") \
                or not self.args:
            return []
        return _REG.findall(self.args[0].replace("|", ","))

    def srcs(self) -> list[str]:
        start = 0 if self.base in ("st", "red", "bra") else 1
        return [r for a in self.args[start:] for r in _REG.findall(a)]

    def address(self) -> tuple[str, int] | None:
        """The ``[reg+off]`` operand as (base, offset)."""
        for a in self.args:
            m = re.match(r"^\[\s*([%\w$.]+)\s*(?:\+\s*(-?\d+))?\s*\]$", a.strip())
            if m:
                return m.group(1), int(m.group(2) or 0)
        return None


@dataclass
class PtxProgram:
    """One kernel's instructions, labels and register definitions."""

    name: str
    instrs: list[PInstr] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)
    defs: dict[str, list[int]] = field(default_factory=dict)
    params: dict[str, int] = field(default_factory=dict)

    def tainted(self, seeds: Any) -> set[str]:
        """Registers whose value derives (flow-insensitively) from an instruction for which
        ``seeds(instr)`` is true or from a special register in ``seeds`` (a tuple)."""
        out: set[str] = set()
        changed = True
        while changed:
            changed = False
            for i in self.instrs:
                ds = i.dest()
                if not ds or all(d in out for d in ds):
                    continue
                src = i.srcs()
                hit = (seeds(i) if callable(seeds) else any(s.startswith(seeds) for s in src)) or \
                    any(s in out for s in src)
                if hit:
                    out.update(ds)
                    changed = True
        return out

    def expr(self, reg: str, depth: int = 0) -> str:
        """A canonical expression of ``reg``: its single definition expanded, or the register."""
        d = self.defs.get(reg, [])
        if len(d) != 1 or depth > 12:
            return reg
        i = self.instrs[d[0]]
        return f"{i.op}(" + ",".join(self.expr(a, depth + 1) if a.startswith("%") else a
                                     for a in (x.strip() for x in i.args[1:])) + ")"

    def loops(self) -> list[tuple[int, int]]:
        """(first, last) instruction indices of backward branches' bodies."""
        out = []
        for i in self.instrs:
            if i.base == "bra":
                t = self.labels.get(i.args[0].strip()) if i.args else None
                if t is not None and t <= i.idx:
                    out.append((t, i.idx))
        return out


def parse_ptx(ptx: str, source_file: str = "") -> dict[str, PtxProgram]:
    """Per ``.entry`` (mangled name) its program. Source lines come from ``.loc`` of the file
    whose name ends with ``source_file`` (file 1 when none does), or its ``inlined_at``."""
    files = {m.group(1): m.group(2) for m in (_FILE.match(ln.strip()) for ln in ptx.splitlines()) if m}
    main = next((k for k, v in files.items() if source_file and v.endswith(source_file)), "1")
    out: dict[str, PtxProgram] = {}
    cur: PtxProgram | None = None
    depth, line, in_params = 0, 0, False
    for raw in ptx.splitlines():
        s = raw.strip()
        m = re.search(r"\.entry\s+([\w$]+)", s)
        if m:
            cur = out.setdefault(m.group(1), PtxProgram(m.group(1)))
            depth, line, in_params = 0, 0, True
            continue
        if cur is None:
            continue
        if in_params:
            pm = re.search(r"\.param\s+\S+\s+(?:\.\w+\s+)*([\w$]+_param_(\d+))", s)
            if pm:
                cur.params[pm.group(1)] = int(pm.group(2))
            if s.startswith(")"):
                in_params = False
        depth += s.count("{") - s.count("}")
        lm = _LOC.match(s)
        if lm:
            if lm.group(1) == main:
                line = int(lm.group(2))
            elif lm.group(3) == main:
                line = int(lm.group(4))
        else:
            body = s.strip("{} \t")
            for part in (p.strip() for p in body.split(";")):
                if not part or part.startswith(("//", ".")):
                    continue
                lab = _LABEL.match(part)
                if lab:
                    cur.labels[lab.group(1)] = len(cur.instrs)
                    continue
                pm2 = re.match(r"^@(!?%\w+)\s+(.*)$", part)
                pred, rest = (pm2.group(1), pm2.group(2)) if pm2 else ("", part)
                sp = rest.split(None, 1)
                if not sp or not re.match(r"^[a-z]", sp[0]):
                    continue
                args = split_top(sp[1]) if len(sp) > 1 else []
                ins = PInstr(len(cur.instrs), pred, sp[0], args, line, " ".join(part.split())[:160])
                for d in ins.dest():
                    cur.defs.setdefault(d, []).append(ins.idx)
                cur.instrs.append(ins)
        if depth <= 0 and "}" in s and not in_params:
            cur = None
    return out


# -- bounds guards ---------------------------------------------------------------------


def _guard_preds(p: PtxProgram, idx: set[str], par: set[str]) -> dict[str, bool]:
    """Predicate registers that compare an index against a bound: reg -> True when the
    predicate is true on the in-bounds side (index below the bound)."""
    g: dict[str, bool] = {}
    for i in p.instrs:
        if i.base == "setp" and len(i.args) >= 3:
            cmp = i.op.split(".")[1] if "." in i.op else ""
            if cmp not in _ORDER:
                continue
            a, b = (_REG.findall(x) for x in i.args[1:3])
            a_idx, b_idx = any(r in idx for r in a), any(r in idx for r in b)
            a_par = bool(a) and all(r in par and r not in idx for r in a)
            b_par = bool(b) and all(r in par and r not in idx for r in b)
            for d in i.dest()[:1]:
                if a_idx and b_par:
                    g[d] = cmp in _BELOW
                elif b_idx and a_par:
                    g[d] = cmp not in _BELOW
    changed = True
    while changed:
        changed = False
        for i in p.instrs:
            ds = i.dest()
            if not ds or ds[0] in g or i.op not in ("and.pred", "or.pred", "not.pred"):
                continue
            srcs = [s for s in i.srcs() if s in g]
            if i.op == "not.pred" and srcs:
                g[ds[0]] = not g[srcs[0]]
            elif i.op == "and.pred" and any(g[s] for s in srcs):
                g[ds[0]] = True
            elif i.op == "or.pred" and any(not g[s] for s in srcs):
                g[ds[0]] = False
            else:
                continue
            changed = True
    return g


def _in_bounds_when(pred: str, g: dict[str, bool]) -> bool | None:
    """Whether an instruction predicated ``@pred`` runs only on the in-bounds side (True),
    only on the out-of-bounds side (False), or is not a guard (None)."""
    neg = pred.startswith("!")
    r = pred.lstrip("!")
    if r not in g:
        return None
    return g[r] != neg


def bounds_guards(p: PtxProgram) -> dict[str, Any]:
    """Global accesses indexed by the thread and whether a bounds comparison guards each
    (module doc). Returns counts, the unguarded accesses (PTX text and source line) and the
    guard comparisons found."""
    idx = p.tainted(INDEX_REGS)
    par = p.tainted(lambda i: i.op.startswith("ld.param"))
    g = _guard_preds(p, idx, par)
    # basic blocks
    start_set = {0} | set(p.labels.values())
    for i in p.instrs:
        if i.base in ("bra", "ret", "exit"):
            start_set.add(i.idx + 1)
    starts = sorted(s for s in start_set if s < len(p.instrs))
    block_of = {}
    for k, s in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(p.instrs)
        for j in range(s, end):
            block_of[j] = k
    edges: dict[int, list[int]] = {k: [] for k in range(len(starts))}
    for k in range(len(starts)):
        end = (starts[k + 1] if k + 1 < len(starts) else len(p.instrs)) - 1
        last = p.instrs[end]
        nxt = k + 1 if k + 1 < len(starts) else None
        if last.base == "bra":
            tgt = p.labels.get(last.args[0].strip()) if last.args else None
            tb = block_of.get(tgt) if tgt is not None else None
            side = _in_bounds_when(last.pred, g) if last.pred else None
            if tb is not None and side is not True:  # the taken edge is not the in-bounds side
                edges[k].append(tb)
            if last.pred and nxt is not None and side is not False:  # the fall-through is not in-bounds
                edges[k].append(nxt)
        elif last.base in ("ret", "exit") and not last.pred:
            pass
        elif nxt is not None:
            edges[k].append(nxt)
    seen, stack = {0}, [0]
    while stack:
        for n in edges[stack.pop()]:
            if n not in seen:
                seen.add(n)
                stack.append(n)
    accesses, unguarded = [], []
    for i in p.instrs:
        if not re.match(r"^(ld|st|atom|red)\.global\b|^(ld|st)\.global", i.op) and ".global" not in i.op:
            continue
        if i.base not in ("ld", "st", "atom", "red"):
            continue
        a = i.address()
        if a is None or a[0] not in idx:
            continue
        accesses.append(i)
        if i.pred and _in_bounds_when(i.pred, g):
            continue
        if block_of.get(i.idx) in seen:
            unguarded.append({"ptx": i.text, "line": i.line, "op": i.op})
    guards = [{"ptx": p.instrs[d].text, "line": p.instrs[d].line} for r in g for d in p.defs.get(r, [])
              if p.instrs[d].base == "setp"][:6]
    return {"indexed_accesses": len(accesses), "unguarded": len(unguarded), "unguarded_examples": unguarded[:6],
            "guard_comparisons": guards, "grid_stride": any("%nctaid" in a for i in p.instrs for a in i.args)}


# -- shared-memory ordering ------------------------------------------------------------

_BARRIER = re.compile(r"^(bar|barrier)\b|^mbarrier\.(try_wait|test_wait)|^bar\.warp\.sync")


def shared_races(p: PtxProgram) -> list[dict[str, Any]]:
    """Store -> load pairs on shared memory with no barrier between (module doc); each with
    both instructions and source lines. At most one pair per (store line, load line)."""
    idx = p.tainted(INDEX_REGS)

    def addr(i: PInstr) -> tuple[str, int, bool] | None:
        a = i.address()
        if a is None:
            return None
        base = p.expr(a[0]) if a[0].startswith("%") else a[0]
        return base, a[1], a[0] in idx

    pending: list[tuple[PInstr, tuple[str, int, bool]]] = []
    found: dict[tuple[int, int], dict[str, Any]] = {}
    loops = {b: a for a, b in p.loops()}

    def visit(i: PInstr) -> None:
        nonlocal pending
        if _BARRIER.match(i.op):
            pending = []
            return
        if ".shared" not in i.op:
            return
        if i.base == "st":
            a = addr(i)
            if a is not None and a[2]:
                pending.append((i, a))
        elif i.base in ("ld", "ldmatrix"):
            a = addr(i)
            if a is None or not pending:
                return
            if any(a[:2] == s[1][:2] for s in pending):
                return  # this thread's own slot
            st = pending[-1][0]
            key = (st.line, i.line)
            if key not in found:
                found[key] = {"store": {"ptx": st.text, "line": st.line}, "load": {"ptx": i.text, "line": i.line}}

    k = 0
    while k < len(p.instrs):
        visit(p.instrs[k])
        if k in loops:  # the wrap to the next iteration: the body once more
            for j in range(loops[k], k + 1):
                visit(p.instrs[j])
        k += 1
    return list(found.values())


# -- approximate arithmetic ------------------------------------------------------------


def approx_ops(p: PtxProgram) -> list[dict[str, Any]]:
    """Instructions with ``.approx`` (with source line), one per (opcode, line)."""
    seen, out = set(), []
    for i in p.instrs:
        if ".approx" in i.op and (i.op, i.line) not in seen:
            seen.add((i.op, i.line))
            out.append({"op": i.op, "line": i.line, "ptx": i.text})
    return out


def ftz_count(p: PtxProgram) -> int:
    """Arithmetic instructions with ``.ftz`` (subnormals flushed to zero)."""
    return sum(1 for i in p.instrs if ".ftz" in i.op)


# -- loops that accumulate -------------------------------------------------------------


def accumulation_loops(p: PtxProgram, at: list[int]) -> list[dict[str, Any]]:
    """For the instruction indices ``at``: the innermost loop holding each, with the count of
    those instructions in it, the induction step (an integer, or ``block``/``grid`` for a
    stride of ``%ntid``/``%nctaid``), the kernel parameter index its bound derives from, and
    the exit comparison. Loops whose exit is not read that way have ``step``/``param`` None."""
    out: list[dict[str, Any]] = []
    for a, b in sorted(p.loops(), key=lambda t: t[1] - t[0]):
        inside = [k for k in at if a <= k <= b]
        if not inside or any(set(inside) <= set(o["_at"]) for o in out):
            continue
        br = p.instrs[b]
        rec: dict[str, Any] = {"_at": inside, "count": len(inside), "step": None, "param": None,
                               "exit": None, "lines": sorted({p.instrs[k].line for k in inside})}
        setp = next((p.instrs[d] for d in p.defs.get(br.pred.lstrip("!"), []) if p.instrs[d].base == "setp"), None)
        if setp is not None and len(setp.args) >= 3:
            rec["exit"] = setp.text
            ops = [r for x in setp.args[1:3] for r in _REG.findall(x)]
            for r in ops:
                steps = [p.instrs[d] for d in p.defs.get(r, []) if a <= d <= b and p.instrs[d].base == "add"]
                if steps:
                    other = [x.strip() for x in steps[0].args[1:] if x.strip() != r]
                    if other and re.fullmatch(r"-?\d+", other[0]):
                        rec["step"] = int(other[0])
                    elif other and other[0].startswith("%"):
                        e = p.expr(other[0])
                        rec["step"] = "grid" if "%nctaid" in e else "block" if "%ntid" in e else None
                else:
                    for d in p.defs.get(r, []):
                        m = re.search(r"_param_(\d+)\]", p.instrs[d].text)
                        if m:
                            rec["param"] = int(m.group(1))
        out.append(rec)
    for o in out:
        o.pop("_at")
    return out
