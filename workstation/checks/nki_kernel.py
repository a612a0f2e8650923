"""``nki-kernel``: an NKI candidate's kernels read from their source."""

from __future__ import annotations

from typing import Any

from workstation.checks.support.legal import reduction_max
from workstation.checks.support.nki_read import HALF, NkiKernel, read_nki
from workstation.checks.support.suspicion import suspect
from workstation.engine.check import Check, Finding, register
from workstation.engine.context import CheckContext

#: terms a sum carries exactly in each half format (significand bits): past them later
#: terms are rounded away (IEEE 754 binary16: 11 bits; bfloat16: 8 bits).
EXACT_TERMS = {"float16": 2048, "bfloat16": 256}


@register
class NkiKernelCheck(Check):
    """An NKI candidate's kernels: accumulator and PSUM dtypes, masks on the loads and
    stores of ragged tiles, matmul precision, read from the Python source.

    Scheduled for:
        `backend = "nki"`.

    Catches:
        half-precision PSUM/SBUF accumulators,
        unmasked loads/stores inside tile loops whose trip count rounds up, tile loops that round down
        without an assert, matmul operands cast to bf16/fp8 in a task served at float32, reductions
        with a half `dtype=`.

    How:
        the candidate's file and the task files it imports are parsed, never imported
        (`workstation/checks/support/nki_read.py`); every `@nki.jit` kernel's allocations, loops,
        accesses, accumulations and matmuls are read:

        - *Accumulators.* A tile that a loop accumulates into (`acc += nl.matmul(...)`,
          `acc = acc + ...`) allocated in float16/bfloat16, in PSUM or SBUF: every partial sum
          is rounded to 8 or 11 significant bits; the reduction's length is the `[params]` maxima
          of the `[contract] reduction` parameters. A PSUM buffer allocated in a half dtype is
          suspect by itself (the PSUM accumulates in fp32; the Neuron docs allocate
          `nl.zeros(..., nl.float32, buffer=nl.psum)`).
        - *Ragged tiles.* A load or store inside a tile loop whose trip count rounds up
          (`math.ceil(N / TILE)`, `(N + TILE - 1) // TILE`) without `mask=`: the last tile
          reads or writes past the tensor when N is not a multiple of the tile. A loop
          whose trip count rounds down (`N // TILE`) with no `assert N % TILE == 0` leaves the
          tail unvisited.
        - *Matmul precision.* `nl.matmul` / `nisa.nc_matmul` operands cast to bfloat16/fp8
          (`.astype(...)`) in a task whose contract serves float32 (8-bit mantissa products);
          reductions with an explicit half `dtype=`.

        Run time: NKI kernels run on Trainium/Inferentia or in `nki.simulate_kernel`, which
        ships only in the Neuron SDK's `neuronx-cc` (AWS's Neuron pip repository; the PyPI
        `nki` and `neuronx-cc` names are placeholders that raise ImportError). Where that
        simulator is importable, the fork server reports it and every run-time check runs the
        candidate (which calls the simulator or the device itself, as the task format has it);
        elsewhere they `skip` with the install hint.

    Findings:
        | finding | severity |
        |---|---|
        | a half-precision accumulator with a reduction past the terms that format sums exactly (bfloat16 256, float16 2048) | `fail` |
        | a half-precision accumulator with a shorter reduction | `warn` |
        | a half-precision accumulator of unknown reduction length; a PSUM buffer allocated in a half dtype; matmul operands cast to bfloat16/fp8 or a reduction with an explicit half `dtype=` in a task served at float32 (precision lower than served) | `warn`, not judged |
        | an unmasked load or store in a tile loop that rounds up; a tile loop that rounds down with no `assert N % TILE == 0` | `warn` |
        | no `@nki.jit` kernel in the candidate's files | `warn`, not judged |
        | a summary per kernel | `info` |

    Example:
        (`matmul-nki-bf16psum`): `` a bfloat16 accumulator: `acc += nl.matmul(a, b,
        transpose_x=True)` at line 42 adds into tile acc allocated as bfloat16 in psum (line 36)
        ... the reduction K reaches 4096 terms ``.

    Source:
        the NKI programming guide and ISA docs (PSUM is the fp32 accumulation buffer of the PE
        array; tiles at a tensor's edge need masks; the matmul tutorial's
        `nl.zeros((TILE_M, TILE_N), nl.float32, buffer=nl.psum)`).

    Limits:
        a reading of the source's form, not its values: dtypes and sizes held in variables are
        not resolved; code generated at trace time is not seen. The run-time checks run only
        where `nki.simulate_kernel` imports (the Neuron SDK), else `skip`.

    Not judged when:
        it runs no task code. A task file in the candidate's import closure that cannot be read or
        parsed is skipped: with no kernel left, `warn` ("no @nki.jit kernel", naming the problem;
        tagged `work-elsewhere` and not judged);
        with kernels found in other files, not judged for the skipped file (named, with why). Not a limit of this
        run (`info`): the run-time checks where no NKI simulator imports.

    Forgeable:
        Measured in the job process: source, jaxpr, compiler output and attached files read by kws.
        Still forgeable from inside: nothing at run time (static); the sources may of course lie in comments.
    """

    id = "nki-kernel"
    order = 32
    title = "NKI: accumulator dtypes, ragged-tile masks, matmul precision"

    @classmethod
    def applies(cls, task: Any) -> str:
        return "" if task.backend == "nki" else f"only for NKI candidates; this one is {task.backend}"

    def run(self, ctx: CheckContext) -> list[Finding]:
        task = ctx.task
        ep = task.entry["candidate"]
        kernels: list[NkiKernel] = []
        files = []
        for sf, _ in ctx.sources.closure(ep.file):
            files.append(sf.rel)
            kernels += read_nki(sf)
        if kernels and ctx.sources.problems:
            for rel, why in ctx.sources.problems.items():
                ctx.could_not_judge(f"{rel} in the candidate's import closure was not read ({why}): its kernels, if "
                                     "any, are not judged")
        if not kernels:
            probs = "; ".join(ctx.sources.problems.values())
            text = f"no @nki.jit kernel in {', '.join(files) or ep.file}" + (f" ({probs})" if probs else "") + \
                ": nothing to read"
            return [self.finding(ctx, "warn", text, {"files": files, "problems": ctx.sources.problems,
                                                     **suspect(ctx, "work-elsewhere", text)})]
        kmax = reduction_max(task)
        served32 = "float32" in (task.contract.dtypes or [c["dtype"] for c in task.cases])
        out: list[Finding] = []
        for k in kernels:
            out += self._kernel(ctx, k, kmax, served32)
        sim = ctx.cannot_run("candidate")
        out.append(self.finding(
            ctx, "info", "; ".join(
                f"{k.file}:{k.line} {k.name}: {len(k.tiles)} tile(s) "
                f"({_tiles_text(k)}), "
                f"{len(k.loops)} loop(s), {len(k.accesses)} load/store(s), {len(k.matmuls)} matmul(s)" for k in kernels)
            + (f"; run-time checks: {sim}" if sim else "; an NKI simulator is importable: the run-time checks run it"),
            {"kernels": [k.as_dict() for k in kernels], "files": files}))
        return out

    def _kernel(self, ctx: CheckContext, k: NkiKernel, kmax: tuple[str, int] | None, served32: bool) -> list[Finding]:
        out = []
        name = f"{k.file}:{k.line} {k.name}"
        seen: set[str] = set()
        for a in k.accumulations:
            dt = a.get("dtype", "")
            if dt not in HALF or a["tile"] in seen:
                continue
            seen.add(a["tile"])
            exact = EXACT_TERMS.get(dt)
            big = kmax is not None and exact is not None and kmax[1] > exact
            tail = (f"; the reduction {kmax[0]} reaches {kmax[1]} terms ([params] maximum), past the {exact} that {dt} "
                    "sums exactly" if big and kmax is not None else "")  # big implies kmax; said again for mypy
            text = (f"{name}: a {dt} accumulator: `{a['text']}` at line {a['line']} adds into tile {a['tile']} allocated "
                    f"as {dt}{' in ' + a['buffer'] if a.get('buffer') else ''} (line {k.tiles[a['tile']]['line']}): every "
                    f"partial sum is rounded to {dt}{tail}; accumulate in an nl.float32 PSUM tile and cast once")
            # the reduction's length unknown: whether the rounding matters was not judged
            tag = suspect(ctx, "precision", text) if kmax is None else {}
            out.append(self.finding(
                ctx, "fail" if big else "warn", text,
                {"kernel": k.name, "accumulation": a, "reduction_max": kmax,
                 "source": {"file": k.file, "line": a["line"]}, **tag}))
        for n, t in k.tiles.items():
            if t.get("buffer") == "psum" and t.get("dtype") in HALF and n not in seen:
                text = (f"{name}: PSUM tile {n} allocated as {t['dtype']} (line {t['line']}): the PSUM "
                        "accumulates matmul results in fp32; a half PSUM tile rounds them")
                out.append(self.finding(
                    ctx, "warn", text, {"kernel": k.name, "tile": n, **t, "source": {"file": k.file, "line": t["line"]},
                                        **suspect(ctx, "precision", text)}))
        floor_ok = any("%" in a for a in k.asserts)
        for acc in k.accesses:
            forms = [k.loops[i]["form"] for i in acc["in_loops"]]
            if "ceil" in forms and not acc["mask"]:
                loop = k.loops[acc["in_loops"][forms.index("ceil")]]
                out.append(self.finding(
                    ctx, "warn", f"{name}: `{acc['text']}` at line {acc['line']} has no mask= inside the loop "
                    f"`{loop['trip']}` (line {loop['line']}), whose trip count rounds up: the last tile reaches past "
                    "the tensor when its size is not a multiple of the tile",
                    {"kernel": k.name, "access": acc, "loop": loop, "source": {"file": k.file, "line": acc["line"]}}))
        for loop in k.loops:
            if loop["form"] == "floor" and not floor_ok:
                out.append(self.finding(
                    ctx, "warn", f"{name}: the tile loop `{loop['trip']}` (line {loop['line']}) rounds its trip count "
                    "down and no assert requires the size to be a multiple of the tile: the tail is never visited",
                    {"kernel": k.name, "loop": loop, "asserts": k.asserts,
                     "source": {"file": k.file, "line": loop["line"]}}))
        if served32:
            for m in k.matmuls:
                low = [c for c in m["casts"] if c in HALF]
                if low:
                    text = (f"{name}: `{m['text']}` at line {m['line']} multiplies operands cast to "
                            f"{', '.join(low)} in a task served at float32: 8-bit (bf16) or fewer mantissa bits per product")
                    out.append(self.finding(
                        ctx, "warn", text, {"kernel": k.name, "matmul": m, "source": {"file": k.file, "line": m["line"]},
                                            **suspect(ctx, "precision", text)}))
        for r in k.reductions:
            if r["dtype"] in HALF:
                text = f"{name}: `{r['text']}` at line {r['line']} reduces in {r['dtype']}"
                tag = suspect(ctx, "precision", text + " in a task served at float32") if served32 else {}
                out.append(self.finding(
                    ctx, "warn", text, {"kernel": k.name, "reduction": r, "source": {"file": k.file, "line": r["line"]},
                                        **tag}))
        return out


def _tiles_text(k: NkiKernel) -> str:
    return ", ".join(" ".join(x for x in (n, t.get("dtype") or "?", t.get("buffer") or "") if x)
                     for n, t in k.tiles.items())
