"""``autotune``: faults that ``@triton.autotune`` hides."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np

from workstation.analysis.compare import Comparison, compare, region_text
from workstation.checks.support.benchsource import _dotted
from workstation.engine.check import Check, Finding, NotJudged, Skip, register
from workstation.engine.context import CheckContext, case_label, step_timeout_s
from workstation.protocol.extras import extra_as
from workstation.protocol.extras.autotune import (
    AutotuneProbeExtra,
    AutotunerDesc,
    ProbeCall,
    TunedCall,
)
from workstation.protocol.results import Raised, TensorMeta
from workstation.protocol.steps import AutotuneProbeStep, Case
from workstation.protocol.wire import TensorData, WireError, tensor_from
from workstation.task.model import Task
from workstation.task.sources import TaskSources, package_closure

#: decorator names that make an autotuner: Triton's, and FlagGems' ``libtuner`` (a
#: ``triton.runtime.Autotuner`` subclass with the same ``configs`` / ``key`` /
#: ``reset_to_zero`` / ``restore_value`` arguments).
AUTOTUNE_DECORATORS = ("autotune", "libtuner")

ATOMICS = ("atomic_add", "atomic_max", "atomic_min", "atomic_xchg", "atomic_cas", "atomic_and", "atomic_or",
           "atomic_xor")


@dataclass
class KernelSource:
    """An ``@triton.autotune`` kernel as written: where, its configs, its hooks, and the
    pointer arguments it accumulates into (``tl.atomic_*``) or updates in place (loads
    and stores through the same pointer argument), with lines."""

    name: str
    file: str
    line: int
    n_configs: int | None
    reset_to_zero: list[str] | None
    restore_value: list[str] | None
    pre_hook: bool
    atomics: dict[str, tuple[int, str]] = field(default_factory=dict)
    in_place: dict[str, int] = field(default_factory=dict)

    def hazards(self) -> dict[str, tuple[str, int]]:
        """Pointer args written more than once across launches and not reset/restored:
        ``{arg: (how, line)}``."""
        covered = set(self.reset_to_zero or []) | set(self.restore_value or [])
        out: dict[str, tuple[str, int]] = {}
        for a, (ln, op) in self.atomics.items():
            if a not in covered:
                out[a] = (f"accumulates into `{a}` with tl.{op}", ln)
        for a, ln in self.in_place.items():
            if a not in covered and a not in out:
                out[a] = (f"loads and stores `{a}` in place", ln)
        return out

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _literal_names(node: ast.AST | None) -> list[str] | None:
    if node is None:
        return None
    try:
        v = ast.literal_eval(node)
    except ValueError:
        return None
    return [str(x) for x in v] if isinstance(v, list | tuple) else None


def _additive_names(expr: ast.AST) -> set[str]:
    """Names in additive position of an address expression: ``c_ptr + offs * stride``
    -> {c_ptr, offs}; products, calls and subscripts of non-pointers do not carry a base."""
    if isinstance(expr, ast.Name):
        return {expr.id}
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add | ast.Sub):
        return _additive_names(expr.left) | _additive_names(expr.right)
    if isinstance(expr, ast.Subscript):  # ptrs[:, None]
        return _additive_names(expr.value)
    if isinstance(expr, ast.Call) and _dotted(expr.func).rpartition(".")[2] in ("advance", "multiple_of",
                                                                               "max_contiguous"):
        return _additive_names(expr.args[0]) if expr.args else set()
    return set()


def _derivations(fn: ast.FunctionDef, params: set[str]) -> dict[str, set[str]]:
    """Local name -> the parameters it is a pointer offset from (``c_ptrs = c_ptr + offs``,
    ``a_ptrs += step``), followed to a fixed point."""
    der: dict[str, set[str]] = {p: {p} for p in params}
    changed = True
    while changed:
        changed = False
        for n in ast.walk(fn):
            if isinstance(n, ast.Assign | ast.AugAssign | ast.AnnAssign) and n.value is not None:
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                src = set().union(*(der.get(x, set()) for x in _additive_names(n.value)))
                for t in targets:
                    if isinstance(t, ast.Name) and not src <= der.get(t.id, set()):
                        der[t.id] = der.get(t.id, set()) | src
                        changed = True
    return der


def _base_params(expr: ast.AST, der: dict[str, set[str]], params: set[str]) -> set[str]:
    """Pointer parameters an address expression is an offset from."""
    out: set[str] = set()
    for name in _additive_names(expr):
        out |= der.get(name, set())
    return out & params


def scan_autotune(task: Task) -> list[KernelSource]:
    """Every ``@triton.autotune``-decorated function (or FlagGems ``@libtuner``) in the
    candidate's file, the task modules it imports, and the installed-package modules they
    import (:func:`~workstation.task.sources.package_closure`), read with :mod:`ast`
    (never imported here)."""
    ep = task.entry.get("candidate")
    if ep is None:
        return []
    out: list[KernelSource] = []
    src = TaskSources(task.dir)
    for sf, _chain in [*src.closure(ep.file), *package_closure(src, ep.file)]:
        tree = sf.tree
        for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            deco = next((d for d in fn.decorator_list if isinstance(d, ast.Call)
                         and _dotted(d.func).rpartition(".")[2] in AUTOTUNE_DECORATORS), None)
            if deco is None:
                continue
            kw = {k.arg: k.value for k in deco.keywords if k.arg}
            configs = kw.get("configs", deco.args[0] if deco.args else None)
            ks = KernelSource(
                name=fn.name, file=sf.rel, line=deco.lineno,
                n_configs=len(configs.elts) if isinstance(configs, ast.List | ast.Tuple) else None,
                reset_to_zero=_literal_names(kw.get("reset_to_zero")) or ([] if "reset_to_zero" not in kw else None),
                restore_value=_literal_names(kw.get("restore_value")) or ([] if "restore_value" not in kw else None),
                pre_hook="pre_hook" in kw)
            params = {a.arg for a in fn.args.args
                      if not (a.annotation is not None and "constexpr" in ast.unparse(a.annotation))}
            der = _derivations(fn, params)
            loads: dict[str, int] = {}
            stores: dict[str, int] = {}
            for c in (n for n in ast.walk(fn) if isinstance(n, ast.Call)):
                name = _dotted(c.func).rpartition(".")[2]
                if not c.args:
                    continue
                if name in ATOMICS:
                    for a in _base_params(c.args[0], der, params):
                        ks.atomics.setdefault(a, (c.lineno, name))
                elif name == "load":
                    for a in _base_params(c.args[0], der, params):
                        loads.setdefault(a, c.lineno)
                elif name == "store":
                    for a in _base_params(c.args[0], der, params):
                        stores.setdefault(a, c.lineno)
            ks.in_place = {a: stores[a] for a in stores if a in loads}
            out.append(ks)
    return out


def _outputs(arrays: dict[str, np.ndarray], metas: list[TensorMeta], tag: str) -> list[TensorData]:
    """The outputs of the probe call stored under ``tag`` (arrays ``<tag>_out<j>``).

    Raises:
        WireError: an array is missing or not of its declared shape.
    """
    return [tensor_from(m, arrays, f"{tag}_out{j}") for j, m in enumerate(metas)]


def _pick_evidence(case: Case, tuned: TunedCall) -> dict[str, Any]:
    """One case's pick as the summary's evidence shows it: ``case``, ``picked`` (per
    autotuner), ``launches`` (per autotuner and config) and ``listener`` (Triton's reports)."""
    return {"case": case, "picked": msgspec.to_builtins(tuned.picked), "launches": tuned.launches,
            "listener": msgspec.to_builtins(tuned.picks)}


def _error_evidence(err: Raised | None) -> dict[str, Any]:
    """A config's error as the evidence shows it: ``type``, ``message``, ``origin``, ``where``
    (each None when there is no error)."""
    if err is None:
        return {"type": None, "message": None, "origin": None, "where": None}
    return {"type": err.type, "message": err.message, "origin": err.origin,
            "where": msgspec.to_builtins(err.where) if err.where is not None else None}


def _scale(got: np.ndarray, exp: np.ndarray) -> float | None:
    """Median of got / expected over elements with |expected| above its median: the factor
    by which repeated launches multiplied an accumulated output."""
    e, g = exp.ravel().astype(np.float64), got.ravel().astype(np.float64)
    big = np.abs(e) > np.median(np.abs(e))
    if not big.any():
        return None
    r = g[big] / e[big]
    r = r[np.isfinite(r)]
    return float(np.median(r)) if r.size else None


@register
class Autotune(Check):
    """Autotuning hides a fault: configs that fail or disagree, tuning runs that corrupt
    in-place or accumulating outputs, a silent fallback config.

    Catches:
        faults that `@triton.autotune` hides: tuning launches that corrupt an
        output the kernel accumulates into or writes in place (no `reset_to_zero` /
        `restore_value`), configs that give wrong results, configs that fail (Triton's
        `Autotuner._bench` turns `OutOfResources`, `CompileTimeAssertionFailure` and
        `PTXASError` into an infinite time: the config disappears without a word), configs that
        disagree with each other.

    How:
        the candidate's autotuned kernels are read with `ast` (configs,
        `reset_to_zero`, `restore_value`, pointer arguments the kernel accumulates into with
        `tl.atomic_*` or loads and stores in place, followed through local pointer arithmetic)
        and found in a child as `triton.runtime.autotuner.Autotuner` instances
        (`workstation/harness/autotune.py`, also behind `@triton.heuristics`). Per declared case,
        on fresh inputs: the first call with an empty tuning cache (Triton's on-disk tuning cache
        disabled), which runs the autotuner, every launch counted per config; a second call that
        hits the cache; each config forced alone (the config list set to that one config, so
        Triton runs it without benchmarking). All are compared with the reference at the
        task's tolerance (the findings table below).

        Discovery of the autotuners follows the candidate into the installed packages it imports
        (`harness.autotune.imported_packages`: the top-level packages of the modules, functions
        and classes the task's modules bind, minus the framework and the standard library): their
        autotuners (FlagGems' `LibTuner`, a `triton.Autotuner` subclass) are kept when one
        discovery call shows the candidate launching their kernel, and driven like the task's own.
        The evidence lists `packages_searched` and `from_packages`.

    Findings:
        | finding | severity |
        |---|---|
        | the first call mismatches while the cached call or every config alone matches: the tuning launches corrupted the output (the summary names the argument, the `tl.atomic_*` line and the missing `reset_to_zero`, and the factor: e.g. 13x = 4 configs x 3 tuning launches + 1) | `fail` |
        | a config's result mismatches the reference | `fail` |
        | configs raise (compile or run) | `warn`; `fail` when all do |
        | configs each within tolerance of the reference but not of each other | `warn` |
        | which config was picked per case (on CUDA: `triton.knobs.autotuning.listener`, `Autotuner.cache`) | `info` |

    Source:
        Triton's `autotune` docstring ("If all configs are evaluated, the kernel will run
        multiple times. This means that whatever value the kernel updates will be updated
        multiple times... use reset_to_zero"), and `Autotuner._bench`, which returns `inf`
        for a config that raises `OutOfResources`, `CompileTimeAssertionFailure` or
        `PTXASError`.

    Limits:
        under the interpreter configs cannot be timed (Triton's autotuner needs a
        GPU driver): kws's harness launches each config 3 times and ranks them in declaration
        order, so the first config is "picked" and a corruption shows as 3 launches per config
        (on a GPU, `do_bench` launches each config for ~125 ms: hundreds of times). Resource
        limits (shared memory, registers) do not exist in the interpreter, so configs that
        would not compile on a GPU run on the CPU. Kernels behind a user `pre_hook` that resets
        its own outputs are judged by their outputs only. `skip` when the candidate has no
        autotuned kernel.

    Not judged when:
        the candidate does not import here (`NotJudged`); the reference failed on a case, so
        that case's configs were not compared (not judged for it, the other cases reported).

    Forgeable:
        Measured in the job process: the tuner's configs and the in-place buffers around tuning.
        Still forgeable from inside: a tuner replaced by one that reports other configs than it ran is seen only when the replacement is a watched entry.
    """

    id = "autotune"
    order = 20
    title = "Autotuned kernels: every config, tuning side effects"

    def run(self, ctx: CheckContext) -> list[Finding]:
        kernels = scan_autotune(ctx.task)
        if not kernels and ctx.task.backend != "triton":
            raise Skip("the candidate has no @triton.autotune kernel")
        seed = ctx.seeds[0] if ctx.seeds else 0
        cases = ctx.cases
        spec = AutotuneProbeStep(cases=cases, seed=seed)
        # on a GPU the autotuner times configs: nothing else may run meanwhile
        job = ctx.run_job([spec], step_timeout=step_timeout_s() * max(2, len(cases) * 2), exclusive=ctx.on_gpu)
        st = job.steps[0] if job.steps else None
        if st is None:
            raise RuntimeError(f"the autotune probe {job.describe_death()}: {job.stderr_tail[-1500:]}")
        if not st.ok:
            err = st.error
            raise NotJudged(f"the candidate does not import here ({err.type if err else None}: "
                            f"{(err.message if err else '')[:200]}): correctness reports it")
        probe = extra_as(st.extra, AutotuneProbeExtra)
        ats = probe.autotuners
        if not ats:
            raise Skip("the candidate has no autotuned kernel (no triton Autotuner instance after import, in the "
                       "task's modules or the installed packages it imports)")
        by_name = {k.name: k for k in kernels}
        refs = ctx.reference([(c, seed) for c in cases])
        findings: list[Finding] = []
        corrupt: list[dict[str, Any]] = []
        bad_cfg: dict[tuple[int, int], list[dict[str, Any]]] = {}
        raised_cfg: dict[tuple[int, int], list[tuple[Case, Raised | None]]] = {}
        spread: list[Finding] = []
        picks: list[tuple[Case, TunedCall]] = []
        n_compared = 0
        interp = probe.interpreter
        for ci, (case, ref) in enumerate(zip(cases, refs, strict=True)):
            rec = probe.cases[ci]
            if not ref.ok:  # task code other than the candidate failed: this case was not compared
                ctx.could_not_judge(f"case {case_label(case)}: the reference {ref.failure_text()[:160]}")
                continue
            exp = ref.outputs
            tuned = self._compare(ctx, st.arrays, rec.tuned, f"c{ci}_tuned", exp, case)
            cached = self._compare(ctx, st.arrays, rec.cached, f"c{ci}_cached", exp, case)
            cfg_out: list[list[tuple[list[Comparison] | None, list[TensorData] | None]]] = []
            for a, per in enumerate(rec.configs):
                row = []
                for i, r in enumerate(per):
                    comps, outs = self._compare_keep(ctx, st.arrays, r, f"c{ci}_cfg{a}_{i}", exp, case)
                    row.append((comps, outs))
                    if not r.ok:
                        raised_cfg.setdefault((a, i), []).append((case, r.error))
                    elif comps is not None and not all(c.ok for c in comps):
                        bad = next(c for c in comps if not c.ok)
                        bad_cfg.setdefault((a, i), []).append({"case": case, "comparison": bad})
                    n_compared += 1
                cfg_out.append(row)
                spread += self._spread(ctx, case, a, row, ats[a])
            picks.append((case, rec.tuned))
            tuned_bad = tuned is not None and not all(c.ok for c in tuned)
            others_ok = (cached is not None and all(c.ok for c in cached)) or all(
                comps is not None and all(c.ok for c in comps) for row in cfg_out for comps, _ in row)
            if tuned is not None and tuned_bad and others_ok:  # tuned_bad implies tuned; said again for mypy
                j = next(k for k, c in enumerate(tuned) if not c.ok)
                got = _outputs(st.arrays, rec.tuned.outputs, f"c{ci}_tuned")[j]
                corrupt.append({"case": case, "output": j, "comparison": tuned[j],
                                "scale": _scale(got.values, exp[j].values),
                                "launches": rec.tuned.launches,
                                "cached_ok": cached is not None and all(c.ok for c in cached)})
        findings += self._corruption(ctx, corrupt, ats, by_name, interp)
        if not corrupt:
            findings += self._static_hazards(ctx, ats, by_name, interp)
        findings += self._config_findings(ctx, ats, bad_cfg, raised_cfg, cases)
        findings += spread
        findings.append(self._summary(ctx, ats, picks, n_compared, interp, kernels))
        return findings

    # -- comparisons -----------------------------------------------------------------

    def _compare_keep(self, ctx: CheckContext, arrays: dict[str, np.ndarray], rec: ProbeCall, tag: str,
                      exp: list[TensorData], case: dict[str, Any]
                      ) -> tuple[list[Comparison] | None, list[TensorData] | None]:
        if not rec.ok:
            return None, None
        try:
            got = _outputs(arrays, rec.outputs, tag)
        except WireError:
            return None, None
        comps = []
        for j in range(max(len(exp), len(got))):
            if j >= len(exp) or j >= len(got):
                comps.append(Comparison(ok=False, reason=f"{len(got)} outputs, the reference has {len(exp)}",
                                        shape=(), dtype=""))
                continue
            e, g = exp[j], got[j]
            comps.append(compare(e.values, g.values, ctx.tolerance(case, e.dtype), expected_dtype=e.dtype,
                                 got_dtype=g.dtype, nonfinite_ok=ctx.task.contract.nonfinite_inputs))
        return comps, got

    def _compare(self, ctx: CheckContext, arrays: dict[str, np.ndarray], rec: ProbeCall, tag: str,
                 exp: list[TensorData], case: dict[str, Any]) -> list[Comparison] | None:
        return self._compare_keep(ctx, arrays, rec, tag, exp, case)[0]

    def _spread(self, ctx: CheckContext, case: dict[str, Any], a: int,
                row: list[tuple[list[Comparison] | None, list[TensorData] | None]], at: AutotunerDesc) -> list[Finding]:
        """Configs that each match the reference but not each other (at the tolerance)."""
        ok = [(i, outs) for i, (comps, outs) in enumerate(row)
              if comps is not None and outs is not None and all(c.ok for c in comps)]
        if len(ok) < 2:
            return []
        i0, base = ok[0]
        for i, outs in ok[1:]:
            for j, (x, y) in enumerate(zip(base, outs, strict=False)):
                c = compare(x.values, y.values, ctx.tolerance(case, x.dtype), expected_dtype=x.dtype,
                            got_dtype=y.dtype, nonfinite_ok=ctx.task.contract.nonfinite_inputs)
                if not c.ok:
                    return [self.finding(
                        ctx, "warn", f"{at.kernel}: configs {i0} and {i} each match the reference on case "
                        f"{case_label(case)} but differ from each other beyond the tolerance ({c.reason}): "
                        "the result depends on which config the autotuner picks",
                        {"case": case, "kernel": at.kernel, "configs": [at.configs[i0].text, at.configs[i].text],
                         "output": j, **c.evidence(), "source": {"file": at.file, "line": at.line}},
                        case=case)]
        return []

    # -- findings --------------------------------------------------------------------

    def _corruption(self, ctx: CheckContext, corrupt: list[dict[str, Any]], ats: list[AutotunerDesc],
                    by_name: dict[str, KernelSource], interp: bool) -> list[Finding]:
        if not corrupt:
            return []
        first = corrupt[0]
        c: Comparison = first["comparison"]
        case = first["case"]
        launches = first.get("launches") or {}
        n_launch = sum(sum(v.values()) for v in launches.values())
        multi = [at for at in ats if len(at.configs) > 1]
        at = multi[0] if multi else ats[0]
        ks = by_name.get(at.kernel)
        hz = ks.hazards() if ks else {}
        why, src = "", {"file": at.file, "line": at.line}
        if hz and ks is not None:
            arg, (how, line) = next(iter(hz.items()))
            why = (f": {at.kernel} {how} ({ks.file}:{line}) and its @triton.autotune ({ks.file}:{ks.line}) "
                   f"has no reset_to_zero=[{arg!r}] or restore_value=[{arg!r}]")
            src = {"file": ks.file, "line": line}
        elif not at.reset_to_zero and not at.restore_value:
            written = sorted(set(ctx.task.out_args) | set(ctx.task.inout_args))
            what = f"the inputs it writes ({', '.join(map(str, written))})" if written else "the output"
            why = (f": {at.kernel}'s @triton.autotune declares no reset_to_zero / restore_value, and the tuning "
                   f"launches write {what} again and again")
        w = c.worst or {}
        scale = first.get("scale")
        per_launch = f" ({n_launch} launches of {len(at.configs)} configs" + \
            (", 3 per config under the interpreter" if interp else "") + ")"
        scale_s = f", {scale:.4g}x the reference" if scale is not None and abs(scale - 1) > 0.05 else ""
        summary = (f"case {case_label(case)}: the first call, which runs the autotuner{per_launch}, returns "
                   f"wrong results{scale_s} ({c.reason}; worst at {w.get('index')}: expected "
                   f"{w.get('expected')!r}, got {w.get('got')!r}) while "
                   f"{'the cached second call and ' if first['cached_ok'] else ''}every config alone match: "
                   f"the tuning launches corrupt the output{why}")
        if len(corrupt) > 1:
            summary += f"; same on {len(corrupt) - 1} more case(s)"
        ev = {"case": case, "kernel": at.kernel, "launches": launches, "scale": scale,
              **c.evidence(), "cases": [{"case": x["case"], "scale": x["scale"], "mismatched": x["comparison"].n_bad,
                                         "max_abs_err": x["comparison"].max_abs} for x in corrupt],
              "reset_to_zero": at.reset_to_zero, "restore_value": at.restore_value,
              "hazards": {k: {"how": v[0], "line": v[1]} for k, v in hz.items()}, "source": src}
        region = region_text(c.bad_region)
        if region:
            ev["region"] = region
        return [self.finding(ctx, "fail", summary, ev, case=case)]

    def _static_hazards(self, ctx: CheckContext, ats: list[AutotunerDesc], by_name: dict[str, KernelSource],
                        interp: bool) -> list[Finding]:
        """``warn`` for a multi-config autotuner whose kernel writes an output in place or
        accumulates into it (static scan) with no ``reset_to_zero`` / ``restore_value``,
        where kws drove the tuning launches and the result did not change on these cases
        (an idempotent write, or inputs where it does not show): the hazard is real, its
        effect was not observed."""
        out = []
        for at in ats:
            ks = by_name.get(at.kernel)
            if len(at.configs) < 2 or ks is None:
                continue
            hz = {k: v for k, v in ks.hazards().items() if k not in at.reset_to_zero and k not in at.restore_value}
            if not hz:
                continue
            arg, (how, line) = next(iter(hz.items()))
            out.append(self.finding(
                ctx, "warn",
                f"{at.kernel} {how} ({ks.file}:{line}) and its autotuner ({ks.file}:{ks.line}) has no "
                f"reset_to_zero=[{arg!r}] or restore_value=[{arg!r}]; kws drove the tuning launches"
                + (" (3 per config under the interpreter)" if interp else "")
                + " and the tuned result still matched on these cases: a hazard seen only in the source",
                {"kernel": at.kernel, "hazards": {k: {"how": v[0], "line": v[1]} for k, v in hz.items()},
                 "source": {"file": ks.file, "line": line}}))
        return out

    def _config_findings(self, ctx: CheckContext, ats: list[AutotunerDesc],
                         bad: dict[tuple[int, int], list[dict[str, Any]]],
                         raised: dict[tuple[int, int], list[tuple[Case, Raised | None]]],
                         cases: list[dict[str, Any]]) -> list[Finding]:
        out: list[Finding] = []
        for (a, i), hits in bad.items():
            at = ats[a]
            c: Comparison = hits[0]["comparison"]
            w = c.worst or {}
            out.append(self.finding(
                ctx, "fail", f"{at.kernel} config {i} ({at.configs[i].text}) gives wrong results on case "
                f"{case_label(hits[0]['case'])}: {c.reason}; worst at {w.get('index')}: expected "
                f"{w.get('expected')!r}, got {w.get('got')!r} (an autotuner that picks it, on another GPU or "
                "shape, returns this)",
                {"kernel": at.kernel, "config": msgspec.to_builtins(at.configs[i]), "case": hits[0]["case"],
                 **c.evidence(), "cases": [h["case"] for h in hits], "source": {"file": at.file, "line": at.line}},
                case=hits[0]["case"]))
        for a, at in enumerate(ats):
            failing = sorted(i for (aa, i) in raised if aa == a)
            if not failing:
                continue
            all_fail = len(failing) == len(at.configs)
            i = failing[0]
            first_case, err = raised[(a, i)][0]
            names = ", ".join(f"{k} ({at.configs[k].text})" for k in failing[:4])
            out.append(self.finding(
                ctx, "fail" if all_fail else "warn",
                f"{at.kernel}: {len(failing)} of {len(at.configs)} configs raise on case "
                f"{case_label(first_case)} ({err.type if err else None}: {(err.message if err else '')[:160]}): "
                f"{names}" + ("" if all_fail else "; the autotuner prunes such configs without a word (compile "
                              "errors) or fails the call while tuning (other errors)"),
                {"kernel": at.kernel, "failing": [{"config": msgspec.to_builtins(at.configs[k]),
                                                   "error": _error_evidence(raised[(a, k)][0][1]),
                                                   "cases": [h[0] for h in raised[(a, k)]]} for k in failing],
                 "source": {"file": at.file, "line": at.line}},
                case=first_case))
        return out

    def _summary(self, ctx: CheckContext, ats: list[AutotunerDesc], picks: list[tuple[Case, TunedCall]], n: int,
                 interp: bool, kernels: list[KernelSource]) -> Finding:
        parts = []
        for a, at in enumerate(ats):
            chosen = []
            for case, tuned in picks:
                idx = tuned.picked[a].index if a < len(tuned.picked) else -1
                chosen.append(f"{case_label(case)}: {'config ' + str(idx) if idx >= 0 else '?'}")
            parts.append(f"{at.kernel} ({len(at.configs)} configs, key {at.key}, reset_to_zero "
                         f"{at.reset_to_zero or 'none'}, restore_value {at.restore_value or 'none'}); picked "
                         f"{'; '.join(chosen)}")
        how = ("under the interpreter configs are not timed: kws's harness ranks them in declaration order, so "
               "the first config is picked" if interp else "picked by Triton's autotuner on this GPU")
        return self.finding(
            ctx, "info", f"checked {n} config runs over {len(picks)} case(s): {' | '.join(parts)} ({how})",
            {"autotuners": msgspec.to_builtins(ats), "picks": [_pick_evidence(c, t) for c, t in picks],
             "interpreter": interp, "static": [k.as_dict() for k in kernels],
             "source": {"file": ats[0].file, "line": ats[0].line} if ats else {}})

