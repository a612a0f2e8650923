"""Where a check's time goes (``kws check --timings``, issue 42).

Per check the engine records, beside its wall seconds (the report's ``seconds``):

- ``cpu_s``: CPU seconds it caused: its own thread's in the parent (``time.thread_time``
  of the thread that ran ``Check.run``; worker threads a check starts itself are not
  counted) plus the CPU of every job it ran (the job's processes, imports included, at the
  runner's last reading: :attr:`~workstation.runner.results.JobResult.cpu_s`);
- ``jobs`` and ``job_wall_s``: how many jobs it ran and their wall seconds added up (jobs
  a check runs side by side overlap, so the sum may exceed its wall);
- ``queued_s``: wall seconds its jobs waited for a slot of the runner's admission (the other
  cores busy with other checks' jobs, or a timing job running alone);
- ``wait_s``: wall seconds not covered by that CPU: ``max(0, wall - cpu_s)``: waiting for a
  slot, for a result another check is computing (a memoised step in the run's ``Stash``), a
  sleep, a lock, the other core.

Work several checks share (a memoised step) is charged to the check that ran it; the others
wait for it. Figures are wall and CPU seconds of this run on this machine: they move with the
machine's load and never enter a verdict.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass
class CheckCost:
    """The jobs one check ran (thread-safe: a check may run jobs from several threads)."""

    jobs: int = 0
    job_cpu_s: float = 0.0
    job_wall_s: float = 0.0
    queued_s: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add_job(self, *, wall_s: float, cpu_s: float | None, queued_s: float) -> None:
        """Count one job: its wall seconds as the check saw them, its CPU seconds (``None``:
        no reading, counted as 0) and its seconds waiting for admission."""
        with self._lock:
            self.jobs += 1
            self.job_wall_s += max(0.0, wall_s)
            self.job_cpu_s += max(0.0, cpu_s or 0.0)
            self.queued_s += max(0.0, queued_s)

    def as_dict(self, *, wall_s: float, thread_cpu_s: float) -> dict[str, Any]:
        """The report's ``timings`` of a check whose wall was ``wall_s`` and whose own thread
        used ``thread_cpu_s`` CPU seconds in the parent."""
        cpu = max(0.0, thread_cpu_s) + self.job_cpu_s
        return {"cpu_s": round(cpu, 3), "parent_cpu_s": round(max(0.0, thread_cpu_s), 3),
                "jobs": self.jobs, "job_cpu_s": round(self.job_cpu_s, 3), "job_wall_s": round(self.job_wall_s, 3),
                "queued_s": round(self.queued_s, 3), "wait_s": round(max(0.0, wall_s - cpu), 3)}


def timings_table(checks: list[dict[str, Any]], total_s: float) -> list[str]:
    """The text table of ``kws check --timings``: one row per check that reported timings,
    the slowest first, and a total line (the run's wall ``total_s`` against the CPU of all
    checks: a ratio under the number of cores means the run was mostly waiting)."""
    rows = [c for c in checks if c.get("timings")]
    rows.sort(key=lambda c: -float(c.get("seconds") or 0.0))
    out = ["timings (seconds; cpu = the check's parent thread + its jobs; wait = wall - cpu; "
           "queued = its jobs waiting for a runner slot):",
           f"  {'check':<20} {'wall':>7} {'cpu':>7} {'wait':>7} {'queued':>7} {'jobs':>5}"]
    cpu_total = 0.0
    for c in rows:
        t = c["timings"]
        cpu_total += float(t["cpu_s"])
        out.append(f"  {c['check']:<20} {float(c['seconds']):7.2f} {float(t['cpu_s']):7.2f} {float(t['wait_s']):7.2f} "
                   f"{float(t['queued_s']):7.2f} {int(t['jobs']):5d}")
    out.append(f"  {'run':<20} {total_s:7.2f} {cpu_total:7.2f}  (CPU of all checks / wall: "
               f"{cpu_total / total_s if total_s > 0 else 0.0:.2f})")
    return out
