"""The runner's admission of jobs: a timing (exclusive) job never runs beside another job.

No fork server starts: ``Runner._run`` (the part that talks to the server) is replaced by a
recorder of which jobs run at once. The ``cancel`` hook, which :meth:`Runner.run` calls once
a job holds its place and before the job starts, is where these tests hold a job: the runner
used to let a normal job through the timing gate, call ``cancel`` and only then count the
job as running, so a timing job could be admitted in between and run beside it.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from tests.hostile import wait_until
from workstation.runner import Runner

TIMING = "timing"  # the principal the tests give their exclusive jobs


class Ran(str):
    """What the stand-in returns: the job's kind, as text that takes the attributes the runner
    sets on a :class:`~workstation.runner.results.JobResult` (``admission_wait_s``)."""


class Recorder:
    """A stand-in for ``Runner._run``: counts the jobs inside it and notes every moment an
    exclusive job and another job were inside together."""

    def __init__(self, hold_s: float = 0.0) -> None:
        self.lock = threading.Lock()
        self.normal = 0
        self.exclusive = 0
        self.most_normal = 0
        self.overlaps: list[str] = []
        self.order: list[str] = []
        self.done = {"normal": 0, "exclusive": 0}
        self.hold_s = hold_s

    def run(self, task_dir: Path, steps: list[Any], roles: dict[str, Any], watch: Any, principal: str,
            cache_key: str, abandon: Any = None) -> Ran:
        kind = "exclusive" if principal == TIMING else "normal"
        with self.lock:
            if kind == "exclusive":
                self.exclusive += 1
                if self.normal or self.exclusive > 1:
                    self.overlaps.append(f"an exclusive job started beside {self.normal} normal and "
                                         f"{self.exclusive - 1} other exclusive job(s)")
            else:
                self.normal += 1
                self.most_normal = max(self.most_normal, self.normal)
                if self.exclusive:
                    self.overlaps.append("a normal job started while an exclusive job ran")
            self.order.append(cache_key)
        if self.hold_s:
            time.sleep(self.hold_s)  # the job's work: others try to get in meanwhile
        with self.lock:
            if kind == "exclusive":
                self.exclusive -= 1
            else:
                self.normal -= 1
            self.done[kind] += 1
        return Ran(kind)


def _runner(rec: Recorder, slots: int) -> Runner:
    r = Runner(device="cpu", max_parallel=slots, sandbox="none")
    r._run = rec.run  # type: ignore[method-assign]
    return r


def test_an_exclusive_job_never_runs_beside_a_normal_one(tmp_path):
    """Many threads submit normal and exclusive jobs; each job pauses in its ``cancel`` hook
    (between its admission and its start) so that a wrong admission has time to show."""
    rec = Recorder(hold_s=0.001)
    runner = _runner(rec, slots=3)

    def pause() -> str:
        time.sleep(0.002)  # an injected pause between admission and start
        return ""

    def submit(n: int, exclusive: bool) -> None:
        for i in range(n):
            runner.run(tmp_path, [], timeout=60, exclusive=exclusive, principal=TIMING if exclusive else "candidate",
                       cache_key=str(i), cancel=pause)

    threads = [threading.Thread(target=submit, args=(15, False)) for _ in range(6)]
    threads += [threading.Thread(target=submit, args=(8, True)) for _ in range(2)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        runner.close()
    assert rec.overlaps == []
    assert rec.done == {"normal": 90, "exclusive": 16}
    assert rec.most_normal <= 3


def test_a_waiting_exclusive_job_goes_before_normal_jobs_that_come_after_it(tmp_path):
    """A normal job runs; an exclusive job arrives and waits for it; a second normal job
    arrives and waits behind the exclusive one. The order is: first normal, exclusive, second
    normal; nobody runs beside the exclusive job."""
    rec = Recorder()
    runner = _runner(rec, slots=4)
    first_in, release_first = threading.Event(), threading.Event()
    results: dict[str, object] = {}

    def hold_first() -> str:
        first_in.set()
        release_first.wait(30)
        return ""

    def job(name: str, exclusive: bool, cancel: Any = None) -> None:
        results[name] = runner.run(tmp_path, [], timeout=60, exclusive=exclusive, cancel=cancel,
                                   principal=TIMING if exclusive else "candidate", cache_key=name)

    first = threading.Thread(target=job, args=("first", False, hold_first))
    excl = threading.Thread(target=job, args=("exclusive", True))
    second = threading.Thread(target=job, args=("second", False))
    try:
        first.start()
        assert first_in.wait(30)
        excl.start()
        assert wait_until(lambda: runner.admission.waiting == (0, 1), seconds=30, every=0.005)
        second.start()
        assert wait_until(lambda: runner.admission.waiting == (1, 1), seconds=30, every=0.005)
        assert rec.order == []  # the first job is still in its hook: nothing has started
        release_first.set()
        for t in (first, excl, second):
            t.join(30)
    finally:
        release_first.set()
        runner.close()
    assert rec.order == ["first", "exclusive", "second"]
    assert rec.overlaps == []
    assert results == {"first": "normal", "exclusive": "exclusive", "second": "normal"}
