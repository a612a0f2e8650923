"""Accuracy of kws's timing protocol against torch.utils.benchmark.Timer on CPU ops.

For each op, the script alternates, ``--repeats`` times, a kws measurement (the
``timing`` harness step, exactly as ``speedup-claim`` runs it: exclusive child, cache
flush before cold samples, warm-up, interleaved rounds, stdrel stopping) and a
``torch.utils.benchmark.Timer(...).blocked_autorange()`` measurement (the ``torch_timer``
harness step: same child conditions, one intra-op thread, same allocator settings).
Timer runs warm (back to back, no flush), so it is compared with kws's *warm* median.

It prints, per op: the median over repeats of kws's warm median and of Timer's median,
their relative difference (target: within 10%), and the noise of each over the repeats
(coefficient of variation of the per-repeat medians; target: kws no noisier than Timer),
then one verdict line per op and overall. Not a test: the figures depend on the machine
and its load (printed first).

    .venv/bin/python benchmarks/timing_accuracy.py [--repeats 7] [--ops gelu,softmax,...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workstation.analysis.timingstats import summarize
from workstation.engine.context import CheckContext
from workstation.protocol.extras import extra_as
from workstation.protocol.extras.timing import TimingExtra, TorchTimerExtra
from workstation.protocol.steps import TimingSide, TimingStep, TorchTimerStep
from workstation.runner import Runner
from workstation.task.format import load_task

#: op name -> (torch expression of (x, y), case)
OPS = {
    "gelu-1M": ("torch.nn.functional.gelu(x)", {"M": 1024, "N": 1024, "dtype": "float32"}),
    "softmax-512x1024": ("torch.softmax(x, dim=-1)", {"M": 512, "N": 1024, "dtype": "float32"}),
    "matmul-256": ("x[:256, :256] @ y[:256, :256]", {"M": 256, "N": 256, "dtype": "float32"}),
    "add-4M": ("x + y", {"M": 2048, "N": 2048, "dtype": "float32"}),
    "layernorm-64x4096": ("torch.nn.functional.layer_norm(x, (x.shape[-1],))", {"M": 64, "N": 4096,
                                                                               "dtype": "float32"}),
}

TOML = """\
schema = 1
id = "{id}"
title = "{id}"
kind = "optimization"
backend = "torch"
spec = "spec.md"

[entry]
candidate = "op.py:op"
reference = "op.py:op"
inputs = "op.py:make_inputs"

[[cases]]
M = {M}
N = {N}
dtype = "float32"
"""

OP_PY = """\
import torch


def op(x, y):
    return {expr}


def make_inputs(case, device, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(case["M"], case["N"], generator=g)
    y = torch.randn(case["M"], case["N"], generator=g)
    return x.to(device), y.to(device)
"""


def make_task(root: Path, name: str, expr: str, case: dict) -> Path:
    tid = name.lower()
    d = root / "tasks" / tid
    d.mkdir(parents=True)
    (d / "task.toml").write_text(TOML.format(id=tid, M=case["M"], N=case["N"]))
    (d / "spec.md").write_text(f"# {name}\n")
    (d / "op.py").write_text(textwrap.dedent(OP_PY.format(expr=expr)))
    return d


def kws_once(ctx: CheckContext, case: dict, cache_bytes: int | None) -> dict:
    """One kws measurement of the candidate side; warm and cold medians (ms), n, stop."""
    spec = TimingStep(cases=[case], seed=0, sides=[TimingSide(name="candidate", role="candidate")],
                      cache_bytes=cache_bytes)
    job = ctx.run_job([spec], exclusive=True, step_timeout=120)
    st = job.steps[0]
    if st is None or not st.ok:
        raise RuntimeError(f"timing step failed: {job.describe_death() if st is None else st.error}")
    ex = extra_as(st.extra, TimingExtra)
    raw = ex.cases[0].sides["candidate"]
    s = summarize(raw.cold_ns, raw.warm_ns, raw.first_call_ns, primary="warm")
    n = len(raw.warm_ns) + len(raw.cold_ns)
    return {"warm": s.warm_ms, "cold": s.cold_ms, "n_warm": len(raw.warm_ns), "n_cold": len(raw.cold_ns),
            "descheduled": raw.descheduled / max(n, 1), "nice": ex.priority.nice,
            "stop": ex.cases[0].stop, "flush_mib": ex.flush_bytes / 2 ** 20}


def timer_once(ctx: CheckContext, case: dict, min_run_time: float) -> dict:
    """One torch.utils.benchmark.Timer blocked_autorange median (ms) in a kws child."""
    job = ctx.run_job([TorchTimerStep(case=case, role="candidate", min_run_time=min_run_time)],
                      exclusive=True, step_timeout=120)
    st = job.steps[0]
    if st is None or not st.ok:
        raise RuntimeError(f"timer step failed: {job.describe_death() if st is None else st.error}")
    tt = extra_as(st.extra, TorchTimerExtra)
    return {"median": tt.median_ms, "blocks": tt.blocks, "number": tt.number_per_run}


def cv(xs: list[float]) -> float:
    """Coefficient of variation: sample stdev / mean."""
    return statistics.stdev(xs) / statistics.fmean(xs) if len(xs) > 1 else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--timer-min-run-time", type=float, default=1.0,
                    help="Timer.blocked_autorange(min_run_time=...), seconds (Timer's default is 0.2; "
                         "1.0 gives Timer about as much measuring time as kws, so its median is steadier)")
    ap.add_argument("--llc-bytes", type=int, default=None,
                    help="flush this cache size instead of the sysfs LLC (KWS_LLC_BYTES)")
    args = ap.parse_args()
    names = [o for o in args.ops.split(",") if o]
    print(f"load average: {os.getloadavg()}  cpus: {os.cpu_count()}  repeats: {args.repeats}  "
          f"Timer min_run_time: {args.timer_min_run_time:g} s")
    ok_all = True
    rows = []
    with tempfile.TemporaryDirectory() as tmp, Runner() as runner:
        print(f"device: {runner.device.label}  versions: {runner.device.versions}")
        for name in names:
            expr, case = OPS[name]
            task = load_task(make_task(Path(tmp), name, expr, case))
            ctx = CheckContext(task, runner)
            kws, tim = [], []
            for _ in range(args.repeats):
                kws.append(kws_once(ctx, case, args.llc_bytes))
                tim.append(timer_once(ctx, case, args.timer_min_run_time))
            kw = [k["warm"] for k in kws]
            tm = [t["median"] for t in tim]
            k_med, t_med = float(np.median(kw)), float(np.median(tm))
            diff = k_med / t_med - 1.0
            k_cv, t_cv = cv(kw), cv(tm)
            agree = abs(diff) <= 0.10
            quieter = k_cv <= t_cv
            ok_all &= agree and quieter
            rows.append((name, k_med, t_med, diff, k_cv, t_cv, agree, quieter, kws, tim))
            print(f"\n{name}: {expr} on {case}")
            print(f"  kws warm medians (ms): {' '.join(f'{x:.4g}' for x in kw)}")
            colds = " ".join(f"{k['cold']:.4g}" for k in kws)
            print(f"  kws cold medians (ms): {colds}  "
                  f"(samples per run: {kws[0]['n_warm']} warm, {kws[0]['n_cold']} cold; stop: "
                  f"{', '.join(sorted({k['stop'] for k in kws}))}; flush {kws[0]['flush_mib']:.0f} MiB)")
            busy = statistics.fmean(k["descheduled"] for k in kws)
            print(f"  kws samples descheduled (wall > 1.1 x CPU time + 20 us): {busy:.1%}; child nice {kws[0]['nice']}")
            print(f"  Timer medians (ms):    {' '.join(f'{x:.4g}' for x in tm)}  "
                  f"(blocks per run: {tim[0]['blocks']}, runs per block: {tim[0]['number']})")
    print("\nop                   kws warm ms   Timer ms     diff   kws CV  Timer CV   within 10%  no noisier")
    for name, k_med, t_med, diff, k_cv, t_cv, agree, quieter, _, _ in rows:
        print(f"{name:20s} {k_med:11.4g} {t_med:10.4g} {diff:+8.1%} {k_cv:8.2%} {t_cv:9.2%}   "
              f"{'yes' if agree else 'NO':>10s}  {'yes' if quieter else 'NO':>10s}")
    print(f"\noverall: {'PASS' if ok_all else 'FAIL'} (warm medians within 10% of Timer and kws's repeat-to-repeat "
          "CV no larger than Timer's, on every op)")
    return 0 if ok_all else 1


if __name__ == "__main__":
    raise SystemExit(main())
