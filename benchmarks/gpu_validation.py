"""One prepared run of kws on a GPU box: every CUDA path, in priority order, in at most ~5 min.

kws is written for GPU boxes reached over SSH, but its CUDA paths (CUDA events and the L2
flush of the timing protocol, tl.dot lowering on the device's own target, load_inline
builds, compute-sanitizer, the sandbox with the NVIDIA device nodes, profiler captures)
cannot run on a CPU-only machine. GPU time is scarce, so this script is the one thing to
run there: each section runs in a subprocess of its own with its own time limit (a hang
costs that section, never the run), writes its results as soon as it ends, and the run
ends with ``summary.md``.

Usage (from the repository root; the box's own torch and triton are used, nothing is
downloaded; without bubblewrap the sandbox opt-out is used and recorded)::

    python benchmarks/gpu_validation.py --out gpu-results [--cpu-baseline DIR]
    python benchmarks/gpu_validation.py --dry-run --out /tmp/gpu-dry   # on a CPU machine

``--dry-run`` runs every section on the CPU with small limits: sections that need CUDA
say so (``skip``) after exercising what they can (``triton.compile`` for sm_90 needs no
GPU), and ``sample_checks`` writes the CPU reports that ``--cpu-baseline`` compares with
on the GPU box (findings that appear or vanish between CPU and GPU, per sample task).
tests/test_gpu_validation.py runs the dry run, so the script cannot rot.

Results folder: ``<section>.json`` per section (``{"section", "status", "seconds",
"limit_s", "result" | "error"}``), ``checks/<task>.json`` (the ``kws check --json``
reports), ``captures/`` (profiler traces, ``ncu --csv`` exports, proton profiles), and
``summary.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


@dataclass(frozen=True)
class Section:
    """One part of the run: ``limit_s`` wall seconds (the dry run uses ``dry_limit_s``)."""

    name: str
    limit_s: float
    dry_limit_s: float
    doc: str


#: the run, in priority order (the most valuable evidence first: a box lent for a few
#: minutes may be taken back before the end).
SECTIONS: tuple[Section, ...] = (
    Section("env", 20, 60, "the device, driver, CUDA toolchain, torch/triton versions, bubblewrap"),
    Section("sample_checks", 120, 240, "kws check --json on every sample task (--device cuda), CPU-vs-GPU differences"),
    Section("timing", 40, 60, "kws's timing protocol vs triton.testing.do_bench vs torch.utils.benchmark.Timer"),
    Section("tf32_ir", 15, 60, "precision-regime's IR reading on the device's own compiled fp32 tl.dot"),
    Section("load_inline", 45, 10, "a CUDA candidate built with torch.utils.cpp_extension.load_inline and run"),
    Section("sanitizer", 25, 10, "compute-sanitizer memcheck through the out-of-bounds check"),
    Section("sandbox", 20, 60, "a check run inside the sandbox with the NVIDIA device nodes bound in"),
    Section("profiles", 35, 120, "one torch.profiler trace, one ncu --csv export, one proton profile"),
)
BY_NAME = {s.name: s for s in SECTIONS}


def _kws(args: list[str], timeout: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``kws ARGS`` with this interpreter (``python -m workstation.cli.main``)."""
    return subprocess.run([sys.executable, "-m", "workstation.cli.main", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


def _cuda() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001
        return False


def _which(name: str) -> str | None:
    return shutil.which(name)


# ----------------------------------------------------------------------------- sections


def section_env(ctx: RunContext) -> dict[str, Any]:
    """What the box is: kws's runner device, versions, GPUs, drivers, tools."""
    from workstation.runner import Runner

    out: dict[str, Any] = {"cuda_available": _cuda(), "tools": {}}
    for tool in ("nvidia-smi", "nvcc", "compute-sanitizer", "ncu", "nsys", "bwrap", "cuobjdump", "nvdisasm"):
        out["tools"][tool] = _which(tool)
    if out["tools"]["nvidia-smi"]:
        r = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
                            "--format=csv,noheader"], capture_output=True, text=True, timeout=15)
        out["gpus"] = [ln.strip() for ln in r.stdout.splitlines() if ln.strip()]
    if out["tools"]["nvcc"]:
        r = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, timeout=15)
        out["nvcc"] = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr.strip()
    with Runner(device=ctx.device) as runner:
        out["device"] = runner.device.label
        out["versions"] = dict(runner.device.versions)
    out["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    return out


def _task_ids(ctx: RunContext) -> list[str]:
    ids = sorted(p.name for p in (REPO / "sample_queue" / "tasks").iterdir() if p.is_dir())
    return [i for i in ids if not ctx.tasks or i in ctx.tasks]


def _masked(summary: str) -> str:
    return re.sub(r"-?\d+(\.\d+)?(e[-+]?\d+)?", "#", summary)


def _finding_keys(doc: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(f["check"], f["severity"], _masked(f["summary"])) for f in doc.get("findings", [])}


def section_sample_checks(ctx: RunContext) -> dict[str, Any]:
    """``kws check --json`` on every sample task, a few at a time, each capped; with
    ``--cpu-baseline``, the findings that appear or vanish against the CPU reports."""
    ids = _task_ids(ctx)
    folder = ctx.out / "checks"
    folder.mkdir(exist_ok=True)
    per_task = ctx.task_limit_s
    deadline = time.monotonic() + ctx.limit_s - 5

    def one(tid: str) -> dict[str, Any]:
        left = deadline - time.monotonic()
        if left < 5:
            return {"task": tid, "status": "not run (section time up)"}
        args = ["check", str(REPO / "sample_queue" / "tasks" / tid), "--json", "--device", ctx.device]
        if ctx.only:
            args += ["--only", ctx.only]
        t0 = time.monotonic()
        try:
            r = _kws(args, timeout=min(per_task, left))
        except subprocess.TimeoutExpired:
            return {"task": tid, "status": f"over the {min(per_task, left):.0f} s cap"}
        secs = time.monotonic() - t0
        try:
            doc = json.loads(r.stdout)
        except ValueError:
            return {"task": tid, "status": f"exit {r.returncode}, no JSON", "stderr": r.stderr[-1500:]}
        (folder / f"{tid}.json").write_text(json.dumps(doc, indent=1))
        row: dict[str, Any] = {"task": tid, "status": f"exit {r.returncode}", "seconds": round(secs, 1),
                               "device": doc.get("device"), "complete": doc.get("complete"),
                               "fail": sorted({f["check"] for f in doc["findings"] if f["severity"] == "fail"}),
                               "errors": {c["check"]: c["reason"][:300] for c in doc["checks"] if c["status"] == "error"}}
        base = ctx.cpu_baseline / f"{tid}.json" if ctx.cpu_baseline else None
        if base is not None and base.is_file():
            cpu = _finding_keys(json.loads(base.read_text()))
            gpu = _finding_keys(doc)
            row["appear_on_gpu"] = sorted(map(list, gpu - cpu))
            row["vanish_on_gpu"] = sorted(map(list, cpu - gpu))
        return row

    with ThreadPoolExecutor(max_workers=ctx.parallel) as pool:
        rows = list(pool.map(one, ids))
    return {"tasks": rows, "per_task_cap_s": per_task, "parallel": ctx.parallel}


TIMING_OPS = {
    "vector-add": ("x + y", {"M": 4096, "N": 4096, "dtype": "float32"}, {"M": 256, "N": 256, "dtype": "float32"}),
    "softmax": ("torch.softmax(x, dim=-1)", {"M": 4096, "N": 4096, "dtype": "float32"},
                {"M": 128, "N": 256, "dtype": "float32"}),
    "matmul-fp16": ("x @ y", {"M": 4096, "N": 4096, "dtype": "float16"}, {"M": 128, "N": 128, "dtype": "float32"}),
}
TIMING_OP_PY = """\
import torch


def op(x, y):
    return {expr}


def make_inputs(case, device, seed):
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, case["dtype"])
    x = torch.randn(case["M"], case["N"], generator=g).to(dt)
    y = torch.randn(case["M"], case["N"], generator=g).to(dt)
    return x.to(device), y.to(device)
"""
DO_BENCH = """\
import json, sys, importlib.util, torch
spec = importlib.util.spec_from_file_location("op", sys.argv[1]); m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
case = json.loads(sys.argv[2])
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
x, y = m.make_inputs(case, dev, 0)
out = {}
if dev.type == "cuda":
    import triton.testing
    q = triton.testing.do_bench(lambda: m.op(x, y), quantiles=[0.2, 0.5, 0.8])
    out["do_bench_ms"] = {"p20": q[0], "median": q[1], "p80": q[2]}
from torch.utils.benchmark import Timer
t = Timer("m.op(x, y)", globals={"m": m, "x": x, "y": y}).blocked_autorange(min_run_time=0.5)
out["timer_ms"] = {"median": t.median * 1e3, "iqr": t.iqr * 1e3, "runs": len(t.times)}
print(json.dumps(out))
"""


def section_timing(ctx: RunContext) -> dict[str, Any]:
    """The kws timing protocol (the ``timing`` harness step, as speedup-claim runs it) on
    three named kernels, beside ``triton.testing.do_bench`` (GPU) and
    ``torch.utils.benchmark.Timer``, each in a fresh process: medians and spreads."""
    from workstation.analysis.timingstats import summarize
    from workstation.engine.context import CheckContext
    from workstation.protocol.extras import extra_as
    from workstation.protocol.extras.timing import TimingExtra
    from workstation.protocol.steps import TimingSide, TimingStep
    from workstation.runner import Runner
    from workstation.task.format import load_task

    rows = []
    with tempfile.TemporaryDirectory() as tmp, Runner(device=ctx.device) as runner:
        for name, (expr, gpu_case, cpu_case) in TIMING_OPS.items():
            case = gpu_case if ctx.device == "cuda" else cpu_case
            d = Path(tmp) / "tasks" / name
            d.mkdir(parents=True)
            (d / "op.py").write_text(textwrap.dedent(TIMING_OP_PY.format(expr=expr)))
            (d / "spec.md").write_text(f"# {name}\n")
            (d / "task.toml").write_text(
                f'schema = 1\nid = "{name}"\ntitle = "{name}"\nkind = "optimization"\nbackend = "torch"\n'
                f'spec = "spec.md"\n[entry]\ncandidate = "op.py:op"\nreference = "op.py:op"\n'
                f'inputs = "op.py:make_inputs"\n[[cases]]\nM = {case["M"]}\nN = {case["N"]}\ndtype = "{case["dtype"]}"\n')
            c = CheckContext(load_task(d), runner)
            job = c.run_job([TimingStep(cases=[case], seed=0, sides=[TimingSide(name="candidate", role="candidate")])],
                            exclusive=True, step_timeout=ctx.limit_s / 4)
            st = job.steps[0]
            row: dict[str, Any] = {"op": name, "expr": expr, "case": case}
            if st is None or not st.ok:
                row["kws_error"] = job.describe_death() if st is None else (st.error.message if st.error else None)
            else:
                ex = extra_as(st.extra, TimingExtra)
                raw = ex.cases[0].sides["candidate"]
                primary = "cold" if runner.device.kind == "cuda" else "warm"
                s = summarize(raw.cold_ns, raw.warm_ns, raw.first_call_ns, primary=primary)
                row["kws_ms"] = {"cold_median": s.cold_ms, "warm_median": s.warm_ms, "primary": primary,
                                 "n_cold": len(raw.cold_ns), "n_warm": len(raw.warm_ns),
                                 "clock": ex.clock, "flush_bytes": ex.flush_bytes}
            r = subprocess.run([sys.executable, "-c", DO_BENCH, str(d / "op.py"), json.dumps(case)],
                               capture_output=True, text=True, timeout=ctx.limit_s / 3)
            try:
                row.update(json.loads(r.stdout.strip().splitlines()[-1]))
            except (ValueError, IndexError):
                row["reference_error"] = r.stderr[-800:]
            rows.append(row)
    return {"device": ctx.device, "ops": rows}


TF32_KERNEL = '''\
import triton
import triton.language as tl


@triton.jit
def mm(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * N + rn[None, :], acc)
'''


def section_tf32_ir(ctx: RunContext) -> dict[str, Any]:
    """An fp32 ``tl.dot`` compiled for the device's own target (``triton.compile`` with a
    GPUTarget; sm_90 on the CPU) and read by precision-regime's IR analysis: with TF32 on
    by default it must find a TF32 MMA; with ``input_precision="ieee"`` none."""
    code = textwrap.dedent(f'''
        import json, sys, importlib.util
        sys.path.insert(0, {str(REPO)!r})
        import torch, triton
        from triton.backends.compiler import GPUTarget
        spec = importlib.util.spec_from_file_location("k", sys.argv[1]); m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)
        from workstation.harness.aot_compile import _compile_to_ptx
        from workstation.harness.ir import analyze
        if torch.cuda.is_available():
            cap = torch.cuda.get_device_capability()
            target = GPUTarget("cuda", cap[0] * 10 + cap[1], 32)
        else:
            target = GPUTarget("cuda", 90, 32)
        sig = {{"a": "*fp32", "b": "*fp32", "c": "*fp32", "M": "i32", "N": "i32", "K": "i32"}}
        src = triton.compiler.ASTSource(fn=m.mm, signature={{**sig, "BM": "constexpr", "BN": "constexpr",
                                        "BK": "constexpr"}}, constexprs={{"BM": 64, "BN": 64, "BK": 32}})
        if torch.cuda.is_available():  # the device's own full pipeline, cubin included
            k = triton.compile(src, target=target)
            ir = {{key: v for key, v in k.asm.items() if key in ("ttir", "ttgir", "ptx") and isinstance(v, str)}}
        else:  # no GPU: the stages up to PTX, as the AOT child runs them
            ir = _compile_to_ptx(src, target, {{}})
        a = analyze(ir, sys.argv[2])
        print(json.dumps({{"target": f"{{target.backend}} sm_{{target.arch}}", "stages": sorted(ir),
                          "mma": a["mma"], "cvt_rna_tf32": a["cvt_rna_tf32"],
                          "dots": [{{k: d.get(k) for k in ("input_precision", "lowering", "a_dtype", "acc_dtype")}}
                                   for d in a["dots"]]}}, default=str))
    ''')
    with tempfile.TemporaryDirectory() as tmp:
        kf = Path(tmp) / "k.py"
        kf.write_text(TF32_KERNEL)
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        r = subprocess.run([sys.executable, "-c", code, str(kf), tmp], capture_output=True, text=True,
                           timeout=ctx.limit_s - 2, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"compile failed: {r.stderr[-2000:]}")
    got = json.loads(r.stdout.strip().splitlines()[-1])
    # Triton's default input_precision for an fp32 tl.dot is "tf32" on sm_80+: the IR reading
    # must see a TF32 MMA, as precision-regime's finding on matmul-fp32-tf32 says
    got["tf32_mma_found"] = any(m.get("a") == "tf32" for m in got["mma"])
    return got


LOAD_INLINE = r'''
import json, torch
from torch.utils.cpp_extension import load_inline
cuda_src = """
__global__ void scale_k(const float* x, float* y, float s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = s * x[i];
}
torch::Tensor scale(torch::Tensor x, double s) {
  auto y = torch::empty_like(x);
  int n = x.numel();
  scale_k<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), (float)s, n);
  return y;
}
"""
mod = load_inline("kws_gpu_validation_scale", cpp_sources="torch::Tensor scale(torch::Tensor x, double s);",
                  cuda_sources=cuda_src, functions=["scale"], verbose=False)
x = torch.randn(1_000_003, device="cuda")
y = mod.scale(x, 3.0)
torch.cuda.synchronize()
print(json.dumps({"max_abs_err": float((y - 3.0 * x).abs().max()), "n": x.numel()}))
'''


def section_load_inline(ctx: RunContext) -> dict[str, Any]:
    """A CUDA kernel built with ``load_inline`` and run against torch (the CUDA backend's
    build path on a GPU box)."""
    if ctx.device != "cuda":
        raise Skip("needs CUDA (load_inline links against a CUDA build of torch)")
    r = subprocess.run([sys.executable, "-c", LOAD_INLINE], capture_output=True, text=True, timeout=ctx.limit_s - 2)
    if r.returncode != 0:
        raise RuntimeError(f"load_inline failed: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def section_sanitizer(ctx: RunContext) -> dict[str, Any]:
    """``kws check --only out-of-bounds`` on the out-of-bounds sample: on a GPU box with
    compute-sanitizer installed, its memcheck pass runs inside the check."""
    if ctx.device != "cuda":
        raise Skip("needs CUDA and compute-sanitizer")
    if not _which("compute-sanitizer"):
        raise Skip("compute-sanitizer is not installed on this box")
    r = _kws(["check", str(REPO / "sample_queue" / "tasks" / "copy-cast-oob"), "--json", "--only", "out-of-bounds",
              "--device", "cuda"], timeout=ctx.limit_s - 2)
    doc = json.loads(r.stdout)
    return {"exit": r.returncode, "findings": [(f["severity"], f["summary"]) for f in doc["findings"]],
            "sanitizer": [f["evidence"].get("sanitizer") for f in doc["findings"] if "sanitizer" in f["evidence"]]}


def section_sandbox(ctx: RunContext) -> dict[str, Any]:
    """One check run of a Triton sample with kws's default isolation (the sandbox where
    bubblewrap exists: on a GPU box the device nodes are bound in); the report says which."""
    r = _kws(["check", str(REPO / "sample_queue" / "tasks" / "relu-unwritten"), "--json", "--only",
              "correctness,unwritten-output", "--device", ctx.device], timeout=ctx.limit_s - 2)
    doc = json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}
    return {"exit": r.returncode, "device": doc.get("device"), "sandbox": doc.get("sandbox", "(not reported)"),
            "checks": [(c["check"], c["status"]) for c in doc.get("checks", [])], "stderr": r.stderr[-800:],
            "bwrap": _which("bwrap")}


PROFILE = r'''
import json, sys, torch
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
x = torch.randn(2048, 2048, device=dev)
from torch.profiler import ProfilerActivity, profile
acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
with profile(activities=acts) as prof:
    for _ in range(3):
        y = torch.softmax(x @ x, dim=-1)
    if dev.type == "cuda":
        torch.cuda.synchronize()
prof.export_chrome_trace(sys.argv[1])
print(json.dumps({"events": len(prof.events()), "device": dev.type}))
'''


def section_profiles(ctx: RunContext) -> dict[str, Any]:
    """Real captures for the profile parsers' fixtures: a torch.profiler Chrome trace
    (CPU too), an ``ncu --csv`` export and a proton profile where the tools exist."""
    cap = ctx.out / "captures"
    cap.mkdir(exist_ok=True)
    out: dict[str, Any] = {}
    trace = cap / "torch_profiler_trace.json"
    # a third of the section each for the three tools on a GPU; on the CPU the trace is the
    # only capture and gets the section (a loaded machine imports torch slowly)
    r = subprocess.run([sys.executable, "-c", PROFILE, str(trace)], capture_output=True, text=True,
                       timeout=ctx.limit_s / 3 if ctx.device == "cuda" else max(ctx.limit_s - 5, 1))
    out["torch_profiler"] = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else r.stderr[-800:]
    if ctx.device == "cuda" and _which("ncu"):
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write("import torch\nx = torch.randn(2048, 2048, device='cuda')\ny = torch.softmax(x @ x, -1)\n"
                    "torch.cuda.synchronize()\n")
        r = subprocess.run(["ncu", "--csv", "--metrics", "gpu__time_duration.sum,dram__bytes.sum,"
                            "sm__sass_thread_inst_executed_op_fadd_pred_on.sum", sys.executable, f.name],
                           capture_output=True, text=True, timeout=ctx.limit_s / 3)
        (cap / "ncu.csv").write_text(r.stdout)
        out["ncu"] = {"exit": r.returncode, "lines": len(r.stdout.splitlines())}
    else:
        out["ncu"] = "skip: needs CUDA and ncu"
    if ctx.device == "cuda":
        try:
            import triton.profiler  # noqa: F401

            out["proton"] = "available (capture with triton.profiler.start/finalize: see docs/gpu.md)"
        except ImportError:
            out["proton"] = "skip: triton.profiler (proton) is not in this triton build"
    else:
        out["proton"] = "skip: needs CUDA"
    return out


# ----------------------------------------------------------------------------- the run


class Skip(Exception):  # a control-flow signal
    """A section that cannot run here; the message says why."""


@dataclass
class RunContext:
    """What a section sees: the results folder, the device (``cuda``, or ``cpu`` in a dry
    run), its limit, the sample-task filter, per-task cap and parallelism."""

    out: Path
    device: str
    limit_s: float
    tasks: tuple[str, ...] = ()
    only: str = ""
    cpu_baseline: Path | None = None
    task_limit_s: float = 60.0
    parallel: int = 4


RUNNERS: dict[str, Callable[[RunContext], dict[str, Any]]] = {
    "env": section_env, "sample_checks": section_sample_checks, "timing": section_timing,
    "tf32_ir": section_tf32_ir, "load_inline": section_load_inline, "sanitizer": section_sanitizer,
    "sandbox": section_sandbox, "profiles": section_profiles,
}


def run_section(name: str, ctx: RunContext) -> dict[str, Any]:
    """Run one section in this process; its JSON document (``status``: ok / skip / error)."""
    t0 = time.monotonic()
    doc: dict[str, Any] = {"section": name, "limit_s": ctx.limit_s, "device": ctx.device}
    try:
        doc["result"] = RUNNERS[name](ctx)
        doc["status"] = "ok"
    except Skip as e:
        doc["status"], doc["reason"] = "skip", str(e)
    except Exception as e:  # noqa: BLE001  (reported in the results, the run goes on)
        doc["status"], doc["error"] = "error", f"{type(e).__name__}: {e}"
    doc["seconds"] = round(time.monotonic() - t0, 2)
    return doc


def _summary(out: Path, docs: list[dict[str, Any]], dry: bool) -> str:
    lines = [f"# kws GPU validation {'(dry run on CPU)' if dry else ''}".rstrip(), "",
             "| section | status | seconds | limit | note |", "|---|---|---|---|---|"]
    for d in docs:
        note = d.get("reason") or d.get("error") or ""
        lines.append(f"| {d['section']} | {d['status']} | {d.get('seconds', '')} | {d.get('limit_s', '')} | "
                     f"{note[:160].replace('|', '/')} |")
    checks = next((d for d in docs if d["section"] == "sample_checks" and d["status"] == "ok"), None)
    if checks:
        lines += ["", "## Sample tasks", "", "| task | status | s | fail | appear on GPU | vanish on GPU | errors |",
                  "|---|---|---|---|---|---|---|"]
        for r in checks["result"]["tasks"]:
            lines.append(f"| {r['task']} | {r['status']} | {r.get('seconds', '')} | {', '.join(r.get('fail', []))} | "
                         f"{len(r.get('appear_on_gpu', []))} | {len(r.get('vanish_on_gpu', []))} | "
                         f"{', '.join(r.get('errors', {}))} |")
    timing = next((d for d in docs if d["section"] == "timing" and d["status"] == "ok"), None)
    if timing:
        lines += ["", "## Timing (ms)", "", "| op | kws (primary median) | do_bench median | Timer median |",
                  "|---|---|---|---|"]
        for r in timing["result"]["ops"]:
            k = r.get("kws_ms") or {}
            kp = k.get(f"{k.get('primary', 'warm')}_median")
            lines.append(f"| {r['op']} | {kp if kp is not None else r.get('kws_error', '')} | "
                         f"{(r.get('do_bench_ms') or {}).get('median', '-')} | {(r.get('timer_ms') or {}).get('median', '-')} |")
    text = "\n".join(lines) + "\n"
    (out / "summary.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "gpu-results")
    ap.add_argument("--dry-run", action="store_true", help="run on the CPU with small limits (the tests do)")
    ap.add_argument("--sections", default=",".join(s.name for s in SECTIONS))
    ap.add_argument("--tasks", default="", help="comma-separated sample task ids (default: all)")
    ap.add_argument("--only", default="", help="check ids for sample_checks (default: the whole battery)")
    ap.add_argument("--cpu-baseline", type=Path, default=None, help="a dry run's checks/ folder to compare with")
    ap.add_argument("--task-limit-s", type=float, default=60.0)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--section", default=None, help=argparse.SUPPRESS)  # one section, in a child process
    ap.add_argument("--limit-s", type=float, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    device = "cpu" if args.dry_run else "cuda"
    args.out.mkdir(parents=True, exist_ok=True)
    if args.section:  # the child side: run one section and write its document
        ctx = RunContext(args.out, device, args.limit_s or BY_NAME[args.section].limit_s,
                         tuple(t for t in args.tasks.split(",") if t), args.only, args.cpu_baseline,
                         args.task_limit_s, args.parallel)
        doc = run_section(args.section, ctx)
        (args.out / f"{args.section}.json").write_text(json.dumps(doc, indent=1, default=str))
        return 0
    if not args.dry_run and not _cuda():
        print("gpu_validation: no CUDA device here; use --dry-run on a CPU machine", file=sys.stderr)
        return 2
    docs = []
    for name in [s for s in args.sections.split(",") if s]:
        sec = BY_NAME[name]
        # the dry run (CI, a shared CPU box) stretches its wall limits with the machine's load:
        # they bound a borrowed GPU box's minutes, not a verdict
        stretch = max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1)) if args.dry_run else 1.0
        limit = (sec.dry_limit_s if args.dry_run else sec.limit_s) * stretch
        cmd = [sys.executable, __file__, "--section", name, "--limit-s", str(limit), "--out", str(args.out),
               "--tasks", args.tasks, "--only", args.only, "--task-limit-s", str(args.task_limit_s),
               "--parallel", str(args.parallel)]
        if args.cpu_baseline:
            cmd += ["--cpu-baseline", str(args.cpu_baseline)]
        if args.dry_run:
            cmd.append("--dry-run")
        t0 = time.monotonic()
        try:
            subprocess.run(cmd, timeout=limit + 15, capture_output=True, text=True)
        except subprocess.TimeoutExpired:
            (args.out / f"{name}.json").write_text(json.dumps({"section": name, "status": "error", "limit_s": limit,
                                                                "error": f"over its {limit:.0f} s limit"}))
        path = args.out / f"{name}.json"
        doc = json.loads(path.read_text()) if path.is_file() else {"section": name, "status": "error",
                                                                   "error": "wrote no result"}
        doc.setdefault("seconds", round(time.monotonic() - t0, 2))
        docs.append(doc)
        print(f"{name:14s} {doc['status']:5s} {doc.get('seconds', 0):7.1f} s  "
              f"{(doc.get('reason') or doc.get('error') or '')[:100]}", flush=True)
        _summary(args.out, docs, args.dry_run)
    print(f"results in {args.out} (summary.md)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
