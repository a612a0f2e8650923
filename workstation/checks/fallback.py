"""``fallback``: the framework op the candidate should replace does the work."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

import msgspec

from workstation.checks.support import reach
from workstation.checks.support.costmodel import CostModel
from workstation.checks.support.kernelwork import CaseWork, kernel_work
from workstation.checks.support.legal import int_params
from workstation.checks.support.static import HEAVY, StaticHit, aten_family, scan_fallback
from workstation.checks.support.trials import cheapest_per_dtype
from workstation.engine.check import Check, Finding, Skip, register
from workstation.engine.context import CallOutcome, CheckContext, case_label
from workstation.protocol.extras.calls import CallExtra, FaultCallExtra
from workstation.protocol.extras.monitors import (
    AtenOpCount,
    AtenOpsReport,
    AtenProfile,
    NumCallersReport,
    ProfiledOpCount,
    TritonLaunchesReport,
)
from workstation.protocol.steps import AtenOps, FaultCallStep, NumCallers, TritonLaunches

#: an aten op "works on the full problem" when its largest operand has at least this
#: fraction of the elements of the largest task tensor (inputs and reference outputs).
FULL_PROBLEM_FRACTION = 0.25
#: derived cases run (traced) to reach a framework call read in the source.
DERIVE_TRIES = 2
#: aten ops that only allocate, copy, view or fill: never "the work".
BOOKKEEPING = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like", "ones",
    "ones_like", "full", "full_like", "new_zeros", "new_ones", "new_full", "fill_", "zero_", "copy_", "_to_copy",
    "clone", "contiguous", "view", "_unsafe_view", "reshape", "as_strided", "expand", "permute", "transpose",
    "t", "select", "slice", "unsqueeze", "squeeze", "detach", "alias", "lift_fresh", "_reshape_alias", "split",
    "split_with_sizes", "chunk", "cat", "stack", "constant_pad_nd", "set_", "resize_", "item",
    "_local_scalar_dense", "arange", "randn", "rand", "normal_", "uniform_", "is_nonzero", "unbind",
    "view_as_real", "view_as_complex", "_has_compatible_shallow_copy_type", "equal", "isfinite", "isnan",
    "any", "all", "narrow", "flatten", "unflatten", "t_", "transpose_", "sym_size", "sym_stride", "sym_numel",
    "record_stream", "pin_memory", "_pin_memory", "is_pinned", "lift_fresh_copy", "resolve_conj", "resolve_neg",
}


def work_ops(ops: Mapping[str, AtenOpCount | ProfiledOpCount], full: int) -> dict[str, dict[str, Any]]:
    """The traced aten ops that compute (not bookkeeping) on at least
    FULL_PROBLEM_FRACTION of the problem (``full`` elements), each as its report's JSON
    object (``count``, ``max_numel``, and ``site`` for the dispatch-mode tracer's) with its
    ``family``."""
    out = {}
    for name, rec in ops.items():
        if name in BOOKKEEPING:
            continue
        fam = aten_family(name)
        if fam is None:
            continue
        if rec.max_numel >= max(1, FULL_PROBLEM_FRACTION * full):
            out[name] = {**msgspec.to_builtins(rec), "family": fam}
    return out


def delegate_names(delegates: tuple[str, ...]) -> set[str]:
    """``[delegation] ops`` as bare aten names / families: ``"aten::mm"``, ``"aten.mm.default"``
    and ``"mm"`` all become ``"mm"``; ``"torch.matmul"`` becomes ``"matmul"``."""
    out = set()
    for d in delegates:
        n = d.strip()
        for pre in ("aten::", "aten.", "torch.nn.functional.", "torch.", "F."):
            n = n.removeprefix(pre)
        n = n.removesuffix(".default")
        out.add(n)
    return out


def is_delegated(name: str, delegates: set[str]) -> bool:
    """True when the aten op ``name`` (or its family) is one the task delegates by design."""
    fam = aten_family(name)
    return name in delegates or name.split(".")[0] in delegates or (fam is not None and fam in delegates)


def problem_size(ref: CallOutcome, cand: CallOutcome) -> int:
    """Elements of the largest tensor among the inputs and the reference's outputs."""
    sizes = [1]
    for d in cand.payload(CallExtra).inputs if cand.step else []:
        if d.kind == "tensor":
            n = 1
            for s in d.shape:
                n *= int(s)
            sizes.append(n)
    sizes += [int(o.values.size) for o in ref.outputs]
    return max(sizes)


def _ops_text(ops: dict[str, dict[str, Any]]) -> str:
    return ", ".join(f"aten.{n} x{r['count']}" for n, r in sorted(ops.items(), key=lambda kv: -kv[1]["count"]))


@register
class Fallback(Check):
    """The candidate's work is done by the framework op it should replace, or it falls
    back to it on error.

    Catches:
        a candidate whose work is done by the framework op it should replace
        (`torch.matmul` inside a "Triton GEMM"), or that falls back to it on error
        (`try: kernel[grid](...) except Exception: return torch.relu(F.linear(x, w, b))` around a
        kernel that never compiles).

    How:
        , statically: an AST scan of the entry callable and every module-level function
        it reaches by name (calls, and functions passed as values), `@triton.jit` kernels
        excluded, for framework calls that do work (`torch.matmul`, `@`, `F.linear`,
        `F.softmax`, `F.layer_norm`, `torch.einsum`, `torch.bmm`, `F.gelu`, `.sum()` / `.mean()`
        / `.max()`, numpy..., names resolved through the module's imports), for uses of the task's
        reference module, and for `try`/`except` blocks whose body launches a kernel and whose
        handler calls the framework or the reference. Dynamically, on the first declared case:
        the candidate runs under a `TorchDispatchMode` that lists the aten ops it issues (count,
        largest operand, the task line that issued each) with Triton's launch entry points
        (`JITFunction.run`, the interpreter's `InterpretedFunction.run`) wrapped to count launches
        that completed and launches that raised; the reference runs under the same tracer; and
        the candidate runs once more with every Triton launch (for `cuda` candidates: every
        `torch.utils.cpp_extension.load`/`load_inline`) made to raise. An aten op "does the work"
        when it computes (not allocation, copy, view, fill) on at least a quarter of the largest
        task tensor.

    Findings:
        | finding | severity |
        |---|---|
        | backend `triton`, no Triton launch completed, and the output came from aten ops (named, with counts; the launch error and the except line when there was one) | `fail` |
        | with every launch failing the candidate still returns (within tolerance or not), and which ops computed it | `fail` |
        | matmul / softmax / norm aten ops on the full problem next to Triton launches, where the reference's own work is of that family | `fail` |
        | other aten compute on the full problem next to Triton launches, and output elements that no kernel store produced (the candidate run again with every kernel store poisoned, `kernel-work`'s run) | `fail` |
        | the same where the kernels' stores produced every output element (the op feeds or finishes their work) | `info` |
        | a framework call read in the source but not seen at run time (a size-, dtype- or device-dependent path): kws reads the branch that guards it (comparisons of sizes, `%` remainders, dtype tests, early returns, through helper calls), derives a legal case from `[params]` and the task's dtypes that satisfies it, and runs it traced and with poisoned stores; reached there with output elements no kernel produced, or with no kernel launch, or a reference call seen at run time | `fail` |
        | reached there and the kernels produced every output element | `info` |
        | behind a branch that is always false (`and False`), or only for a dtype the task does not take | `info` |
        | no legal case derived reaches it (or its branch cannot be read) | not judged, naming the call and the branch |
        | an except handler around a launch that did not return a framework result when every launch failed | `info` |
        | launches per kernel, no full-size aten compute, raises when launches fail | `info` |
        | backend `torch` | `skip`: a torch candidate legitimately uses aten ops; fallback applies to non-torch backends only |

    Example:
        (`linear-relu-fallback`): `the candidate (backend triton) completed no Triton
        kernel launch (1 launch(es) raised: _linear_relu_kernel: InterpreterError:
        ValueError("arange's arguments must be of type tl.constexpr"); caught by the except
        handler at line 59); its output came from aten.addmm x1, aten.relu x1`, and the fault
        injection's `with every Triton launch failing (1 attempted) the candidate still returns
        a result within tolerance ...`.

    Source:
        KernelBench and GPU MODE submissions that call `torch.matmul` inside a
        "custom kernel", and `try: kernel[grid](...) except: return torch...` wrappers that
        hide a kernel that never compiles.

    Limits:
        backend `torch` candidates legitimately use aten ops (skipped); work in other task
        files or through `torch.compile` is seen only dynamically; kernels launched through
        a `CompiledKernel` from `triton.compile` are not counted; work in a CUDA extension's C++
        or in JAX (pallas) is invisible to the dispatcher (seen as no aten op). CPU and GPU alike;
        on the CPU a candidate's explicit CPU path (`if not x.is_cuda: return torch...`) is what
        runs, and is reported as such.

        Ops listed in `[delegation] ops` (a fused linear-cross-entropy computes its
        logits with `torch.matmul` by design) are reported as `info` and left out of the verdict,
        dynamic and static alike; fallback judges the rest.

    Not judged when:
        a framework call read in the source is reached by no legal case kws derives from the
        branch that guards it, or that branch cannot be read; full-problem framework compute
        next to launches could not be checked with poisoned stores (a GPU, another backend);
        the candidate's backend or a library it imports cannot run here (a CUDA candidate without a
        GPU, Pallas without JAX), a traced or fault-injected call was stopped by a limit that says
        nothing about the code, or `make_inputs` is broken on the first declared case: `NotJudged`
        (the static scan is not reported either). A traced call that raised or died: no dynamic
        verdict, and not judged for it (named with the failure), `warn` when a plain run of it
        returns, `info` when it fails plainly too (a reference that raises there is a task problem,
        `NotJudged`); the static hits are still `warn`s. A fault-injected call that reached a launch
        (or build) and did not return is read as "the candidate raises when launches fail"; a
        Triton one that reached none while the traced run launched: not judged for the fallback
        on failure.
        Not a limit of this run (`info`): no fault injection for backends other than triton and
        cuda.

    Forgeable:
        Measured in the job process: the dispatch-mode tracer and an independent recorder (the autograd profiler), Triton launch counts.
        Still forgeable from inside: work done outside the dispatcher and the profiler (numpy, a C extension of its own) on intermediates the kernels then finish (every output element stored by a kernel) is not seen; a branch condition kws cannot read (a value computed at run time, a global switch) leaves its path not judged.
    """

    id = "fallback"
    order = 15
    title = "Framework fallback"

    def run(self, ctx: CheckContext) -> list[Finding]:
        task = ctx.task
        if task.backend == "torch":
            raise Skip("backend torch: a torch candidate legitimately does its work with aten ops; "
                       "fallback applies to non-torch backends only")
        ep = task.entry["candidate"]
        ref_ep = task.entry["reference"]
        scan = scan_fallback(ctx.sources, ep.file, ep.name, ref_ep.file.removesuffix(".py").replace("/", "."))
        case, seed = ctx.cases[0], ctx.seeds[0]
        triton = task.backend == "triton"
        steps = [
            ctx.call_step("candidate", case, seed, monitors=[AtenOps(), TritonLaunches()]),
            ctx.call_step("reference", case, seed, monitors=[AtenOps()]),
        ]
        fault = FaultCallStep(role="candidate", case=dict(case), seed=seed,
                              fault="triton_launch" if triton else "extension_build")
        cand, ref = ctx.calls(steps, memo=True)
        inject = ctx.calls([fault], memo=True)[0] if triton or task.backend == "cuda" else None
        findings: list[Finding] = []
        label = f"case {case_label(case)} (seed {seed})"
        if not cand.ok or not ref.ok:
            # a task whose candidate (or reference) fails anyway is correctness's finding;
            # only a failure that appears under tracing is worth a look here
            who, out = ("the candidate", cand) if not cand.ok else ("the reference", ref)
            plain = (ctx.candidate if not cand.ok else ctx.reference)([(case, seed)])[0]
            sev = "warn" if plain.ok else "info"
            ctx.could_not_judge(f"{label}: {who} {out.failure_text()} in the traced run, so the aten ops and Triton "
                                 "launches the candidate uses were not observed (no dynamic verdict)")
            findings.append(self.finding(ctx, sev, f"{label}: {who} {out.failure_text()} in the traced run"
                                         + ("" if plain.ok else " (as in a plain run)") + ": no dynamic verdict",
                                         {"case": case, "seed": seed, **out.failure_evidence()}, case=case, seed=seed))
            findings.extend(self._listed(ctx, scan.hits))
            return findings
        mon = cand.payload(CallExtra).monitors
        traced = mon.of(AtenOpsReport)
        ops = traced.ops
        prof = traced.profiler
        counted = mon.of(TritonLaunchesReport)
        launches = counted.launches
        kernels = counted.kernels
        failed = counted.failed_launches
        errors = counted.errors
        ref_ops = ref.payload(CallExtra).monitors.of(AtenOpsReport).ops
        full = problem_size(ref, cand)
        delegates = delegate_names(task.extensions.delegates)
        delegated = {n: r for n, r in work_ops(ops, full).items() if is_delegated(n, delegates)}
        work = {n: r for n, r in work_ops(ops, full).items() if n not in delegated}
        ref_work = work_ops(ref_ops, full)
        ref_fams = {r["family"] for r in ref_work.values()}
        # static hits whose family ran at all (even on a small operand) are confirmed: a
        # small framework op is glue, listed in the evidence, not "a path not taken"
        confirmed: set[str] = {f for f in (aten_family(n) for n in ops if n not in BOOKKEEPING) if f}
        ev_base = {"case": case, "seed": seed, "aten_ops": msgspec.to_builtins(ops), "triton_launches": launches,
                   "kernels": kernels, "failed_launches": failed, "launch_errors": errors,
                   "reference_work_ops": sorted(ref_work), "problem_elements": full,
                   "static_hits": [h.as_dict() for h in scan.hits], "call_graph": scan.functions}
        if delegated:
            findings.append(self.finding(
                ctx, "info",
                f"{label}: framework ops the task delegates by design ([delegation] ops) ran on the full problem: "
                f"{_ops_text(delegated)}; judged only the rest",
                {**ev_base, "delegated": sorted(delegated), "delegation_ops": sorted(delegates)}, case=case, seed=seed))
        hidden = self._hidden(ctx, case, seed, label, prof, ops, full, ev_base)
        if hidden is not None:
            findings.append(hidden)
        if triton and launches == 0:
            exc = next((h for h in scan.hits if h.kind == "except-fallback"), None)
            src = ({"file": ep.file, "line": exc.line} if exc and failed else None) or _first_site(work) \
                or _hit_source(ep.file, scan.hits, confirmed)
            what = (f"its output came from {_ops_text(work)}" if work else
                    "and no aten compute op ran either: the output came from somewhere else "
                    "(a cache, numpy, or code outside the dispatcher)")
            why = (f" ({failed} launch(es) raised: {errors[0]}"
                   + (f"; caught by the except handler at line {exc.line}" if exc else "") + ")") if failed else ""
            findings.append(self.finding(
                ctx, "fail",
                f"{label}: the candidate (backend triton) completed no Triton kernel launch{why}; {what}",
                {**ev_base, **({"source": src} if src else {})}, case=case, seed=seed))
        elif work:
            heavy = {n: r for n, r in work.items() if r["family"] in HEAVY and r["family"] in ref_fams}
            src = _first_site(heavy or work)
            text = (f"{label}: next to {launches} kernel launch(es) the candidate runs framework compute on the full "
                    f"problem: {_ops_text(heavy or work)}")
            ev = {**ev_base, **({"source": src} if src else {})}
            if heavy:
                findings.append(self.finding(ctx, "fail", text + " (the work the reference does with the same ops)",
                                             ev, case=case, seed=seed))
            else:
                findings.append(self._confirm_work(ctx, case, seed, text, ev))
        injected_unseen = False
        if inject is not None:
            f = self._fault_finding(ctx, case, seed, inject, ref, triton, scan.hits)
            if f is not None:
                findings.append(f)
                confirmed.add("except")
            elif triton and launches and not (inject.payload(FaultCallExtra).attempted
                                              if inject.step is not None else 0):
                # the traced run launched but the fault-injected run never reached a launch: what the
                # candidate does when its kernels fail was not seen
                injected_unseen = True
                ctx.could_not_judge(
                    f"{label}: the fault-injected run reached no Triton launch (" + (
                        "it returned" if inject.ok else inject.failure_text()) + "), so whether the candidate falls "
                    "back to the framework when its kernels fail was not observed")
        fault_raised = (inject is not None and inject.step is not None and not inject.ok
                        and bool(inject.payload(FaultCallExtra).attempted))
        findings.extend(self._unseen(ctx, [h for h in scan.hits if not (
            h.kind in ("framework-op", "method") and (h.family in delegates or h.name.split(".")[-1] in delegates))],
            confirmed, fault_raised, seed))
        if not any(f.severity in ("fail", "warn") for f in findings) and not work:
            findings.append(self.finding(
                ctx, "info",
                f"{label}: {launches} Triton launch(es) ({', '.join(f'{k} x{v}' for k, v in kernels.items()) or 'none'})"
                "; no aten compute op on the full problem"
                + ("; with every launch failing the candidate raises" if inject is not None and not injected_unseen
                   else "; the fault injection reached no launch" if inject is not None
                   else f" (no fault injection for backend {task.backend})"),
                ev_base, case=case, seed=seed))
        return findings

    def _hidden(self, ctx: CheckContext, case: dict[str, Any], seed: int, label: str, prof: AtenProfile | None,
                ops: Mapping[str, AtenOpCount], full: int, ev_base: dict[str, Any]) -> Finding | None:
        """A ``fail`` when the candidate hid work from the dispatch-mode tracer: the
        independent recorder (the autograd profiler) saw compute ops on the full problem
        of a family the tracer never saw, or the candidate turned the recorder off, replaced
        its session or took the tracer off the mode stack (``workstation.harness.trace``)."""
        if prof is None:
            return None
        tampered = []
        if prof.stopped:
            tampered.append("it stopped the autograd profiler")
        if not prof.marker and not prof.stopped:
            tampered.append("the profiler session kws opened was replaced")
        if prof.mode_removed:
            tampered.append("it took kws's dispatch mode off the mode stack")
        seen = {f for f in (aten_family(n) for n in ops if n not in BOOKKEEPING) if f}
        unseen = {n: r for n, r in work_ops(prof.ops, full).items() if r["family"] not in seen}
        if not tampered and not unseen:
            return None
        ev = {**ev_base, "profiler_ops": msgspec.to_builtins(prof.ops), "hidden_ops": unseen,
              "observation_tampered": tampered}
        parts = []
        if unseen:
            parts.append(f"{_ops_text(unseen)} ran on the full problem (seen by kws's independent recorder, the "
                         "autograd profiler) but not through the dispatch-mode tracer: the candidate hid framework "
                         "work from it (e.g. with torch._C._disable_current_modes())")
        if tampered:
            parts.append("during the call " + " and ".join(tampered) + ": kws's observation of its ops was disabled")
        return self.finding(ctx, "fail", f"{label}: " + "; ".join(parts), ev, case=case, seed=seed)

    def _fault_finding(self, ctx: CheckContext, case: dict[str, Any], seed: int, inject: CallOutcome,
                       ref: CallOutcome, triton: bool, hits: list[StaticHit]) -> Finding | None:
        if not inject.ok or inject.step is None:
            return None  # it raised (as it should)
        ex = inject.payload(FaultCallExtra)
        if not ex.attempted:
            return None  # it never reached a launch/build (no fault seen)
        what = "Triton launch" if triton else "C++/CUDA extension build"
        comps = ctx.compare(ref, inject, case)
        close = all(c.ok for c in comps)
        ops = work_ops(ex.ops, 1)
        exc = next((h for h in hits if h.kind == "except-fallback"), None)
        src = {"file": ctx.task.entry["candidate"].file, "line": exc.line} if exc else _first_site(ops)
        summary = (f"case {case_label(case)} (seed {seed}): with every {what} failing "
                   f"({ex.attempted} attempted) the candidate still returns"
                   + (" a result within tolerance" if close else " a result")
                   + (f", computed by {_ops_text(ops)}" if ops else "")
                   + (f": the except handler at line {exc.line} ({exc.text}) hides a kernel that fails"
                      if exc else ": a silent fallback hides kernel failures"))
        ev = {"case": case, "seed": seed, "attempted": ex.attempted, "kernels": ex.kernels,
              "fallback_ops": msgspec.to_builtins(ex.ops), "within_tolerance": close,
              "comparison": [c.evidence() for c in comps]}
        if src:
            ev["source"] = src
        return self.finding(ctx, "fail", summary, ev, case=case, seed=seed)

    def _confirm_work(self, ctx: CheckContext, case: dict[str, Any], seed: int, text: str,
                      ev: dict[str, Any]) -> Finding:
        """Framework compute on the full problem next to kernel launches, confirmed by
        poisoned stores (``kernel-work``): output elements no kernel store produced make it a
        ``fail``; a backend kws cannot poison, or a poisoned run that could not be compared,
        makes it not judged; kernels that produced every element make it ``info`` (the
        framework op fed or finished their work)."""
        work = self._kernel_work(ctx, case, seed, "declared" if case in ctx.cases else "the case given")
        if work is None or not work.judged:
            why = "kws poisons kernel stores only for Triton under the interpreter" if work is None else work.reason
            ctx.could_not_judge(f"{text}; whether it produces output elements was not confirmed ({why})")
            return self.finding(ctx, "info", f"{text}; not confirmed ({why})", ev, case=case, seed=seed)
        ev = {**ev, "kernel_work": work.evidence()}
        if work.bad:
            return self.finding(ctx, "fail", f"{text}; with every kernel store poisoned, {work.bad_text()} kept their "
                                "values: the framework computes them, not the kernels", ev, case=case, seed=seed)
        return self.finding(ctx, "info", f"{text}; the kernels' stores produced every output element (poisoned "
                            "stores): the framework op feeds or finishes their work", ev, case=case, seed=seed)

    @staticmethod
    def _kernel_work(ctx: CheckContext, case: dict[str, Any], seed: int, label: str) -> CaseWork | None:
        """The poisoned-store judgement of one case (None where kws cannot poison stores)."""
        if ctx.task.backend != "triton" or ctx.on_gpu:
            return None
        return kernel_work(ctx, [(dict(case), label)], seed)[0]

    def _listed(self, ctx: CheckContext, hits: list[StaticHit]) -> list[Finding]:
        """The static hits as ``info`` (the run that would judge them did not happen)."""
        file = ctx.task.entry["candidate"].file
        return [self.finding(ctx, "info", f"{file}:{h.line}: {_hit_text(h)}: `{h.text}` (not judged: no dynamic run)",
                             {"hit": h.as_dict(), "source": {"file": file, "line": h.line}})
                for h in _unique(hits, set())]

    def _unseen(self, ctx: CheckContext, hits: list[StaticHit], confirmed: set[str], fault_raised: bool,
                seed: int) -> list[Finding]:
        """Each static hit no run confirmed: a case that reaches it is derived from the branch
        that guards it and run (:mod:`~workstation.checks.support.reach`); there it is judged
        (poisoned stores, the traced ops); a hit no case reaches is not judged, naming it; a
        hit behind a branch that is always false is ``info``."""
        out = []
        file = ctx.task.entry["candidate"].file
        for h in _unique(hits, confirmed):
            where = f"{file}:{h.line}"
            what = _hit_text(h)
            ev = {"hit": h.as_dict(), "source": {"file": file, "line": h.line}}
            if h.kind == "except-fallback":
                if fault_raised:
                    out.append(self.finding(ctx, "info", f"{where}: {what}; with every Triton launch failing the "
                                            "candidate raised: the handler returns no framework result", ev))
                else:
                    ctx.could_not_judge(f"{where}: {what}, not seen at run time: the fault injection did not reach it")
                    out.append(self.finding(ctx, "info", f"{where}: {what}, not seen at run time (not judged)", ev))
                continue
            out.append(self._derive(ctx, h, where, what, ev, seed))
        return out

    def _derive(self, ctx: CheckContext, h: StaticHit, where: str, what: str, ev: dict[str, Any],
                seed: int) -> Finding:
        head = f"{where}: {what}, not seen at run time on the first case: `{h.text}`"
        mod = ctx.sources.file(ctx.task.entry["candidate"].file)
        entry_name = ctx.task.entry["candidate"].name
        entry = mod.top_level_defs().get(entry_name) if mod is not None else None
        g = reach.guards(mod, entry_name, h.function, h.line, h.text) if mod is not None else None
        if mod is None or not isinstance(entry, ast.FunctionDef) or g is None:
            return self._unjudged(ctx, f"{head}; kws could not read the branch that leads to it", ev)
        ev["guard"] = g.text(mod)
        if reach.is_dead(mod, g, entry):
            return self.finding(ctx, "info", f"{head}; it never runs: its branch `{g.text(mod)}` is always false", ev)
        declared = ctx.candidate([(c, seed) for c in ctx.cases])
        described = [o.payload(CallExtra).inputs for o in declared if o.ok]
        model = reach.fit_inputs([c for c, o in zip(ctx.cases, declared, strict=True) if o.ok], described)
        if model is None:
            return self._unjudged(ctx, f"{head}; the inputs of the declared cases do not tell how they follow the "
                                       "case, so no case that reaches it was derived", ev)
        dtypes = list(dict.fromkeys([*(str(c["dtype"]) for c in ctx.cases if "dtype" in c), *ctx.task.contract.dtypes]))
        if reach.never_for_dtypes(mod, g, entry, model, dtypes):
            return self.finding(ctx, "info", f"{head}; it runs only for inputs of a dtype the task does not take "
                                f"(its branch `{g.text(mod)}` is false for {', '.join(dtypes)})", ev)
        params = int_params(ctx.cases)
        cost = CostModel.plan(ctx.cases, params, ctx.on_gpu)
        found = reach.search(mod, g, entry, ctx.task, model, cheapest_per_dtype(ctx),
                             cost.case_cap if not ctx.on_gpu else 1 << 62)
        ev["derived_cases"] = found
        if not found:
            return self._unjudged(ctx, f"{head}; no legal case kws derived satisfies its branch `{g.text(mod)}`", ev)
        ref_file = ctx.task.entry["reference"].file
        tried = []
        for case in found[:DERIVE_TRIES]:
            mons: list[Any] = [AtenOps(), TritonLaunches()]
            if h.kind == "reference":
                mons.append(NumCallers(file=ref_file))
            traced = ctx.calls([ctx.call_step("candidate", case, seed, monitors=mons)], memo=True)[0]
            tried.append(case_label(case))
            if not traced.ok:
                continue
            mon = traced.payload(CallExtra).monitors
            ops = mon.of(AtenOpsReport).ops
            fams = {f for f in (aten_family(n) for n in ops if n not in BOOKKEEPING) if f}
            called = mon.of(NumCallersReport).total if h.kind == "reference" else 0
            seen = (h.kind == "reference" and called > 0) or (h.kind != "reference" and h.family in fams)
            work = self._kernel_work(ctx, case, seed, "derived from the branch")
            if seen or (work is not None and work.judged and work.bad):
                return self._reached(ctx, h, head, case, seed, mon, work, seen, ev)
        return self._unjudged(ctx, f"{head}; the case(s) derived from its branch `{g.text(mod)}` "
                                   f"({'; '.join(tried)}) did not reach it at run time", ev)

    def _reached(self, ctx: CheckContext, h: StaticHit, head: str, case: dict[str, Any], seed: int, mon: Any,
                 work: CaseWork | None, seen: bool, ev: dict[str, Any]) -> Finding:
        """A static hit reached on a derived case (its op seen at run time, or output elements
        there that no kernel produced): judged there."""
        label = f"case {case_label(case)} (derived from its branch, seed {seed})"
        ops = mon.of(AtenOpsReport).ops
        launches = mon.of(TritonLaunchesReport)
        ev = {**ev, "case": case, "seed": seed, "aten_ops": msgspec.to_builtins(ops),
              "triton_launches": launches.launches, "kernels": dict(launches.kernels)}
        if work is not None:
            ev["kernel_work"] = work.evidence()
        if h.kind == "reference":
            calls = mon.of(NumCallersReport).calls
            return self.finding(ctx, "fail", f"{head}; on {label} the candidate calls the task's reference: "
                                + ", ".join(f"{k} x{v}" for k, v in calls.items()), {**ev, "reference_calls": calls},
                                case=case, seed=seed)
        fam_ops = {n: {"count": r.count} for n, r in ops.items() if aten_family(n) == h.family}
        reached = (f"{head}; on {label} it runs ({_ops_text(fam_ops)})" if seen and fam_ops else
                   f"{head}; on {label}")
        if work is not None and work.judged and work.bad:
            return self.finding(ctx, "fail", f"{reached}: {work.bad_text()} did not come from the candidate's "
                                "kernels (they kept their values when every kernel store wrote poison): the framework or "
                                "the host computes them", ev, case=case, seed=seed)
        if launches.launches == 0 and ctx.task.backend == "triton":
            return self.finding(ctx, "fail", f"{reached}, and no Triton kernel launch completed: the framework computes "
                                "the output there", ev, case=case, seed=seed)
        if work is None or not work.judged:
            why = "kws poisons kernel stores only for Triton under the interpreter" if work is None else work.reason
            return self._unjudged(ctx, f"{reached}; whether it produces output elements was not confirmed ({why})", ev)
        return self.finding(ctx, "info", f"{reached}; the kernels' stores produced every output element there "
                            "(poisoned stores): the framework op feeds or finishes their work", ev,
                            case=case, seed=seed)

    def _unjudged(self, ctx: CheckContext, text: str, ev: dict[str, Any]) -> Finding:
        ctx.could_not_judge(text)
        return self.finding(ctx, "info", text + " (not judged)", ev)


def _unique(hits: list[StaticHit], confirmed: set[str]) -> list[StaticHit]:
    """The static hits no run confirmed, one per line (a framework call inside an except
    handler is reported through its except-fallback hit)."""
    out, seen = [], set()
    for h in hits:
        if h.line in seen:
            continue
        if h.kind == "except-fallback" and "except" in confirmed:
            continue
        if h.kind in ("framework-op", "method") and (h.family in confirmed or h.in_except and "except" in confirmed):
            continue
        if h.kind == "framework-op" and h.in_except:
            continue
        seen.add(h.line)
        out.append(h)
    return out


def _hit_text(h: StaticHit) -> str:
    return {
        "except-fallback": f"an except handler around a kernel launch falls back to {h.name}",
        "reference": f"the candidate uses the task's reference module ({h.name})",
        "method": f"a tensor method call {h.name} ({h.family}) in {h.function}",
        "framework-op": f"a framework call {h.name} ({h.family}) in {h.function}",
    }[h.kind]


def _first_site(ops: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    for r in ops.values():
        s = r.get("site")
        if s:
            return {"file": s.get("file"), "line": s.get("line")}
    return None


def _hit_source(file: str, hits: list[StaticHit], fams: set[str]) -> dict[str, Any] | None:
    """The line of the first static hit of one of ``fams`` (any hit when ``fams`` is empty)."""
    for h in hits:
        if h.kind in ("framework-op", "method", "reference") and (not fams or h.family in fams):
            return {"file": file, "line": h.line}
    return None
