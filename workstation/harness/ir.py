"""What a compiled Triton kernel's IR says about precision: pure text processing of its
TTIR, TTGIR and PTX (:func:`analyze`).

Per kernel, all with the user source line where the IR's location info gives one:

- ``dots``: each ``tt.dot`` of the TTIR with operand and result element types, the
  ``inputPrecision`` (absent = ieee) and ``maxNumImpreciseAcc``, and how the TTGIR lowers it
  (``wgmma`` for ``ttng.warp_group_dot``, ``mma`` for an ``#mma`` result, ``fma`` for a
  blocked layout);
- ``mma``: the PTX MMA instructions (``mma.sync.aligned.*``, ``wgmma.mma_async.*``) with
  their D/A/B types, and ``cvt.rna.tf32.f32`` conversions;
- ``low_precision_reductions``: ``tt.reduce`` whose combine adds in f16/bf16;
- ``low_precision_accumulators``: ``scf.for`` loop-carried f16/bf16 values updated by
  ``arith.addf`` in the loop;
- ``fma``: PTX ``fma.rn.*`` counts and explicit ``math.fma`` (``tl.fma``) ops, to tell
  contracted multiply-adds (one rounding on the GPU, two in the interpreter).
"""

from __future__ import annotations

import os
import re
from typing import Any

_LOC_DEF = re.compile(r"^(#loc\d*)\s*=\s*loc\((.*)\)\s*$")
_FILE_LOC = re.compile(r'^"([^"]+)":(\d+):(\d+)')
_TYPE = re.compile(r"(?:tensor|memdesc)<((?:\d+x)+)([a-zA-Z][a-zA-Z0-9]*)")
_INLINE_LOC = re.compile(r"loc\((#loc\d*|\"[^\"]+\":\d+:\d+)\)\s*$")
_MMA = re.compile(r"\b(wgmma\.mma_async\.sync\.aligned\.[\w.]+|mma\.sync\.aligned\.[\w.]+|tcgen05\.mma[\w.]*)")
_FMA = re.compile(r"\bfma\.rn(?:\.ftz)?(?:\.sat)?\.(f32|f16x2|f16|bf16x2|bf16|f64)\b")


class _Locs:
    """Resolves MLIR location references of one IR text to (file, line) in the task."""

    def __init__(self, text: str, task_dir: str):
        self.defs: dict[str, str] = {}
        for line in text.splitlines():
            m = _LOC_DEF.match(line.strip())
            if m:
                self.defs[m.group(1)] = m.group(2)
        self.task_dir = os.path.realpath(task_dir) + os.sep if task_dir else ""

    def _cands(self, body: str, depth: int = 0) -> list[tuple[str, int]]:
        if depth > 40:
            return []
        body = body.strip()
        m = _FILE_LOC.match(body)
        if m:
            return [(m.group(1), int(m.group(2)))]
        out: list[tuple[str, int]] = []
        for ref in re.findall(r"#loc\d*", body):
            d = self.defs.get(ref)
            if d is not None:
                out += self._cands(d, depth + 1)
        for f, ln in re.findall(r'"([^"]+)":(\d+):\d+', body):
            out.append((f, int(ln)))
        return out

    def resolve(self, ref: str) -> dict[str, Any] | None:
        """``{"file", "line"}`` for a ``#locN`` or inline loc body, preferring task files."""
        body = self.defs.get(ref, ref) if ref.startswith("#loc") else ref
        cands = self._cands(body)
        for f, ln in cands:
            rf = os.path.realpath(f)
            if self.task_dir and rf.startswith(self.task_dir):
                return {"file": rf[len(self.task_dir):], "line": ln}
        for f, ln in cands:
            if "site-packages" not in f and "/triton/" not in f:
                return {"file": os.path.basename(f), "line": ln}
        return None

    def of_line(self, line: str) -> dict[str, Any] | None:
        m = _INLINE_LOC.search(line.strip())
        return self.resolve(m.group(1)) if m else None


def _types(s: str) -> list[str]:
    return [m.group(2) for m in _TYPE.finditer(s)]


def _dots(ir: str, locs: _Locs) -> list[dict[str, Any]]:
    out = []
    for line in ir.splitlines():
        s = line.strip()
        if not re.search(r"=\s*(tt\.dot|tt\.dot_scaled|ttng\.warp_group_dot)\s", s):
            continue
        m = re.search(r"=\s*(tt\.dot_scaled|tt\.dot|ttng\.warp_group_dot)\s", s)
        if m is None:
            continue
        op = m.group(1)
        sig = s.split(" : ", 1)[1] if " : " in s else ""
        ts = _types(sig)
        prec = re.search(r"inputPrecision\s*=\s*([\w]+)(?:\s*:\s*i32)?", s)
        imprecise = re.search(r"maxNumImpreciseAcc\s*=\s*(\d+)", s)
        layout = "wgmma" if op == "ttng.warp_group_dot" else ("mma" if "#mma" in sig.split("->")[-1] else "fma")
        out.append({
            "op": op,
            "a": ts[0] if len(ts) > 0 else None,
            "b": ts[1] if len(ts) > 1 else None,
            "d": ts[-1] if len(ts) > 2 else None,
            "input_precision": prec.group(1) if prec else "ieee",
            "max_num_imprecise_acc": int(imprecise.group(1)) if imprecise else None,
            "lowering": layout,
            "source": locs.of_line(s),
            "text": s[:300],
        })
    return out


def _low_precision_reductions(ir: str, locs: _Locs) -> list[dict[str, Any]]:
    out = []
    lines = ir.splitlines()
    for i, line in enumerate(lines):
        if '"tt.reduce"(' not in line:
            continue
        for j in range(i + 1, min(i + 40, len(lines))):
            s = lines[j].strip()
            m = re.search(r"arith\.addf\s+\S+,\s*\S+\s*(?:\{[^}]*\}\s*)?:\s*(f16|bf16)\b", s)
            if m:
                out.append({"dtype": m.group(1), "source": locs.of_line(lines[i]) or locs.of_line(s),
                            "text": lines[i].strip()[:200]})
                break
            if "tt.reduce.return" in s:
                break
    return out


def _low_precision_accumulators(ir: str, locs: _Locs) -> list[dict[str, Any]]:
    out = []
    lines = ir.splitlines()
    for i, line in enumerate(lines):
        s = line.strip()
        if "scf.for" not in s or "iter_args" not in s or "->" not in s:
            continue
        rtypes = s.rsplit("->", 1)[1]
        low = [a or b for a, b in re.findall(r"x(f16|bf16)\b|\b(f16|bf16)\b", rtypes)]
        if not low:
            continue
        depth = line.count("{") - line.count("}")
        for j in range(i + 1, len(lines)):
            t = lines[j]
            m = re.search(r"arith\.addf\s+\S+,\s*\S+\s*(?:\{[^}]*\}\s*)?:\s*(?:tensor<(?:\d+x)+(f16|bf16)|(f16|bf16)\b)", t)
            if m:
                out.append({"dtype": m.group(1) or m.group(2), "source": locs.of_line(t) or locs.of_line(s),
                            "text": t.strip()[:200]})
                break
            depth += t.count("{") - t.count("}")
            if depth <= 0:
                break
    return out


def _mma(ptx: str) -> list[dict[str, Any]]:
    counts: dict[str, int] = {}
    for m in _MMA.finditer(ptx):
        counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    out = []
    for instr, n in sorted(counts.items()):
        parts = instr.split(".")
        types = [p for p in parts if p in ("f32", "f16", "bf16", "tf32", "f64", "e4m3", "e5m2", "s32", "s8", "u8")]
        d: str | None
        a: str | None
        b: str | None
        if instr.startswith("mma.sync") and len(types) >= 4:
            d, a, b = types[-4], types[-3], types[-2]
        elif len(types) >= 3:
            d, a, b = types[0], types[1], types[2]
        else:
            d = a = b = None
        out.append({"instr": instr, "count": n, "d": d, "a": a, "b": b})
    return out


def analyze(asm: dict[str, str], task_dir: str) -> dict[str, Any]:
    """Read a compiled kernel's ``asm`` (``ttir``, ``ttgir``, ``ptx`` texts) for the
    precision facts listed in the module doc. Pure text processing."""
    ttir, ttgir, ptx = asm.get("ttir", ""), asm.get("ttgir", ""), asm.get("ptx", "")
    l_ir, l_gir = _Locs(ttir, task_dir), _Locs(ttgir, task_dir)
    dots = _dots(ttir, l_ir)
    lowered = _dots(ttgir, l_gir)
    for d in dots:  # attach the TTGIR lowering of the dot on the same source line
        same = [g for g in lowered if g["source"] == d["source"]]
        if same:
            d["lowering"] = same[0]["lowering"]
            d["lowered_text"] = same[0]["text"]
            d["lowered_count"] = len(same)
    fma: dict[str, int] = {}
    for m in _FMA.finditer(ptx):
        fma[m.group(1)] = fma.get(m.group(1), 0) + 1
    return {
        "dots": dots,
        "mma": _mma(ptx),
        "cvt_rna_tf32": len(re.findall(r"\bcvt\.rna\.tf32\.f32\b", ptx)),
        "low_precision_reductions": _low_precision_reductions(ttgir, l_gir),
        "low_precision_accumulators": _low_precision_accumulators(ttgir, l_gir),
        "fma": fma,
        "explicit_fma": len(re.findall(r"\bmath\.fma\b", ttgir)),
        "fma_dots": sum(1 for g in lowered if g["lowering"] == "fma"),
        "ptx_lines": ptx.count("\n"),
    }
