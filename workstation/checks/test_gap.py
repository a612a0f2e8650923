"""``test-gap``: the author's own test passes where kws finds a mismatch in the same case."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from workstation.analysis.compare import Comparison, compare
from workstation.checks.support.trials import region_phrase
from workstation.engine.check import Check, Finding, Skip, register
from workstation.engine.context import CallOutcome, CheckContext, case_label
from workstation.protocol.extras.calls import AuthorTestExtra
from workstation.protocol.steps import AuthorTestStep
from workstation.task.sources import TaskSources

#: calls that compare two tensors (by the last part of their dotted name).
COMPARE_FUNCS = {"assert_close", "assert_allclose", "allclose", "isclose", "equal", "assert_equal",
                 "assert_array_equal", "assert_array_almost_equal", "assertTrue", "assertEqual"}
#: reductions that collapse an output before it is compared (errors cancel or hide).
REDUCTIONS = {"sum", "mean", "norm", "std", "var", "prod", "nansum", "nanmean"}
#: calls and names that select or neutralise elements before a comparison.
MASKING = {"where", "masked_select", "masked_fill", "nan_to_num", "isfinite", "isnan", "nonzero", "masked_scatter"}
#: calls whose arguments are (parts of) the compared tensors: comparisons, reductions,
#: masks and elementwise tensor operations. Other calls (the callables, make_inputs) are
#: not entered: what they are given is not what the test compares.
PASS_THROUGH = COMPARE_FUNCS | REDUCTIONS | MASKING | {
    "abs", "sub", "add", "mul", "div", "float", "double", "half", "to", "cpu", "detach", "max", "amax",
    "min", "amin", "all", "any", "item", "eq", "ne", "le", "lt", "ge", "gt", "flatten", "reshape", "view",
    "contiguous", "clone", "squeeze", "unsqueeze", "narrow", "select", "index_select", "gather", "diff",
}
#: a test tolerance this many times the declared one is reported as loose.
LOOSE_FACTOR = 10.0


@dataclass
class Observation:
    """Something the author's test does that can hide a mismatch.

    ``kind``: ``slice`` (compares part of an output), ``index`` (one row/element),
    ``reduction`` (compares a sum/mean/norm), ``mask`` (masks or neutralises elements),
    ``tolerance`` (looser than the declared tolerance), ``equal_nan``, ``skip`` (returns or
    skips before comparing), ``except`` (catches the assertion), ``no-compare``.
    ``subscript``: for slices and indices, the AST of the subscript (to evaluate per case).
    """

    kind: str
    line: int
    code: str
    detail: str
    subscript: Any = None
    value: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        d = {"kind": self.kind, "line": self.line, "code": self.code, "detail": self.detail}
        if self.value is not None:
            d["value"] = self.value
        return d | self.extra


def _name(func: ast.AST) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def _module_constants(tree: ast.Module) -> dict[str, ast.AST]:
    """Top-level ``NAME = <expr>`` assignments of a module."""
    env: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            env[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            env[node.target.id] = node.value
    return env


class AuthorTestScan:
    """The author's test function, parsed: its comparisons and what they leave out.

    Args:
        task_dir: the task folder (to resolve ``module.NAME`` constants of sibling files
            the test loads, e.g. ``candidate.BLOCK_N``).
        file: the test file, relative to ``task_dir``.
        func: the test callable's name.

    Raises:
        SyntaxError: the file does not read or parse (the message says which).
    """

    def __init__(self, task_dir: Path, file: str, func: str):
        self.task_dir, self.file = task_dir, file
        self.sources = TaskSources(task_dir)
        sf = self.sources.file(file)
        if sf is None:
            raise SyntaxError(self.sources.problems.get(file, f"cannot read {file}"))
        self.source, self.tree = sf.source, sf.tree
        self.module_env = _module_constants(self.tree)
        self.fn = next((n for n in ast.walk(self.tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
                        and n.name == func), None)
        self.env: dict[str, ast.AST] = {}
        self.module_alias: dict[str, str] = {}  # local name -> sibling file it was loaded from
        if self.fn is not None:
            for node in ast.walk(self.fn):
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    self.env[node.targets[0].id] = node.value
                    file_ = self._loaded_file(node.value)
                    if file_:
                        self.module_alias[node.targets[0].id] = file_
        for node in self.tree.body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                for a in node.names:
                    if isinstance(node, ast.Import) and (task_dir / f"{a.name}.py").is_file():
                        self.module_alias[a.asname or a.name] = f"{a.name}.py"
        self._sibling: dict[str, dict[str, ast.AST]] = {}

    def _loaded_file(self, value: ast.AST) -> str | None:
        """``_load("candidate.py")`` / ``_load("candidate")`` / ``import_module("candidate")``
        -> ``"candidate.py"`` when that file exists in the task folder."""
        if isinstance(value, ast.Call) and value.args and isinstance(value.args[0], ast.Constant) \
                and isinstance(value.args[0].value, str):
            stem = value.args[0].value.removesuffix(".py")
            if (self.task_dir / f"{stem}.py").is_file():
                return f"{stem}.py"
        return None

    def _sibling_env(self, file: str) -> dict[str, ast.AST]:
        if file not in self._sibling:
            sf = self.sources.file(file)
            self._sibling[file] = _module_constants(sf.tree) if sf is not None else {}
        return self._sibling[file]

    # -- evaluation ------------------------------------------------------------------------

    def eval_int(self, node: ast.AST | None, case: dict[str, Any], shape: tuple[int, ...], depth: int = 0) -> int | None:
        """An integer expression of the test evaluated for ``case`` (``case["N"]``, module
        constants, ``mod.NAME`` of a sibling file, ``x.shape[i]`` as the output's shape,
        + - * //), or ``None`` when it cannot be evaluated statically."""
        if node is None or depth > 8:
            return None
        ev = lambda n: self.eval_int(n, case, shape, depth + 1)  # noqa: E731
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            v = ev(node.operand)
            return -v if v is not None else None
        if isinstance(node, ast.Name):
            src = self.env.get(node.id, self.module_env.get(node.id))
            return ev(src) if src is not None else None
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            file = self.module_alias.get(node.value.id)
            if file:
                src = self._sibling_env(file).get(node.attr)
                return ev(src) if src is not None else None
            return None
        if isinstance(node, ast.Subscript):
            key = node.slice
            if isinstance(node.value, ast.Name) and isinstance(key, ast.Constant) and isinstance(key.value, str):
                v = case.get(key.value)
                return v if isinstance(v, int) and not isinstance(v, bool) else None
            if isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
                i = ev(key)
                if i is not None and -len(shape) <= i < len(shape):
                    return shape[i]
            return None
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            if a is None or b is None:
                return None
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if isinstance(node.op, ast.Mult):
                return a * b
            if isinstance(node.op, ast.FloorDiv) and b:
                return a // b
        return None

    def _slice_node(self, node: ast.AST) -> ast.AST:
        """Follow a name bound to ``slice(a, b)`` to that call."""
        if isinstance(node, ast.Name) and node.id in self.env:
            v = self.env[node.id]
            if isinstance(v, ast.Call) and _name(v.func) == "slice":
                return v
        return node

    def region(self, sub: ast.Subscript, case: dict[str, Any], shape: tuple[int, ...]) -> tuple[list[Any], str] | None:
        """The index tuple (Python slices and ints, one per leading dim) a subscript selects
        from an output of ``shape``, and its description (``"cols 0..255"``); ``None`` when
        it cannot be evaluated (a tensor mask, an unknown name)."""
        elts = list(sub.slice.elts) if isinstance(sub.slice, ast.Tuple) else [sub.slice]
        if any(isinstance(e, ast.Constant) and e.value is Ellipsis for e in elts):
            k = next(i for i, e in enumerate(elts) if isinstance(e, ast.Constant) and e.value is Ellipsis)
            fill = len(shape) - (len(elts) - 1)
            elts = elts[:k] + [ast.Slice()] * max(fill, 0) + elts[k + 1:]
        if len(elts) > len(shape):
            return None
        idx: list[Any] = []
        parts = []
        names = ["rows", "cols"] if len(shape) == 2 else (["elements"] if len(shape) == 1 else [f"dim{i}" for i in range(len(shape))])
        for d, elt in enumerate(elts):
            e = self._slice_node(elt)
            n = shape[d]
            if isinstance(e, ast.Slice) or (isinstance(e, ast.Call) and _name(e.func) == "slice"):
                if isinstance(e, ast.Slice):
                    lo_n, hi_n, st_n = e.lower, e.upper, e.step
                else:
                    a = e.args
                    lo_n, hi_n, st_n = (None, a[0], None) if len(a) == 1 else (a[0], a[1], a[2] if len(a) > 2 else None)
                lo = 0 if lo_n is None or (isinstance(lo_n, ast.Constant) and lo_n.value is None) else self.eval_int(lo_n, case, shape)
                hi = n if hi_n is None or (isinstance(hi_n, ast.Constant) and hi_n.value is None) else self.eval_int(hi_n, case, shape)
                st = 1 if st_n is None else self.eval_int(st_n, case, shape)
                if lo is None or hi is None or st is None or st <= 0:
                    return None
                s = slice(lo, hi, st)
                a0, b0, _ = s.indices(n)
                idx.append(s)
                if (a0, b0, st) != (0, n, 1):
                    parts.append(f"{names[d]} {a0}..{max(b0 - 1, a0)}" + (f" step {st}" if st != 1 else "") + f" of {n}")
            else:
                v = self.eval_int(e, case, shape)
                if v is None:
                    return None
                idx.append(v)
                parts.append(f"{names[d].rstrip('s')} {v} only")
        return idx, ", ".join(parts) or "everything"

    # -- static scan -----------------------------------------------------------------------

    def observations(self, declared_tol: tuple[float | None, float | None]) -> list[Observation]:
        """What the test function does that can hide a mismatch (see :class:`Observation`)."""
        if self.fn is None:
            return [Observation("no-compare", 0, "", "the test function was not found in the file")]
        obs: list[Observation] = []
        compares: list[ast.Call | ast.Assert] = []
        for node in ast.walk(self.fn):
            if isinstance(node, ast.Call) and _name(node.func) in COMPARE_FUNCS:
                compares.append(node)
            elif isinstance(node, ast.Assert):
                compares.append(node)
        if not compares:
            obs.append(Observation("no-compare", self.fn.lineno, f"def {self.fn.name}(...)",
                                   "no comparison call or assert statement in the test"))
        seen: set[tuple[str, int, str]] = set()

        def add(o: Observation) -> None:
            k = (o.kind, o.line, o.code)
            if k not in seen:
                seen.add(k)
                obs.append(o)

        for cmp in compares:
            exprs = [cmp.test] if isinstance(cmp, ast.Assert) else [*cmp.args, *(k.value for k in cmp.keywords)]
            for expr in exprs:
                for sub in self._walk_following_names(expr):
                    self._inspect(sub, add)
            if isinstance(cmp, ast.Call):
                for kw in cmp.keywords:
                    if kw.arg in ("atol", "rtol"):
                        v = self._eval_float(kw.value)
                        decl = declared_tol[0] if kw.arg == "atol" else declared_tol[1]
                        if v is not None and decl is not None and v > LOOSE_FACTOR * max(decl, 1e-300):
                            add(Observation("tolerance", kw.value.lineno, f"{kw.arg}={ast.unparse(kw.value)}",
                                            f"the test's {kw.arg} = {v:g} is {v / decl:.3g}x the declared {decl:g}", value=v))
                    if kw.arg == "equal_nan" and isinstance(kw.value, ast.Constant) and kw.value.value is True:
                        add(Observation("equal_nan", kw.value.lineno, "equal_nan=True", "NaN compares equal to NaN"))
        for node in ast.walk(self.fn):
            if isinstance(node, ast.Try):
                for h in node.handlers:
                    caught = ast.unparse(h.type) if h.type is not None else "everything"
                    if h.type is None or any(w in caught for w in ("AssertionError", "Exception", "BaseException")):
                        add(Observation("except", h.lineno, f"except {caught}",
                                        f"the test catches {caught} around its comparison"))
            elif isinstance(node, ast.Call) and _name(node.func) in ("skip", "skipTest", "xfail"):
                add(Observation("skip", node.lineno, ast.unparse(node), "the test skips itself"))
            elif isinstance(node, ast.If) and any(isinstance(s, ast.Return) for s in node.body):
                first_cmp = min((c.lineno for c in compares), default=10**9)
                if node.lineno < first_cmp:
                    add(Observation("skip", node.lineno, f"if {ast.unparse(node.test)}: return",
                                    "the test returns early (before comparing) on some cases"))
        return obs

    def _walk_following_names(self, expr: ast.AST, depth: int = 0):
        """The nodes of a compared expression, and of the expressions assigned to names it
        uses (so ``part = got[:, :256]`` ... ``assert_close(part, ...)`` is seen). The
        arguments of a call are entered only for tensor operations (:data:`PASS_THROUGH`):
        ``ref(x[0])`` selects an input, not the compared output."""
        stack = [expr]
        while stack:
            n = stack.pop()
            yield n
            if isinstance(n, ast.Name) and depth < 3 and n.id in self.env:
                v = self.env[n.id]
                if not (isinstance(v, ast.Call) and self._loaded_file(v)):
                    yield from self._walk_following_names(v, depth + 1)
            if isinstance(n, ast.Call):
                stack.append(n.func)
                if _name(n.func) in PASS_THROUGH:
                    stack.extend(n.args)
                    stack.extend(k.value for k in n.keywords)
            else:
                stack.extend(ast.iter_child_nodes(n))

    def _inspect(self, n: ast.AST, add) -> None:
        if isinstance(n, ast.Subscript) and not (isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str)):
            if isinstance(n.value, ast.Attribute) and n.value.attr == "shape":
                return
            code = ast.unparse(n)
            elts = n.slice.elts if isinstance(n.slice, ast.Tuple) else [n.slice]
            if any(self._is_mask(e) for e in elts):
                add(Observation("mask", n.lineno, code, "compares only the elements a mask selects"))
            elif any(isinstance(self._slice_node(e), ast.Slice | ast.Call) for e in elts):
                add(Observation("slice", n.lineno, code, "compares a slice of the output", subscript=n))
            else:
                add(Observation("index", n.lineno, code, "compares one index of the output", subscript=n))
        elif isinstance(n, ast.Call):
            nm = _name(n.func)
            if nm in REDUCTIONS:
                add(Observation("reduction", n.lineno, ast.unparse(n),
                                f"compares a {nm} of the output: errors can cancel or average out"))
            elif nm in MASKING:
                add(Observation("mask", n.lineno, ast.unparse(n), f"{nm}(...) selects or neutralises elements"))

    def _is_mask(self, e: ast.AST) -> bool:
        if isinstance(e, ast.Compare):
            return True
        if isinstance(e, ast.Name):
            if "mask" in e.id.lower():
                return True
            v = self.env.get(e.id)
            return isinstance(v, ast.Compare) or (isinstance(v, ast.Call) and _name(v.func) in MASKING)
        return False

    def _eval_float(self, node: ast.AST) -> float | None:
        try:
            v = ast.literal_eval(node)
        except (ValueError, SyntaxError, TypeError):
            if isinstance(node, ast.Name):
                src = self.env.get(node.id, self.module_env.get(node.id))
                return self._eval_float(src) if src is not None else None
            return None
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def slice_coverage(idx: list[Any], e: np.ndarray, g: np.ndarray, comp: Comparison) -> dict[str, Any]:
    """How many of kws's mismatches lie inside the region ``idx`` the test compares, and
    whether that region alone passes at the declared tolerance."""
    sel = tuple(idx)
    try:
        es, gs = e[sel], g[sel]
    except (IndexError, TypeError):
        return {}
    tol = comp.tolerance
    if tol is None:
        return {}
    inner = compare(np.atleast_1d(es), np.atleast_1d(gs), tol, expected_dtype=comp.dtype, got_dtype=comp.dtype)
    return {"mismatched_inside": inner.n_bad, "elements_inside": inner.numel, "mismatched_total": comp.n_bad,
            "slice_passes": inner.ok}


def _assertion(out: CallOutcome) -> str:
    """The AssertionError message of an ``author_test`` step that failed one ("" when none)."""
    return out.payload(AuthorTestExtra).assertion if out.step is not None else ""


@register
class TestGap(Check):
    """The author's own test passes where kws finds a mismatch in the same case.

    Catches:
        an author's own test that passes where the full comparison fails: it compares
        a slice (`out[:, :BLOCK]`), one row (`out[0]`), a sum or mean, masked or `nan_to_num`-ed
        outputs, uses a looser `atol`/`rtol` than declared, sets `equal_nan`, returns early or
        catches its own `AssertionError`.

    How:
        skipped when the task has no `[entry] test`. kws compares reference and candidate
        on every declared case and seed (the runs `correctness` has) and runs the author's
        `check(case, device, seed)` in a child (harness step `author_test`) on every case and seed
        where that comparison fails, plus one where it passes (a control that the test runs at
        all). Where the author's test passes and kws's comparison fails, the test function is
        parsed (`ast`) for what it leaves out: subscripts of the outputs inside its comparison
        calls and `assert` statements (followed through local names, e.g. `cols = slice(0,
        candidate.BLOCK_N)`), reductions, masking calls, `atol`/`rtol` more than 10x the declared
        ones, `equal_nan=True`, early returns, `except` clauses, `skip`. A slice is evaluated for
        the failing case (`case["N"]`, module constants, `x.shape[i]` and `module.NAME` constants
        of sibling files the test loads, e.g. `candidate.BLOCK_N = 256`) and related to kws's
        mismatches: how many of them lie inside the compared region, and whether that region
        alone passes at the declared tolerance.

    Findings:
        | finding | severity |
        |---|---|
        | per case: the author's test passes (seeds) where kws's comparison fails; kws's comparison and mismatch region; what the test compares instead, with file and line (`evidence.source` points at it) | `fail` |
        | the author's test raises (not an `AssertionError`) on every run | `warn` (on some runs: `info`) |
        | the author's test fails where kws passes (a stricter test) | `info` |
        | the runs made, no gap | `info` |

    Example:
        (`layernorm-testgap`): `the author's test passes on case M=8 N=768 float32
        (seeds 0, 1, 2) where kws's full comparison fails: 4096 of 6144 elements (66.7%) outside
        atol=1e-05, rtol=1e-05 [declared [tolerance]]; mismatches in all 8 rows, cols 256..767 of
        768 (everything past the first 256); the test compares only cols 0..255 of 768:
        `got[:, cols]` (test.py:33); 0 of kws's 4096 mismatches lie inside it and that part alone
        passes`.

    Limits:
        the scan reads the test function and the names it assigns, not helper functions
        it calls; a gap it cannot explain is still a `fail`, reported with "the static scan ...
        found no slice, mask, reduction or loose tolerance to explain it". The author's test runs
        on the device kws runs on (the CPU interpreter here), with the author's own inputs.

    Not judged when:
        the candidate's backend or a library a task file imports cannot run here, a step was
        stopped by a limit that says nothing about the code, or `make_inputs` or the reference is
        broken on a declared case (a task problem naming the file): `NotJudged`. The author's test
        did not run to a verdict (raised other than an `AssertionError`, died, hung) on every run
        it was given: `warn`; on some runs only: `info`; where such a run is one on which kws's
        comparison fails, no gap could be seen there: not judged for it (the reason names the
        first such run). A run on which the reference died: not judged for it (no comparison was
        made). A test file that cannot be parsed leaves a gap a `fail`, unexplained.

    Forgeable:
        Measured in the job process: source, jaxpr, compiler output and attached files read by kws.
        Still forgeable from inside: nothing at run time (static); the sources may of course lie in comments.
    """

    id = "test-gap"
    order = 17
    title = "The author's test passes where kws fails"

    def run(self, ctx: CheckContext) -> list[Finding]:
        ep = ctx.task.entry.get("test")
        if ep is None:
            raise Skip("the task has no test entry ([entry] test)")
        pairs = ctx.declared_pairs()
        refs = ctx.reference(pairs)
        cands = ctx.candidate(pairs)
        kws_bad: dict[int, tuple[list[Comparison] | None, CallOutcome, CallOutcome]] = {}
        for k, (ref, cand) in enumerate(zip(refs, cands, strict=True)):
            if not ref.ok:
                ctx.could_not_judge(f"case {case_label(pairs[k][0])} seed {pairs[k][1]}: the reference "
                                     f"{ref.failure_text()}, so kws's comparison there (and the author's test "
                                     "against it) was not made")
                continue
            if not cand.ok:
                kws_bad[k] = (None, ref, cand)
                continue
            comps = ctx.compare(ref, cand, pairs[k][0])
            if not all(c.ok for c in comps):
                kws_bad[k] = (comps, ref, cand)
        # plus one control run where kws passes: does the test run at all?
        control = next((k for k in range(len(pairs)) if k not in kws_bad and refs[k].ok), None)
        run_idx = sorted(set(kws_bad) | ({control} if control is not None else set()))
        steps = [AuthorTestStep(case=pairs[k][0], seed=pairs[k][1]) for k in run_idx]
        tests = dict(zip(run_idx, ctx.calls(steps, memo=True), strict=True))
        try:
            src: AuthorTestScan | None = AuthorTestScan(ctx.task.dir, ep.file, ep.name)
        except (OSError, SyntaxError, UnicodeDecodeError):
            src = None
        findings: list[Finding] = []
        gaps: dict[int, list[int]] = {}
        broken, stricter = [], []
        for k, out in tests.items():
            passed = out.ok and out.step is not None and out.payload(AuthorTestExtra).passed
            if not out.ok:
                broken.append((k, out))
            elif k in kws_bad and passed:
                gaps.setdefault(k // len(ctx.seeds), []).append(k)
            elif k not in kws_bad and not passed:
                stricter.append((k, out))
        for ks in gaps.values():
            findings.append(self._gap(ctx, src, pairs, ks, kws_bad))
        unseen = [(k, out) for k, out in broken if k in kws_bad]
        if unseen:
            k, out = unseen[0]
            ctx.could_not_judge(
                f"the author's test did not run to a verdict on {len(unseen)} of the {len(kws_bad)} case/seed runs "
                f"where kws's comparison fails ({out.failure_text()}, case {case_label(pairs[k][0])} seed "
                f"{pairs[k][1]}), so whether it passes there (a gap) was not observed")
        if broken:
            k, out = broken[0]
            sev = "warn" if len(broken) == len(tests) else "info"
            findings.append(self.finding(
                ctx, sev,
                f"the author's test does not run to a verdict on {len(broken)} of {len(tests)} case/seed runs: "
                f"{out.failure_text()} (case {case_label(pairs[k][0])}, seed {pairs[k][1]})",
                {"runs": [{"case": pairs[j][0], "seed": pairs[j][1], **o.failure_evidence()} for j, o in broken]},
                case=pairs[k][0], seed=pairs[k][1]))
        if stricter:
            k, out = stricter[0]
            findings.append(self.finding(
                ctx, "info",
                f"the author's test fails where kws's comparison passes (case {case_label(pairs[k][0])}, seed "
                f"{pairs[k][1]}): {_assertion(out)[:200]}",
                {"runs": [{"case": pairs[j][0], "seed": pairs[j][1], "assertion": _assertion(o)}
                          for j, o in stricter]},
                case=pairs[k][0], seed=pairs[k][1]))
        if not gaps:
            findings.append(self.finding(
                ctx, "info",
                f"ran the author's test on {len(tests)} case/seed runs ({len(kws_bad)} where kws's full comparison fails): "
                + ("no run where it passes and kws fails" if kws_bad else "kws's comparison passes everywhere, so no gap"),
                {"runs": [{"case": pairs[k][0], "seed": pairs[k][1],
                           "author_test": ("passed" if o.ok and o.step and o.payload(AuthorTestExtra).passed
                                           else "failed" if o.ok else "error"),
                           "kws": "fail" if k in kws_bad else "pass"} for k, o in tests.items()]}))
        return findings

    def _gap(self, ctx: CheckContext, src: AuthorTestScan | None, pairs: list[tuple[dict[str, Any], int]],
             ks: list[int], kws_bad: dict[int, Any]) -> Finding:
        k0 = ks[0]
        case, seed = pairs[k0]
        seeds = [pairs[k][1] for k in ks]
        comps, ref, cand = kws_bad[k0]
        test_file = ctx.task.entry["test"].file
        if comps is None:
            kws_text = f"the candidate {cand.failure_text()}"
            comp, j = None, 0
        else:
            j, comp = next((jj, c) for jj, c in enumerate(comps) if not c.ok)
            where = region_phrase(comp)
            kws_text = f"{comp.reason}" + (f"; mismatches in {where}" if where else "")
        tol = ctx.task.tolerance_for_case(case)
        obs = src.observations((tol.atol, tol.rtol)) if src is not None else []
        explained: list[str] = []
        regions: dict[tuple[int, str], list[str]] = {}
        for o in obs:
            text = f"{o.detail}: `{o.code}` ({test_file}:{o.line})"
            if o.kind in ("slice", "index") and o.subscript is not None and comp is not None:
                e, g = ref.outputs[j].values, cand.outputs[j].values
                reg = src.region(o.subscript, case, tuple(e.shape)) if src is not None else None
                if reg is not None:
                    idx, desc = reg
                    cov = slice_coverage(idx, e, g, comp)
                    o.extra.update({"compared_region": desc, **cov})
                    if (o.line, desc) in regions:  # got[:, s] and expected[:, s]: one remark
                        regions[(o.line, desc)].append(o.code)
                        continue
                    regions[(o.line, desc)] = [o.code]
                    text = f"the test compares only {desc}: `{o.code}` ({test_file}:{o.line})"
                    if cov:
                        text += (f"; {cov['mismatched_inside']} of kws's {cov['mismatched_total']} mismatches lie inside it"
                                 + (" and that part alone passes" if cov["slice_passes"] else ""))
            explained.append(text)
        summary = (f"the author's test passes on case {case_label(case)} (seed{'s' if len(seeds) > 1 else ''} "
                   f"{', '.join(map(str, seeds))}) where kws's full comparison fails: {kws_text}")
        if explained:
            summary += "; " + "; ".join(explained[:2])
        else:
            summary += "; the static scan of the test found no slice, mask, reduction or loose tolerance to explain it"
        ev: dict[str, Any] = {"case": case, "seeds": seeds, "author_test": "passed",
                              "kws": comp.evidence() if comp is not None else cand.failure_evidence(),
                              "test_observations": [o.as_dict() for o in obs]}
        lead = next((o for o in obs if o.kind in ("slice", "index", "mask", "reduction")), obs[0] if obs else None)
        if lead is not None and lead.line:
            ev["source"] = {"file": test_file, "line": lead.line}
        return self.finding(ctx, "fail", summary, ev, case=case, seed=seed)
