"""``cuda-build``: a CUDA candidate compiled with nvcc and read from PTX and SASS."""

from __future__ import annotations

from typing import Any

from workstation.checks.failure_mismatch import claimed_class
from workstation.checks.support.cuda_read import (
    SM90,
    block_sizes,
    guard_facts,
    occupancy,
    precision_facts,
    ptx_entries,
    ptxas_resources,
    sass_functions,
)
from workstation.checks.support.legal import reduction_max
from workstation.checks.support.trials import cheapest_per_dtype
from workstation.engine.check import Check, Finding, Skip, register
from workstation.engine.context import CheckContext
from workstation.protocol.steps import CudaBuildStep

#: fp16 has 11 significant bits: a sum of more than 2**11 terms of similar size stops
#: growing by the last one (IEEE 754 binary16).
HALF_EXACT_TERMS = 2048
#: occupancy below which register or shared-memory pressure is worth a look.
LOW_OCCUPANCY = 0.25
#: the block sizes the occupancy table lists when the launch's is unknown.
TABLE_THREADS = (128, 256, 512, 1024)


def _first_error(log: str) -> str:
    for ln in log.splitlines():
        if "error" in ln.lower():
            return ln.strip()[:300]
    return (log.strip().splitlines() or ["(no output)"])[-1][:300]


@register
class CudaBuild(Check):
    """A CUDA candidate's kernels, compiled for Hopper and read from ptxas, PTX and SASS.

    Scheduled for:
        `backend = "cuda"`.

    Catches:
        CUDA sources that do not compile for the
        target, half-precision accumulators, TF32 on fp32 matmuls, spills, blocks an SM cannot
        hold, low occupancy, global accesses with no bounds guard.

    How:
        the `cuda_build` step (`workstation/harness/cuda_capture.py`) intercepts
        `torch.utils.cpp_extension.load_inline`/`load` in the child (the module imported, and called
        once if the build is lazy), writes each CUDA source as `load_inline` would, compiles it with
        `nvcc -fatbin -gencode arch=compute_90,code=[sm_90,compute_90] -Xptxas -v` plus torch's
        extension flags and the build's own (its `-arch`/`-gencode` choose the target; `sm_90a` where
        the source uses `wgmma`), and disassembles it with `cuobjdump -sass` / `-ptx`; results are
        cached by source, flags and nvcc version. `workstation/checks/support/cuda_read.py` parses
        ptxas's report, PTX and SASS.

    Findings:
        | finding | severity |
        |---|---|
        | nvcc rejects the source (first error, the log) | `fail` (`info` when the task reports that compile error) |
        | a block of the launch's size (`__launch_bounds__`, `dim3 b(X, Y)` in the source) needs more registers or shared memory than an sm_90 SM has | `fail` |
        | half add/fma in a loop, or an f16-accumulating MMA, with a `[contract] reduction` that can exceed 2048 terms | `fail` (else `warn`) |
        | TF32 tensor-core ops in a task served at float32; spills; occupancy below 25%; global accesses with no predicated access and no predicated EXIT/BRA before them (heuristic) | `warn` |
        | per kernel: registers, shared memory, stack, tensor-core ops, occupancy | `info` |

    Example:
        (`gemm-cuda-halfacc`): `gemm_f16_tiled(...) (sm_90): a half-precision accumulator:
        32 half-precision add/fma instruction(s) inside a loop (e.g. fma.rn.f16 ...); the reduction K
        reaches 16384 terms ([params] maximum), past the 2048 that fp16's 11 significant bits sum
        exactly`.

    Source:
        NVIDIA's CUDA C++ Programming Guide (compute capability
        9.0 limits, occupancy), the PTX ISA (`mma` type suffixes, `cvt.rna.tf32.f32`),
        `cuobjdump`/`nvdisasm` SASS mnemonics; IEEE 754 binary16 for fp16 sums.

    Limits:
        static: no value is computed on the CPU (the run-time checks `skip`); host code
        is not compiled; the guard heuristic cannot tell a wrong guard from a right one; sources that
        include `<torch/types.h>` take tens of seconds to compile; a kernel built another way (a prebuilt `.so`, CuPy,
        `torch.cuda.jiterator`) is not seen. Needs nvcc (`nvidia-cuda-nvcc` on PyPI, or a CUDA
        toolkit); PTX/SASS need
        cuobjdump (`kws[cuda-read]`).

    Not judged when:
        the capture step did not run, or the candidate made no `load_inline`/`load` build: `warn`.
        nvcc not found: `Skip` with where kws looked. nvcc stopped at its time limit is reported as
        a source that does not compile (`fail`, `info` when the task reports a compile error).
        Without cuobjdump, or where it fails, PTX and SASS are not read: the precision and guard
        findings are not looked for and the summary `info` does not say so. A capture step stopped
        by a limit that says nothing about the code: `NotJudged`. Not a limit of this run: the
        run-time checks on the CPU (a CUDA extension runs only on a GPU).

    Forgeable:
        Measured in the job process: source, jaxpr, compiler output and attached files read by kws.
        Still forgeable from inside: nothing at run time (static); the sources may of course lie in comments.
    """

    id = "cuda-build"
    order = 31
    title = "CUDA: compile for sm_90, read ptxas/PTX/SASS"

    @classmethod
    def applies(cls, task: Any) -> str:
        return "" if task.backend == "cuda" else f"only for CUDA candidates; this one is {task.backend}"

    def run(self, ctx: CheckContext) -> list[Finding]:
        case = cheapest_per_dtype(ctx)[0]
        out = ctx.calls([CudaBuildStep(role="candidate", case=case, seed=ctx.seeds[0])], memo=True)[0]
        if not out.ok:
            return [self.finding(ctx, "warn", f"the CUDA capture step did not run: {out.failure_text()}",
                                 out.failure_evidence())]
        ex = out.step.extra
        tools = ex.get("tools") or {}
        builds = ex.get("builds") or []
        if not builds:
            err = ex.get("role_error") or {}
            why = f" (the candidate {err.get('type')}: {str(err.get('message', ''))[:200]})" if err else ""
            return [self.finding(ctx, "warn", "the candidate made no torch.utils.cpp_extension load_inline/load build "
                                 f"on import or on its first call{why}: no CUDA source to compile here (a prebuilt "
                                 "extension runs only on a GPU)", {"role_error": err, "tools": tools})]
        if not tools.get("nvcc"):
            raise Skip("nvcc not found (PATH, $CUDA_HOME/bin, the nvidia-cuda-nvcc package): the captured CUDA sources "
                       f"of {', '.join(b['name'] for b in builds)} cannot be compiled here")
        findings: list[Finding] = []
        for b in builds:
            for s in b.get("sources", []):
                findings += self._source(ctx, b, s, tools)
        return findings

    def _source(self, ctx: CheckContext, b: dict[str, Any], s: dict[str, Any], tools: dict[str, Any]) -> list[Finding]:
        comp = s.get("compile") or {}
        where = f"{b['name']} ({b['via']}, {s['file']}, {s['lines']} lines)"
        target = comp.get("target") or b.get("target")
        base_ev = {"build": b["name"], "via": b["via"], "file": s["file"], "target": target,
                   "target_reason": b.get("target_reason"), "flags": b.get("flags"), "command": comp.get("command"),
                   "nvcc": tools.get("nvcc_version"), "cached": comp.get("cached"), "seconds": comp.get("seconds")}
        if not comp.get("ok"):
            log = comp.get("log", "")
            claims = ctx.task.claims
            reported = claims.status == "fail" and claimed_class(claims.failure_class, claims.failure)[0] == \
                "compile-error"
            return [self.finding(
                ctx, "info" if reported else "fail",
                f"{where} does not compile for {target} ({tools.get('nvcc_version', 'nvcc')}): {_first_error(log)}"
                + (" (the compile error the task reports)" if reported else ""),
                {**base_ev, "failure_class": "compile-error", "log": log[-8000:]})]
        res = ptxas_resources(comp.get("log", ""))
        sass = sass_functions(comp.get("sass", ""))
        ptx = ptx_entries(comp.get("ptx", ""))
        names = comp.get("names") or {}
        text = s.get("text", "")
        out: list[Finding] = []
        kernels = sorted(set(res) | set(sass) | set(ptx))
        summary = []
        for k in kernels:
            pretty = names.get(k, k)
            r = res.get(k)
            ins = sass.get(k, [])
            ent = ptx.get(k)
            prec = precision_facts(ent, ins)
            guards = guard_facts(ins)
            threads, tsrc = block_sizes(text, ent)
            kev = {**base_ev, "kernel": pretty, "mangled": k, "resources": r.as_dict() if r else None,
                   "precision": prec, "guards": guards, "block_threads": threads, "block_threads_from": tsrc,
                   "sass_instructions": len(ins)}
            label = f"{pretty} ({target})"
            out += self._precision(ctx, label, prec, kev)
            if r is not None:
                out += self._resources(ctx, label, r, threads, tsrc, kev)
            if guards["global_accesses"] and not guards["any_guard"]:
                out.append(self.finding(
                    ctx, "warn",
                    f"{label}: {guards['global_accesses']} global load/store instruction(s) and no bounds guard (no "
                    "predicated LDG/STG, no predicated EXIT/BRA before them; a heuristic): every thread of the grid "
                    "accesses memory unconditionally, correct only if the grid matches the data exactly "
                    f"(e.g. {guards['unguarded_examples'][0] if guards['unguarded_examples'] else ''})", kev))
            regs = f"{r.registers} registers, {r.smem} B smem, {r.stack} B stack" if r else "no ptxas report"
            summary.append(f"{pretty}: {regs}" + (f", tensor-core ops {prec['mma_ops']}" if prec["mma_ops"] else "")
                           + f", {guards['global_accesses']} global accesses")
        out.append(self.finding(ctx, "info", f"{where} compiles for {target} ({b.get('target_reason')}); "
                                + "; ".join(summary), {**base_ev, "kernels": kernels, "names": names,
                                                       "log": comp.get("log", "")[-4000:]}))
        return out

    def _precision(self, ctx: CheckContext, label: str, prec: dict[str, Any], ev: dict[str, Any]) -> list[Finding]:
        out = []
        task = ctx.task
        kmax = reduction_max(task)
        half_loop = [h for h in prec["half_arith"] if h["in_loop"]]
        mma_acc = prec["half_mma_acc"]
        if half_loop or mma_acc["sass"] or mma_acc["ptx"]:
            what = (f"{len(half_loop)} half-precision add/fma instruction(s) inside a loop (e.g. `{half_loop[0]['ptx']}`)"
                    if half_loop else f"tensor-core MMAs accumulating in f16 ({', '.join(mma_acc['sass']) or mma_acc['ptx'][0]['ptx']})")
            big = kmax is not None and kmax[1] > HALF_EXACT_TERMS
            sev = "fail" if big else "warn"
            tail = (f"; the reduction {kmax[0]} reaches {kmax[1]} terms ([params] maximum), past the {HALF_EXACT_TERMS} "
                    "that fp16's 11 significant bits sum exactly: later terms are rounded away" if big else
                    "; accumulate in float32 and round once")
            out.append(self.finding(ctx, sev, f"{label}: a half-precision accumulator: {what}{tail}",
                                    {**ev, "reduction_max": kmax}))
        if (prec["tf32"]["sass"] or prec["tf32"]["ptx"]) and "float32" in (task.contract.dtypes or
                                                                          [c["dtype"] for c in task.cases]):
            ops = prec["tf32"]["sass"] or prec["tf32"]["ptx"][:2]
            out.append(self.finding(
                ctx, "warn", f"{label}: float32 products run on TF32 tensor cores ({', '.join(ops)}): inputs are rounded "
                "to 10 explicit mantissa bits, so fp32 tolerances of long reductions may not hold (precision-regime "
                "measures it where the candidate runs)", ev))
        return out

    def _resources(self, ctx: CheckContext, label: str, r: Any, threads: int | None, tsrc: str,
                   ev: dict[str, Any]) -> list[Finding]:
        out = []
        if r.spill_stores or r.spill_loads:
            out.append(self.finding(ctx, "warn", f"{label}: register spills: {r.spill_stores} B stored and "
                                    f"{r.spill_loads} B loaded from local memory per thread ({r.registers} registers; "
                                    "ptxas -v)", ev))
        if r.registers is None:
            return out
        if threads is not None:
            occ = occupancy(r.registers, r.smem, threads)
            ev = {**ev, "occupancy": occ, "limits": SM90}
            if not occ["launchable"]:
                out.append(self.finding(
                    ctx, "fail", f"{label}: a block of {threads} threads ({tsrc}) needs {occ['registers_per_block']} "
                    f"registers ({r.registers} per thread) and {r.smem} B of shared memory, more than an sm_90 SM has "
                    f"({SM90['regs_per_sm']} registers, {SM90['smem_per_block_max']} B per block): the launch fails with "
                    "'too many resources requested'", ev))
            elif occ["occupancy"] < LOW_OCCUPANCY:
                out.append(self.finding(
                    ctx, "warn", f"{label}: theoretical occupancy {occ['occupancy']:.0%} at {threads} threads per block "
                    f"({tsrc}): {occ['blocks_per_sm']} block(s) per SM, limited by {occ['limited_by']} "
                    f"({r.registers} registers per thread, {r.smem} B smem per block)", ev))
            else:
                out.append(self.finding(
                    ctx, "info", f"{label}: theoretical occupancy {occ['occupancy']:.0%} at {threads} threads per block "
                    f"({tsrc}; limited by {occ['limited_by']})", ev))
        else:
            table = {t: occupancy(r.registers, r.smem, t) for t in TABLE_THREADS}
            out.append(self.finding(
                ctx, "info", f"{label}: block size not stated ({tsrc}); theoretical occupancy by block size: "
                + ", ".join(f"{t}: {o['occupancy']:.0%}" if o["launchable"] else f"{t}: not launchable"
                            for t, o in table.items()), {**ev, "occupancy_by_threads": table, "limits": SM90}))
        return out
