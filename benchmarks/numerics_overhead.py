"""Wall time the numerics checks add per sample task.

For each task: the engine runs ``correctness`` alone, then ``correctness`` plus the four
numerics checks (tolerance-loose, tolerance-tight, precision-regime, reference-suspect),
each in a fresh check context on one shared runner; the overhead is the difference (the
numerics checks reuse correctness's reference and candidate calls, as in a full battery).
Prints one line per task and the median.

    python benchmarks/numerics_overhead.py [--cold] [--repeat N] [task-id ...]

``--cold`` points KWS_CACHE_DIR at an empty folder first, so the AOT analysis cache and
Triton's cache start empty (the first review of a task); by default the user's cache is
used, as on a reviewer's second look. Target (issue 4): median overhead <= 5 s on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

NUMERICS = ["tolerance-loose", "tolerance-tight", "precision-regime", "reference-suspect"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tasks", nargs="*", help="task ids (default: every sample task)")
    ap.add_argument("--cold", action="store_true", help="start with empty kws/Triton caches")
    ap.add_argument("--repeat", type=int, default=1, help="measurements per task (median taken)")
    args = ap.parse_args()
    if args.cold:
        os.environ["KWS_CACHE_DIR"] = tempfile.mkdtemp(prefix="kws-bench-cache-")
    from workstation.engine.run import run_checks
    from workstation.runner import Runner
    from workstation.task.format import load_task

    root = REPO / "sample_queue" / "tasks"
    ids = args.tasks or sorted(p.name for p in root.iterdir() if (p / "task.toml").is_file())
    overheads = []
    with Runner() as runner:
        print(f"device: {runner.device.label}, cores: {os.cpu_count()}, cache: "
              f"{'cold' if args.cold else 'warm'}")
        for tid in ids:
            task = load_task(root / tid)
            base, full = [], []
            for _ in range(args.repeat):
                t0 = time.monotonic()
                run_checks(task, runner, only=["correctness"])
                base.append(time.monotonic() - t0)
                t0 = time.monotonic()
                res = run_checks(task, runner, only=["correctness", *NUMERICS])
                full.append(time.monotonic() - t0)
            b, f = statistics.median(base), statistics.median(full)
            per = {r.check: r.seconds for r in res.results}
            overheads.append(f - b)
            print(f"{tid:30} correctness {b:6.2f} s  with numerics {f:6.2f} s  overhead {f - b:6.2f} s  "
                  + " ".join(f"{k}={per.get(k, 0):.1f}" for k in NUMERICS))
    print(f"median overhead {statistics.median(overheads):.2f} s over {len(ids)} tasks "
          f"(max {max(overheads):.2f} s)")


if __name__ == "__main__":
    main()
