"""Triton kernels compiled ahead of time for an NVIDIA target, and what their IR says about
precision.

Under ``TRITON_INTERPRET=1`` (the CPU), ``@triton.jit`` makes interpreter functions that
cannot be compiled, and the interpreter's numerics are not a GPU's (its ``tl.dot`` is a
numpy matmul in true fp32, its reductions run in numpy's order). So the ``triton_aot`` step
works in two processes:

1. in the job child (interpreter): the candidate runs once under the ``triton_launch_records``
   monitor, which wraps the launch path (``InterpretedFunction.run``; ``JITFunction.run`` on
   a GPU) and records, per launched kernel, its file, qualified name, argument names and
   types (pointer element dtype, i32/i64, fp32, i1), constexpr values and launch options
   (num_warps, num_stages, ...);
2. a second child, ``python -m workstation.harness.aot``, started with ``TRITON_INTERPRET``
   removed from its environment, imports the candidate file by path, finds each kernel's
   ``JITFunction``, compiles it with ``triton.compile(ASTSource(fn, signature, constexprs),
   target=GPUTarget("cuda", 90, 32))`` (no GPU needed) and reads the TTIR, TTGIR and PTX
   (:func:`analyze`). It is started at the beginning of the step, so its imports overlap
   the interpreter run.

On a GPU the kernels are compiled for real by the launch itself: the monitor keeps the
``CompiledKernel`` that ``JITFunction.run`` returns and :func:`analyze` reads its ``asm``.

Results are cached under ``$TRITON_CACHE_DIR/../kws-aot/`` keyed by the task's Python
sources, the case, the targets, the Triton version and :data:`ANALYSIS_VERSION`, so a task
that has not changed is analysed once.

What :func:`analyze` reports per kernel (all with the user source line where the IR's
location info gives one):

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

import hashlib
import inspect
import json
import os
import re
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from workstation.harness import StepOutput, monitor, step
from workstation.protocol.steps import Case, TritonAotStep, TritonLaunchRecords

ANALYSIS_VERSION = 1
AOT_TIMEOUT_S = 120.0
DEFAULT_TARGETS = (("cuda", 90, 32),)
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion")
_TORCH_TO_TRITON = {
    "float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64",
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "bool": "i1",
    "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5", "float8_e4m3fnuz": "fp8e4b8",
    "float8_e5m2fnuz": "fp8e5b16",
}


# ----------------------------------------------------------------------------- launch capture


def _is_constexpr_annotation(a: Any) -> bool:
    if a is inspect.Parameter.empty or a is None:
        return False
    if isinstance(a, str):
        return a.split(".")[-1] == "constexpr"
    try:
        import triton.language as tl

        return a is tl.constexpr or (isinstance(a, type) and issubclass(a, tl.constexpr))
    except ImportError:  # pragma: no cover
        return False


def _json_value(v: Any) -> Any:
    """A constexpr value as JSON (Triton dtypes as ``{"tl_dtype": "fp16"}``)."""
    if v is None or isinstance(v, bool | int | float | str):
        return v
    try:
        import triton.language as tl

        if isinstance(v, tl.dtype):
            return {"tl_dtype": str(v)}
        if isinstance(v, tl.constexpr):
            return _json_value(v.value)
    except ImportError:  # pragma: no cover
        pass
    return {"repr": repr(v)[:200]}


def _arg_type(v: Any) -> str | None:
    """The Triton signature type of a runtime argument, or None for a constexpr-like one."""
    import torch

    if isinstance(v, torch.Tensor):
        return "*" + _TORCH_TO_TRITON.get(str(v.dtype).removeprefix("torch."), "fp32")
    if isinstance(v, bool):
        return "i1"
    if isinstance(v, int):
        return "i32" if -(2**31) <= v < 2**31 else "i64"
    if isinstance(v, float):
        return "fp32"
    if hasattr(v, "data_ptr") and hasattr(v, "dtype"):
        return "*" + _TORCH_TO_TRITON.get(str(v.dtype).removeprefix("torch."), "fp32")
    return None


def launch_record(fn: Any, arg_names: list[str], args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
    """What a launch of the kernel function ``fn`` (the Python function under the jit
    wrapper) with ``args``/``kwargs`` needs for an AOT compile: file, qualname, signature,
    constexprs, options."""
    sig = inspect.signature(fn)
    params = sig.parameters
    bound: dict[str, Any] = {}
    for name, v in zip(arg_names, args, strict=False):
        bound[name] = v
    options = {}
    for k, v in kwargs.items():
        if k in arg_names:
            bound[k] = v
        elif k in LAUNCH_OPTIONS and isinstance(v, bool | int):
            options[k] = v
    for name in arg_names:
        if name not in bound and params[name].default is not inspect.Parameter.empty:
            bound[name] = params[name].default
    signature: dict[str, str] = {}
    constexprs: dict[str, Any] = {}
    for name in arg_names:
        v = bound.get(name)
        if _is_constexpr_annotation(params[name].annotation) or v is None:
            signature[name] = "constexpr"
            constexprs[name] = _json_value(v)
            continue
        t = _arg_type(v)
        if t is None:
            signature[name] = "constexpr"
            constexprs[name] = _json_value(v)
        else:
            signature[name] = t
    code = getattr(fn, "__code__", None)
    return {
        "file": os.path.realpath(code.co_filename) if code else "",
        "qualname": getattr(fn, "__qualname__", getattr(fn, "__name__", "?")),
        "name": getattr(fn, "__name__", "?"),
        "line": code.co_firstlineno if code else None,
        "signature": signature,
        "constexprs": constexprs,
        "options": options,
    }


def _launch_key(rec: dict[str, Any]) -> str:
    return json.dumps({k: rec[k] for k in ("file", "qualname", "signature", "constexprs", "options")},
                      sort_keys=True, default=str)


@monitor(TritonLaunchRecords)
def _launches(ctx: Any, spec: TritonLaunchRecords, report: dict[str, Any]):
    """Record every Triton kernel launch (see :func:`launch_record`); on a GPU also keep the
    compiled kernel's IR (``asm``) in ``ctx._kws_compiled`` for :func:`analyze`."""
    from workstation.harness.core import INTERPRETER

    records: dict[str, dict[str, Any]] = {}
    compiled: dict[str, dict[str, str]] = {}

    @contextmanager
    def cm():
        if INTERPRETER:
            from triton.runtime.interpreter import InterpretedFunction as cls
        else:
            from triton.runtime.jit import JITFunction as cls
        orig = cls.run

        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            rec = None
            try:
                rec = launch_record(self.fn, list(self.arg_names), args, kwargs)
                records.setdefault(_launch_key(rec), rec)
            except Exception as e:  # noqa: BLE001  (never break the task's launch)
                report.setdefault("errors", []).append(f"{type(e).__name__}: {e}")
            out = orig(self, *args, **kwargs)
            if rec is not None and not INTERPRETER and out is not None and hasattr(out, "asm"):
                try:
                    compiled[_launch_key(rec)] = {k: v for k, v in out.asm.items()
                                                  if k in ("ttir", "ttgir", "ptx") and isinstance(v, str)}
                except Exception:  # noqa: BLE001
                    pass
            return out

        cls.run = run
        try:
            yield
        finally:
            cls.run = orig
            report["launches"] = list(records.values())
            ctx._kws_compiled = compiled

    return cm()


# ----------------------------------------------------------------------------- interpreter self-test

_SELFTEST_N = 1024


def interpreter_selftest() -> dict[str, Any]:
    """Whether the Triton interpreter sums half-precision blocks correctly: ``tl.sum`` of
    1024 ones (exact in every format) for float16 and bfloat16. Triton 3.9's interpreter
    returns garbage for bfloat16 (its numpy emulation of bf16); findings drawn from the
    interpreter's numerics in a dtype that fails here are not trusted."""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def _sum_kernel(x_ptr, y_ptr, N: tl.constexpr):
        x = tl.load(x_ptr + tl.arange(0, N))
        tl.store(y_ptr, tl.sum(x, axis=0).to(tl.float32))

    out: dict[str, Any] = {}
    for name in ("float16", "bfloat16", "float32"):
        x = torch.ones(_SELFTEST_N, dtype=getattr(torch, name))
        y = torch.zeros(1, dtype=torch.float32)
        try:
            _sum_kernel[(1,)](x, y, N=_SELFTEST_N)
            got = float(y.item())
        except Exception as e:  # noqa: BLE001
            out[name] = {"ok": False, "error": f"{type(e).__name__}: {str(e)[:200]}"}
            continue
        out[name] = {"ok": got == float(_SELFTEST_N), "got": got, "expected": float(_SELFTEST_N)}
    return out


# ----------------------------------------------------------------------------- the step


def _cache_dir() -> Path | None:
    base = os.environ.get("TRITON_CACHE_DIR")
    return Path(base).parent / "kws-aot" if base else None


def _cache_key(task_dir: Path, cases: list[Case], seed: int, targets: list[list[Any]], interpreter: bool) -> str:
    import triton

    h = hashlib.sha256()
    h.update(json.dumps({"v": ANALYSIS_VERSION, "triton": triton.__version__, "cases": cases,
                         "seed": seed, "targets": targets,
                         "interp": interpreter, "fusion": os.environ.get("TRITON_DEFAULT_FP_FUSION", "")},
                        sort_keys=True).encode())
    for p in sorted(task_dir.rglob("*.py")):
        if "__pycache__" in p.parts:
            continue
        h.update(str(p.relative_to(task_dir)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:32]


def _relative(path: str, task_dir: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(task_dir.resolve()))
    except ValueError:
        return path


@step(TritonAotStep)
def aot_step(ctx: Any, spec: TritonAotStep) -> StepOutput:
    """Capture the candidate's Triton launches on each case of ``spec.cases`` (seed
    ``spec.seed``) and read the IR of each distinct kernel launch compiled for
    ``spec.targets`` (default sm_90) (module doc). One AOT child serves all cases.

    ``extra``: ``launches`` (file relative to the task, qualname, signature, constexprs,
    options, and ``cases``: the indices of the cases that launched it), ``kernels`` (per
    launch and target: ``qualname``, ``file``, ``target``, ``launch`` (index into
    ``launches``) and :func:`analyze`'s ``analysis`` or an ``error``), ``mode`` (``"aot"``:
    compiled in a second process without the interpreter; ``"jit"``: read from the kernels a
    GPU launch compiled), ``cached``, ``seconds``, ``case_errors`` (cases the candidate
    raised on).
    """
    from workstation.harness.core import INTERPRETER, error_info, run_role

    t0 = time.perf_counter()
    targets = [list(t) for t in spec.targets or DEFAULT_TARGETS]
    cases = list(spec.cases)
    task_dir = Path(ctx.task_dir)
    key = _cache_key(task_dir, cases, spec.seed, targets, INTERPRETER)
    cdir = _cache_dir()
    cfile = cdir / f"{key}.json" if cdir else None
    if cfile is not None and cfile.is_file():
        try:
            data = json.loads(cfile.read_text())
            data.update(cached=True, seconds=time.perf_counter() - t0)
            return StepOutput(ok=True, extra=data)
        except ValueError:
            pass
    proc = None
    if INTERPRETER:
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        cand = str(task_dir / ctx.entry["candidate"].rpartition(":")[0]) if ctx.entry.get("candidate") else ""
        proc = subprocess.Popen([sys.executable, "-m", "workstation.harness.aot", *(["--preload", cand] if cand else [])],
                                stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=str(task_dir),
                                text=True)
    launches: dict[str, dict[str, Any]] = {}
    case_errors: dict[str, Any] = {}
    compiled: dict[str, dict[str, str]] = {}
    seconds = 0.0
    for ci, case in enumerate(cases):
        try:
            inputs = ctx.make_inputs(case, spec.seed)
            res = run_role(ctx, "candidate", inputs, [TritonLaunchRecords()])
        except BaseException as e:  # noqa: BLE001
            case_errors[str(ci)] = error_info(e, getattr(e, "_kws_phase", "call"))
            continue
        seconds += res.seconds
        compiled.update(getattr(ctx, "_kws_compiled", {}))
        for rec in res.extra["monitors"]["triton_launch_records"].get("launches", []):
            launches.setdefault(_launch_key(rec), dict(rec, cases=[]))["cases"].append(ci)
    recs = list(launches.values())
    kernels: list[dict[str, Any]] = []
    mode = "aot" if INTERPRETER else "jit"
    if INTERPRETER:
        assert proc is not None
        if not recs:
            proc.kill()
            proc.communicate()
        else:
            req = {"task_dir": str(task_dir), "launches": recs, "targets": targets}
            try:
                out, err = proc.communicate(json.dumps(req), timeout=AOT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
                return StepOutput(ok=False, error={"type": "TimeoutError", "message": f"the AOT compile child "
                                                   f"did not finish in {AOT_TIMEOUT_S:g} s", "traceback": err[-4000:],
                                                   "phase": "aot", "origin": "kws"})
            try:
                kernels = json.loads(out)["kernels"]
            except (ValueError, KeyError, TypeError):
                return StepOutput(ok=False, error={"type": "AotError", "message": f"the AOT compile child exited "
                                                   f"with {proc.returncode} without a result", "traceback": err[-4000:],
                                                   "phase": "aot", "origin": "kws"})
    else:
        missing = []
        for li, rec in enumerate(recs):
            asm = compiled.get(_launch_key(rec))
            entry: dict[str, Any] = {"launch": li, "target": f"device ({ctx.device_name})",
                                     "qualname": rec["qualname"], "file": _relative(rec["file"], task_dir)}
            if asm:
                entry["analysis"] = analyze(asm, str(task_dir))
                kernels.append(entry)
            else:
                missing.append((li, rec))
        if missing:  # no IR from the JIT: compile the same launches for the device's own target
            kernels += _compile_for_device(ctx, task_dir, missing)
    for rec in recs:
        rec["file"] = _relative(rec["file"], task_dir)
    data = {"launches": recs, "kernels": kernels, "mode": mode, "targets": targets, "case_errors": case_errors}
    if INTERPRETER:
        try:
            data["interpreter_selftest"] = interpreter_selftest()
        except Exception as e:  # noqa: BLE001
            data["interpreter_selftest"] = {"error": f"{type(e).__name__}: {e}"}
    if cfile is not None and not case_errors and all("error" not in k for k in kernels):
        try:
            cfile.parent.mkdir(parents=True, exist_ok=True)
            tmp = cfile.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps(data))
            os.replace(tmp, cfile)
        except OSError:
            pass
    data.update(cached=False, seconds=time.perf_counter() - t0)
    return StepOutput(ok=True, extra=data, seconds=seconds)


def _compile_for_device(ctx: Any, task_dir: Path, missing: list[tuple[int, dict[str, Any]]]) -> list[dict[str, Any]]:
    """On a GPU, launches whose compiled kernel the JIT did not hand back: compiled in the
    AOT child for the device's own target (``torch.cuda.get_device_capability``)."""
    import torch

    major, minor = torch.cuda.get_device_capability(ctx.device)
    target = ["cuda", major * 10 + minor, 32]
    req = {"task_dir": str(task_dir), "launches": [r for _, r in missing], "targets": [target]}
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    try:
        p = subprocess.run([sys.executable, "-m", "workstation.harness.aot"], input=json.dumps(req), text=True,
                           capture_output=True, env=env, cwd=str(task_dir), timeout=AOT_TIMEOUT_S)
        got = json.loads(p.stdout)["kernels"]
    except (subprocess.TimeoutExpired, ValueError, KeyError, TypeError) as e:
        return [{"launch": li, "target": f"cuda sm_{target[1]}", "qualname": r["qualname"],
                 "file": _relative(r["file"], task_dir), "error": f"{type(e).__name__}: {e}"} for li, r in missing]
    for k in got:  # re-index into the step's launch list
        k["launch"] = missing[k["launch"]][0]
    return got


# ----------------------------------------------------------------------------- IR analysis

_LOC_DEF = re.compile(r"^(#loc\d*)\s*=\s*loc\((.*)\)\s*$")
_FILE_LOC = re.compile(r'^"([^"]+)":(\d+):(\d+)')
_TYPE = re.compile(r"(?:tensor|memdesc)<((?:\d+x)+)([a-zA-Z][a-zA-Z0-9]*)")
_INLINE_LOC = re.compile(r"loc\((#loc\d*|\"[^\"]+\":\d+:\d+)\)\s*$")
_MMA = re.compile(r"\b(wgmma\.mma_async\.sync\.aligned\.[\w.]+|mma\.sync\.aligned\.[\w.]+|tcgen05\.mma[\w.]*)")
_FMA = re.compile(r"\bfma\.rn(?:\.ftz)?(?:\.sat)?\.(f32|f16x2|f16|bf16x2|bf16|f64)\b")
_LOW = ("f16", "bf16")


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
        op = re.search(r"=\s*(tt\.dot_scaled|tt\.dot|ttng\.warp_group_dot)\s", s).group(1)
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


# ----------------------------------------------------------------------------- the AOT child


def _decode(v: Any) -> Any:
    if isinstance(v, dict) and "tl_dtype" in v:
        import triton.language as tl

        name = v["tl_dtype"]
        return getattr(tl, {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp64": "float64"}.get(name, name))
    return v


def _import_by_path(path: str, cache: dict[str, Any]) -> Any:
    import importlib.util

    if path not in cache:
        stem = Path(path).stem
        spec = importlib.util.spec_from_file_location(stem, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {path}")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[stem] = mod
        spec.loader.exec_module(mod)
        cache[path] = mod
    return cache[path]


def _jit_function(mod: Any, qualname: str) -> Any:
    from triton.runtime.jit import JITFunction

    obj: Any = mod
    for part in qualname.split("."):
        if part == "<locals>":
            raise LookupError(f"{qualname} is defined inside a function: not reachable by name")
        obj = getattr(obj, part)
    for _ in range(8):
        if isinstance(obj, JITFunction):
            return obj
        obj = getattr(obj, "fn", None)
        if obj is None:
            break
    raise LookupError(f"{qualname} is not a triton.jit function")


def compile_launch(rec: dict[str, Any], target: list[Any], modules: dict[str, Any], task_dir: str) -> dict[str, Any]:
    """Compile one recorded launch for ``target`` ([backend, arch, warp size]) and analyse it."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    jit = _jit_function(_import_by_path(rec["file"], modules), rec["qualname"])
    sig, consts = {}, {}
    for name in jit.arg_names:
        t = rec["signature"].get(name)
        if t is None:
            raise KeyError(f"the launch recorded no argument {name!r}")
        sig[name] = t
        if t == "constexpr":
            consts[name] = _decode(rec["constexprs"].get(name))
    opts = {k: v for k, v in rec.get("options", {}).items() if k in LAUNCH_OPTIONS}
    t0 = time.perf_counter()
    src = ASTSource(fn=jit, signature=sig, constexprs=consts)
    try:
        asm = _compile_to_ptx(src, GPUTarget(*target), opts)
        how = "stages ttir..ptx"
    except Exception:  # noqa: BLE001  (internal API moved: the public entry point, cubin included)
        k = triton.compile(src, target=GPUTarget(*target), options=opts)
        asm = {n: v for n, v in k.asm.items() if n in ("ttir", "ttgir", "ptx") and isinstance(v, str)}
        how = "triton.compile"
    return {"analysis": analyze(asm, task_dir), "compile_seconds": time.perf_counter() - t0, "compiled_by": how}


def _compile_to_ptx(src: Any, target: Any, opts: dict[str, Any]) -> dict[str, str]:
    """``triton.compile``'s pipeline (Triton 3.x) run up to PTX: the cubin stage (ptxas) is
    skipped, since kws reads IR and never launches. Uses the backend's stage table, as
    ``triton.compiler.compiler.compile`` does."""
    from triton._C.libtriton import ir
    from triton.compiler.compiler import make_backend

    backend = make_backend(target)
    options = backend.parse_options(dict(opts, **src.parse_options()))
    stages: dict[str, Any] = {}
    backend.add_stages(stages, options, src.language)
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    module = src.make_ir(target, options, backend.get_codegen_implementation(options), backend.get_module_map(),
                         context)
    metadata: dict[str, Any] = {"hash": src.hash(), "target": target, **options.__dict__}
    out: dict[str, str] = {}
    for ext, stage in stages.items():
        if ext not in ("ttir", "ttgir", "llir", "ptx"):
            break
        module = stage(module, metadata)
        if ext in ("ttir", "ttgir", "ptx"):
            out[ext] = module if isinstance(module, str) else str(module)
    if "ptx" not in out:
        raise RuntimeError("the pipeline produced no PTX")
    return out


def main() -> None:
    """The AOT child: a JSON request on stdin (``task_dir``, ``launches``, ``targets``), a
    JSON result on stdout (``{"kernels": [...]}``). Must run without TRITON_INTERPRET."""
    os.environ.pop("TRITON_INTERPRET", None)
    modules: dict[str, Any] = {}
    if len(sys.argv) > 2 and sys.argv[1] == "--preload":
        # import the candidate (torch, triton, its kernels) while the job child is still
        # capturing launches; a failure here is reported per kernel below
        sys.path.insert(0, str(Path(sys.argv[2]).parent))
        try:
            _import_by_path(os.path.realpath(sys.argv[2]), modules)
        except BaseException:  # noqa: BLE001
            modules.clear()
    req = json.loads(sys.stdin.read())
    task_dir = req["task_dir"]
    sys.path.insert(0, task_dir)
    kernels = []
    for li, rec in enumerate(req["launches"]):
        for target in req["targets"]:
            entry: dict[str, Any] = {"launch": li, "target": f"{target[0]} sm_{target[1]}",
                                     "qualname": rec["qualname"], "file": _relative(rec["file"], Path(task_dir))}
            try:
                entry.update(compile_launch(rec, target, modules, task_dir))
            except BaseException as e:  # noqa: BLE001
                entry["error"] = f"{type(e).__name__}: {str(e)[:1000]}"
            kernels.append(entry)
    sys.stdout.write(json.dumps({"kernels": kernels}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
