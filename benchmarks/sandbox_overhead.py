"""What the sandbox costs: per job, per fork-server start, and per battery.

Three measurements, sandbox on (``bwrap``: bubblewrap around the fork server, per-job
pid/mount/IPC/network/UTS namespaces, a fresh /proc and tmpfs, the privilege drop, the
out-of-process check after each step) against off (``none``: the same runner without any
of that, but with the same task copy, result reading and out-of-process check), always
interleaved (on, off, on, off...) so machine load hits both alike:

1. per job: ``--jobs`` jobs of one ``call`` step on a tiny task (N = 64 fp32 add), run one
   at a time in one warm runner per mode; prints the median wall time per job and the
   difference (the goal: a few tens of ms);
2. fork-server start: ``--starts`` starts of each mode (bubblewrap setup, torch import,
   the namespace and verifier self-tests);
3. per battery: ``kws check``'s engine on sample tasks (``--tasks``, default three), one
   fresh runner per run as the CLI does, ``--rounds`` rounds; prints the median battery
   time per mode and the relative difference (the goal: under 5%), and how many steps the
   battery ran in how many jobs (a check's consecutive steps of one principal share one).

Usage: python benchmarks/sandbox_overhead.py [--jobs 40] [--starts 3] [--rounds 2]
       [--tasks softmax-gen,rowsum-edge,layernorm-debug]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.hostile import make_task  # noqa: E402
from workstation.engine.run import run_checks  # noqa: E402
from workstation.protocol.steps import CallStep  # noqa: E402
from workstation.runner import Runner  # noqa: E402
from workstation.task.format import load_task  # noqa: E402
from workstation.task.queue import load_queue  # noqa: E402

MODES = ("bwrap", "none")


def per_job(n: int) -> dict[str, list[float]]:
    root = Path(tempfile.mkdtemp(prefix="kws-bench-"))
    task = load_task(make_task(root, "tiny", "def add(x, y):\n    return x + y\n"))
    step = CallStep(role="candidate", case={"N": 64, "dtype": "float32"}, seed=0)
    out: dict[str, list[float]] = {m: [] for m in MODES}
    runners = {m: Runner(sandbox=m, max_parallel=1) for m in MODES}
    try:
        for r in runners.values():
            r.start()
            r.run(task.dir, [step], timeout=60, entry={k: str(v) for k, v in task.entry.items()})  # warm
        for _ in range(n):
            for m, r in runners.items():
                t0 = time.perf_counter()
                job = r.run(task.dir, [step], timeout=60, entry={k: str(v) for k, v in task.entry.items()},
                            principal="candidate", cache_key="bench")
                out[m].append(time.perf_counter() - t0)
                assert job.status == "ok", job
    finally:
        for r in runners.values():
            r.close()
    return out


def starts(n: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {m: [] for m in MODES}
    for _ in range(n):
        for m in MODES:
            t0 = time.perf_counter()
            r = Runner(sandbox=m)
            r.start()
            out[m].append(time.perf_counter() - t0)
            r.close()
    return out


def batteries(task_ids: list[str], rounds: int) -> tuple[dict[str, dict[str, list[float]]], dict[str, tuple[int, int]]]:
    """Battery seconds per task and mode, and per task the (jobs, steps) of its last run:
    a check's consecutive steps of one principal share a job (one import of the task files),
    so steps per job says how much of the per-job cost the battery pays per step."""
    q = load_queue(REPO / "sample_queue")
    tasks = {t.id: t for t in q.tasks}
    out: dict[str, dict[str, list[float]]] = {t: {m: [] for m in MODES} for t in task_ids}
    counts: dict[str, tuple[int, int]] = {}
    seen = [0, 0]
    orig = Runner.run

    def counted(self: Runner, task_dir: Path, steps: list, **kw: object) -> object:
        seen[0] += 1
        seen[1] += len(steps)
        return orig(self, task_dir, steps, **kw)

    Runner.run = counted  # type: ignore[method-assign]
    try:
        for _ in range(rounds):
            for tid in task_ids:
                for m in MODES:
                    seen[:] = [0, 0]
                    t0 = time.perf_counter()
                    with Runner(sandbox=m) as r:
                        run_checks(load_task(tasks[tid].dir), r)
                    out[tid][m].append(time.perf_counter() - t0)
                    counts[tid] = (seen[0], seen[1])
    finally:
        Runner.run = orig  # type: ignore[method-assign]
    return out, counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=40)
    ap.add_argument("--starts", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--tasks", default="softmax-gen,rowsum-edge,layernorm-debug")
    a = ap.parse_args()
    med = statistics.median
    if a.jobs:
        j = per_job(a.jobs)
        on, off = med(j["bwrap"]) * 1e3, med(j["none"]) * 1e3
        print(f"per job ({a.jobs} one-step jobs, median): sandbox {on:.1f} ms, none {off:.1f} ms, "
              f"overhead {on - off:+.1f} ms per job")
    if a.starts:
        s = starts(a.starts)
        print(f"fork-server start (median of {a.starts}): sandbox {med(s['bwrap']):.2f} s, "
              f"none {med(s['none']):.2f} s, overhead {med(s['bwrap']) - med(s['none']):+.2f} s")
    if a.rounds:
        ids = [t for t in a.tasks.split(",") if t]
        b, counts = batteries(ids, a.rounds)
        rel = []
        for tid, d in b.items():
            on, off = med(d["bwrap"]), med(d["none"])
            rel.append((on - off) / off)
            jobs, steps = counts[tid]
            print(f"battery {tid:<22} sandbox {on:6.1f} s  none {off:6.1f} s  {100 * (on - off) / off:+5.1f}%  "
                  f"({steps} steps in {jobs} jobs, {steps / max(jobs, 1):.1f} per job)")
        print(f"battery overhead, median over {len(ids)} tasks: {100 * med(rel):+.1f}%")


if __name__ == "__main__":
    main()
