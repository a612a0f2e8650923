"""Reading compiled CUDA without running it: ptxas's resource report, PTX and SASS as text.

The ``cuda_build`` step (``workstation.harness.cuda_capture``) compiles a candidate's CUDA
sources with ``nvcc -Xptxas -v`` and disassembles them with ``cuobjdump``; this module turns
those texts into per-kernel facts for ``cuda-build``:

- :func:`ptxas_resources`: per kernel (mangled name) registers, barriers, static shared
  memory, constant memory, stack frame, spill stores and loads (ptxas's ``info`` lines);
- :func:`sass_functions` / :func:`ptx_entries`: per kernel its instructions, with the
  predicate guard of each SASS instruction (``@P0``, ``@!P1``) and PTX loop ranges (a
  branch to an earlier label);
- :func:`precision_facts`: TF32 tensor-core ops (SASS ``HMMA.*.TF32``, ``HGMMA.*.TF32``; PTX
  ``mma``/``wmma``/``wgmma`` with ``.tf32``, ``cvt.rna.tf32.f32``), half-precision
  arithmetic (PTX ``add``/``fma``/``mul`` on ``.f16``/``.f16x2``/``.bf16``/``.bf16x2``; MMAs
  whose accumulator type is f16), and whether it lies inside a loop (an accumulator);
- :func:`guard_facts`: global loads and stores (SASS ``LDG``/``STG``/``ATOMG``/``RED``) and
  whether any is guarded: predicated, or after a predicated ``EXIT``/``BRA`` in program
  order (the compiler turns ``if (i < n)`` into either). A heuristic, stated as such: a
  kernel with global accesses and no guard at all reads and writes wherever the grid
  points, correct only when the grid matches the data exactly;
- :func:`occupancy`: the theoretical occupancy on sm_90 for a block size, from registers
  and shared memory (NVIDIA's occupancy rules: 65536 registers and 2048 threads (64 warps)
  per SM, registers allocated per warp in units of 256, at most 32 resident blocks, 228 KB
  of shared memory per SM with 1 KB reserved per block, at most 227 KB per block);
- :func:`block_sizes`: the launch block size as the host source states it (``dim3 b(X, Y)``
  with literal or ``#define``d sizes, ``<<<grid, N>>>``) or ``__launch_bounds__``
  (``.maxntid``/``.reqntid`` in PTX).

Pure text processing: no CUDA, torch or subprocess here.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

#: sm_90 limits (CUDA C++ Programming Guide, "Compute Capabilities", compute capability 9.0).
SM90 = {"regs_per_sm": 65536, "max_regs_per_thread": 255, "max_threads_per_sm": 2048, "max_warps_per_sm": 64,
        "max_blocks_per_sm": 32, "smem_per_sm": 228 * 1024, "smem_per_block_max": 227 * 1024,
        "smem_reserved_per_block": 1024, "reg_alloc_unit_per_warp": 256, "max_threads_per_block": 1024,
        "static_smem_per_block_max": 48 * 1024}

_RES_FN = re.compile(r"(?:Compiling entry function|Function properties for) '?([\w$.]+)'?")
_USED = re.compile(r"Used (\d+) registers(?:, used (\d+) barriers)?(?:, (\d+) bytes smem)?(?:, (\d+) bytes cmem\[0\])?")
_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_SASS_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);")


@dataclass
class Resources:
    """ptxas's report for one kernel."""

    registers: int | None = None
    barriers: int | None = None
    smem: int = 0
    cmem: int | None = None
    stack: int = 0
    spill_stores: int = 0
    spill_loads: int = 0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def ptxas_resources(log: str) -> dict[str, Resources]:
    """Per kernel (mangled name) the ``-Xptxas -v`` report in ``log``."""
    out: dict[str, Resources] = {}
    cur: str | None = None
    for line in log.splitlines():
        m = _RES_FN.search(line)
        if m:
            cur = m.group(1)
            out.setdefault(cur, Resources())
            continue
        if cur is None:
            continue
        m = _STACK.search(line)
        if m:
            r = out[cur]
            r.stack, r.spill_stores, r.spill_loads = (int(x) for x in m.groups())
            continue
        m = _USED.search(line)
        if m:
            r = out[cur]
            r.registers = int(m.group(1))
            r.barriers = int(m.group(2)) if m.group(2) else 0
            r.smem = int(m.group(3)) if m.group(3) else 0
            r.cmem = int(m.group(4)) if m.group(4) else None
    return out


@dataclass
class Instr:
    """One SASS instruction: address, guard predicate (``""`` when none), opcode, operands."""

    addr: int
    pred: str
    op: str
    args: str


def sass_functions(sass: str) -> dict[str, list[Instr]]:
    """Per kernel (mangled name, ``Function : NAME``) its SASS instructions in order."""
    out: dict[str, list[Instr]] = {}
    cur: list[Instr] | None = None
    for line in sass.splitlines():
        if "Function :" in line:
            name = line.split("Function :", 1)[1].strip()
            cur = out.setdefault(name, [])
            continue
        if cur is None:
            continue
        m = _SASS_LINE.search(line)
        if m:
            cur.append(Instr(int(m.group(1), 16), (m.group(2) or "").strip(), m.group(3), m.group(4).strip()))
    return out


@dataclass
class PtxEntry:
    """One PTX ``.entry``: its directives (``.maxntid`` ...) and instruction lines."""

    name: str
    directives: dict[str, list[int]] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)

    def loops(self) -> list[tuple[int, int]]:
        """Index ranges (label line, branch line) of backward branches: loop bodies."""
        labels: dict[str, int] = {}
        out = []
        for i, ln in enumerate(self.lines):
            m = re.match(r"^\s*(\$?[\w$]+):", ln)
            if m:
                labels[m.group(1)] = i
            m = re.search(r"\bbra(?:\.uni)?\s+(\$?[\w$]+)\s*;", ln)
            if m and m.group(1) in labels and labels[m.group(1)] < i:
                out.append((labels[m.group(1)], i))
        return out


def ptx_entries(ptx: str) -> dict[str, PtxEntry]:
    """Per ``.entry`` (mangled name) of the PTX text."""
    out: dict[str, PtxEntry] = {}
    cur: PtxEntry | None = None
    depth = 0
    for line in ptx.splitlines():
        m = re.search(r"\.entry\s+([\w$]+)", line)
        if m:
            cur = out.setdefault(m.group(1), PtxEntry(m.group(1)))
            depth = 0
            continue
        if cur is None:
            continue
        for d in (".maxntid", ".reqntid", ".minnctapersm", ".maxnreg"):
            if d in line and depth == 0:
                cur.directives[d] = [int(x) for x in re.findall(r"\d+", line.split(d, 1)[1])]
        depth += line.count("{") - line.count("}")
        cur.lines.append(line)
        if depth <= 0 and "}" in line:
            cur = None
    return out


_HALF_ARITH = re.compile(r"\b(add|sub|fma|mul)(\.r[nmzp])?(\.ftz)?(\.sat)?\.(f16x2|f16|bf16x2|bf16)\b")
_MMA_F16_ACC = re.compile(r"\b(mma|wmma\.mma|wgmma\.mma_async)[\w.]*?\.f16\.f16\.f16\.f16\b|"
                          r"\bwmma\.mma\.sync[\w.]*\.f16\.f16\b|\bwgmma\.mma_async[\w.]*\.f16\.f16\.f16\b")
_TF32_PTX = re.compile(r"\b(mma|wmma|wgmma)[\w.]*\.tf32\b|cvt\.rna\.tf32\.f32")


def precision_facts(entry: PtxEntry | None, sass: list[Instr]) -> dict[str, Any]:
    """TF32 and half-precision facts of one kernel (module doc): ``tf32`` (SASS opcodes and
    PTX lines), ``half_arith`` (PTX lines, each with ``in_loop``), ``half_mma_acc`` (MMAs
    accumulating in f16: SASS ``HMMA.*.F16`` and PTX), ``mma_ops`` (SASS tensor-core opcodes
    with counts)."""
    tf32_sass = sorted({i.op for i in sass if "TF32" in i.op and ("MMA" in i.op or "GMMA" in i.op)})
    mma_ops: dict[str, int] = {}
    for i in sass:
        if "MMA" in i.op and not (i.op == "HFMA2.MMA"):
            mma_ops[i.op] = mma_ops.get(i.op, 0) + 1
    half_acc_sass = sorted({i.op for i in sass if i.op.startswith("HMMA") and i.op.endswith(".F16")})
    tf32_ptx, half, half_mma = [], [], []
    if entry is not None:
        loops = entry.loops()
        for k, ln in enumerate(entry.lines):
            s = ln.strip().strip("{} \t")
            if _TF32_PTX.search(s):
                tf32_ptx.append(s[:160])
            in_loop = any(a <= k <= b for a, b in loops)
            if _MMA_F16_ACC.search(s):
                half_mma.append({"ptx": s[:160], "in_loop": in_loop})
            elif _HALF_ARITH.search(s):
                half.append({"ptx": s[:160], "in_loop": in_loop})
    return {"tf32": {"sass": tf32_sass, "ptx": tf32_ptx[:8]}, "half_arith": half[:40], "half_arith_count": len(half),
            "half_mma_acc": {"sass": half_acc_sass, "ptx": half_mma[:8]}, "mma_ops": mma_ops}


_GLOBAL = ("LDG", "STG", "ATOMG", "RED", "LDGSTS", "UTMALDG", "UTMASTG", "UBLKCP")


def guard_facts(sass: list[Instr]) -> dict[str, Any]:
    """Global memory accesses of one kernel and their guards (module doc)."""
    accesses = [i for i in sass if i.op.split(".")[0] in _GLOBAL]
    guard_seen = False
    unguarded, guarded = [], 0
    for i in sass:
        base = i.op.split(".")[0]
        if base in ("EXIT", "BRA") and i.pred:
            guard_seen = True
        if base in _GLOBAL:
            if i.pred or guard_seen:
                guarded += 1
            else:
                unguarded.append(f"/*{i.addr:04x}*/ {i.op} {i.args}"[:120])
    return {"global_accesses": len(accesses), "guarded": guarded, "unguarded": len(unguarded),
            "unguarded_examples": unguarded[:6], "any_guard": guarded > 0 or guard_seen}


def occupancy(registers: int, smem: int, threads: int) -> dict[str, Any]:
    """Theoretical occupancy on sm_90 of a kernel using ``registers`` per thread and
    ``smem`` bytes of static shared memory, launched with ``threads`` per block (module
    doc). ``launchable`` is False when one block needs more registers or shared memory than
    an SM has (the launch fails with "too many resources requested")."""
    lim = SM90
    warps = math.ceil(threads / 32)
    per_warp = math.ceil(max(registers, 1) * 32 / lim["reg_alloc_unit_per_warp"]) * lim["reg_alloc_unit_per_warp"]
    regs_block = per_warp * warps
    launchable = (threads <= lim["max_threads_per_block"] and regs_block <= lim["regs_per_sm"]
                  and smem <= lim["smem_per_block_max"])
    by_regs = lim["regs_per_sm"] // regs_block if regs_block else lim["max_blocks_per_sm"]
    by_threads = lim["max_warps_per_sm"] // warps if warps else 0
    by_smem = lim["smem_per_sm"] // (smem + lim["smem_reserved_per_block"]) if smem else lim["max_blocks_per_sm"]
    blocks = max(0, min(by_regs, by_threads, by_smem, lim["max_blocks_per_sm"])) if launchable else 0
    limiter = min((("registers", by_regs), ("threads", by_threads), ("shared memory", by_smem),
                   ("blocks per SM", lim["max_blocks_per_sm"])), key=lambda t: t[1])[0]
    return {"threads": threads, "warps_per_block": warps, "registers_per_block": regs_block,
            "blocks_per_sm": blocks, "warps_per_sm": blocks * warps,
            "occupancy": blocks * warps / lim["max_warps_per_sm"], "limited_by": limiter, "launchable": launchable}


def _defines(text: str) -> dict[str, int]:
    out = {}
    for m in re.finditer(r"^\s*#\s*define\s+(\w+)\s+\(?\s*(\d+)\s*\)?\s*$", text, re.M):
        out[m.group(1)] = int(m.group(2))
    for m in re.finditer(r"\b(?:constexpr|const)\s+(?:int|unsigned|size_t|int64_t)\s+(\w+)\s*=\s*(\d+)\s*;", text):
        out.setdefault(m.group(1), int(m.group(2)))
    return out


def _val(tok: str, defs: dict[str, int]) -> int | None:
    tok = tok.strip()
    if tok.isdigit():
        return int(tok)
    if tok in defs:
        return defs[tok]
    m = re.fullmatch(r"(\w+)\s*\*\s*(\w+)", tok)
    if m:
        a, b = _val(m.group(1), defs), _val(m.group(2), defs)
        return a * b if a is not None and b is not None else None
    return None


def block_sizes(text: str, entry: PtxEntry | None) -> tuple[int | None, str]:
    """The threads per block of the kernel's launch and where that came from (module doc),
    or ``(None, why not)``."""
    if entry is not None:
        for d in (".reqntid", ".maxntid"):
            if entry.directives.get(d):
                return math.prod(entry.directives[d]), f"{d} {entry.directives[d]} (__launch_bounds__)"
    defs = _defines(text)
    for m in re.finditer(r"\bdim3\s+(\w+)\s*\(([^)]*)\)", text):
        parts = [p for p in m.group(2).split(",") if p.strip()]
        vals = [_val(p, defs) for p in parts]
        if vals and all(v is not None for v in vals):
            name = m.group(1)
            if re.search(rf"<<<[^,>]+,\s*{name}\b", text):
                return math.prod(v for v in vals if v is not None), f"dim3 {name}({m.group(2).strip()}) in the launch"
    launch = re.search(r"<<<[^,>]+,\s*([\w* ]+?)\s*[,>]", text)
    if launch:
        v = _val(launch.group(1), defs)
        if v is not None:
            return v, f"<<<..., {launch.group(1).strip()}>>> in the launch"
    return None, "the launch's block size is not a literal or #define in the source"
