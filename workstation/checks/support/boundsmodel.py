"""The launch model and the Z3 questions of the ``bounds-proof`` check.

*Launch model* (:func:`fit`): every integer a launch depends on -- the grid sizes, the
kernel's integer arguments, each tensor argument's footprint, sizes and strides, and the
constexprs -- recorded at several legal shapes, fitted as a function of the task's
``[params]`` from a small family of templates (:data:`TEMPLATES`): a constant, ``c * m``,
``cdiv(m, c)``, ``cdiv(m, c) * c``, ``next_power_of_2(m)`` and ``min(next_power_of_2(m),
c)``, where ``m`` is a product of up to four parameters and ``c`` a positive integer. A
quantity no template fits at every recorded shape makes the launch unsupported.

*Questions* (:func:`prove_kernel`), each asked of Z3 with the parameters ranging over their
legal values (``min``, ``max``, ``multiple_of``, ``choices``), the program ids over the
grid, the lanes over the tensor shapes and the loop counters over the trip counts:

- *in bounds*: is some masked-in lane of a load or store at an element offset outside
  ``[0, footprint)`` of its pointer argument's tensor?
- *coverage*: is there an element of an output tensor (a multi-index within its sizes, at
  the offset its strides give) that no program's masked-in store reaches: ``exists
  params, idx . forall pid, lanes, t . not (store hits idx)``?
- *read coverage*: the same question of an input tensor the kernel only loads (an element
  no program reads: a reduction loop that drops the ragged tail tile).

unsat is a proof over the whole legal space (under the fitted launch model); sat gives a
counterexample (the smallest shape found by asking within growing boxes first); unknown
(timeout, quantifiers Z3 cannot decide) is no answer.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field
from typing import Any, TypeVar

import z3

from workstation.checks.support.ttir_z3 import Encoder, Unsupported, fresh_access, parse_ttir
from workstation.protocol.extras.triton import BoundsCall, BoundsCase, IntArg, TensorArg

A = TypeVar("A", IntArg, TensorArg)

#: per Z3 query: Z3's resource units (``rlimit``: deterministic, independent of the machine's
#: load; about 2 million a second on one core) and a wall-clock backstop (ms). A query over
#: either is no answer.
QUERY_RLIMIT = 4_000_000
QUERY_TIMEOUT_MS = 10_000
#: Z3 resource units per kernel, all its questions together (about 10 s on an idle core).
KERNEL_RLIMIT = 20_000_000
#: boxes (largest value of each parameter) tried before the whole legal space, for small
#: counterexamples.
BOXES = (16, 256, 4096, None)


# ----------------------------------------------------------------------------- templates


def _npow2(x: int) -> int:
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


@dataclass(frozen=True)
class Formula:
    """One fitted template: ``kind`` (const, scale, cdiv, roundup, npow2, npow2min, tiles),
    the parameters of the monomial ``m`` and the constant ``c``; ``tiles`` is
    ``cdiv(p, c) * cdiv(q, c2)`` for ``params = (p, q)`` (a 1-D grid over 2-D tiles)."""

    kind: str
    params: tuple[str, ...]
    c: int
    c2: int = 0

    def value(self, env: dict[str, int]) -> int:
        if self.kind == "tiles":
            return -(-env[self.params[0]] // self.c) * -(-env[self.params[1]] // self.c2)
        m = math.prod(env[p] for p in self.params)
        return {"const": lambda: self.c, "scale": lambda: self.c * m, "cdiv": lambda: -(-m // self.c),
                "roundup": lambda: -(-m // self.c) * self.c, "npow2": lambda: _npow2(m),
                "npow2min": lambda: min(_npow2(m), self.c)}[self.kind]()

    def z3(self, env: dict[str, Any], hi: int) -> Any:
        """The formula as a Z3 term; ``hi``: an upper bound of the monomial (for the
        power-of-two chain)."""
        if self.kind == "tiles":
            p, q = (env[x] for x in self.params)
            return (p + self.c - 1) / self.c * ((q + self.c2 - 1) / self.c2)
        m = z3.IntVal(1)
        for p in self.params:
            m = m * env[p]
        if self.kind == "const":
            return z3.IntVal(self.c)
        if self.kind == "scale":
            return self.c * m
        if self.kind == "cdiv":
            return (m + self.c - 1) / self.c
        if self.kind == "roundup":
            return (m + self.c - 1) / self.c * self.c
        chain: Any = z3.IntVal(_npow2(max(hi, 1)))
        for k in range(max(hi, 1).bit_length(), -1, -1):
            chain = z3.If(m <= (1 << k), 1 << k, chain)
        return chain if self.kind == "npow2" else z3.If(chain < self.c, chain, self.c)

    def text(self) -> str:
        if self.kind == "tiles":
            return f"cdiv({self.params[0]}, {self.c})*cdiv({self.params[1]}, {self.c2})"
        m = "*".join(self.params) or "1"
        return {"const": f"{self.c}", "scale": m if self.c == 1 else f"{self.c}*{m}", "cdiv": f"cdiv({m}, {self.c})",
                "roundup": f"cdiv({m}, {self.c})*{self.c}", "npow2": f"next_pow2({m})",
                "npow2min": f"min(next_pow2({m}), {self.c})"}[self.kind]


def _monomials(params: list[str]) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for d in (1, 2, 3, 4):
        out += list(itertools.combinations_with_replacement(params, d))
    return out


def fit_one(samples: list[tuple[dict[str, int], int]], params: list[str]) -> Formula | None:
    """The first template (constant, then per monomial: scale, cdiv, roundup, npow2,
    npow2min; then tiles) that gives the recorded value at every sample; None when none
    does."""
    vals = [v for _, v in samples]
    if len(set(vals)) == 1:
        return Formula("const", (), vals[0])
    for mono in _monomials(params):
        ms = [math.prod(env[p] for p in mono) for env, _ in samples]
        cands: list[Formula] = []
        if all(m != 0 for m in ms) and vals[0] % ms[0] == 0:
            cands.append(Formula("scale", mono, vals[0] // ms[0]))
        pows = [1 << k for k in range(1, 21)]
        cands += [Formula("cdiv", mono, c) for c in pows]
        cands += [Formula("roundup", mono, c) for c in pows]
        cands.append(Formula("npow2", mono, 0))
        cands += [Formula("npow2min", mono, c) for c in pows]
        for f in cands:
            if all(f.value(env) == v for env, v in samples):
                return f
    pows = [1 << k for k in range(11)]
    for p, q in itertools.combinations(params, 2):
        for c, c2 in itertools.product(pows, pows):
            f = Formula("tiles", (p, q), c, c2)
            if all(f.value(env) == v for env, v in samples):
                return f
    return None


# ----------------------------------------------------------------------------- the model


@dataclass
class Slot:
    """One launch position of the wrapper's launch sequence, fitted over the shapes."""

    qualname: str
    keys: dict[int, dict[str, int]]  # launch-record index -> the constexpr values that pick it
    grid: list[Formula]
    ints: dict[str, Formula]
    tensors: dict[str, dict[str, Any]]  # arg -> footprint, sizes, strides (Formulas), output, dtype
    constexprs: dict[str, Formula] = field(default_factory=dict)


class ModelError(Exception):
    """The launches cannot be fitted (message: why)."""


def _arg(call: BoundsCall, name: str, kind: type[A]) -> A:
    """Argument ``name`` of a recorded launch, of the kind it has at the first shape.

    Raises:
        KeyError: the launch has no such argument, or it is of another kind here.
    """
    a = call.args[name]
    if not isinstance(a, kind):
        raise KeyError(f"{call.qualname}: argument {name} is {type(a).__name__} here, {kind.__name__} elsewhere")
    return a


def fit(cases: list[dict[str, Any]], runs: list[BoundsCase], params: list[str]) -> list[Slot]:
    """Fit the launch sequence of ``runs`` (the ``triton_bounds`` step's per-case records)
    over ``cases`` (the shapes)

    Raises:
        ModelError: the launch sequence changes with the shape, or a quantity fits no
            template.
    """
    seqs = [[c.qualname for c in r.launches] for r in runs]
    if not seqs or any(s != seqs[0] for s in seqs):
        differ = next(i for i, s in enumerate(seqs) if s != seqs[0])
        raise ModelError("the wrapper's launch sequence changes with the shape (" + "; ".join(
            f"{' '.join(f'{p}={cases[i][p]}' for p in params)}: {', '.join(seqs[i]) or 'no launch'}"
            for i in (0, differ)) + ")")
    envs = [{p: int(c[p]) for p in params} for c in cases]
    slots = []
    for i, qn in enumerate(seqs[0]):
        calls = [r.launches[i] for r in runs]

        def f(what: str, get: Any, calls: list[BoundsCall] = calls, qn: str = qn) -> Formula:
            got = fit_one([(e, int(get(c))) for e, c in zip(envs, calls, strict=True)], params)
            if got is None:
                seen: dict[Any, dict[str, int]] = {}
                for e, c in zip(envs, calls, strict=True):
                    seen.setdefault(get(c), e)
                shown = "; ".join(f"{v} at {' '.join(f'{p}={x}' for p, x in e.items())}" for v, e in list(seen.items())[:6])
                raise ModelError(f"{qn}: {what} fits no template of the parameters ({shown})")
            return got

        grid = [f(f"grid[{d}]", lambda c, d=d: c.grid[d]) for d in range(3)]
        ints, tensors = {}, {}
        for name, a in calls[0].args.items():
            if isinstance(a, IntArg):
                ints[name] = f(f"argument {name}", lambda c, n=name: _arg(c, n, IntArg).value)
            elif isinstance(a, TensorArg):
                outs = {_arg(c, name, TensorArg).output for c in calls}
                tensors[name] = {
                    "footprint": f(f"the footprint of {name}", lambda c, n=name: _arg(c, n, TensorArg).footprint),
                    "sizes": [f(f"{name}.shape[{k}]", lambda c, n=name, k=k: _arg(c, n, TensorArg).shape[k])
                              for k in range(len(a.shape))],
                    "strides": [f(f"{name}.stride({k})", lambda c, n=name, k=k: _arg(c, n, TensorArg).strides[k])
                                for k in range(len(a.strides))],
                    "output": outs.pop() if len(outs) == 1 else None, "dtype": a.dtype}
        slots.append(Slot(qn, {}, grid, ints, tensors))
    return slots


# ----------------------------------------------------------------------------- questions


@dataclass
class Verdict:
    """What one question got: ``status`` proved / refuted / unknown / unsupported, with the
    access, the counterexample (params, program ids, lanes, element) and seconds."""

    question: str  # "in-bounds" or "coverage"
    status: str
    access: str
    line: int | None = None
    arg: str = ""
    counterexample: dict[str, Any] | None = None
    detail: str = ""
    seconds: float = 0.0
    data_dependent: bool = False


def domain(penv: dict[str, Any], specs: dict[str, Any]) -> list[Any]:
    """The legal values of each parameter (``[params]``: min, max, multiple_of, choices;
    unlisted: any positive int) as Z3 constraints."""
    out = []
    for p, x in penv.items():
        s = specs.get(p)
        if s is None:
            out.append(x >= 1)
            continue
        if s.choices is not None:
            ints = [c for c in s.choices if isinstance(c, int) and not isinstance(c, bool)]
            out.append(z3.Or(*[x == c for c in ints]) if ints else z3.BoolVal(False))
            continue
        out.append(x >= (s.min if s.min is not None else 1))
        if s.max is not None:
            out.append(x <= s.max)
        if s.multiple_of:
            out.append(x % s.multiple_of == 0)
    return out


def monomial_bound(specs: dict[str, Any], params: list[str]) -> int:
    """An upper bound of any product of up to four parameters (their largest maximum to the 4th;
    2^31 for a parameter without one)."""
    his = []
    for p in params:
        s = specs.get(p)
        if s is not None and s.choices is not None:
            his.append(max((c for c in s.choices if isinstance(c, int)), default=1))
        else:
            his.append(s.max if s is not None and s.max is not None else 1 << 31)
    return max(his or [1]) ** 4


def _instances(hit: Any, xs: list[Any], a: Any, slot: Slot, idx: list[Any], dom: list[Any],
               penv: dict[str, Any] | None = None) -> list[Any]:
    """``not hit`` at the writer candidates of the usual tilings: a program id is 0, an
    output index ``i`` or ``i / B``; a lane is 0, ``i`` or ``i % B``; a loop counter 0 or
    ``i / B`` (``B``: the access's lane extents). Together they are weaker than the
    universal statement, so unsat with them proves coverage."""
    nl = len(a.shape)
    blocks = sorted({d for d in a.shape if d > 1})
    lane_c = [z3.IntVal(0), *idx, *(i % b for i in idx for b in blocks)]
    div_c = [z3.IntVal(0), *idx, *(i / b for i in idx for b in blocks)]
    cands = []
    for k, _x in enumerate(xs):
        if k < nl:
            cands.append(lane_c)
        elif k < nl + 3:
            g = slot.grid[k - nl]
            if g.kind == "const" and g.c == 1:
                cands.append([z3.IntVal(0)])
            elif g.kind == "tiles" and penv is not None:
                # a 1-D grid over 2-D tiles, row-major either way: pid = (i / c) * cdiv(q, c2) + j / c2
                p, q = (penv[x] for x in g.params)
                rows = (q + g.c2 - 1) / g.c2
                cols = (p + g.c - 1) / g.c
                tiles = [(i / g.c) * rows + j / g.c2 for i in idx for j in idx if not z3.eq(i, j)]
                tiles += [(j / g.c2) * cols + i / g.c for i in idx for j in idx if not z3.eq(i, j)]
                cands.append([*div_c, *tiles])
            else:
                cands.append(div_c)
        else:
            cands.append(div_c)
    if not xs:
        return [z3.Not(hit)]
    # learn the writer from concrete points: at a few (params, element) pairs ask Z3 which
    # program and lane store there, keep for each variable the first candidate term that
    # gives that value at every point
    points = _writer_points(hit, xs, idx, dom)
    if not points:
        return []
    combo = []
    for k, _x in enumerate(xs):
        pick = None
        for c in cands[k]:
            if all(_num(z3.substitute(c, *pt["sub"])) == pt["val"][k] for pt in points):
                pick = c
                break
        if pick is None:
            return []
        combo.append(pick)
    return [z3.Not(z3.substitute(hit, *zip(xs, combo, strict=True)))]


def _num(t: Any) -> int | None:
    v = z3.simplify(t)
    return v.as_long() if z3.is_int_value(v) else None


def _writer_points(hit: Any, xs: list[Any], idx: list[Any], dom: list[Any], n: int = 6) -> list[dict[str, Any]]:
    """Up to ``n`` concrete (parameters, element, writer) triples where ``hit`` holds: at
    spread-out parameters and elements first, else anywhere in ``dom`` (other elements
    than those already found)."""
    pts: list[dict[str, Any]] = []
    s = z3.Solver()
    s.set("rlimit", 2_000_000)
    # the element within the output's sizes (the last constraints of ``dom``), the store hitting it
    s.add(hit, *dom[len(dom) - len(idx):])
    params = [v for v in _free(hit) if not any(z3.eq(v, x) for x in xs) and not any(z3.eq(v, i) for i in idx)]
    for j in range(n):
        s.push()
        for k, p in enumerate(params):
            s.add(p == 20011 + 37 * j + 101 * k)
        for k, i in enumerate(idx):
            s.add(i == (7919 * j + 3119 * k + 4099) % 20000)
        got = s.check()
        s.pop()
        if got != z3.sat:
            # every coordinate of the element differs from the points found so far (else at
            # least one), so a candidate term that matches them all is a real pattern
            got = z3.unknown
            for combine in (z3.And, z3.Or):
                s.push()
                s.add(*dom, *[combine(*[i != v for i, v in zip(idx, pt["idx"], strict=True)]) for pt in pts if idx])
                got = s.check()
                if got == z3.sat:
                    break
                s.pop()
            if got != z3.sat:
                break
        else:
            s.push()
            for k, p in enumerate(params):
                s.add(p == 20011 + 37 * j + 101 * k)
            for k, i in enumerate(idx):
                s.add(i == (7919 * j + 3119 * k + 4099) % 20000)
            s.check()
        m = s.model()
        # a canonical writer: each program id, loop counter and lane 0 where it can be (an
        # element every program reads, a broadcast row, then gives one pattern)
        s.add(*[v == m.eval(v, model_completion=True) for v in [*params, *idx]])
        for x in xs:
            s.push()
            s.add(x == 0)
            if s.check() == z3.sat:
                m = s.model()
                s.pop()
                s.add(x == 0)
            else:
                s.pop()
        s.pop()
        sub = [(v, m.eval(v, model_completion=True)) for v in [*params, *idx]]
        pts.append({"sub": sub, "val": [m.eval(x, model_completion=True).as_long() for x in xs],
                    "idx": [m.eval(i, model_completion=True) for i in idx]})
    return pts


def _free(t: Any) -> list[Any]:
    from workstation.checks.support.ttir_z3 import _vars

    return _vars(t)


def _check(s: Any, budget: list[float]) -> Any:
    """``s.check()`` within :data:`QUERY_RLIMIT` and what is left of ``budget`` (resource
    units, charged with what the query used)."""
    global _rlimit_seen
    s.set("rlimit", max(1, int(min(QUERY_RLIMIT, budget[0]))))
    s.set("timeout", QUERY_TIMEOUT_MS)
    r = s.check()
    st = s.statistics()
    # Z3's count is cumulative over the process: charge the increase since the last query
    count = st.get_key_value("rlimit count") if "rlimit count" in st.keys() else None
    if count is None:
        budget[0] -= QUERY_RLIMIT
    else:
        budget[0] -= count - _rlimit_seen if count >= _rlimit_seen else count
        _rlimit_seen = count
    return r


_rlimit_seen = 0


def _solve(constraints: list[Any], penv: dict[str, Any], extra: list[Any], budget: list[float],
           boxes: tuple[int | None, ...] = BOXES) -> tuple[str, Any]:
    """``sat`` (with the model) / ``unsat`` / ``unknown``: first within ``boxes``."""
    last = "unknown"
    for box in boxes:
        if budget[0] <= 1000:
            return "unknown", "the solver budget ran out"
        s = z3.Solver()
        s.add(*constraints, *extra)
        if box is not None:
            s.add(*[x <= box for x in penv.values()])
        r = _check(s, budget)
        if r == z3.sat:
            return "sat", s.model()
        if r == z3.unknown:
            last = "unknown"
            if box is None:
                return "unknown", s.reason_unknown()
            continue
        if box is None:
            return "unsat", None
        last = "unsat-in-box"
    return last, None


def _refine(constraints: list[Any], penv: dict[str, Any], idx: list[Any], hits: list[tuple[Any, list[Any]]],
            budget: list[float], rounds: int = 8) -> tuple[str, Any]:
    """Counterexamples to coverage from the learned writer's misses: each miss (a shape and
    an element, smallest box first) is checked concretely -- does any program and lane
    store there? -- and excluded when one does. ``sat`` with a model when a miss is real,
    ``unknown`` otherwise."""
    blocked: list[Any] = []
    for _ in range(rounds):
        r, m = _solve(constraints + blocked, penv, [], budget)
        if r != "sat":
            return "unknown", None
        fix = [(x, m.eval(x, model_completion=True)) for x in [*penv.values(), *idx]]
        s = z3.Solver()
        concrete = [z3.substitute(h, *fix) for h, _ in hits]
        if any(_data(h) for h in concrete):
            s.add(*[z3.ForAll(xs, z3.Not(h)) if xs else z3.Not(h) for h, (_, xs) in zip(concrete, hits, strict=True)])
            got = _check(s, budget)
            if got == z3.sat:
                return "sat", m
        else:
            s.add(z3.Or(*concrete))
            got = _check(s, budget)
            if got == z3.unsat:
                return "sat", m
        if got == z3.unknown:
            return "unknown", None
        blocked.append(z3.Or(*[x != v for x, v in fix]))
    return "unknown", None


def _data(term: Any) -> bool:
    """Does ``term`` mention an opaque data predicate (a mask on loaded values)?"""
    return "data" in term.sexpr()


def _model_value(m: Any, x: Any) -> int | None:
    v = m.eval(x, model_completion=True)
    return v.as_long() if z3.is_int_value(v) else None


def prove_kernel(ttir: str, slot: Slot, params: list[str], specs: dict[str, Any], region: list[Any] | None,
                 budget: float = KERNEL_RLIMIT) -> tuple[list[Verdict], int]:
    """Ask the in-bounds question of every access of the kernel ``ttir`` launched as
    ``slot``, and the coverage question of every output tensor it stores to. Returns the
    verdicts and the number of accesses encoded. ``region``: extra constraints on the
    parameters (the constexpr variant's part of the space)."""
    penv = {p: z3.Int(p) for p in params}
    hi = monomial_bound(specs, params)
    scalars = {n: f.z3(penv, hi) for n, f in slot.ints.items()}
    grid = [g.z3(penv, hi) for g in slot.grid]
    kernel = parse_ttir(ttir)
    enc = Encoder(kernel, scalars, grid).run()
    dom = domain(penv, specs) + list(region or [])
    left = [float(budget)]  # the solver budget still left, shared (and spent) by every question below
    out: list[Verdict] = [Verdict("in-bounds", "unsupported", u) for u in enc.unsupported]
    for i, a in enumerate(enc.accesses):
        t = slot.tensors.get(a.base)
        if t is None:
            out.append(Verdict("in-bounds", "unsupported", a.text, a.line, a.base,
                               detail=f"pointer argument {a.base} is not a tensor of the call"))
            continue
        terms, cons = fresh_access(a, enc, f"a{i}")
        foot = t["footprint"].z3(penv, hi)
        t0 = time.perf_counter()
        r, m = _solve(dom + cons + [terms["mask"]], penv, [z3.Or(terms["offset"] < 0, terms["offset"] >= foot)], left)
        v = Verdict("in-bounds", {"sat": "refuted", "unsat": "proved"}.get(r, "unknown"), f"{a.kind} {a.base}",
                    a.line, a.base, seconds=time.perf_counter() - t0, data_dependent=_data(terms["mask"]))
        if r == "sat":
            v.counterexample = {"params": {p: _model_value(m, x) for p, x in penv.items()},
                                "offset": _model_value(m, terms["offset"]), "footprint": _model_value(m, foot),
                                "program": [_model_value(m, x) for x in terms["vars"][len(a.shape):len(a.shape) + 3]],
                                "lanes": [_model_value(m, x) for x in terms["vars"][:len(a.shape)]]}
        elif r != "unsat":
            v.detail = str(m or "unknown")
        out.append(v)
    out += _coverage(enc, slot, penv, hi, dom, left)
    out += _coverage(enc, slot, penv, hi, dom, left, reads=True)
    return out, len(enc.accesses)


def _coverage(enc: Encoder, slot: Slot, penv: dict[str, Any], hi: int, dom: list[Any],
              budget: list[float], reads: bool = False) -> list[Verdict]:
    """The coverage question of every output the kernel stores to; with ``reads``, the
    read-coverage question of every input it only loads (an input element no program
    reads)."""
    out = []
    kind = "load" if reads else "store"
    written = {a.base for a in enc.accesses if a.kind == "store"}
    for arg in sorted({a.base for a in enc.accesses if a.kind == kind}):
        t = slot.tensors.get(arg)
        if t is None or (t["output"] is not None or arg in written if reads else t["output"] is None):
            continue
        stores = [a for a in enc.accesses if a.kind == kind and a.base == arg]
        idx = [z3.Int(f"idx_{arg}_{k}") for k in range(len(t["sizes"]))]
        sizes = [s.z3(penv, hi) for s in t["sizes"]]
        strides = [s.z3(penv, hi) for s in t["strides"]]
        elem = sum((i * st for i, st in zip(idx, strides, strict=True)), z3.IntVal(0))
        cons = [z3.And(i >= 0, i < s) for i, s in zip(idx, sizes, strict=True)]
        quant, inst = list(cons), list(cons)
        hits = []
        for j, a in enumerate(stores):
            terms, c = fresh_access(a, enc, f"c{j}")
            hit = z3.And(*c, terms["mask"], terms["offset"] == elem)
            hits.append((hit, terms["vars"]))
            quant.append(z3.ForAll(terms["vars"], z3.Not(hit)) if terms["vars"] else z3.Not(hit))
            inst += _instances(hit, terms["vars"], a, slot, idx, dom + cons[:len(idx)], penv)
        t0 = time.perf_counter()
        # 1. a proof from the learned writer (quantifier-free; unsat proves coverage);
        # 2. the learned writer's misses, each checked at its concrete shape and element;
        # 3. the quantified question for a counterexample
        r, m = _solve(dom + inst, penv, [], budget, boxes=(None,)) if len(inst) > len(cons) else ("unknown", None)
        if r == "sat":  # a miss of the learned writer: a counterexample only once checked
            r, m = _refine(dom + inst, penv, idx, hits, budget)
        if r not in ("unsat", "sat") and not reads:
            # no writer pattern learned (or its misses were all written): a universally
            # quantified search for a counterexample among small shapes only
            r, m = _solve(dom + quant, penv, [], budget, boxes=(16, 256))
            if r != "sat":
                r, m = "unknown", ("no writer pattern of the usual tilings covers the output, and no small "
                                   "counterexample was found")
        v = Verdict("read-coverage" if reads else "coverage", {"sat": "refuted", "unsat": "proved"}.get(r, "unknown"),
                    f"input {arg}" if reads else f"output {t['output']} through {arg}", stores[0].line, arg,
                    seconds=time.perf_counter() - t0,
                    data_dependent=any(a.mask is not None and _data(fresh_access(a, enc, "dd")[0]["mask"])
                                       for a in stores))
        if r == "sat":
            v.counterexample = {"params": {p: _model_value(m, x) for p, x in penv.items()},
                                "element": [_model_value(m, i) for i in idx]}
        elif r != "unsat":
            v.detail = str(m or "unknown")
        out.append(v)
    return out


__all__ = ["Formula", "ModelError", "Slot", "Unsupported", "Verdict", "domain", "fit", "fit_one", "prove_kernel"]
