"""Proof time per kernel of the ``bounds-proof`` check over the sample queue's Triton tasks.

Usage: ``.venv/bin/python benchmarks/bounds_proof.py [TASK ...] [--queue sample_queue]``

Runs ``bounds-proof`` alone (seed 0, one fork server for all tasks) on every Triton task
of the queue (or the tasks named) and prints, per task, the check's status and wall
seconds, then per compiled kernel (a launch and its constexpr variant) the number of loads
and stores encoded, the verdict counts and the Z3 seconds (the check's own measurement,
``evidence.kernels``), and the refuted questions with their counterexample shape.
Nothing is asserted: the figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from workstation.engine.run import run_checks  # noqa: E402
from workstation.runner import Runner  # noqa: E402
from workstation.task.format import load_task  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tasks", nargs="*", help="task ids (default: every Triton task of the queue)")
    ap.add_argument("--queue", default="sample_queue", help="queue folder (default: sample_queue)")
    args = ap.parse_args()
    root = REPO / args.queue / "tasks"
    ids = args.tasks or sorted(p.name for p in root.iterdir() if (p / "task.toml").is_file())
    total_kernels, total_s = 0, 0.0
    with Runner() as runner:
        for tid in ids:
            try:
                task = load_task(root / tid)
            except Exception as e:  # noqa: BLE001
                print(f"{tid}: does not load ({type(e).__name__}: {e})")
                continue
            if task.backend != "triton":
                continue
            t0 = time.perf_counter()
            res = run_checks(task, runner, only=["bounds-proof"], seeds=[0])
            wall = time.perf_counter() - t0
            r = next(x for x in res.results if x.check == "bounds-proof")
            print(f"{tid}: {r.status} in {wall:.1f} s wall" + (f" (not judged: {r.not_judged[:200]})"
                                                              if getattr(r, "not_judged", "") else ""))
            for f in r.findings:
                ev = f.evidence or {}
                for k in ev.get("kernels", []):
                    total_kernels += 1
                    total_s += k["seconds"]
                    cx = ", ".join(f"{n}={v}" for n, v in (k.get("constexprs") or {}).items())
                    verdicts = " ".join(f"{n} {c}" for n, c in k["verdicts"].items() if c)
                    print(f"    {k['kernel']} [{cx}]: {k['accesses']} load/store(s), {verdicts}; "
                          f"{k['seconds']:.2f} s")
                if f.severity in ("fail", "warn"):
                    print(f"    {f.severity}: {f.summary[:300]}")
    if total_kernels:
        print(f"{total_kernels} compiled kernel(s), {total_s:.1f} s of proof in all, "
              f"{total_s / total_kernels:.2f} s per kernel on average")


if __name__ == "__main__":
    main()
