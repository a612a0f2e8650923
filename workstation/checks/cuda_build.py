"""``cuda-build``: a CUDA candidate compiled with nvcc and read from PTX and SASS."""

from __future__ import annotations

import re
from typing import Any

import msgspec

from workstation.checks.failure_mismatch import claimed_class
from workstation.checks.support.cuda_launch import read_launches
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
from workstation.checks.support.ptx_flow import (
    PtxProgram,
    accumulation_loops,
    approx_ops,
    bounds_guards,
    ftz_count,
    parse_ptx,
    shared_races,
)
from workstation.checks.support.suspicion import suspect
from workstation.checks.support.trials import cheapest_per_dtype
from workstation.engine.check import Check, Finding, NotJudged, register
from workstation.engine.context import CheckContext
from workstation.protocol.extras import extra_as
from workstation.protocol.extras.backends import (
    CapturedBuild,
    CudaBuildExtra,
    CudaSource,
    CudaTools,
    NvccCompile,
)
from workstation.protocol.extras.triton import given
from workstation.protocol.steps import CudaBuildStep

#: unit roundoff of the half formats (IEEE 754 binary16: 11 significant bits; bfloat16: 8).
HALF_UNIT_ROUNDOFF = {"f16": 2.0 ** -11, "bf16": 2.0 ** -8}
#: relative error bounds of PTX ``.approx`` instructions (f32), as stated in the PTX ISA,
#: "Floating-Point Instructions" (per instruction: ex2, lg2, sin, cos, tanh, rcp, rsqrt,
#: sqrt, div); ``__expf``/``__logf``/``__sinf``/``__cosf``/``__fdividef`` and
#: ``--use_fast_math`` compile to them (CUDA C++ Programming Guide, "Intrinsic Functions").
#: Absolute-error bounds (lg2, sin, cos) are used as relative ones at output magnitude 1.
APPROX_BOUND = {"tanh": (2.0 ** -10.987, "max relative error 2^-10.987"),
                "ex2": (2.0 ** -22.5, "max relative error 2^-22.5 (plus 2^-24 x |x| from the argument scaling of __expf)"),
                "lg2": (2.0 ** -22.6, "max absolute error 2^-22.6"),
                "sin": (2.0 ** -20.9, "max absolute error 2^-20.9 in [-pi, pi]"),
                "cos": (2.0 ** -20.9, "max absolute error 2^-20.9 in [-pi, pi]"),
                "rcp": (2.0 ** -23, "max relative error 2^-23 (1 ulp)"),
                "rsqrt": (2.0 ** -22.9, "max relative error 2^-22.9"),
                "sqrt": (2.0 ** -23, "max relative error 2^-23"),
                "div": (2.0 ** -22, "max error 2 ulp for |divisor| in [2^-126, 2^126]")}
#: occupancy below which register or shared-memory pressure is worth a look.
LOW_OCCUPANCY = 0.25
#: the block sizes the occupancy table lists when the launch's is unknown.
TABLE_THREADS = (128, 256, 512, 1024)


#: nvcc's (gcc's) message for an ``#include`` it cannot find: the including file, the header.
_MISSING_HEADER = re.compile(r"^(?P<file>[^:\n]+):\d+:\d+: fatal error: (?P<header>[^:\n]+): No such file or directory",
                             re.MULTILINE)


def missing_header(log: str, task_files: set[str]) -> str | None:
    """The header an nvcc log says it could not find, when it is not a file of the task
    (a header the source ships is the candidate's to ship): this machine's CUDA toolkit or
    libraries lack it (``ATen/cuda/CUDAContext.h`` pulls in cuSPARSE's and cuBLAS's headers,
    which a pip-installed nvcc does not bring). None when the log has no such line."""
    m = _MISSING_HEADER.search(log)
    if m is None:
        return None
    header = m.group("header").strip()
    if header in task_files or any(f.endswith("/" + header) for f in task_files):
        return None
    return header


def _first_error(log: str) -> str:
    for ln in log.splitlines():
        if "error" in ln.lower():
            return ln.strip()[:300]
    return (log.strip().splitlines() or ["(no output)"])[-1][:300]


@register
class CudaBuild(Check):
    """A CUDA candidate's kernels, compiled for Hopper and read from ptxas, PTX and SASS, and
    its host launch arithmetic read from the source.

    Scheduled for:
        `backend = "cuda"`.

    Catches:
        CUDA sources that do not compile for the target; shared-memory races (a store and a load
        of another thread's slot with no `__syncthreads()` between); thread-indexed global
        accesses with no bounds comparison under a launch that rounds the grid up; launches whose
        grid rounds down (`n / 256` blocks); approximate intrinsics (`--use_fast_math`,
        `__expf`, `tanh.approx`) whose error bound exceeds the declared tolerance; half-precision
        accumulators, TF32 on fp32 matmuls, spills, blocks an SM cannot hold, low occupancy.

    How:
        the `cuda_build` step (`workstation/harness/cuda_capture.py`) intercepts
        `torch.utils.cpp_extension.load_inline`/`load` in the child (the module imported, and called
        once if the build is lazy), writes each CUDA source as `load_inline` would, compiles it with
        `nvcc -fatbin -gencode arch=compute_90,code=[sm_90,compute_90] -Xptxas -v -lineinfo` plus
        torch's extension flags and the build's own (its `-arch`/`-gencode` choose the target;
        `sm_90a` where the source uses `wgmma`), and disassembles it with `cuobjdump -sass` / `-ptx`;
        results are cached by source, flags and nvcc version. Read statically, nothing executed:

        - *ptxas, SASS* (`support/cuda_read.py`): registers, shared memory, spills, tensor-core ops,
          occupancy at the launch's block size.
        - *PTX as a program* (`support/ptx_flow.py`; `.loc` lines give the CUDA source line):
          shared-memory ordering: a `st.shared` to an address derived from the thread index,
          then, in program order (loop bodies scanned twice) with no `bar.sync`/`barrier`/
          `bar.warp.sync`/`mbarrier` wait between, an `ld.shared` of a different address (the
          read-after-write hazard compute-sanitizer's racecheck reports); bounds guards by data
          flow: a global access whose address derives from `%tid`/`%ctaid` is guarded when every
          path from the entry to it takes the in-bounds edge of an order comparison
          (`setp.lt/ge/...`) of a thread-derived value against a parameter-derived one (the
          `setp.eq` nvcc emits for a 64-bit `i % n` is not one); `.approx` instructions, judged
          with the PTX ISA's error bound against `atol + rtol` of the contract's dtypes at output
          magnitude 1 (amplification 1: the approximate value reaches the output directly); the
          loop holding half add/fma: its exit comparison, step and bound parameter give the
          per-thread accumulation length n at the `[params]` maximum.
        - *Host launch arithmetic* (`support/cuda_launch.py`): each `kernel<<<grid, block>>>`
          in the CUDA and C++ sources, `dim3` declarations, `#define`s and local `int`
          definitions resolved, expressions parsed with pycparser; identifiers naming a task
          parameter stay symbolic. A grid dimension with a division by a constant `D` must give
          `blocks * D >= size` at every legal value tried (both ends of each range, multiples of
          powers of two and their neighbours); an unguarded kernel under a grid that rounds up
          runs threads past the end.

    Findings:
        | finding | severity |
        |---|---|
        | nvcc rejects the source (first error, the log) | `fail` (`info` when the task reports that compile error) |
        | a shared-memory store -> load of another thread's slot with no barrier between (both source lines) | `fail` |
        | a grid dimension that rounds down: the first legal size it does not cover | `fail` |
        | a thread-indexed global access with no bounds comparison, under a launch that rounds up (the first size with threads past the end) | `fail` |
        | an `.approx` instruction (fast math, an intrinsic, `tanh.approx`) whose error bound exceeds `atol + rtol` at magnitude 1 | `fail` (`info` within it) |
        | a block of the launch's size needs more registers or shared memory than an sm_90 SM has | `fail` |
        | half add/fma in a loop, or an f16-accumulating MMA: `fail` where sqrt(n) u at the per-thread length n exceeds the declared rtol | `fail` (else `warn`; not judged when n is not known) |
        | TF32 tensor-core ops in a task served at float32 | `warn`, not judged |
        | an unguarded thread-indexed access where the launch is not read; spills; occupancy below 25% | `warn` |
        | per kernel: registers, shared memory, stack, tensor-core ops, occupancy, accesses; the launch sites read | `info` |

    Example:
        (`cuda-smem-race`): `row_l2norm(...) (sm_90): a shared-memory race: cuda.cu:19
        ``if (t < s) part[t] += part[t + s];`` stores to a per-thread slot and cuda.cu:19 ... then
        loads a slot another thread stores (st.shared.f32 [%r12] -> ld.shared.f32 [%r12+256]) with
        no bar.sync (__syncthreads()) between them in program order`.

    Source:
        NVIDIA's CUDA C++ Programming Guide (compute capability 9.0 limits, occupancy,
        `__syncthreads()`, the intrinsic functions `--use_fast_math` selects), the PTX ISA (`setp`,
        `bar.sync`, `.loc`, the `.approx` instructions' stated error bounds: `tanh` 2^-10.987
        relative, `ex2` 2^-22.5, `lg2` 2^-22.6 absolute, `sin`/`cos` 2^-20.9 absolute in [-pi, pi],
        `rcp`/`sqrt` 2^-23, `rsqrt` 2^-22.9, `div` 2 ulp), compute-sanitizer's racecheck hazards;
        Higham, *Accuracy and Stability of Numerical Algorithms* (2002) eq. 4.4 ((n-1)u worst case)
        and Higham & Mary (2019) (sqrt(n) u typical) for recursive half sums.

    Limits:
        static: no value is computed on the CPU (the run-time checks `skip`; emulating a kernel on
        the CPU is not done). The PTX is read, not the SASS ptxas makes of it; data flow is
        flow-insensitive; the race reading is linear program order (two branches of one `if` are
        scanned as if in sequence), knows nothing of which threads take a branch, and sees only
        read-after-write through shared memory (not write-after-read, not global memory, not
        `__syncwarp`-free warp-synchronous code judged by lane); a guard on one index counts for
        every access behind it; the launch reading resolves names inside the source text only
        (sizes taken from tensors, `x.numel()` in a wrapper, are not linked to `[params]` unless
        they pass through a parameter-named variable), and assumes each block covers `D` elements
        of the dimension; the approximation bound is the instruction's, not the kernel's whole
        error. Sources that include `<torch/types.h>` take tens of seconds to compile; a kernel
        built another way (a prebuilt `.so`, CuPy, `torch.cuda.jiterator`) is not seen. GPU-only:
        running the kernel (races as they happen, numerics, out-of-bounds accesses: compute-sanitizer
        in `out-of-bounds` on a GPU box). Needs nvcc (`nvidia-cuda-nvcc` on PyPI, or a CUDA
        toolkit); PTX/SASS need cuobjdump and the launch reading pycparser (`kws[cuda-read]`).

    Not judged when:
        the capture step did not run, or the candidate made no `load_inline`/`load` build (tagged
        `work-elsewhere`: no CUDA of its own to read): `warn`, not judged. A half-precision
        accumulator of unknown length and TF32 products in a task served at float32 (tagged
        `precision`): `warn`, not judged.
        nvcc not found: `NotJudged` ("install the CUDA toolkit (nvcc)"). nvcc stopped at its time
        limit: not judged for that source (never reported as a compile error). A header nvcc cannot
        find that is not a file of the task (`cusparse.h`, which torch's `ATen/cuda/CUDAContext.h`
        includes, is missing from a pip-installed nvcc): not judged for that source. Without cuobjdump,
        or where it prints no PTX: not judged (races, guards, approximations and accumulators not
        looked for). A launch expression that names something the source does not define, or a
        construct pycparser cannot read: listed as not read in the launch `info` (that launch's
        coverage not judged). A capture step stopped by a limit that says nothing about the code:
        `NotJudged`. Not a limit of this run: the run-time checks on the CPU (a CUDA extension runs
        only on a GPU, or under kws's CPU emulation of CUDA where g++ is installed and the
        `cuda_emulation` setting is on: docs/backends.md, "CUDA on a CPU").

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
        if not out.ok or out.step is None:
            ctx.could_not_judge(f"the CUDA capture step did not run: {out.failure_text()[:200]}")
            return [self.finding(ctx, "warn", f"the CUDA capture step did not run: {out.failure_text()}",
                                 out.failure_evidence())]
        ex = extra_as(out.step.extra, CudaBuildExtra)
        tools = ex.tools
        builds = ex.builds
        if not builds:
            err = msgspec.to_builtins(ex.role_error) if ex.role_error is not None else {}
            why = (f" (the candidate {ex.role_error.type}: {ex.role_error.message[:200]})"
                   if ex.role_error is not None else "")
            text = ("the candidate made no torch.utils.cpp_extension load_inline/load build "
                    f"on import or on its first call{why}: no CUDA source to compile here (a prebuilt "
                    "extension runs only on a GPU)")
            return [self.finding(ctx, "warn", text, {"role_error": err, "tools": msgspec.to_builtins(tools),
                                                     **suspect(ctx, "work-elsewhere", text)})]
        if not tools.nvcc:
            raise NotJudged("nvcc not found (PATH, $CUDA_HOME/bin, the nvidia-cuda-nvcc package): the captured CUDA "
                            f"sources of {', '.join(b.name for b in builds)} cannot be compiled here; install the "
                            "CUDA toolkit (nvcc)")
        findings: list[Finding] = []
        by_kernel: dict[str, Any] = {}  # kernel name -> (label, bounds guards, evidence), for _launches
        for b in builds:
            for s in b.sources:
                findings += self._source(ctx, b, s, tools, by_kernel)
        findings += self._launches(ctx, builds, by_kernel)
        return findings

    def _source(self, ctx: CheckContext, b: CapturedBuild, s: CudaSource, tools: CudaTools,
                by_kernel: dict[str, Any]) -> list[Finding]:
        comp = s.compile
        where = f"{b.name} ({b.via}, {s.file}, {s.lines} lines)"
        target = (comp.target if comp is not None else "") or b.target
        base_ev = {"build": b.name, "via": b.via, "file": s.file, "target": target,
                   "target_reason": b.target_reason, "flags": list(b.flags),
                   "command": comp.command if comp is not None else None,
                   "nvcc": given(tools.nvcc_version, None), "cached": comp.cached if comp is not None else None,
                   "seconds": comp.seconds if comp is not None else None}
        if comp is None:  # no nvcc: run() does not get here
            comp = NvccCompile()
        if comp.timed_out or (not comp.ok and comp.returncode is None):
            ctx.could_not_judge(f"{where}: {comp.log or 'nvcc did not run'} (a limit of this machine, not "
                                 "a compile error of the source)")
            return []
        if not comp.ok:
            log = comp.log
            hdr = missing_header(log, {p.relative_to(ctx.task.dir).as_posix() for p in ctx.task.dir.rglob("*")
                                       if p.is_file()})
            if hdr is not None:
                ctx.could_not_judge(f"{where}: nvcc here cannot find {hdr} ({_first_error(log)}): a header of the CUDA "
                                     "toolkit or a library that this machine lacks, not one the task ships (a limit of "
                                     "this machine, not a compile error of the source; a full CUDA toolkit has it)")
                return []
            claims = ctx.task.claims
            reported = claims.status == "fail" and claimed_class(claims.failure_class, claims.failure)[0] == \
                "compile-error"
            return [self.finding(
                ctx, "info" if reported else "fail",
                f"{where} does not compile for {target} ({given(tools.nvcc_version, 'nvcc')}): {_first_error(log)}"
                + (" (the compile error the task reports)" if reported else ""),
                {**base_ev, "failure_class": "compile-error", "log": log[-8000:]})]
        res = ptxas_resources(comp.log)
        sass = sass_functions(comp.sass)
        ptx_text = comp.ptx
        ptx = ptx_entries(ptx_text)
        progs = parse_ptx(ptx_text, s.file)
        if not progs:
            why = comp.ptx_error or ("cuobjdump not found (`pip install 'kws[cuda-read]'`)"
                                     if not tools.cuobjdump else "cuobjdump printed no PTX")
            ctx.could_not_judge(f"{where}: PTX not read ({why}): shared-memory ordering, bounds guards, approximate "
                                 "intrinsics and half accumulators were not looked for")
        names = comp.names
        text = s.text
        src_lines = text.splitlines()
        out: list[Finding] = []
        kernels = sorted(set(res) | set(sass) | set(ptx))
        summary = []
        for k in kernels:
            pretty = names.get(k, k)
            r = res.get(k)
            ins = sass.get(k, [])
            ent = ptx.get(k)
            prog = progs.get(k)
            prec = precision_facts(ent, ins)
            guards = bounds_guards(prog) if prog is not None else guard_facts(ins)
            for u in guards.get("unguarded_examples", []):
                if isinstance(u, dict):
                    u["source"] = self._quote(src_lines, s.file, u["line"])
            threads, tsrc = block_sizes(text, ent)
            kev = {**base_ev, "kernel": pretty, "mangled": k, "resources": r.as_dict() if r else None,
                   "precision": prec, "guards": guards, "block_threads": threads, "block_threads_from": tsrc,
                   "sass_instructions": len(ins)}
            label = f"{pretty} ({target})"
            if prog is not None:
                out += self._races(ctx, label, prog, src_lines, s.file, kev)
                out += self._approx(ctx, label, prog, src_lines, s.file, b.flags, kev)
                by_kernel[pretty.split("(")[0].split("<")[0].split("::")[-1]] = (label, guards, kev)
            out += self._precision(ctx, label, prec, kev, prog, text)
            if r is not None:
                out += self._resources(ctx, label, r, threads, tsrc, kev)
            summary.append(f"{pretty}: " + (f"{r.registers} registers, {r.smem} B smem, {r.stack} B stack" if r else
                                            "no ptxas report")
                           + (f", tensor-core ops {prec['mma_ops']}" if prec["mma_ops"] else "")
                           + (f", {guards.get('indexed_accesses')} thread-indexed global accesses, "
                              f"{guards.get('unguarded')} unguarded" if prog is not None else ""))
        out.append(self.finding(ctx, "info", f"{where} compiles for {target} ({b.target_reason}); "
                                + "; ".join(summary), {**base_ev, "kernels": kernels, "names": dict(names),
                                                       "log": comp.log[-4000:]}))
        return out

    @staticmethod
    def _quote(src_lines: list[str], file: str, line: int) -> str:
        txt = src_lines[line - 1].strip() if 0 < line <= len(src_lines) else ""
        return f"{file}:{line}" + (f" `{txt[:90]}`" if txt else "")

    def _races(self, ctx: CheckContext, label: str, prog: PtxProgram, src_lines: list[str], file: str,
               ev: dict[str, Any]) -> list[Finding]:
        races = shared_races(prog)
        if not races:
            return []
        r0 = races[0]
        return [self.finding(
            ctx, "fail",
            f"{label}: a shared-memory race: {self._quote(src_lines, file, r0['store']['line'])} stores to a per-thread "
            f"slot and {self._quote(src_lines, file, r0['load']['line'])} then loads a slot another thread stores "
            f"(`{r0['store']['ptx']}` -> `{r0['load']['ptx']}`) with no bar.sync (__syncthreads()) between them in "
            f"program order: the load may read the value before the other thread's store"
            + (f" ({len(races)} such pairs)" if len(races) > 1 else ""),
            {**ev, "races": races[:12], "source": {"file": file, "line": r0["load"]["line"]}})]

    def _approx(self, ctx: CheckContext, label: str, prog: PtxProgram, src_lines: list[str], file: str,
                flags: list[str], ev: dict[str, Any]) -> list[Finding]:
        fast = [f for f in flags if "fast_math" in f or f.startswith(("-ftz", "--ftz", "-prec", "--prec"))]

        def chosen(o: dict[str, Any]) -> bool:
            """The kernel's own approximation, not a step inside an accurate libdevice routine
            (tanhf, expf ... use ex2.approx/rcp.approx internally): fast math, an intrinsic or
            inline asm on its line, or tanh.approx (only __tanhf and fast math emit it)."""
            line = src_lines[o["line"] - 1] if 0 < o["line"] <= len(src_lines) else ""
            return bool(fast) or o["op"].startswith("tanh.") or bool(re.search(r"\b__\w+f\s*\(|\basm\b", line))

        ops = [o for o in approx_ops(prog) if ".f16" not in o["op"] and chosen(o)]
        if not ops:
            return []
        task = ctx.task
        dtypes = task.contract.dtypes or sorted({c["dtype"] for c in task.cases})
        out = []
        seen: set[str] = set()
        for o in ops:
            fn = o["op"].split(".")[0]
            if fn in seen or fn not in APPROX_BOUND:
                continue
            seen.add(fn)
            bound, said = APPROX_BOUND[fn]
            worst = None
            for dt in dtypes:
                tol = task.tolerance_for(dt)
                if tol.rtol is None and tol.atol is None:
                    continue
                allowed = (tol.rtol or 0.0) + (tol.atol or 0.0)
                if worst is None or allowed < worst[1]:
                    worst = (dt, allowed, tol)
            where = self._quote(src_lines, file, o["line"])
            msg = (f"{label}: `{o['ptx']}` at {where}: an approximate {fn} ({said}; PTX ISA)"
                   + (f", from the build's flags {fast}" if fast else ""))
            evx = {**ev, "approx": ops[:12], "flags_fast_math": fast, "bound": bound, "bound_source": said,
                   "source": {"file": file, "line": o["line"]}}
            if worst is None:
                out.append(self.finding(ctx, "info", msg + "; the task declares no tolerance to judge it against",
                                        evx))
            elif bound > worst[1]:
                out.append(self.finding(
                    ctx, "fail", msg + f": its error alone at output magnitude 1 ({bound:.2g}) exceeds the declared "
                    f"{worst[0]} tolerance there (atol {worst[2].atol} + rtol {worst[2].rtol} = {worst[1]:.2g}); "
                    "amplification 1 (the approximate result reaches the output directly), so any further rounding "
                    "only adds to it", {**evx, "tolerance": {"dtype": worst[0], "atol": worst[2].atol,
                                                             "rtol": worst[2].rtol}}))
            else:
                out.append(self.finding(
                    ctx, "info", msg + f": within the declared {worst[0]} tolerance ({bound:.2g} <= {worst[1]:.2g} "
                    "at output magnitude 1, amplification 1)", evx))
        if ftz_count(prog) and fast:
            out.append(self.finding(ctx, "info", f"{label}: {ftz_count(prog)} instruction(s) flush subnormals to zero "
                                    "(.ftz): an error below 2^-126 ~ 1.2e-38 per value, under any declared atol",
                                    ev))
        return out

    def _launches(self, ctx: CheckContext, builds: list[CapturedBuild], by_kernel: dict[str, Any]) -> list[Finding]:
        texts = [s.text for b in builds for s in b.sources] + [c for b in builds for c in b.cpp_sources]
        task = ctx.task
        fixed = {k: v for k, v in (task.cases[0] if task.cases else {}).items() if isinstance(v, int)}
        sites = read_launches(texts, dict(task.params), fixed)
        out: list[Finding] = []
        for site in sites:
            ev = {"launch": site}
            for d in site["dims"]:
                cx = d.get("counterexample")
                if cx:
                    vals = ", ".join(f"{k}={v}" for k, v in cx.items() if k not in ("blocks", "covered", "size"))
                    out.append(self.finding(
                        ctx, "fail",
                        f"launch of {site['kernel']} (line {site['line']}): grid.{d['dim']} = `{d['expr']}` rounds "
                        f"down: at {vals} (legal under [params]) it launches {cx['blocks']} block(s) of {d['divisor']} "
                        f"= {cx['covered']} of the {cx['size']} elements `{d['size']}` asks for; the last "
                        f"{cx['size'] - cx['covered']} are never computed (ceil-divide: `({d['size']} + "
                        f"{d['divisor'] - 1}) / {d['divisor']}`)", ev))
            rounds_up = [d for d in site["dims"] if d.get("form") == "division" and not d.get("counterexample")]
            kg = by_kernel.get(site["kernel"])
            if kg is not None and rounds_up and kg[1].get("unguarded") and not kg[1].get("grid_stride"):
                label, g, kev = kg
                u = g["unguarded_examples"][0]
                d = rounds_up[0]
                over = self._overshoot(d, dict(task.params), fixed, site, texts)
                if over is not None:
                    out.append(self.finding(
                        ctx, "fail",
                        f"{label}: `{u['ptx']}` at {u['source']} is indexed by the thread and no comparison "
                        f"of the index against a size parameter guards it, while the launch (line {site['line']}) "
                        f"rounds grid.{d['dim']} = `{d['expr']}` up: at {over['at']} it runs {over['threads']} threads "
                        f"for {over['size']} elements, so {over['threads'] - over['size']} of them access memory past "
                        "the end", {**kev, "launch": site, "overshoot": over}))
                    kg[1]["judged"] = True
        for label, g, kev in by_kernel.values():
            if g.get("unguarded") and not g.get("judged"):
                u = g["unguarded_examples"][0]
                out.append(self.finding(
                    ctx, "warn",
                    f"{label}: {g['unguarded']} thread-indexed global access(es) with no comparison of the index "
                    f"against a size parameter before them (e.g. `{u['ptx']}` at {u['source']}): correct "
                    "only if every launch's grid matches the data exactly", kev))
        unresolved = [f"{s['kernel']}: {d['unresolved']}" for s in sites for d in s["dims"] if d.get("unresolved")]
        if sites or unresolved:
            out.append(self.finding(
                ctx, "info", f"host launch arithmetic: {len(sites)} launch site(s) read"
                + (f"; not read: {'; '.join(unresolved[:4])}" if unresolved else ""), {"launches": sites}))
        return out

    @staticmethod
    def _overshoot(d: dict[str, Any], params: dict[str, Any], fixed: dict[str, int], site: dict[str, Any],
                   texts: list[str]) -> dict[str, Any] | None:
        """The first legal size where the rounded-up grid runs more threads than elements."""
        from workstation.checks.support.cuda_launch import Expr, _definitions, legal_values

        try:
            text = next(t for t in texts if site["grid"] in t)
            e = Expr(d["expr"], _definitions(text), params)
            split = e.division()
            if split is None:  # no division by a constant
                return None
            num, div = split
            size = e.size_of(num)
            for n in d.get("params", []):
                for v in legal_values(params[n])[:2000]:
                    env = {**fixed, n: v}
                    threads, need = e.value(env) * div, e.value(env, size)
                    if threads > need:
                        others = ", ".join(f"{k}={fixed[k]}" for k in d.get("params", []) if k != n and k in fixed)
                        return {"at": f"{n}={v}" + (f" ({others} as in the first declared case)" if others else ""),
                                "threads": threads, "size": need}
        except (StopIteration, ValueError, KeyError, TypeError, ZeroDivisionError):
            return None
        return None

    def _precision(self, ctx: CheckContext, label: str, prec: dict[str, Any], ev: dict[str, Any],
                   prog: PtxProgram | None = None, text: str = "") -> list[Finding]:
        out = []
        task = ctx.task
        kmax = reduction_max(task)
        half_loop = [h for h in prec["half_arith"] if h["in_loop"]]
        mma_acc = prec["half_mma_acc"]
        if half_loop or mma_acc["sass"] or mma_acc["ptx"]:
            what = (f"{prec['half_arith_count']} half-precision add/fma instruction(s), {len(half_loop)} of them "
                    f"inside a loop (e.g. `{half_loop[0]['ptx']}`)"
                    if half_loop else f"tensor-core MMAs accumulating in f16 ({', '.join(mma_acc['sass']) or mma_acc['ptx'][0]['ptx']})")
            fmt = "bf16" if "bf16" in (half_loop[0]["ptx"] if half_loop else "") else "f16"
            u = HALF_UNIT_ROUNDOFF[fmt]
            terms, how = self._per_thread_terms(task, prog, text)
            if terms is None and kmax is not None:
                terms, how = kmax[1], (f"the loop's trip count is not read; the [contract] reduction {kmax[0]} reaches "
                                       f"{kmax[1]} terms ([params] maximum), taken as the per-thread length")
            tol = min((task.tolerance_for(dt).rtol or 0.0 for dt in (task.contract.dtypes or ["float16"])),
                      default=0.0)
            if terms is not None:
                typical = terms ** 0.5 * u
                sev = "fail" if tol and typical > tol else "warn"
                tail = (f"; {how}: every partial sum is rounded to {fmt} (unit roundoff u = 2^{-11 if fmt == 'f16' else -8}"
                        f"), so the sum's relative error grows like sqrt(n) u = {typical:.2g} typically and (n-1) u = "
                        f"{(terms - 1) * u:.2g} at worst (Higham & Mary 2019; Higham 2002, eq. 4.4) at n = {terms}"
                        + (f", against the declared rtol {tol:g}" if tol else "")
                        + "; accumulate in float32 and round once")
            else:
                sev, tail = "warn", "; the per-thread accumulation length is not known: accumulate in float32 and round once"
            text = f"{label}: a half-precision accumulator: {what}{tail}"
            # a known length within the declared tolerance is advisory; an unknown one could not be judged
            tag = suspect(ctx, "precision", text) if terms is None else {}
            out.append(self.finding(ctx, sev, text,
                                    {**ev, "reduction_max": kmax, "per_thread_terms": terms, "terms_from": how, **tag}))
        if (prec["tf32"]["sass"] or prec["tf32"]["ptx"]) and "float32" in (task.contract.dtypes or
                                                                          [c["dtype"] for c in task.cases]):
            ops = prec["tf32"]["sass"] or prec["tf32"]["ptx"][:2]
            text = (f"{label}: float32 products run on TF32 tensor cores ({', '.join(ops)}): inputs are rounded "
                    "to 10 explicit mantissa bits, so fp32 tolerances of long reductions may not hold (precision-regime "
                    "measures it where the candidate runs)")
            out.append(self.finding(ctx, "warn", text, {**ev, **suspect(ctx, "precision", text)}))
        return out

    @staticmethod
    def _per_thread_terms(task: Any, prog: PtxProgram | None, text: str) -> tuple[int | None, str]:
        """How many half additions one thread's accumulator takes at the [params] maximum, from
        the loop that holds them (its bound's kernel parameter named by the source signature)."""
        if prog is None:
            return None, ""
        at = [i.idx for i in prog.instrs if i.base in ("add", "fma", "sub") and re.search(r"\.(f16|bf16)", i.op)]
        loops = [lp for lp in accumulation_loops(prog, at) if lp["param"] is not None and lp["step"] is not None]
        if not loops:
            return None, ""
        lp = max(loops, key=lambda x: x["count"])
        name = prog.name
        m = None
        for cand in re.finditer(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+(\w+)\s*\(([^)]*)\)", text):
            if cand.group(1) in name:
                m = cand
        if m is None:
            return None, ""
        pnames = [re.findall(r"\w+", p)[-1] for p in m.group(2).split(",") if re.findall(r"\w+", p)]
        if lp["param"] >= len(pnames):
            return None, ""
        cname = pnames[lp["param"]]
        spec_name = next((k for k in task.params if k == cname), None) or \
            next((k for k in task.params if k.lower() == cname.lower()), None)
        if spec_name is None or task.params[spec_name].max is None:
            return None, ""
        pmax = task.params[spec_name].max
        if isinstance(lp["step"], int) and lp["step"] > 0:
            trips = -(-pmax // lp["step"])
            return trips * lp["count"], (f"each thread goes round the loop at source line(s) {lp['lines']} "
                                         f"ceil({cname} / {lp['step']}) times with {lp['count']} half add/fma per "
                                         f"pass (exit `{lp['exit']}`): {trips * lp['count']} terms per thread at "
                                         f"{spec_name} = {pmax} ([params] maximum)")
        return None, ""

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
