"""Make the profile files kws's tests and sample tasks read (docs/profiles.md).

    .venv/bin/python scripts/capture_profile_fixtures.py            # CPU captures + written fixtures
    .venv/bin/python scripts/capture_profile_fixtures.py --gpu DIR  # on a GPU machine: real captures into DIR

Without ``--gpu`` (any machine):

- **captured here** with torch.profiler on the CPU: the traces of the sample task
  ``layernorm-trace-claim`` (candidate and baseline at its ``[benchmark]`` case, one
  thread, two warm-up steps, five active ``ProfilerStep`` s) and
  ``tests/fixtures/profiles/cpu_trace.json`` (a small matmul + relu, two steps);
- **written to the documented formats** (no GPU here): ``gpu_trace.json`` (Kineto's
  Chrome trace of a GPU run: ``kernel``, ``gpu_memcpy``, ``cuda_runtime`` events,
  ``deviceProperties``), ``ncu_details.csv`` and ``ncu_raw.csv`` (``ncu --csv``'s details
  and raw pages), ``run.hatchet`` (proton's ``[tree, devices]`` JSON) and ``nsys.sqlite``
  (the Nsight Systems export tables kws reads). Their numbers are chosen, not measured;
  ``--gpu`` makes real ones to replace them.

With ``--gpu DIR`` (a CUDA machine; the GPU script of the real-hardware issue runs it):
a torch.profiler trace of a Triton vector add and a torch matmul, a proton hatchet file
of the same, and, where ``ncu`` / ``nsys`` are on PATH, ``ncu --csv --page raw`` and an
``nsys export --type sqlite`` of a run of this script's ``--workload``. Nothing is
written outside DIR.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIX = REPO / "tests" / "fixtures" / "profiles"
SAMPLE = REPO / "sample_queue" / "tasks" / "layernorm-trace-claim"


def _import(path: Path, name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def capture_cpu_trace(fn, args, out: Path, *, warmup: int, active: int) -> None:
    """torch.profiler (CPU) over ``warmup + active`` steps of ``fn(*args)``; the trace of
    the active steps is written to ``out``."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.set_num_threads(1)
    done = {}

    def on_ready(prof) -> None:
        prof.export_chrome_trace(str(out))
        done["ok"] = True

    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=warmup, active=active),
                 on_trace_ready=on_ready) as prof:
        for _ in range(warmup + active):
            fn(*args)
            prof.step()
    assert done, "the profiler wrote no trace"
    doc = json.loads(out.read_text())
    doc["traceName"] = out.name  # not the capturing machine's path
    doc.pop("host_name", None)
    out.write_text(json.dumps(doc, separators=(",", ":")) + "\n")


def sample_traces() -> None:
    import tomllib

    task = tomllib.loads((SAMPLE / "task.toml").read_text())
    case = task["benchmark"]["cases"][0]
    sys.path.insert(0, str(SAMPLE))
    import torch

    inputs = _import(SAMPLE / "inputs.py", "lt_inputs").make_inputs(case, torch.device("cpu"), 0)
    for role in ("candidate", "baseline"):
        fn = _import(SAMPLE / f"{role}.py", f"lt_{role}").layer_norm
        capture_cpu_trace(fn, inputs, SAMPLE / "profiles" / f"{role}.trace.json", warmup=2, active=5)
        print(f"captured {SAMPLE / 'profiles' / f'{role}.trace.json'}")


def cpu_fixture() -> None:
    import torch

    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(64, 64, generator=g), torch.randn(64, 64, generator=g)
    capture_cpu_trace(lambda x, y: torch.relu(x @ y), (a, b), FIX / "cpu_trace.json", warmup=1, active=2)
    print(f"captured {FIX / 'cpu_trace.json'}")


def written_fixtures() -> None:
    """The GPU-side fixtures, written to their documented formats (module doc)."""
    # Kineto Chrome trace of two calls on an H100: per call a Triton kernel (launched from
    # Python: no cpu_op around it), an aten::mm (cuBLAS kernel) and a copy.
    ev = []
    t = 1000.0
    ext = 100
    for step in range(2):
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 1,
                   "ts": t, "dur": 60.0, "args": {}})
        ev.append({"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernelEx", "pid": 1, "tid": 1, "ts": t + 2,
                   "dur": 4.0, "args": {"correlation": ext}})
        ev.append({"ph": "X", "cat": "kernel", "name": "_fused_add_kernel", "pid": 0, "tid": 7, "ts": t + 8,
                   "dur": 12.0, "args": {"correlation": ext, "device": 0, "stream": 7}})
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t + 10, "dur": 14.0,
                   "args": {"External id": ext + 1}})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 12,
                   "dur": 3.0, "args": {"External id": ext + 1, "correlation": ext + 1}})
        ev.append({"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_f16f16_f32_tn_n_tilesize128x128x64",
                   "pid": 0, "tid": 7, "ts": t + 22, "dur": 30.0,
                   "args": {"External id": ext + 1, "correlation": ext + 1, "device": 0, "stream": 7}})
        ev.append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "pid": 0, "tid": 7,
                   "ts": t + 53, "dur": 4.0, "args": {"bytes": 1048576, "device": 0, "stream": 7}})
        t += 100.0
        ext += 10
    doc = {"schemaVersion": 1, "traceName": "gpu_trace.json (written to Kineto's format by kws)",
           "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0,
                                 "numSms": 132, "totalGlobalMem": 85520809984}],
           "traceEvents": ev}
    (FIX / "gpu_trace.json").write_text(json.dumps(doc, indent=1) + "\n")

    hdr = ['"ID"', '"Process ID"', '"Process Name"', '"Host Name"', '"Kernel Name"', '"Context"', '"Stream"',
           '"Block Size"', '"Grid Size"', '"Device"', '"CC"', '"Section Name"', '"Metric Name"', '"Metric Unit"',
           '"Metric Value"']
    lines = ["==PROF== Connected to process 4242 (/usr/bin/python3)", ",".join(hdr)]
    for i, (name, dur_us, rd, wr) in enumerate([("_fused_add_kernel", "12.58", "16.78", "8.39"),
                                                ("_fused_add_kernel", "12.45", "16.78", "8.39"),
                                                ("void at::native::vectorized_elementwise_kernel<4, "
                                                 "at::native::CUDAFunctor_add<float>>(int, float*)",
                                                 "9.12", "16.78", "8.39")]):
        base = [str(i), "4242", "python3", "127.0.0.1", name, "1", "7", "(128, 1, 1)", "(8192, 1, 1)", "0", "9.0"]
        for sec, metric, unit, val in [("GPU Speed Of Light Throughput", "Duration", "usecond", dur_us),
                                       ("GPU Speed Of Light Throughput", "DRAM Throughput", "%", "61.2"),
                                       ("Command line profiler metrics", "dram__bytes_read.sum", "Mbyte", rd),
                                       ("Command line profiler metrics", "dram__bytes_write.sum", "Mbyte", wr),
                                       ("Command line profiler metrics",
                                        "sm__sass_thread_inst_executed_op_fadd_pred_on.sum", "inst", "2,097,152"),
                                       ("Command line profiler metrics", "device__attribute_display_name", "",
                                        "NVIDIA H100 80GB HBM3")]:
            lines.append(",".join(f'"{v}"' for v in [*base, sec, metric, unit, val]))
    (FIX / "ncu_details.csv").write_text("\n".join(lines) + "\n")

    raw = ['"ID","Kernel Name","Device","device__attribute_display_name","dram__bytes.sum","gpu__time_duration.sum",'
           '"sm__sass_thread_inst_executed_op_ffma_pred_on.sum"',
           '"","","","","Gbyte","msecond","inst"',
           '"0","matmul_kernel","0","NVIDIA A100-SXM4-80GB","0.0503","0.412","1,073,741,824"',
           '"1","matmul_kernel","0","NVIDIA A100-SXM4-80GB","0.0503","0.409","1,073,741,824"']
    (FIX / "ncu_raw.csv").write_text("\n".join(raw) + "\n")

    hatchet = [
        {"frame": {"name": "ROOT", "type": "function"}, "metrics": {"count": 0, "time (ns)": 0},
         "children": [
             {"frame": {"name": "bench", "type": "function"}, "metrics": {},
              "children": [
                  {"frame": {"name": "matmul_kernel", "type": "function"},
                   "metrics": {"count": 10, "time (ns)": 4_100_000, "device_id": "0", "device_type": "CUDA",
                               "flops16": 21_474_836_480, "bytes": 503_316_480}, "children": []},
                  {"frame": {"name": "_layer_norm_fwd", "type": "function"},
                   "metrics": {"count": 10, "time (ns)": 900_000, "device_id": "0", "device_type": "CUDA",
                               "bytes": 335_544_320}, "children": []}]}]},
        {"CUDA": {"0": {"arch": "90", "num_sms": 132, "clock_rate": 1980000, "memory_clock_rate": 2619000,
                        "bus_width": 5120}}},
    ]
    (FIX / "run.hatchet").write_text(json.dumps(hatchet, indent=1) + "\n")

    db = FIX / "nsys.sqlite"
    db.unlink(missing_ok=True)
    con = sqlite3.connect(db)
    con.executescript("""
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE TARGET_INFO_GPU (id INTEGER, name TEXT, busLocation TEXT, smCount INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, "end" INTEGER NOT NULL,
            deviceId INTEGER, streamId INTEGER, correlationId INTEGER, demangledName INTEGER, shortName INTEGER,
            gridX INTEGER, blockX INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, "end" INTEGER NOT NULL, bytes INTEGER,
            copyKind INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, "end" INTEGER NOT NULL, nameId INTEGER,
            correlationId INTEGER);
        CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, "end" INTEGER, text TEXT, textId INTEGER,
            eventType INTEGER);
        INSERT INTO StringIds VALUES (1, 'void _softmax_kernel(float*, float*, int)'), (2, '_softmax_kernel'),
            (3, 'cudaLaunchKernel_v7000'), (4, 'cudaMemcpyAsync_v3020');
        INSERT INTO TARGET_INFO_GPU VALUES (0, 'NVIDIA H200', '0000:1b:00.0', 132);
        INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (1000, 9000, 0, 7, 11, 1, 2, 64, 256),
            (21000, 28500, 0, 7, 13, 1, 2, 64, 256), (41000, 48800, 0, 7, 15, 1, 2, 64, 256);
        INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (9500, 10500, 4194304, 8);
        INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (500, 900, 3, 11), (20500, 20900, 3, 13),
            (40500, 40900, 3, 15), (9100, 9400, 4, 12);
        INSERT INTO NVTX_EVENTS VALUES (0, 12000, 'kws#call', NULL, 59), (20000, 30000, 'kws#call', NULL, 59),
            (40000, 50000, 'kws#call', NULL, 59);
    """)
    con.commit()
    con.close()
    print(f"wrote gpu_trace.json, ncu_details.csv, ncu_raw.csv, run.hatchet, nsys.sqlite in {FIX}")


WORKLOAD = r'''
import torch, triton, triton.language as tl

@triton.jit
def _vadd(x, y, o, n, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    m = i < n
    tl.store(o + i, tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

def run(steps=3):
    x = torch.randn(1 << 22, device="cuda"); y = torch.randn_like(x); o = torch.empty_like(x)
    a = torch.randn(2048, 2048, device="cuda", dtype=torch.float16)
    for _ in range(steps):
        _vadd[(triton.cdiv(x.numel(), 1024),)](x, y, o, x.numel(), B=1024)
        a @ a
    torch.cuda.synchronize()
'''


def gpu_captures(out: Path) -> None:
    """Real captures on a CUDA machine (module doc)."""
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("--gpu needs a CUDA device")
    out.mkdir(parents=True, exist_ok=True)
    wl = out / "workload.py"
    wl.write_text(WORKLOAD)
    mod = _import(wl, "kws_profile_workload")
    mod.run(1)
    from torch.profiler import ProfilerActivity, profile, schedule

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=0, warmup=1, active=3),
                 on_trace_ready=lambda p: p.export_chrome_trace(str(out / "gpu_trace.json"))) as prof:
        for _ in range(4):
            mod.run(1)
            prof.step()
    print(f"captured {out / 'gpu_trace.json'}")
    try:
        import triton.profiler as proton

        proton.start(str(out / "run"), hook="triton")
        mod.run(3)
        proton.finalize()
        print(f"captured {out / 'run.hatchet'}")
    except Exception as e:  # noqa: BLE001
        print(f"proton capture failed: {type(e).__name__}: {e}")
    run = [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(out)!r}); import workload; workload.run(3)"]
    if shutil.which("ncu"):
        with open(out / "ncu_raw.csv", "w") as f:
            subprocess.run(["ncu", "--csv", "--page", "raw", "--metrics",
                            "gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,"
                            "sm__sass_thread_inst_executed_op_ffma_pred_on.sum,device__attribute_display_name",
                            *run], stdout=f, check=False, timeout=600)
        print(f"captured {out / 'ncu_raw.csv'}")
    if shutil.which("nsys"):
        subprocess.run(["nsys", "profile", "--trace=cuda,nvtx", "-o", str(out / "run"), "--force-overwrite=true",
                        *run], check=False, timeout=600)
        subprocess.run(["nsys", "export", "--type", "sqlite", "-o", str(out / "nsys.sqlite"),
                        "--force-overwrite=true", str(out / "run.nsys-rep")], check=False, timeout=600)
        print(f"captured {out / 'nsys.sqlite'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpu", type=Path, default=None, help="capture on this CUDA machine into DIR")
    a = ap.parse_args()
    if a.gpu is not None:
        gpu_captures(a.gpu)
        return
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    FIX.mkdir(parents=True, exist_ok=True)
    sample_traces()
    cpu_fixture()
    written_fixtures()


if __name__ == "__main__":
    main()
