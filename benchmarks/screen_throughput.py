"""kws screen: tasks per minute on the local pool and on a two-node Ray cluster on this
machine, and kws's own overhead per task.

A queue of a fixed subset of sample tasks (:data:`TASKS`, the whole battery each) is
screened twice: on the local pool (``--workers`` slots, default 2) and on a Ray cluster of
two nodes started here on loopback addresses (the head on 127.0.0.2, a worker node on
127.0.0.3, one CPU each: the same two slots), each with ``force`` so every task runs.

Printed per backend: wall time of the runs, tasks per minute (runs only, and end to end
with planning and the node probes), the battery time per task (the ``kws check`` runs'
own wall time), and kws's own overhead per task, in ms and as a fraction of that battery
time: in the parent, the plan without the probe, packing, merging, storing the notes and
the scheduling loop; on the worker, unpacking, the supervisor's imports and clean-up (each
run's wall time minus its ``kws check`` time and the start of the interpreter it runs in,
which a plain ``kws check`` pays too); and the scheduling gap (median time from a slot's run
ending to the next run starting in it). Goal: overhead at most 2% of the battery time.

Usage: python benchmarks/screen_throughput.py [--workers N] [--only IDS] [--no-ray] [TASK ...]
(about 3-4 minutes on 2 cores; Ray is skipped when it is not installed).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import git  # noqa: E402

from workstation.screen.local import LocalPool  # noqa: E402
from workstation.screen.run import ScreenOptions, ScreenRun, plan_screen, run_plan  # noqa: E402

#: the fixed subset: tasks without timing work (no bench, no speedup claim), 6-16 s each here
TASKS = ("copy-cast-oob", "relu-unwritten", "scale-rows-noncontig", "softmax-fp16-clean",
         "rowsum-edge", "softmax-loose-atol")


def make_queue(path: Path, tasks: tuple[str, ...]) -> Path:
    src = REPO / "sample_queue"
    (path / "tasks").mkdir(parents=True)
    shutil.copy(src / "queue.toml", path / "queue.toml")
    for t in tasks:
        shutil.copytree(src / "tasks" / t, path / "tasks" / t, ignore=shutil.ignore_patterns("__pycache__"))
    repo = git.Repo.init(path, initial_branch="main")
    repo.git.add("--all")
    repo.git.commit("-qm", "bench queue", env={"GIT_AUTHOR_NAME": "kws", "GIT_AUTHOR_EMAIL": "kws@localhost",
                                               "GIT_COMMITTER_NAME": "kws", "GIT_COMMITTER_EMAIL": "kws@localhost"})
    return path


def _gaps(run: ScreenRun) -> list[float]:
    """Per slot, the time from a run's end to the next run's start (the slot's idle time
    between runs: the scheduler's latency), by greedy slot assignment per host."""
    gaps: list[float] = []
    by_host: dict[str, list] = {}
    for o in run.outcomes:
        by_host.setdefault(o.host, []).append(o)
    for outs in by_host.values():
        slots: list[float] = []  # each slot's last t_end
        for o in sorted(outs, key=lambda o: o.t_start):
            free = [i for i, t in enumerate(slots) if t <= o.t_start]
            if free:
                i = max(free, key=lambda i: slots[i])
                gaps.append(o.t_start - slots[i])
                slots[i] = o.t_end
            else:
                slots.append(o.t_end)
    return gaps


def report(name: str, run: ScreenRun, plan_total: float) -> None:
    n = len(run.results)
    # the battery time of a run: what a plain `kws check` costs, its interpreter's start included
    battery = [o.check_seconds + o.interpreter_seconds for o in run.outcomes if o.check_seconds]
    mean_battery = statistics.fmean(battery) if battery else float("nan")
    ov = run.overhead
    parent = ov["plan"] + ov["payload"] + ov["merge"] + ov["store"] + ov["loop"]
    worker = ov["worker"]
    gaps = _gaps(run)
    gap = statistics.median(gaps) if gaps else 0.0
    per_task = (parent + worker) / max(1, n) + gap
    print(f"\n== {name}: {n} tasks")
    print(f"  runs:            {run.seconds:7.1f} s   {60 * n / run.seconds:6.2f} tasks/min")
    print(f"  end to end:      {run.seconds + plan_total:7.1f} s   {60 * n / (run.seconds + plan_total):6.2f} tasks/min "
          f"(plan and node probes {plan_total:.1f} s)")
    print(f"  battery per task (kws check wall time): mean {mean_battery:.2f} s, "
          f"median {statistics.median(battery):.2f} s")
    print(f"  kws overhead per task: {1000 * per_task:7.1f} ms = {100 * per_task / mean_battery:5.2f}% of the battery"
          f" time (goal <= 2%)")
    print(f"    parent: plan {1000 * ov['plan'] / n:.1f} ms, packing {1000 * ov['payload'] / n:.1f} ms, "
          f"merge {1000 * ov['merge'] / n:.2f} ms, store {1000 * ov['store'] / n:.1f} ms, "
          f"loop {1000 * ov['loop'] / n:.1f} ms")
    print(f"    worker (unpack, the supervisor's imports and clean-up, library versions): {1000 * worker / n:.1f} ms")
    print(f"    (not counted: the interpreter start that kws check runs in, {1000 * ov['interpreter'] / n:.1f} ms,"
          " paid by a plain kws check too)")
    print(f"    scheduling gap (median of {len(gaps)}): {1000 * gap:.1f} ms")


def screen(root: Path, backend, opts: ScreenOptions, name: str) -> None:
    t0 = time.monotonic()
    plan = plan_screen(root, backend, opts)
    plan_total = time.monotonic() - t0
    run = run_plan(plan, backend, opts)
    assert len(run.results) == len(plan.tasks), "not every task finished"
    bad = [(r.task, r.message) for r in run.results if r.outcome not in ("pass", "fail")]
    if bad:
        print(f"  note: {bad}")
    report(name, run, plan_total)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args: list[str], log: Path) -> subprocess.Popen:
    ray = Path(sys.executable).with_name("ray")
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    p = subprocess.Popen([str(ray), "start", "--block", "--disable-usage-stats", *args], stdout=log.open("wb"),
                         stderr=subprocess.STDOUT, env=env, start_new_session=True)
    deadline = time.monotonic() + 180
    while "block forever" not in log.read_text(errors="replace"):
        if p.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"ray start failed: {log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.5)
    return p


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--only", default=None, help="comma-separated check ids (default: the whole battery)")
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument("tasks", nargs="*")
    a = ap.parse_args()
    tasks = tuple(a.tasks) or TASKS
    tmp = Path(tempfile.mkdtemp(prefix="kws-screen-bench-"))
    os.environ.setdefault("KWS_CACHE_DIR", str(tmp / "cache"))
    opts = ScreenOptions(only=tuple(a.only.split(",")) if a.only else None, force=True)
    print(f"kws screen benchmark: {len(tasks)} sample tasks ({', '.join(tasks)}), "
          f"{'checks ' + a.only if a.only else 'the whole battery'}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}")
    try:
        root = make_queue(tmp / "q", tasks)
        pool = LocalPool(a.workers)
        try:
            screen(root, pool, opts, f"local pool, {a.workers} workers")
        finally:
            pool.close()
        if a.no_ray:
            return
        try:
            import ray  # noqa: F401
        except ImportError:
            print("\n== Ray: not installed (pip install 'kws[ray]'); skipped")
            return
        from workstation.screen.raycluster import RayBackend

        rtmp = Path(tempfile.mkdtemp(prefix="kr", dir="/tmp"))
        port = _free_port()
        nodes = []
        try:
            nodes.append(_start(["--head", "--node-ip-address=127.0.0.2", f"--port={port}", "--num-cpus=1",
                                 "--include-dashboard=false", f"--temp-dir={rtmp}",
                                 f"--ray-client-server-port={_free_port()}",
                                 f"--dashboard-agent-listen-port={_free_port()}"], rtmp / "head.log"))
            nodes.append(_start([f"--address=127.0.0.2:{port}", "--node-ip-address=127.0.0.3", "--num-cpus=1",
                                 f"--dashboard-agent-listen-port={_free_port()}"], rtmp / "worker.log"))
            backend = RayBackend(f"127.0.0.2:{port}", node_ip="127.0.0.2")
            try:
                screen(root, backend, opts, "Ray, two nodes of 1 CPU on this machine")
            finally:
                backend.close()
        finally:
            for p in reversed(nodes):
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(timeout=30)
            shutil.rmtree(rtmp, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
