"""Static reading of the author's benchmark for ``benchmark-bias`` (parent side: :mod:`ast`).

:func:`scan_bench` reads the ``[entry] bench`` file for the defects ``benchmark-bias`` names: host
clocks around CUDA work without a synchronize, no warm-up (the first call, with its
compilation or autotuning, inside the timed region), ``do_bench`` or a cache flush on one
side only, different inputs per side, and timing utilities used against their documentation.

Nothing here imports or runs task code.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workstation.task.model import Task
from workstation.task.sources import TaskSources, parse_python

# ----------------------------------------------------------------------------- bench scan

CLOCKS = {"perf_counter", "perf_counter_ns", "time", "time_ns", "monotonic", "monotonic_ns",
          "process_time", "process_time_ns", "default_timer"}
SYNC_ATTRS = {"synchronize", "item", "cpu", "tolist", "numpy"}


@dataclass
class TimedUse:
    """One place where the bench times one side.

    ``side``: ``candidate`` / ``baseline``; ``line``: where (the call site for a timing
    helper); ``method``: ``clock`` (a host clock pair), ``event`` (CUDA events),
    ``do_bench`` (``triton.testing.do_bench``), ``timer`` (``torch.utils.benchmark.Timer``);
    ``clock``: the clock function; ``paths``: device paths that reach it (``cuda``,
    ``cpu``); ``warmup``: the side ran before the timed region; ``sync``: a synchronize
    inside the region; ``flush``: a cache flush before each timed call; ``first_timed``:
    the region holds the side's first call; ``in_loop``: the region repeats (its first
    iteration is the cold one); ``args``: the call's argument expressions;
    ``compiled``: the timed callable comes from ``torch.compile``; ``region``: [first, last]
    line of the timed region; ``clock_lines``: the lines of its start and stop clock
    reads; ``setup``: other work timed with the call (``x.clone()``, input construction);
    ``fresh_inputs``: argument names re-assigned inside the loop that repeats the timed
    region (new inputs every iteration, at ``fresh_line``).
    """

    side: str
    line: int
    method: str
    clock: str = ""
    paths: frozenset[str] = frozenset({"cuda", "cpu"})
    warmup: bool = False
    sync: bool = False
    flush: bool = False
    first_timed: bool = False
    in_loop: bool = False
    args: tuple[str, ...] = ()
    arg_lines: dict[str, int] = field(default_factory=dict)
    compiled: bool = False
    region: tuple[int, int] = (0, 0)
    clock_lines: tuple[int, int] = (0, 0)
    helper: str = ""
    setup: tuple[str, ...] = ()
    fresh_inputs: tuple[str, ...] = ()
    fresh_line: int = 0

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["paths"] = sorted(self.paths)
        d["args"] = list(self.args)
        d["region"] = list(self.region)
        d["clock_lines"] = list(self.clock_lines)
        d["setup"] = list(self.setup)
        d["fresh_inputs"] = list(self.fresh_inputs)
        return d


@dataclass
class BenchIssue:
    """One defect of the author's benchmark seen in its source.

    ``kind``: ``no-sync``, ``first-call-timed``, ``no-warmup``, ``do-bench-one-side``,
    ``flush-one-side``, ``inputs-differ``, ``setup-in-timed-region``,
    ``aggregate-differs``, ``timer-misuse``, ``method-differs``;
    ``sides``: the sides it affects; ``asymmetric``: it treats the two sides differently
    (so it biases the ratio); ``line``: the source line; ``path``: the device path
    (``cuda``/``cpu``/``any``) it is on.
    """

    kind: str
    message: str
    sides: tuple[str, ...]
    asymmetric: bool
    line: int
    path: str = "any"
    detail: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "sides": list(self.sides),
                "asymmetric": self.asymmetric, "line": self.line, "path": self.path, **self.detail}


def _dotted(node: ast.AST) -> str:
    """``a.b.c`` for Name/Attribute chains (``""`` otherwise)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    if isinstance(node, ast.Call):
        inner = _dotted(node.func)
        return f"{inner}()" + ("." + ".".join(reversed(parts)) if parts else "") if inner else ""
    return ""


def _stmts_lines(stmts: list[ast.stmt]) -> tuple[int, int]:
    return (stmts[0].lineno, max(getattr(s, "end_lineno", s.lineno) or s.lineno for s in stmts)) if stmts else (0, 0)


class _Scanner:
    """Side tagging and timed-region discovery over one bench module."""

    def __init__(self, tree: ast.Module, stems: dict[str, str], names: dict[str, str]):
        self.tree = tree
        self.stems = stems          # file stem -> side ("candidate.py" -> "candidate")
        self.entry_names = names    # callable name -> side (only when imported from its file)
        self.module_tags: dict[str, set[str]] = {}
        self.clock_names: dict[str, str] = {}   # local alias -> clock function name
        self.do_bench_names: set[str] = {"do_bench", "do_bench_cudagraph"}
        self.timer_names: set[str] = {"Timer"}
        self.compiled: set[str] = set()
        self.funcs: dict[str, ast.FunctionDef] = {}
        self.parents: dict[ast.AST, ast.AST] = {}
        for n in ast.walk(tree):
            for ch in ast.iter_child_nodes(n):
                self.parents[ch] = n
        self._module_level()
        self.sync_funcs: set[str] = set()
        for _ in range(3):  # helpers that synchronise (``_sync(device)``), transitively
            for name, fn in self.funcs.items():
                if any(isinstance(c, ast.Call) and self.is_sync(c) for c in ast.walk(fn)):
                    self.sync_funcs.add(name)

    # -- tagging ---------------------------------------------------------------------

    def _side_of_str(self, s: str) -> set[str]:
        out = set()
        for stem, side in self.stems.items():
            if s == stem or s == f"{stem}.py" or s.endswith(f"/{stem}.py") or s.endswith(f"/{stem}"):
                out.add(side)
        return out

    def side_of(self, expr: ast.AST | None, env: dict[str, set[str]]) -> set[str]:
        """The sides an expression refers to: tagged names, imports of an entry file,
        calls whose string arguments name an entry file (``_load("candidate")``)."""
        if expr is None:
            return set()
        out: set[str] = set()
        for n in ast.walk(expr):
            if isinstance(n, ast.Name):
                out |= env.get(n.id, set()) | self.module_tags.get(n.id, set())
                if n.id in self.funcs and n.id not in env:
                    out |= self._func_tags(n.id)
            elif isinstance(n, ast.Call):
                for a in n.args:
                    if isinstance(a, ast.Constant) and isinstance(a.value, str):
                        out |= self._side_of_str(a.value)
                    elif isinstance(a, ast.JoinedStr):
                        for v in a.values:
                            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                                out |= self._side_of_str(v.value.strip("/"))
            elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div):
                # _HERE / "candidate.py"
                if isinstance(n.right, ast.Constant) and isinstance(n.right.value, str):
                    out |= self._side_of_str(n.right.value)
        return out

    def _func_tags(self, name: str, depth: int = 0) -> set[str]:
        """Sides a module-level function calls without being given them (a wrapper)."""
        fn = self.funcs.get(name)
        if fn is None or depth > 3:
            return set()
        params = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
        env: dict[str, set[str]] = {p: set() for p in params}
        out: set[str] = set()
        for n in ast.walk(fn):
            if isinstance(n, ast.Call):
                f = n.func
                if isinstance(f, ast.Name) and f.id in params:
                    continue
                if isinstance(f, ast.Name) and f.id in self.funcs and f.id != name:
                    out |= self._func_tags(f.id, depth + 1)
                out |= self.side_of(f, env)
        return out

    def _module_level(self) -> None:
        for top in self.tree.body:
            if isinstance(top, ast.FunctionDef | ast.AsyncFunctionDef):
                self.funcs[top.name] = top  # type: ignore[assignment]
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    tags = self._side_of_str(a.name)
                    if tags:
                        self.module_tags[a.asname or a.name] = tags
            elif isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                tags = self._side_of_str(mod)
                for a in node.names:
                    local = a.asname or a.name
                    if tags:
                        self.module_tags[local] = tags
                    if mod == "time" and a.name in CLOCKS:
                        self.clock_names[local] = a.name
                    if mod == "timeit" and a.name == "default_timer":
                        self.clock_names[local] = "default_timer"
                    if a.name in ("do_bench", "do_bench_cudagraph"):
                        self.do_bench_names.add(local)
                    if a.name == "Timer":
                        self.timer_names.add(local)
        for node in self.tree.body:
            if isinstance(node, ast.Assign):
                tags = self.side_of(node.value, {})
                for t in node.targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name) and tags:
                            self.module_tags[n.id] = tags

    # -- recognisers -----------------------------------------------------------------

    def clock_of(self, node: ast.AST) -> str:
        """The clock name when ``node`` is a clock call (``time.perf_counter()``)."""
        if not isinstance(node, ast.Call) or node.args:
            return ""
        d = _dotted(node.func)
        if d in self.clock_names:
            return self.clock_names[d]
        head, _, last = d.rpartition(".")
        if last in CLOCKS and head in ("time", "timeit"):
            return last
        return ""

    def is_do_bench(self, call: ast.Call) -> bool:
        d = _dotted(call.func)
        return d.rpartition(".")[2] in ("do_bench", "do_bench_cudagraph") or d in self.do_bench_names

    def is_timer_ctor(self, call: ast.Call) -> bool:
        d = _dotted(call.func)
        return d.endswith("benchmark.Timer") or d in self.timer_names and d != "timeit.Timer"

    def is_sync(self, call: ast.Call) -> bool:
        """``torch.cuda.synchronize()``, ``event.synchronize()``, ``.item()``/``.cpu()``
        (they wait for the device), or a bench function that does one of these."""
        d = _dotted(call.func)
        last = d.rpartition(".")[2]
        if d in getattr(self, "sync_funcs", ()):
            return True
        return last in SYNC_ATTRS and (last != "numpy" or ".cpu()" in d)

    @staticmethod
    def is_flush(call: ast.Call) -> bool:
        """A cache flush: ``<buf>.zero_()``/``fill_`` on a buffer named like a cache, or
        triton's ``clear_cache``."""
        d = _dotted(call.func)
        head, _, last = d.rpartition(".")
        if last == "clear_cache":
            return True
        if last in ("zero_", "fill_", "random_", "normal_", "uniform_"):
            lname = head.lower()
            return any(k in lname for k in ("cache", "flush", "l2", "llc", "scrub", "evict"))
        return False

    # -- device paths ----------------------------------------------------------------

    @staticmethod
    def _test_kind(test: ast.AST) -> str:
        """``"cuda"`` when a test is true on CUDA only, ``"cpu"`` when true off CUDA only,
        else ``""``."""
        neg = False
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            neg, test = True, test.operand
        kind = ""
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            consts = [c.value for c in [test.left, *test.comparators] if isinstance(c, ast.Constant)]
            s = next((c for c in consts if isinstance(c, str)), None)
            if s in ("cuda", "cpu"):
                eq = isinstance(test.ops[0], ast.Eq | ast.Is)
                ne = isinstance(test.ops[0], ast.NotEq | ast.IsNot)
                if eq or ne:
                    is_cuda = (s == "cuda") == eq
                    kind = "cuda" if is_cuda else "cpu"
        elif isinstance(test, ast.Call) and _dotted(test.func).endswith("cuda.is_available"):
            kind = "cuda"
        elif isinstance(test, ast.Attribute) and test.attr == "is_cuda":
            kind = "cuda"
        if neg and kind:
            kind = "cpu" if kind == "cuda" else "cuda"
        return kind

    @staticmethod
    def _ends(stmts: list[ast.stmt]) -> bool:
        return bool(stmts) and isinstance(stmts[-1], ast.Return | ast.Raise | ast.Continue | ast.Break)

    def paths_of(self, node: ast.AST) -> frozenset[str]:
        """Device paths reaching ``node``: enclosing ``if`` tests and earlier early
        returns (``if device.type == "cuda": return ...``) in enclosing blocks."""
        paths = {"cuda", "cpu"}
        child, cur = node, self.parents.get(node)
        while cur is not None:
            if isinstance(cur, ast.If):
                k = self._test_kind(cur.test)
                if k:
                    in_body = any(child is s for s in cur.body)
                    in_else = any(child is s for s in cur.orelse)
                    if in_body:
                        paths &= {k}
                    elif in_else:
                        paths &= {"cpu" if k == "cuda" else "cuda"}
            for fld in ("body", "orelse", "finalbody"):
                block = getattr(cur, fld, None)
                if isinstance(block, list) and any(child is s for s in block):
                    idx = next(i for i, s in enumerate(block) if s is child)
                    for prev in block[:idx]:
                        if isinstance(prev, ast.If):
                            k = self._test_kind(prev.test)
                            if k and self._ends(prev.body) and not prev.orelse:
                                paths -= {k}
                            elif k and prev.orelse and self._ends(prev.orelse) and not self._ends(prev.body):
                                paths -= {"cpu" if k == "cuda" else "cuda"}
            if isinstance(cur, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                break
            child, cur = cur, self.parents.get(cur)
        return frozenset(paths)

    def in_loop(self, node: ast.AST, stop: ast.AST) -> bool:
        cur = self.parents.get(node)
        while cur is not None and cur is not stop:
            if isinstance(cur, ast.For | ast.While | ast.comprehension | ast.ListComp):
                return True
            cur = self.parents.get(cur)
        return False


def _enclosing_block(scanner: _Scanner, node: ast.AST, fn: ast.AST) -> tuple[list[ast.stmt], int]:
    """The statement list holding ``node``'s statement (walking up to ``fn``) and its index."""
    child, cur = node, scanner.parents.get(node)
    while cur is not None:
        for fld in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(cur, fld, None)
            if isinstance(block, list):
                for i, s in enumerate(block):
                    if s is child:
                        return block, i
        if cur is fn:
            break
        child, cur = cur, scanner.parents.get(cur)
    return [], -1


def _stmt_of(scanner: _Scanner, node: ast.AST) -> ast.stmt | None:
    cur: ast.AST | None = node
    while cur is not None and not isinstance(cur, ast.stmt):
        cur = scanner.parents.get(cur)
    return cur


@dataclass
class _Region:
    """A timed region in one function: the statements between a clock start and stop."""

    fn: ast.AST
    stmts: list[ast.stmt]
    method: str
    clock: str
    line: int
    anchor: ast.AST  # the start statement
    stop_line: int = 0


def _clock_regions(sc: _Scanner, fn: ast.AST) -> list[_Region]:
    """``t0 = clock()`` ... ``clock() - t0`` pairs in ``fn`` (or ``t1 = clock()`` then
    ``t1 - t0``), the region being the statements between them in the start's block."""
    starts: dict[str, list[tuple[ast.Assign, str]]] = {}
    regions: list[_Region] = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            c = sc.clock_of(node.value)
            if c:
                starts.setdefault(node.targets[0].id, []).append((node, c))

    def latest(name: str, line: int) -> tuple[ast.Assign, str] | None:
        """The clock assignment to ``name`` nearest before ``line``."""
        before = [st for st in starts.get(name, []) if st[0].lineno <= line]
        return max(before, key=lambda st: st[0].lineno) if before else None

    for node in ast.walk(fn):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and isinstance(node.right, ast.Name):
            left = node.left
            stop_node: ast.expr | ast.stmt = node
            if isinstance(left, ast.Name):
                st_left = latest(left.id, node.lineno)
                if st_left is None:
                    continue
                stop_node = st_left[0]
            elif not sc.clock_of(left):
                continue
            st = latest(node.right.id, stop_node.lineno - (1 if stop_node is not node else 0))
            if st is None or st[0] is stop_node:
                continue
            start_stmt, clock = st
            block, i = _enclosing_block(sc, start_stmt, fn)
            if i < 0:
                continue
            stop_stmt = _stmt_of(sc, stop_node)
            j = next((k for k in range(i + 1, len(block)) if any(x is stop_stmt for x in ast.walk(block[k]))), None)
            if j is None:
                continue
            body = block[i + 1:j + 1] if stop_stmt is not block[j] or sc.clock_of(left) else block[i + 1:j]
            stop_line = node.lineno if sc.clock_of(left) else stop_node.lineno
            regions.append(_Region(fn, body, "clock", clock, start_stmt.lineno, start_stmt, stop_line))
    return regions


def _event_regions(sc: _Scanner, fn: ast.AST) -> list[_Region]:
    """``start.record()`` ... ``end.record()`` pairs (CUDA events) in one block."""
    out = []
    for node in ast.walk(fn):
        for fld in ("body", "orelse"):
            block = getattr(node, fld, None)
            if not isinstance(block, list):
                continue
            recs = [i for i, s in enumerate(block)
                    if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
                    and _dotted(s.value.func).endswith(".record")]
            for a, b in zip(recs[::2], recs[1::2], strict=False):
                out.append(_Region(fn, block[a + 1:b + 1], "event", "cuda.Event", block[a].lineno, block[a],
                                   block[b].lineno))
    return out


def _walk_calls(stmts: list[ast.stmt]):
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, ast.Call):
                yield n


def scan_bench(task: Task) -> tuple[list[TimedUse], list[BenchIssue]]:
    """Read the task's ``bench`` file: where each side is timed and how, and the defects.

    Returns ``(uses, issues)``; both empty when the task has no bench entry or its file
    does not parse.
    """
    ep = task.entry.get("bench")
    sf = TaskSources(task.dir).file(ep.file) if ep is not None else None
    if sf is None:
        return [], []
    tree = sf.tree
    stems: dict[str, str] = {}
    names: dict[str, str] = {}
    for role, side in (("candidate", "candidate"), ("baseline", "baseline"), ("reference", "baseline")):
        ep = task.entry.get(role)
        if ep is None or (role == "reference" and "baseline" in task.entry):
            continue
        stems.setdefault(Path(ep.file).stem, side)
        names.setdefault(ep.name, side)
    sc = _Scanner(tree, stems, names)
    uses: list[TimedUse] = []
    misuse: list[BenchIssue] = []
    helpers: dict[str, list[tuple[str, _Region | ast.Call, str]]] = {}
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    for fn in functions:
        params = [a.arg for a in fn.args.args + fn.args.kwonlyargs]
        env = _function_env(sc, fn)
        regions = _clock_regions(sc, fn) + _event_regions(sc, fn)
        for reg in regions:
            if reg.clock in ("time", "time_ns"):
                misuse.append(BenchIssue(
                    "timer-misuse", "times with time.time(): a wall clock that can jump (NTP) and whose "
                    "resolution the Python docs do not guarantee; the docs recommend time.perf_counter() for "
                    "benchmarks", ("candidate", "baseline"), False, reg.line))
            timed_sides = set()
            for call in _walk_calls(reg.stmts):
                tags = sc.side_of(call.func, env)
                for p in params:
                    if isinstance(call.func, ast.Name) and call.func.id == p:
                        helpers.setdefault(fn.name, []).append((p, reg, "param"))
                for side in tags & {"candidate", "baseline"}:
                    timed_sides.add(side)
                    uses.append(_use_from_region(sc, fn, reg, side, call, env))
        for call in (n for n in ast.walk(fn) if isinstance(n, ast.Call)):
            if sc.is_do_bench(call) and call.args:
                target = call.args[0]
                for p in params:
                    if isinstance(target, ast.Name) and target.id == p:
                        helpers.setdefault(fn.name, []).append((p, call, "do_bench"))
                for side in sc.side_of(target, env) & {"candidate", "baseline"}:
                    uses.append(_use_do_bench(sc, fn, call, side, env))
                misuse += _do_bench_misuse(sc, fn, call)
            if sc.is_timer_ctor(call):
                for side in _timer_sides(sc, call, env):
                    uses.append(_use_timer(sc, fn, call, side))
                misuse += _timer_misuse(sc, fn, call)
    # helper call sites: _time_ms(lambda: candidate(a, b), device)
    for fn in functions:
        env = _function_env(sc, fn)
        for call in (n for n in ast.walk(fn) if isinstance(n, ast.Call)):
            hname = _dotted(call.func)
            if hname not in helpers:
                continue
            hfn = sc.funcs.get(hname)
            if hfn is None:
                continue
            hparams = [a.arg for a in hfn.args.args]
            for p, where, how in helpers[hname]:
                arg = _arg_for(call, hparams, p)
                for side in sc.side_of(arg, env) & {"candidate", "baseline"}:
                    if how == "do_bench":
                        u = _use_do_bench(sc, hfn, where, side, {})  # type: ignore[arg-type]
                    else:
                        u = _use_from_region(sc, hfn, where, side, None, {}, param=p)  # type: ignore[arg-type]
                    u.helper, u.line = hname, call.lineno
                    u.paths = u.paths & sc.paths_of(call)
                    inner = _lambda_call(arg)
                    if inner is not None:
                        u.args = tuple(ast.unparse(a) for a in inner.args)
                        u.arg_lines = _arg_lines(sc, fn, inner.args)
                        u.setup = tuple(dict.fromkeys(u.setup + tuple(
                            ast.unparse(c) for a in inner.args for c in ast.walk(a) if isinstance(c, ast.Call))))
                    u.compiled = u.compiled or _is_compiled(sc, arg, env)
                    if not u.warmup:
                        u.warmup = _called_before(sc, fn, call, side, env)
                        u.first_timed = not u.warmup
                    uses.append(u)
    uses = [u for u in uses if u.paths]
    entry = task.entry["bench"].name
    agg = _aggregates(sc, sc.funcs.get(entry))
    return _dedupe(uses), misuse + _issues(uses) + _aggregate_issues(agg)


_AGGREGATORS = {"median": "median", "mean": "mean", "fmean": "mean", "min": "min", "max": "max",
                "nanmedian": "median", "nanmean": "mean", "average": "mean", "percentile": "percentile",
                "quantile": "percentile", "sum": "sum"}


def _aggregate_of(sc: _Scanner, fn: ast.AST, expr: ast.AST | None, depth: int = 0) -> tuple[str, int]:
    """The statistic an expression applies to a list of times (``median``, ``mean``,
    ``min``...), following one level of local names; ``("", 0)`` when unknown."""
    if expr is None or depth > 3:
        return "", 0
    if isinstance(expr, ast.Call):
        name = _dotted(expr.func).rpartition(".")[2]
        if name in _AGGREGATORS:
            return _AGGREGATORS[name], expr.lineno
        if name in ("float", "round") and expr.args:
            return _aggregate_of(sc, fn, expr.args[0], depth + 1)
        if sc.is_do_bench(expr):
            mode = next((ast.literal_eval(k.value) for k in expr.keywords if k.arg == "return_mode"
                         and isinstance(k.value, ast.Constant)), "mean")
            return f"do_bench {mode}", expr.lineno
        if isinstance(expr.func, ast.Name) and expr.func.id in sc.funcs and depth < 2:
            hfn = sc.funcs[expr.func.id]
            for r in (n for n in ast.walk(hfn) if isinstance(n, ast.Return)):
                got = _aggregate_of(sc, hfn, r.value, depth + 1)
                if got[0]:
                    return got
    if isinstance(expr, ast.BinOp):
        if isinstance(expr.op, ast.Div) and isinstance(expr.left, ast.Call) and _dotted(expr.left.func) == "sum":
            return "mean", expr.lineno
        for side in (expr.left, expr.right):
            got = _aggregate_of(sc, fn, side, depth + 1)
            if got[0]:
                return got
    if isinstance(expr, ast.Attribute) and expr.attr in ("median", "mean", "min"):
        return expr.attr, expr.lineno
    if isinstance(expr, ast.Name):
        for n in ast.walk(fn):
            if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == expr.id for t in n.targets):
                got = _aggregate_of(sc, fn, n.value, depth + 1)
                if got[0]:
                    return got
    return "", 0


def _aggregates(sc: _Scanner, fn: ast.AST | None) -> dict[str, tuple[str, int]]:
    """The statistic behind ``candidate_ms`` and ``baseline_ms`` in the entry's return."""
    out: dict[str, tuple[str, int]] = {}
    if fn is None:
        return out
    for n in ast.walk(fn):
        d = None
        if isinstance(n, ast.Dict):
            d = {k.value: v for k, v in zip(n.keys, n.values, strict=True)
                 if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        elif isinstance(n, ast.Call) and _dotted(n.func) == "dict":
            d = {k.arg: k.value for k in n.keywords if k.arg}
        if not d:
            continue
        for key, side in (("candidate_ms", "candidate"), ("baseline_ms", "baseline")):
            if key in d and side not in out:
                got = _aggregate_of(sc, fn, d[key])
                if got[0]:
                    out[side] = got
    return out


def _aggregate_issues(agg: dict[str, tuple[str, int]]) -> list[BenchIssue]:
    c, b = agg.get("candidate"), agg.get("baseline")
    if not c or not b or c[0] == b[0]:
        return []
    return [BenchIssue(
        "aggregate-differs", f"the sides are summarised by different statistics: candidate_ms is the {c[0]} of its "
        f"samples (line {c[1]}), baseline_ms the {b[0]} (line {b[1]}); a mean keeps every outlier (a first call, a "
        "page fault), a median or minimum drops them", ("candidate", "baseline"), True, min(c[1], b[1]), "any",
        {"candidate": c[0], "baseline": b[0], "lines": {"candidate": c[1], "baseline": b[1]}})]


def _function_env(sc: _Scanner, fn: ast.AST) -> dict[str, set[str]]:
    """Local names bound to a side inside ``fn`` (assignment order ignored: a bench
    rarely rebinds a name to the other side)."""
    env: dict[str, set[str]] = {}
    for _ in range(2):
        for n in ast.walk(fn):
            if isinstance(n, ast.Assign):
                tags = sc.side_of(n.value, env)
                if not tags:
                    continue
                for t in n.targets:
                    for x in ast.walk(t):
                        if isinstance(x, ast.Name):
                            env[x.id] = env.get(x.id, set()) | tags
                if isinstance(n.value, ast.Call) and _dotted(n.value.func) in ("torch.compile", "compile"):
                    for t in n.targets:
                        if isinstance(t, ast.Name):
                            sc.compiled.add(t.id)
    return env


def _arg_for(call: ast.Call, params: list[str], p: str) -> ast.AST | None:
    for kw in call.keywords:
        if kw.arg == p:
            return kw.value
    if p in params and params.index(p) < len(call.args):
        return call.args[params.index(p)]
    return None


def _lambda_call(arg: ast.AST | None) -> ast.Call | None:
    if isinstance(arg, ast.Lambda) and isinstance(arg.body, ast.Call):
        return arg.body
    if isinstance(arg, ast.Call) and _dotted(arg.func).endswith("partial") and arg.args:
        return ast.Call(func=arg.args[0], args=arg.args[1:], keywords=arg.keywords)
    return None


def _is_compiled(sc: _Scanner, arg: ast.AST | None, env: dict[str, set[str]]) -> bool:
    if arg is None:
        return False
    for n in ast.walk(arg):
        if isinstance(n, ast.Name) and n.id in sc.compiled:
            return True
        if isinstance(n, ast.Call) and _dotted(n.func) == "torch.compile":
            return True
    return False


def _arg_lines(sc: _Scanner, fn: ast.AST, args: list[ast.expr]) -> dict[str, int]:
    """Where each Name argument was last assigned in ``fn``."""
    out: dict[str, int] = {}
    want = {n.id for a in args for n in ast.walk(a) if isinstance(n, ast.Name)}
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                for x in ast.walk(t):
                    if isinstance(x, ast.Name) and x.id in want:
                        out[x.id] = n.lineno
    return out


def _called_before(sc: _Scanner, fn: ast.AST, node: ast.AST, side: str, env: dict[str, set[str]]) -> bool:
    """True when ``side`` is called (or handed to a helper) in ``fn`` before ``node``'s
    statement, in source order."""
    stop = _stmt_of(sc, node)
    line = getattr(stop, "lineno", 0)
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and getattr(n, "lineno", 0) < line:
            if n is node:
                continue
            if side in sc.side_of(n.func, env):
                return True
            if isinstance(n.func, ast.Name) and n.func.id in ("range",):
                continue
            if any(isinstance(a, ast.Lambda) and side in sc.side_of(a, env) for a in n.args):
                return True
    return False


def _region_has(stmts: list[ast.stmt], pred) -> bool:
    return any(pred(c) for c in _walk_calls(stmts))


def _use_from_region(sc: _Scanner, fn: ast.AST, reg: _Region, side: str, call: ast.Call | None,
                     env: dict[str, set[str]], param: str = "") -> TimedUse:
    """A :class:`TimedUse` for a side called inside a clock/event region."""
    sync = _region_has(reg.stmts, sc.is_sync)
    flush = _region_has(reg.stmts, sc.is_flush)
    block, i = _enclosing_block(sc, reg.anchor, fn)
    if not flush and i > 0:
        # a flush right before the clock start, in the same block
        flush = _region_has(block[max(0, i - 2):i], sc.is_flush)
    loop_inside = any(isinstance(n, ast.For | ast.While) for s in reg.stmts for n in ast.walk(s))
    repeated = sc.in_loop(reg.anchor, fn)
    if param:
        warm = any(isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == param
                   and c.lineno < reg.line for c in ast.walk(fn))
    else:
        warm = _called_before(sc, fn, reg.anchor, side, env)
    u = TimedUse(side=side, line=(call.lineno if call is not None else reg.line), method=reg.method,
                 clock=reg.clock, paths=sc.paths_of(reg.anchor), warmup=warm, sync=sync or reg.method == "event",
                 flush=flush, first_timed=not warm, in_loop=repeated or loop_inside,
                 region=_stmts_lines(reg.stmts) if reg.stmts else (reg.line, reg.line),
                 clock_lines=(reg.line, reg.stop_line))
    if call is not None:
        u.args = tuple(ast.unparse(a) for a in call.args)
        u.arg_lines = _arg_lines(sc, fn, call.args)
        u.compiled = _is_compiled(sc, call.func, env)
        u.setup = _setup_calls(sc, reg.stmts, call, env)
        u.fresh_inputs, u.fresh_line = _fresh_inputs(sc, reg.anchor, fn, call.args)
    return u


def _fresh_inputs(sc: _Scanner, node: ast.AST, fn: ast.AST, args: list[ast.expr]) -> tuple[tuple[str, ...], int]:
    """Argument names assigned inside the innermost loop around ``node`` (inside ``fn``):
    the timed call gets new inputs every iteration."""
    loop = sc.parents.get(node)
    while loop is not None and loop is not fn and not isinstance(loop, ast.For | ast.While):
        loop = sc.parents.get(loop)
    if loop is None or loop is fn:
        return (), 0
    want = {n.id for a in args for n in ast.walk(a) if isinstance(n, ast.Name)}
    got: dict[str, int] = {}
    for n in ast.walk(loop):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                for x in ast.walk(t):
                    if isinstance(x, ast.Name) and x.id in want:
                        got.setdefault(x.id, n.lineno)
    return tuple(sorted(got)), min(got.values(), default=0)


#: calls that are bookkeeping, not work, inside a timed region
_BOOKKEEPING = {"append", "extend", "range", "len", "print", "float", "int", "min", "max", "sum", "enumerate",
                "zip", "record", "elapsed_time", "Event", "time", "perf_counter", "perf_counter_ns", "monotonic",
                "monotonic_ns", "time_ns", "default_timer", "process_time", "format", "join", "add_", "mean",
                "median", "fmean", "isinstance", "getattr", "no_grad", "inference_mode", "autocast",
                "nullcontext", "record_function", "enable_grad", "set_grad_enabled"}


def _setup_calls(sc: _Scanner, stmts: list[ast.stmt], call: ast.Call, env: dict[str, set[str]]) -> tuple[str, ...]:
    """Work timed together with the side's call: the call's own arguments that are calls
    (``x.clone()``) and other calls in the region that are not the side, a clock, a
    synchronize, a flush or bookkeeping."""
    inside_func = {id(n) for n in ast.walk(call.func)}
    out: list[str] = []
    for c in _walk_calls(stmts):
        if c is call or id(c) in inside_func or sc.is_sync(c) or sc.is_flush(c) or sc.clock_of(c):
            continue
        name = _dotted(c.func).rpartition(".")[2] or type(c.func).__name__
        if name in _BOOKKEEPING or sc.side_of(c.func, env) & {"candidate", "baseline"}:
            continue
        out.append(ast.unparse(c))
    return tuple(dict.fromkeys(out))


def _use_do_bench(sc: _Scanner, fn: ast.AST, call: ast.Call, side: str, env: dict[str, set[str]]) -> TimedUse:
    """do_bench warms up, flushes the L2 before each run and times with CUDA events."""
    u = TimedUse(side=side, line=call.lineno, method="do_bench", clock="cuda.Event",
                 paths=sc.paths_of(call), warmup=True, sync=True, flush=True, first_timed=False,
                 in_loop=True, region=(call.lineno, call.end_lineno or call.lineno))
    inner = _lambda_call(call.args[0]) if call.args else None
    if inner is not None:
        u.args = tuple(ast.unparse(a) for a in inner.args)
        u.arg_lines = _arg_lines(sc, fn, inner.args)
    return u


def _timer_sides(sc: _Scanner, call: ast.Call, env: dict[str, set[str]]) -> set[str]:
    out: set[str] = set()
    for kw in call.keywords:
        if kw.arg == "globals" and isinstance(kw.value, ast.Dict):
            out |= sc.side_of(kw.value, env)
        if kw.arg == "stmt" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
            for name, tags in {**sc.module_tags, **env}.items():
                if name in kw.value.value:
                    out |= tags
    for a in call.args:
        if isinstance(a, ast.Constant) and isinstance(a.value, str):
            for name, tags in {**sc.module_tags, **env}.items():
                if name in a.value:
                    out |= tags
    return out & {"candidate", "baseline"}


def _use_timer(sc: _Scanner, fn: ast.AST, call: ast.Call, side: str) -> TimedUse:
    """torch.utils.benchmark.Timer: warm-up inside timeit/blocked_autorange, synchronises
    the accelerator, no cache flush."""
    return TimedUse(side=side, line=call.lineno, method="timer", clock="torch.utils.benchmark.Timer",
                    paths=sc.paths_of(call), warmup=True, sync=True, flush=False, in_loop=True,
                    region=(call.lineno, call.end_lineno or call.lineno))


def _uses_of_name(fn: ast.AST, name: str) -> list[ast.Name]:
    return [n for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]


def _do_bench_misuse(sc: _Scanner, fn: ast.AST, call: ast.Call) -> list[BenchIssue]:
    """do_bench returns milliseconds (a float, or a list with ``quantiles``/``all``):
    flag a result scaled by 1e3 (read as seconds) or divided by a repeat count."""
    out: list[BenchIssue] = []
    parent = sc.parents.get(call)
    targets: list[str] = []
    if isinstance(parent, ast.Assign):
        targets = [t.id for t in parent.targets if isinstance(t, ast.Name)]
    exprs: list[ast.AST | None] = [parent] if isinstance(parent, ast.BinOp) else []
    for t in targets:
        # uses reached by this assignment: before the name is assigned again
        later = [n.lineno for n in ast.walk(fn) if isinstance(n, ast.Assign) and n.lineno > call.lineno
                 and any(isinstance(x, ast.Name) and x.id == t for tt in n.targets for x in ast.walk(tt))]
        until = min(later, default=10 ** 9)
        exprs += [sc.parents.get(u) for u in _uses_of_name(fn, t) if call.lineno <= u.lineno < until]
    for e in exprs:
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mult | ast.Div):
            other = e.right if (e.left is call or isinstance(e.left, ast.Name) and e.left.id in targets) else e.left
            if isinstance(other, ast.Constant) and other.value in (1000, 1e3, 1000.0, 1e6):
                out.append(BenchIssue(
                    "timer-misuse", f"scales triton.testing.do_bench's result by {other.value:g}: do_bench already "
                    "returns milliseconds (its docstring: 'the runtime(s) in milliseconds')",
                    ("candidate", "baseline"), False, e.lineno if hasattr(e, "lineno") else call.lineno))
    for kw in call.keywords:
        if kw.arg in ("warmup", "rep") and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, int) \
                and kw.value.value <= 5:
            out.append(BenchIssue(
                "timer-misuse", f"do_bench({kw.arg}={kw.value.value}): {kw.arg} is a time in milliseconds, not a "
                "count of runs", ("candidate", "baseline"), False, call.lineno))
    return out


def _timer_misuse(sc: _Scanner, fn: ast.AST, call: ast.Call) -> list[BenchIssue]:
    """torch.utils.benchmark.Timer: ``raw_times`` are per-block totals (``times`` are per
    run), ``timeit(1)`` times one run after a 2-run warm-up (no replicates)."""
    out: list[BenchIssue] = []
    parent = sc.parents.get(call)
    names = [t.id for t in parent.targets if isinstance(t, ast.Name)] if isinstance(parent, ast.Assign) else []
    chain_nodes: list[ast.AST] = [call]
    for nm in names:
        chain_nodes += _uses_of_name(fn, nm)
    for node in ast.walk(fn):
        if isinstance(node, ast.Attribute) and node.attr == "raw_times":
            out.append(BenchIssue(
                "timer-misuse", "reads Measurement.raw_times: per-block totals of number_per_run runs, not "
                "per-run times (Measurement.times / .median are per run)", ("candidate", "baseline"), False,
                node.lineno))
    for n in chain_nodes:
        p = sc.parents.get(n)
        if isinstance(p, ast.Attribute) and p.attr == "timeit":
            c = sc.parents.get(p)
            if isinstance(c, ast.Call) and c.args and isinstance(c.args[0], ast.Constant) and c.args[0].value == 1:
                out.append(BenchIssue(
                    "timer-misuse", "Timer.timeit(1): a single timed run (no replicates, so no noise estimate); "
                    "the Timer docs recommend blocked_autorange()", ("candidate", "baseline"), False, c.lineno))
    for kw in call.keywords:
        if kw.arg == "num_threads":
            out.append(BenchIssue("timer-misuse", f"Timer(num_threads={ast.unparse(kw.value)}): the thread count "
                                  "must be the same for both sides", ("candidate", "baseline"), False, call.lineno,
                                  detail={"num_threads": ast.unparse(kw.value)}))
    return out


def _dedupe(uses: list[TimedUse]) -> list[TimedUse]:
    seen: set[tuple[Any, ...]] = set()
    out = []
    for u in uses:
        k = (u.side, u.line, u.method, tuple(sorted(u.paths)), u.helper)
        if k not in seen:
            seen.add(k)
            out.append(u)
    return out


def _strip_calls(expr: str) -> str:
    """``"x.clone()"`` -> ``"x"``: the input an argument expression starts from."""
    try:
        node = parse_python(expr, mode="eval").body  # type: ignore[attr-defined]
    except SyntaxError:
        return expr
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        node = node.func.value
    return ast.unparse(node)


def _issues(uses: list[TimedUse]) -> list[BenchIssue]:
    """Defects from how each side is timed, per device path."""
    issues: list[BenchIssue] = []
    for path in ("cuda", "cpu"):
        by_side: dict[str, list[TimedUse]] = {}
        for u in uses:
            if path in u.paths:
                by_side.setdefault(u.side, []).append(u)
        c, b = by_side.get("candidate", []), by_side.get("baseline", [])
        for side, us in by_side.items():
            for u in us:
                if path == "cuda" and u.method == "clock" and not u.sync:
                    issues.append(BenchIssue(
                        "no-sync", f"the {side} is timed with time.{u.clock}() around CUDA launches without "
                        "torch.cuda.synchronize() (or event.synchronize()): kernel launches are asynchronous, so "
                        "the host clock measures the launch, not the kernel", (side,), False, u.line, path,
                        {"region": list(u.region)}))
                if u.first_timed and not u.in_loop and u.method in ("clock", "event"):
                    what = "the torch.compile'd callable (its first call compiles)" if u.compiled else "its first call"
                    issues.append(BenchIssue(
                        "first-call-timed", f"the {side}'s timed region (lines {u.region[0]}-{u.region[1]}) includes "
                        f"{what}: no warm-up call precedes it, so compilation, autotuning and lazy initialisation "
                        "are timed", (side,), False, u.line, path, {"region": list(u.region)}))
                elif u.first_timed and u.method in ("clock", "event"):
                    issues.append(BenchIssue(
                        "no-warmup", f"the {side} has no warm-up: the first of its repeated timed calls is a cold "
                        "first call (compilation, autotuning, lazy initialisation, first-touch page faults)",
                        (side,), False, u.line, path, {"region": list(u.region)}))
        if c and b:
            for kind, attr in (("do-bench-one-side", "method"), ("flush-one-side", "flush")):
                cv = {getattr(u, attr) for u in c}
                bv = {getattr(u, attr) for u in b}
                if cv != bv and len(cv) == 1 and len(bv) == 1:
                    (cm,), (bm,) = cv, bv
                    if kind == "do-bench-one-side" and "do_bench" not in (cm, bm):
                        kind = "method-differs"
                    if kind == "flush-one-side":
                        flushed = "candidate" if cm else "baseline"
                        other = "baseline" if cm else "candidate"
                        msg = (f"only the {flushed}'s timed runs are preceded by a cache flush: the {other} runs "
                               "with a warm cache")
                    else:
                        msg = f"the sides are timed differently: candidate with {cm}, baseline with {bm}"
                    issues.append(BenchIssue(kind, msg, ("candidate", "baseline"), True,
                                             min(u.line for u in c + b), path,
                                             {"candidate": str(cm), "baseline": str(bm)}))
            cs = {u.setup for u in c}
            bs = {u.setup for u in b}
            for side, mine, theirs in (("candidate", c, bs), ("baseline", b, cs)):
                work = sorted({w for u in mine for w in u.setup})
                if work and theirs == {()}:
                    u0 = next(u for u in mine if u.setup)
                    issues.append(BenchIssue(
                        "setup-in-timed-region", f"the {side}'s timed region (lines {u0.region[0]}-{u0.region[1]}) "
                        f"also times {', '.join(work)}: work the other side does outside its timed region",
                        (side,), True, u0.line, path, {"work": work, "region": list(u0.region)}))
            cf = [u for u in c if u.fresh_inputs]
            bf = [u for u in b if u.fresh_inputs]
            if bool(cf) != bool(bf):
                side, u0 = ("candidate", cf[0]) if cf else ("baseline", bf[0])
                other = "baseline" if side == "candidate" else "candidate"
                issues.append(BenchIssue(
                    "fresh-inputs-one-side", f"the {side} gets new inputs ({', '.join(u0.fresh_inputs)}, line "
                    f"{u0.fresh_line}) before every timed call while the {other} reuses one set: the sides run with "
                    "different cache and allocator states (warm against cold)", (side,), True, u0.line, path,
                    {"fresh_inputs": list(u0.fresh_inputs), "assigned_at": u0.fresh_line}))
            ca = {tuple(_strip_calls(a) for a in u.args) for u in c if u.args}
            ba = {tuple(_strip_calls(a) for a in u.args) for u in b if u.args}
            if ca and ba and not (ca & ba):
                cargs, bargs = sorted(ca)[0], sorted(ba)[0]
                lines = {**next(u.arg_lines for u in b if u.args), **next(u.arg_lines for u in c if u.args)}
                issues.append(BenchIssue(
                    "inputs-differ", f"the sides are called on different inputs: candidate({', '.join(cargs)}) vs "
                    f"baseline({', '.join(bargs)})", ("candidate", "baseline"), True,
                    min(u.line for u in c + b), path,
                    {"candidate_args": list(cargs), "baseline_args": list(bargs), "assigned_at": lines}))
    # one-sided per-side defects become asymmetric when the other side is clean on that path
    for iss in issues:
        if iss.kind in ("no-sync", "first-call-timed", "no-warmup"):
            other = "baseline" if iss.sides[0] == "candidate" else "candidate"
            iss.asymmetric = not any(o.kind == iss.kind and o.path == iss.path and other in o.sides for o in issues)
    merged: dict[tuple[Any, ...], BenchIssue] = {}
    for iss in issues:
        k = (iss.kind, iss.sides, iss.line)
        if k in merged:
            if merged[k].path != iss.path:
                merged[k].path = "any"
        else:
            merged[k] = iss
    return list(merged.values())
