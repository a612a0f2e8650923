"""How long the whole check battery takes per sample task, per check, and against a plain allclose.

Prints, per task: the battery's wall time, the numerics checks' share, the slowest checks,
and the time of a plain ``torch.testing.assert_close`` run of the same task's declared cases
(one fresh Python process that imports torch, runs candidate and reference per case and
seed, and compares) with the ratio between the two. Ends with medians over the tasks and
per-check medians. Targets (issues 3 and 4): battery median < 15 s on a 2-core CPU under
the Triton interpreter; the numerics checks add at most 5 s (median).

Usage: python benchmarks/battery_speed.py [TASK_ID ...]   (default: every sample task)

``--ratio [--rounds N] [TASK_ID ...]`` prints issue 42's table instead: per task, the whole-
process wall seconds of ``kws check --json`` and of ``kws check --json --only correctness``
(median of N rounds, alternating A B A B after one untimed warm-up of each, so caches and the
page cache are warm for both), their ratio, and the load average at the start and the end.
Default tasks: softmax-gen, layernorm-fix-clean, matmul-fp16-clean (issue 42's three).
Target: ratio <= 2.0 (goal 1.5). The figure moves with the machine's load: quote it with the
load printed beside it.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from workstation.engine.run import run_checks  # noqa: E402
from workstation.runner import Runner  # noqa: E402
from workstation.task.queue import load_queue  # noqa: E402

NUMERICS = ("tolerance-loose", "tolerance-tight", "precision-regime", "reference-suspect")

PLAIN = textwrap.dedent("""
    import importlib.util, os, sys, time
    os.environ.setdefault("TRITON_INTERPRET", "1")
    t0 = time.perf_counter()
    import torch
    task_dir, entries, cases, atol, rtol = sys.argv[1], eval(sys.argv[2]), eval(sys.argv[3]), eval(sys.argv[4]), eval(sys.argv[5])
    sys.path.insert(0, task_dir)
    def load(ep):
        f, _, n = ep.rpartition(":")
        spec = importlib.util.spec_from_file_location(f[:-3], os.path.join(task_dir, f))
        m = importlib.util.module_from_spec(spec); sys.modules[f[:-3]] = m; spec.loader.exec_module(m)
        return getattr(m, n)
    mk, cand, ref = load(entries["inputs"]), load(entries["candidate"]), load(entries["reference"])
    for case in cases:
        for seed in (0, 1, 2):
            try:
                a = cand(*mk(case, torch.device("cpu"), seed)); b = ref(*mk(case, torch.device("cpu"), seed))
                torch.testing.assert_close(a, b, atol=atol, rtol=rtol)
            except Exception:
                pass
    print(time.perf_counter() - t0)
""")


def plain_allclose_seconds(task) -> float:
    """Wall seconds of a plain assert_close run of the declared cases, torch import included."""
    entries = {k: str(v) for k, v in task.entry.items()}
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", PLAIN, str(task.dir), repr(entries), repr(task.cases),
         repr(task.tolerance.atol), repr(task.tolerance.rtol)],
        capture_output=True, text=True, timeout=600, env={**os.environ, "TRITON_INTERPRET": "1"},
    )
    return time.perf_counter() - t0


RATIO_TASKS = ("softmax-gen", "layernorm-fix-clean", "matmul-fp16-clean")


def _kws_wall(task_dir: Path, *only: str) -> float:
    """Wall seconds of one ``kws check --json`` process on ``task_dir`` (``--only`` ids)."""
    cmd = [str(Path(sys.executable).with_name("kws")), "check", "--json", str(task_dir)]
    if only:
        cmd += ["--only", ",".join(only)]
    t0 = time.perf_counter()
    subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    return time.perf_counter() - t0


def ratio_table(ids: list[str], rounds: int) -> None:
    """Issue 42's table (module doc)."""
    print(f"load average at start: {os.getloadavg()[0]:.2f}; {rounds} alternating round(s) after a warm-up")
    print(f"{'sample task':<24} {'kws check --json':>17} {'--only correctness':>19} {'ratio':>6}")
    for tid in ids:
        d = REPO / "sample_queue" / "tasks" / tid
        _kws_wall(d)
        _kws_wall(d, "correctness")
        full, corr = [], []
        for _ in range(rounds):
            full.append(_kws_wall(d))
            corr.append(_kws_wall(d, "correctness"))
        f, c = statistics.median(full), statistics.median(corr)
        print(f"{tid:<24} {f:16.1f}s {c:18.1f}s {f / c:5.2f}x")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


def main() -> None:
    args = sys.argv[1:]
    if "--ratio" in args:
        args.remove("--ratio")
        rounds = 2
        if "--rounds" in args:
            i = args.index("--rounds")
            rounds = int(args[i + 1])
            del args[i:i + 2]
        ratio_table(args or list(RATIO_TASKS), rounds)
        return
    q = load_queue(REPO / "sample_queue")
    ids = args or [t.id for t in q.tasks]
    per_check: dict[str, list[float]] = {}
    totals, numerics, plains = [], [], []
    with Runner() as runner:
        print(f"device: {runner.device.label}; {runner.max_parallel} parallel jobs")
        print(f"{'task':<28} {'battery s':>9} {'numerics s':>10} {'allclose s':>10} {'ratio':>6}  slowest checks")
        for tid in ids:
            task = q.task(tid)
            if task is None:
                print(f"{tid}: not in the sample queue")
                continue
            t0 = time.perf_counter()
            res = run_checks(task, runner)
            total = time.perf_counter() - t0
            plain = plain_allclose_seconds(task)
            num = sum(r.seconds for r in res.results if r.check in NUMERICS)
            for r in res.results:
                per_check.setdefault(r.check, []).append(r.seconds)
            slow = sorted(res.results, key=lambda r: -r.seconds)[:3]
            totals.append(total)
            numerics.append(num)
            plains.append(plain)
            print(f"{tid:<28} {total:9.2f} {num:10.2f} {plain:10.2f} {total / plain:6.1f}  "
                  + ", ".join(f"{r.check} {r.seconds:.1f}" for r in slow))
    print()
    print(f"median battery {statistics.median(totals):.2f} s (target < 15 s); "
          f"median numerics checks {statistics.median(numerics):.2f} s (target <= 5 s); "
          f"median plain allclose {statistics.median(plains):.2f} s; "
          f"median ratio {statistics.median(t / p for t, p in zip(totals, plains, strict=True)):.1f}x")
    print("per-check median seconds (checks run in parallel, so these overlap):")
    for cid, secs in sorted(per_check.items(), key=lambda kv: -statistics.median(kv[1])):
        print(f"  {cid:<20} {statistics.median(secs):6.2f}  (max {max(secs):.2f})")


if __name__ == "__main__":
    main()
